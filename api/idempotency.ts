import type { Context, MiddlewareHandler } from 'hono';
import type { RouteConfig } from '@hono/zod-openapi';
import { isGrpcDeadlineError, isGrpcServiceError, ServiceError, WithStartWorkflowOperation, WorkflowExecutionAlreadyStartedError, WorkflowUpdateRPCTimeoutOrCancelledError, type WorkflowStartOptions } from '@temporalio/client';
import type { SearchAttributePair, UpdateDefinition } from '@temporalio/common';
import { adoptKeptClaim, claimRecord, completeRecord, findRecord, releaseClaim, storedResponse, type IdempotencyRecord, type OperationTarget } from '../db/idempotency-records';
import type { Db } from '../db/connect';
import { ApiError, errorResponse } from '../domain/errors';
import { requestFingerprint } from '../domain/fingerprint';
import { sha256Hex } from '../domain/ids';
import { isTemporalUnavailable, temporalUnavailableReason } from '../lib/temporal';
import { killPoint } from '../lib/kill-points';
import { linkActiveSpan } from '../lib/tracing';
import type { FinalResponse, ScopedKey } from '../shared/definitions';
import type * as workflows from '../workflows';
import type { ApiDeps, AppEnv, EarlyLookup } from './context';
import type { IdempotencyOutcome } from '../lib/metrics';
import { isDatabaseUnavailable } from '../db/connect';
import { answerAbandonedRun, operationKindOfWorkflow } from '../db/abandoned';
import { operationName, recordedResponse, type RecordedAnswer, type RouteJson } from './typed-route';

/** Header that advertises how long an outcome is remembered. */
export const RETENTION_HEADER = 'Idempotency-Retention-Seconds';

/** The answer to a key reused with another request (another body or path), wherever it is detected. */
const KEY_REUSED = ['idempotency_key_reused', 'This Idempotency-Key was already used with a different request. Use a new key for a new operation.'] as const;

/**
 * What dispatching an operation told us about its outcome:
 * - decided: known at once (e.g. a closed run's result), recorded and returned;
 * - running: the workflow will record it. If the operation is an Update, `outcome` awaits
 *   its result (its validator's refusal included) for up to `ms`, null if not known by then;
 *   otherwise the record's completion NOTIFY is awaited.
 */
export type Dispatched =
  /** `earlier`: the response of a run that happened before this request (a replay). */
  | { kind: 'decided'; response: FinalResponse; earlier?: boolean }
  /** The stored answer, as the run that recorded it returned it (Update-With-Start). */
  | { kind: 'answered'; response: FinalResponse }
  | { kind: 'running'; outcome?: (ms: number) => Promise<FinalResponse | null> };

/** One mutating operation of route R, as the idempotency protocol needs to know it. */
export interface IdempotentOperation<R extends RouteConfig> extends ProtocolSteps {
  /** The resource in its current state, for a 202 while the outcome is not known yet (the route's declared 202 body). */
  pending(record: IdempotencyRecord): Promise<{ body: RouteJson<R, 202>; location: string }>;
}

