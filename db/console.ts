import type { Db } from './connect';
import type { DisputeRow, PaymentRow, RefundRow } from '../domain/resources';
import type { AttemptRow } from './payments-attempts';
import type { DeliveryAttemptRow } from './deliveries';
import { newId } from '../domain/ids';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

/** What the operator console reads (api/console/, docs/console.md): payments across tenants, and everything one payment brought about. */

/** The console's payment search; every filter is served by an index (migration 027; test/integration/console-search-plans.test.ts). */
export interface PaymentSearch extends PageQuery {
  /** The operator's tenant, or the tenant filter of an operator without one. */
  tenantId?: string;
  paymentId?: string;
  orderId?: string;
  customerId?: string;
  /** The customer's email, case-insensitive. */
  customerEmail?: string;
  /** Attempted at this PSP (any of its attempts, failed over or not). */
  provider?: string;
  status?: string;
  /** Created at or after. */
  from?: Date;
  /** Created before. */
  to?: Date;
}

/** The smallest payment id made at `at` or later: ids begin with their creation time (domain/ids.ts), so a date range is an id range. */
export function paymentIdFloor(at: Date): string {
  return newId('pay', Math.max(0, at.getTime())).slice(0, 'pay_'.length + 10);
}

/**
 * The customers a search's email names (case-insensitive, `customers_by_email`), within its
 * tenant, read before the payments: a subquery in the payments' statement lets PostgreSQL walk
 * the payments newest first and test each one's customer (about 2 s at a million payments,
 * bench/results/console-search.md), where a list of ids takes the payments' own index by customer.
 */
function customersStatement(db: Db, email: string, tenantId: string | undefined) {
  return db`
    SELECT id FROM customers WHERE lower(email) = lower(${email}) AND email IS NOT NULL
      ${tenantId !== undefined ? db`AND tenant_id = ${tenantId}` : db``}`;
}

async function customerIds(db: Db, search: PaymentSearch): Promise<string[] | undefined> {
  if (search.customerEmail === undefined) return undefined;
  const rows = await db<{ id: string }[]>`${customersStatement(db, search.customerEmail, search.tenantId)}`;
  return rows.map((row) => row.id);
}

async function explain(db: Db, statement: ReturnType<typeof customersStatement>): Promise<string[]> {
  const rows = await db<{ 'QUERY PLAN': string }[]>`EXPLAIN ${statement}`;
  return rows.map((row) => row['QUERY PLAN']);
}

function searchStatement(db: Db, search: PaymentSearch, customers: string[] | undefined) {
  return db`
    SELECT * FROM payments
    WHERE true
      ${search.tenantId !== undefined ? db`AND tenant_id = ${search.tenantId}` : db``}
      ${search.paymentId !== undefined ? db`AND id = ${search.paymentId}` : db``}
      ${search.orderId !== undefined ? db`AND order_id = ${search.orderId}` : db``}
      ${search.customerId !== undefined ? db`AND customer_id = ${search.customerId}` : db``}
      ${customers !== undefined ? db`AND customer_id = ANY(${customers}::text[])` : db``}
      ${search.provider !== undefined ? db`AND id IN (SELECT payment_id FROM payment_attempts WHERE provider = ${search.provider})` : db``}
      ${search.status !== undefined ? db`AND status = ${search.status}` : db``}
      ${search.from !== undefined ? db`AND id >= ${paymentIdFloor(search.from)}` : db``}
      ${search.to !== undefined ? db`AND id < ${paymentIdFloor(search.to)}` : db``}
      ${keysetPage(db, 'id', search)}`;
}

/** Newest first, paged by id, on the filters given. */
export async function searchPayments(db: Db, search: PaymentSearch): Promise<Page<PaymentRow>> {
  const customers = await customerIds(db, search);
  if (customers?.length === 0) return { rows: [], hasMore: false };
  return toPage(await db<PaymentRow[]>`${searchStatement(db, search, customers)}`, search);
}

/**
 * The plans PostgreSQL chooses for a search (EXPLAIN), one line per node: what shows each filter
 * is served by an index. With an email, the customers' statement's plan comes first.
 */
export async function searchPaymentsPlan(db: Db, search: PaymentSearch): Promise<string> {
  const customers = await customerIds(db, search);
  const first = search.customerEmail !== undefined ? await explain(db, customersStatement(db, search.customerEmail, search.tenantId)) : [];
  return [...first, ...(await explain(db, searchStatement(db, search, customers)))].join('\n');
}

/** One payment, within the tenant when one is given. */
export async function consolePayment(db: Db, id: string, tenantId: string | null): Promise<PaymentRow | null> {
  const [row] = await db<PaymentRow[]>`
    SELECT * FROM payments WHERE id = ${id} ${tenantId !== null ? db`AND tenant_id = ${tenantId}` : db``}`;
  return row ?? null;
}

