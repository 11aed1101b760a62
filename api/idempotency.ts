import type { Context } from 'hono';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { claimRecord, completeRecord, findRecord, releaseClaim, storedResponse, type IdempotencyRecord } from '../db/idempotency-records';
import type { Db } from '../db/connect';
import { ApiError, errorResponse } from '../domain/errors';
import { requestFingerprint } from '../domain/fingerprint';
import { isTemporalUnavailable } from '../lib/temporal';
import type { FinalResponse, ScopedKey } from '../shared/definitions';
import type * as workflows from '../workflows';
import type { ApiDeps, AppEnv } from './context';
import type { IdempotencyOutcome } from '../lib/metrics';
import { isDatabaseUnavailable } from '../db/connect';
import { settleAbandonedRun } from '../db/abandoned';

/** Header that advertises how long an outcome is remembered. */
export const RETENTION_HEADER = 'Idempotency-Retention-Seconds';

/**
 * What dispatching an operation told us about its outcome:
 * - decided: known at once (e.g. a closed run's result), recorded and returned;
 * - running: the workflow will record it. If the operation is an Update, `outcome` awaits
 *   its result (its validator's refusal included) for up to `ms`, null if not known by then;
 *   otherwise the record's completion notification is awaited.
 */
export type Dispatched =
  /** `earlier`: the response of a run that happened before this request (a replay). */
  | { kind: 'decided'; response: FinalResponse; earlier?: boolean }
  | { kind: 'running'; outcome?: (ms: number) => Promise<FinalResponse | null> };

/** One mutating operation, as the idempotency protocol needs to know it. */
export interface IdempotentOperation {
  /** "METHOD /route/template": part of the scope, so a key on another route is another operation. */
  operation: string;
  /** Path parameters and validated body: what the fingerprint covers. */
  params: Record<string, string>;
  body: unknown;
  /** Ids for a new claim: the workflow that runs the operation and the resource it acts on. */
  claim(): { workflowId: string; resourceId: string };
  /**
   * Makes sure the workflow runs the operation. Must be idempotent: the first request and
   * every duplicate call it.
   */
  dispatch(record: IdempotencyRecord, scope: ScopedKey): Promise<Dispatched>;
  /** The resource in its current state, for a 202 while the outcome is not known yet. */
  pending(record: IdempotencyRecord): Promise<{ body: unknown; location: string }>;
}

/**
 * The idempotency protocol of every mutating endpoint (docs/CONTRACT.md §3.1):
 *
 * 1. A finished operation is served from PostgreSQL alone: stored status and bytes, with
 *    Idempotent-Replayed: true. A different fingerprint under the same scoped key is 422.
 * 2. Otherwise claim the scoped key (one INSERT; the primary key arbitrates races).
 * 3. Dispatch to the deterministic workflow: a duplicate attaches to the same run.
 * 4. Wait, bounded, for the workflow's final transaction to record the outcome, and answer
 *    with it; if it is not known in time, 202 with the resource as it is now.
 * Temporal unreachable before anything ran: the claim is given back and the answer is 503.
 */
export async function runIdempotent(c: Context<AppEnv>, deps: ApiDeps, op: IdempotentOperation): Promise<Response> {
  const outcome = (value: IdempotencyOutcome) => {
    c.set('idempotencyOutcome', value);
    deps.metrics.idempotency.inc({ operation: op.operation, outcome: value });
  };
  try {
    return await runProtocol(c, deps, op, outcome);
  } catch (error) {
    if ((error instanceof ApiError && error.type === 'service_unavailable') || isDatabaseUnavailable(error) || isTemporalUnavailable(error)) {
      outcome('fail_closed');
    }
    throw error;
  }
}

