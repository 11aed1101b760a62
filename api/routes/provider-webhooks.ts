import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { isGrpcDeadlineError, WorkflowFailedError } from '@temporalio/client';
import { bodyLimit } from 'hono/body-limit';
import { receiveProviderEvent } from '../../db/provider-events';
import { paymentTraceparent } from '../../db/payments';
import { annotateActiveSpan, linkActiveSpan, resourceAttribute, tracingOn } from '../../lib/tracing';
import { ApiError } from '../../domain/errors';
import { isTemporalUnavailable } from '../../lib/temporal';
import { ProviderEventUnreadableError, ProviderWebhookError, type PaymentProvider, type ProviderWebhookEvent, type UnreadableField } from '../../provider/types';
import { createProviderClient, createProviderWebhookBatchVerifier, createProviderWebhookVerifier, knownProviderKinds, providerKind } from '../../provider/registry';
import type { Config } from '../../lib/config';
import type { Sql } from '../../db/connect';
import { takeCall } from '../../db/routing';
import { callLimitedProvider } from '../../lib/provider-limits';
import type { Logger } from '../../lib/logger';
import type { ProviderDispute } from '../../shared/disputes';
import { handOverProviderEvent, type ProviderEventDecision, type ProviderEventHandOver } from '../../lib/provider-events';
import { disputeTimesOf } from '../../lib/dispute';
import type { ApiDeps, AppEnv, ProviderWebhookReceiver } from '../context';
import { withinTemporalDeadline } from '../idempotency';
import { MAX_BODY_BYTES, requireJson } from '../middleware';
import { storable, unstorablePath } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

/**
 * A receiver per configured PSP (PROVIDERS, or the one PROVIDER), each verifying with its kind's
 * verification and its own secret (provider/<kind>/webhook.ts, the PSP's own library's where it
 * has one). Without a secret every webhook of that provider is refused (400).
 */
export function providerWebhookReceivers(config: Pick<Config, 'PROVIDERS' | 'PROVIDER_TIMEOUT_MS' | 'PROVIDER_RATE_LIMITS'>, sql?: Sql): Promise<ProviderWebhookReceiver[]> {
  return Promise.all(
    config.PROVIDERS.map(async (connection) => {
      const verify = await createProviderWebhookVerifier(connection);
      const verifyBatch = await createProviderWebhookBatchVerifier(connection);
      // The API's calls to the PSP (the charge a webhook reports, read back) take its tokens too (PROVIDER_RATE_LIMITS).
      const limit = config.PROVIDER_RATE_LIMITS?.[connection.name];
      const own = await createProviderClient(connection, config);
      const client = limit && sql ? callLimitedProvider(own, connection.name, (provider) => takeCall(sql, provider, limit)) : own;
      return {
        name: connection.name,
        verify,
        notifications: verifyBatch ? ('batch' as const) : ('event' as const),
        challengeReturn: providerKind(connection.kind).capabilities.challengeReturn,
        ...(verifyBatch ? { verifyBatch } : {}),
        retrieveCharge: (chargeId: string) => client.retrieveCharge(chargeId),
        ...disputeReceiving(client),
      };
    }),
  );
}

/** Whether the receiver hands its PSP's dispute events to the disputes area: a kind with disputes. */
export function disputeReceiving(client: PaymentProvider): Pick<ProviderWebhookReceiver, 'disputes'> {
  return client.disputes ? { disputes: true } : {};
}

const Received = z
  .object({
    received: z.literal(true),
    event_id: z.string(),
    duplicate: z.boolean().openapi({ description: 'This event was received before; nothing changed.' }),
    disposition: z.enum(['forward', 'unknown_charge', 'ignored', 'held_for_operator', 'handed_over', 'dispute']).openapi({
      description:
        'The decision of the event’s workflow (one per event, of its area), when it came within IDEMPOTENCY_WAIT_MS. ' +
        '`forward`: a charge event’s charge as the PSP holds it (retrieved from the PSP, never the event’s own figures) was passed to the payment, or the payment ' +
        'already records it as reported; a refund’s confirmation (at a PSP that confirms refunds by notification) was passed to the run of the pending refund it names (or to the late-charge run ' +
        'that refunded the charge). `held_for_operator`: the PSP’s charge disagrees with the payment (amount, currency, charge id) or the PSP does not have it: nothing was passed on ' +
        'and the payment is flagged `failure.code` `needs_operator`; or a refund’s confirmation refuses the refund a payment’s own run made to give its charge back (a compensation, ' +
        'counted given back when the PSP received it): the payment, `failed`, then has `failure.code` `compensation_failed` and `payment.failed` is sent again. ' +
        '`dispute`: the dispute as the PSP holds it was reported to its dispute workflow. ' +
        '`ignored`: nothing of ours acts on it (not about a charge, refund or dispute of ours; a refund’s confirmation no run waits for; a dispute the PSP does not hold). ' +
        '`unknown_charge`: no payment here has that charge (kept for an operator; nothing handed over). ' +
        '`handed_over`: the event’s workflow had not decided within the wait (the PSP could not be asked at once): it decides as above once the PSP answers.',
    }),
  })
  .openapi('ProviderWebhookReceived');