export interface ProviderEventRow {
  provider: string;
  event_id: string;
  type: string;
  charge_status: string | null;
  disposition: string;
  forwarded_at: Date | null;
  received_at: Date;
}

export interface MerchantEventRow {
  id: string;
  type: string;
  delivery_state: string;
  attempts: number;
  created_at: Date;
  delivered_at: Date | null;
}

export interface LedgerEntryView {
  transaction_id: string;
  description: string;
  account: string;
  currency: string;
  amount_minor: number;
  created_at: Date;
}

/** Everything a payment's page shows besides the payment: read in one round of queries. */
export interface PaymentHistory {
  attempts: AttemptRow[];
  refunds: RefundRow[];
  disputes: DisputeRow[];
  providerEvents: ProviderEventRow[];
  events: MerchantEventRow[];
  deliveries: DeliveryAttemptRow[];
  ledger: LedgerEntryView[];
}

/** LIKE patterns of the outbox event keys of these objects (shared/keys.ts businessEventKey: `<kind>:<id>:<type>`). */
function eventKeyPatterns(kinds: [string, string[]][]): string[] {
  return kinds.flatMap(([kind, ids]) => ids.map((id) => `${kind}:${id.replace(/[\\%_]/g, '\\$&')}:%`));
}

export async function paymentHistory(db: Db, payment: PaymentRow): Promise<PaymentHistory> {
  const [attempts, refunds, disputes, providerEvents, ledger] = await Promise.all([
    db<AttemptRow[]>`SELECT * FROM payment_attempts WHERE payment_id = ${payment.id} ORDER BY attempt`,
    db<RefundRow[]>`SELECT * FROM refunds WHERE payment_id = ${payment.id} ORDER BY id`,
    db<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${payment.id} ORDER BY id`,
    db<ProviderEventRow[]>`
      SELECT provider, event_id, type, charge_status, disposition, forwarded_at, received_at
      FROM provider_events WHERE payment_id = ${payment.id} ORDER BY received_at`,
    db<LedgerEntryView[]>`
      SELECT t.id AS transaction_id, t.description, a.code AS account, e.currency, e.amount_minor, t.created_at
      FROM ledger_transactions t
      JOIN ledger_entries e ON e.transaction_id = t.id
      JOIN ledger_accounts a ON a.id = e.account_id
      WHERE t.payment_id = ${payment.id}
      ORDER BY t.created_at, t.id, e.line`,
  ]);
  const patterns = eventKeyPatterns([
    ['payment', [payment.id]],
    ['refund', refunds.map((r) => r.id)],
    ['dispute', disputes.map((d) => d.id)],
  ]);
  const events = await db<MerchantEventRow[]>`
    SELECT id, type, delivery_state, attempts, created_at, delivered_at FROM outbox_events
    WHERE tenant_id = ${payment.tenant_id} AND event_key LIKE ANY(${patterns}) ORDER BY seq`;
  const deliveries = events.length === 0 ? [] : await db<DeliveryAttemptRow[]>`SELECT * FROM webhook_deliveries WHERE event_id = ANY(${events.map((e) => e.id)}) ORDER BY event_id, attempt`;
  return { attempts, refunds, disputes, providerEvents, events, deliveries, ledger };
}

// ── The PSPs page ──────────────────────────────────────────────────────────────────────────

/** The buckets the PSPs page offers, each with the span of time it shows. */
export const PSP_BUCKETS = {
  '5m': { interval: '5 minutes', bucketMs: 5 * 60_000, spanMs: 6 * 3600_000 },
  '1h': { interval: '1 hour', bucketMs: 3600_000, spanMs: 48 * 3600_000 },
  '1d': { interval: '1 day', bucketMs: 24 * 3600_000, spanMs: 30 * 24 * 3600_000 },
} as const;
export type PspBucket = keyof typeof PSP_BUCKETS;

/** One PSP in one time bucket, from its charge attempts (payment_attempts) begun in it. */
export interface PspBucketRow {
  provider: string;
  bucket: Date;
  /** Attempts begun in the bucket, pending ones included. */
  attempts: number;
  /** Approved by the issuer: succeeded or requires_capture. */
  approved: number;
  declined: number;
  /** The PSP failed and charged nothing: rejected, not_sent, not_charged. */
  errors: number;
  /** Attempts with an outcome (not pending): the error rate's denominator. */
  finished: number;
  /** Finish minus start of the finished attempts, in milliseconds (null: none finished). */
  p50_ms: number | null;
  p95_ms: number | null;
}

/** The segments (`visa:EUR:card`) of the attempts begun since `since`, within the tenant when one is given: what the PSPs page can be narrowed to. */
export async function pspSegments(db: Db, input: { since: Date; tenantId: string | null }): Promise<string[]> {
  const rows = await db<{ segment: string }[]>`
    SELECT DISTINCT a.segment FROM payment_attempts a
    ${input.tenantId !== null ? db`JOIN payments p ON p.id = a.payment_id AND p.tenant_id = ${input.tenantId}` : db``}
    WHERE a.started_at >= ${input.since} AND a.segment IS NOT NULL
    ORDER BY 1`;
  return rows.map((row) => row.segment);
}

/**
 * Every PSP's figures per bucket since `since`, within the tenant when one is given
 * (payment_attempts_by_start), and within one routing segment when one is given (the
 * attempts' own segment, migration 033).
 */
export async function pspBuckets(db: Db, input: { bucket: PspBucket; since: Date; tenantId: string | null; segment?: string | null }): Promise<PspBucketRow[]> {
  const { interval } = PSP_BUCKETS[input.bucket];
  const rows = await db<PspBucketRow[]>`
    SELECT a.provider,
           date_bin(${interval}::interval, a.started_at, timestamptz '2000-01-01 00:00:00+00') AS bucket,
           count(*)::int AS attempts,
           count(*) FILTER (WHERE a.outcome IN ('succeeded', 'requires_capture'))::int AS approved,
           count(*) FILTER (WHERE a.outcome = 'declined')::int AS declined,
           count(*) FILTER (WHERE a.outcome IN ('rejected', 'not_sent', 'not_charged'))::int AS errors,
           count(*) FILTER (WHERE a.outcome <> 'pending')::int AS finished,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.finished_at - a.started_at) * 1000) AS p50_ms,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM a.finished_at - a.started_at) * 1000) AS p95_ms
    FROM payment_attempts a
    ${input.tenantId !== null ? db`JOIN payments p ON p.id = a.payment_id AND p.tenant_id = ${input.tenantId}` : db``}
    WHERE a.started_at >= ${input.since}
      ${input.segment ? db`AND a.segment = ${input.segment}` : db``}
    GROUP BY 1, 2
    ORDER BY 2, 1`;
  return rows.map((r) => ({ ...r, p50_ms: r.p50_ms === null ? null : Number(r.p50_ms), p95_ms: r.p95_ms === null ? null : Number(r.p95_ms) }));
}

// ── Disputes, recovery, reconciliation, endpoints ──────────────────────────────────────────

const tenantFilter = (db: Db, column: string, tenantId: string | null) => (tenantId !== null ? db`AND ${db(column)} = ${tenantId}` : db``);

/** Disputes that still need a response or are under review, nearest deadline first (disputes_open_by_deadline). */
export async function openDisputes(db: Db, tenantId: string | null): Promise<DisputeRow[]> {
  return db<DisputeRow[]>`
    SELECT * FROM disputes WHERE status IN ('needs_response', 'under_review') ${tenantFilter(db, 'tenant_id', tenantId)}
    ORDER BY evidence_due_by, id LIMIT 200`;
}

/** One dispute, within the tenant when one is given. */
export async function consoleDispute(db: Db, id: string, tenantId: string | null): Promise<DisputeRow | null> {
  const [row] = await db<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${id} ${tenantFilter(db, 'tenant_id', tenantId)}`;
  return row ?? null;
}

