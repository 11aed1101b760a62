import { randomUUID } from 'node:crypto';
import { ConnectionError, errorFromResponse, OperationPendingError, RateLimitedError } from './errors';
import type { List } from './types';
import { statusesWaitingFor, type RefundStatus } from '../domain/payments';

export interface ClientOptions {
  /** The tenant's API key (sk_…). */
  apiKey: string;
  /** e.g. http://127.0.0.1:3000 */
  baseUrl: string;
  /** Automatic retries after the first try, for network errors, 5xx and 429. Default 4. */
  maxRetries?: number;
  /** Backoff: a random wait up to baseDelayMs·2^retry (full jitter), capped at maxDelayMs; never shorter than Retry-After. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** A Retry-After longer than this (default 60 s) is not waited out: the error is thrown with it. */
  maxRetryAfterMs?: number;
  /** One try's timeout (an answer that takes longer is a network error, retried). Default 30 s. */
  timeoutMs?: number;
  /** How long a 202 is followed before OperationPendingError. Default 60 s. */
  pendingTimeoutMs?: number;
  fetch?: typeof fetch;
  /** For tests: the jitter's randomness and the waits. */
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** Per call: the idempotency key of a mutating operation, when the caller keeps its own (e.g. derived from an order). */
export interface RequestOptions {
  idempotencyKey?: string;
}

interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  url: string;
}

type QueryValue = string | number | boolean | undefined | null;

/** The statuses worth trying again with the same key: nothing final was decided. */
function retryable(status: number): boolean {
  return status === 429 || status >= 500;
}

/** Retry-After as milliseconds (delta-seconds or an HTTP date), or null. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | null {
  const value = headers.get('retry-after');
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** Full jitter (a uniform wait up to the exponential cap), but never less than the server asked for. */
export function backoffMs(retry: number, serverAskedMs: number | null, options: { baseDelayMs: number; maxDelayMs: number }, random: () => number): number {
  const cap = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** retry);
  return Math.max(serverAskedMs ?? 0, Math.floor(random() * cap));
}

/**
 * The statuses of a resource that say its operation is still running (polling Location is worth
 * it): a payment waiting for the PSP (the lifecycle table's), a refund not yet finished. A payment
 * waiting for its customer (requires_action) is answered at once: polling cannot end that wait.
 */
const inProgress = new Set<string>([...statusesWaitingFor('psp'), 'pending' satisfies RefundStatus]);

/**
 * HTTP with the retry rules of an idempotent API: a mutating operation gets one key (given
 * or generated) and sends it on every try, so the server runs it once however many tries it
 * takes; network errors, 5xx and 429 are retried with backoff; a 4xx is a final answer and
 * becomes a typed error; a 202 is followed to the final answer.
 */
export class Transport {
  private readonly maxRetries: number;
  private readonly backoff: { baseDelayMs: number; maxDelayMs: number };
  private readonly timeoutMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly pendingTimeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly baseUrl: string;

  constructor(private readonly options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.maxRetries = options.maxRetries ?? 4;
    this.backoff = { baseDelayMs: options.baseDelayMs ?? 250, maxDelayMs: options.maxDelayMs ?? 8000 };
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
    this.pendingTimeoutMs = options.pendingTimeoutMs ?? 60_000;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async get<T>(path: string, query: Record<string, QueryValue> = {}): Promise<T> {
    return this.parse<T>(await this.send('GET', this.url(path, query)));
  }

  /**
   * A mutating operation. Its key is chosen once, here, and reused by every retry and by
   * the follow-up of a 202: the server answers each with the same one execution's outcome.
   */
  async post<T>(path: string, body: unknown, options: RequestOptions = {}): Promise<T> {
    const idempotencyKey = options.idempotencyKey ?? randomUUID();
    const url = this.url(path);
    const deadline = Date.now() + this.pendingTimeoutMs;
    for (;;) {
      const response = await this.send('POST', url, { body, idempotencyKey });
      if (response.status !== 202) return this.parse<T>(response);
      // 202 is not an outcome: the operation runs on. Poll its resource while that says it
      // is in progress, then ask again under the same key: once the outcome is recorded,
      // that answer is the recorded one (201, 402 card_declined, …), byte for byte.
      await this.followPending(response, deadline, idempotencyKey);
    }
  }

  private async followPending(accepted: RawResponse, deadline: number, idempotencyKey: string): Promise<void> {
    let resource = JSON.parse(accepted.text) as { status?: string };
    const location = accepted.headers.get('location');
    const requestId = accepted.headers.get('x-request-id');
    let wait = retryAfterMs(accepted.headers) ?? 500;
    for (;;) {
      if (Date.now() + wait > deadline) throw new OperationPendingError(resource, location, idempotencyKey, requestId);
      await this.sleep(wait);
      if (!location || !inProgress.has(resource.status ?? '')) return;
      const polled = await this.send('GET', new URL(location, this.baseUrl + '/').toString());
      if (polled.status !== 200) return;
      resource = JSON.parse(polled.text) as { status?: string };
      if (!inProgress.has(resource.status ?? '')) return;
      wait = Math.min(wait * 2, 2000);
    }
  }

  /** Newest first, page after page, until the list ends. */
  async *paginate<T extends { id: string }>(path: string, query: Record<string, QueryValue>): AsyncGenerator<T> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.get<List<T>>(path, { ...query, ...(cursor ? { starting_after: cursor } : {}) });
      yield* page.data;
      const last = page.data.at(-1);
      if (!page.has_more || !last) return;
      cursor = last.id;
    }
  }

  private url(path: string, query: Record<string, QueryValue> = {}): string {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    return url.toString();
  }

  /** One request, retried while the answer says nothing final happened. */
  private async send(method: string, url: string, options: { body?: unknown; idempotencyKey?: string } = {}): Promise<RawResponse> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, accept: 'application/json' };
    if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    for (let retry = 0; ; retry++) {
      let response: RawResponse;
      try {
        const answer = await this.fetch(url, { method, headers, body, signal: AbortSignal.timeout(this.timeoutMs), redirect: 'error' });
        // The body is part of the answer: a connection cut while reading it is a network error too.
        response = { status: answer.status, headers: answer.headers, text: await answer.text(), url };
      } catch (cause) {
        if (retry >= this.maxRetries) {
          throw new ConnectionError(`${method} ${url}: no answer after ${retry + 1} tries (${(cause as Error)?.message ?? cause})`, { cause });
        }
        await this.sleep(backoffMs(retry, null, this.backoff, this.random));
        continue;
      }
      if (!retryable(response.status) || retry >= this.maxRetries) return response;
      const asked = retryAfterMs(response.headers);
      // Blocking the caller for longer is worse than telling it when to come back.
      if (asked !== null && asked > this.maxRetryAfterMs) return response;
      await this.sleep(backoffMs(retry, asked, this.backoff, this.random));
    }
  }

  private parse<T>(response: RawResponse): T {
    if (response.status >= 200 && response.status < 300) return JSON.parse(response.text) as T;
    const error = errorFromResponse(response.status, response.text, response.headers.get('x-request-id'));
    if (error instanceof RateLimitedError) {
      const ms = retryAfterMs(response.headers);
      error.retryAfterSeconds = ms === null ? null : Math.ceil(ms / 1000);
    }
    throw error;
  }
}
