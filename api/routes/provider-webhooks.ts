import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { WorkflowNotFoundError } from '@temporalio/client';
import { bodyLimit } from 'hono/body-limit';
import { markForwarded, receiveProviderEvent, type ReceivedOutcome } from '../../db/provider-events';
import { ApiError } from '../../domain/errors';
import { lateChargeWorkflowId } from '../../domain/ids';
import { keepsNoMoney, statusForCharge, type PaymentStatus } from '../../domain/payments';
import { flagWaitingPaymentForOperator, paymentIntentFigures } from '../../db/payments';
import { isTemporalUnavailable } from '../../lib/temporal';
import { ProviderEventUnreadableError, ProviderRejectedError, ProviderWebhookError, type ProviderCharge, type ProviderWebhookEvent, type UnreadableField } from '../../provider/types';
import { createProviderClient, createProviderWebhookVerifier } from '../../provider/registry';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/logger';
import { chargeReportSignal, type LateChargeInput } from '../../shared/payments';
import { startLateChargeWorkflow } from '../../lib/late-charge';
import { disputeTimesOf, reportDispute } from '../../lib/dispute';
import type { ApiDeps, AppEnv, ProviderWebhookReceiver } from '../context';
import { withinTemporalDeadline } from '../idempotency';
import { MAX_BODY_BYTES } from '../middleware';
import { storable, unstorablePath } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

/**
 * A receiver per configured PSP (PROVIDERS, or the one PROVIDER), each verifying with its kind's
 * verification and its own secret (provider/<kind>/webhook.ts; Stripe's: the Stripe library's
 * constructEvent). Without a secret every webhook of that provider is refused (400).
 */
export function providerWebhookReceivers(config: Pick<Config, 'PROVIDERS' | 'PROVIDER_TIMEOUT_MS'>): Promise<ProviderWebhookReceiver[]> {
  return Promise.all(
    config.PROVIDERS.map(async (connection) => {
      const verify = await createProviderWebhookVerifier(connection);
      const client = await createProviderClient(connection, config);
      const disputes = client.disputes;
      return {
        name: connection.name,
        verify,
        retrieveCharge: (chargeId: string) => client.retrieveCharge(chargeId),
        ...(disputes ? { retrieveDispute: (disputeId: string) => disputes.retrieveDispute(disputeId) } : {}),
      };
    }),
  );
}

const Received = z
  .object({
    received: z.literal(true),
    event_id: z.string(),
    duplicate: z.boolean().openapi({ description: 'This event was received before; nothing changed.' }),
    disposition: z.enum(['forward', 'unknown_charge', 'ignored', 'held_for_operator', 'dispute']).openapi({
      description:
        '`forward`: the charge as the PSP holds it (retrieved from the PSP, never the event’s own figures) was passed to the payment; ' +
        '`unknown_charge`: no payment here has that charge (kept for an operator); `ignored`: not about a charge’s outcome; ' +
        '`held_for_operator`: the PSP’s charge disagrees with the payment (amount, currency, charge id) or the PSP does not have it: nothing was passed on ' +
        'and the payment is flagged `failure.code` `needs_operator`; `dispute`: the dispute as the PSP holds it was passed to its dispute workflow.',
    }),
  })
  .openapi('ProviderWebhookReceived');

