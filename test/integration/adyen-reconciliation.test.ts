import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import type { RoutePlanner } from '../../activities';
import { captureLines, postTransaction } from '../../db/ledger';
import { newId } from '../../domain/ids';
import { DISPUTES_PATH } from '../../doubles/adyen/disputes';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import { parseProvidersList } from '../../provider/registry';
import { businessEventKey } from '../../shared/keys';
import { scheduleId } from '../../shared/jobs';
import type { ProviderBalanceTransaction } from '../../provider/types';
import type { ReconciliationResult } from '../../shared/reconciliation';
import { deleteSchedules, ensureSchedules, scheduleSettings } from '../../worker/schedules';
import { apiClient, decidedPayment, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * docs/CONTRACT.md "Reconciliation" at the adyen kind: the reconciliation workflow, run for real
 * on the stack's worker (real Temporal and PostgreSQL), reads the Adyen double's Settlement
 * details reports (doubles/adyen/settlement.ts) through the kind's client and compares them
 * with our payments, refunds and ledger: payments, a manual capture and a refund at adyen-test
 * agree; lines made at the PSP and a capture it never made are found; the hourly Schedule
 * covers the adyen connection; a report the client may not download, or cannot read, fails the
 * run visibly and records nothing. Each test reconciles a window of its own.
 */
const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
const reportUser = { username: 'report@Company.OrchestratorTest', password: 'report-password', apiKey: null };
let double: AdyenDouble;
/** A second double whose reports are broken by the test that needs it (a broken batch stays broken). */
let broken: AdyenDouble;
let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;
const route: RoutePlanner = async () => ({ providers: ['adyen-test'], reason: 'test route: adyen-test' });
const client = (url: string, password = reportUser.password) =>
  new AdyenProvider({ baseUrl: url, disputesUrl: `${url}${DISPUTES_PATH}`, apiKey, merchantAccount, hmacKey, timeoutMs: 1500, report: { url, username: reportUser.username, password, apiKey: null } });

beforeAll(async () => {
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, reportUser });
  broken = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, reportUser });
  stack = await startStack({
    route,
    extraProviders: { 'adyen-test': client(double.url), 'adyen-wrong-password': client(double.url, 'not-the-password'), 'adyen-broken': client(broken.url) },
    api: { IDEMPOTENCY_WAIT_MS: 3000 },
  });
  tenant = await stack.createTenant('adyen-reconciliation');
  api = apiClient(stack.apiUrl, tenant.apiKey);
  double.setWebhookUrl(`${stack.apiUrl}/provider_webhooks/adyen-test`);
}, 300_000);
afterAll(async () => {
  if (stack) await deleteSchedules(stack.temporal, stack.taskQueue);
  await stack?.stop();
  await double?.close();
  await broken?.close();
});

