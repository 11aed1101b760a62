/** What the route's plan of a payment across PSPs is given (workflow code imports it: no I/O). */
import type { PaymentWorkflowInput } from './payments';
import type { RoutingDecisionView } from '../domain/resources';

/** What routing may look at: the input of the route's plan in the first charge attempt (activities/routing.ts, planRouteFor by default). */
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

/**
 * A payment's segment as routing counts outcomes: card network (`unknown` where the method does
 * not say), currency, payment method type. Its levels' keys are `visa:EUR:card`, `visa:*:card`,
 * `*:*:card`, `*:*:*` (domain/routing-success-rate.ts segmentLevels).
 */
export interface RouteSegment {
  network: string;
  currency: string;
  methodType: string;
}

/** What the decideRoute activity is given (activities/routing-decision.ts). */
export interface DecideRouteInput {
  paymentId: string;
  tenantId: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  segment: RouteSegment;
}

/** One candidate as the decision records it: its approval estimate now (null: not read) and the probability it was chosen with. */
export type RouteCandidateRecord = RoutingDecisionView['candidates'][number];

/**
 * The decision as the payment's history records it and `GET /v1/payments/{id}` shows it as
 * `routing`: the probabilities add up to 1; `explored`, the chosen PSP is not the one the
 * estimates rank first.
 */
export type RouteDecisionRecord = RoutingDecisionView;

/** What decideRoute answers: the record, the PSPs in the order to try them, and where its outcomes count. */
export interface DecidedRoute {
  decision: RouteDecisionRecord;
  providers: string[];
  /** The routing's decline codes that move a payment on (absent: the default list). */
  retryableDeclineCodes?: string[];
  /** The tenant's own scope when its routing.scope is "tenant", else null: pass it back to recordRouteOutcome. */
  tenantScope: string | null;
  /** The half-open PSP whose one probe this payment took (db/routing.ts takeProbe): it is tried first. */
  probe?: string;
}

/** What recordRouteOutcome is given: one attempt's outcome at one PSP. */
export interface RouteOutcomeInput {
  provider: string;
  segment: RouteSegment;
  /**
   * The issuer's answer (approved, declined), another answer of the PSP (a challenge, a refusal
   * of the request: health only), or the PSP's own error (a timeout, a 5xx, a refused connection).
   */
  outcome: 'approved' | 'declined' | 'answered' | 'error';
  /** The payment's first attempt at this PSP: only those count toward approvals; every one toward health. */
  firstAttempt: boolean;
  /** From decideRoute's answer. */
  tenantScope: string | null;
}
