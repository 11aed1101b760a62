import type { Context, ErrorHandler, MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { bodyLimit } from 'hono/body-limit';
import type { TenantRow } from '../db/tenants';
import { tenantOfActiveKey } from '../db/credentials';
import { ApiError, apiErrorBody, errorStatus } from '../domain/errors';
import { newId } from '../domain/ids';
import { isTemporalUnavailable, temporalUnavailableReason } from '../lib/temporal';
import { inServerSpan, resourceAttribute } from '../lib/tracing';
import { isDatabaseUnavailable } from '../db/connect';
import { sqlState } from '../db/sqlstate';
import type { ApiDeps, AppEnv } from './context';
import { RETENTION_HEADER, temporalUnavailable } from './idempotency';
import { sameSecret, type AuthFailureLimit } from './edge';

/** Request bodies above this are refused with 413 before they are parsed. */
export const MAX_BODY_BYTES = 64 * 1024;

/** 8 to 255 printable ASCII characters, no spaces (docs/CONTRACT.md §3.1). */
const idempotencyKeyPattern = /^[\x21-\x7e]{8,255}$/;
const requestIdPattern = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Each request a server span (docs/tracing.md), named by its route template, with the
 * resource it made or acted on (the payment's id, once known: the idempotency protocol's
 * resource, or the path's). Its context is the active one while the request runs: the Temporal
 * client carries it into the workflow, and log lines carry its ids. Nothing while tracing is off.
 */
export function traceRequest(): MiddlewareHandler<AppEnv> {
  return async (c, next) =>
    inServerSpan(c.req.method, c.req.raw.headers, next, () => {
      const route = c.req.routePath && c.req.routePath !== '/*' ? c.req.routePath : 'unmatched';
      const id = c.var.resourceId ?? (route.includes('{id}') || route.includes(':id') ? c.req.param('id') : undefined);
      return { route, status: c.res.status, attributes: { request_id: c.var.requestId ?? '', ...(id ? resourceAttribute(id) : {}) } };
    });
}

/**
 * A request id (the caller's X-Request-Id if sane, else a new one), echoed, attached to every
 * log line of the request and passed to the workflow. One log line and one latency sample
 * per request, labelled by route template, never by raw path.
 */
export function requestContext(deps: ApiDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    const given = c.req.header('x-request-id');
    const requestId = given && requestIdPattern.test(given) ? given : newId('req');
    c.set('requestId', requestId);
    c.set('logger', deps.logger.child({ request_id: requestId }));
    c.header('X-Request-Id', requestId);
    await next();
    const route = c.req.routePath && c.req.routePath !== '/*' ? c.req.routePath : 'unmatched';
    const seconds = (performance.now() - started) / 1000;
    deps.metrics.httpDuration.observe({ method: c.req.method, route, status: String(c.res.status) }, seconds);
    // Probes and scrapes are counted in the histogram but not logged line by line.
    if (route === '/metrics' || route === '/healthz' || route === '/readyz') return;
    c.var.logger.info(
      {
        method: c.req.method,
        route,
        status: c.res.status,
        duration_ms: Math.round(seconds * 1000),
        idempotency: c.var.idempotencyOutcome,
        resource_id: c.var.resourceId,
      },
      'request',
    );
  };
}

/** Bearer API key → tenant. Every read and write below this is scoped to that tenant. */
export function authenticate(deps: ApiDeps, failures: AuthFailureLimit): MiddlewareHandler<AppEnv> {
  const cache = new TenantCache(deps);
  return async (c, next) => {
    const apiKey = bearer(c);
    const tenant = apiKey ? await cache.get(apiKey) : null;
    if (!tenant) throw failures.fail(c, new ApiError('unauthorized', 'Provide a valid API key as "Authorization: Bearer <api_key>".'));
    c.set('tenant', tenant);
    c.set('logger', c.var.logger.child({ tenant_id: tenant.id }));
    await next();
  };
}

/**
 * API keys resolve to tenants through a short-lived in-process cache: an indexed lookup
 * per request otherwise doubles the database work of a replay. A tenant's data never comes
 * from here, only its identity and settings. The TTL bounds how long a revoked key (or an
 * old rate limit) is still honoured by a process: under 5 seconds. Misses are not cached.
 */
class TenantCache {
  private readonly entries = new Map<string, { tenant: TenantRow; until: number }>();
  static readonly ttlMs = 2_000;
  constructor(private readonly deps: ApiDeps) {}
  /** Lookups in flight: a storm of requests with one key, arriving as its entry expires, makes one lookup (it also stamps last use). */
  private readonly lookups = new Map<string, Promise<TenantRow | null>>();
  async get(apiKey: string): Promise<TenantRow | null> {
    const hit = this.entries.get(apiKey);
    if (hit && hit.until > Date.now()) return hit.tenant;
    let lookup = this.lookups.get(apiKey);
    if (!lookup) {
      lookup = tenantOfActiveKey(this.deps.sql, apiKey).finally(() => this.lookups.delete(apiKey));
      this.lookups.set(apiKey, lookup);
    }
    const tenant = await lookup;
    if (tenant) {
      if (this.entries.size > 10_000) this.entries.clear();
      this.entries.set(apiKey, { tenant, until: Date.now() + TenantCache.ttlMs });
    }
    return tenant;
  }
}

export function adminOnly(deps: ApiDeps, failures: AuthFailureLimit): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!sameSecret(bearer(c) ?? '', deps.config.ADMIN_TOKEN)) {
      throw failures.fail(c, new ApiError('unauthorized', 'Provide the admin token as "Authorization: Bearer <ADMIN_TOKEN>".'));
    }
    await next();
  };
}

