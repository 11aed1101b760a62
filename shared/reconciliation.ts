/**
 * Reconciliation with the PSPs (docs/CONTRACT.md, "Reconciliation"): what a discrepancy is about,
 * a run's statuses, the window and the workflow's input and results. Imported by workflow code
 * (no Node, no I/O, no clock: times come in as arguments), the worker and the API. It runs as a
 * periodic job (shared/jobs.ts).
 */

/** What each discrepancy a reconciliation records is about (docs/CONTRACT.md, "Reconciliation"). */
export const discrepancyKinds = [
  /** We hold money as captured (or refunded) that the PSP has no record of. */
  'missing_at_provider',
  /** Money moved at the PSP that we have no record of (a charge or refund made outside this service). */
  'unknown_at_provider_side',
  'amount_mismatch',
  'currency_mismatch',
  /** Both sides know the object, but disagree on whether money moved (e.g. ours declined, captured at the PSP). */
  'status_mismatch',
  /** More than one charge at the PSP for one payment of ours. */
  'duplicate_charge',
] as const;
export type DiscrepancyKind = (typeof discrepancyKinds)[number];

export const reconciliationRunStatuses = ['running', 'clean', 'discrepancies', 'failed'] as const;
export type ReconciliationRunStatus = (typeof reconciliationRunStatuses)[number];

/**
 * Which time window a reconciliation covers, relative to the time it was scheduled for:
 * - `previous_day`: the whole UTC day before (the daily run; a backfill of day D reconciles D-1);
 * - `trailing_hours`: the last `hours` whole hours before the scheduled hour (the hourly run);
 * - `explicit`: exactly [from, to) (an operator's or a test's run).
 */
export type ReconciliationWindowSpec =
  | { kind: 'previous_day' }
  | { kind: 'trailing_hours'; hours: number }
  | { kind: 'explicit'; from: string; to: string };

export interface TimeWindow {
  /** ISO 8601, inclusive. */
  from: string;
  /** ISO 8601, exclusive. */
  to: string;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** The window a run scheduled at `scheduledAt` covers. Pure: the workflow calls it on replay too. */
export function reconciliationWindow(spec: ReconciliationWindowSpec, scheduledAt: Date): TimeWindow {
  const at = scheduledAt.getTime();
  if (spec.kind === 'explicit') {
    if (!(Date.parse(spec.from) < Date.parse(spec.to))) throw new TypeError(`reconciliation window: from (${spec.from}) must be before to (${spec.to})`);
    return { from: new Date(spec.from).toISOString(), to: new Date(spec.to).toISOString() };
  }
  if (spec.kind === 'previous_day') {
    const today = Math.floor(at / DAY_MS) * DAY_MS;
    return { from: new Date(today - DAY_MS).toISOString(), to: new Date(today).toISOString() };
  }
  if (!Number.isInteger(spec.hours) || spec.hours < 1 || spec.hours > 48) throw new TypeError(`reconciliation window: hours must be 1 to 48, got ${spec.hours}`);
  const hour = Math.floor(at / HOUR_MS) * HOUR_MS;
  return { from: new Date(hour - spec.hours * HOUR_MS).toISOString(), to: new Date(hour).toISOString() };
}

/** Input of reconciliationWorkflow. */
export interface ReconciliationInput {
  /** The providers to reconcile, by configured name (PROVIDERS). */
  providers: string[];
  window: ReconciliationWindowSpec;
}

/** What one provider's reconciliation of one window found. */
export interface ReconciliationRunSummary {
  runId: string;
  provider: string;
  window: TimeWindow;
  status: ReconciliationRunStatus;
  discrepancyCount: number;
  /** Discrepancies no earlier run had recorded (each raised an operator alert). */
  newDiscrepancyCount: number;
}

/** Result of reconciliationWorkflow: one summary per provider. */
export interface ReconciliationResult {
  window: TimeWindow;
  runs: ReconciliationRunSummary[];
}

/** The step of one provider's reconciliation, as the workflow hands it to its activity. */
export interface ReconcileProviderInput {
  provider: string;
  window: TimeWindow;
  /** Identifies this workflow run's attempt at this provider: a retried activity continues the same run row. */
  runKey: string;
  workflowId: string;
}
