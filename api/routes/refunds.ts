import { formatAmount } from '../../domain/money';
import { createRoute, OpenAPIHono, type z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { getRefund, listRefunds } from '../../db/refunds';
import { ApiError } from '../../domain/errors';
import { looksLikeId, newId, refundWorkflowId } from '../../domain/ids';
import { refundLocation, refundResource, type PaymentRow } from '../../domain/resources';
import { TenantIdKey } from '../../shared/definitions';
import type { RefundWorkflowInput } from '../../shared/refunds';
import { OrderIdKey } from '../../shared/payments';
import type { ApiDeps, AppEnv } from '../context';
import { recordedReply } from '../typed-route';
import { tenantPayment } from '../tenant-payment';
import { runIdempotent, startOrAttach, type IdempotentOperation } from '../idempotency';
import { CreateRefundBody, IdParam, ListRefundsQuery, listOf, Refund } from '../schemas';
import { errorResponses, idempotentResponses, jsonContent, idempotencyKeyParameter, paymentIdExample } from './openapi';
import { kindsWhere } from '../../provider/registry';

export const createRefund = createRoute({
  method: 'post',
  path: '/v1/payments/{id}/refunds',
  tags: ['Refunds'],
  summary: 'Refund part or all of a captured payment (idempotent)',
  description:
    'Several partial refunds are allowed; their total never exceeds the captured amount (409 `refund_exceeds_captured`), ' +
    'and a refund never returns what a chargeback took through the card network (waiting, under review or lost): past what the network left, 409 `payment_disputed` ' +
    'with `amount_refundable_minor`; a chargeback won back makes its amount refundable again. ' +
    'however many arrive at once. Each refund runs under its own key and provider sub-key, in the payment’s currency. ' +
    'At a PSP whose refunds are confirmed by notification (kinds ' + kindsWhere((c) => c.modifications === 'notified') + '), the refund is `pending` (202, its amount reserved, nothing posted to the ledger) ' +
    'until its notification of the refund: a success makes it `succeeded` (201 under its key), a refusal makes it ' +
    '`failed` (402 `refund_failed`, the reservation given back); with no notification within seven days it stays `pending` for an operator.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('payment', paymentIdExample), body: { content: jsonContent(CreateRefundBody), required: true } },
  responses: {
    201: { description: 'Refunded.', content: jsonContent(Refund), headers: idempotentResponses.headers },
    ...idempotentResponses.pending(Refund),
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'refund_failed', 'not_found', 'refund_exceeds_captured', 'payment_not_refundable', 'payment_disputed', 'idempotency_key_reused', 'operation_failed', 'service_unavailable']),
  },
});

const listPaymentRefunds = createRoute({
  method: 'get',
  path: '/v1/payments/{id}/refunds',
  tags: ['Refunds'],
  summary: "List a payment's refunds, newest first",
  request: { params: IdParam('payment', paymentIdExample), query: ListRefundsQuery },
  responses: { 200: { description: 'A page of refunds.', content: jsonContent(listOf(Refund, 'RefundList')) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

const getRefundRoute = createRoute({
  method: 'get',
  path: '/v1/refunds/{id}',
  tags: ['Refunds'],
  summary: 'Retrieve a refund',
  request: { params: IdParam('refund', 're_01jd6w8b3m4x0c2q7yk5h9t1ve') },
  responses: { 200: { description: 'The refund.', content: jsonContent(Refund) }, ...errorResponses(['unauthorized', 'not_found']) },
});

/**
 * POST /v1/payments/{id}/refunds as one idempotent operation (api/idempotency.ts): the run
 * started or joined under the refund's key, and the refund as it stands for a 202. Whether the
 * payment can be refunded is the run's first step (activities/refunds.ts beginRefund). The
 * console's refund (api/console/actions.ts) runs this same operation.
 */
export function createRefundOperation(
  deps: ApiDeps,
  c: Context<AppEnv>,
  request: { id: string; payment: PaymentRow; body: z.output<typeof CreateRefundBody> },
): IdempotentOperation<typeof createRefund> {
  const tenantId = c.var.tenant.id;
  const { payment, body } = request;
  return {
    // The path's id as the client sent it: what the fingerprint covers.
    params: { id: request.id },
    body,
    claim: () => ({ workflowId: refundWorkflowId(tenantId, c.var.idempotencyKey), resourceId: newId('re') }),
    dispatch: (record, scope) => {
      const input: RefundWorkflowInput = {
        refundId: record.resource_id,
        tenantId,
        paymentId: payment.id,
        amountMinor: body.amount_minor,
        reason: body.reason,
        idempotency: scope,
        requestId: c.var.requestId,
      };
      return startOrAttach(deps, scope, 'refundWorkflow', {
        workflowId: record.workflow_id,
        resourceId: record.resource_id,
        args: [input],
        searchAttributes: [
          { key: TenantIdKey, value: tenantId },
          { key: OrderIdKey, value: payment.order_id },
        ],
        memo: { refund_id: record.resource_id, payment_id: payment.id, amount_minor: body.amount_minor, currency: payment.currency, request_id: c.var.requestId },
        summary: `Refund ${formatAmount(body.amount_minor, payment.currency)} of ${payment.id} · ${payment.order_id}`,
      });
    },
    pending: async (record) => {
      // Before the run has reserved it, the refund is what was asked for.
      const row = (await getRefund(deps.sql, tenantId, record.resource_id)) ?? {
        id: record.resource_id,
        tenant_id: tenantId,
        payment_id: payment.id,
        amount_minor: body.amount_minor,
        currency: payment.currency,
        status: 'pending' as const,
        reason: body.reason,
        refund_key: c.var.idempotencyKey,
        provider_refund_id: null,
        failure_code: null,
        failure_message: null,
        workflow_id: record.workflow_id,
        created_at: record.created_at,
        updated_at: record.created_at,
      };
      return { body: refundResource(row), location: refundLocation(row.id) };
    },
  };
}

export function refundRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(createRefund, async (c) => {
    const { id } = c.req.valid('param');
    const payment = await tenantPayment(deps.sql, c.var.tenant.id, id);
    return recordedReply(c, createRefund, await runIdempotent(c, deps, createRefund, createRefundOperation(deps, c, { id, payment, body: c.req.valid('json') })));
  });

  app.openapi(listPaymentRefunds, async (c) => {
    const { id } = c.req.valid('param');
    const query = c.req.valid('query');
    const payment = await tenantPayment(deps.sql, c.var.tenant.id, id);
    const page = await listRefunds(deps.sql, c.var.tenant.id, payment.id, { limit: query.limit, startingAfter: query.starting_after, endingBefore: query.ending_before });
    return c.json({ object: 'list' as const, data: page.rows.map(refundResource), has_more: page.hasMore }, 200);
  });

  app.openapi(getRefundRoute, async (c) => {
    const { id } = c.req.valid('param');
    const refund = looksLikeId('re', id) ? await getRefund(deps.sql, c.var.tenant.id, id) : null;
    if (!refund) throw new ApiError('not_found', `No such refund: ${id}`);
    return c.json(refundResource(refund), 200);
  });

  return app;
}
