import { ApplicationFailure, log } from '@temporalio/activity';
import { ensureIntent, OrderTakenError } from '../db/payments';
import type { Sql } from '../db/connect';
import { beginAttempt, finishAttempt, listAttempts } from '../db/attempts';
import { DEFAULT_RETRYABLE_ELSEWHERE_DECLINE_CODES, type AttemptOutcome, type RoutePlan, type RouteRequest } from '../domain/attempts';
import type { ProviderRegistry } from '../provider/registry';
import { step, workflowId } from './record-step';

/** Decides the PSPs a payment is tried at, in order (the routing; see planRouteFor). */
export type RoutePlanner = (request: RouteRequest, context: { sql: Sql; providers: ProviderRegistry }) => Promise<RoutePlan>;

/**
 * ── ROUTING SEAM (issue 22) ─────────────────────────────────────────────────────────────
 * The one place the tenant's routing (tenants.routing, domain/routing.ts `routeCandidates`,
 * the circuit breaker of worker/provider-health.ts) decides the order of the PSPs. Until it
 * is wired here, every payment goes to the default provider only (no failover), which is
 * today's behaviour. The workflow does not change when it is wired: it asks planRoute for
 * `{ providers, reason }` and tries them in order (workflows/payment.ts).
 */
export const planRouteFor: RoutePlanner = async (_request, { providers }) => ({
  providers: [providers.defaultName],
  reason: 'default provider (no routing configured)',
});

/**
 * The routing steps of the payment workflow (local activities, like the record steps):
 * the plan, and the attempts' records (payment_attempts; payments.provider).
 */
export function createRouteSteps(deps: { sql: Sql; providers: ProviderRegistry; route?: RoutePlanner }) {
  const { sql, providers } = deps;
  const planner = deps.route ?? planRouteFor;
  return {
    /**
     * The PSPs to try for this payment, in order, and why; records attempt 1 as begun at the
     * first. Names not configured here are dropped (a plan naming none falls back to the
     * default). Repeated (a retried step), it keeps the PSP attempt 1 was recorded at first.
     */
    async planRoute(input: RouteRequest): Promise<RoutePlan> {
      const planned = await planner(input, { sql, providers });
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
