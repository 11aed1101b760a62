import { ApplicationFailure, log } from '@temporalio/activity';
import { ensureIntent, OrderTakenError } from '../db/payments';
import type { Db, Sql } from '../db/connect';
import type { PaymentWorkflowInput } from '../shared/definitions';
import { beginAttempt, beginFirstAttempt, finishAttempt, listAttempts } from '../db/attempts';
import { DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES, type AttemptOutcome, type RoutePlan } from '../domain/attempts';
import type { RouteRequest } from '../shared/definitions';
import type { ProviderRegistry } from '../provider/registry';
import { step, workflowId } from './record-step';
import { findTenantRouting } from '../db/tenants';
import { orderWithHealth, routeCandidates, Routing, type ProviderHealthView } from '../domain/routing';

/** Decides the PSPs a payment is tried at, in order (the routing; see planRouteFor). */
export type RoutePlanner = (request: RouteRequest, context: { sql: Sql; providers: ProviderRegistry; health?: ProviderHealthView }) => Promise<RoutePlan>;

/**
 * The routing of a payment (issue 22): the tenant's routing (tenants.routing, set with PATCH
 * /admin/tenants/{id}) decides the order of the configured PSPs (domain/routing.ts
 * routeCandidates: the first matching rule's list, else the split's pick then the fallback
 * order, else the configured order), then the worker's circuit breaker moves PSPs that are
 * failing to the end (worker/provider-health.ts; never drops one). A stored routing that no
 * longer validates (a PSP removed from PROVIDERS since) is read as far as it goes: unknown
 * names are skipped, and nothing usable means the configured order.
 */
export const planRouteFor: RoutePlanner = async (request, { sql, providers, health }) => {
  const stored = await findTenantRouting(sql, request.tenantId);
  const parsed = stored === null ? null : Routing.safeParse(stored);
  if (parsed && !parsed.success) log.warn('tenant routing unreadable; the configured order is used', { tenant_id: request.tenantId });
  const decision = routeCandidates(parsed?.success ? parsed.data : null, request, providers.names);
  return health ? orderWithHealth(decision, health) : decision;
};

/** What a payment's route is decided from: the tenant's routing, the configured PSPs, the breaker. */
interface RouteDeps {
  sql: Sql;
  providers: ProviderRegistry;
  route?: RoutePlanner;
  health?: ProviderHealthView;
}

/**
 * The PSPs to try for a payment, in order, and why, as configured here: names not configured
 * are dropped (a plan naming none falls back to the default provider).
 */
function routePlanning({ sql, providers, health, route }: RouteDeps): (request: RouteRequest) => Promise<RoutePlan> {
  const planner = route ?? planRouteFor;
  return async (request) => {
    const planned = await planner(request, { sql, providers, ...(health ? { health } : {}) });
    const known = [...new Set(planned.providers)].filter((name) => providers.has(name));
    const dropped = planned.providers.filter((name) => !providers.has(name));
    if (dropped.length) log.warn('route names providers not configured here; dropped', { payment_id: request.paymentId, dropped });
    return {
      providers: known.length ? known : [providers.defaultName],
      reason: known.length ? planned.reason : `${planned.reason}; no configured provider named, default used`,
      retryableDeclineCodes: planned.retryableDeclineCodes ?? [...DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES],
    };
  };
}

/**
 * Persists the payment's intent if a start in doubt left the run without it (db/payments.ts
 * ensureIntent). An order taken meanwhile fails the run for good: nothing was charged yet, and
 * the sweeper records the key's answer.
 */
async function persistIntentAgain(tx: Db, intent: PaymentWorkflowInput): Promise<void> {
  await ensureIntent(tx, intent, workflowId()).catch((error: unknown) => {
    if (error instanceof OrderTakenError) throw ApplicationFailure.nonRetryable(error.message);
    throw error;
  });
}

/** A plan whose first PSP is the one attempt 1 was recorded at (a repeated step keeps it). */
function keepingFirst(plan: RoutePlan, first: string): RoutePlan {
  return { ...plan, providers: [first, ...plan.providers.filter((name) => name !== first)] };
}

/**
 * Decides a payment's route inside its first charge attempt (activities/provider-steps.ts
 * chargeAttempt with `route`; workflows/payment.ts, patched 'plan-in-charge'): no step of its
 * own. One statement records attempt 1 at the plan's first PSP, or finds the PSP an earlier
 * try of the step recorded, and points payments.provider there: a retried attempt charges
 * where the first try may have charged, whatever the breaker says by then.
 */
export function createFirstAttemptPlanner(deps: RouteDeps): (request: RouteRequest) => Promise<RoutePlan> {
  const plan = routePlanning(deps);
  return async (request) => {
    const planned = await plan(request);
    let first = await beginFirstAttempt(deps.sql, request.paymentId, planned.providers[0]!);
    if (first === null && request.intent) {
      // No payment row: the safety net for a start in doubt whose claim and intent were lost
      // while the run had started (the API keeps them for the retry, so this should not happen).
      const intent = request.intent;
      first = await deps.sql.begin(async (tx) => {
        await persistIntentAgain(tx, intent);
        return beginFirstAttempt(tx, request.paymentId, planned.providers[0]!);
      });
    }
    // Retryable: a concurrent try's row becomes visible to the next statement.
    if (first === null) throw new Error(`attempt 1 of ${request.paymentId} could not be recorded (no payment row, or a concurrent try); asking again`);
    return keepingFirst(planned, first);
  };
}

/**
 * The routing steps of the payment workflow (local activities, like the record steps) of runs
 * begun before 'plan-in-charge': the plan, and the attempts' records (payment_attempts;
 * payments.provider).
 */
export function createRouteSteps(deps: RouteDeps) {
  const { sql } = deps;
  const plan = routePlanning(deps);
  return {
    /**
     * The PSPs to try for this payment, in order, and why; records attempt 1 as begun at the
     * first. Repeated (a retried step), it keeps the PSP attempt 1 was recorded at first.
     * Runs begun since 'plan-in-charge' decide this in their first chargeAttempt instead.
     */
    async planRoute(input: RouteRequest): Promise<RoutePlan> {
      const planned = await plan(input);
      return step(sql, async (tx) => {
        if (input.intent) await persistIntentAgain(tx, input.intent);
        const [first] = await listAttempts(tx, input.paymentId);
        const ordered = first ? keepingFirst(planned, first.provider) : planned;
        await beginAttempt(tx, input.paymentId, 1, ordered.providers[0]!);
        return ordered;
      });
    },

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
