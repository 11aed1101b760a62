import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { apiClient, eventually, isolatedApi, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { effectsOf, expectLedgerConsistent } from '../helpers/effects';
import { testDataConverter } from '../../testkit/payload-keys';
import { sandboxControls } from '../../testkit/sandbox';

/**
 * PAYMENT_ANSWER=update: a new payment is started with Update-With-Start, and the firstAnswer
 * update's result is the answer (no completion NOTIFY awaited). The contract is the
 * same as with the default path; these tests hold it on the real dev server and PostgreSQL.
 */

let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ api: { PAYMENT_ANSWER: 'update' } });
  tenant = await stack.createTenant();
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => {
  await expectLedgerConsistent(stack.sql, tenant.id);
  await stack?.stop();
});

const paymentBody = (overrides: Record<string, unknown> = {}) => ({
  order_id: uniqueKey('ord'),
  amount_minor: 2500,
  currency: 'EUR',
  payment_method: 'pm_card_visa',
  ...overrides,
});

async function historyOf(key: string) {
  const [record] = await stack.sql<{ workflow_id: string }[]>`
    select workflow_id from idempotency_records where tenant_id = ${tenant.id} and idempotency_key = ${key}`;
  const history = await stack.temporal.workflow.getHandle(record!.workflow_id).fetchHistory();
  return history.events ?? [];
}

describe('Update-With-Start answers a new payment', () => {
  it('answers 201 from the update, in the run\'s one workflow task, charging once; a retry replays the same bytes', async () => {
    // The PSP's webhook comes after the run has completed (below: one that races it).
    await sandboxControls(stack.sandboxUrl).webhookFaults({ delay_ms: 1000 });
    const key = uniqueKey();
    const body = paymentBody();
    const first = await api.post('/v1/payments', body, key).finally(() => sandboxControls(stack.sandboxUrl).webhookFaults({ delay_ms: 0 }));
    expect(first.status).toBe(201);
    expect(first.json.status).toBe('succeeded');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await api.post('/v1/payments', body, key);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    const events = await historyOf(key);
    expect(events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toHaveLength(1);
    expect(events.filter((e) => e.workflowExecutionUpdateCompletedEventAttributes)).toHaveLength(1);
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(1);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, first.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  });

  it('answers the one outcome when a signal arrives while the first workflow task completes the run', async () => {
    // A PSP webhook's signal can reach the run while its first workflow task completes it: the
    // server then fails that task (UnhandledCommand). The update is then carried to the next
    // task, or failed with the task ("unexpected workflow task failure"; seen on this machine),
    // and the API answers by the record's NOTIFY. Here the charge takes 1.5 s
    // (pm_card_slow) and a signal is sent meanwhile (where the task stands then varies).
    const key = uniqueKey();
    const answer = api.post('/v1/payments', paymentBody({ payment_method: 'pm_card_slow' }), key);
    const workflowId = await eventually(async () => {
      const [record] = await stack.sql<{ workflow_id: string }[]>`select workflow_id from idempotency_records where tenant_id = ${tenant.id} and idempotency_key = ${key}`;
      return record && (await stack.temporal.workflow.getHandle(record.workflow_id).describe().then(() => record.workflow_id, () => null));
    }, 5000, 20, 'the run started');
    await stack.temporal.workflow.getHandle(workflowId).signal('probe');
    const response = await answer;
    expect(response.status).toBe(201);
    expect(response.json.status).toBe('succeeded');
    // The signal reached the open run (whether in the task that charged or in a later one).
    expect((await historyOf(key)).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'probe')).toHaveLength(1);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, response.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  }, 60_000);

  it('gives concurrent deliveries of one key one run, one charge and one answer', async () => {
    const key = uniqueKey();
    const body = paymentBody();
    const answers = await Promise.all(Array.from({ length: 5 }, () => api.post('/v1/payments', body, key)));
    const final = answers.filter((a) => a.status === 201);
    expect(final.length).toBeGreaterThan(0);
    expect(answers.filter((a) => a.status !== 201 && a.status !== 202)).toEqual([]);
    expect(new Set(final.map((a) => a.text)).size).toBe(1);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, final[0]!.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  });

  it('answers a decline with its stored 402 and a 3-D Secure challenge with its stored 202 requires_action', async () => {
    const declined = await api.post('/v1/payments', paymentBody({ payment_method: 'pm_card_declined' }), uniqueKey());
    expect(declined.status).toBe(402);
    const challenged = await api.post('/v1/payments', paymentBody({ payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example/return' }), uniqueKey());
    // A wait's first answer is 202 (stored, replayed byte for byte), as on the default path.
    expect(challenged.status).toBe(202);
    expect(challenged.json.status).toBe('requires_action');
  });

  it('answers 202 when the charge outlasts the wait, keeps the claim, and a retry gets the one outcome', async () => {
    const impatient = await isolatedApi(stack, stack.temporal, { PAYMENT_ANSWER: 'update', IDEMPOTENCY_WAIT_MS: 200, TEMPORAL_RPC_TIMEOUT_MS: 200 });
    try {
      const client = apiClient(impatient.url, tenant.apiKey);
      const key = uniqueKey();
      const body = paymentBody({ payment_method: 'pm_card_slow' });
      const first = await client.post('/v1/payments', body, key);
      expect(first.status).toBe(202);
      const id = first.json.id as string;
      let final = first;
      for (let i = 0; i < 100 && final.status === 202; i++) {
        await new Promise((r) => setTimeout(r, 200));
        final = await client.post('/v1/payments', body, key);
      }
      expect(final.status).toBe(201);
      expect(final.json.id).toBe(id);
      expect(await effectsOf(stack.sql, stack.sandboxUrl, id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
    } finally {
      await impatient.close();
    }
  }, 60_000);

  it('fails closed with 503 when Temporal is unreachable, and the retry charges once', async () => {
    const unreachable = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }), dataConverter: testDataConverter });
    const isolated = await isolatedApi(stack, unreachable, { PAYMENT_ANSWER: 'update', TEMPORAL_RPC_TIMEOUT_MS: 1000, IDEMPOTENCY_WAIT_MS: 1000 });
    const key = uniqueKey();
    const body = paymentBody();
    try {
      expect((await apiClient(isolated.url, tenant.apiKey).post('/v1/payments', body, key)).status).toBe(503);
    } finally {
      await isolated.close();
    }
    const retry = await api.post('/v1/payments', body, key);
    expect(retry.status).toBe(201);
    expect(await effectsOf(stack.sql, stack.sandboxUrl, retry.json.id)).toEqual({ charges: 1, ledgerTransactions: 1, events: { 'payment.succeeded': 1 } });
  }, 60_000);
});
