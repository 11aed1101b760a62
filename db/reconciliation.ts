import type { Db } from './connect';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';
import type { DisputeStage, DisputeStatus } from '../domain/disputes';
import { newId } from '../domain/ids';
import type { RefundStatus } from '../shared/refunds';
import type { PaymentStatus } from '../shared/payments';
import type { DisputeMoneyFact } from '../shared/keys';
import type { DiscrepancyKind, ReconciliationRunStatus, TimeWindow } from '../shared/reconciliation';

/** Our side of a payment, as reconciliation compares it with the PSP's report. */
export interface OurPayment {
  id: string;
  tenant_id: string;
  status: PaymentStatus;
  amount_minor: number;
  amount_captured_minor: number;
  currency: string;
  provider_charge_id: string | null;
  /** The configured PSP holding its charge (null: none recorded, so the default provider). */
  provider: string | null;
  /** Ledger transactions of its capture (refunds and disputes excluded): exactly one once captured. */
  ledger_captures: number;
  /** What those transactions put in provider_receivable. */
  ledger_captured_minor: number;
  /** When the capture was booked (null: never). */
  captured_at: Date | null;
  /** The largest number of events of any one type (one each, or a duplicate). */
  max_events: number;
}

/** Our side of a refund. */
export interface OurRefund {
  id: string;
  payment_id: string;
  status: RefundStatus;
  amount_minor: number;
  currency: string;
  provider_refund_id: string | null;
  /** When the refund was booked in the ledger (null: not booked, e.g. failed or pending). */
  booked_at: Date | null;
}

/**
 * Our side of a dispute at one PSP: its row and its two postings that move money at the PSP,
 * each as what it moved in provider_receivable (signed; null: not posted). A loss moves
 * nothing there (the money left with the withdrawal).
 */
export interface OurDispute {
  id: string;
  payment_id: string;
  provider: string;
  provider_dispute_id: string;
  stage: DisputeStage;
  status: DisputeStatus;
  amount_minor: number;
  fee_minor: number;
  currency: string;
  /** The withdrawal: minus the amount and the fee. */
  ledger_withdrawal_minor: number | null;
  withdrawn_at: Date | null;
  /** The reinstatement of a won chargeback: the amount. */
  ledger_reinstatement_minor: number | null;
  reinstated_at: Date | null;
  /** The second round's withdrawal of what the reinstatement gave back: minus the amount. */
  ledger_second_withdrawal_minor: number | null;
  second_withdrawn_at: Date | null;
}

/** Figures of one side of a discrepancy, as shown by the API (`ours` / `provider`). */
export type Figures = Record<string, unknown>;

/** One difference a reconciliation found. */
export interface Finding {
  kind: DiscrepancyKind;
  /** Our payment or refund id, or the PSP's object id when we have none. */
  subject: string;
  paymentId: string | null;
  refundId: string | null;
  providerReference: string | null;
  ours: Figures | null;
  provider: Figures | null;
}

export interface ReconciliationRunRow {
  id: string;
  run_key: string;
  workflow_id: string;
  provider: string;
  window_from: Date;
  window_to: Date;
  status: ReconciliationRunStatus;
  started_at: Date;
  finished_at: Date | null;
  discrepancy_count: number;
  provider_transactions: number;
  error: string | null;
}

export interface RunFindingRow {
  id: string;
  kind: DiscrepancyKind;
  subject: string;
  payment_id: string | null;
  refund_id: string | null;
  provider_reference: string | null;
  ours: Figures | null;
  provider_figures: Figures | null;
  first_run_id: string;
  created_at: Date;
}

/**
 * Payments by id with the figures reconciliation compares. `eventTypes` are the payment's
 * event types (its event keys are businessEventKey.paymentEvent(id, type)).
 */
export async function paymentsForReconciliation(db: Db, ids: readonly string[], eventTypes: readonly string[]): Promise<OurPayment[]> {
  if (ids.length === 0) return [];
  return db<OurPayment[]>`
    SELECT p.id, p.tenant_id, p.status, p.amount_minor, p.amount_captured_minor, p.currency, p.provider_charge_id, p.provider,
           coalesce(l.captures, 0)::int AS ledger_captures,
           coalesce(l.captured, 0)::bigint AS ledger_captured_minor,
           l.captured_at,
           -- Exact keys use the (tenant_id, event_key) index (see bench/NOTES.md, "Reconciler").
           (SELECT coalesce(max(n), 0)::int FROM (
              SELECT count(*) AS n FROM outbox_events e
              WHERE e.tenant_id = p.tenant_id
                AND e.event_key = ANY (ARRAY(SELECT 'payment:' || p.id || ':' || t FROM unnest(${eventTypes as string[]}::text[]) AS t))
              GROUP BY e.type) per_type) AS max_events
    FROM payments p
    LEFT JOIN LATERAL (
      SELECT count(DISTINCT t.id) AS captures, min(t.created_at) AS captured_at,
             sum(e.amount_minor) FILTER (WHERE e.amount_minor > 0) AS captured
      FROM ledger_transactions t
      JOIN ledger_entries e ON e.transaction_id = t.id
      WHERE t.payment_id = p.id AND t.refund_id IS NULL AND t.dispute_id IS NULL
    ) l ON true
    WHERE p.id = ANY (${ids as string[]}::text[])`;
}

