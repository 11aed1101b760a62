import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { findDispute, recordedProviderDispute, releaseDispute } from '../../db/disputes';
import { createTenant, findTenant, tenantExists, updateTenant, type TenantRow } from '../../db/tenants';
import { disputeResource } from '../../domain/resources';
import { disputeTimesOf, reportDispute } from '../../lib/dispute';
import { ApiError } from '../../domain/errors';
import { NETWORK_CARD_LIMITS, SCHEDULE_LIMITS } from '../../domain/recovery';
import { describeRefusals, unknownProviders, type Routing } from '../../domain/routing';
import { checkWebhookUrl, webhookTargetPolicy } from '../../lib/webhook-target';
import { insertApiKey } from '../../db/credentials';
import { defaultRateLimits } from '../edge';
import type { ApiDeps, AppEnv } from '../context';
import { withinTemporalDeadline } from '../idempotency';
import { CreatedTenant, CreateTenantBody, Dispute, IdParam, RoutingEstimates, Tenant, UpdateTenantBody } from '../schemas';
import { z } from '@hono/zod-openapi';
import { listHealth, POOLED_SCOPE, routingSnapshot } from '../../db/routing';
import { Routing as RoutingSchema } from '../../domain/routing';
import { errorResponses, jsonContent } from './openapi';

const createTenantRoute = createRoute({
  method: 'post',
  path: '/admin/tenants',
  tags: ['Admin'],
  summary: 'Create a tenant (admin token)',
  security: [{ adminToken: [] }],
  description: 'Returns the API key and the webhook signing secret once; only the key’s SHA-256 is stored.',
  request: { body: { content: jsonContent(CreateTenantBody), required: true } },
  responses: { 201: { description: 'The tenant, with its secrets.', content: jsonContent(CreatedTenant) }, ...errorResponses(['invalid_request', 'unauthorized', 'unsupported_media_type', 'payload_too_large']) },
});

