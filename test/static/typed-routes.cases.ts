/**
 * What the typed handlers (api/typed-route.ts) refuse, checked by the compiler: every line
 * after a `@ts-expect-error` must fail to typecheck, or tsc reports the directive as unused.
 * test/static/typed-routes.test.ts compiles this file alone, and once more with the directives
 * stripped to see each case fail for the reason its comment gives.
 */
import type { ApiDeps } from '../../api/context';
import { runIdempotent } from '../../api/idempotency';
import { cancelPayment, createPayment, getPaymentRoute } from '../../api/routes/payments';
import { createRefund } from '../../api/routes/refunds';
import { recoverRoute } from '../../api/routes/events';
import { finalResponse, recordedReply, type AppRouteHandler } from '../../api/typed-route';
import { apiErrorBody } from '../../domain/errors';
import { paymentResource, refundResource, type PaymentRow, type RefundRow } from '../../domain/resources';

declare const deps: ApiDeps;
declare const payment: PaymentRow;
declare const refund: RefundRow;

/** The declared status and shape compile. */
export const declared: AppRouteHandler<typeof getPaymentRoute> = (c) => c.json(paymentResource(payment), 200);

/** A declared error status with the error body compiles too. */
export const declaredError: AppRouteHandler<typeof getPaymentRoute> = (c) => c.json(apiErrorBody('not_found', 'no such payment'), 404);

// @ts-expect-error case wrong-status: GET /v1/payments/{id} declares 200, not 201.
export const wrongStatus: AppRouteHandler<typeof getPaymentRoute> = (c) => c.json(paymentResource(payment), 201);

// @ts-expect-error case wrong-shape: a refund is not the payment the route declares.
export const wrongShape: AppRouteHandler<typeof getPaymentRoute> = (c) => c.json(refundResource(refund), 200);

// @ts-expect-error case undeclared-error: 409 is not among GET /v1/payments/{id}'s error statuses.
export const undeclaredError: AppRouteHandler<typeof getPaymentRoute> = (c) => c.json(apiErrorBody('order_already_paid', 'paid'), 409);

// @ts-expect-error case other-route: an answer typed by POST /v1/payments/{id}/refunds is a refund, not the payment POST /v1/payments declares.
export const otherRoute: AppRouteHandler<typeof createPayment> = async (c) => recordedReply(c, createRefund, await runIdempotent(c, deps, createRefund, {
    params: {},
    body: {},
    claim: () => ({ workflowId: 'w', resourceId: 're_1' }),
    dispatch: async () => ({ kind: 'running' }),
    pending: async () => ({ body: refundResource(refund), location: '/v1/refunds/re_1' }),
  }));

/** The 202 of a payment command is the payment... */
export const pendingPayment: AppRouteHandler<typeof cancelPayment> = async (c) =>
  recordedReply(c, cancelPayment, await runIdempotent(c, deps, cancelPayment, {
    params: {},
    body: {},
    claim: () => ({ workflowId: 'w', resourceId: 'pay_1' }),
    dispatch: async () => ({ kind: 'running' }),
    pending: async () => ({ body: paymentResource(payment), location: '/v1/payments/pay_1' }),
  }));

/** ...and nothing else. */
export const pendingRefund: AppRouteHandler<typeof cancelPayment> = async (c) =>
  recordedReply(c, cancelPayment, await runIdempotent(c, deps, cancelPayment, {
    params: {},
    body: {},
    claim: () => ({ workflowId: 'w', resourceId: 'pay_1' }),
    dispatch: async () => ({ kind: 'running' }),
    // @ts-expect-error case pending-shape: the 202 of a payment command is the payment, not a refund.
    pending: async () => ({ body: refundResource(refund), location: '/v1/refunds/re_1' }),
  }));

/** A recorded final response is built from the route's declared body... */
export const recorded = finalResponse(recoverRoute, 200, { object: 'event_recovery', since: '2026-01-01T00:00:00.000Z', resent: 3 });

// @ts-expect-error case final-shape: POST /v1/webhook_endpoint/recover's 200 counts resent events; a string is not a count.
export const recordedWrong = finalResponse(recoverRoute, 200, { object: 'event_recovery', since: '2026-01-01T00:00:00.000Z', resent: 'three' });

// @ts-expect-error case final-status: POST /v1/webhook_endpoint/recover declares no 201.
export const recordedWrongStatus = finalResponse(recoverRoute, 201, { object: 'event_recovery', since: '2026-01-01T00:00:00.000Z', resent: 3 });