/** Ids of the payments holding these PSP charges. */
export async function paymentIdsByCharge(db: Db, chargeIds: readonly string[]): Promise<{ id: string; provider_charge_id: string }[]> {
  if (chargeIds.length === 0) return [];
  return db<{ id: string; provider_charge_id: string }[]>`
    SELECT id, provider_charge_id FROM payments WHERE provider_charge_id = ANY (${chargeIds as string[]}::text[])`;
}

/** Payments whose capture was booked in [from, to): what we say the PSP captured then. */
export async function paymentsCapturedIn(db: Db, window: { from: Date; to: Date }): Promise<string[]> {
  const rows = await db<{ payment_id: string }[]>`
    SELECT DISTINCT payment_id FROM ledger_transactions
    WHERE created_at >= ${window.from} AND created_at < ${window.to} AND payment_id IS NOT NULL AND refund_id IS NULL AND dispute_id IS NULL`;
  return rows.map((r) => r.payment_id);
}

export async function refundsForReconciliation(db: Db, ids: readonly string[]): Promise<OurRefund[]> {
  if (ids.length === 0) return [];
  return db<OurRefund[]>`
    SELECT r.id, r.payment_id, r.status, r.amount_minor, r.currency, r.provider_refund_id,
           (SELECT min(t.created_at) FROM ledger_transactions t WHERE t.refund_id = r.id) AS booked_at
    FROM refunds r WHERE r.id = ANY (${ids as string[]}::text[])`;
}

/** Refunds booked in [from, to). */
export async function refundsBookedIn(db: Db, window: { from: Date; to: Date }): Promise<string[]> {
  const rows = await db<{ refund_id: string }[]>`
    SELECT DISTINCT refund_id FROM ledger_transactions
    WHERE created_at >= ${window.from} AND created_at < ${window.to} AND refund_id IS NOT NULL`;
  return rows.map((r) => r.refund_id);
}

/** The dispute `d`'s posting of `fact`: when, and what it moved in provider_receivable (no row: not posted). */
const postedToReceivable = (db: Db, fact: Exclude<DisputeMoneyFact, 'loss'>) => db`
  SELECT t.created_at AS at, sum(e.amount_minor)::bigint AS moved
  FROM ledger_transactions t
  JOIN ledger_entries e ON e.transaction_id = t.id
  JOIN ledger_accounts a ON a.id = e.account_id AND a.code = 'provider_receivable'
  WHERE t.tenant_id = d.tenant_id AND t.event_key = 'dispute:' || d.id || ${`:${fact}`}
  GROUP BY t.id, t.created_at`;

/**
 * The provider's disputes reconciliation compares: those whose PSP ids are given (the report's
 * dispute lines) and those with a posting booked in [from, to), with their postings' figures.
 * A posting's key is businessEventKey.disputeMoney(id, fact).
 */
export async function disputesForReconciliation(db: Db, provider: string, window: { from: Date; to: Date }, providerDisputeIds: readonly string[]): Promise<OurDispute[]> {
  return db<OurDispute[]>`
    SELECT d.id, d.payment_id, d.provider, d.provider_dispute_id, d.stage, d.status, d.amount_minor, d.fee_minor, d.currency,
           w.moved AS ledger_withdrawal_minor, w.at AS withdrawn_at, r.moved AS ledger_reinstatement_minor, r.at AS reinstated_at,
           s.moved AS ledger_second_withdrawal_minor, s.at AS second_withdrawn_at
    FROM disputes d
    LEFT JOIN LATERAL (${postedToReceivable(db, 'withdrawal')}) w ON true
    LEFT JOIN LATERAL (${postedToReceivable(db, 'reinstatement')}) r ON true
    LEFT JOIN LATERAL (${postedToReceivable(db, 'second_withdrawal')}) s ON true
    WHERE d.provider = ${provider}
      AND (d.provider_dispute_id = ANY (${providerDisputeIds as string[]}::text[])
           OR d.id IN (SELECT dispute_id FROM ledger_transactions
                       WHERE created_at >= ${window.from} AND created_at < ${window.to} AND dispute_id IS NOT NULL))`;
}

export interface RunIdentity {
  runKey: string;
  workflowId: string;
  provider: string;
  window: TimeWindow;
}

/** The run row of this workflow run's attempt at a provider: created, or taken up again by a retried activity. */
export async function beginRun(db: Db, run: RunIdentity): Promise<ReconciliationRunRow> {
  const [row] = await db<ReconciliationRunRow[]>`
    INSERT INTO reconciliation_runs (id, run_key, workflow_id, provider, window_from, window_to, status)
    VALUES (${newId('rcn')}, ${run.runKey}, ${run.workflowId}, ${run.provider}, ${new Date(run.window.from)}, ${new Date(run.window.to)}, 'running')
    ON CONFLICT (run_key) DO UPDATE SET status = 'running', finished_at = NULL, error = NULL
    RETURNING *`;
  return row!;
}