const receiveWebhook = createRoute({
  method: 'post',
  path: '/provider_webhooks/{provider}',
  tags: ['Provider webhooks'],
  summary: 'Receive a webhook from the PSP (no API key, no Idempotency-Key)',
  description:
    'Verified on the raw body with the provider’s secret (the sandbox’s `Sandbox-Signature`, Stripe’s `Stripe-Signature`); ' +
    'an unverified or stale request is 400 and changes nothing. A verified event that cannot be read (a field the provider’s kind reads ' +
    'missing, null or of another type) or stored (a `created` outside the dates PostgreSQL holds, U+0000 or a lone surrogate in a string) ' +
    'is 400 `invalid_request` with each field’s path in `issues`, and changes nothing. Each event is stored once (by provider and event id) with the ' +
    'payment it concerns. A verified event is a hint, not a figure: the charge is retrieved from the PSP that holds it and that ' +
    'charge is passed to the payment’s workflow (503 if the PSP cannot be asked: the event is kept and the PSP’s retry passes it on). ' +
    'A charge whose amount, currency or id disagrees with the payment settles nothing: the payment is flagged `needs_operator`. ' +
    'A redelivery is acknowledged and changes nothing. ' +
    'No event moves a payment out of a final status. An event reporting money (a success, an authorization) for a payment that ended ' +
    'without money (`expired`, `canceled`, `declined`, `failed`) starts the late-charge workflow, once per charge, which gives the money ' +
    'back at the PSP and records it on the payment (`failure.code` `late_success_refunded`, event `payment.late_success_refunded`). ' +
    'A dispute event (a PSP kind with disputes) is a hint too: the dispute is retrieved from the PSP and reported to its dispute workflow ' +
    '(signal-with-start under an id derived from the PSP and its dispute id, so duplicates join one run; 503 when the PSP or Temporal cannot be reached).',
  security: [],
  request: { params: z.object({ provider: z.string().max(32).openapi({ param: { name: 'provider', in: 'path' }, example: 'sandbox' }) }) },
  responses: {
    200: { description: 'Acknowledged (new or duplicate).', content: jsonContent(Received) },
    ...errorResponses(['webhook_signature_invalid', 'invalid_request', 'not_found', 'payload_too_large', 'service_unavailable', 'temporal_unavailable']),
  },
});

/**
 * POST /provider_webhooks/{provider}: the PSP's own webhooks. Outside /v1: the PSP
 * authenticates by signature, not by API key, and dedupes by its event id, not an Idempotency-Key.
 */
export function providerWebhookRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();
  app.use(
    '/provider_webhooks/*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError('payload_too_large', `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`);
      },
    }),
  );

  app.openapi(receiveWebhook, async (c) => {
    const { provider } = c.req.valid('param');
    const receivers = deps.providerWebhooks === undefined ? [] : Array.isArray(deps.providerWebhooks) ? deps.providerWebhooks : [deps.providerWebhooks];
    const receiver = receivers.find((r) => r.name === provider);
    if (!receiver) throw new ApiError('not_found', `No webhooks are received for provider ${provider}`);
    // Verified on the exact bytes received, before anything is parsed or stored.
    const raw = await c.req.text();
    const event = verifiedEvent(receiver, raw, Object.fromEntries(c.req.raw.headers.entries()));
    const payload = JSON.parse(raw) as unknown;
    refuseUnstorableEvent(event, payload);
    if (event.dispute && receiver.retrieveDispute) {
      const duplicate = !(await storeDisputeEvent(deps, provider, event, payload));
      await forwardDispute(deps, receiver, provider, event, c.var.logger);
      return c.json({ received: true as const, event_id: event.id, duplicate, disposition: 'dispute' as const }, 200);
    }
    const outcome = await receiveProviderEvent(deps.sql, {
      provider,
      eventId: event.id,
      type: event.type,
      createdAt: event.createdAt,
      chargeId: event.charge?.id ?? null,
      chargeStatus: event.charge?.status ?? null,
      reference: event.charge?.reference ?? null,
      payload,
    });
    const log = c.var.logger.child({ provider, event_id: event.id, event_type: event.type, payment_id: outcome.row.payment_id });
    const disposition = await actOnChargeEvent(deps, receiver, event, outcome, log);
    if (outcome.row.disposition === 'unknown_charge' && outcome.inserted) log.warn('provider webhook for an unknown charge; kept for an operator');
    return c.json({ received: true as const, event_id: event.id, duplicate: !outcome.inserted, disposition }, 200);
  });
  return app;
}

/** The PSP's event, verified on the raw body: 400 for a bad signature, or for a signed event whose fields cannot be read. */
function verifiedEvent(receiver: ProviderWebhookReceiver, raw: string, headers: Record<string, string>): ProviderWebhookEvent {
  try {
    return receiver.verify(raw, headers);
  } catch (error) {
    if (error instanceof ProviderEventUnreadableError) throw invalidEvent(error.issues);
    if (error instanceof ProviderWebhookError) throw new ApiError('webhook_signature_invalid', error.message);
    throw error;
  }
}