const updateTenantRoute = createRoute({
  method: 'patch',
  path: '/admin/tenants/{id}',
  tags: ['Admin'],
  summary: "Set a tenant's webhook URL, name, rate limits, routing or recovery settings (admin token)",
  security: [{ adminToken: [] }],
  description: 'Only the fields sent change. A refused routing (a provider not configured, duplicates, all weights 0, an empty range, …) or a recovery limit above the card networks\' is 400 with the reason, the field\'s path in `issues`, and nothing changes.',
  request: { params: IdParam('tenant', 'ten_01jd6w8b3m4x0c2q7yk5h9t1ve'), body: { content: jsonContent(UpdateTenantBody), required: true } },
  responses: { 200: { description: 'The tenant.', content: jsonContent(Tenant) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found', 'unsupported_media_type', 'payload_too_large']) },
});

const getTenantRoute = createRoute({
  method: 'get',
  path: '/admin/tenants/{id}',
  tags: ['Admin'],
  summary: 'A tenant, with its rate limits, routing and recovery settings (admin token)',
  security: [{ adminToken: [] }],
  request: { params: IdParam('tenant', 'ten_01jd6w8b3m4x0c2q7yk5h9t1ve') },
  responses: { 200: { description: 'The tenant.', content: jsonContent(Tenant) }, ...errorResponses(['unauthorized', 'not_found']) },
});

const releaseDisputeRoute = createRoute({
  method: 'post',
  path: '/admin/disputes/{id}/release',
  tags: ['Admin'],
  summary: 'Release a dispute held for an operator: book it as the PSP reports it (admin token)',
  security: [{ adminToken: [] }],
  description:
    'A dispute held for an operator (its `hold`: the PSP\'s word disagrees with the payment or with the dispute as recorded) is recorded and nothing of it is posted or sent. ' +
    'Releasing it books it: its run posts and sends what its standing means, as for any dispute. An operator who finds the PSP did not take the money leaves it held. ' +
    'A dispute released before is answered again (its run is told once more); one never held is 409 `dispute_not_held`.',
  request: { params: IdParam('dispute', 'dsp_01jd6w8b3m4x0c2q7yk5h9t1ve') },
  responses: { 200: { description: 'The dispute, released.', content: jsonContent(Dispute) }, ...errorResponses(['unauthorized', 'not_found', 'dispute_not_held', 'temporal_unavailable']) },
});

const routingEstimatesRoute = createRoute({
  method: 'get',
  path: '/admin/routing',
  tags: ['Admin'],
  summary: "Routing's estimates now, per segment level and PSP, and each PSP's shared health (admin token)",
  security: [{ adminToken: [] }],
  description:
    'The counts success-rate routing decides from (docs/routing-and-waits.md): with `?tenant=`, the ones that tenant\'s payments are decided from (its own with `routing.scope: "tenant"`, else the pool); without, the pool.',
  request: { query: z.object({ tenant: z.string().min(1).max(64).optional().openapi({ description: 'A tenant id.', example: 'ten_01jd6w8b3m4x0c2q7yk5h9t1ve' }) }) },
  responses: { 200: { description: 'The estimates.', content: jsonContent(RoutingEstimates) }, ...errorResponses(['invalid_request', 'unauthorized', 'not_found']) },
});

/** The estimates GET /admin/routing shows: a tenant's scope, or the pool. */
async function routingEstimates(deps: ApiDeps, tenantId: string | undefined) {
  let scope = POOLED_SCOPE;
  let strategy: 'static' | 'success_rate' | null = null;
  if (tenantId !== undefined) {
    const tenant = await findTenant(deps.sql, tenantId);
    if (!tenant) throw new ApiError('not_found', `No such tenant: ${tenantId}`);
    const routing = tenant.routing ? RoutingSchema.safeParse(tenant.routing) : null;
    strategy = routing?.success ? (routing.data.strategy ?? 'static') : 'static';
    if (routing?.success && routing.data.scope === 'tenant') scope = tenantId;
  }
  const [segments, health] = await Promise.all([routingSnapshot(deps.sql, scope), listHealth(deps.sql)]);
  return {
    object: 'routing_estimates' as const,
    tenant: tenantId ?? null,
    scope: scope === POOLED_SCOPE ? ('pooled' as const) : ('tenant' as const),
    strategy,
    segments: segments.map(({ segment, providers }) => ({
      segment,
      providers: providers.map((p) => ({ provider: p.provider, approval_estimate: p.approvalEstimate, outcomes: p.outcomes, share: p.share, approvals: p.approvals, declines: p.declines, errors: p.errors })),
    })),
    health: health.map((h) => ({ provider: h.provider, state: h.state, reason: h.reason, eliminated_until: h.eliminatedUntil?.toISOString() ?? null })),
  };
}

/**
 * The PSP names a routing may use: the deployment's configured providers (api/process.ts passes
 * configuredProviderNames(config)); an app built without them knows PROVIDER's one name.
 */
export function routableProviders(deps: Pick<ApiDeps, 'providerNames' | 'config'>): readonly string[] {
  return deps.providerNames ?? [deps.config.PROVIDER ?? 'sandbox'];
}

function tenantResource(row: TenantRow, deps: ApiDeps) {
  return {
    id: row.id,
    object: 'tenant' as const,
    name: row.name,
    api_key_prefix: row.api_key_prefix,
    webhook_url: row.webhook_url,
    rate_limits: {
      read_per_second: row.rate_limit_read_per_second ?? deps.config.RATE_LIMIT_READ_PER_SECOND ?? defaultRateLimits.read,
      write_per_second: row.rate_limit_write_per_second ?? deps.config.RATE_LIMIT_WRITE_PER_SECOND ?? defaultRateLimits.write,
    },
    // Validated when it was set (PATCH); stored as given.
    routing: (row.routing ?? null) as Routing | null,
    recovery: {
      window_days: row.recovery_window_days ?? null,
      per_day: row.recovery_per_day ?? NETWORK_CARD_LIMITS.perDay,
      per_30_days: row.recovery_per_30_days ?? NETWORK_CARD_LIMITS.perMonth,
      max_retries: row.recovery_max_retries ?? SCHEDULE_LIMITS.maxRetries,
    },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/**
 * An operator's release of a held dispute (docs/CONTRACT.md §3.6.1, 12): marked released, then
 * reported to its run as recorded, which books it (a run that ended is started again).
 */
async function releaseHeldDispute(deps: ApiDeps, id: string, logger: AppEnv['Variables']['logger']) {
  const row = await releaseDispute(deps.sql, id);
  if (!row) {
    if (!(await findDispute(deps.sql, id))) throw new ApiError('not_found', `No such dispute: ${id}`);
    throw new ApiError('dispute_not_held', `dispute ${id} is not held for an operator`);
  }
  const recorded = (await recordedProviderDispute(deps.sql, row.provider, row.provider_dispute_id))!;
  await withinTemporalDeadline(deps, () => reportDispute(deps.temporal, deps.config.TASK_QUEUE, row.provider, { source: 'poll', eventId: null, dispute: recorded.dispute }, disputeTimesOf(deps.config)));
  logger.warn({ dispute_id: row.id, payment_id: row.payment_id, held_reason: row.held_reason }, 'dispute released by an operator');
  return disputeResource(row);
}

export function adminRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();
  const targets = webhookTargetPolicy({ allowedCidrs: deps.config.WEBHOOK_ALLOWED_CIDRS ?? '', allowHttp: deps.config.WEBHOOK_ALLOW_HTTP ?? false });

  app.openapi(createTenantRoute, async (c) => {
    const { tenant, apiKey } = await deps.sql.begin(async (tx) => {
      const created = await createTenant(tx, c.req.valid('json').name);
      await insertApiKey(tx, created.tenant.id, created.apiKey);
      return created;
    });
    c.var.logger.info({ tenant_id: tenant.id }, 'tenant created');
    return c.json({ ...tenantResource(tenant, deps), api_key: apiKey, webhook_secret: tenant.webhook_secret }, 201);
  });

  app.openapi(getTenantRoute, async (c) => {
    const { id } = c.req.valid('param');
    const tenant = await findTenant(deps.sql, id);
    if (!tenant) throw new ApiError('not_found', `No such tenant: ${id}`);
    return c.json(tenantResource(tenant, deps), 200);
  });

  app.openapi(updateTenantRoute, async (c) => {
    const body = c.req.valid('json');
    const { id } = c.req.valid('param');
    // The routing's shape was validated with the body; the providers it names must be configured.
    if (body.routing) {
      const configured = routableProviders(deps);
      const refusals = unknownProviders(body.routing, configured);
      if (refusals.length > 0) {
        throw new ApiError('invalid_request', `routing refused: ${describeRefusals(refusals)}.`, {
          issues: refusals.map((refusal) => ({ path: refusal.path, code: 'unknown_provider', message: refusal.reason })),
        });
      }
    }
    // An unknown tenant is 404 before its URL is looked up in DNS.
    if (!(await tenantExists(deps.sql, id))) throw new ApiError('not_found', `No such tenant: ${id}`);
    if (typeof body.webhook_url === 'string') {
      const verdict = await checkWebhookUrl(body.webhook_url, targets);
      if (!verdict.ok) {
        throw new ApiError('invalid_request', `webhook_url ${verdict.reason}.`, { issues: [{ path: 'webhook_url', code: 'forbidden_target', message: verdict.reason }] });
      }
    }
    const tenant = await updateTenant(deps.sql, c.req.valid('param').id, { webhookUrl: body.webhook_url, name: body.name, rateLimits: body.rate_limits, routing: body.routing, recovery: body.recovery });
    if (!tenant) throw new ApiError('not_found', `No such tenant: ${c.req.valid('param').id}`);
    return c.json(tenantResource(tenant, deps), 200);
  });

  app.openapi(routingEstimatesRoute, async (c) => c.json(await routingEstimates(deps, c.req.valid('query').tenant), 200));

  app.openapi(releaseDisputeRoute, async (c) => c.json(await releaseHeldDispute(deps, c.req.valid('param').id, c.var.logger), 200));

  return app;
}
