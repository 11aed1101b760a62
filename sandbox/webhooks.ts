import { createHmac } from 'node:crypto';
import { z } from 'zod';
import type { SandboxDeps, WebhookFaults } from './deps';

/** The Sandbox-Signature value for a body (the orchestrator's client verifies it with its own code). */
export function signatureHeader(body: string, secret: string, timestampSeconds = Math.floor(Date.now() / 1000)): string {
  return `t=${timestampSeconds},v1=${createHmac('sha256', secret).update(`${timestampSeconds}.${body}`, 'utf8').digest('hex')}`;
}

/**
 * Delivers sandbox.events to the webhook URL each was made for: POST, the event's stored body,
 * `Sandbox-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (signed at
 * sending time, so a retry carries a fresh timestamp). A 2xx delivers it; anything else is
 * retried with exponential backoff, for ever, across restarts (the state is in the table).
 * Events are taken in the order they were made, except those the reorder fault holds back
 * (until a later event of the same charge was delivered, or their hold ends; a later event
 * is never held behind an earlier held one, so with reorder=1 a charge's events arrive newest first).
 */

interface EventRow {
  seq: string;
  id: string;
  type: string;
  charge_id: string;
  body: string;
  webhook_url: string | null;
  state: 'pending' | 'delivered' | 'lost';
  attempts: number;
  duplicate: boolean;
}

export interface DeliveryOptions {
  pollMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  timeoutMs: number;
}

export function parseWebhookFaults(text: string, base: WebhookFaults): WebhookFaults {
  const faults = { ...base };
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [name, raw] = part.split('=').map((p) => p.trim());
    const value = Number(raw);
    if (!Number.isFinite(value) || value < 0) throw new Error(`SANDBOX_WEBHOOK_FAULTS: '${part}' is not name=<non-negative number>`);
    const probability = () => {
      if (value > 1) throw new Error(`SANDBOX_WEBHOOK_FAULTS: ${name} is a probability in [0, 1]`);
      return value;
    };
    switch (name) {
      case 'duplicate':
        faults.duplicate = probability();
        break;
      case 'reorder':
        faults.reorder = probability();
        break;
      case 'loss':
        faults.loss = probability();
        break;
      case 'delay_ms':
        faults.delayMs = Math.round(value);
        break;
      case 'reorder_hold_ms':
        faults.reorderHoldMs = Math.round(value);
        break;
      default:
        throw new Error(`SANDBOX_WEBHOOK_FAULTS: unknown fault '${name}' (duplicate, reorder, delay_ms, loss, reorder_hold_ms)`);
    }
  }
  return faults;
}

const probability = z.number().min(0).max(1);
/** The body of POST /_sandbox/webhook_faults (every PSP double takes the same, doubles/control.ts). */
export const webhookFaultsBody = z.strictObject({
  duplicate: probability.default(0),
  reorder: probability.default(0),
  delay_ms: z.number().int().min(0).max(3_600_000).default(0),
  loss: probability.default(0),
  reorder_hold_ms: z.number().int().min(0).max(3_600_000).default(3000),
});

/** The faults a POST /_sandbox/webhook_faults body sets. */
export const webhookFaultsOf = (f: z.output<typeof webhookFaultsBody>): WebhookFaults => ({ duplicate: f.duplicate, reorder: f.reorder, delayMs: f.delay_ms, loss: f.loss, reorderHoldMs: f.reorder_hold_ms });

export const faultsJson = (f: WebhookFaults) => ({
  duplicate: f.duplicate,
  reorder: f.reorder,
  delay_ms: f.delayMs,
  loss: f.loss,
  reorder_hold_ms: f.reorderHoldMs,
});

export class WebhookDelivery {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private busy = false;
  private again = false;

