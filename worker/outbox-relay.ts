import { Webhook } from 'standardwebhooks';
import type { Sql } from '../db/connect';
import { contextOf, inSpan, resourceAttribute, ROOT_CONTEXT, SpanKind, traceAttributes } from '../lib/tracing';
import { claimDueEvents, deliveryBacklog, markEventSkipped, recordDeliveryAttempt, type ClaimedEvent } from '../db/outbox';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import { postWebhook, type WebhookTargetPolicy } from '../lib/webhook-target';

export interface RelayOptions {
  /** First retry delay; doubled per failed attempt up to retryMaxMs, with ±20% jitter. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** After this many failed attempts the event is marked failed (still listed in GET /v1/events). */
  maxAttempts: number;
  /** One delivery attempt. */
  timeoutMs: number;
  batchSize: number;
  /** Polling interval; NOTIFY wakes the relay sooner. */
  pollMs: number;
  /** Which addresses deliveries may be dialled to (checked on the connection's own lookup). */
  targetPolicy: WebhookTargetPolicy;
}

/**
 * The webhook-signature header: one signature per secret in force, space-separated (Standard
 * Webhooks), the new secret's first. During a rotation's overlap a receiver that still has
 * the old secret, and one that already has the new, both verify the delivery.
 */
export function webhookSignatures(secrets: (string | null)[], id: string, timestamp: Date, body: string): string {
  return secrets
    .filter((secret): secret is string => !!secret)
    .map((secret) => new Webhook(secret).sign(id, timestamp, body))
    .join(' ');
}

/** The delay before attempt `failedAttempts + 1`: exponential, capped, jittered. */
export function retryDelayMs(failedAttempts: number, options: Pick<RelayOptions, 'retryBaseMs' | 'retryMaxMs'>, random = Math.random): number {
  const exponential = Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** Math.max(0, failedAttempts - 1));
  return Math.round(exponential * (0.8 + 0.4 * random()));
}

/**
 * Delivers outbox events to each tenant's webhook_url, signed per Standard Webhooks
 * (webhook-id = event id, webhook-timestamp, webhook-signature). At least once: an event
 * is claimed with a lease, so a relay that crashes mid-delivery leaves it to be delivered
 * again after the lease; the event id is the receiver's dedupe key. Every attempt is recorded
 * in webhook_deliveries. Any number of relays can run: SKIP LOCKED keeps them apart.
 */
export class OutboxRelay {
  private timer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly logger: Logger,
    private readonly options: RelayOptions,
    private readonly metrics?: WorkerMetrics,
  ) {}

  /** Sets the backlog gauges (called when metrics are scraped). */
  async measureBacklog(): Promise<void> {
    const backlog = await deliveryBacklog(this.sql);
    this.metrics?.outboxPending.set(backlog.pending);
    this.metrics?.outboxLag.set(backlog.lag);
  }

  async start(): Promise<void> {
    this.stopped = false;
    try {
      const subscription = await this.sql.listen('outbox_event', () => this.kick());
      this.unlisten = subscription.unlisten;
    } catch (error) {
      this.logger.warn({ err: error }, 'outbox relay cannot LISTEN; polling only');
    }
    this.timer = setInterval(() => this.kick(), this.options.pollMs);
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.unlisten?.().catch(() => {});
    await this.running;
  }

  /** Runs a pass now, or right after the current one. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          while (!this.stopped && (await this.deliverBatch()) === this.options.batchSize);
        } catch (error) {
          this.logger.warn({ err: error }, 'outbox relay pass failed; will retry');
        }
      } while (this.again && !this.stopped);
      this.running = null;
    })();
  }

  /** Claims due events and delivers them; returns how many were claimed. */
  async deliverBatch(): Promise<number> {
    // The lease outlasts one attempt, so a live relay never loses its claim mid-delivery.
    const leaseMs = this.options.timeoutMs + 30_000;
    const claimed = await claimDueEvents(this.sql, this.options.batchSize, leaseMs);
    await Promise.all(
      claimed.map((event) =>
        // Each delivery a span in the trace of the span that wrote the event (the payment's), or a trace of its own when the event has none (docs/tracing.md).
        inSpan(
          `outbox deliver ${event.payload.type}`,
          {
            kind: SpanKind.PRODUCER,
            attributes: { [traceAttributes.eventId]: event.id, 'event.type': event.payload.type, ...resourceAttribute(event.payload.data.object.id), 'webhook.attempt': event.attempts + 1 },
            parent: contextOf(event.traceparent) ?? ROOT_CONTEXT,
          },
          () => this.deliver(event),
        ),
      ),
    );
    return claimed.length;
  }

  private async deliver(event: ClaimedEvent): Promise<void> {
    if (!event.webhook_url) {
      // No endpoint: the event stays available through GET /v1/events.
      await markEventSkipped(this.sql, event.id);
      return;
    }
    const attempt = event.attempts + 1;
    const body = JSON.stringify(event.payload);
    const started = Date.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const timestamp = new Date();
      // Redirects are not followed; the address dialled is checked again (DNS rebinding).
      const response = await postWebhook(
        event.webhook_url,
        {
          headers: {
            'content-type': 'application/json',
            'user-agent': 'payment-orchestrator-webhooks/1',
            'webhook-id': event.id,
            'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
            'webhook-signature': webhookSignatures([event.webhook_secret, event.previous_webhook_secret], event.id, timestamp, body),
          },
          body,
          signal: AbortSignal.timeout(this.options.timeoutMs),
        },
        this.options.targetPolicy,
      );
      status = response.status;
      if (status < 200 || status >= 300) error = `HTTP ${status}`;
    } catch (failure) {
      error = failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure);
    }
    const delivered = error === null;
    // A resend (POST /v1/events/{id}/resend) starts a new round: budget and backoff count from it.
    const attemptOfRound = attempt - event.resend_round_first_attempt;
    const exhausted = !delivered && attemptOfRound >= this.options.maxAttempts;
    const delayMs = retryDelayMs(attemptOfRound, this.options);
    await recordDeliveryAttempt(this.sql, {
      eventId: event.id,
      attempt,
      url: event.webhook_url,
      responseStatus: status,
      error,
      durationMs: Date.now() - started,
      outcome: delivered ? 'delivered' : exhausted ? 'failed' : 'pending',
      retryDelayMs: delayMs,
      resendRequestsSeen: event.resend_requests,
    });
    this.metrics?.webhookAttempts.inc({ result: delivered ? 'delivered' : exhausted ? 'gave_up' : 'failed' });
    this.metrics?.webhookDuration.observe((Date.now() - started) / 1000);
    const log = { event_id: event.id, tenant_id: event.tenant_id, type: event.payload.type, attempt, status, error };
    if (delivered) this.logger.info(log, 'webhook delivered');
    else this.logger.warn({ ...log, next_attempt_in_ms: exhausted ? null : delayMs }, exhausted ? 'webhook delivery gave up' : 'webhook delivery failed; will retry');
  }
}
