import type { RoutePlan } from '../domain/payments-attempts';
import type { FirstAttempt } from './routing';
import type { SavedMethodCharge } from '../shared/customers';
import type { RouteOutcomeInput, RouteRequest } from '../shared/routing';
import { paymentSegment } from '../domain/routing-segment';
import { createHash } from 'node:crypto';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { providerSubKey } from '../shared/keys';
import { FailureType } from '../shared/definitions';
import { PSP_ERROR_NONE_FOUND } from '../shared/payments';
import { killPoint } from '../lib/kill-points';
import { heartbeatingContexts, ProviderCallDeferredError } from '../lib/provider-limits';
import { inSpan, SpanKind, traceAttributes, tracingOn } from '../lib/tracing';
import { capabilitiesOf, testPaymentMethodAt, isProviderRegistry, providerRegistry, UnknownProviderError, type ProviderRegistry } from '../provider/registry';
import { ProviderRejectedError, ProviderUnavailableError, type PaymentProvider, type ProviderCharge, type ProviderRefund } from '../provider/types';

/**
 * Runs one provider call while heartbeating, so that a worker killed mid-call is noticed
 * within the heartbeat timeout and the step is retried elsewhere (looking the operation up
 * first). The activity's cancellation aborts the HTTP call.
 */
/** What a client reads when the provider refused a request (failure code `provider_rejected`). */
export const PROVIDER_REJECTED_MESSAGE = 'The payment provider refused the request; nothing was charged or refunded.';

export async function providerCall<T>(call: (signal: AbortSignal) => Promise<T>, details?: () => unknown): Promise<T> {
  const context = Context.current();
  // Every beat carries the step's details (if any): the last one is what the next attempt reads.
  // A local activity has no heartbeat: its workflow task's timeout notices a worker that died.
  const beat = context.info.isLocal ? undefined : setInterval(() => context.heartbeat(details?.()), 1000);
  // A wait for the PSP's rate limit inside the call (lib/provider-limits.ts) leaves the beats to this one.
  if (beat) heartbeatingContexts.add(context);
  try {
    const answer = await call(context.cancellationSignal);
    killPoint('after-provider-answer');
    return answer;
  } catch (error) {
    if (error instanceof ProviderRejectedError) {
      // Nothing happened at the provider and the same request cannot succeed later. Its own
      // words (which name its endpoints and echo our input) go to the log, never to clients:
      // the failure's message is what the payment or refund records and the API answers.
      context.log.warn('provider rejected the request', { provider_message: error.message, provider_code: error.code, provider_status: error.status });
      throw ApplicationFailure.create({ type: FailureType.ProviderRejected, message: PROVIDER_REJECTED_MESSAGE, nonRetryable: true, details: [error.code] });
    }
    throw error; // unknown outcome: retried with the same sub-key, lookup first
  } finally {
    if (beat) {
      clearInterval(beat);
      heartbeatingContexts.delete(context);
    }
  }
}

/** The provider calls that are one HTTP call each at the PSP: each gets its span. */
const tracedCalls = new Set(['createCharge', 'findChargeByIdempotencyKey', 'listChargesByReference', 'captureCharge', 'voidCharge', 'createRefund', 'findRefundByIdempotencyKey', 'retrieveCharge', 'listBalanceTransactions', 'completeChallenge']);

/**
 * The PSP `name` with a client span per call (docs/tracing.md): the PSP's name, the call and
 * our sub-key, never the request's other fields (card data, tokens) nor the client's settings
 * (API keys). The provider itself while tracing is off.
 */
export function tracedProvider(provider: PaymentProvider, name: string): PaymentProvider {
  if (!tracingOn()) return provider;
  return new Proxy(provider, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || !tracedCalls.has(property) || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const first = args[0];
        const subKey = property.endsWith('ByIdempotencyKey') ? first : (first as { idempotencyKey?: unknown } | undefined)?.idempotencyKey;
        const attributes = { [traceAttributes.provider]: name, 'psp.call': property, ...(typeof subKey === 'string' ? { [traceAttributes.providerSubKey]: subKey } : {}) };
        return inSpan(`psp ${name} ${property}`, { kind: SpanKind.CLIENT, attributes }, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
      };
    },
  });
}