const receiveWebhook = createRoute({
  method: 'post',
  path: '/provider_webhooks/{provider}',
  tags: ['Provider webhooks'],
  summary: 'Receive a webhook from the PSP (no API key, no Idempotency-Key)',
  description:
    'A body that is not `application/json` (parameters such as `; charset=utf-8` pass) is 415 before its signature is checked. ' +
    'Verified on the raw body with the provider’s secret, where its kind signs (below); ' +
    'an unverified or stale request is 400 and changes nothing. A verified event that cannot be read (a field the provider’s kind reads ' +
    'missing, null or of another type, or an identifier longer than the PSP’s documented length: its kind’s bounds below, ' +
    'every other id, reference or code 255, an event type or code 128) or stored (a `created` outside the dates PostgreSQL holds, U+0000 or a lone surrogate in a string) ' +
    'is 400 `invalid_request` with each field’s path in `issues`, and changes nothing. Each event is stored once (by provider and event id) with the ' +
    'payment it concerns, then handed to the workflow of its area (one per event, so every delivery lands on one decision), which decides: ' +
    'a charge’s of a payment of ours, a refund’s confirmation, a dispute’s (a PSP kind with disputes). The route itself decides nothing. ' +
    'The answer carries the decision when it comes within IDEMPOTENCY_WAIT_MS, else `handed_over` (the PSP could ' +
    'not be asked at once: the workflow asks until it answers); 503 `temporal_unavailable` only when Temporal cannot take the event (it is kept, and the PSP’s retry hands it over). ' +
    'A verified event is a hint, not a figure: the charge is retrieved from the PSP that holds it and that charge is passed to the ' +
    'payment’s workflow; one whose amount, currency or id disagrees with the payment changes nothing: the payment is flagged `needs_operator`. ' +
    'A redelivery is acknowledged and changes nothing. ' +
    'A PSP whose notifications come in batches (several items in one body, each signed on its own) has every item read and verified before any is stored: one bad signature (400 `webhook_signature_invalid`) ' +
    'or one unreadable item (400 `invalid_request`, the paths in `issues`) refuses the whole batch and stores nothing; an accepted batch stores ' +
    'and hands over each item as one event (a duplicate changes nothing) and is answered with the body `[accepted]`. ' +
    'No event moves a payment out of a final status. An event reporting money (a success, an authorization) for a payment that ended ' +
    'without money (`expired`, `canceled`, `declined`, `failed`) starts the late-charge workflow, once per charge, which gives the money ' +
    'back at the PSP and records it on the payment (`failure.code` `late_success_refunded`, event `payment.late_success_refunded`). ' +
    'A refund’s confirmation (at a PSP that confirms refunds by notification) goes to the refunds area’s workflow, which passes it to the run of the pending refund it names (our refund id, or the payment’s reference ' +
    'and the amount, at that PSP and charge), which records it `succeeded` or `failed`, or else to the late-charge run of its charge, which waits for it ' +
    '(as for a void’s notification, at a PSP without retrieval). ' +
    'A dispute event (a PSP kind with disputes) is a hint too: the disputes area’s workflow retrieves the dispute from the PSP (retrying until it answers) and reports it to its dispute workflow ' +
    '(signal-with-start under an id derived from the PSP and its dispute id, so duplicates join one run), which checks it before anything follows. ' +
    'A PSP with no read of a dispute reports the verified notification’s dispute itself (one its kind cannot read, below, is 400 `invalid_request`). ' +
    `Each kind’s webhooks (provider/<kind>/index.ts): ${knownProviderKinds.map((kind) => `\`${kind}\`: ${providerKind(kind).webhookBody}`).join('; ')}.`,
  security: [],
  request: { params: z.object({ provider: z.string().max(32).openapi({ param: { name: 'provider', in: 'path' }, example: 'sandbox' }) }) },
  responses: {
    200: {
      description: 'Acknowledged (new or duplicate). A PSP whose notifications come in batches is answered with the body `[accepted]`.',
      content: { ...jsonContent(Received), 'text/plain': { schema: z.literal('[accepted]') } },
    },
    ...errorResponses(['webhook_signature_invalid', 'invalid_request', 'not_found', 'payload_too_large', 'unsupported_media_type', 'service_unavailable', 'temporal_unavailable']),
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
    // Every kind's PSP sends JSON (`application/json`, maybe with a charset): any other body is refused 415 before its signature is checked.
    requireJson(c);
    // Verified on the exact bytes received, before anything is parsed or stored.
    const raw = await c.req.text();
    const headers = Object.fromEntries(c.req.raw.headers.entries());
    if (receiver.notifications === 'batch') {
      await receiveBatch(deps, receiver, provider, raw, headers, c.var.logger);
      return c.text('[accepted]', 200);
    }
    const event = verified(() => receiver.verify(raw, headers));
    const payload = JSON.parse(raw) as unknown;
    refuseUnstorableEvent(event, payload);
    return c.json(await receiveEvent(deps, receiver, provider, event, payload, c.var.logger), 200);
  });
  return app;
}

/**
 * One event: stored once (by provider and event id) with the payment it concerns, then handed to
 * the workflow of its area, which decides: a charge's of a payment of ours, a refund's report, a
 * dispute's (a kind with disputes). An event that concerns none of them (an unknown charge, a
 * type the orchestrator does not act on) is answered as stored.
 */
async function receiveEvent(deps: ApiDeps, receiver: ProviderWebhookReceiver, provider: string, event: ProviderWebhookEvent, payload: unknown, logger: Logger): Promise<z.output<typeof Received>> {
  const dispute = receiver.disputes && event.dispute ? event.dispute : null;
  const outcome = await receiveProviderEvent(deps.sql, {
    provider,
    eventId: event.id,
    type: event.type,
    createdAt: event.createdAt,
    chargeId: dispute ? null : (event.charge?.id ?? null),
    chargeStatus: dispute ? null : (event.charge?.status ?? null),
    reference: dispute ? null : (event.charge?.reference ?? event.refund?.reference ?? null),
    refundId: dispute ? null : (event.refund?.id ?? null),
    payload,
  });
  // The webhook's span links to the trace of the payment it concerns (docs/tracing.md); one read, only while tracing is on.
  if (tracingOn() && outcome.row.payment_id) {
    annotateActiveSpan(resourceAttribute(outcome.row.payment_id));
    linkActiveSpan(await paymentTraceparent(deps.sql, outcome.row.payment_id));
  }
  const log = logger.child({ provider, event_id: event.id, event_type: event.type, payment_id: outcome.row.payment_id });
  const handOver = handOverOf(deps, provider, event, dispute, outcome.row.payment_id);
  const disposition = handOver ? await handOverEvent(deps, handOver, log) : outcome.row.disposition;
  if (outcome.row.disposition === 'unknown_charge' && outcome.inserted) log.warn('provider webhook for an unknown charge; kept for an operator');
  return { received: true as const, event_id: event.id, duplicate: !outcome.inserted, disposition };
}

/** What the event hands over, to the workflow of which area; null when it concerns nothing of ours to act on. */
function handOverOf(deps: ApiDeps, provider: string, event: ProviderWebhookEvent, dispute: ProviderDispute | null, paymentId: string | null): ProviderEventHandOver | null {
  if (dispute) return { area: 'dispute', input: { provider, eventId: event.id, dispute, times: disputeTimesOf(deps.config) } };
  if (event.refund) return { area: 'refund', input: { provider, eventId: event.id, refund: event.refund } };
  const charge = event.charge;
  if (paymentId === null || charge === null) return null;
  return { area: 'charge', input: { provider, eventId: event.id, paymentId, chargeId: charge.id, reported: { status: charge.status, amountCapturedMinor: charge.amountCapturedMinor }, charge } };
}

/**
 * A batch of notifications (a kind whose capabilities.notifications is `batch`): every item is
 * verified and read, and checked storable, before any is stored, so one bad signature or one
 * unreadable item refuses the whole batch (400, nothing stored; the PSP sends it again). Then each
 * item is received as one event (stored once by its id; a duplicate changes nothing), in order.
 */
async function receiveBatch(deps: ApiDeps, receiver: ProviderWebhookReceiver, provider: string, raw: string, headers: Record<string, string>, logger: Logger): Promise<void> {
  if (!receiver.verifyBatch) throw new Error(`provider ${provider}: its kind's notifications come in batches, but no batch verification is configured`);
  const items = verified(() => receiver.verifyBatch!(raw, headers));
  items.forEach(({ event, payload }, index) => refuseUnstorableEvent(event, payload, `notificationItems.${index}.NotificationRequestItem.`));
  for (const { event, payload } of items) {
    const received = await receiveEvent(deps, receiver, provider, event, payload, logger);
    logger.debug({ provider, event_id: event.id, duplicate: received.duplicate, disposition: received.disposition }, 'provider notification received');
  }
}

