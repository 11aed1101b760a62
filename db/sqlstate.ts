/**
 * PostgreSQL errors that no retry can cure: the same statement with the same input fails
 * the same way every time. Class 22 (data exception: a NUL in text, a bad escape in jsonb,
 * a value out of range), class 23 (integrity constraint violation) except unique_violation,
 * and class 42 (syntax error or access rule violation: a bug, or a migration not run).
 * unique_violation (23505) is left retryable: the design arbitrates races with unique keys,
 * and a step that loses one re-reads the winner's row on its next attempt.
 */
export function isDeterministicDatabaseError(error: unknown): boolean {
  const code = sqlState(error);
  if (code === null || code === '23505') return false;
  return code.startsWith('22') || code.startsWith('23') || code.startsWith('42');
}

/** The SQLSTATE of a PostgreSQL error (postgres.js puts it in `code`), or null for anything else. */
export function sqlState(error: unknown): string | null {
  const e = error as { name?: string; code?: unknown } | null;
  if (!e || e.name !== 'PostgresError' || typeof e.code !== 'string') return null;
  return /^[0-9A-Z]{5}$/.test(e.code) ? e.code : null;
}
