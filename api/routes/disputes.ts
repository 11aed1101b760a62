import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import { getDispute, listDisputes } from '../../db/disputes';
import { ApiError } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import { disputeResource } from '../../domain/resources';
import type { ApiDeps, AppEnv } from '../context';
import { Dispute, IdParam, ListDisputesQuery, listOf } from '../schemas';
import { errorResponses, jsonContent } from './openapi';

/**
 * The tenant's disputes, as their workflows recorded them (workflows/dispute.ts; CONTRACT.md
 * §3.6.1): read from PostgreSQL, tenant-scoped like every /v1 route.
 */

const listDisputesRoute = createRoute({
  method: 'get',
  path: '/v1/disputes',
  tags: ['Disputes'],
  summary: "List the tenant's disputes, newest first",
  description: 'Filtered by `payment_id` and `status`; the same cursors as every list.',
  request: { query: ListDisputesQuery },
  responses: { 200: { description: 'A page of disputes.', content: jsonContent(listOf(Dispute, 'DisputeList')) }, ...errorResponses(['invalid_request', 'unauthorized']) },
});

const getDisputeRoute = createRoute({
  method: 'get',
  path: '/v1/disputes/{id}',
  tags: ['Disputes'],
  summary: 'Retrieve a dispute',
  request: { params: IdParam('dispute', 'dsp_01jd6w8b3m4x0c2q7yk5h9t1ve') },
  responses: { 200: { description: 'The dispute.', content: jsonContent(Dispute) }, ...errorResponses(['unauthorized', 'not_found']) },
});

export function disputeRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>();

  app.openapi(listDisputesRoute, async (c) => {
    const query = c.req.valid('query');
    const page = await listDisputes(
      deps.sql,
      c.var.tenant.id,
      { ...(query.payment_id !== undefined ? { paymentId: query.payment_id } : {}), ...(query.status !== undefined ? { status: query.status } : {}) },
      { limit: query.limit, startingAfter: query.starting_after, endingBefore: query.ending_before },
    );
    return c.json({ object: 'list' as const, data: page.rows.map(disputeResource), has_more: page.hasMore }, 200);
  });

  app.openapi(getDisputeRoute, async (c) => {
    const { id } = c.req.valid('param');
    const dispute = looksLikeId('dsp', id) ? await getDispute(deps.sql, c.var.tenant.id, id) : null;
    if (!dispute) throw new ApiError('not_found', `No such dispute: ${id}`);
    return c.json(disputeResource(dispute), 200);
  });

  return app;
}
