import { ApplicationFailure, log } from '@temporalio/activity';
import { ensureIntent, orderHolder, OrderTakenError, recordRoutingDecision } from '../db/payments';
import type { Db, Sql } from '../db/connect';
import { FailureType } from '../shared/definitions';
import type { DecideRouteInput, DecidedRoute, RouteRequest } from '../shared/routing';
import { paymentSegment } from '../domain/routing-segment';
import type { PaymentWorkflowInput } from '../shared/payments';
import { beginAttempt, beginFirstAttempt, finishAttempt } from '../db/payments-attempts';
import { DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES, type AttemptOutcome, type RoutePlan } from '../domain/payments-attempts';
import { capabilitiesOf, chargesSavedCard, supportsMethod, type ProviderRegistry } from '../provider/registry';
import { step, workflowId } from './record-step';
import { findTenantRouting } from '../db/tenants';
import { routeCandidates, Routing } from '../domain/routing';
import { releaseProbe } from '../db/routing';
import { hardDeclineBeforeFirstAttempt } from '../db/recovery';
import { offSessionRefusal } from '../domain/recovery';

/** Attempt 1's route, and whether an earlier try of attempt 1 recorded it (and so may have charged). */
export interface FirstAttempt {
  plan: RoutePlan;
  triedBefore: boolean;
}

/** Decides the PSPs a payment is tried at, in order (the routing; see planRouteFor). */
export type RoutePlanner = (request: RouteRequest, context: { sql: Sql; providers: ProviderRegistry }) => Promise<RoutePlan>;

/**
 * The routing of a payment without the shared health: the tenant's routing (tenants.routing,
 * set with PATCH /admin/tenants/{id}) decides the order of the configured PSPs
 * (domain/routing.ts routeCandidates: the first matching rule's list, else the split's pick
 * then the fallback order, else the configured order). A worker with decideRoute (every worker
 * createActivities builds) routes by it instead (decidedByStrategy). A stored routing that no
 * longer validates (a PSP removed from PROVIDERS since) is read as far as it goes: unknown
 * names are skipped, and nothing usable means the configured order.
 */
export const planRouteFor: RoutePlanner = async (request, { sql, providers }) => {
  const stored = await findTenantRouting(sql, request.tenantId);
  const parsed = stored === null ? null : Routing.safeParse(stored);
  if (parsed && !parsed.success) log.warn('tenant routing unreadable; the configured order is used', { tenant_id: request.tenantId });
  return routeCandidates(parsed?.success ? parsed.data : null, request, providers.names);
};

/** What a payment's route is decided from: the tenant's routing, the configured PSPs, the shared health. */
interface RouteDeps {
  sql: Sql;
  providers: ProviderRegistry;
  route?: RoutePlanner;
  /**
   * The decision over the shared state (activities/routing-decision.ts decideRoute): every
   * tenant's route, static or success-rate, with the PSPs out of first place by the shared
   * health (db/routing.ts routing_health) moved last and a half-open one probed.
   */
  decide?: (input: DecideRouteInput) => Promise<DecidedRoute>;
  /** The payment's charge budget in ms (PAYMENT_CHARGE_BUDGET_SECONDS), carried with the plan to the run. */
  chargeBudgetMs?: number;
}

/**
 * The route's PSPs whose kind charges the payment's method (provider/registry.ts
 * supportsMethod: each kind declares its methods; an unknown test method is supported nowhere).
 * A client without a kind (a test's fake) charges any.
 */
function chargingTheMethod(providers: ProviderRegistry, names: string[], request: RouteRequest): { able: string[]; unable: string[] } {
  const saved = request.intent.savedMethod;
  const method = { paymentMethod: request.paymentMethod, ...(saved ? { savedCard: { brand: saved.card.brand } } : {}) };
  const charges = (name: string) => {
    const { kind } = providers.get(name);
    return kind === undefined || supportsMethod(kind, method);
  };
  return { able: names.filter(charges), unable: names.filter((name) => !charges(name)) };
}

/** The payment's routing segment (domain/routing-segment.ts): its test method's or saved card's network, currency, method type. */
function segmentOf(request: RouteRequest) {
  const saved = request.intent.savedMethod;
  return paymentSegment({ paymentMethod: request.paymentMethod, currency: request.currency, ...(saved ? { savedCard: { brand: saved.card.brand } } : {}) });
}

/** The finest level's key of the payment's segment (`visa:EUR:card`), as its attempts keep it. */
const segmentKeyOf = (request: RouteRequest): string => segmentOf(request).levels[0]!;

/**
 * The route decided by `decide` for every strategy, as a plan; it carries the decision's record
 * only for a success-rate tenant (a payment routed statically shows no `routing`). Null when the
 * worker has no `decide` or a planner of its own (`route`): that planner decides.
 */
