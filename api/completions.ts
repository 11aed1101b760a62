import { randomUUID } from 'node:crypto';
import { notify, ping, type Sql } from '../db/connect';
import { isRecordCompleted } from '../db/idempotency-records';
import type { Logger } from '../lib/logger';
import type { FinalResponse } from '../shared/definitions';

/** The channel and payload the idempotency_records trigger notifies on (db/migrations). */
const channel = 'idempotency_completed';
export function completionTopic(tenantId: string, operation: string, key: string): string {
  return `${tenantId}|${operation}|${key}`;
}

export interface Expectation {
  /**
   * Resolves when the operation completed: with its stored answer when the NOTIFY
   * carried it (db/migrations/006), true when it did not or the record was seen completed;
   * false when `ms` passed first.
   */
  wait(ms: number): Promise<FinalResponse | boolean>;
  dispose(): void;
}

/**
 * A NOTIFY's topic and, when it carries one, the stored answer:
 * "<topic>\n<status>\n<location or empty>\n<body>" (the body last: it may hold newlines).
 */
export function parseCompletion(payload: string): { topic: string; response: FinalResponse | null } {
  const first = payload.indexOf('\n');
  if (first < 0) return { topic: payload, response: null };
  const second = payload.indexOf('\n', first + 1);
  const third = second < 0 ? -1 : payload.indexOf('\n', second + 1);
  const status = Number(payload.slice(first + 1, second));
  if (third < 0 || !Number.isInteger(status)) return { topic: payload.slice(0, first), response: null };
  const location = payload.slice(second + 1, third);
  return { topic: payload.slice(0, first), response: { status, location: location === '' ? null : location, body: payload.slice(third + 1) } };
}

/**
 * Wakes requests that wait for an operation's outcome. One LISTEN connection per API
 * process; the workflow's final transaction sends a NOTIFY at commit. A lost NOTIFY costs
 * only latency: a waiting request also looks at its record every `pollMs`.
 */
export class CompletionWaiter {
  /**
   * NOTIFY is the fast path, this look at the record the guarantee. Found by the fault suite
   * (test/faults/postgres-outage.test.ts): postgres.js (3.4.9) re-subscribes LISTEN once, at
   * the moment its connection drops, and silently gives up if PostgreSQL is still down then.
   * After any real outage no NOTIFY ever arrived again and every request waited out
   * its whole bounded wait (IDEMPOTENCY_WAIT_MS) before answering. One indexed read per
   * second per waiting request bounds that to a second.
   */
  static readonly pollMs = 1000;

  /**
   * The subscription checks itself: every `healthMs` (default 5 s) it notifies its own ping topic, and if
   * the ping has not come back within `pingTimeoutMs` (the subscription died with an outage,
   * see pollMs), it subscribes again, so NOTIFYs wake requests at once again after recovery.
   */
  static readonly pingTimeoutMs = 2000;

  private readonly waiting = new Map<string, Set<(response: FinalResponse | null) => void>>();
  private readonly pingTopic = `ping|${randomUUID()}`;
  private lastPing = 0;
  private unlisten: (() => Promise<void>) | null = null;
  private retry: NodeJS.Timeout | null = null;
  private health: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly logger: Logger,
    private readonly options: { healthMs?: number } = {},
  ) {}

  /** Starts listening; if PostgreSQL is down, keeps trying in the background (the API still serves 503s). */
  async start(): Promise<void> {
    await this.subscribe();
    this.health ??= setInterval(() => void this.checkSubscription(), this.options.healthMs ?? 5000);
    this.health.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    if (this.health) clearInterval(this.health);
    await this.unlisten?.().catch(() => {});
  }

  /** True while the last self-ping came back (for tests and diagnostics). */
  async subscriptionWorks(): Promise<boolean> {
    const sentAt = Date.now();
    try {
      await notify(this.sql, channel, this.pingTopic);
    } catch {
      return false;
    }
    const deadline = sentAt + CompletionWaiter.pingTimeoutMs;
    while (this.lastPing < sentAt && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    return this.lastPing >= sentAt;
  }

  private async subscribe(): Promise<void> {
    try {
      const subscription = await this.sql.listen(channel, (payload) => this.notify(payload));
      this.unlisten = subscription.unlisten;
    } catch (error) {
      if (this.stopped) return;
      this.logger.warn({ err: error }, 'cannot LISTEN for completions yet; retrying');
      this.retry = setTimeout(() => void this.subscribe(), 1000);
    }
  }

  private checking = false;
  private async checkSubscription(): Promise<void> {
    if (this.stopped || this.checking || !this.unlisten) return;
    this.checking = true;
    try {
      // PostgreSQL unreachable: nothing to repair yet (requests fail closed meanwhile).
      const reachable = await ping(this.sql).then(() => true, () => false);
      if (!reachable || (await this.subscriptionWorks())) return;
      this.logger.warn('completion NOTIFYs stopped arriving; subscribing again');
      const stale = this.unlisten;
      this.unlisten = null;
      // Its connection is gone: don't let the goodbye hang the check.
      await Promise.race([stale().catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
      await this.subscribe();
    } finally {
      this.checking = false;
    }
  }

  /** Registers interest before the operation is dispatched, so an early completion is not missed. */
  expect(tenantId: string, operation: string, key: string): Expectation {
    const topic = completionTopic(tenantId, operation, key);
    let wake!: (response: FinalResponse | null) => void;
    const completed = new Promise<FinalResponse | true>((resolve) => (wake = (response) => resolve(response ?? true)));
    const set = this.waiting.get(topic) ?? new Set();
    set.add(wake);
    this.waiting.set(topic, set);
    const dispose = () => {
      set.delete(wake);
      if (set.size === 0 && this.waiting.get(topic) === set) this.waiting.delete(topic);
    };
    return {
      wait: async (ms) => {
        let timer: NodeJS.Timeout | undefined;
        let poller: NodeJS.Timeout | undefined;
        let over = false;
        const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
        const polled = new Promise<true>((resolve) => {
          const look = async () => {
            if (await this.completedRecord(tenantId, operation, key)) return resolve(true);
            if (!over) poller = setTimeout(look, CompletionWaiter.pollMs);
          };
          poller = setTimeout(look, CompletionWaiter.pollMs);
        });
        try {
          return await Promise.race([completed, polled, timedOut]);
        } finally {
          over = true;
          clearTimeout(timer);
          clearTimeout(poller);
        }
      },
      dispose,
    };
  }

  /** The record of the operation is completed (false also when PostgreSQL cannot say). */
  private async completedRecord(tenantId: string, operation: string, key: string): Promise<boolean> {
    try {
      return await isRecordCompleted(this.sql, tenantId, operation, key);
    } catch {
      return false;
    }
  }

  private notify(payload: string): void {
    const { topic, response } = parseCompletion(payload);
    if (topic === this.pingTopic) this.lastPing = Date.now();
    for (const wake of this.waiting.get(topic) ?? []) wake(response);
  }
}
