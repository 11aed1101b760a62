import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RoutePlanner } from '../../activities';
import { sandboxControls } from '../../testkit/sandbox';
import { apiClient, startStack, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * The sandbox's approval rates (docs/sandbox.md "Approval rates") seen through the orchestrator,
 * on the real stack (Temporal, PostgreSQL, the worker, the API and the stack's own two sandbox
 * PSPs; this file owns them, so the rates it sets reach no other test). Every payment is routed
 * to `sandbox`, then `sandbox-b`.
 */

let stack: TestStack;
let api: ReturnType<typeof apiClient>;
const route: RoutePlanner = async () => ({ providers: ['sandbox', 'sandbox-b'], reason: 'test route: sandbox then sandbox-b' });

beforeAll(async () => {
  stack = await startStack({ secondSandbox: {}, route });
  api = apiClient(stack.apiUrl, (await stack.createTenant('approval-rates')).apiKey);
});
afterAll(async () => stack?.stop());

const body = (payment_method: string, currency = 'EUR') => ({ order_id: uniqueKey('ord'), amount_minor: 1800, currency, payment_method });

describe('a payment meets the issuer the sandbox was told of', () => {
  it('a Visa in EUR at rate 0 is declined do_not_honor at the first PSP and not moved on; a Mastercard at rate 1 succeeds', async () => {
    const set = await sandboxControls(stack.sandboxUrl).approvalRates([
      { network: 'visa', currency: 'EUR', rate: 0 },
      { network: 'mastercard', currency: '*', rate: 1 },
    ]);
    expect(set.status).toBe(200);
    // The second sandbox was told nothing: its issuers approve as before.
    expect(await (await sandboxControls(stack.secondSandbox!.url).approvalRates()).json()).toEqual({ rates: [] });

    const declined = await api.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
    expect(declined.status, declined.text).toBe(402);
    const payment = (await api.get(`/v1/payments/${declined.json.error.payment.id}`)).json;
    expect(payment).toMatchObject({ status: 'declined', provider: 'sandbox', attempts: [{ attempt: 1, provider: 'sandbox', outcome: 'declined', error_code: 'do_not_honor' }] });
    // A card decline never moves to another PSP: sandbox-b, which would approve, was never asked.
    expect(await stack.secondSandbox!.provider.listChargesByReference(payment.id)).toEqual([]);

    const approved = await api.post('/v1/payments', body('pm_card_mastercard'), uniqueKey('pay'));
    expect(approved.status, approved.text).toBe(201);
    expect(approved.json).toMatchObject({ status: 'succeeded', provider: 'sandbox' });

    // No rule for a Visa in USD: approved, as without rates.
    const usd = await api.post('/v1/payments', body('pm_card_visa', 'USD'), uniqueKey('pay'));
    expect(usd.status, usd.text).toBe(201);
  });

  it('cleared, the plain cards are approved again', async () => {
    expect((await sandboxControls(stack.sandboxUrl).approvalRates([])).status).toBe(200);
    const paid = await api.post('/v1/payments', body('pm_card_visa'), uniqueKey('pay'));
    expect(paid.status, paid.text).toBe(201);
    expect(paid.json).toMatchObject({ status: 'succeeded', provider: 'sandbox' });
  });
});