async function decidedByStrategy(deps: RouteDeps, request: RouteRequest): Promise<(RoutePlan & { probe?: string }) | null> {
  if (!deps.decide || deps.route) return null;
  const { segment } = segmentOf(request);
  const decided = await deps.decide({ paymentId: request.paymentId, tenantId: request.tenantId, amountMinor: request.amountMinor, currency: request.currency, paymentMethod: request.paymentMethod, segment });
  return {
    providers: decided.providers,
    reason: decided.decision.reason,
    ...(decided.retryableDeclineCodes ? { retryableDeclineCodes: decided.retryableDeclineCodes } : {}),
    ...(decided.decision.strategy === 'success_rate' ? { decision: decided.decision } : {}),
    tenantScope: decided.tenantScope,
    ...(decided.probe !== undefined ? { probe: decided.probe } : {}),
  };
}

/**
 * The PSPs to try for a payment, in order, and why, as configured here: names not configured
 * are dropped (a plan naming none falls back to the default provider).
 */
function routePlanning({ sql, providers, route, decide }: RouteDeps): (request: RouteRequest) => Promise<RoutePlan & { probe?: string }> {
  const planner = route ?? planRouteFor;
  return async (request) => {
    const planned: RoutePlan & { probe?: string } = (await decidedByStrategy({ sql, providers, ...(route ? { route } : {}), ...(decide ? { decide } : {}) }, request)) ?? (await planner(request, { sql, providers }));
    const named = [...new Set(planned.providers)].filter((name) => providers.has(name));
    const dropped = planned.providers.filter((name) => !providers.has(name));
    if (dropped.length) log.warn('route names providers not configured here; dropped', { payment_id: request.paymentId, dropped });
    // A PSP whose kind does not charge the payment's method is no candidate; none left fails the
    // payment before any PSP is asked (the API refused it when no PSP of its route could).
    const { able: configured, unable: methodless } = chargingTheMethod(providers, named, request);
    if (named.length && !configured.length) {
      const message = `No PSP on this payment's route charges payment method ${request.paymentMethod}: ${methodless.join(', ')} do not support it; nothing was charged.`;
      throw ApplicationFailure.create({ type: FailureType.PaymentMethodUnsupported, message, nonRetryable: true });
    }
    // A saved card goes only where it can be charged: its own token there, or a kind that takes
    // the network transaction id (the API refused the payment when no PSP of its route could).
    const saved = request.intent.savedMethod;
    const unable = saved ? configured.filter((name) => !chargesSavedCard(capabilitiesOf(providers.get(name)), Object.hasOwn(saved.tokens, name))) : [];
    const known = configured.filter((name) => !unable.includes(name));
    const skipped = [...(methodless.length ? [`${methodless.join(', ')} skipped: payment method not supported`] : []), ...(unable.length ? [`${unable.join(', ')} skipped: cannot charge this saved card`] : [])];
    const reason = skipped.length ? `${planned.reason} (${skipped.join('; ')})` : planned.reason;
    return {
      providers: known.length ? known : [providers.defaultName],
      reason: known.length ? reason : `${reason}; no configured provider named, default used`,
      retryableDeclineCodes: planned.retryableDeclineCodes ?? [...DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES],
      ...(planned.decision ? { decision: planned.decision, tenantScope: planned.tenantScope ?? null } : {}),
      ...(planned.probe !== undefined ? { probe: planned.probe } : {}),
    };
  };
}

/** A plan whose first PSP is the one attempt 1 was recorded at (a repeated step keeps it). */
function keepingFirst(plan: RoutePlan, first: string): RoutePlan {
  return { ...plan, providers: [first, ...plan.providers.filter((name) => name !== first)] };
}

/**
 * Persists the payment's intent again when a start in doubt left the run without it, then
 * records attempt 1 (db/payments.ts ensureIntent: the API gives a claim's intent back only when
 * its start failed as unreachable, yet such a start may have reached Temporal). The order guard
 * refusing it fails the attempt for good with OrderTaken (the run answers 409): nothing was
 * charged. A holder gone again meanwhile is retried (the intent may now be persisted).
 */
async function persistIntentAndBegin(deps: RouteDeps, intent: PaymentWorkflowInput, provider: string, segment: string): Promise<{ provider: string; earlier: boolean } | null> {
  return withIntent(deps.sql, intent, (tx) => beginFirstAttempt(tx, intent.paymentId, provider, segment));
}

/**
 * Runs `then` in one transaction after persisting the payment's intent again if it is missing
 * (ensureIntent). The order guard refusing the intent is OrderTaken, for good (the run answers
 * 409); a holder gone again meanwhile is retried. The first charge attempt uses it, and so does
 * a recovering payment's first reservation in its card's budget (activities/recovery.ts).
 */