/** The steps of an operation, as the protocol itself handles them (any route). */
interface ProtocolSteps {
  /** Path parameters and validated body: what the fingerprint covers. */
  params: Record<string, string>;
  body: unknown;
  /** Ids for a new claim: the workflow that runs the operation and the resource it acts on. */
  claim(): OperationTarget;
  /**
   * Claims the key together with what the operation writes first (a payment's intent), in one
   * statement; null when another request holds the key. Its `refusal` is the operation's answer,
   * decided with the claim (the order guard's 409): recorded at once, no workflow runs.
   * Without it the claim is the key alone.
   */
  claimWith?(scope: ScopedKey, target: OperationTarget, requestHash: string | null): Promise<{ record: IdempotencyRecord; refusal: FinalResponse | null } | null>;
  /** Instead of giving the claim back when Temporal is unreachable at the start: what to give back (the operation may keep what its claim wrote). */
  release?(scope: ScopedKey, record: IdempotencyRecord): Promise<void>;
  /** This delivery adopted a claim an earlier one kept for its retry (db/idempotency-records.ts keepClaimForRetry). */
  adopted?(record: IdempotencyRecord): void;
  /**
   * Makes sure the workflow runs the operation. Must be idempotent: the first request and
   * every duplicate call it.
   */
  dispatch(record: IdempotencyRecord, scope: ScopedKey): Promise<Dispatched>;
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
export async function runIdempotent<R extends RouteConfig>(c: Context<AppEnv>, deps: ApiDeps, route: R, op: IdempotentOperation<R>): Promise<RecordedAnswer> {
  const operation = operationName(route);
  const outcome = outcomeOf(c, deps, operation);
  try {
    return await runProtocol(c, deps, operation, op, outcome);
  } catch (error) {
    if ((error instanceof ApiError && (error.type === 'service_unavailable' || error.type === 'temporal_unavailable')) || isDatabaseUnavailable(error) || isTemporalUnavailable(error)) {
      outcome('fail_closed');
    }
    throw error;
  }
}

/** Records how the idempotency layer answered: for the request log line and the metric. */
function outcomeOf(c: Context<AppEnv>, deps: ApiDeps, operation: string): (value: IdempotencyOutcome) => void {
  return (value) => {
    c.set('idempotencyOutcome', value);
    deps.metrics.idempotency.inc({ operation, outcome: value });
  };
}

/**
 * The cheapest correct replay (docs/CONTRACT.md §3.1.4; bench/NOTES.md "the replay path"): a
 * route middleware that runs after authentication and before the body is parsed or validated.
 * It reads the key's record under the caller's tenant and, when the operation is finished and
 * the record's request hash equals this request's (the same path and byte-identical body, as a
 * client's retry is), answers the stored response exactly as the protocol would. Anything else
 * (no record yet, still running, other bytes: a reordered but equivalent body, or another
 * request) goes on to the route's validation and the protocol, which decides by the canonical
 * fingerprint and reuses this read instead of making a second one.
 */
export function replayFirst<R extends RouteConfig>(deps: ApiDeps, route: R): MiddlewareHandler<AppEnv> {
  const operation = operationName(route);
  return async (c, next) => {
    // Cached by hono: the route's JSON validation parses these same bytes afterwards. A body
    // that cannot be read is left to that validation, which answers it as before.
    const body = await c.req.text().catch(() => null);
    if (body === null) return next();
    const requestHash = sha256Hex(`${c.req.path}\n${body}`);
    const lookup = findRecord(deps.sql, c.var.tenant.id, operation, c.var.idempotencyKey);
    c.set('earlyLookup', { operation, requestHash, record: lookup });
    const record = await lookup.catch(() => null);
    const stored = record && record.request_hash === requestHash ? storedResponse(record) : null;
    if (!stored) return next();
    c.set('resourceId', record!.resource_id);
    linkActiveSpan(record!.traceparent);
    outcomeOf(c, deps, operation)('replayed');
    return recordedResponse(c, route, recorded(stored, true));
  };
}

async function runProtocol(
  c: Context<AppEnv>,
  deps: ApiDeps,
  operation: string,
  op: ProtocolSteps,
  outcome: (value: IdempotencyOutcome) => void,
): Promise<RecordedAnswer> {
  const scope: ScopedKey = {
    tenantId: c.var.tenant.id,
    operation,
    key: c.var.idempotencyKey,
    fingerprint: requestFingerprint(op.params, op.body),
    retentionSeconds: deps.config.IDEMPOTENCY_RETENTION_SECONDS,
  };
  const claim = await claimOrFind(c, deps, scope, op);
  if (claim.kind === 'refused') {
    outcome('new');
    return recorded(claim.response, false);
  }
  const { record, claimedHere } = claim;
  c.set('resourceId', record.resource_id);
  // A duplicate (it attaches to the run, or is answered from the record) links to the trace of the request that claimed the key.
  if (!claimedHere) linkActiveSpan(record.traceparent);
  if (record.fingerprint !== scope.fingerprint) {
    outcome('mismatch');
    throw new ApiError(...KEY_REUSED);
  }
  const stored = storedResponse(record);
  if (stored) {
    outcome('replayed');
    return recorded(stored, true);
  }
  const counted = (value: IdempotencyOutcome) => outcome(value === 'new' && !claimedHere ? 'waited' : value);
  return (await dispatchAndWait(c, deps, scope, op, record, claimedHere, counted)) ?? (await stillRunning(deps, scope, op, record, claimedHere, counted));
}

/** Where a key stands once this request has tried to claim it. */
type Claim = { kind: 'refused'; response: FinalResponse } | { kind: 'record'; record: IdempotencyRecord; claimedHere: boolean };

/**
 * Steps 1-2: the key's record, claimed here when there is none (or adopted, when an earlier
 * delivery kept its claim for this retry), or the one another request made. A refusal decided
 * with the claim (the order guard's 409) is recorded at once.
 */
async function claimOrFind(c: Context<AppEnv>, deps: ApiDeps, scope: ScopedKey, op: ProtocolSteps): Promise<Claim> {
  const { sql } = deps;
  const early = c.var.earlyLookup?.operation === scope.operation ? c.var.earlyLookup : undefined;
  const requestHash = early?.requestHash ?? null;
  const found = await (early?.record ?? findRecord(sql, scope.tenantId, scope.operation, scope.key));
  if (found) {
    if (found.state !== 'running' || found.response_status !== 503) return { kind: 'record', record: found, claimedHere: false };
    // A claim kept for the retry after Temporal was unreachable: this delivery runs it.
    const adopted = await adoptKeptClaim(sql, scope);
    if (!adopted) return { kind: 'record', record: found, claimedHere: false };
    op.adopted?.(adopted);
    return { kind: 'record', record: adopted, claimedHere: true };
  }
  const target = op.claim();
  const claimed = op.claimWith
    ? await op.claimWith(scope, target, requestHash)
    : await claimRecord(sql, scope, target, requestHash).then((mine) => mine && { record: mine, refusal: null });
  if (claimed) killPoint('after-claim-commit');
  if (claimed?.refusal) {
    c.set('resourceId', target.resourceId);
    return { kind: 'refused', response: await completeRecord(sql, scope, target, claimed.refusal) };
  }
  const record = claimed?.record ?? (await findRecord(sql, scope.tenantId, scope.operation, scope.key));
  if (!record) throw new Error('idempotency record vanished right after a conflicting claim');
  return { kind: 'record', record, claimedHere: claimed !== null };
}

/**
 * Steps 3-4: dispatches to the run (a duplicate attaches to it) and waits, bounded, for the
 * outcome; null when it is not known within the wait. Temporal unreachable before anything
 * ran: the claim is given back and the answer is 503. `outcome('new')` is reported as
 * `waited` by a delivery that did not make the claim.
 */
async function dispatchAndWait(
  c: Context<AppEnv>,
  deps: ApiDeps,
  scope: ScopedKey,
  op: ProtocolSteps,
  record: IdempotencyRecord,
  claimedHere: boolean,
  outcome: (value: IdempotencyOutcome) => void,
): Promise<RecordedAnswer | null> {
  const { sql, config } = deps;
  const replayed = !claimedHere;
  const expectation = deps.completions.expect(scope.tenantId, scope.operation, scope.key);
  const target: OperationTarget = { workflowId: record.workflow_id, resourceId: record.resource_id };
  try {
    let dispatched: Dispatched;
    try {
      dispatched = await withinTemporalDeadline(deps, () => op.dispatch(record, scope));
    } catch (error) {
      const reason = temporalUnavailableReason(error);
      if (reason === null) throw error;
      // Nothing ran: give the claim back so the client's retry really executes.
      if (claimedHere) await (op.release ? op.release(scope, record) : releaseClaim(sql, scope));
      c.var.logger?.warn({ reason, operation: scope.operation }, 'Temporal unavailable; failing closed');
      throw temporalUnavailable();
    }
    if (dispatched.kind === 'answered') {
      outcome('new');
      return recorded(dispatched.response, replayed);
    }
    if (dispatched.kind === 'running' && !dispatched.outcome) {
      // The workflow records the outcome; its completion NOTIFY usually carries the
      // stored answer (db/migrations/006), which then needs no read back.
      const completion = await expectation.wait(config.IDEMPOTENCY_WAIT_MS);
      if (typeof completion === 'object') {
        outcome('new');
        return recorded(completion, replayed);
      }
    }
    const known =
      dispatched.kind === 'decided' ? dispatched.response : dispatched.outcome ? await dispatched.outcome(config.IDEMPOTENCY_WAIT_MS) : null;
    if (!known) return null;
    // Recording is idempotent: if the workflow recorded first, its response is the one returned.
    const earlier = dispatched.kind === 'decided' && dispatched.earlier === true;
    outcome(earlier ? 'replayed' : 'new');
    return recorded(await completeRecord(sql, scope, target, known), replayed || earlier);
  } finally {
    expectation.dispose();
  }
}

/** The outcome was not known within the wait: the record once more, else 202 with the resource as it is now (never stored). */
async function stillRunning(
  deps: ApiDeps,
  scope: ScopedKey,
  op: ProtocolSteps,
  record: IdempotencyRecord,
  claimedHere: boolean,
  outcome: (value: IdempotencyOutcome) => void,
): Promise<RecordedAnswer> {
  const latest = await findRecord(deps.sql, scope.tenantId, scope.operation, scope.key);
  const latestStored = latest && storedResponse(latest);
  if (latestStored) {
    outcome('new');
    return recorded(latestStored, !claimedHere);
  }
  outcome('pending');
  const { body, location } = await op.pending(record);
  return { response: { status: 202, body: JSON.stringify(body) }, headers: { Location: location, 'Retry-After': '1' } };
}

/** A recorded final response, with its Location and, when it is an earlier delivery's, Idempotent-Replayed. */
function recorded(response: FinalResponse, replayed: boolean): RecordedAnswer {
  const headers: Record<string, string> = {};
  if (response.location) headers.Location = response.location;
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  return { response, headers };
}

/** Seconds a client is told to wait: a frontend that died is replaced by the balancer in about that. */
export const TEMPORAL_RETRY_AFTER_SECONDS = 2;

/** The API's answer when Temporal cannot be reached: 503, nothing recorded, retry with the same key. */
export function temporalUnavailable(): ApiError {
  return new ApiError(
    'temporal_unavailable',
    'The workflow engine is unreachable or overloaded; nothing was charged or changed. Retry later with the same Idempotency-Key.',
    {},
    { 'Retry-After': String(TEMPORAL_RETRY_AFTER_SECONDS) },
  );
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
    searchAttributes: SearchAttributePair[];
    memo: Record<string, unknown>;
    /** Temporal's user metadata: the one line the Web UI lists the run by. Never a card token or metadata value. */
    summary: string;
    /** The run's update that answers with the stored first answer: sent with the start when PAYMENT_ANSWER=update. */
    firstAnswer?: UpdateDefinition<FinalResponse, []>;
  },
): Promise<Dispatched> {
  const startOptions = {
    workflowId: options.workflowId,
    taskQueue: deps.config.TASK_QUEUE,
    args: options.args,
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    typedSearchAttributes: options.searchAttributes,
    memo: { ...options.memo, fingerprint: scope.fingerprint, idempotency_key: scope.key },
    staticSummary: options.summary,
  } as const;
  try {
    if (options.firstAnswer && deps.config.PAYMENT_ANSWER === 'update') return await startWithUpdate(deps, workflowType, startOptions, options.firstAnswer);
    const eager = deps.eagerStart?.();
    if (eager) {
      // The native connection keeps its own deadline (withinTemporalDeadline bounds the API's client).
      await eager.connection.withDeadline(Date.now() + deps.config.TEMPORAL_RPC_TIMEOUT_MS, () => eager.workflow.start<Workflows[T]>(workflowType, { ...startOptions, requestEagerStart: true }));
    } else {
      await deps.temporal.workflow.start<Workflows[T]>(workflowType, startOptions);
    }
    return { kind: 'running' };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  return answerOfEarlierRun(deps, scope, workflowType, options);
}

/**
 * The run under the operation's workflow id closed before this request (its record expired or
 * was lost): its result, the first final response, if it ran the same request; an outcome
 * recorded now if it ended without one.
 */
async function answerOfEarlierRun(deps: ApiDeps, scope: ScopedKey, workflowType: WorkflowType, options: { workflowId: string; resourceId: string }): Promise<Dispatched> {
  const handle = deps.temporal.workflow.getHandle(options.workflowId);
  const description = await handle.describe();
  const memo = (description.memo ?? {}) as { fingerprint?: string };
  if (memo.fingerprint !== scope.fingerprint) {
    return {
      kind: 'decided',
      response: errorResponse(...KEY_REUSED),
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
    const run = { kind: operationKindOfWorkflow[workflowType] ?? null, status: description.status.name ?? 'UNKNOWN' };
    const answered = await answerAbandonedRun(deps.sql, record, run, scope.retentionSeconds, null);
    deps.logger.error({ workflow_id: options.workflowId, status: description.status.name, flagged: answered.flagged }, 'operation ended without an outcome; recorded operation_failed');
    return { kind: 'decided', response: answered.response };
  }
  // Every workflow the API starts answers with its operation's final response.
  return { kind: 'decided', response: (await handle.result()) as FinalResponse, earlier: true };
}

/**
 * Update-With-Start: the run is started (or joined) and its first answer awaited in one call,
 * bounded by IDEMPOTENCY_WAIT_MS (the answer comes when the run's first workflow task has
 * recorded the outcome). Past the bound, a run that exists is still running (202); one that
 * cannot be found was not started, and the error goes on to the caller's unavailable path.
 */
async function startWithUpdate<T extends WorkflowType>(
  deps: ApiDeps,
  workflowType: T,
  startOptions: WorkflowStartOptions<Workflows[T]> & { workflowIdConflictPolicy: 'USE_EXISTING' },
  firstAnswer: UpdateDefinition<FinalResponse, []>,
): Promise<Dispatched> {
  const startWorkflowOperation = new WithStartWorkflowOperation<Workflows[T]>(workflowType, startOptions);
  const bound = Math.max(deps.config.IDEMPOTENCY_WAIT_MS, deps.config.TEMPORAL_RPC_TIMEOUT_MS);
  try {
    const response = await deps.temporal.connection.withDeadline(Date.now() + bound, () => deps.temporal.workflow.executeUpdateWithStart(firstAnswer, { startWorkflowOperation }));
    return { kind: 'answered', response };
  } catch (error) {
    // The run started, but the workflow task that held the update failed (e.g. a PSP webhook's
    // signal arrived while the run completed in it: UnhandledCommand), and the update with it.
    // The run goes on and records its outcome: the answer comes by the record's NOTIFY.
    if (updateLostWithItsTask(error)) return { kind: 'running' };
    // The run exists and has taken all the updates it may for now (it continues as new): still running, 202.
    if (runOutOfUpdates(error)) return { kind: 'running', outcome: () => Promise.resolve(null) };
    if (!(error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) && !isGrpcDeadlineError(error)) throw error;
    await withinTemporalDeadline(deps, () => deps.temporal.workflow.getHandle(startOptions.workflowId).describe()).catch(() => {
      throw error;
    });
    return { kind: 'running', outcome: () => Promise.resolve(null) };
  }
}

/** gRPC's FAILED_PRECONDITION. */
const FAILED_PRECONDITION = 9;

/**
 * Temporal's refusal of an update to a run that has taken all the updates one run may take
 * (the server's limit.workflowExecution.maxTotalUpdates, FAILED_PRECONDITION "limit on number
 * of total updates has been reached"). Nothing ran. A payment's run continues as new well before
 * it, so this is a moment at most: the command is answered 503 with Retry-After, never 500.
 * (The limit on updates in flight at once is RESOURCE_EXHAUSTED: Temporal unavailable, 503 too.)
 */
export function runOutOfUpdates(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    if (isGrpcServiceError(current) && current.code === FAILED_PRECONDITION && /limit on number of total updates/i.test(`${current.details ?? ''} ${current.message}`)) return true;
  }
  return false;
}

/** An update the server dropped with the workflow task that carried it (its worker died or failed the task): nothing ran, it may be sent again. */
export function updateLostWithItsTask(error: unknown): boolean {
  // The client hands the server's refusal over as it is, or (an update's start) wrapped in a ServiceError whose cause it is.
  const grpc = isGrpcServiceError(error) ? error : error instanceof ServiceError && isGrpcServiceError(error.cause) ? error.cause : null;
  return grpc !== null && grpc.code === FAILED_PRECONDITION && /workflow task failure/i.test(grpc.message);
}

/** An operation that is one PostgreSQL transaction (no workflow), e.g. resending events. */
export interface TransactionalOperation {
  params: Record<string, string>;
  body: unknown;
  /** What the operation acts on, for the record and the request log. */
  resourceId: string;
  /** The effect, in the transaction that also records its response (built with `finalResponse` from the route). */
  execute(tx: Db): Promise<FinalResponse>;
}

/**
 * The idempotency protocol for operations without a workflow: the claim, the effect and the
 * recorded response commit together. A concurrent duplicate's claim waits on the first one's
 * uncommitted row and then replays its outcome (waiting on the same run, as a duplicate of a
 * workflow operation does); a rolled-back first attempt leaves nothing behind, so the retry
 * really runs.
 */
export async function runTransactional(c: Context<AppEnv>, deps: ApiDeps, route: RouteConfig, op: TransactionalOperation): Promise<RecordedAnswer> {
  const scope: ScopedKey = {
    tenantId: c.var.tenant.id,
    operation: operationName(route),
    key: c.var.idempotencyKey,
    fingerprint: requestFingerprint(op.params, op.body),
    retentionSeconds: deps.config.IDEMPOTENCY_RETENTION_SECONDS,
  };
  // No workflow runs it: the record names only the resource.
  const target: OperationTarget = { workflowId: '', resourceId: op.resourceId };
  c.set('resourceId', op.resourceId);
  const result = await deps.sql.begin(async (tx): Promise<{ outcome: IdempotencyOutcome; response: FinalResponse | null }> => {
    if (await claimRecord(tx, scope, target)) return { outcome: 'new', response: await completeRecord(tx, scope, target, await op.execute(tx)) };
    const record = await findRecord(tx, scope.tenantId, scope.operation, scope.key);
    if (!record) throw new Error(`idempotency record ${scope.operation} ${scope.key} vanished right after a conflicting claim`);
    if (record.fingerprint !== scope.fingerprint) return { outcome: 'mismatch', response: null };
    const stored = storedResponse(record);
    if (!stored) throw new Error(`idempotency record ${scope.operation} ${scope.key} is running outside a transaction`);
    return { outcome: 'replayed', response: stored };
  });
  c.set('idempotencyOutcome', result.outcome);
  deps.metrics.idempotency.inc({ operation: scope.operation, outcome: result.outcome });
  if (!result.response) throw new ApiError(...KEY_REUSED);
  return recorded(result.response, result.outcome === 'replayed');
}
