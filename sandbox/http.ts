import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';
import { invalidRequest } from './errors';
import type { StoredResponse } from './idempotency';

/** Printable ASCII without spaces, as the orchestrator's own keys are. */
const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

export function requireIdempotencyKey(c: Context): string {
  const key = c.req.header('Idempotency-Key');
  if (key === undefined || key === '') {
    throw invalidRequest('idempotency_key_missing', 'This endpoint requires an Idempotency-Key header.');
  }
  if (!idempotencyKeyPattern.test(key)) {
    throw invalidRequest('idempotency_key_invalid', 'Idempotency-Key must be 1-255 printable ASCII characters without spaces.');
  }
  return key;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length > 0 ? issue.path.join('.') : 'request';
  return `${where}: ${issue.message}`;
}

/** An empty body is `{}`, so endpoints whose parameters are all optional accept none. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const text = await c.req.text();
  let raw: unknown = {};
  if (text.trim() !== '') {
    try {
      raw = JSON.parse(text);
    } catch {
      throw invalidRequest('invalid_json', 'The request body is not valid JSON.');
    }
  }
  return parseParams(schema, raw);
}

export function parseParams<S extends z.ZodType>(schema: S, raw: unknown): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw invalidRequest('parameter_invalid', parsed.error.issues.map(describeIssue).join('; '));
  }
  return parsed.data;
}

export function sendStored(c: Context, stored: StoredResponse): Response | Promise<Response> {
  if (stored.lost) return neverAnswer(c);
  return c.body(stored.body, stored.status as ContentfulStatusCode, {
    'Content-Type': 'application/json; charset=UTF-8',
  });
}

/**
 * The lost response: the effect is committed, but the client never hears back. The request
 * is held open until the client gives up (its timeout aborts the connection) or the server
 * shuts down (closing the socket aborts it too).
 */
export async function neverAnswer(c: Context): Promise<Response> {
  const signal = c.req.raw.signal;
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  // Nobody is listening any more; this only completes the handler.
  return new Response(null, { status: 499 });
}
