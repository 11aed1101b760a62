import { attemptResource } from '../../db/payments-attempts';
import { findTenantRecovery, type TenantRecoverySettings } from '../../db/tenants';
import { recoveryPolicy, recoveryWindowMs, scaled } from '../../domain/recovery';
import { formatAmount } from '../../domain/money';
import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ApplicationFailure } from '@temporalio/common';
import { claimPaymentIntent, getPayment, listPayments, orderHolder } from '../../db/payments';
import { keepClaimForRetry, releaseClaim } from '../../db/idempotency-records';
import type { IdempotencyRecord } from '../../db/idempotency-records';
import { ApiError, errorResponse, orderAlreadyPaid, type ApiErrorType } from '../../domain/errors';
import { isFinal, paymentWindows, statusesAccepting, type PaymentDeadline } from '../../domain/payments';
import { newId, paymentUpdateId, paymentWorkflowId } from '../../domain/ids';
import { paymentLocation, paymentResource, type PaymentRow } from '../../domain/resources';
import { FailureType, TenantIdKey, type FinalResponse, type ScopedKey } from '../../shared/definitions';
import { cancelUpdate, captureUpdate, firstAnswerUpdate, OrderIdKey, PaymentStatusKey, WAIT_DEFAULTS, type PaymentWorkflowInput } from '../../shared/payments';
import type { ApiDeps, AppEnv } from '../context';
import { recordedReply } from '../typed-route';
import type { Config } from '../../lib/config';
import { tenantPayment, tenantPaymentWithAttempts } from '../tenant-payment';
import { replayFirst, runIdempotent, startOrAttach, type Dispatched, type IdempotentOperation } from '../idempotency';
import { dispatchUpdate } from '../updates';
import {
  CancelPaymentBody,
  CapturePaymentBody,
  CreatePaymentBody,
  IdParam,
  ListPaymentsQuery,
  listOf,
  Payment,
} from '../schemas';
import { errorResponses, idempotentResponses, idempotencyKeyParameter, jsonContent, optionalBody, paymentIdExample } from './openapi';
import { paymentMethodUse, type PaymentMethodUse } from './customers-payment-methods';
import { kindsWhere } from '../../provider/registry';

export const createPayment = createRoute({
  method: 'post',
  path: '/v1/payments',
  tags: ['Payments'],
  summary: 'Create a payment (idempotent)',
  description:
    'Charges the payment method once, however often the request is delivered. 201 when `succeeded` or `requires_capture`; ' +
    '402 `card_declined` (the body carries the declined payment); 402 `payment_failed` when nothing was charged anywhere, ' +
    'with `failure.code` `provider_rejected` (the last PSP refused the request), `psp_unavailable` (no PSP of the route could ' +
    'be reached within the payment\'s charge budget, PAYMENT_CHARGE_BUDGET_SECONDS) or `payment_method_unsupported` (no PSP of ' +
    'the route charges the method); 400 `invalid_request` (`payment_method`) when no PSP of the tenant\'s route supports the ' +
    'payment method; 409 `order_already_paid` when the order already has a live ' +
    'or paid payment (no charge is made). 202 when the outcome must be waited for: `requires_action` (send the customer to ' +
    '`next_action.redirect_to_url.url`; they come back to your `return_url`) or `processing` (an asynchronous method such as a ' +
    'SEPA debit). That 202 is the key\'s recorded answer and replays byte for byte; `GET /v1/payments/{id}` shows where the ' +
    'payment stands now, and the `payment.*` events tell you when its outcome is decided.',
  parameters: [idempotencyKeyParameter],
  request: { body: { content: jsonContent(CreatePaymentBody), required: true } },
  responses: {
    201: { description: 'Payment succeeded or authorized (manual capture).', content: jsonContent(Payment), headers: idempotentResponses.headers },
    ...idempotentResponses.pending(Payment),
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'card_declined', 'payment_failed', 'authentication_required', 'order_already_paid', 'payload_too_large', 'unsupported_media_type', 'idempotency_key_reused', 'operation_failed', 'service_unavailable']),
  },
});