async function runProtocol(
  c: Context<AppEnv>,
  deps: ApiDeps,
  op: IdempotentOperation,
  outcome: (value: IdempotencyOutcome) => void,
): Promise<Response> {
  const { sql, config } = deps;
  const scope: ScopedKey = {
    tenantId: c.var.tenant.id,
    operation: op.operation,
    key: c.var.idempotencyKey,
    fingerprint: requestFingerprint(op.params, op.body),
    retentionSeconds: config.IDEMPOTENCY_RETENTION_SECONDS,
  };

  let record = await findRecord(sql, scope.tenantId, scope.operation, scope.key);
  let owner = false;
  if (!record) {
    record = await claimRecord(sql, scope, op.claim());
    owner = record !== null;
    record ??= await findRecord(sql, scope.tenantId, scope.operation, scope.key);
    if (!record) throw new Error('idempotency record vanished right after a conflicting claim');
  }
  c.set('resourceId', record.resource_id);
  if (record.fingerprint !== scope.fingerprint) {
    outcome('mismatch');
    throw new ApiError(
      'idempotency_key_reused',
      'This Idempotency-Key was already used with a different request. Use a new key for a new operation.',
    );
  }
  const replayed = !owner;
  const stored = storedResponse(record);
  if (stored) {
    outcome('replayed');
    return respond(c, stored, true);
  }

  const expectation = deps.completions.expect(scope.tenantId, scope.operation, scope.key);
  const owned = { workflowId: record.workflow_id, resourceId: record.resource_id };
  try {
    let dispatched: Dispatched;
    try {
      dispatched = await withinTemporalDeadline(deps, () => op.dispatch(record, scope));
    } catch (error) {
      if (!isTemporalUnavailable(error)) throw error;
      // Nothing ran: give the claim back so the client's retry really executes.
      if (owner) await releaseClaim(sql, scope);
      throw new ApiError('service_unavailable', 'The workflow engine is unreachable; nothing was executed. Retry later.', {}, { 'Retry-After': '2' });
    }
    if (dispatched.kind === 'running' && !dispatched.outcome) {
      // The workflow records the outcome; its completion notification usually carries the
      // stored answer (db/migrations/006), which then needs no read back.
      const completion = await expectation.wait(config.IDEMPOTENCY_WAIT_MS);
      if (typeof completion === 'object') {
        outcome(owner ? 'new' : 'waited');
        return respond(c, completion, replayed);
      }
    }
    const known =
      dispatched.kind === 'decided' ? dispatched.response : dispatched.outcome ? await dispatched.outcome(config.IDEMPOTENCY_WAIT_MS) : null;
    // Recording is idempotent: if the workflow recorded first, its response is the one returned.
    if (known) {
      const earlier = dispatched.kind === 'decided' && dispatched.earlier === true;
      outcome(earlier ? 'replayed' : owner ? 'new' : 'waited');
      return respond(c, await completeRecord(sql, scope, owned, known), replayed || earlier);
    }
  } finally {
    expectation.dispose();
  }

  const latest = await findRecord(sql, scope.tenantId, scope.operation, scope.key);
  const recorded = latest && storedResponse(latest);
  if (recorded) {
    outcome(owner ? 'new' : 'waited');
    return respond(c, recorded, replayed);
  }
  // Still running. 202 is not a final response: it is never stored.
  outcome('pending');
  const { body, location } = await op.pending(record);
  return c.json(body as object, 202, { Location: location, 'Retry-After': '1' });
}

function respond(c: Context<AppEnv>, response: FinalResponse, replayed: boolean): Response {
  c.header('Content-Type', 'application/json');
  if (response.location) c.header('Location', response.location);
  if (replayed) c.header('Idempotent-Replayed', 'true');
  return c.body(response.body, response.status as 200);
}

/** Bounds every call to Temporal so an unreachable server turns into a prompt 503. */
export function withinTemporalDeadline<T>(deps: ApiDeps, call: () => Promise<T>): Promise<T> {
  return deps.temporal.connection.withDeadline(Date.now() + deps.config.TEMPORAL_RPC_TIMEOUT_MS, call);
}

/**
 * The workflows an API operation starts, by the type name their histories record (their export
 * name in workflows/index.ts). Imported as types only: the API never loads workflow code.
 * (The periodic jobs' workflows are started by their Schedules, never by a request.)
 */
type Workflows = Pick<typeof workflows, 'paymentWorkflow' | 'refundWorkflow'>;
export type WorkflowType = keyof Workflows;

/**
 * Starts the operation's workflow, or attaches to it: USE_EXISTING joins the running run,
 * and REJECT_DUPLICATE refuses a second run under the same id while history is retained.
 * If the run already closed (its record expired or was lost), its result, the first
 * final response, is returned, provided it ran the same request.
 */