/**
 * Whether this run of the step is a retry (a try after the first: Temporal's activity attempt
 * above 1, never a charge attempt): after a timeout or an unknown outcome the next try asks the
 * provider before acting again. A kind that replays (unknownOutcome `replay`) has no lookup: the
 * same request is sent again.
 */
export function isRetriedTry(): boolean {
  return Context.current().info.attempt > 1;
}

function looksUpFirst(provider: PaymentProvider): boolean {
  return isRetriedTry() && capabilitiesOf(provider).unknownOutcome !== 'replay';
}

export interface ChargeInput {
  paymentId: string;
  /**
   * A recovery retry's end (domain/recovery.ts attemptsEndAt, epoch ms): a step that would send
   * the charge at or after it, by its own clock, sends nothing and answers `not_sent`
   * (`recovery_window_elapsed`). Absent: no such end.
   */
  sendBefore?: number;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  capture: boolean;
  description: string | null;
  /** Where the PSP's challenge page sends the customer back. */
  returnUrl?: string | null;
  /** The configured PSP to charge at. */
  provider?: string;
  /** The customer is not there (a saved method charged off-session). */
  offSession?: boolean;
  /** Save the card at the PSP for later charges without the customer. */
  setupFutureUsage?: 'off_session' | null;
  /** A saved method: each PSP is given its own token when it has one, else the network transaction id and the card. */
  savedMethod?: SavedMethodCharge | null;
}

/** One attempt of a payment along its route (workflows/payments/charge.ts chargeAlongTheRoute). */
export type ChargeAttemptInput = ChargeInput & {
  /** 1, 2, …: attempt n charges under providerSubKey.charge(paymentId, n). */
  attempt: number;
  /**
   * This attempt's first try ran as the run's local activity and failed (workflows/payments/charge.ts):
   * `not_sent` when it certainly sent nothing (the PSP refused the connection), else `unknown`.
   * That try counts among the PSP's tries.
   */
  localTry?: 'not_sent' | 'unknown';
} & (
    | {
        provider: string;
        /**
         * Whether the payment may go on without this PSP (another PSP follows, or the run starts
         * its route again). Only then may the step answer "not charged" after its transient
         * failures: otherwise it keeps asking this one.
         */
        canFailOver: boolean;
        /**
         * Whether lookups finding no charge may end this attempt "not charged" after a send the
         * PSP never answered (a timeout, a reset): only where another PSP follows. A request the
         * PSP never answered may still be running there, and the route started again charges at
         * the same PSP under a new key; so the last PSP of a pass ends its attempt by a lookup
         * only after a send it answered (a 5xx: that request is over). Absent: `canFailOver`.
         */
        lookupMayEnd?: boolean;
        route?: undefined;
      }
    | {
        /**
         * Attempt 1: the step decides the route itself
         * (the tenant's routing, the breaker; activities/routing.ts createFirstAttemptPlanner),
         * charges at its first PSP and answers the plan with the outcome. A PSP that refuses the
         * request is then answered as `rejected` even when it is the last (the run records it).
         */
        route: RouteRequest;
        provider?: undefined;
        /** As for a named PSP; absent: whether the plan has a PSP after its first. */
        canFailOver?: boolean;
        /** As for a named PSP; absent: whether the plan has a PSP after its first. */
        lookupMayEnd?: boolean;
      }
  );

/**
 * What one attempt came to: the charge as the PSP answered it, or the certainty that this PSP
 * took no money (so the payment may move to the next one). Never "unknown": while the outcome
 * is unknown the activity is retried at the same PSP, under the same sub-key, lookup first.
 */
export type ChargeAttemptResult = (
  | { kind: 'charge'; charge: ProviderCharge }
  | { kind: 'not_charged'; outcome: 'rejected' | 'not_sent' | 'not_charged'; errorCode: string; message: string }
) & {
  /** The route the step decided (inputs with `route` only): its first PSP is where this attempt went. */
  plan?: RoutePlan;
};

/**
 * After lost answers (a timeout, a 5xx, a reset), a retry first looks the charge up by our
 * sub-key. When that many of those lookups (each in its own retry, the retries' backoff between
 * them, well past the provider call's own timeout) have answered "no such charge", nothing
 * was charged there: the step may answer not_charged and the payment may move on. A lookup that
 * fails (the PSP is down, or hangs) counts nothing: the step keeps asking this PSP. The count
 * travels from retry to retry in the heartbeat details ({ noneFound }); a count lost errs on
 * the side of asking this PSP again, never of moving on early.
 */