export const getPaymentRoute = createRoute({
  method: 'get',
  path: '/v1/payments/{id}',
  tags: ['Payments'],
  summary: 'Retrieve a payment',
  request: { params: IdParam('payment', paymentIdExample) },
  responses: { 200: { description: 'The payment.', content: jsonContent(Payment) }, ...errorResponses(['unauthorized', 'not_found']) },
});

export const listPaymentsRoute = createRoute({
  method: 'get',
  path: '/v1/payments',
  tags: ['Payments'],
  summary: 'List payments, newest first (optionally of one order)',
  request: { query: ListPaymentsQuery },
  responses: { 200: { description: 'A page of payments.', content: jsonContent(listOf(Payment, 'PaymentList')) }, ...errorResponses(['invalid_request', 'unauthorized']) },
});

/** What capture and cancel answer while the payment's run cannot take a command yet (api/updates.ts noHandlerYet). */
const notReadyYet =
  "A run not ready for the command yet (still recording the authorization, e.g. after a worker's crash) has refused nothing: " +
  'the command is sent to it again within the wait, and the answer is 202 (not stored) if it has not taken it by then; retry with the same key.';

export const capturePayment = createRoute({
  method: 'post',
  path: '/v1/payments/{id}/capture',
  tags: ['Payments'],
  summary: 'Capture a manual-capture payment (idempotent)',
  description:
    `Captures all of the authorization, or \`amount_minor\` of it. 409 unless the payment is ${statusesAccepting('capture').map((s) => `\`${s}\``).join(' or ')}. ${notReadyYet} ` +
    'At a PSP whose captures are confirmed by notification (kinds ' + kindsWhere((c) => c.modifications === 'notified') + '), the payment stays `requires_capture` until it comes (202 while it has not; ' +
    'retry with the same key); a capture the PSP refuses (by notification) or never confirms within the authorization window voids the authorization ' +
    'and is 402 `payment_failed` (`failure.code` `capture_failed` or `capture_unconfirmed`).',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('payment', paymentIdExample), body: { content: jsonContent(CapturePaymentBody), required: false } },
  responses: {
    200: { description: 'Captured: the payment is `succeeded`.', content: jsonContent(Payment), headers: idempotentResponses.headers },
    ...idempotentResponses.pending(Payment),
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'payment_not_capturable', 'capture_exceeds_authorized', 'payment_failed', 'idempotency_key_reused', 'operation_failed', 'service_unavailable']),
  },
});

export const cancelPayment = createRoute({
  method: 'post',
  path: '/v1/payments/{id}/cancel',
  tags: ['Payments'],
  summary: 'Cancel (void) a payment that waits for capture or for its customer, or stop a recovering one (idempotent)',
  description:
    `Voids the authorization, or the customer's pending 3-D Secure challenge, or stops a \`recovering\` payment's retries. 409 unless the payment is ${statusesAccepting('cancel').map((s) => `\`${s}\``).join(' or ')}. ${notReadyYet} ` +
    'A cancel that meets a recovery retry in flight is taken and decided by that retry: declined, the payment is `canceled` (200); paid, it is `succeeded` and ' +
    'only then is the cancel refused (409 `payment_not_cancelable`, saying so). Until then the answer is 202 with the payment as it stands, not stored. ' +
    'At a PSP whose cancels are confirmed by notification (kinds ' + kindsWhere((c) => c.modifications === 'notified') + '), the payment stays `requires_capture` until it comes (202 while it has not; ' +
    'retry with the same key); a cancel the PSP refuses, or does not confirm by the authorization window’s end (and at least PROVIDER_DECISION_GRACE_SECONDS), ' +
    'is 402 `payment_failed` (`failure.code` `cancel_failed` or `cancel_unconfirmed`: the authorization may still hold the money, for an operator).',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('payment', paymentIdExample), body: { content: jsonContent(CancelPaymentBody), required: false } },
  responses: {
    200: { description: 'Voided (or its recovery stopped): the payment is `canceled`.', content: jsonContent(Payment), headers: idempotentResponses.headers },
    ...idempotentResponses.pending(Payment),
    ...errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'payment_not_cancelable', 'payment_failed', 'idempotency_key_reused', 'operation_failed', 'service_unavailable']),
  },
});

/** The payment workflow's input for a validated request body. */
export function paymentWorkflowInput(
  body: CreatePaymentBody,
  run: { paymentId: string; tenantId: string; scope: ScopedKey; requestId: string; windows: PaymentWindows; use?: PaymentMethodUse; tenantRecovery?: TenantRecoverySettings },
): PaymentWorkflowInput {
  // The request's window, else the tenant's default (an off-session, automatic-capture payment only).
  const windowDays = body.recovery?.window_days ?? (body.off_session === true && body.capture_method !== 'manual' ? run.tenantRecovery?.window_days : null);
  // Each window from its configuration key, or the lifecycle table's default when a caller leaves it out.
  const windowMs = (deadline: PaymentDeadline) => (run.windows[paymentWindows[deadline].configKey] ?? paymentWindows[deadline].defaultSeconds) * 1000;
  return {
    paymentId: run.paymentId,
    tenantId: run.tenantId,
    orderId: body.order_id,
    amountMinor: body.amount_minor,
    currency: body.currency,
    paymentMethod: body.payment_method,
    captureMethod: body.capture_method,
    description: body.description,
    metadata: body.metadata,
    idempotency: run.scope,
    requestId: run.requestId,
    authorizationWindowMs: windowMs('authorization'),
    // Configuration enters the workflow as input (and so stays fixed for the run's life).
    returnUrl: body.return_url ?? null,
    authenticationWindowMs: windowMs('authentication'),
    settlementWindowMs: windowMs('settlement'),
    statusPoll: {
      firstMs: run.windows.PROVIDER_POLL_FIRST_MS ?? WAIT_DEFAULTS.statusPoll.firstMs,
      maxMs: run.windows.PROVIDER_POLL_MAX_MS ?? WAIT_DEFAULTS.statusPoll.maxMs,
    },
    decisionGraceMs: (run.windows.PROVIDER_DECISION_GRACE_SECONDS ?? 300) * 1000,
    ...(run.windows.PAYMENT_CONTINUE_AFTER_UPDATES ? { continueAfterUpdates: run.windows.PAYMENT_CONTINUE_AFTER_UPDATES } : {}),
    ...(run.windows.PAYMENT_CONTINUE_AFTER_EVENTS ? { continueAfterEvents: run.windows.PAYMENT_CONTINUE_AFTER_EVENTS } : {}),
    // Customers and saved methods (set only when asked for: other payments' inputs stay as they were).
    ...(run.use?.customerId ? { customerId: run.use.customerId } : {}),
    ...(body.setup_future_usage ? { setupFutureUsage: body.setup_future_usage } : {}),
    ...(run.use?.savedMethod ? { savedMethod: run.use.savedMethod, offSession: body.off_session === true } : {}),
    ...(windowDays && run.use?.savedMethod ? { recovery: recoveryInput(windowDays, run.use.savedMethod.id, run.windows, run.tenantRecovery ?? {}) } : {}),
  };
}

/** A recovering payment's policy (under the tenant's limits) and window, scaled (RECOVERY_TIME_SCALE) and capped (RECOVERY_MAX_WINDOW_SECONDS). */
function recoveryInput(windowDays: number, paymentMethodId: string, windows: PaymentWindows, tenant: TenantRecoverySettings): NonNullable<PaymentWorkflowInput['recovery']> {
  const scale = windows.RECOVERY_TIME_SCALE ?? 1;
  const maxMs = scaled((windows.RECOVERY_MAX_WINDOW_SECONDS ?? paymentWindows.recovery.defaultSeconds) * 1000, scale);
  const limits = { perDay: tenant.per_day ?? undefined, perMonth: tenant.per_30_days ?? undefined, maxRetries: tenant.max_retries ?? undefined };
  return { windowMs: Math.min(recoveryWindowMs(windowDays, scale), maxMs), policy: recoveryPolicy(scale, limits), paymentMethodId };
}

/** The configured windows a payment's waits run under (lib/config.ts). */
export type PaymentWindows = Pick<ApiDeps['config'], 'AUTHORIZATION_WINDOW_SECONDS'> &
  Partial<Pick<Config, 'AUTHENTICATION_WINDOW_SECONDS' | 'ASYNC_SETTLEMENT_WINDOW_SECONDS' | 'PROVIDER_POLL_FIRST_MS' | 'PROVIDER_POLL_MAX_MS' | 'PROVIDER_DECISION_GRACE_SECONDS' | 'RECOVERY_MAX_WINDOW_SECONDS' | 'RECOVERY_TIME_SCALE' | 'PAYMENT_CONTINUE_AFTER_UPDATES' | 'PAYMENT_CONTINUE_AFTER_EVENTS'>>;

/** Where an update's rejection by the workflow becomes an HTTP outcome (recorded and replayed). */
const refusals: Record<string, ApiErrorType> = {
  [FailureType.PaymentNotCapturable]: 'payment_not_capturable',
  [FailureType.PaymentNotCancelable]: 'payment_not_cancelable',
  [FailureType.CaptureExceedsAuthorized]: 'capture_exceeds_authorized',
};

/**
 * POST /v1/payments as one idempotent operation (api/idempotency.ts): the key claimed together
 * with the payment's intent (or refused by the order guard), the run started or joined, and the
 * payment as it stands for a 202.
 */
function createPaymentOperation(deps: ApiDeps, c: Context<AppEnv>, body: CreatePaymentBody, use: PaymentMethodUse, tenantRecovery?: TenantRecoverySettings): IdempotentOperation<typeof createPayment> {
  const tenantId = c.var.tenant.id;
  const inputFor = (paymentId: string, scope: ScopedKey) => paymentWorkflowInput(body, { paymentId, tenantId, scope, requestId: c.var.requestId, windows: deps.config, use, tenantRecovery });
  // Whether this request's claim persisted the intent: only then is the claim kept when the
  // start fails as unreachable. The run's first charge attempt persists the intent itself if
  // it finds it missing (a retry that finds the claim cannot know); a second insert finds the first.
  let claimHoldsIntent = false;
  return {
    params: {},
    body,
    claim: () => ({ workflowId: paymentWorkflowId(tenantId, c.var.idempotencyKey), resourceId: newId('pay') }),
    claimWith: async (scope, target, requestHash) => {
      const claimed = await claimPaymentIntent(deps.sql, { scope, workflowId: target.workflowId, requestHash }, inputFor(target.resourceId, scope));
      if (!claimed) return null;
      claimHoldsIntent = claimed.intent;
      if (claimed.intent) return { record: claimed.record, refusal: null };
      // The order guard refused the intent: another key's payment holds the order, so 409,
      // recorded now as the key's answer (no run). The run decides when the holder is this
      // key's own earlier payment (its record expired: the retry attaches to the closed run and
      // answers its result; with that run's history gone, a new run's first charge attempt
      // meets the order guard and answers 409) or when the holder has meanwhile let the order go.
      const holder = await orderHolder(deps.sql, tenantId, body.order_id);
      const refused = holder !== null && holder.workflow_id !== target.workflowId;
      return { record: claimed.record, refusal: refused ? orderAlreadyPaid(body.order_id, holder.id) : null };
    },
    // Temporal unreachable at the start: a claim with its intent is kept (the answer is 503,
    // nothing was charged). The client's retry finds it and starts the run (or attaches to it,
    // if the start reached Temporal after all) under the same payment id; without a retry, the
    // abandoned-run sweeper finds no run and fails the intent. Giving both back instead would
    // let a retry claim a new payment id while a run that did start holds the old one.
    release: (scope) => (claimHoldsIntent ? keepClaimForRetry(deps.sql, scope) : releaseClaim(deps.sql, scope)),
    // The retry that adopts a kept claim finds its intent persisted under the claim's payment id.
    adopted: () => {
      claimHoldsIntent = true;
    },
    dispatch: (record, scope) =>
      startOrAttach(deps, scope, 'paymentWorkflow', {
        workflowId: record.workflow_id,
        resourceId: record.resource_id,
        args: [inputFor(record.resource_id, scope)],
        searchAttributes: [
          { key: TenantIdKey, value: tenantId },
          { key: OrderIdKey, value: body.order_id },
          { key: PaymentStatusKey, value: 'processing' },
        ],
        memo: { payment_id: record.resource_id, amount_minor: body.amount_minor, currency: body.currency, request_id: c.var.requestId },
        summary: `Payment ${formatAmount(body.amount_minor, body.currency)} · ${body.order_id}`,
        firstAnswer: firstAnswerUpdate,
      }),
    pending: async (record) => {
      const row = (await getPayment(deps.sql, tenantId, record.resource_id)) ?? requestedPayment(tenantId, body, use, record);
      return { body: paymentResource(row), location: paymentLocation(row.id) };
    },
  };
}

/** The payment as it was asked for, before the workflow has persisted its intent (a 202's body). */
function requestedPayment(tenantId: string, body: CreatePaymentBody, use: PaymentMethodUse, record: IdempotencyRecord): PaymentRow {
  return {
    id: record.resource_id,
    tenant_id: tenantId,
    order_id: body.order_id,
    amount_minor: body.amount_minor,
    currency: body.currency,
    status: 'processing',
    capture_method: body.capture_method,
    payment_method: body.payment_method,
    description: body.description,
    metadata: body.metadata,
    amount_captured_minor: 0,
    amount_refunded_minor: 0,
    provider_charge_id: null,
    provider: null,
    failure_code: null,
    failure_message: null,
    workflow_id: record.workflow_id,
    return_url: body.return_url ?? null,
    next_action: null,
    customer_id: use.customerId,
    setup_future_usage: body.setup_future_usage ?? null,
    off_session: use.savedMethod !== null && body.off_session === true,
    created_at: record.created_at,
    updated_at: record.created_at,
  };
}

export function paymentRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  // A byte-identical retry of a finished payment is answered before its body is parsed.
  app.openapi({ ...createPayment, middleware: replayFirst(deps, createPayment) }, async (c) => {
    const body = c.req.valid('json');
    if (body.return_url?.startsWith('http:') && deps.config.NODE_ENV === 'production') {
      // Plain http is for a developer's own machine; a customer's browser is sent to https only.
      throw new ApiError('invalid_request', 'return_url must be https in production');
    }
    // A customer or saved method that is not the tenant's, or not usable: 400 before anything is claimed.
    const use = await paymentMethodUse(deps, c.var.tenant.id, body);
    // The tenant's recovery settings (a default window, lower limits), read now: a change applies to the next payment.
    const tenantRecovery = use.savedMethod && body.off_session === true ? await findTenantRecovery(deps.sql, c.var.tenant.id) : undefined;
    return recordedReply(c, createPayment, await runIdempotent(c, deps, createPayment, createPaymentOperation(deps, c, body, use, tenantRecovery)));
  });

  app.openapi(getPaymentRoute, async (c) => {
    const { payment, attempts } = await tenantPaymentWithAttempts(deps.sql, c.var.tenant.id, c.req.valid('param').id);
    // A charged payment that records no provider is at the default (the first configured), where refunds and reconciliation look too.
    const provider = payment.provider ?? (payment.provider_charge_id !== null ? (deps.config.PROVIDERS?.[0]?.name ?? null) : null);
    return c.json({ ...paymentResource({ ...payment, provider }), attempts: attempts.map(attemptResource) }, 200);
  });

  app.openapi(listPaymentsRoute, async (c) => {
    const query = c.req.valid('query');
    const page = await listPayments(deps.sql, c.var.tenant.id, {
      limit: query.limit,
      orderId: query.order_id,
      startingAfter: query.starting_after,
      endingBefore: query.ending_before,
    });
    return c.json({ object: 'list' as const, data: page.rows.map(paymentResource), has_more: page.hasMore }, 200);
  });

  app.openapi(capturePayment, async (c) => recordedReply(c, capturePayment, await runPaymentCommand(deps, c, 'capture', c.req.valid('param').id, optionalBody(CapturePaymentBody, c.req.valid('json')))));
  app.openapi(cancelPayment, async (c) => recordedReply(c, cancelPayment, await runPaymentCommand(deps, c, 'cancel', c.req.valid('param').id, optionalBody(CancelPaymentBody, c.req.valid('json')))));

  return app;
}

/**
 * Capture and cancel (POST /v1/payments/{id}/capture and /cancel): updates to the payment's
 * running workflow, with validators, under the idempotency protocol. The console's capture and
 * cancel (api/console/actions.ts) run this same operation.
 */
export async function runPaymentCommand(deps: ApiDeps, c: Context<AppEnv>, kind: 'capture' | 'cancel', id: string, body: { amount_minor?: number }) {
  const route = kind === 'capture' ? capturePayment : cancelPayment;
  const tenantId = c.var.tenant.id;
  const payment = await tenantPayment(deps.sql, tenantId, id);
  return runIdempotent(c, deps, route, {
    params: { id },
    body,
    claim: () => ({ workflowId: payment.workflow_id, resourceId: payment.id }),
    dispatch: (record, scope) => sendCommand(deps, record, scope, kind, body.amount_minor ?? null, c.var.requestId),
    pending: async () => {
      const row = (await getPayment(deps.sql, tenantId, payment.id))!;
      return { body: paymentResource(row), location: paymentLocation(row.id) };
    },
  });
}

/** Why a capture or cancel cannot be done once the payment's run has closed. */
function closedRunRefusal(kind: 'capture' | 'cancel', paymentId: string, payment: PaymentRow | null): string {
  if (!payment) return `payment ${paymentId} cannot be ${kind === 'capture' ? 'captured' : 'canceled'}: its run has ended`;
  const flagged = payment.failure_code === 'needs_operator' ? ` ${payment.failure_message ?? ''}`.trimEnd() : '';
  if (isFinal(payment.status)) return `payment ${paymentId} is ${payment.status}.${flagged}`;
  return (
    `payment ${paymentId} can no longer be ${kind === 'capture' ? 'captured' : 'canceled'} through the API: its run ended while it was ${payment.status}.` +
    (flagged || ' It is being flagged for an operator (an open authorization is voided).')
  );
}

/**
 * Sends capture or cancel to the payment's workflow as an Update. The update id is derived
 * from the scoped key, so a repeated delivery is deduplicated by Temporal too. The update's
 * result is the operation's final response (the workflow records it); a refusal by the
 * validator is a definitive outcome too, recorded by the API.
 */
async function sendCommand(
  deps: ApiDeps,
  record: IdempotencyRecord,
  scope: ScopedKey,
  kind: 'capture' | 'cancel',
  amountMinor: number | null,
  requestId: string,
): Promise<Dispatched> {
  const handle = deps.temporal.workflow.getHandle(record.workflow_id);
  const notAllowed: ApiErrorType = kind === 'capture' ? 'payment_not_capturable' : 'payment_not_cancelable';
  const options = { updateId: paymentUpdateId(kind, scope.key), waitForStage: 'ACCEPTED' as const };
  return dispatchUpdate(
    deps,
    () =>
      kind === 'capture'
        ? handle.startUpdate(captureUpdate, { ...options, args: [{ amountMinor, idempotency: scope, requestId }] })
        : handle.startUpdate(cancelUpdate, { ...options, args: [{ idempotency: scope, requestId }] }),
    {
      refused: (error) => {
        const cause = error.cause;
        const type = cause instanceof ApplicationFailure && cause.type ? refusals[cause.type] : undefined;
        return errorResponse(type ?? notAllowed, cause?.message ?? error.message);
      },
      // The run has closed, or is closing, under the command (a concurrent capture and cancel:
      // the winner's run completes while the other is on its way): no command can reach it
      // again. The answer says why, without claiming a status that would accept the command.
      closed: async () => errorResponse(notAllowed, closedRunRefusal(kind, record.resource_id, await getPayment(deps.sql, record.tenant_id, record.resource_id))),
    },
  );
}