/**
 * What a stored charge event does. The event's figures are the sender's word: what is passed on
 * or acted on is the charge as the PSP holding it answers now (a retrieval), checked against the
 * payment's intent; one that disagrees is held for an operator; money the PSP holds for a payment
 * that ended without money is given back. Answers the event's disposition.
 */
async function actOnChargeEvent(
  deps: ApiDeps,
  receiver: ProviderWebhookReceiver,
  event: ProviderWebhookEvent,
  outcome: ReceivedOutcome,
  log: Logger,
): Promise<z.output<typeof Received>['disposition']> {
  const provider = receiver.name;
  const paymentId = outcome.row.payment_id;
  const needsCharge = paymentId !== null && event.charge !== null && (outcome.workflowId !== null || chargeHoldsMoney(event.charge));
  const verified = needsCharge ? await verifiedCharge(deps, receiver, paymentId, event.charge!.id, log) : null;
  if (verified?.kind === 'disagrees') {
    await holdForOperator(deps, paymentId!, provider, event.id, verified.reason, log);
    return 'held_for_operator';
  }
  if (verified?.kind !== 'agrees') return outcome.row.disposition;
  const charge = verified.charge;
  if (charge.status !== event.charge!.status || charge.amountCapturedMinor !== event.charge!.amountCapturedMinor) {
    log.warn(
      { event_status: event.charge!.status, event_captured_minor: event.charge!.amountCapturedMinor, charge_status: charge.status, charge_captured_minor: charge.amountCapturedMinor },
      'provider webhook figures differ from the charge the PSP holds; the PSP’s charge is used',
    );
  }
  if (outcome.workflowId && verified.recorded) {
    // Most often the PSP's event for the charge a run has just recorded: a signal would reach
    // the run while its first workflow task completes it, and the server would fail that task
    // (a new event under a completing run) and have it run again.
    log.debug('provider webhook: the payment already records this charge as reported; nothing to pass on');
    await markForwarded(deps.sql, provider, event.id);
  } else if (outcome.workflowId) {
    await passOnToRun(deps, outcome.workflowId, provider, event.id, charge, log);
  }
  if (chargeHoldsMoney(charge)) {
    await giveBackLateMoney(deps, { provider, chargeId: charge.id, paymentId: paymentId!, eventId: event.id }, log);
  }
  return outcome.row.disposition;
}

/** Signals the charge to the payment's run and marks the event forwarded; a run that has closed is final, and the event changes nothing. */
async function passOnToRun(deps: ApiDeps, workflowId: string, provider: string, eventId: string, charge: ProviderCharge, log: Logger): Promise<void> {
  try {
    await withinTemporalDeadline(deps, () => deps.temporal.workflow.getHandle(workflowId).signal(chargeReportSignal, { source: 'webhook', eventId, charge }));
  } catch (error) {
    if (isTemporalUnavailable(error)) {
      // Stored but not passed on: the PSP retries, and the retry forwards it (forwarded_at is
      // still null). The workflow's own poll decides the payment meanwhile anyway.
      throw new ApiError('temporal_unavailable', 'The workflow engine is unreachable; the event is stored, retry later.', {}, { 'Retry-After': '5' });
    }
    if (!(error instanceof WorkflowNotFoundError) && !/already completed/i.test(String((error as Error)?.message))) throw error;
    log.info('provider webhook for a payment whose run has closed; nothing to apply');
  }
  await markForwarded(deps.sql, provider, eventId);
}

/** Stores a dispute event once (by provider and event id); false when it was stored before. */
async function storeDisputeEvent(deps: ApiDeps, provider: string, event: ProviderWebhookEvent, payload: unknown): Promise<boolean> {
  const outcome = await receiveProviderEvent(deps.sql, { provider, eventId: event.id, type: event.type, createdAt: event.createdAt, chargeId: null, chargeStatus: null, reference: null, payload });
  return outcome.inserted;
}

