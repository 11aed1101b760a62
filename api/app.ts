import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OpenAPIHono, createRoute, z } from '@hono/zod-openapi';
import type { OpenAPIHonoOptions } from '@hono/zod-openapi';
import { apiErrorBody, errorStatus } from '../domain/errors';
import { errorResponses } from './routes/openapi';
import { ping, type Sql } from '../db/connect';
import { listHealth, POOLED_SCOPE, routingSnapshot } from '../db/routing';
import { routingMetricsText } from '../lib/metrics';
import type { ApiDeps, AppEnv } from './context';
import { adminOnly, authenticate, errorHandler, jsonBody, requestContext, requireIdempotencyKey, traceRequest } from './middleware';
import { RETENTION_HEADER } from './idempotency';
import { cidrBlockList } from '../lib/webhook-target';
import { AuthFailureLimit, metricsAccess, securityHeaders, sharedFor, tenantRateLimit } from './edge';
import { credentialRoutes } from './routes/credentials';
import { accountRoutes } from './routes/account';
import { adminRoutes } from './routes/admin';
import { operatorRoutes } from './routes/operators';
import { consoleRoutes } from './console/routes';
import { reconciliationRoutes } from './routes/reconciliation';
import { eventRoutes } from './routes/events';
import { paymentRoutes } from './routes/payments';
import { refundRoutes } from './routes/refunds';
import { disputeRoutes } from './routes/disputes';
import { customerRoutes } from './routes/customers';
import { paymentMethodRoutes } from './routes/customers-payment-methods';
import { providerWebhookRoutes } from './routes/provider-webhooks';
import { paymentReturnRoutes } from './routes/payments-return';

/** Request validation failures: 400 invalid_request with the zod issues. Nothing was executed. */
const invalidRequest: NonNullable<OpenAPIHonoOptions<AppEnv>['defaultHook']> = (result, c) => {
  if (result.success) return;
  const issues = result.error.issues.map((issue) => ({ path: issue.path.join('.'), code: issue.code, message: issue.message }));
  return c.json(apiErrorBody('invalid_request', 'The request is invalid; see issues.', { issues }), errorStatus.invalid_request);
};

const healthRoute = createRoute({
  method: 'get',
  path: '/healthz',
  tags: ['Operations'],
  summary: 'Liveness',
  responses: { 200: { description: 'The process is up.', content: { 'application/json': { schema: z.object({ status: z.literal('ok') }) } } } },
});

const readyRoute = createRoute({
  method: 'get',
  path: '/readyz',
  tags: ['Operations'],
  summary: 'Readiness: PostgreSQL and Temporal answer (probed at most once a second)',
  responses: {
    200: { description: 'Ready.', content: { 'application/json': { schema: z.object({ status: z.string(), checks: z.record(z.string(), z.string()) }) } } },
    503: { description: 'A dependency is unreachable.', content: { 'application/json': { schema: z.object({ status: z.string(), checks: z.record(z.string(), z.string()) }) } } },
  },
});

const metricsRoute = createRoute({
  method: 'get',
  path: '/metrics',
  tags: ['Operations'],
  summary: 'Prometheus metrics of this API process (METRICS_TOKEN or the admin token)',
  description: "HTTP latency by route and status, idempotency outcomes (new, replayed, mismatch, waited, pending, fail_closed), Node process metrics, routing's shared counts per PSP and segment level (routing_outcomes_total, routing_traffic_share, routing_approval_estimate, routing_provider_health; pooled, from PostgreSQL); with API_EAGER_START=on also the hosted payment worker's (circuit breakers, outcomes).",
  security: [{ metricsToken: [] }],
  responses: {
    200: { description: 'Prometheus text exposition format.', content: { 'text/plain': { schema: z.string() } } },
    ...errorResponses(['unauthorized']),
  },
});

/**
 * Routing's shared state per PSP and segment level (pooled: no tenant in the labels), read at
 * each scrape; a database that does not answer leaves them out rather than failing the scrape.
 */
async function routingMetrics(sql: Sql): Promise<string> {
  try {
    const [segments, health] = await Promise.all([routingSnapshot(sql, POOLED_SCOPE), listHealth(sql)]);
    return routingMetricsText({ segments, health });
  } catch {
    return '# routing metrics left out: the database did not answer\n';
  }
}

