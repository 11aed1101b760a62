import type { Db, Sql } from './connect';
import { newId } from '../domain/ids';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

/** The console's operators, their sessions, failed sign-ins and the audit of their actions (migration 027, docs/console.md). */

export type OperatorRole = 'viewer' | 'operator';

export interface OperatorRow {
  id: string;
  email: string;
  role: OperatorRole;
  /** null: every tenant. */
  tenant_id: string | null;
  password_hash: string;
  password_changed_at: Date;
  disabled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A new operator; null when the email is taken (by constraint, so two requests at once make one). */
export async function insertOperator(db: Db, input: { email: string; role: OperatorRole; tenantId: string | null; passwordHash: string }): Promise<OperatorRow | null> {
  const [row] = await db<OperatorRow[]>`
    INSERT INTO operators (id, email, role, tenant_id, password_hash)
    VALUES (${newId('opr')}, ${input.email}, ${input.role}, ${input.tenantId}, ${input.passwordHash})
    ON CONFLICT (email) DO NOTHING
    RETURNING *`;
  return row ?? null;
}

export async function listOperators(db: Db): Promise<OperatorRow[]> {
  return db<OperatorRow[]>`SELECT * FROM operators ORDER BY id`;
}

export async function findOperator(db: Db, id: string): Promise<OperatorRow | null> {
  const [row] = await db<OperatorRow[]>`SELECT * FROM operators WHERE id = ${id}`;
  return row ?? null;
}

export async function operatorByEmail(db: Db, email: string): Promise<OperatorRow | null> {
  const [row] = await db<OperatorRow[]>`SELECT * FROM operators WHERE email = ${email}`;
  return row ?? null;
}

/** Disabled, and every session of the operator ended, in one transaction. Disabling twice keeps the first time. */
export async function disableOperator(db: Db, id: string): Promise<OperatorRow | null> {
  const [row] = await db<OperatorRow[]>`
    WITH ended AS (UPDATE operator_sessions SET ended_at = now() WHERE operator_id = ${id} AND ended_at IS NULL)
    UPDATE operators SET disabled_at = COALESCE(disabled_at, now()), updated_at = now() WHERE id = ${id} RETURNING *`;
  return row ?? null;
}

/** A new password, and every session of the operator ended. */
export async function setOperatorPassword(db: Db, id: string, passwordHash: string): Promise<OperatorRow | null> {
  const [row] = await db<OperatorRow[]>`
    WITH ended AS (UPDATE operator_sessions SET ended_at = now() WHERE operator_id = ${id} AND ended_at IS NULL)
    UPDATE operators SET password_hash = ${passwordHash}, password_changed_at = now(), updated_at = now() WHERE id = ${id} RETURNING *`;
  return row ?? null;
}

/** How long a session lives: 30 minutes without a request, 12 hours at most. */
export const SESSION_IDLE_SECONDS = 30 * 60;
export const SESSION_MAX_SECONDS = 12 * 60 * 60;

export async function insertSession(db: Db, input: { tokenHash: string; operatorId: string; csrfToken: string }): Promise<void> {
  await db`
    INSERT INTO operator_sessions (token_hash, operator_id, csrf_token, expires_at)
    VALUES (${input.tokenHash}, ${input.operatorId}, ${input.csrfToken}, now() + make_interval(secs => ${SESSION_MAX_SECONDS}))`;
}

export interface LiveSession {
  operator: OperatorRow;
  csrf_token: string;
}

/**
 * The session behind a token, if it is still live, its last use moved to now: not ended, not
 * past its 12 hours nor idle 30 minutes, and its operator neither disabled nor given a new
 * password since it began. Everything is checked here, in the one statement every console
 * request runs, so no other process's cache can keep a session alive.
 */
export async function touchSession(db: Db, tokenHash: string): Promise<LiveSession | null> {
  const [row] = await db<(OperatorRow & { csrf_token: string })[]>`
    UPDATE operator_sessions s SET last_seen_at = now()
    FROM operators o
    WHERE s.token_hash = ${tokenHash}
      AND s.ended_at IS NULL
      AND s.expires_at > now()
      AND s.last_seen_at > now() - make_interval(secs => ${SESSION_IDLE_SECONDS})
      AND o.id = s.operator_id
      AND o.disabled_at IS NULL
      AND s.created_at >= o.password_changed_at
    RETURNING o.*, s.csrf_token`;
  if (!row) return null;
  const { csrf_token, ...operator } = row;
  return { operator, csrf_token };
}

export async function endSession(db: Db, tokenHash: string): Promise<void> {
  await db`UPDATE operator_sessions SET ended_at = now() WHERE token_hash = ${tokenHash} AND ended_at IS NULL`;
}

/**
 * Counts a sign-in attempt against each subject before its password is checked: returns the
 * rows it wrote (removed again by forgiveAttempt once it succeeded) and whether any subject has
 * now passed its limit within the window. Old rows of these subjects are dropped on the way.
 */
export async function countSigninAttempt(db: Sql, subjects: { subject: string; limit: number }[], windowSeconds: number): Promise<{ ids: string[]; limited: boolean }> {
  const names = subjects.map((s) => s.subject);
  return db.begin(async (tx) => {
    await tx`DELETE FROM operator_signin_failures WHERE subject = ANY(${names}) AND failed_at <= now() - make_interval(secs => ${windowSeconds})`;
    const inserted = await tx<{ id: string }[]>`INSERT INTO operator_signin_failures (subject) SELECT unnest(${names}::text[]) RETURNING id`;
    const counts = await tx<{ subject: string; n: number }[]>`
      SELECT subject, count(*)::int AS n FROM operator_signin_failures
      WHERE subject = ANY(${names}) AND failed_at > now() - make_interval(secs => ${windowSeconds})
      GROUP BY subject`;
    const limited = subjects.some(({ subject, limit }) => (counts.find((c) => c.subject === subject)?.n ?? 0) > limit);
    return { ids: inserted.map((r) => String(r.id)), limited };
  });
}

export async function forgiveAttempt(db: Db, ids: string[]): Promise<void> {
  await db`DELETE FROM operator_signin_failures WHERE id = ANY(${ids}::bigint[])`;
}

export type AuditState = 'proposed' | 'done' | 'failed';

export interface AuditRow {
  id: string;
  actor: string;
  actor_email: string | null;
  action: string;
  object_type: string;
  object_id: string;
  tenant_id: string | null;
  idempotency_key: string | null;
  amount_minor: number | null;
  currency: string | null;
  state: AuditState;
  outcome: Record<string, unknown> | null;
  created_at: Date;
  decided_at: Date | null;
}

export interface AuditInput {
  actor: string;
  actorEmail: string | null;
  action: string;
  objectType: string;
  objectId: string;
  tenantId: string | null;
  idempotencyKey?: string | null;
  amountMinor?: number | null;
  currency?: string | null;
  state: AuditState;
  outcome?: Record<string, unknown> | null;
}

export async function insertAudit(db: Db, input: AuditInput): Promise<AuditRow> {
  const decided = input.state === 'proposed' ? null : new Date();
  const [row] = await db<AuditRow[]>`
    INSERT INTO operator_audit (id, actor, actor_email, action, object_type, object_id, tenant_id, idempotency_key, amount_minor, currency, state, outcome, decided_at)
    VALUES (${newId('act')}, ${input.actor}, ${input.actorEmail}, ${input.action}, ${input.objectType}, ${input.objectId}, ${input.tenantId},
            ${input.idempotencyKey ?? null}, ${input.amountMinor ?? null}, ${input.currency ?? null}, ${input.state},
            ${input.outcome === undefined || input.outcome === null ? null : db.json(input.outcome as never)}, ${decided})
    RETURNING *`;
  return row!;
}

export async function findAudit(db: Db, id: string): Promise<AuditRow | null> {
  const [row] = await db<AuditRow[]>`SELECT * FROM operator_audit WHERE id = ${id}`;
  return row ?? null;
}

/** A proposed action's outcome. Only the first decision is kept: a second confirmation finds it decided. */
export async function decideAudit(db: Db, id: string, state: 'done' | 'failed', outcome: Record<string, unknown>): Promise<AuditRow | null> {
  const [row] = await db<AuditRow[]>`
    UPDATE operator_audit SET state = ${state}, outcome = ${db.json(outcome as never)}, decided_at = now()
    WHERE id = ${id} AND state = 'proposed' RETURNING *`;
  return row ?? null;
}

export async function auditOf(db: Db, objectId: string): Promise<AuditRow[]> {
  return db<AuditRow[]>`SELECT * FROM operator_audit WHERE object_id = ${objectId} ORDER BY created_at DESC LIMIT 100`;
}

/** Every operator action newest first, paged by id (ids sort by creation time); a tenant's operator sees its tenant's only (operator_audit_by_tenant). */
export async function auditTrail(db: Db, query: PageQuery & { tenantId: string | null }): Promise<Page<AuditRow>> {
  const rows = await db<AuditRow[]>`
    SELECT * FROM operator_audit
    WHERE true ${query.tenantId !== null ? db`AND tenant_id = ${query.tenantId}` : db``}
    ${keysetPage(db, 'id', query)}`;
  return toPage(rows, query);
}

/** A note on an action still proposed (its operation answered 202: not decided yet; confirming again asks under the same key). */
export async function noteAudit(db: Db, id: string, outcome: Record<string, unknown>): Promise<void> {
  await db`UPDATE operator_audit SET outcome = ${db.json(outcome as never)} WHERE id = ${id} AND state = 'proposed'`;
}
