import type { Db } from './connect';
import type { AttemptOutcome } from '../domain/payments-attempts';
import { sqlState } from './sqlstate';

const foreignKeyViolation = '23503';

/** One charge attempt at a PSP (payment_attempts, migration 009). */
export interface AttemptRow {
  payment_id: string;
  attempt: number;
  provider: string;
  provider_charge_id: string | null;
  outcome: AttemptOutcome;
  error_code: string | null;
  started_at: Date;
  finished_at: Date | null;
  /** The payment's routing segment (`visa:EUR:card`; migration 033), null for attempts recorded before it was kept. */
  segment: string | null;
}

/**
 * Records that attempt n at `provider` began, and that the payment's money is (to be) at that
 * provider: payments.provider follows the attempt under way, so a webhook, a capture or the
 * reconciler looks there. Idempotent: a repeated step finds the row it made.
 *
 * The pointer only moves forward: a late try of this step (a retry whose earlier try was still
 * running, a worker that stalled and woke up) leaves it alone once a later attempt began.
 * Pointed back, the payment would name a PSP that holds none of its money, and reconciliation
 * would give back the charge the payment holds as a duplicate.
 */
export async function beginAttempt(db: Db, paymentId: string, attempt: number, provider: string): Promise<void> {
  // Only for a payment row that exists: after an ambiguous start the intent may be persisted
  // again later (recordChargeOutcome), which records the attempt that charged.
  await db`
    INSERT INTO payment_attempts (payment_id, attempt, provider, outcome, started_at, segment)
    SELECT ${paymentId}, ${attempt}, ${provider}, 'pending', now(),
           (SELECT segment FROM payment_attempts WHERE payment_id = ${paymentId} AND attempt = 1)
    WHERE EXISTS (SELECT 1 FROM payments WHERE id = ${paymentId})
    ON CONFLICT (payment_id, attempt) DO NOTHING`;
  await db`
    UPDATE payments SET provider = ${provider}, updated_at = now()
    WHERE id = ${paymentId} AND provider IS DISTINCT FROM ${provider}
      AND NOT EXISTS (SELECT 1 FROM payment_attempts WHERE payment_id = ${paymentId} AND attempt > ${attempt})`;
}

/**
 * Attempt 1 of a payment whose route its first charge attempt decides: records it as begun at
 * `provider` (with the payment's routing segment, which its later attempts copy) unless an earlier try of that step recorded it already, points payments.provider
 * at the attempt's PSP if nothing pointed it yet (a late try, after the payment moved on to a
 * later attempt, must not point it back: see beginAttempt), and answers that PSP (the earlier try's, if any) and whether an earlier
 * try recorded it (`earlier`: that try may have charged, so the PSP is asked before charging).
 * One statement. Null only when neither this statement wrote the row nor its snapshot shows
 * one: a concurrent try committed it meanwhile (ask again), or the payment row does not exist.
 */
export async function beginFirstAttempt(db: Db, paymentId: string, provider: string, segment: string | null = null): Promise<{ provider: string; earlier: boolean } | null> {
  // No payment row: the attempt's foreign key refuses it (the check a lookup would repeat).
  const [row] = await db<{ provider: string; earlier: boolean }[]>`
    WITH inserted AS (
      INSERT INTO payment_attempts (payment_id, attempt, provider, outcome, started_at, segment)
      VALUES (${paymentId}, 1, ${provider}, 'pending', now(), ${segment})
      ON CONFLICT (payment_id, attempt) DO NOTHING
      RETURNING provider
    ), chosen AS (
      SELECT provider, false AS earlier FROM inserted
      UNION ALL
      SELECT provider, true AS earlier FROM payment_attempts WHERE payment_id = ${paymentId} AND attempt = 1
      LIMIT 1
    ), pointed AS (
      -- Only the pointer moves (no indexed column, updated_at left as it is: the payment's own
      -- state has not changed), so the new row version can stay on its heap page (a HOT update,
      -- with room kept by the table's fillfactor) and no index of payments is written. Only an
      -- unset pointer: set, it names attempt 1's PSP (this same one) or a later attempt's.
      UPDATE payments SET provider = chosen.provider
      FROM chosen WHERE payments.id = ${paymentId} AND payments.provider IS NULL
    )
    SELECT provider, earlier FROM chosen`.catch((error: unknown) => {
    if (sqlState(error) === foreignKeyViolation) return [];
    throw error;
  });
  return row ?? null;
}

/**
 * Records how attempt n ended (once: a repeated step changes nothing): the pending row its
 * begin wrote is updated in place; only when there is none (a step lost) is the row written
 * whole.
 */
export async function finishAttempt(
  db: Db,
  paymentId: string,
  attempt: number,
  provider: string,
  result: { outcome: Exclude<AttemptOutcome, 'pending'>; providerChargeId: string | null; errorCode: string | null },
): Promise<void> {
  // A charge the PSP has not named yet ('': a redirect its PSP answered without the charge's id) is stored without an id.
  const chargeId = result.providerChargeId || null;
  const finished = await db`
    UPDATE payment_attempts SET provider_charge_id = ${chargeId}, outcome = ${result.outcome},
      error_code = ${result.errorCode}, finished_at = now()
    WHERE payment_id = ${paymentId} AND attempt = ${attempt} AND outcome = 'pending'`;
  if (finished.count > 0) return;
  await db`
    INSERT INTO payment_attempts (payment_id, attempt, provider, provider_charge_id, outcome, error_code, started_at, finished_at)
    SELECT ${paymentId}, ${attempt}, ${provider}, ${chargeId}, ${result.outcome}, ${result.errorCode}, now(), now()
    WHERE EXISTS (SELECT 1 FROM payments WHERE id = ${paymentId})
    ON CONFLICT (payment_id, attempt) DO UPDATE
      SET provider_charge_id = EXCLUDED.provider_charge_id, outcome = EXCLUDED.outcome,
          error_code = EXCLUDED.error_code, finished_at = EXCLUDED.finished_at
      WHERE payment_attempts.outcome = 'pending'`;
}

/** The payment's attempts, first first. */
export async function listAttempts(db: Db, paymentId: string): Promise<AttemptRow[]> {
  return db<AttemptRow[]>`SELECT * FROM payment_attempts WHERE payment_id = ${paymentId} ORDER BY attempt`;
}

/** The attempt that made this charge at this provider, if any (webhooks, reconciliation). */
export async function attemptOfCharge(db: Db, provider: string, chargeId: string): Promise<AttemptRow | null> {
  const [row] = await db<AttemptRow[]>`SELECT * FROM payment_attempts WHERE provider = ${provider} AND provider_charge_id = ${chargeId} LIMIT 1`;
  return row ?? null;
}

/** The attempt as the API shows it (GET /v1/payments/{id}, `attempts`). */
export function attemptResource(row: AttemptRow) {
  return {
    attempt: row.attempt,
    provider: row.provider,
    provider_charge_id: row.provider_charge_id,
    outcome: row.outcome,
    error_code: row.error_code,
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
  };
}
