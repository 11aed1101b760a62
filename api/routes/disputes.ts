import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { WorkflowUpdateHandle } from '@temporalio/client';
import type { Context } from 'hono';
import { getDispute, listDisputes } from '../../db/disputes';
import { ApiError, errorResponse, type FinalResponse } from '../../domain/errors';
import { looksLikeId, sha256Hex } from '../../domain/ids';
import { disputeResource, type DisputeRow } from '../../domain/resources';
import { disputeAcceptUpdate, disputeEvidenceUpdate, type ScopedKey } from '../../shared/definitions';
import type { ApiDeps, AppEnv } from '../context';
import { runIdempotent, type Dispatched } from '../idempotency';
import { Dispute, DisputeEvidenceBody, IdParam, ListDisputesQuery, listOf } from '../schemas';
import { recordedReply } from '../typed-route';
import { errorResponses, idempotencyKeyParameter, idempotentResponses, jsonContent } from './openapi';
import { dispatchUpdate } from '../updates';

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

const disputeIdExample = 'dsp_01jd6w8b3m4x0c2q7yk5h9t1ve';
const commandErrors = errorResponses(['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'dispute_not_open', 'idempotency_key_reused', 'operation_failed', 'service_unavailable']);

const submitEvidenceRoute = createRoute({
  method: 'post',
  path: '/v1/disputes/{id}/evidence',
  tags: ['Disputes'],
  summary: 'Stage or submit evidence for a dispute (idempotent)',
  description:
    'Sends the evidence to the PSP that holds the charge: staged (`submit: false`) or submitted for the network’s decision (`submit: true`, the dispute is then `under_review`). ' +
    '409 `dispute_not_open` after submission, after the evidence deadline, or on a closed dispute, with the reason.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('dispute', disputeIdExample), body: { content: jsonContent(DisputeEvidenceBody), required: true } },
  responses: { 200: { description: 'The dispute.', content: jsonContent(Dispute), headers: idempotentResponses.headers }, ...idempotentResponses.pending(Dispute), ...commandErrors },
});

const acceptDisputeRoute = createRoute({
  method: 'post',
  path: '/v1/disputes/{id}/accept',
  tags: ['Disputes'],
  summary: 'Concede a dispute (idempotent)',
  description: 'The dispute is lost: 200 with status `lost`, replayed byte for byte. 409 `dispute_not_open` when it no longer needs a response.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('dispute', disputeIdExample) },
  responses: { 200: { description: 'The dispute, lost.', content: jsonContent(Dispute), headers: idempotentResponses.headers }, ...idempotentResponses.pending(Dispute), ...commandErrors },
});

/** The update id of a dispute command: a repeated delivery is deduplicated by Temporal too. */
const disputeUpdateId = (command: 'evidence' | 'accept', key: string) => `dispute-${command}-${sha256Hex(key).slice(0, 40)}`;

/**
 * Sends the merchant's command to the dispute's run as an Update (workflows/dispute.ts); its
 * result is the operation's final response, which the run records. The validator's refusal and
 * a run that has closed are definitive answers too (409 dispute_not_open), recorded by the API.
 */
function sendDisputeCommand(deps: ApiDeps, disputeId: string, send: (options: { updateId: string; waitForStage: 'ACCEPTED' }) => Promise<WorkflowUpdateHandle<FinalResponse>>, updateId: string): Promise<Dispatched> {
  return dispatchUpdate(deps, () => send({ updateId, waitForStage: 'ACCEPTED' }), {
    refused: (error) => errorResponse('dispute_not_open', error.cause?.message ?? error.message),
    closed: () => errorResponse('dispute_not_open', `dispute ${disputeId} is closed; it takes no more evidence`),
  });
}

async function tenantDispute(deps: ApiDeps, tenantId: string, id: string): Promise<DisputeRow> {
  const dispute = looksLikeId('dsp', id) ? await getDispute(deps.sql, tenantId, id) : null;
  if (!dispute) throw new ApiError('not_found', `No such dispute: ${id}`);
  return dispute;
}

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

  app.openapi(getDisputeRoute, async (c) => c.json(disputeResource(await tenantDispute(deps, c.var.tenant.id, c.req.valid('param').id)), 200));

  /** Evidence and accept: updates to the dispute's run, under the idempotency protocol. */
  async function runCommand(c: Context<AppEnv>, route: typeof submitEvidenceRoute | typeof acceptDisputeRoute, id: string, body: unknown, send: (dispute: DisputeRow, scope: ScopedKey) => Promise<Dispatched>) {
    const tenantId = c.var.tenant.id;
    const dispute = await tenantDispute(deps, tenantId, id);
    return runIdempotent(c, deps, route, {
      params: { id },
      body,
      claim: () => ({ workflowId: dispute.workflow_id, resourceId: dispute.id }),
      dispatch: (_record, scope) => send(dispute, scope),
      pending: async () => ({ body: disputeResource((await getDispute(deps.sql, tenantId, dispute.id))!), location: `/v1/disputes/${dispute.id}` }),
    });
  }

  app.openapi(submitEvidenceRoute, async (c) => {
    const body = c.req.valid('json');
    return recordedReply(
      c,
      submitEvidenceRoute,
      await runCommand(c, submitEvidenceRoute, c.req.valid('param').id, body, (dispute, scope) =>
        sendDisputeCommand(
          deps,
          dispute.id,
          (options) => deps.temporal.workflow.getHandle(dispute.workflow_id).startUpdate(disputeEvidenceUpdate, { ...options, args: [{ evidence: body.evidence, submit: body.submit, idempotency: scope, requestId: c.var.requestId }] }),
          disputeUpdateId('evidence', scope.key),
        ),
      ),
    );
  });

  app.openapi(acceptDisputeRoute, async (c) => {
    const body = {};
    return recordedReply(
      c,
      acceptDisputeRoute,
      await runCommand(c, acceptDisputeRoute, c.req.valid('param').id, body, (dispute, scope) =>
        sendDisputeCommand(
          deps,
          dispute.id,
          (options) => deps.temporal.workflow.getHandle(dispute.workflow_id).startUpdate(disputeAcceptUpdate, { ...options, args: [{ idempotency: scope, requestId: c.var.requestId }] }),
          disputeUpdateId('accept', scope.key),
        ),
      ),
    );
  });

  return app;
}
