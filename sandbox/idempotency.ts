import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type postgres from 'postgres';
import type { Sql } from '../db/connect';
import { SandboxError } from './errors';

export type Tx = postgres.TransactionSql<{}>;

/** One (endpoint, Idempotency-Key) and the fingerprint of the parameters sent with it. */
export interface IdempotencyScope {
  /** The route template, e.g. 'POST /v1/charges/:id/capture' (the path id is in the fingerprint). */
  endpoint: string;
  key: string;
  fingerprint: string;
  /**
   * Forget the key this many seconds after it was first used (card PSPs forget after 24 hours);
   * null: remembered forever. A request after that is executed again, as a new request.
   */
  ttlSeconds: number | null;
}

/** The response exactly as it was first produced, replayed byte for byte. */
export interface StoredResponse {
  status: number;
  body: string;
  /** The effect committed but the response is never sent (pm_card_timeout_after_charge). */
  lost: boolean;
}

/** What an endpoint decided once it started executing. */
export interface EffectResult {
  status: number;
  body: unknown;
  lost?: boolean;
}

/** Canonical JSON (RFC 8785) so that key order or spacing never makes two equal requests differ. */
export function requestFingerprint(params: unknown): string {
  return createHash('sha256').update(canonicalize(params) ?? '').digest('hex');
}

const keyReused = (scope: IdempotencyScope) =>
  new SandboxError(
    400,
    'idempotency_error',
    'idempotency_key_reused',
    `Keys for idempotent requests can only be used with the same parameters they were first used with. ` +
      `Try using a key other than '${scope.key}' if you meant to execute a different request.`,
  );

async function readStored(sql: Sql | Tx, scope: IdempotencyScope): Promise<StoredResponse | null> {
  const [row] = await sql<
    { fingerprint: string; response_status: number | null; response_body: string | null; response_lost: boolean }[]
  >`
    SELECT fingerprint, response_status, response_body, response_lost
    FROM sandbox.idempotency_keys
    WHERE endpoint = ${scope.endpoint} AND idempotency_key = ${scope.key}
      AND (${scope.ttlSeconds}::int IS NULL OR created_at > clock_timestamp() - make_interval(secs => ${scope.ttlSeconds}::int))`;
  if (!row) return null;
  if (row.fingerprint !== scope.fingerprint) throw keyReused(scope);
  if (row.response_status === null || row.response_body === null) {
    throw new Error(`idempotency record ${scope.endpoint} ${scope.key} committed without a response`);
  }
  return { status: row.response_status, body: row.response_body, lost: row.response_lost };
}

/**
 * Runs `effect` at most once per scope and returns its response, or the stored response of
 * the run that came first.
 *
 * The key is claimed by inserting its row first, in the same transaction that commits the
 * effect. A concurrent request with the same key blocks in its INSERT on the primary key
 * until the first transaction ends: if that one commits, the INSERT does nothing and the
 * stored response (now visible, READ COMMITTED) is replayed; if it rolls back, the INSERT
 * succeeds and this request performs the effect itself. Either way exactly one effect.
 *
 * `beforeFirstAttempt` runs only when the key has no stored response yet (fault injection
 * that must not affect replays). A SandboxError thrown by `effect` is a final answer and
 * is stored like a success; validation errors are thrown before, and are not (as at card PSPs).
 */
export async function runIdempotently(
  sql: Sql,
  scope: IdempotencyScope,
  effect: (tx: Tx) => Promise<EffectResult>,
  beforeFirstAttempt?: () => Promise<void>,
): Promise<StoredResponse> {
  const stored = await readStored(sql, scope);
  if (stored) return stored;
  await beforeFirstAttempt?.();

  return sql.begin(async (tx): Promise<StoredResponse> => {
    const claimed = await tx`
      INSERT INTO sandbox.idempotency_keys (endpoint, idempotency_key, fingerprint)
      VALUES (${scope.endpoint}, ${scope.key}, ${scope.fingerprint})
      ON CONFLICT (endpoint, idempotency_key) DO UPDATE
        SET fingerprint = excluded.fingerprint, response_status = NULL, response_body = NULL,
            response_lost = false, created_at = clock_timestamp()
        -- An expired key is claimed afresh: the request runs again, as at a real PSP.
        WHERE ${scope.ttlSeconds}::int IS NOT NULL
          AND sandbox.idempotency_keys.created_at <= clock_timestamp() - make_interval(secs => ${scope.ttlSeconds}::int)
      RETURNING 1`;
    if (claimed.length === 0) {
      const winner = await readStored(tx, scope);
      if (!winner) throw new Error(`idempotency record ${scope.endpoint} ${scope.key} vanished`);
      return winner;
    }

    let result: EffectResult;
    try {
      result = await effect(tx);
    } catch (error) {
      if (!(error instanceof SandboxError)) throw error;
      result = { status: error.status, body: error.toBody() };
    }
    const response: StoredResponse = {
      status: result.status,
      body: JSON.stringify(result.body),
      lost: result.lost ?? false,
    };
    await tx`
      UPDATE sandbox.idempotency_keys
      SET response_status = ${response.status}, response_body = ${response.body}, response_lost = ${response.lost}
      WHERE endpoint = ${scope.endpoint} AND idempotency_key = ${scope.key}`;
    return response;
  });
}