export async function withIntent<T>(sql: Sql, intent: PaymentWorkflowInput, then: (tx: Db) => Promise<T>): Promise<T> {
  try {
    return (await sql.begin(async (tx) => {
      await ensureIntent(tx, intent, workflowId());
      return then(tx);
    })) as T;
  } catch (error) {
    if (!(error instanceof OrderTakenError)) throw error;
    const holder = await orderHolder(sql, intent.tenantId, intent.orderId);
    if (holder === null) throw new Error(`${error.message}; its holder let it go meanwhile: asking again`);
    throw ApplicationFailure.create({ type: FailureType.OrderTaken, message: error.message, nonRetryable: true, details: [holder.id] });
  }
}

/**
 * Decides a payment's route inside its first charge attempt (activities/provider-steps.ts
 * chargeAttempt with `route`): no step of its own. One statement records attempt 1 at the
 * plan's first PSP, or finds the PSP an earlier try of the step recorded, and points
 * payments.provider there: a retried attempt charges where the first try may have charged,
 * whatever the breaker says by then, and is told that an earlier try may have charged there
 * (`triedBefore`: a worker that died mid-charge, a local try whose answer was lost), so it asks
 * the PSP before it charges. The payment's intent is persisted here, and only here, when the
 * run finds it missing (the API persists it with the key's claim).
 */
export function createFirstAttemptPlanner(deps: RouteDeps): (request: RouteRequest) => Promise<FirstAttempt> {
  const plan = routePlanning(deps);
  return async (request) => {
    await refuseHeldCard(deps.sql, request);
    const planned = await plan(request);
    const provider = planned.providers[0]!;
    const segment = segmentKeyOf(request);
    const first = (await beginFirstAttempt(deps.sql, request.paymentId, provider, segment)) ?? (await persistIntentAndBegin(deps, request.intent, provider, segment));
    // Retryable: a concurrent try's row becomes visible to the next statement.
    if (first === null) throw new Error(`attempt 1 of ${request.paymentId} could not be recorded (a concurrent try); asking again`);
    // An earlier try charged elsewhere: the probe the shared health gave this plan's first PSP is not ours.
    if (first.provider !== provider && planned.probe === provider) await releaseProbe(deps.sql, provider);
    // The decision shown for the payment is the first try's: a retried step keeps it.
    const { probe: _probe, ...route } = planned;
    const decision = route.decision ? await recordRoutingDecision(deps.sql, request.paymentId, route.decision) : undefined;
    const budget = deps.chargeBudgetMs !== undefined ? { chargeBudgetMs: deps.chargeBudgetMs } : {};
    return { plan: keepingFirst(decision ? { ...route, decision, ...budget } : { ...route, ...budget }, first.provider), triedBefore: first.earlier };
  };
}

/**
 * An off-session payment of a saved card whose last off-session charge got a hard decline
 * (db/recovery.ts, docs/recovery.md) is not charged: the attempt fails for good with
 * OffSessionRefused, before any attempt is recorded or any PSP asked, carrying how the payment
 * ends (domain/recovery.ts offSessionRefusal: as that decline would end it). Once attempt 1 is
 * recorded (a retried step), it is never refused: that try may have charged.
 */
async function refuseHeldCard(sql: Sql, request: RouteRequest): Promise<void> {
  const { savedMethod, offSession } = request.intent;
  if (!savedMethod || offSession !== true) return;
  const held = await hardDeclineBeforeFirstAttempt(sql, savedMethod.id, request.paymentId);
  if (held === null) return;
  const refusal = offSessionRefusal(held);
  throw ApplicationFailure.create({ type: FailureType.OffSessionRefused, message: refusal.message, nonRetryable: true, details: [refusal] });
}

/** The routing steps of the payment workflow (local activities, like the record steps): the attempts' records. */
export function createRouteSteps(deps: RouteDeps) {
  const { sql } = deps;
  return {
    /**
     * Records how an attempt ended without the payment's outcome (nothing was charged there,
     * or a decline another PSP may not repeat) and, when the payment moves on, that the next
     * attempt began at the next PSP.
     */
    async recordAttempt(input: {
      paymentId: string;
      attempt: number;
      provider: string;
      outcome: Exclude<AttemptOutcome, 'pending'>;
      providerChargeId: string | null;
      errorCode: string | null;
      next: { attempt: number; provider: string } | null;
    }): Promise<void> {
      await step(sql, async (tx) => {
        await finishAttempt(tx, input.paymentId, input.attempt, input.provider, input);
        if (input.next) await beginAttempt(tx, input.paymentId, input.next.attempt, input.next.provider);
      });
      log.info('charge attempt recorded', { payment_id: input.paymentId, attempt: input.attempt, provider: input.provider, outcome: input.outcome, error_code: input.errorCode, next: input.next });
    },
  };
}

export type RouteSteps = ReturnType<typeof createRouteSteps>;
