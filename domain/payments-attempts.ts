import { chargeStates, type ChargeState } from './payments';

/**
 * Charge attempts at the PSPs (docs/CONTRACT.md "Providers, routing and failover").
 * Pure values: the workflow (workflows/payments/) imports them too.
 */

/**
 * What one attempt came to: its answer awaited (`pending`: while the PSP's outcome is unknown the
 * payment keeps asking that PSP), the charge's state as the PSP answered it (the lifecycle
 * table's charge states), or why nothing was charged there: the PSP refused the request itself
 * (`rejected`, 4xx), could not be reached before anything was sent (`not_sent`, connection
 * refused), or said by its own lookup by our sub-key, after answers were lost, that it holds no
 * charge (`not_charged`). The SQL CHECK of payment_attempts.outcome admits exactly these.
 */
export type AttemptOutcome = 'pending' | ChargeState | 'rejected' | 'not_sent' | 'not_charged';
export const attemptOutcomes = ['pending', ...chargeStates, 'rejected', 'not_sent', 'not_charged'] as [AttemptOutcome, ...AttemptOutcome[]];

/** The outcomes after which the payment may move to the next PSP: that PSP certainly took no money. */
export const certainlyNotCharged: readonly AttemptOutcome[] = ['rejected', 'not_sent', 'not_charged'];

/**
 * Decline codes that say the PSP (or its acquirer) failed, not the card: the same card may be
 * charged at another PSP. A decline about the card or the customer (card_declined,
 * insufficient_funds, fraud codes, authentication_failed…) ends the payment as declined.
 */
export const DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES: readonly string[] = ['processing_error', 'issuer_unavailable', 'try_again_later'];

/** What the first charge attempt decides for a payment: the PSPs to try, in order, and why in that order. */
export interface RoutePlan {
  providers: string[];
  /** For an operator (the run's memo, logs): e.g. "default provider", "rule 1 (currency EUR)". */
  reason: string;
  /** Declines that move the payment to the next PSP (DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES unless routing says otherwise). */
  retryableDeclineCodes?: string[];
  /**
   * The decision as recorded for the payment (shared/routing.ts RouteDecisionRecord: strategy,
   * candidates with their estimates and selection probabilities, chosen, explored, reason), for
   * a tenant whose routing decides by success rate; absent for the static route.
   */
  decision?: object;
  /** Whose counts the payment's outcomes go to besides the pool: the tenant's id when its routing.scope is "tenant". */
  tenantScope?: string | null;
  /**
   * The payment's charge budget in ms (PAYMENT_CHARGE_BUDGET_SECONDS of the worker that planned
   * it), from its run's start: the route starts again after its last candidate's transient
   * failure within it (workflows/payments/charge.ts). Recorded with the plan in the run's history.
   */
  chargeBudgetMs?: number;
}

/** One attempt as the memo of the run (Temporal Web UI) shows it. */
export interface AttemptMemo {
  attempt: number;
  provider: string;
  outcome: AttemptOutcome;
  /** The decline or refusal code, or why the outcome is known (e.g. `connection_refused`). */
  error_code: string | null;
  /** Why the payment moved on from this attempt to the next PSP (absent: it did not). */
  moved_on_because?: string;
}
