import type { Db } from './connect';
import { activeTraceparent } from '../lib/tracing';
import type { FinalResponse, ScopedKey } from '../shared/definitions';

export interface IdempotencyRecord {
  tenant_id: string;
  operation: string;
  idempotency_key: string;
  fingerprint: string;
  /** SHA-256 of the claiming request's path and exact body bytes (db/migrations/011); null before it or where not computed. */
  request_hash: string | null;
  state: 'running' | 'completed';
  workflow_id: string;
  resource_id: string;
  response_status: number | null;
  response_body: string | null;
  response_location: string | null;
  created_at: Date;
  expires_at: Date;
  /** The claiming request's span (db/migrations/021): a duplicate's span links to it. Null: claimed untraced or unsampled. */
  traceparent: string | null;
}

export function storedResponse(record: IdempotencyRecord): FinalResponse | null {
  if (record.state !== 'completed' || record.response_status === null || record.response_body === null) return null;
  return { status: record.response_status, body: record.response_body, location: record.response_location };
}

export async function findRecord(db: Db, tenantId: string, operation: string, key: string): Promise<IdempotencyRecord | null> {
  const [record] = await db<IdempotencyRecord[]>`
    SELECT * FROM idempotency_records
    WHERE tenant_id = ${tenantId} AND operation = ${operation} AND idempotency_key = ${key}`;
  return record ?? null;
}

/** What an operation's record names: the workflow that runs the operation and the resource it acts on. */
/**
 * A claim's expiry: the retention plus as much again, at most an hour. A record is kept at
 * least the retention after its completion; an operation that completes within that margin of
 * its claim (nearly all do) keeps the claim's expiry, so its completion changes no indexed
 * column (completeRecord).
 */
export function claimExpiry(db: Db, retentionSeconds: number) {
  return db`now() + make_interval(secs => ${retentionSeconds + Math.min(retentionSeconds, 3600)})`;
}

export interface OperationTarget {
  workflowId: string;
  resourceId: string;
}

/**
 * Claims the scoped key: exactly one concurrent caller gets the record back; the others get
 * null and must read the winner's record. The unique primary key arbitrates, not a prior
 * SELECT, so there is no gap between "not seen" and "mine".
 */
export async function claimRecord(
  db: Db,
  scope: ScopedKey,
  target: OperationTarget,
  requestHash: string | null = null,
): Promise<IdempotencyRecord | null> {
  const [record] = await db<IdempotencyRecord[]>`
    INSERT INTO idempotency_records
      (tenant_id, operation, idempotency_key, fingerprint, request_hash, state, workflow_id, resource_id, expires_at, traceparent)
    VALUES
      (${scope.tenantId}, ${scope.operation}, ${scope.key}, ${scope.fingerprint}, ${requestHash}, 'running',
       ${target.workflowId}, ${target.resourceId}, ${claimExpiry(db, scope.retentionSeconds)}, ${activeTraceparent()})
    ON CONFLICT (tenant_id, operation, idempotency_key) DO NOTHING
    RETURNING *`;
  return record ?? null;
}

/**
 * Gives a claim back when nothing was executed (Temporal unreachable at start), so that the
 * client's retry really runs.
 */
export async function releaseClaim(db: Db, scope: ScopedKey): Promise<void> {
  await db`
    DELETE FROM idempotency_records
    WHERE tenant_id = ${scope.tenantId} AND operation = ${scope.operation}
      AND idempotency_key = ${scope.key} AND fingerprint = ${scope.fingerprint} AND state = 'running'`;
}

/**
 * Keeps a claim for the client's retry (a new payment's, whose intent is kept with it, when
 * Temporal was unreachable at the start): marked by a 503 on the running record, never served
 * (only a completed record is). The next delivery of the same request adopts it.
 */
export async function keepClaimForRetry(db: Db, scope: ScopedKey): Promise<void> {
  await db`
    UPDATE idempotency_records SET response_status = 503
    WHERE tenant_id = ${scope.tenantId} AND operation = ${scope.operation}
      AND idempotency_key = ${scope.key} AND fingerprint = ${scope.fingerprint} AND state = 'running'`;
}

