import { findTenantRouting } from '../db/tenants';
import { orderWithHealth, routeCandidates, Routing, type ProviderHealthView } from '../domain/routing';
import type { RoutePlanner } from './route-steps';

/**
 * The routing seam's planner (issue 22; activities/route-steps.ts planRoute): the tenant's
 * routing (tenants.routing, set with PATCH /admin/tenants/{id}) decides the candidates among
 * the configured PSPs (domain/routing.ts routeCandidates: first matching rule, else the split's
 * pick by the payment id's hash then the fallback order, else the configured order), and the
 * worker's circuit breaker, when given, moves the PSPs whose circuit is open to the end
 * (orderWithHealth; injected: activities do not import the worker).
 *
 * planRoute runs as a local activity: its answer is recorded in the run's history, so a
 * replay never asks again, and a retried step keeps the PSP attempt 1 was recorded at.
 */
export function tenantRoutingPlanner(options: { health?: ProviderHealthView } = {}): RoutePlanner {
  return async (request, { sql, providers }) => {
    const stored = await findTenantRouting(sql, request.tenantId);
    // Validated when it was set; read back through the same schema (a row edited by hand that
    // no longer parses routes as if there were none, and says so).
    const parsed = stored === null ? null : Routing.safeParse(stored);
    const routing = parsed?.success ? parsed.data : null;
    const decision = routeCandidates(
      routing,
      { paymentId: request.paymentId, currency: request.currency, amountMinor: request.amountMinor, paymentMethod: request.paymentMethod },
      providers.names,
    );
    const planned = parsed && !parsed.success ? { ...decision, reason: `the tenant's stored routing is invalid, ignored; ${decision.reason}` } : decision;
    return options.health ? orderWithHealth(planned, options.health) : planned;
  };
}