/** The HTTP API, built from its dependencies. `api/process.ts` serves it; tests call it directly. */
export function createApp(deps: ApiDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: invalidRequest });
  const authFailures = new AuthFailureLimit(deps.config.AUTH_FAILURES_PER_MINUTE ?? 30, cidrBlockList(deps.config.TRUSTED_PROXIES ?? '', 'TRUSTED_PROXIES'));
  app.use('*', traceRequest(), requestContext(deps), securityHeaders());
  app.use('/metrics', metricsAccess(deps, authFailures));
  app.onError(errorHandler());
  app.notFound((c) => c.json(apiErrorBody('not_found', `No route for ${c.req.method} ${c.req.path}`), 404));

  app.openapi(healthRoute, (c) => c.json({ status: 'ok' as const }, 200));
  const ready = sharedFor(READINESS_CACHE_MS, () => readiness(deps));
  app.openapi(readyRoute, async (c) => {
    const checks = await ready();
    const ok = Object.values(checks).every((v) => v === 'ok');
    return c.json({ status: ok ? 'ready' : 'unavailable', checks }, ok ? 200 : 503);
  });

  app.openapi(metricsRoute, async (c) => {
    const more = deps.moreMetrics ? `\n${await deps.moreMetrics()}` : '';
    return c.text(`${await deps.metrics.registry.metrics()}${more}\n${await routingMetrics(deps.sql)}`, 200, { 'Content-Type': deps.metrics.registry.contentType });
  });

  app.use('/v1/*', authenticate(deps, authFailures), tenantRateLimit(deps), jsonBody(), requireIdempotencyKey(deps));
  app.route('/', paymentRoutes(deps));
  app.route('/', refundRoutes(deps));
  app.route('/', disputeRoutes(deps));
  app.route('/', customerRoutes(deps));
  app.route('/', paymentMethodRoutes(deps));
  app.route('/', accountRoutes(deps));
  app.route('/', eventRoutes(deps));

  // The PSP's webhooks: outside /v1 (a signature instead of an API key, the PSP's event id instead of an Idempotency-Key).
  app.route('/', providerWebhookRoutes(deps));
  // The customer's return from a PSP's 3-D Secure challenge: outside /v1 (the customer's browser, no API key).
  app.route('/', paymentReturnRoutes(deps));

  app.use('/admin/*', adminOnly(deps, authFailures), jsonBody());
  app.route('/', adminRoutes(deps));
  app.route('/', operatorRoutes(deps));
  app.route('/', reconciliationRoutes(deps));
  app.route('/', credentialRoutes(deps));

  // The operator console: HTML pages with sessions of their own (api/console/, docs/console.md).
  app.route('/', consoleRoutes(deps));

  documentApi(app, deps);
  return app;
}

/** The API's own description: the OpenAPI document (/openapi.json) and the reference page (/docs), served offline. */
function documentApi(app: OpenAPIHono<AppEnv>, deps: ApiDeps): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'apiKey', { type: 'http', scheme: 'bearer', description: 'The tenant API key (sk_…).' });
  app.openAPIRegistry.registerComponent('securitySchemes', 'adminToken', { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN (the /admin routes).' });
  app.openAPIRegistry.registerComponent('securitySchemes', 'metricsToken', { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, or ADMIN_TOKEN (GET /metrics).' });
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Payment orchestrator',
      version: '1.0.0',
      description:
        'Effectively-once payments and refunds. Every mutating request carries an `Idempotency-Key`; a repeat with the same ' +
        'request replays the first final response byte for byte (`Idempotent-Replayed: true`), a repeat with a different ' +
        `request is refused with 422, and outcomes are remembered for the window given in \`${RETENTION_HEADER}\` ` +
        `(${deps.config.IDEMPOTENCY_RETENTION_SECONDS} s here). If PostgreSQL or Temporal is unreachable, mutating ` +
        'requests fail closed with 503 and `Retry-After`, and nothing is executed.',
    },
    security: [{ apiKey: [] }],
  });
  // The reference page's script is served from here, not a CDN: the page works offline.
  app.get('/docs/scalar.js', (c) => {
    c.header('Content-Type', 'application/javascript; charset=utf-8');
    c.header('Cache-Control', 'public, max-age=86400');
    return c.body(scalarBundle());
  });
  app.get('/docs', (c) => c.html(REFERENCE_PAGE));
}

/**
 * The reference page: Scalar's standalone script, served above, renders /openapi.json into the
 * element it is configured on. Nothing on the page is loaded from elsewhere.
 */
const REFERENCE_PAGE = `<!doctype html>
<html>
  <head>
    <title>Payment orchestrator API</title>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <script id="api-reference" data-url="/openapi.json" data-configuration='{"withDefaultFonts":false}'></script>
    <script src="/docs/scalar.js"></script>
  </body>
</html>`;

let scalarScript: string | undefined;
/**
 * The @scalar/api-reference standalone bundle, read once on first use. That package is a
 * devDependency (it brings a front-end toolchain): `npm run build` copies its one file
 * beside the compiled API, and development reads it from the package.
 */
function scalarBundle(): string {
  if (scalarScript === undefined) {
    const built = fileURLToPath(new URL(`./${SCALAR_BUNDLE_FILE}`, import.meta.url));
    scalarScript = readFileSync(existsSync(built) ? built : scalarStandalonePath(), 'utf8');
  }
  return scalarScript;
}

/** What `npm run build` names the copy of the reference page's script, beside dist/api/app.js. */
export const SCALAR_BUNDLE_FILE = 'scalar-standalone.js';

/** The standalone script inside the @scalar/api-reference package (installed with the devDependencies). */
export function scalarStandalonePath(): string {
  const entry = createRequire(import.meta.url).resolve('@scalar/api-reference');
  return path.join(path.dirname(entry), 'browser', 'standalone.js');
}

/** /readyz answers from one probe of PostgreSQL and Temporal per second at most. */
export const READINESS_CACHE_MS = 1000;

async function readiness(deps: ApiDeps): Promise<Record<string, string>> {
  const [postgres, temporal] = await Promise.allSettled([
    ping(deps.sql),
    deps.temporal.connection.withDeadline(Date.now() + 2000, () => deps.temporal.workflowService.getSystemInfo({})),
  ]);
  const verdict = (r: PromiseSettledResult<unknown>) => (r.status === 'fulfilled' ? 'ok' : `unreachable: ${String((r.reason as Error)?.message ?? r.reason).slice(0, 200)}`);
  return { postgres: verdict(postgres), temporal: verdict(temporal) };
}
