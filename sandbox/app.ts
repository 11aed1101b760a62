import { Hono } from 'hono';
import { SandboxError } from './errors';
import { chargeRoutes } from './routes/charges';
import { refundRoutes } from './routes/refunds';
import type { SandboxDeps } from './deps';

/** The stand-in PSP: a Stripe-like API over its own durable state in the `sandbox` schema. */
export function createSandboxApp(deps: SandboxDeps) {
  const app = new Hono();

  app.get('/healthz', async (c) => {
    await deps.sql`SELECT 1`;
    return c.json({ ok: true });
  });
  app.route('/v1/charges', chargeRoutes(deps));
  app.route('/v1/refunds', refundRoutes(deps));

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