/** A finding recorded by a run; `isNew` when no earlier run (of any window) had recorded it. */
export interface RecordedFinding extends Finding {
  discrepancyId: string;
  isNew: boolean;
}

/**
 * Records what a run found and closes it, in one transaction. A discrepancy is keyed by
 * (provider, window, kind, subject): a second run of the window finds the existing row and
 * only adds its finding. It is new (an alert) only if no run recorded that kind for that
 * subject in any window before, so the hourly and the daily runs alert once between them.
 */
export async function finishRun(db: Db, run: ReconciliationRunRow, findings: Finding[], providerTransactions: number): Promise<RecordedFinding[]> {
  const recorded: RecordedFinding[] = [];
  for (const finding of findings) {
    const [seen] = await db<{ id: string }[]>`
      SELECT id FROM reconciliation_discrepancies
      WHERE provider = ${run.provider} AND kind = ${finding.kind} AND subject = ${finding.subject}
      LIMIT 1`;
    const [inserted] = await db<{ id: string }[]>`
      INSERT INTO reconciliation_discrepancies
        (id, provider, window_from, window_to, kind, subject, payment_id, refund_id, provider_reference, first_run_id)
      VALUES (${newId('dsc')}, ${run.provider}, ${run.window_from}, ${run.window_to}, ${finding.kind}, ${finding.subject},
              ${finding.paymentId}, ${finding.refundId}, ${finding.providerReference}, ${run.id})
      ON CONFLICT (provider, window_from, window_to, kind, subject) DO NOTHING
      RETURNING id`;
    const discrepancyId =
      inserted?.id ??
      (
        await db<{ id: string }[]>`
          SELECT id FROM reconciliation_discrepancies
          WHERE provider = ${run.provider} AND window_from = ${run.window_from} AND window_to = ${run.window_to}
            AND kind = ${finding.kind} AND subject = ${finding.subject}`
      )[0]!.id;
    await db`
      INSERT INTO reconciliation_findings (run_id, discrepancy_id, ours, provider_figures)
      VALUES (${run.id}, ${discrepancyId}, ${finding.ours === null ? null : db.json(finding.ours as never)}, ${finding.provider === null ? null : db.json(finding.provider as never)})
      ON CONFLICT (run_id, discrepancy_id) DO UPDATE SET ours = EXCLUDED.ours, provider_figures = EXCLUDED.provider_figures`;
    recorded.push({ ...finding, discrepancyId, isNew: inserted !== undefined && seen === undefined });
  }
  await db`
    UPDATE reconciliation_runs SET
      status = ${findings.length === 0 ? 'clean' : 'discrepancies'},
      finished_at = now(),
      discrepancy_count = ${findings.length},
      provider_transactions = ${providerTransactions},
      error = NULL
    WHERE id = ${run.id}`;
  return recorded;
}

/** Records that a workflow run's attempt at a provider failed for good (its activity gave up). */
export async function failRun(db: Db, run: RunIdentity, error: string): Promise<ReconciliationRunRow> {
  const [row] = await db<ReconciliationRunRow[]>`
    INSERT INTO reconciliation_runs (id, run_key, workflow_id, provider, window_from, window_to, status, finished_at, error)
    VALUES (${newId('rcn')}, ${run.runKey}, ${run.workflowId}, ${run.provider}, ${new Date(run.window.from)}, ${new Date(run.window.to)}, 'failed', now(), ${error})
    ON CONFLICT (run_key) DO UPDATE SET status = 'failed', finished_at = now(), error = EXCLUDED.error
    RETURNING *`;
  return row!;
}

/** Newest first, paged by id (ids sort by start time). */
export async function listRuns(db: Db, query: PageQuery & { provider?: string }): Promise<Page<ReconciliationRunRow>> {
  const rows = await db<ReconciliationRunRow[]>`
    SELECT * FROM reconciliation_runs
    WHERE true
      ${query.provider !== undefined ? db`AND provider = ${query.provider}` : db``}
      ${keysetPage(db, 'id', query)}`;
  return toPage(rows, query);
}

export async function getRun(db: Db, id: string): Promise<ReconciliationRunRow | null> {
  const [row] = await db<ReconciliationRunRow[]>`SELECT * FROM reconciliation_runs WHERE id = ${id}`;
  return row ?? null;
}

/** What a run found, in a stable order (kind, then subject). */
export async function runFindings(db: Db, runId: string): Promise<RunFindingRow[]> {
  return db<RunFindingRow[]>`
    SELECT d.id, d.kind, d.subject, d.payment_id, d.refund_id, d.provider_reference, f.ours, f.provider_figures, d.first_run_id, d.created_at
    FROM reconciliation_findings f
    JOIN reconciliation_discrepancies d ON d.id = f.discrepancy_id
    WHERE f.run_id = ${runId}
    ORDER BY d.kind, d.subject`;
}
