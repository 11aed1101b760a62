import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { detachPaymentMethod, getPaymentMethod, paymentMethodEvent } from '../../db/customers-payment-methods';
import { getCustomer } from '../../db/customers';
import { findTenantRouting } from '../../db/tenants';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import { paymentMethodResource } from '../../domain/resources';
import { routeCandidates, Routing } from '../../domain/routing';
import { chargesSavedCard, providerKind, supportsMethod } from '../../provider/registry';
import type { SavedMethodCharge } from '../../shared/customers';
import type { ApiDeps, AppEnv } from '../context';
import { runTransactional } from '../idempotency';
import { finalResponse, recordedReply } from '../typed-route';
import { DetachPaymentMethodBody, IdParam, PaymentMethod, type CreatePaymentBody } from '../schemas';
import { errorResponses, idempotencyKeyParameter, idempotentResponses, jsonContent, optionalBody } from './openapi';

export const detachPaymentMethodRoute = createRoute({
  method: 'post',
  path: '/v1/payment_methods/{id}/detach',
  tags: ['Customers'],
  summary: 'Detach a saved payment method (idempotent)',
  description: 'The method can no longer be charged; it leaves its customer\'s list. Detaching one already detached answers it as it is.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('payment method', 'pm_01jd6w8b3m4x0c2q7yk5h9t1ve'), body: { content: jsonContent(DetachPaymentMethodBody), required: false } },
  responses: {
    200: { description: 'The detached payment method.', content: jsonContent(PaymentMethod), headers: idempotentResponses.headers },
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'unsupported_media_type', 'idempotency_key_reused', 'service_unavailable']),
  },
});

/** What a payment request says of its card beyond payment_method: for whom, and a saved method of theirs. */
export interface PaymentMethodUse {
  customerId: string | null;
  savedMethod: SavedMethodCharge | null;
}

/** A refusal in the shape of a validation failure (api/app.ts): the field and why. */
const refuse = (path: string, message: string) => new ApiError('invalid_request', message, { issues: [{ path, code: 'custom', message }] });

/**
 * Checks what a POST /v1/payments asks of customers and saved methods, before anything is
 * claimed or charged: the customer is the tenant's; a saved payment method (our `pm_…` id) is
 * the tenant's, attached, and that customer's; off_session charges only such a method; and
 * the tenant's route can save the card (every PSP it may reach, its kind's `savedMethods`) or
 * charge the saved one (at least one PSP: refuseUnlessRouteSavesCards); and at least one PSP of
 * the route charges the payment's method (refuseUnlessRouteChargesMethod). Any of these refused:
 * 400 naming the field, nothing runs.
 */
export async function paymentMethodUse(deps: ApiDeps, tenantId: string, body: CreatePaymentBody): Promise<PaymentMethodUse> {
  let customerId: string | null = null;
  if (body.customer !== undefined) {
    const customer = looksLikeId('cus', body.customer) ? await getCustomer(deps.sql, tenantId, body.customer) : null;
    if (!customer) throw refuse('customer', `No such customer: ${body.customer}`);
    customerId = customer.id;
  }
  let savedMethod: SavedMethodCharge | null = null;
  if (looksLikeId('pm', body.payment_method)) {
    if (customerId === null) throw refuse('customer', 'a saved payment method is charged with its customer: give `customer`');
    if (body.setup_future_usage !== undefined) throw refuse('setup_future_usage', `payment method ${body.payment_method} is saved already`);
    const method = await getPaymentMethod(deps.sql, tenantId, body.payment_method);
    if (!method) throw refuse('payment_method', `No such payment method: ${body.payment_method}`);
    if (method.detached_at !== null) throw refuse('payment_method', `payment method ${method.id} is detached: it can no longer be charged`);
    if (method.customer_id !== customerId) throw refuse('payment_method', `payment method ${method.id} does not belong to customer ${customerId}`);
    savedMethod = {
      id: method.id,
      tokens: method.provider_tokens,
      networkTransactionId: method.network_transaction_id,
      card: { brand: method.card_brand, last4: method.card_last4, expMonth: method.card_exp_month, expYear: method.card_exp_year },
    };
  } else if (body.off_session === true) {
    throw refuse('payment_method', 'off_session charges a saved payment method of the customer (pm_…)');
  }
  if (savedMethod || body.setup_future_usage !== undefined) await refuseUnlessRouteSavesCards(deps, tenantId, body, savedMethod);
  await refuseUnlessRouteChargesMethod(deps, tenantId, body, savedMethod);
  return { customerId, savedMethod };
}

