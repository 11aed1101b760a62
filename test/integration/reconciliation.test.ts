import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postTransaction, captureLines, refundLines } from '../../db/ledger';
import { newId } from '../../domain/ids';
import { businessEventKey } from '../../shared/keys';
import type { DiscrepancyKind, ReconciliationResult } from '../../shared/reconciliation';
import { apiClient, captureLogs, eventually, startStack, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * docs/CONTRACT.md "Reconciliation": the reconciliation workflow, run for real on the
 * stack's worker against the real sandbox PSP and PostgreSQL, finds each kind of difference
 * (made at the sandbox with POST /_sandbox/discrepancies, or by editing our own rows), finds
 * none in a clean window, and finds the same ones, not copies, when a window is run again.
 * Each test reconciles a window of its own: [its start, its end).
 */

let stack: TestStack;
let tenant: { id: string; apiKey: string };
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('reconciliation');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => stack?.stop());

async function pay(options: { amount?: number; currency?: string; method?: string } = {}): Promise<{ id: string; provider_charge_id: string }> {
  const response = await api.post(
    '/v1/payments',
    { order_id: uniqueKey('ord'), amount_minor: options.amount ?? 1000, currency: options.currency ?? 'EUR', payment_method: options.method ?? 'pm_card_visa' },
    uniqueKey(),
  );
  // 201 once it succeeded; under a loaded machine the bounded wait may answer 202 first.
  expect([201, 202], response.text).toContain(response.status);
  const row = await eventually(async () => {
    const [found] = await stack.sql<{ status: string; provider_charge_id: string }[]>`SELECT status, provider_charge_id FROM payments WHERE id = ${response.json.id}`;
    return found?.status === 'succeeded' ? found : null;
  }, 60_000);
  return { id: response.json.id, provider_charge_id: row.provider_charge_id };
}

/** Makes a difference at the PSP, as its dashboard or a direct API call would (psp's sandbox). */
async function inject(body: Record<string, unknown>): Promise<unknown> {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/discrepancies`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  expect(response.ok, text).toBe(true);
  return JSON.parse(text);
}

/** Runs reconciliationWorkflow over [from, now) on the stack's worker, as a Schedule would start it. */
async function reconcile(from: Date, to = new Date(Date.now() + 1)): Promise<ReconciliationResult> {
  return stack.temporal.workflow.execute('reconciliationWorkflow', {
    taskQueue: stack.taskQueue,
    workflowId: uniqueKey('reconciliation'),
    args: [{ providers: ['sandbox'], window: { kind: 'explicit', from: from.toISOString(), to: to.toISOString() } }],
  });
}

async function admin(path: string) {
  const response = await fetch(`${stack.apiUrl}${path}`, { headers: { authorization: `Bearer ${stack.adminToken}` } });
  return { status: response.status, json: (await response.json()) as any };
}

const newestRunGap = () => new Promise((r) => setTimeout(r, 5));

describe('a clean window', () => {
  it('payments, a partial refund and a manual capture, all agreeing: the run is recorded as clean, with no discrepancies', async () => {
    const from = new Date();
    const paid = await pay();
    expect((await api.post(`/v1/payments/${paid.id}/refunds`, { amount_minor: 300 }, uniqueKey())).status).toBe(201);
    const manual = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'manual' }, uniqueKey());
    expect(manual.status).toBe(201);
    expect((await api.post(`/v1/payments/${manual.json.id}/capture`, {}, uniqueKey())).status).toBe(200);
    await pay({ currency: 'USD', amount: 2500 });

    const result = await reconcile(from);
    expect(result.runs).toEqual([expect.objectContaining({ provider: 'sandbox', status: 'clean', discrepancyCount: 0, newDiscrepancyCount: 0 })]);
    const run = await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`);
    expect(run.status).toBe(200);
    expect(run.json).toMatchObject({ object: 'reconciliation_run', provider: 'sandbox', status: 'clean', discrepancy_count: 0, discrepancies: [], window: result.window });
    expect(run.json.provider_transactions).toBeGreaterThanOrEqual(4);
    expect(run.json.finished_at).not.toBeNull();
  });
});