/**
 * The dispute as the PSP holds it now (the event's figures are the sender's word) is reported to
 * its workflow, on every delivery (a duplicate too: the workflow applies it forward-only, and a
 * delivery whose report failed is retried by the PSP). 503 when the PSP or Temporal cannot be asked.
 */
async function forwardDispute(deps: ApiDeps, receiver: ProviderWebhookReceiver, provider: string, event: ProviderWebhookEvent, log: Logger): Promise<void> {
  let dispute;
  try {
    dispute = await receiver.retrieveDispute!(event.dispute!.id);
  } catch (error) {
    if (error instanceof ProviderRejectedError) {
      log.warn({ provider_dispute_id: event.dispute!.id, code: error.code }, 'a dispute event for a dispute the PSP does not hold; ignored');
      return;
    }
    log.warn({ provider_dispute_id: event.dispute!.id, err: error }, 'the PSP could not be asked about the dispute of a webhook');
    throw new ApiError('service_unavailable', 'The PSP could not be asked about the dispute; retry later.', {}, { 'Retry-After': '5' });
  }
  const times = disputeTimesOf(deps.config);
  try {
    await withinTemporalDeadline(deps, () => reportDispute(deps.temporal, deps.config.TASK_QUEUE, provider, { source: 'webhook', eventId: event.id, dispute }, times));
  } catch (error) {
    if (isTemporalUnavailable(error)) {
      throw new ApiError('temporal_unavailable', 'The workflow engine is unreachable; the event is stored, retry later.', {}, { 'Retry-After': '5' });
    }
    throw error;
  }
}

/**
 * A verified event is still refused (400, with the field's path, nothing stored) if PostgreSQL
 * cannot store it: a `created` outside the dates timestamptz holds (or not a date at all), or
 * U+0000 or a lone surrogate in any string of the body (the id, the type, the charge's fields).
 */
function refuseUnstorableEvent(event: ProviderWebhookEvent, payload: unknown): void {
  const issues: UnreadableField[] = [];
  const created = event.createdAt.getTime();
  const year = Number.isFinite(created) ? event.createdAt.getUTCFullYear() : NaN;
  if (!(year >= 1 && year <= 9999)) {
    issues.push({ path: 'created', code: 'custom', message: 'must be a time between 0001-01-01 and 9999-12-31 (UTC), the dates PostgreSQL stores' });
  }
  const unstorable = unstorablePath(payload);
  if (unstorable !== null) issues.push({ path: unstorable, code: 'custom', message: storable });
  if (issues.length) throw invalidEvent(issues);
}

/** A signed event refused for its content (a field unreadable or unstorable): 400 with each field's path; nothing is stored. */
const invalidEvent = (issues: UnreadableField[]) => new ApiError('invalid_request', 'The event is invalid; see issues.', { issues });

/**
 * `recorded`: the payment's run has already recorded this very charge in this state (its id, its
 * status, what was captured): the event tells the run nothing it does not know.
 */
type VerifiedCharge = { kind: 'agrees'; charge: ProviderCharge; recorded: boolean } | { kind: 'disagrees'; reason: string };

/**
 * The charge as the PSP that holds it answers now, checked against the payment's intent: the
 * same charge id, amount and currency, and no more captured than the amount (all of it, once an
 * automatic capture succeeded). A PSP that cannot be asked is 503 (the event is stored; the
 * PSP's retry asks again); one that has no such charge disagrees.
 */