export async function startOrAttach<T extends WorkflowType>(
  deps: ApiDeps,
  scope: ScopedKey,
  workflowType: T,
  options: {
    workflowId: string;
    /** The payment or refund the operation acts on. */
    resourceId: string;
    args: Parameters<Workflows[T]>;
    searchAttributes: { key: { name: string; type: string }; value: string }[];
    memo: Record<string, unknown>;
    /** Temporal's user metadata: the one line the Web UI lists the run by. Never a card token or metadata value. */
    summary: string;
  },
): Promise<Dispatched> {
  try {
    await deps.temporal.workflow.start<Workflows[T]>(workflowType, {
      workflowId: options.workflowId,
      taskQueue: deps.config.TASK_QUEUE,
      args: options.args,
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: options.searchAttributes as never,
      memo: { ...options.memo, fingerprint: scope.fingerprint, idempotency_key: scope.key },
      staticSummary: options.summary,
    });
    return { kind: 'running' };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  const handle = deps.temporal.workflow.getHandle<Workflows[T]>(options.workflowId);
  const description = await handle.describe();
  const memo = (description.memo ?? {}) as { fingerprint?: string };
  if (memo.fingerprint !== scope.fingerprint) {
    return {
      kind: 'decided',
      response: errorResponse('idempotency_key_reused', 'This Idempotency-Key was already used with a different request. Use a new key for a new operation.'),
    };
  }
  if (description.status.name === 'RUNNING') {
    throw new ApiError('internal_error', `The operation's workflow ${options.workflowId} is running but refused to attach.`);
  }
  if (description.status.name !== 'COMPLETED') {
    // Failed, terminated or timed out: the run will never record an outcome. One is recorded
    // now, and it is the answer to this and every later retry. The API cannot ask the provider
    // whether money moved (null): a payment that may hold money is flagged for an operator.
    const record = { tenant_id: scope.tenantId, operation: scope.operation, idempotency_key: scope.key, fingerprint: scope.fingerprint, workflow_id: options.workflowId, resource_id: options.resourceId };
    const settled = await settleAbandonedRun(deps.sql, record, description.status.name ?? 'UNKNOWN', scope.retentionSeconds, null);
    deps.logger.error({ workflow_id: options.workflowId, status: description.status.name, flagged: settled.flagged }, 'operation ended without an outcome; recorded operation_failed');
    return { kind: 'decided', response: settled.response };
  }
  // Every workflow the API starts answers with its operation's final response.
  return { kind: 'decided', response: (await handle.result()) as FinalResponse, earlier: true };
}

/** An operation that is one PostgreSQL transaction (no workflow), e.g. resending events. */
export interface TransactionalOperation {
  operation: string;
  params: Record<string, string>;
  body: unknown;
  /** What the operation acts on, for the record and the request log. */
  resourceId: string;
  /** The effect, in the transaction that also records its response. */
  execute(tx: Db): Promise<FinalResponse>;
}

/**
 * The idempotency protocol for operations without a workflow: the claim, the effect and the
 * recorded response commit together. A concurrent duplicate's claim waits on the first one's
 * uncommitted row and then replays its outcome (waiting on the same run, as a duplicate of a
 * workflow operation does); a rolled-back first attempt leaves nothing behind, so the retry
 * really runs.
 */
export async function runTransactional(c: Context<AppEnv>, deps: ApiDeps, op: TransactionalOperation): Promise<Response> {
  const scope: ScopedKey = {
    tenantId: c.var.tenant.id,
    operation: op.operation,
    key: c.var.idempotencyKey,
    fingerprint: requestFingerprint(op.params, op.body),
    retentionSeconds: deps.config.IDEMPOTENCY_RETENTION_SECONDS,
  };
  const owner = { workflowId: '', resourceId: op.resourceId };
  c.set('resourceId', op.resourceId);
  const result = await deps.sql.begin(async (tx): Promise<{ outcome: IdempotencyOutcome; response: FinalResponse | null }> => {
    if (await claimRecord(tx, scope, owner)) return { outcome: 'new', response: await completeRecord(tx, scope, owner, await op.execute(tx)) };
    const record = await findRecord(tx, scope.tenantId, scope.operation, scope.key);
    if (!record) throw new Error(`idempotency record ${scope.operation} ${scope.key} vanished right after a conflicting claim`);
    if (record.fingerprint !== scope.fingerprint) return { outcome: 'mismatch', response: null };
    const stored = storedResponse(record);
    if (!stored) throw new Error(`idempotency record ${scope.operation} ${scope.key} is running outside a transaction`);
    return { outcome: 'replayed', response: stored };
  });
  c.set('idempotencyOutcome', result.outcome);
  deps.metrics.idempotency.inc({ operation: op.operation, outcome: result.outcome });
  if (!result.response) {
    throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request. Use a new key for a new operation.');
  }
  return respond(c, result.response, result.outcome === 'replayed');
}
