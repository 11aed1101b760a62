import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { WorkflowNotFoundError } from '@temporalio/client';
import { bodyLimit } from 'hono/body-limit';
import { markForwarded, receiveProviderEvent } from '../../db/provider-events';
import { ApiError } from '../../domain/errors';
import { lateChargeWorkflowId } from '../../domain/ids';
import { keepsNoMoney, type PaymentStatus } from '../../domain/payment-lifecycle';
import { isTemporalUnavailable } from '../../lib/temporal';
import { ProviderWebhookError, type ProviderCharge, type ProviderWebhookEvent } from '../../provider/types';
import { createProviderWebhookVerifier } from '../../provider/registry';
import type { Config } from '../../lib/config';
import { chargeReportSignal, type LateChargeInput } from '../../shared/definitions';
import { startLateChargeWorkflow } from '../../lib/late-charge';
import type { ApiDeps, AppEnv, ProviderWebhookReceiver } from '../context';
import { withinTemporalDeadline } from '../idempotency';
import { MAX_BODY_BYTES } from '../middleware';
import { errorResponses, jsonContent } from './openapi';

/**
 * A receiver per configured PSP (PROVIDERS, or the one PROVIDER), each verifying with its kind's
 * verification and its own secret (provider/<kind>/webhook.ts; Stripe's: the Stripe library's
 * constructEvent). Without a secret every webhook of that provider is refused (400).
 */
export function providerWebhookReceivers(config: Pick<Config, 'PROVIDERS'>): Promise<ProviderWebhookReceiver[]> {
  return Promise.all(config.PROVIDERS.map(async (connection) => ({ name: connection.name, verify: await createProviderWebhookVerifier(connection) })));
}

const Received = z
  .object({
    received: z.literal(true),
    event_id: z.string(),
    duplicate: z.boolean().openapi({ description: 'This event was received before; nothing changed.' }),
    disposition: z.enum(['forward', 'unknown_charge', 'ignored']).openapi({
      description: '`forward`: passed to the payment; `unknown_charge`: no payment here has that charge (kept for an operator); `ignored`: not about a charge’s outcome.',
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
    'an unverified or stale request is 400 and changes nothing. Each event is stored once (by provider and event id) with the ' +
    'payment it concerns, then passed to that payment’s workflow; a redelivery is acknowledged and changes nothing. ' +
    'No event moves a payment out of a final status. An event reporting money (a success, an authorization) for a payment that ended ' +
    'without money (`expired`, `canceled`, `declined`, `failed`) starts the late-charge workflow, once per charge, which gives the money ' +
    'back at the PSP and records it on the payment (`failure.code` `late_success_refunded`, event `payment.late_success_refunded`).',
  security: [],
  request: { params: z.object({ provider: z.string().max(32).openapi({ param: { name: 'provider', in: 'path' }, example: 'sandbox' }) }) },
  responses: {
    200: { description: 'Acknowledged (new or duplicate).', content: jsonContent(Received) },
    ...errorResponses(['webhook_signature_invalid', 'not_found', 'payload_too_large', 'service_unavailable', 'temporal_unavailable']),
  },
});

/**
 * POST /provider_webhooks/{provider}: the PSP's own webhooks (issue 21). Outside /v1: the PSP
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
    let event: ProviderWebhookEvent;
    try {
      event = receiver.verify(raw, Object.fromEntries(c.req.raw.headers.entries()));
    } catch (error) {
      if (error instanceof ProviderWebhookError) throw new ApiError('webhook_signature_invalid', error.message);
      throw error;
    }
    const outcome = await receiveProviderEvent(deps.sql, {
      provider,
      eventId: event.id,
      type: event.type,
      createdAt: event.createdAt,
      chargeId: event.charge?.id ?? null,
      chargeStatus: event.charge?.status ?? null,
      reference: event.charge?.reference ?? null,
      payload: JSON.parse(raw) as unknown,
    });
    const log = c.var.logger.child({ provider, event_id: event.id, event_type: event.type, payment_id: outcome.row.payment_id });
    if (outcome.workflowId && event.charge) {
      try {
        await withinTemporalDeadline(deps, () =>
          deps.temporal.workflow.getHandle(outcome.workflowId!).signal(chargeReportSignal, { source: 'webhook', eventId: event.id, charge: event.charge! }),
        );
      } catch (error) {
        if (isTemporalUnavailable(error)) {
          // Stored but not passed on: the PSP retries, and the retry forwards it (forwarded_at is
          // still null). The workflow's own poll settles the payment meanwhile anyway.
          throw new ApiError('temporal_unavailable', 'The workflow engine is unreachable; the event is stored, retry later.', {}, { 'Retry-After': '5' });
        }
        if (!(error instanceof WorkflowNotFoundError) && !/already completed/i.test(String((error as Error)?.message))) throw error;
        // The payment's run has closed: it is final, and a late event changes nothing.
        log.info('provider webhook for a payment whose run has closed; nothing to apply');
      }
      await markForwarded(deps.sql, provider, event.id);
    }
    if (outcome.row.payment_id && event.charge && chargeHoldsMoney(event.charge)) {
      await giveBackLateMoney(deps, { provider, chargeId: event.charge.id, paymentId: outcome.row.payment_id, eventId: event.id }, log);
    }
    if (outcome.row.disposition === 'unknown_charge' && outcome.inserted) log.warn('provider webhook for an unknown charge; kept for an operator');
    return c.json({ received: true as const, event_id: event.id, duplicate: !outcome.inserted, disposition: outcome.row.disposition }, 200);
  });
  return app;
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
