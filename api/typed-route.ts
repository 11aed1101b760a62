import type { RouteConfig, RouteConfigToTypedResponse, RouteHandler, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { FinalResponse } from '../shared/definitions';
import type { AppEnv } from './context';

/**
 * A route's handler typed from its definition (the `AppRouteHandler<typeof route>` of the
 * @hono/zod-openapi starters): the params, query and body it reads are the validated ones, and
 * what it returns must be one of the responses the route declares, status and body alike. A
 * handler answering an undeclared status or a body of another shape does not compile.
 */
export type AppRouteHandler<R extends RouteConfig> = RouteHandler<R, AppEnv>;

/** Every response a route declares, as the typed responses its handler may return. */
export type RouteResponse<R extends RouteConfig> = RouteConfigToTypedResponse<R>;

/** The statuses a route declares. */
export type RouteStatus<R extends RouteConfig> = keyof R['responses'] & number;

/** The body a route declares for a JSON response of this status. */
export type RouteJson<R extends RouteConfig, S extends number> = R['responses'][S] extends {
  content: { 'application/json': { schema: infer Schema extends z.ZodType } };
}
  ? z.output<Schema>
  : never;

/**
 * The operation a route performs, named by its method and path template:
 * `'POST /v1/payments/{id}/capture'`. It scopes idempotency keys (a key reused on another
 * route is another operation) and labels metrics, so it is derived, never written beside
 * the path it repeats.
 */
export function operationName(route: Pick<RouteConfig, 'method' | 'path'>): string {
  return `${route.method.toUpperCase()} ${route.path}`;
}

/**
 * A final response built now for one of the route's declared statuses, from a body of the
 * declared shape, ready to be recorded and replayed byte for byte.
 */
export function finalResponse<R extends RouteConfig, S extends RouteStatus<R>>(
  _route: R,
  status: S,
  body: RouteJson<R, S>,
  location: string | null = null,
): FinalResponse {
  return { status, body: JSON.stringify(body), location };
}

/** What the idempotency protocol answers (api/idempotency.ts): recorded JSON bytes (or a 202's), and the headers that go with them. */
export interface RecordedAnswer {
  response: Pick<FinalResponse, 'status' | 'body'>;
  headers: Record<string, string>;
}

/**
 * Answers with JSON bytes recorded for this route (its final response, stored earlier and
 * replayed byte for byte, or a 202 built from the route's declared body) as one of the
 * route's typed responses: `return recordedReply(c, route, await runIdempotent(c, deps, route, …))`.
 * The bytes were typed when they were built; here only their status can be checked, and it
 * is: a status the route does not declare is logged as a contract breach (the stored answer
 * is still the answer: replays never change).
 *
 * The one place where bytes become a typed response: hono types `c.body()` as raw bytes, not
 * as the JSON the route declares. (Kept out of the generic protocol functions: a route's
 * response type left generic inside a Promise costs tsc minutes.)
 */
export function recordedReply<R extends RouteConfig>(c: Context<AppEnv>, route: R, answer: RecordedAnswer): RouteResponse<R> {
  return recordedResponse(c, route, answer) as unknown as RouteResponse<R>;
}

/** `recordedReply` as a plain Response, for a route's middleware (api/idempotency.ts replayFirst). */
export function recordedResponse(c: Context<AppEnv>, route: Pick<RouteConfig, 'method' | 'path' | 'responses'>, answer: RecordedAnswer): Response {
  const { response, headers } = answer;
  if (!Object.hasOwn(route.responses, String(response.status))) {
    c.var.logger?.error({ route: operationName(route), status: response.status }, 'answer with a status the route does not declare');
  }
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  c.header('Content-Type', 'application/json');
  return c.body(response.body, response.status as ContentfulStatusCode);
}