describe('each kind of difference is found, with both sides’ figures', () => {
  /** Reconciles the test's window; returns its discrepancies as the API shows them, and the alerts logged. */
  async function findings(from: Date) {
    const logs = captureLogs();
    const result = await reconcile(from);
    logs.stop();
    const run = await admin(`/admin/reconciliation/runs/${result.runs[0]!.runId}`);
    expect(run.status).toBe(200);
    expect(run.json.status).toBe('discrepancies');
    const alerts = logs.lines().filter((l) => l.alert === 'reconciliation_discrepancy');
    return { run: run.json, discrepancies: run.json.discrepancies as any[], alerts };
  }
  const only = (discrepancies: any[], kind: DiscrepancyKind) => discrepancies.filter((d) => d.kind === kind);

  it('missing_at_provider: a capture we booked that the PSP never made', async () => {
    const from = new Date();
    const id = newId('pay');
    await stack.sql`
      INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, amount_captured_minor, provider_charge_id, workflow_id)
      VALUES (${id}, ${tenant.id}, ${uniqueKey('ord')}, 700, 'EUR', 'succeeded', 'automatic', 'pm_card_visa', 700, ${`ch_${uniqueKey('never')}`}, 'none')`;
    await postTransaction(stack.sql, { tenantId: tenant.id, eventKey: businessEventKey.paymentCapture(id), paymentId: id, description: 'capture (made up by the test)', lines: captureLines('EUR', 700) });
    const { discrepancies, alerts } = await findings(from);
    expect(discrepancies).toEqual([expect.objectContaining({ kind: 'missing_at_provider', payment_id: id, provider: null, ours: expect.objectContaining({ amount_captured_minor: 700, currency: 'EUR', ledger_captured_minor: 700 }) })]);
    expect(alerts).toEqual([expect.objectContaining({ level: 50, kind: 'missing_at_provider', payment_id: id, provider: 'sandbox' })]);
  });

  it('missing_at_provider: a refund we booked that the PSP never made', async () => {
    const from = new Date();
    const paid = await pay({ amount: 1800 });
    const refundId = newId('re');
    await stack.sql`UPDATE payments SET amount_refunded_minor = 600 WHERE id = ${paid.id}`;
    await stack.sql`
      INSERT INTO refunds (id, tenant_id, payment_id, amount_minor, currency, status, refund_key, provider_refund_id, workflow_id)
      VALUES (${refundId}, ${tenant.id}, ${paid.id}, 600, 'EUR', 'succeeded', ${uniqueKey('refund')}, ${`re_${uniqueKey('never')}`}, 'none')`;
    await postTransaction(stack.sql, { tenantId: tenant.id, eventKey: businessEventKey.refund(refundId), paymentId: paid.id, refundId, description: 'refund (made up by the test)', lines: refundLines('EUR', 600) });
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([expect.objectContaining({ kind: 'missing_at_provider', payment_id: paid.id, refund_id: refundId, provider: null, ours: expect.objectContaining({ object: 'refund', amount_minor: 600, status: 'succeeded' }) })]);
  });

  it('unknown_at_provider_side: a charge made directly at the PSP under a reference we never issued', async () => {
    const from = new Date();
    const reference = newId('pay');
    await inject({ kind: 'direct_charge', reference, amount_minor: 4200, currency: 'EUR' });
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([
      expect.objectContaining({ kind: 'unknown_at_provider_side', payment_id: null, ours: null, provider: expect.objectContaining({ amount_minor: 4200, currency: 'EUR', reference }) }),
    ]);
    expect(discrepancies[0].provider_reference).toMatch(/^ch_/);
  });

  it('unknown_at_provider_side: a refund made in the PSP’s dashboard of a charge of ours', async () => {
    const from = new Date();
    const paid = await pay({ amount: 2000 });
    await inject({ kind: 'dashboard_refund', charge_id: paid.provider_charge_id, amount_minor: 500 });
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([expect.objectContaining({ kind: 'unknown_at_provider_side', payment_id: paid.id, provider: expect.objectContaining({ type: 'refund', amount_minor: -500, charge_id: paid.provider_charge_id }) })]);
  });

  it('amount_mismatch: the PSP changed the charge’s amount', async () => {
    const from = new Date();
    const paid = await pay({ amount: 3000 });
    await inject({ kind: 'alter_amount', charge_id: paid.provider_charge_id, amount_minor: 2900 });
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([
      expect.objectContaining({
        kind: 'amount_mismatch',
        payment_id: paid.id,
        provider_reference: paid.provider_charge_id,
        ours: expect.objectContaining({ amount_captured_minor: 3000, ledger_captured_minor: 3000 }),
        provider: expect.objectContaining({ amount_minor: 2900 }),
      }),
    ]);
  });

  it('currency_mismatch: our payment says USD, the PSP charged EUR', async () => {
    const from = new Date();
    const paid = await pay();
    await stack.sql`UPDATE payments SET currency = 'USD' WHERE id = ${paid.id}`;
    const { discrepancies } = await findings(from);
    expect(only(discrepancies, 'currency_mismatch')).toEqual([expect.objectContaining({ payment_id: paid.id, ours: expect.objectContaining({ currency: 'USD' }), provider: expect.objectContaining({ currency: 'EUR' }) })]);
  });

  it('status_mismatch: we say declined, the PSP captured it', async () => {
    const from = new Date();
    const paid = await pay();
    await stack.sql`UPDATE payments SET status = 'declined' WHERE id = ${paid.id}`;
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([expect.objectContaining({ kind: 'status_mismatch', payment_id: paid.id, ours: expect.objectContaining({ status: 'declined' }), provider: expect.objectContaining({ type: 'charge' }) })]);
  });

  it('duplicate_charge: a second charge at the PSP under a payment’s reference', async () => {
    const from = new Date();
    const paid = await pay({ amount: 1100 });
    await inject({ kind: 'direct_charge', reference: paid.id, amount_minor: 1100, currency: 'EUR' });
    const workerBefore = await stack.workerMetrics.registry.metrics();
    const { discrepancies } = await findings(from);
    expect(discrepancies).toEqual([expect.objectContaining({ kind: 'duplicate_charge', payment_id: paid.id, ours: expect.objectContaining({ provider_charge_id: paid.provider_charge_id }) })]);
    expect(discrepancies[0].provider.charges).toHaveLength(2);
    // The effect counts see it too: two provider charges for one payment.
    const worker = await stack.workerMetrics.registry.metrics();
    expect(worker).not.toBe(workerBefore);
    expect(worker).toMatch(/duplicate_effects_total\{effect="provider_charge"\} [1-9]/);
  });
});

