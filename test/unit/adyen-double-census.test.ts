import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdyenCensusPayment } from '../../doubles/adyen/census';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import { eventually } from '../helpers/eventually';

/**
 * The Adyen double's census (`GET /_sandbox/payments`, doubles/adyen/census.ts): what it charged,
 * captured, cancelled and refunded, each modification with the key and reference it came with and
 * what its notification said, and every notification with what became of it; read-only, and a
 * replay under the same key adds nothing. The chaos run's checker reads it (chaos/psp-doubles.ts).
 */
const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
let double: AdyenDouble;
let provider: AdyenProvider;

// No webhook URL: its notifications are made and kept (`pending`), not sent.
beforeAll(async () => {
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, confirmAfterMs: 10 });
  provider = new AdyenProvider({ baseUrl: double.url, apiKey, merchantAccount, hmacKey, timeoutMs: 2000 });
});
afterAll(() => double?.close());

const census = async (query = ''): Promise<{ status: number; data: AdyenCensusPayment[] }> => {
  const response = await fetch(`${double.url}/_sandbox/payments${query}`);
  return { status: response.status, data: ((await response.json()) as { data: AdyenCensusPayment[] }).data };
};
const charge = (reference: string, paymentMethod: string, capture: boolean) =>
  provider.createCharge({ idempotencyKey: `${reference}:charge`, amountMinor: 2000, currency: 'eur', paymentMethod, capture, reference });

describe("the Adyen double's census", () => {
  it('lists each payment with what it charged, captured, cancelled and refunded, by key and reference, each decided by its notification', async () => {
    const paid = await charge('pay_census_1', 'pm_card_visa', true);
    await provider.createRefund({ idempotencyKey: 'rf_census_1:refund', chargeId: paid.id, amountMinor: 500, currency: 'EUR', reference: 'rf_census_1' });
    const manual = await charge('pay_census_2', 'pm_card_visa', false);
    await provider.captureCharge({ idempotencyKey: 'pay_census_2:capture', chargeId: manual.id, amountMinor: 1500, currency: 'EUR' });
    const voided = await charge('pay_census_3', 'pm_card_visa', false);
    await provider.voidCharge({ idempotencyKey: 'pay_census_3:void', chargeId: voided.id });
    const refused = await charge('pay_census_4', 'pm_card_declined', true);
    expect(refused.status).toBe('declined');
    // A replay under the same key answers the first answer and adds nothing to the census.
    await charge('pay_census_1', 'pm_card_visa', true);

    const listed = await eventually(async () => {
      const { data } = await census();
      const settled = data.length === 4 && data.every((p) => p.modifications.every((m) => m.status !== 'received'));
      return settled ? data : undefined;
    }, 10_000);
    const byReference = Object.fromEntries(listed.map((p) => [p.merchantReference, p]));
    expect(byReference['pay_census_1']).toMatchObject({
      pspReference: paid.id,
      idempotencyKey: 'pay_census_1:charge',
      amount: { value: 2000, currency: 'EUR' },
      resultCode: 'Authorised',
      state: 'captured',
      capturedMinor: 2000,
      refundedMinor: 500,
      modifications: [{ type: 'refund', reference: 'rf_census_1', idempotencyKey: 'rf_census_1:refund', amount: { value: 500, currency: 'EUR' }, status: 'succeeded' }],
    });
    expect(byReference['pay_census_1']!.notifications.map((n) => [n.eventCode, n.success, n.state])).toEqual([
      ['AUTHORISATION', true, 'pending'],
      ['REFUND', true, 'pending'],
    ]);
    expect(byReference['pay_census_1']!.notifications[1]!.id).toBe(`${byReference['pay_census_1']!.modifications[0]!.pspReference}:REFUND:true`);
    expect(byReference['pay_census_2']).toMatchObject({ state: 'captured', capturedMinor: 1500, refundedMinor: 0, modifications: [{ type: 'capture', reference: 'pay_census_2:capture', idempotencyKey: 'pay_census_2:capture', status: 'succeeded' }] });
    expect(byReference['pay_census_3']).toMatchObject({ state: 'cancelled', capturedMinor: 0, modifications: [{ type: 'cancel', idempotencyKey: 'pay_census_3:void', amount: null, status: 'succeeded' }] });
    expect(byReference['pay_census_4']).toMatchObject({ resultCode: 'Refused', state: 'refused', capturedMinor: 0, modifications: [] });
  });

  it('?reference= lists only that merchant reference; the census refuses anything but GET and changes nothing', async () => {
    const one = await census('?reference=pay_census_2');
    expect(one.status).toBe(200);
    expect(one.data.map((p) => p.merchantReference)).toEqual(['pay_census_2']);
    expect((await census('?reference=nobody')).data).toEqual([]);
    const before = JSON.stringify((await census()).data);
    const posted = await fetch(`${double.url}/_sandbox/payments`, { method: 'POST', body: '{}' });
    expect(posted.status).toBe(405);
    expect(JSON.stringify((await census()).data)).toBe(before);
  });
});