function bearer(c: Context): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  return match ? match[1]! : null;
}

/** 415 unless the request says its body is JSON (`application/json`, with any parameters: `; charset=utf-8`). */
export function requireJson(c: Context): void {
  if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) {
    throw new ApiError('unsupported_media_type', 'Send the body as JSON with "Content-Type: application/json".');
  }
}

/**
 * JSON only, and not too much of it: 415 and 413 before anything is parsed.
 *
 * An empty body is no body, whatever its framing (no Content-Length, `Content-Length: 0`, or
 * chunked with no bytes) and whatever type a client library labelled it with: its
 * Content-Type is dropped, so the route validates `{}` (its defaults, or "required" issues
 * with field paths), never a JSON parse error or a media-type refusal of nothing. A request
 * with neither Content-Length nor Transfer-Encoding has no body (HTTP/1.1); a chunked one is
 * read here, within the size limit, to know (the route then parses the bytes read).
 */
export function jsonBody(): MiddlewareHandler<AppEnv> {
  const tooLarge = () => new ApiError('payload_too_large', `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`);
  const limit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw tooLarge();
    },
  });
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const length = c.req.header('content-length');
    if (c.req.header('transfer-encoding') === undefined) {
      if (length === undefined || /^0+$/.test(length)) {
        c.req.raw.headers.delete('content-type');
        return next();
      }
      // Why not bodyLimit here: it reads c.req.raw.body, which makes @hono/node-server build a
      // full web Request and stream per POST (a third of a replay's CPU); Node has already
      // refused a malformed length, so the declared one is checked as bodyLimit would.
      if (/^\d+$/.test(length)) {
        if (Number(length) > MAX_BODY_BYTES) throw tooLarge();
        requireJson(c);
        return next();
      }
    }
    return limit(c, async () => {
      // Read through the limit (413 past it) and kept by hono for the route's own parse.
      const bytes = await c.req.arrayBuffer();
      if (bytes.byteLength === 0) c.req.raw.headers.delete('content-type');
      else requireJson(c);
      await next();
    });
  };
}

/** Every mutating /v1 request carries a valid Idempotency-Key; the retention window is advertised. */
export function requireIdempotencyKey(deps: ApiDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (c.req.method !== 'POST') return next();
    c.header(RETENTION_HEADER, String(deps.config.IDEMPOTENCY_RETENTION_SECONDS));
    const key = c.req.header('idempotency-key');
    if (key === undefined || key === '') {
      throw new ApiError('idempotency_key_missing', 'Mutating requests need an "Idempotency-Key" header: a unique value per operation, reused on every retry.');
    }
    if (!idempotencyKeyPattern.test(key)) {
      throw new ApiError('idempotency_key_invalid', 'The Idempotency-Key must be 8 to 255 printable ASCII characters without spaces.');
    }
    c.set('idempotencyKey', key);
    await next();
  };
}

/** The one place where errors become responses; nothing else leaks (no stack traces). */
export function errorHandler(): ErrorHandler<AppEnv> {
  return (error, c) => {
    let apiError: ApiError;
    if (error instanceof ApiError) {
      apiError = error;
    } else if (error instanceof HTTPException && error.status === 400) {
      apiError = new ApiError('invalid_request', 'The body is not valid JSON.');
    } else if (error instanceof HTTPException && error.status === 413) {
      apiError = new ApiError('payload_too_large', `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`);
    } else if (error instanceof HTTPException && error.status === 415) {
      apiError = new ApiError('unsupported_media_type', 'Send the body as JSON with "Content-Type: application/json".');
    } else if (error instanceof HTTPException && error.status >= 400 && error.status < 500) {
      // Whatever else the framework refuses is the request's fault: a 400, never a 500.
      apiError = new ApiError('invalid_request', `The request is invalid: ${error.message || 'refused'}.`);
    } else if (sqlState(error)?.startsWith('22')) {
      // Validation refuses what PostgreSQL cannot store; this is the net under it, so a value
      // that slips through is still the client's 400, never a 500.
      c.var.logger?.warn({ err: error }, 'PostgreSQL refused a value that passed validation');
      apiError = new ApiError('invalid_request', 'A value in the request cannot be stored.', { issues: [] });
    } else if (isDatabaseUnavailable(error)) {
      c.var.logger?.warn({ err: error }, 'PostgreSQL unavailable; failing closed');
      apiError = new ApiError('service_unavailable', 'A dependency is unreachable; nothing was executed. Retry later.', {}, { 'Retry-After': '2' });
    } else if (isTemporalUnavailable(error)) {
      c.var.logger?.warn({ err: error, reason: temporalUnavailableReason(error) }, 'Temporal unavailable; failing closed');
      apiError = temporalUnavailable();
    } else {
      c.var.logger?.error({ err: error }, 'unhandled error');
      apiError = new ApiError('internal_error', `An internal error occurred. Quote request id ${c.var.requestId ?? 'unknown'} to support.`);
    }
    for (const [name, value] of Object.entries(apiError.headers)) c.header(name, value);
    return c.json(apiErrorBody(apiError.type, apiError.message, apiError.extra), errorStatus[apiError.type]);
  };
}