describe('running a window again', () => {
  it('finds the same discrepancies (same ids, first run named), records a second run, and alerts only once', async () => {
    const from = new Date();
    const duplicated = await pay({ amount: 1300 });
    await inject({ kind: 'direct_charge', reference: duplicated.id, amount_minor: 1300, currency: 'EUR' });
    const altered = await pay({ amount: 1400 });
    await inject({ kind: 'alter_amount', charge_id: altered.provider_charge_id, amount_minor: 1000 });
    const to = new Date(Date.now() + 1);
    const metric = async (kind: string) => Number((await stack.workerMetrics.registry.metrics()).match(new RegExp(`reconciliation_discrepancies_total\\{provider="sandbox",kind="${kind}"\\} (\\d+)`))?.[1] ?? 0);
    const before = { duplicate: await metric('duplicate_charge'), amount: await metric('amount_mismatch') };

    const logs = captureLogs();
    const first = await reconcile(from, to);
    await newestRunGap();
    const second = await reconcile(from, to);
    logs.stop();

    expect(first.runs[0]).toMatchObject({ status: 'discrepancies', discrepancyCount: 2, newDiscrepancyCount: 2 });
    expect(second.runs[0]).toMatchObject({ status: 'discrepancies', discrepancyCount: 2, newDiscrepancyCount: 0 });
    expect(second.runs[0]!.runId).not.toBe(first.runs[0]!.runId);
    const a = (await admin(`/admin/reconciliation/runs/${first.runs[0]!.runId}`)).json;
    const b = (await admin(`/admin/reconciliation/runs/${second.runs[0]!.runId}`)).json;
    const strip = (d: any) => ({ id: d.id, kind: d.kind, payment_id: d.payment_id, first_run_id: d.first_run_id });
    expect(b.discrepancies.map(strip)).toEqual(a.discrepancies.map(strip));
    expect(a.discrepancies.map((d: any) => d.first_run_id)).toEqual([a.id, a.id]);
    const [counted] = await stack.sql<{ count: number }[]>`
      SELECT count(*)::int AS count FROM reconciliation_discrepancies WHERE window_from = ${from} AND window_to = ${to}`;
    expect(counted!.count).toBe(2);
    // One alert per new discrepancy, none for the re-run.
    expect(logs.lines().filter((l) => l.alert === 'reconciliation_discrepancy').map((l) => l.kind).sort()).toEqual(['amount_mismatch', 'duplicate_charge']);
    expect(await metric('duplicate_charge')).toBe(before.duplicate + 1);
    expect(await metric('amount_mismatch')).toBe(before.amount + 1);
  });
});

describe('GET /admin/reconciliation/runs', () => {
  it('lists the runs newest first, paged, with window, status and counts; admin token only', async () => {
    const page = await admin('/admin/reconciliation/runs?limit=2');
    expect(page.status).toBe(200);
    expect(page.json).toMatchObject({ object: 'list', has_more: true });
    expect(page.json.data).toHaveLength(2);
    const [newer, older] = page.json.data;
    expect(newer.id > older.id).toBe(true);
    for (const run of page.json.data) {
      expect(Object.keys(run).sort()).toEqual(
        ['id', 'object', 'provider', 'window', 'status', 'started_at', 'finished_at', 'discrepancy_count', 'provider_transactions', 'workflow_id', 'error'].sort(),
      );
    }
    const next = await admin(`/admin/reconciliation/runs?limit=2&starting_after=${older.id}`);
    expect(next.json.data[0].id < older.id).toBe(true);
    expect((await admin('/admin/reconciliation/runs?provider=stripe')).json.data).toEqual([]);
    expect((await admin('/admin/reconciliation/runs/rcn_nope')).status).toBe(404);
    const unauthorized = await fetch(`${stack.apiUrl}/admin/reconciliation/runs`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    expect(unauthorized.status).toBe(401);
  });
});