async function verifiedCharge(deps: ApiDeps, receiver: ProviderWebhookReceiver, paymentId: string, chargeId: string, log: Logger): Promise<VerifiedCharge> {
  const intent = await paymentIntentFigures(deps.sql, paymentId);
  let charge: ProviderCharge;
  try {
    charge = await receiver.retrieveCharge(chargeId);
  } catch (error) {
    if (error instanceof ProviderRejectedError) return { kind: 'disagrees', reason: `the PSP does not hold charge ${chargeId} (${error.code})` };
    log.warn({ charge_id: chargeId, err: error }, 'the PSP could not be asked about the charge of a webhook');
    throw new ApiError('service_unavailable', 'The PSP could not be asked about the charge; the event is stored, retry later.', {}, { 'Retry-After': '5' });
  }
  const differences = [
    charge.id !== chargeId ? `charge id ${charge.id}, not ${chargeId}` : null,
    charge.amountMinor !== intent!.amount_minor ? `amount ${charge.amountMinor}, not ${intent!.amount_minor}` : null,
    charge.currency.toUpperCase() !== intent!.currency ? `currency ${charge.currency}, not ${intent!.currency}` : null,
    charge.amountCapturedMinor > intent!.amount_minor ? `captured ${charge.amountCapturedMinor}, more than ${intent!.amount_minor}` : null,
    intent!.capture_method === 'automatic' && charge.status === 'succeeded' && charge.amountCapturedMinor !== intent!.amount_minor
      ? `captured ${charge.amountCapturedMinor} of an automatic capture of ${intent!.amount_minor}`
      : null,
  ].filter((d): d is string => d !== null);
  if (differences.length) return { kind: 'disagrees', reason: `the PSP's charge ${chargeId} disagrees with the payment: ${differences.join('; ')}` };
  const recorded = intent!.provider_charge_id === charge.id && intent!.status === statusForCharge(charge.status) && intent!.amount_captured_minor === charge.amountCapturedMinor;
  return { kind: 'agrees', charge, recorded };
}

/**
 * A payment whose charge at the PSP disagrees with it is flagged for an operator (failure.code
 * `needs_operator`, as every payment only a person can decide is), while it waits: its status
 * stays, nothing is passed to its run, and no money is booked from the disagreeing figures.
 */
async function holdForOperator(deps: ApiDeps, paymentId: string, provider: string, eventId: string, reason: string, log: Logger): Promise<void> {
  const message = `A webhook from ${provider} (event ${eventId}) was not applied: ${reason}. An operator must reconcile it with the PSP.`;
  const flagged = await flagWaitingPaymentForOperator(deps.sql, paymentId, message);
  log.warn({ reason, flagged }, 'provider webhook held for an operator: the PSP’s charge disagrees with the payment');
}

/** The PSP holds money for the charge: captured and not all refunded, or an open authorization. */
function chargeHoldsMoney(charge: ProviderCharge): boolean {
  return charge.status === 'requires_capture' || (charge.status === 'succeeded' && charge.amountCapturedMinor > charge.amountRefundedMinor);
}

/**
 * Money the PSP reports for a payment that ended without money (expired, canceled, declined,
 * failed) is given back by lateChargeWorkflow: its run has closed and would never see it. Also
 * started for a payment still `processing`: its run may have taken its last look at the PSP just
 * before the debit succeeded, then expire and close without this event; the workflow waits for
 * the payment to be final and gives nothing back if it succeeded. One workflow id per charge, so
 * every delivery of the event (duplicates, the PSP's retries, redeliveries) starts it once.
 * Runs on every delivery, a duplicate too: a delivery whose start failed (Temporal unreachable,
 * 503) is retried by the PSP and starts it then.
 */
async function giveBackLateMoney(deps: ApiDeps, input: LateChargeInput, log: { info: (msg: string, extra?: object) => void }): Promise<void> {
  const [payment] = await deps.sql<{ status: PaymentStatus }[]>`SELECT status FROM payments WHERE id = ${input.paymentId}`;
  if (!payment || !(keepsNoMoney(payment.status) || payment.status === 'processing')) return;
  try {
    const started = await withinTemporalDeadline(deps, () => startLateChargeWorkflow(deps.temporal, deps.config.TASK_QUEUE, input));
    if (started) log.info('late charge workflow started', { workflow_id: lateChargeWorkflowId(input.provider, input.chargeId), payment_status: payment.status });
  } catch (error) {
    if (isTemporalUnavailable(error)) {
      throw new ApiError('temporal_unavailable', 'The workflow engine is unreachable; the event is stored, retry later.', {}, { 'Retry-After': '5' });
    }
    throw error;
  }
}