  constructor(
    private readonly deps: SandboxDeps,
    private readonly options: DeliveryOptions,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** A new event was committed: look now rather than at the next poll. */
  wake(): void {
    if (this.stopped) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.busy = true;
      this.running = this.pass()
        .catch(this.onError)
        .finally(() => {
          this.busy = false;
          if (this.stopped) return;
          const again = this.again;
          this.again = false;
          this.schedule(again ? 0 : this.options.pollMs);
        });
    }, ms);
  }

  /** Sends every due event once (in order); returns when the batch is done. */
  async pass(): Promise<void> {
    const target = this.deps.runtime.webhook;
    if (!target) return;
    const { sql } = this.deps;
    const due = await sql<EventRow[]>`
      SELECT e.seq, e.id, e.type, e.charge_id, e.body, e.webhook_url, e.state, e.attempts, e.duplicate
      FROM sandbox.events e
      WHERE e.state = 'pending' AND e.webhook_url = ${target.url} AND e.next_attempt_at <= clock_timestamp()
        AND (e.held_until IS NULL OR e.held_until <= clock_timestamp()
          -- A held event goes right after a later event of its charge was delivered ...
          OR EXISTS (
            SELECT 1 FROM sandbox.events later
            WHERE later.charge_id = e.charge_id AND later.seq > e.seq AND later.state = 'delivered')
          -- ... and a held event overtakes an earlier one still held.
          OR EXISTS (
            SELECT 1 FROM sandbox.events earlier
            WHERE earlier.charge_id = e.charge_id AND earlier.seq < e.seq AND earlier.state = 'pending'
              AND earlier.held_until > clock_timestamp()))
      ORDER BY e.seq
      LIMIT 50`;
    for (const event of due) {
      if (this.stopped) return;
      const outcome = await this.send(event.body, target);
      if (outcome.ok) {
        await sql`
          UPDATE sandbox.events
          SET state = 'delivered', delivered_at = clock_timestamp(), attempts = attempts + 1,
              last_status = ${outcome.status}, last_error = NULL
          WHERE seq = ${event.seq}`;
        if (event.duplicate) await this.send(event.body, target);
      } else {
        const delay = Math.min(this.options.retryBaseMs * 2 ** event.attempts, this.options.retryMaxMs);
        await sql`
          UPDATE sandbox.events
          SET attempts = attempts + 1, last_status = ${outcome.status}, last_error = ${outcome.error},
              next_attempt_at = clock_timestamp() + ${delay}::int * interval '1 millisecond'
          WHERE seq = ${event.seq}`;
      }
    }
  }

  /**
   * POST /_sandbox/events/{id}/redeliver: sends the event once more, now, to the current
   * webhook URL (whatever its state: delivered, pending or lost). A 2xx marks it delivered.
   */
  async redeliver(eventId: string): Promise<{ found: boolean; status: number | null; ok: boolean; error: string | null }> {
    const target = this.deps.runtime.webhook;
    const [event] = await this.deps.sql<EventRow[]>`SELECT * FROM sandbox.events WHERE id = ${eventId}`;
    if (!event) return { found: false, status: null, ok: false, error: null };
    if (!target) return { found: true, status: null, ok: false, error: 'no webhook URL is configured (SANDBOX_WEBHOOK_URL)' };
    const outcome = await this.send(event.body, target);
    if (outcome.ok) {
      await this.deps.sql`
        UPDATE sandbox.events
        SET state = 'delivered', delivered_at = COALESCE(delivered_at, clock_timestamp()), attempts = attempts + 1, last_status = ${outcome.status}
        WHERE id = ${eventId}`;
    }
    return { found: true, ...outcome };
  }

  private async send(body: string, target: { url: string; secret: string }): Promise<{ ok: boolean; status: number | null; error: string | null }> {
    try {
      const response = await fetch(target.url, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': 'payment-sandbox-webhooks/1',
          'Sandbox-Signature': signatureHeader(body, target.secret),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
      const ok = response.status >= 200 && response.status < 300;
      return { ok, status: response.status, error: ok ? null : `HTTP ${response.status}` };
    } catch (error) {
      return { ok: false, status: null, error: (error as Error).message.slice(0, 500) };
    }
  }
}
