import { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { WorkflowUpdateHandle } from '@temporalio/client';
import type { Context } from 'hono';
import { admitEvidence, evidenceDigest, getDispute, giveBackEvidence, listDisputes } from '../../db/disputes';
import { claimRecord, releaseClaim, type OperationTarget } from '../../db/idempotency-records';
import { isDisputeClosed } from '../../domain/disputes';
import { disputeTimesOf, restartDispute } from '../../lib/dispute';
import { ApiError, errorResponse, type FinalResponse } from '../../domain/errors';
import { looksLikeId, sha256Hex } from '../../domain/ids';
import { disputeResource, type DisputeRow } from '../../domain/resources';
import type { ScopedKey } from '../../shared/definitions';
import { DISPUTE_DEFAULTS, disputeAcceptUpdate, disputeEvidenceUpdate } from '../../shared/disputes';
import type { ApiDeps, AppEnv } from '../context';
import { runIdempotent, withinTemporalDeadline, type Dispatched } from '../idempotency';
import { Dispute, DisputeEvidenceBody, IdParam, ListDisputesQuery, listOf } from '../schemas';
import { recordedReply } from '../typed-route';
import { errorResponses, idempotencyKeyParameter, idempotentResponses, jsonContent } from './openapi';
import { dispatchUpdate } from '../updates';

/**
 * The tenant's disputes, as their workflows recorded them (workflows/disputes.ts; CONTRACT.md
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
const commandErrorTypes = ['invalid_request', 'idempotency_key_missing', 'idempotency_key_invalid', 'unauthorized', 'not_found', 'dispute_not_open', 'idempotency_key_reused', 'operation_failed', 'service_unavailable'] as const;
const commandErrors = errorResponses([...commandErrorTypes]);

const submitEvidenceRoute = createRoute({
  method: 'post',
  path: '/v1/disputes/{id}/evidence',
  tags: ['Disputes'],
  summary: 'Stage or submit evidence for a dispute (idempotent)',
  description:
    'Sends the evidence to the PSP that holds the charge: staged (`submit: false`) or submitted for the network’s decision (`submit: true`, the dispute is then `under_review`). ' +
    '409 `dispute_not_open` after submission, after the evidence deadline, or on a closed dispute, with the reason. ' +
    '409 `dispute_evidence_limit` when the dispute has taken DISPUTE_EVIDENCE_MAX_REQUESTS requests or this one would take it past DISPUTE_EVIDENCE_MAX_BYTES bytes of evidence: nothing is stored or sent, and the refusal is the key’s recorded answer. ' +
    'A dispute whose run ended while the PSP had not closed it (terminated, failed) has its run started again by the request, which then delivers the evidence; ' +
    'when the run ends again before taking it: 503 `service_unavailable` with `Retry-After`, nothing recorded, retry with the same key.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('dispute', disputeIdExample), body: { content: jsonContent(DisputeEvidenceBody), required: true } },
  responses: {
    200: { description: 'The dispute.', content: jsonContent(Dispute), headers: idempotentResponses.headers },
    ...idempotentResponses.pending(Dispute),
    ...errorResponses([...commandErrorTypes, 'dispute_evidence_limit']),
  },
});

const acceptDisputeRoute = createRoute({
  method: 'post',
  path: '/v1/disputes/{id}/accept',
  tags: ['Disputes'],
  summary: 'Concede a dispute (idempotent)',
  description:
    'The dispute is lost: 200 with status `lost`, replayed byte for byte. 409 `dispute_not_open` when it no longer needs a response. ' +
    'A dispute whose run ended while the PSP had not closed it has its run started again first, as for evidence.',
  parameters: [idempotencyKeyParameter],
  request: { params: IdParam('dispute', disputeIdExample) },
  responses: { 200: { description: 'The dispute, lost.', content: jsonContent(Dispute), headers: idempotentResponses.headers }, ...idempotentResponses.pending(Dispute), ...commandErrors },
});

/** The update id of a dispute command: a repeated delivery is deduplicated by Temporal too. */
const disputeUpdateId = (command: 'evidence' | 'accept', key: string) => `dispute-${command}-${sha256Hex(key).slice(0, 40)}`;

/** What dispatchUpdate answers when the update met a closed run: compared by identity, never recorded. */
const RUN_CLOSED: FinalResponse = Object.freeze({ status: 0, body: '', location: null });

/**
 * The answer to a command that met the dispute's run closed. A dispute the PSP closed (won,
 * lost) takes nothing more: 409 dispute_not_open. Otherwise the run ended for another reason
 * (terminated, failed, timed out): it is started again as reconciliation would (it asks the PSP
 * first), and null lets the command go to it; a deadline that has passed is still a 409 (the new
 * run asks the PSP, which decides).
 */
async function startAgainUnlessClosed(deps: ApiDeps, dispute: DisputeRow): Promise<FinalResponse | null> {
  const row = (await getDispute(deps.sql, dispute.tenant_id, dispute.id)) ?? dispute;
  if (isDisputeClosed(row.status)) return errorResponse('dispute_not_open', `dispute ${row.id} is ${row.status}; it takes no more evidence`);
  await withinTemporalDeadline(deps, () => restartDispute(deps.temporal, deps.config.TASK_QUEUE, row.provider, row.provider_dispute_id, disputeTimesOf(deps.config)));
  deps.logger.warn({ dispute_id: row.id, workflow_id: row.workflow_id, status: row.status }, "a command met the dispute's run closed with the dispute open; the run was started again");
  if (Date.now() >= row.evidence_due_by.getTime()) return errorResponse('dispute_not_open', `the evidence was due by ${row.evidence_due_by.toISOString()}; it takes no more evidence`);
  return null;
}

/**
 * Sends the merchant's command to the dispute's run as an Update (workflows/disputes.ts); its
 * result is the operation's final response, which the run records. The validator's refusal is a
 * definitive answer too (409 dispute_not_open), recorded by the API. A run found closed is
 * judged by startAgainUnlessClosed: a dispute the PSP closed is a 409; otherwise the run is
 * started again and the command delivered to it (a run that closes under it once more: 503,
 * nothing recorded); one that closed while the command was in flight is started again and the
 * answer is 202, the client's retry delivering it.
 */
async function sendDisputeCommand(deps: ApiDeps, dispute: DisputeRow, send: (options: { updateId: string; waitForStage: 'ACCEPTED' }) => Promise<WorkflowUpdateHandle<FinalResponse>>, updateId: string): Promise<Dispatched> {
  const deliver = () =>
    dispatchUpdate(deps, () => send({ updateId, waitForStage: 'ACCEPTED' }), {
      refused: (error) => errorResponse('dispute_not_open', error.cause?.message ?? error.message),
      closed: () => RUN_CLOSED,
    });
  const closedInFlight = async (response: FinalResponse | null) => (response === RUN_CLOSED ? startAgainUnlessClosed(deps, dispute) : response);
  const followed = (dispatched: Dispatched): Dispatched => {
    if (dispatched.kind !== 'running' || !dispatched.outcome) return dispatched;
    const { outcome } = dispatched;
    return { kind: 'running', outcome: async (ms) => closedInFlight(await outcome(ms)) };
  };
  const first = await deliver();
  if (!(first.kind === 'decided' && first.response === RUN_CLOSED)) return followed(first);
  const refusal = await startAgainUnlessClosed(deps, dispute);
  if (refusal) return { kind: 'decided', response: refusal };
  const again = await deliver();
  if (again.kind === 'decided' && again.response === RUN_CLOSED) {
    throw new ApiError('service_unavailable', "The dispute's run had ended and was started again, and ended before taking this command; nothing was recorded. Retry with the same Idempotency-Key.", {}, { 'Retry-After': '1' });
  }
  return followed(again);
}

async function tenantDispute(deps: ApiDeps, tenantId: string, id: string): Promise<DisputeRow> {
  const dispute = looksLikeId('dsp', id) ? await getDispute(deps.sql, tenantId, id) : null;
  if (!dispute) throw new ApiError('not_found', `No such dispute: ${id}`);
  return dispute;
}

/**
 * Evidence and accept: updates to the dispute's run, under the idempotency protocol. Evidence
 * is admitted with the key's claim, in one transaction (db/disputes.ts admitEvidence): counted
 * against the dispute's limits and stored, so the update carries only its digest; a refusal
 * there is the key's answer, and a claim given back (Temporal unreachable) gives it back too.
 */
async function runDisputeCommand(
  deps: ApiDeps,
  c: Context<AppEnv>,
  route: typeof submitEvidenceRoute | typeof acceptDisputeRoute,
  id: string,
  body: unknown,
  send: (dispute: DisputeRow, scope: ScopedKey) => Promise<Dispatched>,
  evidence?: Record<string, string>,
) {
  const tenantId = c.var.tenant.id;
  const dispute = await tenantDispute(deps, tenantId, id);
  const limits = { maxRequests: deps.config.DISPUTE_EVIDENCE_MAX_REQUESTS ?? DISPUTE_DEFAULTS.evidenceMaxRequests, maxBytes: deps.config.DISPUTE_EVIDENCE_MAX_BYTES ?? DISPUTE_DEFAULTS.evidenceMaxBytes };
  return runIdempotent(c, deps, route, {
    params: { id },
    body,
    claim: () => ({ workflowId: dispute.workflow_id, resourceId: dispute.id }),
    ...(evidence
      ? {
          claimWith: (scope: ScopedKey, target: OperationTarget, requestHash: string | null) =>
            deps.sql.begin(async (tx) => {
              const record = await claimRecord(tx, scope, target, requestHash);
              if (!record) return null;
              const refused = await admitEvidence(tx, dispute.id, evidence, limits);
              return { record, refusal: refused === null ? null : errorResponse('dispute_evidence_limit', refused) };
            }),
          release: (scope: ScopedKey) =>
            deps.sql.begin(async (tx) => {
              await releaseClaim(tx, scope);
              await giveBackEvidence(tx, dispute.id, evidence);
            }),
        }
      : {}),
    dispatch: (_record, scope) => send(dispute, scope),
    pending: async () => ({ body: disputeResource((await getDispute(deps.sql, tenantId, dispute.id))!), location: `/v1/disputes/${dispute.id}` }),
  });
}

/**
 * POST /v1/disputes/{id}/accept as one idempotent operation: the accept update to the dispute's
 * run. The console's accept (api/console/actions.ts) runs it too.
 */
export async function runAcceptDispute(deps: ApiDeps, c: Context<AppEnv>, id: string) {
  const send = (dispute: DisputeRow, scope: ScopedKey) =>
    sendDisputeCommand(
      deps,
      dispute,
      (options) => deps.temporal.workflow.getHandle(dispute.workflow_id).startUpdate(disputeAcceptUpdate, { ...options, args: [{ idempotency: scope, requestId: c.var.requestId }] }),
      disputeUpdateId('accept', scope.key),
    );
  return runDisputeCommand(deps, c, acceptDisputeRoute, id, {}, send);
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

  app.openapi(submitEvidenceRoute, async (c) => {
    const body = c.req.valid('json');
    const { digest } = evidenceDigest(body.evidence);
    const send = (dispute: DisputeRow, scope: ScopedKey) =>
      sendDisputeCommand(
        deps,
        dispute,
        (options) => deps.temporal.workflow.getHandle(dispute.workflow_id).startUpdate(disputeEvidenceUpdate, { ...options, args: [{ evidenceDigest: digest, submit: body.submit, idempotency: scope, requestId: c.var.requestId }] }),
        disputeUpdateId('evidence', scope.key),
      );
    return recordedReply(c, submitEvidenceRoute, await runDisputeCommand(deps, c, submitEvidenceRoute, c.req.valid('param').id, body, send, body.evidence));
  });

  app.openapi(acceptDisputeRoute, async (c) => recordedReply(c, acceptDisputeRoute, await runAcceptDispute(deps, c, c.req.valid('param').id)));

  return app;
}
