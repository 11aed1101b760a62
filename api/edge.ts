import type { Context, MiddlewareHandler } from 'hono';
import { timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { getConnInfo } from '@hono/node-server/conninfo';
import { ApiError } from '../domain/errors';
import type { ApiDeps, AppEnv } from './context';

/**
 * The API's edge defences that are not about one route: response headers, rate limits per
 * tenant, a limit on failed authentication per client address, and access to /metrics.
 * The limits are kept in this process's memory: with several API processes behind one port
 * (API_PROCESSES, api/primary.ts) each enforces its share of every limit, so together they
 * hold it ([docs/scaling.md](../docs/scaling.md)).
 */

/** Answers are personal and JSON: never cached by a shared cache, never sniffed as HTML. */
export function securityHeaders(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    // The reference page's script sets its own (public) caching; everything else is no-store.
    if (!c.res.headers.has('Cache-Control')) c.res.headers.set('Cache-Control', 'no-store');
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
  };
}

/** A fixed one-window counter per name: cheap, and its remaining quota is exact for the headers. */
export class WindowCounter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  constructor(private readonly windowMs: number, private readonly now: () => number = Date.now) {}

  /** Counts one hit against `limit`; says whether it is within it, what is left and when the window ends. */
  hit(name: string, limit: number): { allowed: boolean; remaining: number; resetMs: number } {
    const now = this.now();
    let window = this.windows.get(name);
    if (!window || now - window.start >= this.windowMs) {
      if (this.windows.size > 50_000) this.prune(now);
      window = { start: now, count: 0 };
      this.windows.set(name, window);
    }
    const resetMs = window.start + this.windowMs - now;
    if (window.count >= limit) return { allowed: false, remaining: 0, resetMs };
    window.count++;
    return { allowed: true, remaining: limit - window.count, resetMs };
  }

  /** How many hits the current window of `name` holds (0 when it has ended). */
  count(name: string): number {
    const window = this.windows.get(name);
    return window && this.now() - window.start < this.windowMs ? window.count : 0;
  }

  private prune(now: number): void {
    for (const [name, window] of this.windows) if (now - window.start >= this.windowMs) this.windows.delete(name);
  }
}

export const defaultRateLimits = { read: 100, write: 100 };

/**
 * Per-tenant limits, reads (GET, HEAD) and writes (everything else) counted apart, each with
 * the tenant's own setting or the process default. Over the limit: 429 rate_limited with
 * Retry-After and the IETF RateLimit-Policy / RateLimit fields. It runs before the
 * idempotency layer, so a 429 is never an operation's recorded outcome: the retry runs.
 */
export function tenantRateLimit(deps: ApiDeps): MiddlewareHandler<AppEnv> {
  const counter = new WindowCounter(1000);
  return async (c, next) => {
    const tenant = c.var.tenant;
    const kind = c.req.method === 'GET' || c.req.method === 'HEAD' ? 'read' : 'write';
    const limit =
      kind === 'read'
        ? (tenant.rate_limit_read_per_second ?? deps.config.RATE_LIMIT_READ_PER_SECOND ?? defaultRateLimits.read)
        : (tenant.rate_limit_write_per_second ?? deps.config.RATE_LIMIT_WRITE_PER_SECOND ?? defaultRateLimits.write);
    // This process's share (at least one request a second, so a small limit never locks a tenant out).
    const processes = Math.max(1, deps.liveProcesses?.() ?? 1);
    const verdict = counter.hit(`${tenant.id}:${kind}`, Math.max(1, Math.floor(limit / processes)));
    const resetSeconds = Math.max(1, Math.ceil(verdict.resetMs / 1000));
    const headers = {
      'RateLimit-Policy': `"${kind}";q=${limit};w=1`,
      RateLimit: `"${kind}";r=${verdict.remaining};t=${resetSeconds}`,
    };
    if (!verdict.allowed) {
      throw new ApiError('rate_limited', `Too many ${kind} requests: this tenant may make ${limit} per second. Retry after ${resetSeconds} s.`, { limit, window_seconds: 1 }, {
        ...headers,
        'Retry-After': String(resetSeconds),
      });
    }
    await next();
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  };
}

/** IPv4 written as IPv4-mapped IPv6 ("::ffff:127.0.0.2") is the same client as "127.0.0.2". */
function canonicalAddress(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return (mapped ? mapped[1]! : address).toLowerCase();
}