const body = (extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa', ...extra });

/** A payment at adyen-test, decided: succeeded (or requires_capture for a manual one). */
async function pay(extra: Record<string, unknown> = {}): Promise<{ id: string; provider_charge_id: string; status: string }> {
  const created = await api.post('/v1/payments', body(extra), uniqueKey('pay'));
  expect([201, 202], created.text).toContain(created.status);
  const payment = await decidedPayment(api, created.json.id);
  expect(payment.provider).toBe('adyen-test');
  return payment;
}

/** Waits for a payment or refund to leave the statuses its PSP's notification ends. */
const settledTo = (path: string, waiting: string) =>
  eventually(async () => {
    const { json } = await api.get(path);
    return json.status === waiting ? undefined : json;
  }, 20_000);

/** Runs reconciliationWorkflow over [from, to) for the named connections, as a Schedule would start it. */
function reconcile(providers: string[], from: Date, to = new Date(Date.now() + 1), workflowId = uniqueKey('reconciliation')): Promise<ReconciliationResult> {
  return stack.temporal.workflow.execute('reconciliationWorkflow', {
    taskQueue: stack.taskQueue,
    workflowId,
    args: [{ providers, window: { kind: 'explicit', from: from.toISOString(), to: to.toISOString() } }],
  });
}

/** Every line the double's reports hold for [from, to), page by page (a page is one batch). */
async function reportLines(from: Date, to: Date): Promise<ProviderBalanceTransaction[]> {
  const lines: ProviderBalanceTransaction[] = [];
  let startingAfter: string | undefined;
  for (;;) {
    const page = await client(double.url).listBalanceTransactions({ from, to, limit: 100, ...(startingAfter ? { startingAfter } : {}) });
    lines.push(...page.data);
    if (!page.hasMore || page.data.length === 0) return lines;
    startingAfter = page.data[page.data.length - 1]!.id;
  }
}

/** The payment's dispute once its CHARGEBACK is recorded. */
const chargebackOf = (paymentId: string) =>
  eventually(async () => {
    const [row] = await stack.sql<{ id: string; provider_dispute_id: string; stage: string }[]>`
      SELECT id, provider_dispute_id, stage FROM disputes WHERE payment_id = ${paymentId}`;
    return row?.stage === 'chargeback' ? row : undefined;
  }, 20_000);

async function admin(path: string) {
  const response = await fetch(`${stack.apiUrl}${path}`, { headers: { authorization: `Bearer ${stack.adminToken}` } });
  return { status: response.status, json: (await response.json()) as any };
}

/** A line made at the PSP itself (its dashboard, a direct API call): the double's control. */
async function atThePsp(line: Record<string, unknown>) {
  const response = await fetch(`${double.url}/_sandbox/settlement/lines`, { method: 'POST', body: JSON.stringify(line) });
  expect(response.status, await response.clone().text()).toBe(201);
}

// First: a window clean of the lines the next tests make at the PSP itself (the report is read with a margin).
describe('a dispute’s money at adyen-test, from the same reports', () => {
  it('a chargeback lost (accepted through our API): its Chargeback line matches our withdrawal, and the window is clean', async () => {
    const from = new Date(Math.floor(Date.now() / 1000) * 1000);
    const paid = await pay({ payment_method: 'pm_card_createDispute', amount_minor: 1800 });
    const dispute = await chargebackOf(paid.id);
    const accepted = await api.post(`/v1/disputes/${dispute.id}/accept`, undefined, uniqueKey('accept'));
    expect(accepted.status, accepted.text).toBe(200);

    const result = await reconcile(['adyen-test'], from);
    const run = await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`);
    expect(run.json, JSON.stringify(run.json.discrepancies)).toMatchObject({ provider: 'adyen-test', status: 'clean', discrepancies: [] });
    const read = await reportLines(new Date(from.getTime() - 60_000), new Date(Date.now() + 60_000));
    expect(read.filter((t) => t.chargeId === paid.provider_charge_id).map((t) => [t.type, t.amountMinor])).toEqual([
      ['charge', 1800],
      ['dispute', -1800],
    ]);
    expect(read.find((t) => t.type === 'dispute' && t.chargeId === paid.provider_charge_id)?.source).toBe(dispute.provider_dispute_id);
  });

  it('a defence lost (ChargebackReversed, then the issuer\'s SecondChargeback): each line matches our withdrawal, reinstatement and second withdrawal, and the window is clean', async () => {
    const from = new Date(Math.floor(Date.now() / 1000) * 1000);
    const paid = await pay({ payment_method: 'pm_card_createDispute', amount_minor: 1200 });
    const dispute = await chargebackOf(paid.id);
    const defended = await api.post(`/v1/disputes/${dispute.id}/evidence`, { evidence: { uncategorized_text: 'losing_evidence' }, submit: true }, uniqueKey('evidence'));
    expect(defended.status, defended.text).toBe(200);
    await eventually(async () => (await stack.sql`SELECT 1 FROM disputes WHERE id = ${dispute.id} AND stage = 'pre_arbitration' AND status = 'lost'`).length === 1, 20_000);

    const result = await reconcile(['adyen-test'], from);
    const run = await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`);
    expect(run.json, JSON.stringify(run.json.discrepancies)).toMatchObject({ provider: 'adyen-test', status: 'clean', discrepancies: [] });
    const read = await reportLines(new Date(from.getTime() - 60_000), new Date(Date.now() + 60_000));
    expect(read.filter((t) => t.chargeId === paid.provider_charge_id).map((t) => [t.type, t.amountMinor])).toEqual([
      ['charge', 1200],
      ['dispute', -1200],
      ['dispute_reversal', 1200],
      ['dispute_second', -1200],
    ]);
    const keys = await stack.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${dispute.id} ORDER BY created_at`;
    expect(keys.map((k) => k.event_key)).toEqual((['withdrawal', 'reinstatement', 'second_withdrawal', 'loss'] as const).map((fact) => businessEventKey.disputeMoney(dispute.id, fact)));
  });
});

describe('reconciliation at adyen-test, from its settlement details reports', () => {
  it('payments, a manual capture and a partial refund, all agreeing: clean; the report’s lines carry Adyen’s commission (net below gross)', async () => {
    const from = new Date();
    const paid = await pay();
    expect(paid.status).toBe('succeeded');
    const manual = await pay({ capture_method: 'manual', amount_minor: 1500 });
    expect(manual.status).toBe('requires_capture');
    expect([200, 202]).toContain((await api.post(`/v1/payments/${manual.id}/capture`, {}, uniqueKey('capture'))).status);
    expect(await settledTo(`/v1/payments/${manual.id}`, 'requires_capture')).toMatchObject({ status: 'succeeded', amount_captured_minor: 1500 });
    const refund = await api.post(`/v1/payments/${paid.id}/refunds`, { amount_minor: 500 }, uniqueKey('refund'));
    expect([201, 202], refund.text).toContain(refund.status);
    expect(await settledTo(`/v1/refunds/${refund.json.id}`, 'pending')).toMatchObject({ status: 'succeeded' });
    const usd = await pay({ currency: 'USD', amount_minor: 999 });

    const result = await reconcile(['adyen-test'], from);
    expect(result.runs).toEqual([expect.objectContaining({ provider: 'adyen-test', status: 'clean', discrepancyCount: 0 })]);
    const run = await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`);
    expect(run.json).toMatchObject({ provider: 'adyen-test', status: 'clean', discrepancies: [] });
    expect(run.json.provider_transactions).toBeGreaterThanOrEqual(4);

    // What the run read: each movement once, in minor units, the fee Adyen kept on each capture.
    const read = await reportLines(new Date(from.getTime() - 60_000), new Date(Date.now() + 60_000));
    const ours = read.filter((t) => [paid.provider_charge_id, manual.provider_charge_id, usd.provider_charge_id].includes(t.chargeId));
    expect(ours.map((t) => [t.type, t.reference, t.amountMinor, t.currency, t.feeMinor])).toEqual([
      ['charge', paid.id, 2500, 'EUR', 10 + 30],
      ['charge', manual.id, 1500, 'EUR', 10 + 18],
      ['refund', refund.json.id, -500, 'EUR', 0],
      ['charge', usd.id, 999, 'USD', 10 + 12],
    ]);
  });

  it('a charge and a refund made at the PSP, and a capture we booked that the PSP never made, are each found, with both sides’ figures', async () => {
    // From a whole second: the report's times are to the second, so a line made in this second reads as its start.
    const from = new Date(Math.floor(Date.now() / 1000) * 1000);
    const paid = await pay({ amount_minor: 2000 });
    const stranger = newId('pay');
    await atThePsp({ type: 'Settled', psp_reference: 'DIRECT0000000001', merchant_reference: stranger, currency: 'EUR', gross_minor: 4200 });
    await atThePsp({ type: 'Refunded', psp_reference: paid.provider_charge_id, merchant_reference: paid.id, modification_reference: 'DASHBOARDREFUND1', currency: 'EUR', gross_minor: 300 });
    const invented = newId('pay');
    await stack.sql`
      INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, amount_captured_minor, provider_charge_id, provider, workflow_id)
      VALUES (${invented}, ${tenant.id}, ${uniqueKey('ord')}, 700, 'EUR', 'succeeded', 'automatic', 'pm_card_visa', 700, 'NEVERMADE0000001', 'adyen-test', 'none')`;
    await postTransaction(stack.sql, { tenantId: tenant.id, eventKey: businessEventKey.paymentCapture(invented), paymentId: invented, description: 'capture (made up by the test)', lines: captureLines('EUR', 700) });

    const result = await reconcile(['adyen-test'], from);
    expect(result.runs).toEqual([expect.objectContaining({ provider: 'adyen-test', status: 'discrepancies', discrepancyCount: 3 })]);
    const { discrepancies } = (await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`)).json;
    expect(discrepancies).toEqual(
      expect.arrayContaining([
        // No search by reference at Adyen: the report is the only word on a capture it lacks.
        expect.objectContaining({ kind: 'missing_at_provider', payment_id: invented, provider: null, ours: expect.objectContaining({ amount_captured_minor: 700, provider_charge_id: 'NEVERMADE0000001' }) }),
        expect.objectContaining({ kind: 'unknown_at_provider_side', payment_id: null, provider_reference: 'DIRECT0000000001', provider: expect.objectContaining({ type: 'charge', amount_minor: 4200, reference: stranger }) }),
        expect.objectContaining({ kind: 'unknown_at_provider_side', payment_id: paid.id, provider_reference: 'DASHBOARDREFUND1', provider: expect.objectContaining({ type: 'refund', amount_minor: -300, charge_id: paid.provider_charge_id }) }),
      ]),
    );
    expect(discrepancies).toHaveLength(3);
  });
});

describe('the Schedules cover the adyen connection', () => {
  it('a worker configured with an adyen connection has it in the hourly and daily reconciliation; a trigger reconciles it', async () => {
    const env = { ADYEN_API_KEY: apiKey, ADYEN_MERCHANT_ACCOUNT: merchantAccount, ADYEN_REPORT_URL: double.url, ADYEN_REPORT_USERNAME: reportUser.username, ADYEN_REPORT_PASSWORD: reportUser.password };
    const PROVIDERS = parseProvidersList(`sandbox=sandbox:${stack.sandboxUrl},adyen-test=adyen:${double.url}`, env);
    expect(PROVIDERS[1]!.settings).toMatchObject({ reportUrl: double.url, reportUsername: reportUser.username, reportPassword: reportUser.password, reportApiKey: null });
    const settings = scheduleSettings({ TASK_QUEUE: stack.taskQueue, PROVIDERS, RECONCILIATION_LOOKBACK_HOURS: 3, RETENTION_JOB_INTERVAL_SECONDS: 86_400 });
    expect(settings.providers).toEqual(['sandbox', 'adyen-test']);
    await ensureSchedules(stack.temporal, settings);
    for (const job of ['reconciliation-hourly', 'reconciliation-daily'] as const) {
      const { action } = await stack.temporal.schedule.getHandle(scheduleId(stack.taskQueue, job)).describe();
      expect(action.type === 'startWorkflow' && action.args?.[0]).toMatchObject({ providers: ['sandbox', 'adyen-test'] });
    }
    const hourly = scheduleId(stack.taskQueue, 'reconciliation-hourly');
    await stack.temporal.schedule.getHandle(hourly).trigger();
    const run = await eventually(async () => {
      const [found] = await stack.sql<{ status: string; error: string | null }[]>`
        SELECT status, error FROM reconciliation_runs WHERE provider = 'adyen-test' AND workflow_id LIKE ${`${hourly}%`} AND status <> 'running'`;
      return found;
    }, 60_000);
    // The last hours hold the other tests' differences: what matters is that the report was read.
    expect(run.error).toBeNull();
    expect(['clean', 'discrepancies']).toContain(run.status);
  });
});

describe('a report that cannot be had or read fails the run visibly, and records nothing', () => {
  async function failedRun(provider: string, from: Date) {
    const workflowId = uniqueKey('reconciliation');
    const failure = await reconcile(['adyen-test', provider], from, undefined, workflowId).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).cause?.message).toMatch(new RegExp(`reconciliation failed for ${provider}`));
    // Refused for good at its first attempt: no activity of the run was attempted twice.
    const { events } = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
    const attempts = events!.flatMap((e) => (e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.attempt ?? 1] : []));
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...attempts)).toBe(1);
    const runs = await stack.sql<{ provider: string; status: string; error: string | null; discrepancy_count: number; id: string }[]>`
      SELECT provider, status, error, discrepancy_count, id FROM reconciliation_runs WHERE window_from = ${from} ORDER BY provider`;
    // The other connection of the same workflow is reconciled all the same.
    expect(runs.find((r) => r.provider === 'adyen-test')).toMatchObject({ status: 'clean' });
    const failed = runs.find((r) => r.provider === provider)!;
    expect(failed).toMatchObject({ status: 'failed', discrepancy_count: 0 });
    const [recorded] = await stack.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM reconciliation_discrepancies WHERE provider = ${provider}`;
    expect(recorded!.count).toBe(0);
    return failed;
  }

  it('wrong report credentials: the double answers 401, the run fails at once (not retried) saying so', async () => {
    const from = new Date();
    await pay();
    const failed = await failedRun('adyen-wrong-password', from);
    expect(failed.error).toMatch(/401/);
  });

  it('a malformed batch: the run fails naming the record, none of the batch’s good lines is used', async () => {
    const from = new Date();
    const response = await fetch(`${broken.url}/_sandbox/settlement/lines`, {
      method: 'POST',
      body: JSON.stringify({ type: 'Settled', psp_reference: 'GOODLINE00000001', merchant_reference: newId('pay'), currency: 'EUR', gross_minor: 1000 }),
    });
    expect(response.status).toBe(201);
    expect((await fetch(`${broken.url}/_sandbox/settlement/lines`, { method: 'POST', body: JSON.stringify({ raw: `Co,${merchantAccount},"an unclosed quote` }) })).status).toBe(201);
    const failed = await failedRun('adyen-broken', from);
    expect(failed.error).toMatch(/settlement details report cannot be read: batch 1, line \d+: a quoted field is never closed/);
  });
});
