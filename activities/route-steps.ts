import { ApplicationFailure, log } from '@temporalio/activity';
import { ensureIntent, OrderTakenError } from '../db/payments';
import type { Sql } from '../db/connect';
import { beginAttempt, finishAttempt, listAttempts } from '../db/attempts';
import { DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES, type AttemptOutcome, type RoutePlan, type RouteRequest } from '../domain/attempts';
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

/**
 * The routing steps of the payment workflow (local activities, like the record steps):
 * the plan, and the attempts' records (payment_attempts; payments.provider).
 */
export function createRouteSteps(deps: { sql: Sql; providers: ProviderRegistry; route?: RoutePlanner; health?: ProviderHealthView }) {
  const { sql, providers, health } = deps;
  const planner = deps.route ?? planRouteFor;
  return {
    /**
     * The PSPs to try for this payment, in order, and why; records attempt 1 as begun at the
     * first. Names not configured here are dropped (a plan naming none falls back to the
     * default). Repeated (a retried step), it keeps the PSP attempt 1 was recorded at first.
     */
    async planRoute(input: RouteRequest): Promise<RoutePlan> {
      const planned = await planner(input, { sql, providers, ...(health ? { health } : {}) });
      const known = [...new Set(planned.providers)].filter((name) => providers.has(name));
      const dropped = planned.providers.filter((name) => !providers.has(name));
      if (dropped.length) log.warn('route names providers not configured here; dropped', { payment_id: input.paymentId, dropped });
      const ordered = known.length ? known : [providers.defaultName];
      return step(sql, async (tx) => {
        if (input.intent) {
          await ensureIntent(tx, input.intent, workflowId()).catch((error: unknown) => {
            // The run fails; the sweeper records the key's answer. Nothing was charged yet.
            if (error instanceof OrderTakenError) throw ApplicationFailure.nonRetryable(error.message);
            throw error;
          });
        }
        const [first] = await listAttempts(tx, input.paymentId);
        const order = first ? [first.provider, ...ordered.filter((name) => name !== first.provider)] : ordered;
        await beginAttempt(tx, input.paymentId, 1, order[0]!);
        return {
          providers: order,
          reason: known.length ? planned.reason : `${planned.reason}; no configured provider named, default used`,
          retryableDeclineCodes: planned.retryableDeclineCodes ?? [...DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES],
        };
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