export const LOOKUPS_FINDING_NONE_BEFORE_NOT_CHARGED = 2;

/**
 * How many tries a PSP gets for one attempt (PROVIDER_TRANSIENT_TRIES): a transient failure
 * (a timeout, a 5xx, a refused connection) is tried again at the same PSP under the same
 * sub-key, with the activity's backoff, until this many tries have failed; only then, and only
 * when nothing was certainly charged there, does the step answer not_sent or not_charged.
 */
export const DEFAULT_PROVIDER_TRANSIENT_TRIES = 3;

export interface ChargeStepInput {
  paymentId: string;
  chargeId: string;
  /** The configured PSP holding the charge (absent: the default provider). */
  provider?: string;
  /** The attempt whose sub-key made the charge (absent: 1). */
  attempt?: number;
}

export function createProviderSteps(
  providers: ProviderRegistry | PaymentProvider,
  /** Decides a route in attempt 1 (inputs with `route`; activities/routing.ts createFirstAttemptPlanner). */
  planFirstAttempt?: (request: RouteRequest) => Promise<FirstAttempt>,
  /**
   * The currency of a refund's money by its reference (db/refunds.ts currencyOfRefundReference):
   * a PSP whose refund names its amount in full needs it, and the refund steps recorded
   * in workflow histories do not carry it.
   */
  currencyOfRefund?: (reference: string) => Promise<string | null>,
  /**
   * The URL of our return route for a payment (GET /return/{payment_id} under API_PUBLIC_URL):
   * the returnUrl a charge at a kind whose challengeReturn is `orchestrator` sends, so the
   * customer comes back to us before the merchant. Absent: the merchant's return_url.
   */
  returnRoute?: (paymentId: string) => string,
  /**
   * Counts every charge attempt's outcome in routing's shared state
   * (activities/routing-decision.ts recordRouteOutcome): the PSP's shared health is fed by every
   * try of every attempt (an answer for it: a charge, a decline, a challenge, a refusal of the
   * request; no answer against it: unreachable, a timeout, a 5xx, nothing found by its lookups);
   * a payment's first attempt, on its step's first try, also counts the issuer's answer toward
   * approvals. Not awaited: a statistic never holds up or fails a charge.
   */
  routeOutcome?: (input: RouteOutcomeInput) => Promise<unknown>,
  /** The tries a PSP gets for one attempt before the step answers that nothing was charged there. */
  transientTries = DEFAULT_PROVIDER_TRANSIENT_TRIES,
) {
  const registry = isProviderRegistry(providers) ? providers : providerRegistry({ sandbox: providers });
  /** The named PSP, or the default when none is named. A name no longer configured cannot be retried into existence. */
  const at = (name: string | undefined): PaymentProvider => {
    try {
      const chosen = name ?? registry.defaultName;
      return tracedProvider(registry.get(chosen), chosen);
    } catch (error) {
      if (error instanceof UnknownProviderError) throw ApplicationFailure.nonRetryable(error.message, 'UnknownProvider');
      throw error;
    }
  };
  /** The charge made under this payment's charge sub-key (of that attempt), in its current state, if any. */
  const findCharge = (provider: PaymentProvider, paymentId: string, signal: AbortSignal, attempt = 1) =>
    provider.findChargeByIdempotencyKey(providerSubKey.charge(paymentId, attempt), { signal });
  const createCharge = (provider: PaymentProvider, name: string, input: ChargeInput, attempt: number, signal: AbortSignal) =>
    provider.createCharge(
      {
        idempotencyKey: providerSubKey.charge(input.paymentId, attempt),
        amountMinor: input.amountMinor,
        currency: input.currency,
        paymentMethod: testPaymentMethodAt(provider, input.paymentMethod),
        capture: input.capture,
        reference: input.paymentId,
        description: input.description,
        returnUrl: capabilitiesOf(provider).challengeReturn === 'orchestrator' && returnRoute ? returnRoute(input.paymentId) : (input.returnUrl ?? null),
        ...(input.offSession ? { offSession: true } : {}),
        ...(input.setupFutureUsage ? { setupFutureUsage: input.setupFutureUsage } : {}),
        ...(input.savedMethod ? { savedMethod: savedMethodAt(input.savedMethod, name) } : {}),
      },
      { signal },
    );

  return {
    /**
     * One attempt of a routed payment at one PSP, under that attempt's sub-key. Answers the
     * charge, or that this PSP certainly took no money: it refused the request (4xx) at once;
     * after `transientTries` tries that failed transiently, that it was unreachable before
     * anything was sent (connection refused every time) or that its lookup by our sub-key holds
     * no charge. A transient failure before then fails the try, retried here under the same
     * sub-key with the activity's backoff, lookup first. While the outcome is unknown (a
     * timeout, a 5xx, a lookup that fails too) the step is retried here for as long as it takes:
     * the payment never moves to another PSP while this one may hold its money.
     */
    async chargeAttempt(input: ChargeAttemptInput): Promise<ChargeAttemptResult> {
      let plan: RoutePlan | undefined;
      let triedBefore = false;
      if (input.route) {
        if (!planFirstAttempt) throw ApplicationFailure.nonRetryable('this worker cannot decide a route in the charge step', 'UnknownProvider');
        ({ plan, triedBefore } = await planFirstAttempt(input.route));
      }
      const name = plan ? plan.providers[0]! : input.provider!;
      const canFailOver = input.canFailOver ?? (plan ? plan.providers.length > 1 : false);
      const lookupMayEnd = input.lookupMayEnd ?? (plan ? plan.providers.length > 1 : canFailOver);
      const provider = at(name);
      const context = Context.current();
      // A retry, or attempt 1 recorded by an earlier try (a worker that died mid-charge, a local
      // try whose answer was lost): the PSP may hold a charge under this key, so ask it first.
      const retry = context.info.attempt > 1 || triedBefore || input.localTry !== undefined;
      // A kind that resolves a lost answer by replaying the request under its key has no lookup:
      // the create is sent again and answers what the first one did. Only a lookup that reads
      // what the create wrote proves, by finding none, that nothing was charged (§3.8).
      const { unknownOutcome } = capabilitiesOf(provider);
      const lookFirst = retry && unknownOutcome !== 'replay';
      const where = { payment_id: input.paymentId, provider: name, attempt: input.attempt, step_try: context.info.attempt, local: context.info.isLocal };
      // This try's number at this PSP under this sub-key (the run's local first try counts).
      const tries = context.info.attempt + (input.localTry ? 1 : 0);
      const previous = context.info.heartbeatDetails as { noneFound?: unknown; clean?: unknown; answeredFailure?: unknown } | undefined;
      let noneFound = typeof previous?.noneFound === 'number' ? previous.noneFound : 0;
      // Whether nothing can have been charged under this key so far: true on the very first
      // try, after tries that each were refused before sending, or once a lookup found nothing.
      // Carried from try to try in the heartbeat; lost, it errs on the side of "maybe charged".
      let clean = context.info.attempt > 1 ? previous?.clean === true : input.localTry ? input.localTry === 'not_sent' : !triedBefore;
      let sending = false;
      // Whether the last send under this key failed with an answer of the PSP's (a 5xx): that
      // request is over at the PSP, so a lookup finding nothing after it is certain.
      let answeredFailure = context.info.attempt > 1 && previous?.answeredFailure === true;
      // The heartbeat's details name the PSP and attempt: the Web UI shows them on the pending
      // activity while its outcome is unknown (the memo learns them only from its answer).
      const details = () => ({ provider: name, attempt: input.attempt, noneFound, clean, answeredFailure });
      const beat = () => {
        if (!context.info.isLocal) context.heartbeat(details());
      };
      if (retry) beat();
      // Every try feeds the PSP's health; only a payment's first attempt, on the step's first try, counts toward routing's estimates.
      const firstAttempt = input.attempt === 1 && context.info.attempt === 1 && !triedBefore && input.localTry === undefined;
      const count = (outcome: RouteOutcomeInput['outcome']) => {
        if (!routeOutcome) return;
        const { segment } = paymentSegment({ paymentMethod: input.paymentMethod, currency: input.currency, ...(input.savedMethod ? { savedCard: { brand: input.savedMethod.card.brand } } : {}) });
        void routeOutcome({ provider: name, segment, outcome, firstAttempt, tenantScope: plan?.tenantScope ?? null }).catch((error: unknown) =>
          log.warn('routing outcome not counted', { ...where, error: String((error as Error)?.message ?? error) }),
        );
      };
      const notCharged = (outcome: 'rejected' | 'not_sent' | 'not_charged', errorCode: string, message: string): ChargeAttemptResult => {
        log.warn('nothing was charged at this provider; the payment may move on', { ...where, outcome, error_code: errorCode });
        return { kind: 'not_charged', outcome, errorCode, message, ...(plan ? { plan } : {}) };
      };
      try {
        const answered = await providerCall<ChargeAttemptResult>(async (signal) => {
          if (lookFirst) {
            const existing = await findCharge(provider, input.paymentId, signal, input.attempt);
            log.info('charge looked up before retrying', { ...where, found: existing?.id ?? null });
            if (existing) return { kind: 'charge', charge: existing, ...(plan ? { plan } : {}) };
            clean = true;
            noneFound += 1;
            beat();
            // The PSP had its tries: nothing more is sent; two lookups finding none prove nothing was charged.
            if (canFailOver && unknownOutcome === 'lookup' && tries > transientTries && (lookupMayEnd || answeredFailure)) {
              if (noneFound >= LOOKUPS_FINDING_NONE_BEFORE_NOT_CHARGED) {
                return answeredFailure
                  ? notCharged('not_charged', PSP_ERROR_NONE_FOUND, `the provider answered each try with an error, and ${noneFound} lookups by our key found no charge`)
                  : notCharged('not_charged', 'outcome_unknown_none_found', `after lost answers, ${noneFound} lookups by our key found no charge`);
              }
              throw new Error(`${name} had its ${transientTries} tries and its lookup found no charge: asking it once more before moving on`);
            }
          }
          // Nothing charged so far (a first try, or a lookup that found none): past a recovery's end, nothing is sent.
          if (clean && input.sendBefore !== undefined && Date.now() >= input.sendBefore) {
            return notCharged('not_sent', 'recovery_window_elapsed', 'the recovery’s attempts had ended when this step ran; nothing was sent');
          }
          log.info('charging', { ...where, amount_minor: input.amountMinor, currency: input.currency, capture: input.capture });
          sending = true;
          return { kind: 'charge', charge: await createCharge(provider, name, input, input.attempt, signal), ...(plan ? { plan } : {}) };
        }, details);
        // Past a recovery's end nothing was sent: no outcome of the PSP's.
        if (answered.kind !== 'charge') {
          if (answered.errorCode !== 'recovery_window_elapsed') count('error');
        }
        else if (answered.charge.status === 'succeeded' || answered.charge.status === 'requires_capture') count('approved');
        else if (answered.charge.status === 'declined') count('declined');
        else count('answered');
        return answered;
      } catch (error) {
        const refused = failureType(error) === FailureType.ProviderRejected;
        // A call held back by the PSP's rate limit (provider/call-limits.ts) met no PSP: it counts nothing.
        if (!(error instanceof ProviderCallDeferredError)) count(refused ? 'answered' : 'error');
        // A refusal at the last PSP is the run's to record when the step decided the route.
        if (!canFailOver && !(refused && plan)) throw error;
        if (refused) {
          const code = String((error as ApplicationFailure).details?.[0] ?? 'provider_rejected');
          return notCharged('rejected', code, PROVIDER_REJECTED_MESSAGE);
        }
        const notSent = error instanceof ProviderUnavailableError && error.notSent;
        // A create that may have reached the PSP leaves the outcome unknown until a lookup answers.
        if (sending && !notSent) clean = false;
        if (sending) answeredFailure = error instanceof ProviderUnavailableError && error.status !== undefined && error.status >= 500;
        beat();
        if (!(clean && notSent)) throw error; // unknown outcome: retried here, lookup first
        if (tries >= transientTries) return notCharged('not_sent', 'connection_refused', `the provider refused the connection on each of ${tries} tries; nothing was sent`);
        // Nothing sent: tried here again; the run's local first try says so to the activity that takes it over.
        throw ApplicationFailure.create({ type: FailureType.ProviderNotReached, message: `${name} refused the connection (try ${tries} of ${transientTries}); nothing was sent`, cause: error });
      }
    },
    /** Captures an authorization (all of it, or amountMinor of it) once. */
    async captureCharge(input: ChargeStepInput & { amountMinor: number; currency?: string }): Promise<ProviderCharge> {
      const provider = at(input.provider);
      return providerCall(async (signal) => {
        if (looksUpFirst(provider)) {
          const existing = await findCharge(provider, input.paymentId, signal, input.attempt);
          if (existing && existing.status === 'succeeded') return existing;
        }
        return provider.captureCharge(
          { idempotencyKey: providerSubKey.capture(input.paymentId), chargeId: input.chargeId, amountMinor: input.amountMinor, ...(input.currency ? { currency: input.currency } : {}) },
          { signal },
        );
      });
    },

    /** Voids an uncaptured authorization once (cancel, expiry, or compensation). */
    async voidCharge(input: ChargeStepInput): Promise<ProviderCharge> {
      const provider = at(input.provider);
      return providerCall(async (signal) => {
        if (looksUpFirst(provider)) {
          const existing = await findCharge(provider, input.paymentId, signal, input.attempt);
          if (existing && existing.status === 'canceled') return existing;
        }
        return provider.voidCharge({ idempotencyKey: providerSubKey.void(input.paymentId), chargeId: input.chargeId, reference: input.paymentId }, { signal });
      });
    },

    /**
     * The charge as the PSP holds it now: the status poll of a waiting payment. Reads only, so
     * it needs no sub-key; an unknown outcome is retried like any provider call.
     */
    async retrieveCharge(input: ChargeStepInput): Promise<ProviderCharge> {
      const provider = at(input.provider);
      return providerCall((signal) => provider.retrieveCharge(input.chargeId, { signal }));
    },

    /**
     * The customer is back from the challenge at a PSP whose challengeReturn is `orchestrator`:
     * the PSP's details call with what the customer brought back answers the charge's outcome.
     * One call per distinct result (its sub-key names the result's hash), replayed by the PSP
     * under that key on a retry; a result the PSP refuses changes nothing.
     */
    async completeChallenge(input: ChargeStepInput & { redirectResult: string; amountMinor: number; currency: string; capture: boolean }): Promise<ProviderCharge> {
      const provider = at(input.provider);
      const complete = provider.completeChallenge?.bind(provider);
      if (capabilitiesOf(provider).challengeReturn !== 'orchestrator' || !complete) {
        throw ApplicationFailure.create({ type: FailureType.ProviderRejected, message: 'this PSP completes no challenge by a details call', nonRetryable: true, details: ['challenge_return_unsupported'] });
      }
      const idempotencyKey = providerSubKey.challengeReturn(input.paymentId, createHash('sha256').update(input.redirectResult).digest('hex'));
      return providerCall((signal) =>
        complete({ idempotencyKey, chargeId: input.chargeId, redirectResult: input.redirectResult, amountMinor: input.amountMinor, currency: input.currency, reference: input.paymentId, capture: input.capture }, { signal }),
      );
    },

    /**
     * Refunds part or all of a captured charge once, under the given sub-key, at the PSP holding
     * the charge, in the currency of the refund (or payment) its reference names.
     */
    async refundCharge(input: { subKey: string; chargeId: string; amountMinor: number; reference: string; provider?: string }): Promise<ProviderRefund> {
      const provider = at(input.provider);
      const currency = currencyOfRefund ? await currencyOfRefund(input.reference) : null;
      return providerCall(async (signal) => {
        if (looksUpFirst(provider)) {
          const existing = await provider.findRefundByIdempotencyKey(input.subKey, { signal });
          if (existing) return existing;
        }
        return provider.createRefund(
          { idempotencyKey: input.subKey, chargeId: input.chargeId, amountMinor: input.amountMinor, reference: input.reference, ...(currency ? { currency } : {}) },
          { signal },
        );
      });
    },
  };
}

/** A saved method as one PSP charges it: its own token where it saved the card, else by the card network's transaction id. */
function savedMethodAt(saved: SavedMethodCharge, provider: string) {
  return { token: Object.hasOwn(saved.tokens, provider) ? saved.tokens[provider]! : null, networkTransactionId: saved.networkTransactionId, card: saved.card };
}

/** The type of a Temporal failure, if it is one. */
function failureType(error: unknown): string | undefined {
  return error instanceof ApplicationFailure ? (error.type ?? undefined) : undefined;
}

export type ProviderSteps = ReturnType<typeof createProviderSteps>;