export interface EvidenceRequestRow {
  digest: string;
  evidence: Record<string, string>;
  bytes: number;
  created_at: Date;
}

/** A dispute's evidence requests as the API stored them (dispute_evidence), oldest first. */
export async function disputeEvidence(db: Db, disputeId: string): Promise<EvidenceRequestRow[]> {
  return db<EvidenceRequestRow[]>`SELECT digest, evidence, bytes, created_at FROM dispute_evidence WHERE dispute_id = ${disputeId} ORDER BY created_at, digest`;
}

/** Payments waiting for their next recovery attempt, soonest first (payments_console_by_status). */
export async function recoveringPayments(db: Db, tenantId: string | null): Promise<PaymentRow[]> {
  return db<PaymentRow[]>`
    SELECT * FROM payments WHERE status = 'recovering' ${tenantFilter(db, 'tenant_id', tenantId)}
    ORDER BY recovery->>'next_attempt_at' NULLS LAST, id LIMIT 200`;
}

export const RECOVERY_PERIODS = { day: 31, week: 12 * 7, month: 365 } as const;
export type RecoveryPeriod = keyof typeof RECOVERY_PERIODS;

export interface RecoveredRevenueRow {
  currency: string;
  period: Date;
  payments: number;
  amount_minor: number;
}

/**
 * Revenue recovered: payments paid on a recovery retry (recovery.attempts above 1, now
 * succeeded or refunded since), their captured amount per currency and UTC period of creation,
 * over the last RECOVERY_PERIODS[period] days (payments_with_recovery, an id range).
 */
