import type { PaymentWorkflowInput } from '../shared/definitions';
/**
 * Charge attempts at the PSPs (docs/CONTRACT.md "Providers, routing and failover").
 * Pure values: the workflow (workflows/payment.ts) imports them too.
 */

/** What one attempt came to. The SQL CHECK of payment_attempts.outcome admits exactly these. */
export const attemptOutcomes = [
  /** Its answer is awaited; while the PSP's outcome is unknown the payment keeps asking that PSP. */
  'pending',
  // The charge's status as the PSP answered it:
  'succeeded',
  'requires_capture',
  'requires_action',
  'processing',
  'declined',
  'canceled',
  /** The PSP refused the request itself (4xx): nothing was charged there. */
  'rejected',
  /** The PSP could not be reached before anything was sent (connection refused): nothing was charged there. */
  'not_sent',
  /** After answers were lost, the PSP's own lookup by our sub-key said it holds no charge. */
  'not_charged',
] as const;
export type AttemptOutcome = (typeof attemptOutcomes)[number];

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
}

/** What routing may look at (the first charge attempt's `route`). */
export interface RouteRequest {
  paymentId: string;
  tenantId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  /**
   * The payment's input: the first attempt persists the intent again if a start in doubt left
   * the run without it (db/payments.ts ensureIntent).
   */
  intent: PaymentWorkflowInput;
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