/** The configured PSPs the tenant's route may reach for this payment (domain/routing.ts routeCandidates). */
async function reachedBy(deps: ApiDeps, tenantId: string, body: CreatePaymentBody) {
  const connections = deps.config.PROVIDERS ?? [];
  const stored = await findTenantRouting(deps.sql, tenantId);
  const parsed = stored === null ? null : Routing.safeParse(stored);
  const route = routeCandidates(parsed?.success ? parsed.data : null, { paymentId: '', currency: body.currency, amountMinor: body.amount_minor, paymentMethod: body.payment_method }, connections.map((c) => c.name));
  return connections.filter((c) => route.providers.includes(c.name));
}

const named = (list: readonly { name: string; kind: string }[]) => list.map((c) => `${c.name} (${c.kind})`).join(', ');

/**
 * 400 when no PSP the tenant's route may reach charges the payment's method, by its kind's
 * declaration (provider/registry.ts supportsMethod; routing drops the others,
 * activities/routing.ts). The route is read only when some configured PSP does not charge the
 * method: a payment every PSP takes costs no query.
 */
async function refuseUnlessRouteChargesMethod(deps: ApiDeps, tenantId: string, body: CreatePaymentBody, saved: SavedMethodCharge | null): Promise<void> {
  const method = { paymentMethod: body.payment_method, ...(saved ? { savedCard: { brand: saved.card.brand } } : {}) };
  const charges = (c: { kind: string }) => supportsMethod(c.kind, method);
  const connections = deps.config.PROVIDERS ?? [];
  if (connections.every(charges)) return;
  const reached = await reachedBy(deps, tenantId, body);
  if (reached.some(charges)) return;
  throw refuse('payment_method', `no PSP on this tenant's route supports payment method ${body.payment_method}: ${named(reached)} do not charge it`);
}

/**
 * 400 when the tenant's route cannot take the payment: setup_future_usage where a PSP it may
 * reach is of a kind that cannot save cards (`savedMethods`); a saved method where no PSP it may
 * reach can charge it (its own token there, or a kind that takes network transaction ids:
 * routing then skips the PSPs that cannot, activities/routing.ts).
 */
async function refuseUnlessRouteSavesCards(deps: ApiDeps, tenantId: string, body: CreatePaymentBody, saved: SavedMethodCharge | null): Promise<void> {
  if ((deps.config.PROVIDERS ?? []).length === 0) return;
  const reached = await reachedBy(deps, tenantId, body);
  if (saved === null) {
    const unable = reached.filter((c) => !providerKind(c.kind).capabilities.savedMethods);
    if (unable.length) throw refuse('setup_future_usage', `saving cards is not supported by the PSPs on this tenant's route: ${named(unable)}`);
    return;
  }
  if (!reached.some((c) => chargesSavedCard(providerKind(c.kind).capabilities, Object.hasOwn(saved.tokens, c.name)))) {
    throw refuse('payment_method', `no PSP on this tenant's route can charge payment method ${saved.id}: ${named(reached)} hold no token of it and take no network transaction id of another processor`);
  }
}

export function paymentMethodRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(detachPaymentMethodRoute, async (c) => {
    const { id } = c.req.valid('param');
    const tenantId = c.var.tenant.id;
    const known = looksLikeId('pm', id) ? await getPaymentMethod(deps.sql, tenantId, id) : null;
    if (!known) throw new ApiError('not_found', `No such payment method: ${id}`);
    return recordedReply(c, detachPaymentMethodRoute, await runTransactional(c, deps, detachPaymentMethodRoute, {
      params: { id },
      body: optionalBody(DetachPaymentMethodBody, c.req.valid('json')),
      resourceId: id,
      execute: async (tx) => {
        const result = await detachPaymentMethod(tx, tenantId, id);
        if (!result) throw new ApiError('not_found', `No such payment method: ${id}`);
        if (result.detached) await paymentMethodEvent(tx, result.method, 'payment_method.detached');
        return finalResponse(detachPaymentMethodRoute, 200, paymentMethodResource(result.method));
      },
    }));
  });

  return app;
}