export async function recoveredRevenue(db: Db, input: { period: RecoveryPeriod; tenantId: string | null; now: Date }): Promise<RecoveredRevenueRow[]> {
  const since = paymentIdFloor(new Date(input.now.getTime() - RECOVERY_PERIODS[input.period] * 24 * 3600_000));
  return db<RecoveredRevenueRow[]>`
    SELECT currency, date_trunc(${input.period}, created_at, 'UTC') AS period, count(*)::int AS payments, sum(amount_captured_minor)::bigint AS amount_minor
    FROM payments
    WHERE recovery IS NOT NULL AND id >= ${since} AND status IN ('succeeded', 'refunded') AND (recovery->>'attempts')::int > 1
      ${tenantFilter(db, 'tenant_id', input.tenantId)}
    GROUP BY 1, 2 ORDER BY 2 DESC, 1`;
}

export interface DiscrepancyView {
  id: string;
  provider: string;
  kind: string;
  subject: string;
  payment_id: string | null;
  refund_id: string | null;
  provider_reference: string | null;
  window_from: Date;
  window_to: Date;
  run_id: string;
  run_status: string;
  ours: Record<string, unknown> | null;
  provider_figures: Record<string, unknown> | null;
  created_at: Date;
}

/**
 * The latest discrepancies, each with the figures of the last run that saw it. A tenant's
 * operator sees those about its own payments and refunds only.
 */
export async function latestDiscrepancies(db: Db, tenantId: string | null): Promise<DiscrepancyView[]> {
  return db<DiscrepancyView[]>`
    SELECT d.id, d.provider, d.kind, d.subject, d.payment_id, d.refund_id, d.provider_reference, d.window_from, d.window_to,
           f.run_id, r.status AS run_status, f.ours, f.provider_figures, d.created_at
    FROM reconciliation_discrepancies d
    JOIN LATERAL (SELECT run_id, ours, provider_figures FROM reconciliation_findings WHERE discrepancy_id = d.id ORDER BY run_id DESC LIMIT 1) f ON true
    JOIN reconciliation_runs r ON r.id = f.run_id
    WHERE true
      ${tenantId !== null ? db`AND (d.payment_id IN (SELECT id FROM payments WHERE tenant_id = ${tenantId}) OR d.refund_id IN (SELECT id FROM refunds WHERE tenant_id = ${tenantId}))` : db``}
    ORDER BY d.created_at DESC, d.id LIMIT 200`;
}

export interface FailingEventRow {
  id: string;
  tenant_id: string;
  webhook_url: string | null;
  type: string;
  delivery_state: string;
  attempts: number;
  created_at: Date;
  next_attempt_at: Date;
  last_status: number | null;
  last_error: string | null;
  last_at: Date | null;
}

/**
 * Events the merchants' endpoints did not take: failed after their retries (outbox_events_failed)
 * or still retrying after a failed attempt (outbox_events_due), newest first, each with its last
 * delivery attempt; within the tenant when one is given.
 */
export async function failingEvents(db: Db, tenantId: string | null): Promise<FailingEventRow[]> {
  return db<FailingEventRow[]>`
    SELECT e.id, e.tenant_id, t.webhook_url, e.type, e.delivery_state, e.attempts, e.created_at, e.next_attempt_at,
           w.response_status AS last_status, w.error AS last_error, w.created_at AS last_at
    FROM (
      (SELECT * FROM outbox_events WHERE delivery_state = 'failed' ${tenantFilter(db, 'tenant_id', tenantId)} ORDER BY tenant_id, seq DESC LIMIT 200)
      UNION ALL
      (SELECT * FROM outbox_events WHERE delivery_state = 'pending' AND attempts > 0 ${tenantFilter(db, 'tenant_id', tenantId)} LIMIT 200)
    ) e
    JOIN tenants t ON t.id = e.tenant_id
    LEFT JOIN LATERAL (SELECT response_status, error, created_at FROM webhook_deliveries WHERE event_id = e.id ORDER BY attempt DESC LIMIT 1) w ON true
    ORDER BY e.seq DESC LIMIT 200`;
}

/** One event, within the tenant when one is given. */
export async function consoleEvent(db: Db, id: string, tenantId: string | null): Promise<{ id: string; tenant_id: string; type: string; event_key: string; delivery_state: string } | null> {
  const [row] = await db<{ id: string; tenant_id: string; type: string; event_key: string; delivery_state: string }[]>`
    SELECT id, tenant_id, type, event_key, delivery_state FROM outbox_events WHERE id = ${id} ${tenantFilter(db, 'tenant_id', tenantId)}`;
  return row ?? null;
}