/**
 * Adopts a claim kept for the retry: this delivery runs the operation as if it had claimed it
 * (its answer is no replay). One adopter wins; null if there was none to adopt.
 */
export async function adoptKeptClaim(db: Db, scope: ScopedKey): Promise<IdempotencyRecord | null> {
  const [record] = await db<IdempotencyRecord[]>`
    UPDATE idempotency_records SET response_status = NULL
    WHERE tenant_id = ${scope.tenantId} AND operation = ${scope.operation}
      AND idempotency_key = ${scope.key} AND fingerprint = ${scope.fingerprint}
      AND state = 'running' AND response_status = 503
    RETURNING *`;
  return record ?? null;
}

/**
 * Records the first final response of an operation and returns the response that is now
 * stored. Only the first completion wins: a replayed activity gets the stored response
 * back unchanged. Completes the running claim in place (one UPDATE: a probe of the key), and
 * upserts only when that finds none, so an operation whose claim was released after an
 * ambiguous start failure still records its outcome.
 */
export async function completeRecord(
  db: Db,
  scope: ScopedKey,
  target: OperationTarget,
  response: FinalResponse,
): Promise<FinalResponse> {
  const [completed] = await db<IdempotencyRecord[]>`
    UPDATE idempotency_records SET
      state = 'completed',
      response_status = ${response.status},
      response_body = ${response.body},
      response_location = ${response.location},
      completed_at = now(),
      expires_at = greatest(expires_at, now() + make_interval(secs => ${scope.retentionSeconds}))
    WHERE tenant_id = ${scope.tenantId} AND operation = ${scope.operation} AND idempotency_key = ${scope.key}
      AND state = 'running' AND fingerprint = ${scope.fingerprint}
    RETURNING *`;
  if (completed) return storedResponse(completed)!;
  const [written] = await db<IdempotencyRecord[]>`
    INSERT INTO idempotency_records
      (tenant_id, operation, idempotency_key, fingerprint, state, workflow_id, resource_id,
       response_status, response_body, response_location, completed_at, expires_at)
    VALUES
      (${scope.tenantId}, ${scope.operation}, ${scope.key}, ${scope.fingerprint}, 'completed',
       ${target.workflowId}, ${target.resourceId}, ${response.status}, ${response.body}, ${response.location},
       now(), now() + make_interval(secs => ${scope.retentionSeconds}))
    ON CONFLICT (tenant_id, operation, idempotency_key) DO UPDATE SET
      state = 'completed',
      response_status = EXCLUDED.response_status,
      response_body = EXCLUDED.response_body,
      response_location = EXCLUDED.response_location,
      completed_at = EXCLUDED.completed_at,
      expires_at = greatest(idempotency_records.expires_at, EXCLUDED.expires_at)
    WHERE idempotency_records.state = 'running'
      AND idempotency_records.fingerprint = EXCLUDED.fingerprint
    RETURNING *`;
  if (written) return storedResponse(written)!;
  const existing = await findRecord(db, scope.tenantId, scope.operation, scope.key);
  const stored = existing && existing.fingerprint === scope.fingerprint ? storedResponse(existing) : null;
  if (!stored) throw new Error(`idempotency record ${scope.operation} ${scope.key} is held by another request`);
  return stored;
}

/** The operation's record is completed (its final response is stored). */
export async function isRecordCompleted(db: Db, tenantId: string, operation: string, key: string): Promise<boolean> {
  const [row] = await db`
    SELECT 1 FROM idempotency_records
    WHERE tenant_id = ${tenantId} AND operation = ${operation} AND idempotency_key = ${key} AND state = 'completed'`;
  return row !== undefined;
}

/**
 * Deletes expired records of finished operations, a batch at a time. An unfinished
 * operation's record is never deleted, whatever its age.
 */
export async function deleteExpiredRecords(db: Db, batchSize = 1000): Promise<number> {
  const deleted = await db`
    DELETE FROM idempotency_records
    WHERE ctid IN (
      SELECT ctid FROM idempotency_records
      WHERE state = 'completed' AND expires_at < now()
      LIMIT ${batchSize}
    )`;
  return deleted.count;
}
