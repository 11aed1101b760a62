import { Hono } from 'hono';
import { SandboxError } from './errors';
import { neverAnswer as hang } from './http';
import { adminRoutes } from './routes/admin';
import { challengeRoutes } from './routes/challenge';
import { chargeRoutes } from './routes/charges';
import { disputeRoutes } from './routes/disputes';
import { refundRoutes } from './routes/refunds';
import { reportRoutes } from './routes/reports';
import type { SandboxDeps } from './deps';
import type { WebhookDelivery } from './webhooks';

const unavailable = () =>
  new SandboxError(503, 'api_error', 'service_unavailable', 'The sandbox is in an outage (POST /_sandbox/outage); nothing was done.');


/** The stand-in PSP: a card PSP's API (intents, charges, refunds, disputes) over its own durable state in the `sandbox` schema. */
export function createSandboxApp(deps: SandboxDeps, delivery: WebhookDelivery) {
  const app = new Hono();

  /**
   * Outages, for /v1 (and /healthz, /challenge when down); /_sandbox always answers,
   * so an outage can be ended. unavailable: creates, captures, voids and refunds answer 503
   * having done nothing, lookups answer. down: everything answers 503 (outcomes unknown).
   * timeout: requests are carried out (a create commits its charge) but never answered.
   */
  app.use('*', async (c, next) => {
    const mode = deps.runtime.outage;
    const path = c.req.path;
    if (mode === 'none' || path.startsWith('/_sandbox/')) return next();
    const api = path.startsWith('/v1/');
    if (mode === 'down' && (api || path === '/healthz' || path.startsWith('/challenge/'))) throw unavailable();
    if (mode === 'unavailable' && api && c.req.method === 'POST') throw unavailable();
    if (mode === 'timeout' && api) {
      if (c.req.method !== 'POST') return void (c.res = await hang(c));
      await next();
      c.res = await hang(c);
      return;
    }
    return next();
  });

  app.get('/healthz', async (c) => {
    await deps.sql`SELECT 1`;
    return c.json({ ok: true });
  });
  app.route('/v1/charges', chargeRoutes(deps));
  app.route('/v1/refunds', refundRoutes(deps));
  app.route('/v1/disputes', disputeRoutes(deps));
  app.route('/v1/reports', reportRoutes(deps));
  app.route('/challenge', challengeRoutes(deps));
  app.route('/_sandbox', adminRoutes(deps, delivery));

  app.notFound((c) =>
    c.json(new SandboxError(404, 'invalid_request_error', 'route_not_found', `No route ${c.req.method} ${c.req.path}`).toBody(), 404),
  );
  app.onError((error, c) => {
    if (error instanceof SandboxError) return c.json(error.toBody(), error.status);
    console.error('sandbox: unexpected error', error);
    return c.json(new SandboxError(500, 'api_error', 'internal_error', 'An unexpected error occurred.').toBody(), 500);
  });

  return app;
}
