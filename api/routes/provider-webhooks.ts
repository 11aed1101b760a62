import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { WorkflowNotFoundError } from '@temporalio/client';
import { bodyLimit } from 'hono/body-limit';
import { markForwarded, receiveProviderEvent } from '../../db/provider-events';
import { ApiError } from '../../domain/errors';
import { isTemporalUnavailable } from '../../lib/temporal';
import { ProviderWebhookError, type ProviderWebhookEvent } from '../../provider/types';
import { createProviderClient } from '../../provider/registry';
import type { Config } from '../../lib/config';
import { chargeReportSignal } from '../../shared/definitions';
import type { ApiDeps, AppEnv } from '../context';
import { withinTemporalDeadline } from '../idempotency';
import { MAX_BODY_BYTES } from '../middleware';
import { errorResponses, jsonContent } from './openapi';

/** One configured PSP's webhook verification (its client's verifyWebhook, with its secret). */
export interface ProviderWebhookReceiver {
  /** The provider's configured name, as in the path (PROVIDERS; `sandbox` or `stripe` with PROVIDER). */
  name: string;
  verify(rawBody: string, headers: Record<string, string | undefined>, now?: Date): ProviderWebhookEvent;
}

/**
 * A receiver per configured PSP (PROVIDERS, or the one PROVIDER), each verifying with its own
 * client's verifyWebhook and secret (Stripe's: the Stripe library's constructEvent). Without a
 * secret every webhook of that provider is refused (400).
 */
export function providerWebhookReceivers(config: Pick<Config, 'PROVIDERS' | 'STRIPE_API_KEY' | 'PROVIDER_TIMEOUT_MS'>): ProviderWebhookReceiver[] {
  return config.PROVIDERS.map((connection) => {
    const client = createProviderClient(connection, config);
    return { name: connection.name, verify: (rawBody, headers, now) => client.verifyWebhook(rawBody, headers, now) };
  });
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
    'No event moves a payment out of a final status.',
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
    if (outcome.row.disposition === 'unknown_charge' && outcome.inserted) log.warn('provider webhook for an unknown charge; kept for an operator');
    return c.json({ received: true as const, event_id: event.id, duplicate: !outcome.inserted, disposition: outcome.row.disposition }, 200);
  });
  return app;
}