/** The PSP's event(s), verified on the raw body: 400 for a bad signature, or for a signed event whose fields cannot be read. */
function verified<T>(verify: () => T): T {
  try {
    return verify();
  } catch (error) {
    if (error instanceof ProviderEventUnreadableError) throw invalidEvent(error.issues);
    if (error instanceof ProviderWebhookError) throw new ApiError('webhook_signature_invalid', error.message);
    throw error;
  }
}

/**
 * The one hand-over: the stored event to the workflow of its area (lib/provider-events.ts, one
 * run per event), which decides. The answer carries the decision when it comes within
 * IDEMPOTENCY_WAIT_MS, else `handed_over` (the PSP could not be asked at once: the workflow asks
 * until it answers). 503 when Temporal cannot take it: the event is stored, and the PSP's retry
 * hands it over.
 */
async function handOverEvent(deps: ApiDeps, handOver: ProviderEventHandOver, log: Logger): Promise<z.output<typeof Received>['disposition']> {
  let decision: ProviderEventDecision | null;
  try {
    const handle = await withinTemporalDeadline(deps, () => handOverProviderEvent(deps.temporal, deps.config.TASK_QUEUE, handOver));
    decision = await deps.temporal.connection.withDeadline(Date.now() + deps.config.IDEMPOTENCY_WAIT_MS, () => handle.result()).catch((error: unknown) => {
      if (isGrpcDeadlineError(error) || error instanceof WorkflowFailedError) return null;
      throw error;
    });
  } catch (error) {
    if (isTemporalUnavailable(error)) {
      throw new ApiError('temporal_unavailable', 'The workflow engine is unreachable; the event is stored, retry later.', {}, { 'Retry-After': '5' });
    }
    throw error;
  }
  if (decision === null) log.info({ area: handOver.area }, 'provider webhook handed over; its workflow decides once the PSP answers');
  return decision?.disposition ?? 'handed_over';
}

/**
 * A verified event is still refused (400, with the field's path, nothing stored) if PostgreSQL
 * cannot store it: a `created` outside the dates timestamptz holds (or not a date at all), or
 * U+0000 or a lone surrogate in any string of the body (the id, the type, the charge's fields).
 */
function refuseUnstorableEvent(event: ProviderWebhookEvent, payload: unknown, at = ''): void {
  const issues: UnreadableField[] = [];
  const created = event.createdAt.getTime();
  const year = Number.isFinite(created) ? event.createdAt.getUTCFullYear() : NaN;
  if (!(year >= 1 && year <= 9999)) {
    issues.push({ path: `${at}created`, code: 'custom', message: 'must be a time between 0001-01-01 and 9999-12-31 (UTC), the dates PostgreSQL stores' });
  }
  const unstorable = unstorablePath(payload);
  if (unstorable !== null) issues.push({ path: `${at}${unstorable}`, code: 'custom', message: storable });
  if (issues.length) throw invalidEvent(issues);
}

/** A signed event refused for its content (a field unreadable or unstorable): 400 with each field's path; nothing is stored. */
const invalidEvent = (issues: UnreadableField[]) => new ApiError('invalid_request', 'The event is invalid; see issues.', { issues });