function inList(list: BlockList, address: string): boolean {
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The client's address: the socket's, or, when the socket is one of the TRUSTED_PROXIES, the
 * nearest X-Forwarded-For hop that is not a trusted proxy (read from the right: each trusted
 * proxy appends the address it was connected from, and everything left of the first untrusted
 * hop was written by the client and proves nothing). "unknown" outside a server (app.request
 * in unit tests), the only case where clients share a count.
 */
export function clientAddress(c: Context, trustedProxies: BlockList | null = null): string {
  let socket: string | undefined;
  try {
    socket = getConnInfo(c).remote.address;
  } catch {
    return 'unknown';
  }
  if (!socket) return 'unknown';
  const address = canonicalAddress(socket);
  if (!trustedProxies || !inList(trustedProxies, address)) return address;
  const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((hop) => canonicalAddress(hop.trim())).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    // A malformed hop is not a proxy's: it counts as the client (bounded, it only names a counter).
    if (!inList(trustedProxies, hops[i]!)) return hops[i]!.slice(0, 64);
  }
  // Every hop is a trusted proxy: the leftmost is the nearest thing to a client there is.
  return hops[0] ?? address;
}

/**
 * Limits failed authentication (API keys, the admin token, the metrics token) per client
 * address: past `perMinute` failures in a minute, each further failure from that address is
 * answered 429 instead of 401 until the minute ends.
 *
 * Only failing attempts are limited: a valid credential is accepted whatever any address has
 * failed, so no client (nor one sharing its NAT or proxy) can lock others out. What defeats
 * guessing is the credentials' size (API keys carry 256 random bits; the admin token is 32+
 * characters in production), not a lock-out; the limit bounds what a flood of bad keys costs
 * and keeps it visible (429s by address).
 *
 * Exactly `perMinute` failures per address are answered 401, however many arrive at once: a
 * failure is counted against the limit in the same synchronous step that decides its answer.
 */
export class AuthFailureLimit {
  private readonly failures = new WindowCounter(60_000);
  constructor(
    private readonly perMinute: number,
    private readonly trustedProxies: BlockList | null = null,
  ) {}

  /** Counts a failed authentication and returns the 401 to answer, or throws 429 if it is one too many. */
  fail(c: Context, unauthorized: ApiError): ApiError {
    if (!this.failures.hit(clientAddress(c, this.trustedProxies), this.perMinute).allowed) throw AuthFailureLimit.limited();
    return unauthorized;
  }

  private static limited(): ApiError {
    return new ApiError('rate_limited', 'Too many failed authentications from this address; retry in a minute.', {}, { 'Retry-After': '60' });
  }
}

/** Compares secrets in constant time (for equal lengths; a length difference is not a secret). */
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** /metrics needs a bearer token: METRICS_TOKEN if set, or the admin token. */
export function metricsAccess(deps: ApiDeps, failures: AuthFailureLimit): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const given = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
    const tokens = [deps.config.ADMIN_TOKEN, deps.config.METRICS_TOKEN].filter((t): t is string => !!t);
    if (!tokens.some((token) => sameSecret(given, token))) {
      throw failures.fail(c, new ApiError('unauthorized', 'Provide METRICS_TOKEN (or the admin token) as "Authorization: Bearer <token>".'));
    }
    await next();
  };
}

/**
 * One answer of `probe` shared for `ttlMs` after it is done, and by every caller while it runs:
 * /readyz is unauthenticated and pings PostgreSQL and Temporal, so without sharing, a flood of
 * probes would become a flood on both. Readiness a second old is what a balancer's
 * health check wants anyway.
 */
export function sharedFor<T>(ttlMs: number, probe: () => Promise<T>, now: () => number = Date.now): () => Promise<T> {
  let current: { answer: Promise<T>; doneAt: number | null } | null = null;
  return () => {
    if (current && (current.doneAt === null || now() - current.doneAt < ttlMs)) return current.answer;
    const entry: { answer: Promise<T>; doneAt: number | null } = { answer: probe(), doneAt: null };
    entry.answer.then(
      () => void (entry.doneAt = now()),
      () => void (entry.doneAt = now()),
    );
    current = entry;
    return entry.answer;
  };
}
