import postgres from 'postgres';

export type Sql = postgres.Sql<{}>;

/** A client, or a transaction inside one: every data-access function in db/ works with either. */
export type Db = postgres.Sql<{}> | postgres.TransactionSql<{}>;

/**
 * Money columns are bigint. They are read as JS integers only when exact: amounts are
 * capped far below 2^53, and anything larger throws instead of losing a cent.
 */
const int8 = {
  to: 20,
  from: [20],
  serialize: (n: number | bigint) => String(n),
  parse: (text: string) => {
    const n = Number(text);
    if (!Number.isSafeInteger(n)) throw new RangeError(`int8 ${text} is not a safe integer`);
    return n;
  },
};

export interface SqlOptions {
  max?: number;
  /** Fail fast when the server is down so the API can answer 503 instead of hanging. */
  connectTimeoutSeconds?: number;
  applicationName?: string;
}

/** One injected postgres.js client per process. */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    onnotice: () => {},
    types: { int8 } as never,
    connection: { application_name: options.applicationName ?? 'payment-orchestrator' },
  });
}

/** PostgreSQL's unique_violation, optionally on a named constraint or index. */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint_name?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint_name === constraint);
}

/** PostgreSQL cannot be reached (refused, reset, timed out, shutting down). */
export function isDatabaseUnavailable(error: unknown): boolean {
  const raw = (error as { code?: unknown })?.code;
  // Only postgres.js and socket errors carry a string code (a gRPC error's is a number).
  const code = typeof raw === 'string' ? raw : '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED'].includes(code) ||
    code.startsWith('08') || // connection exceptions
    code.startsWith('57P') || // admin shutdown, crash shutdown, cannot connect now
    code.startsWith('53') // insufficient resources: too many connections, out of memory or disk
  );
}

/** PostgreSQL answers (readiness checks). */
export async function ping(db: Db): Promise<void> {
  await db`SELECT 1`;
}

/** Sends a NOTIFY on `channel` (the payload is a topic the listeners filter on). */
export async function notify(db: Db, channel: string, payload: string): Promise<void> {
  await db`SELECT pg_notify(${channel}, ${payload})`;
}

/**
 * postgres.js (3.4.9) runs an internal query for the server's array types as the first
 * statement of every new connection and drops its promise: when that query fails because
 * PostgreSQL went away (an outage, a restart, a connection closed while it starts), the
 * failure surfaces as an unhandled rejection that no caller can catch, and Node's default
 * ends the process. The statement the caller meant still runs after it and fails or succeeds
 * on its own, so such a rejection carries nothing to act on.
 */
export function isDroppedTypesQueryFailure(error: unknown): boolean {
  const query = (error as { query?: unknown })?.query;
  return typeof query === 'string' && /\bb\.typarray\b/.test(query) && /\bpg_catalog\.pg_type\b/.test(query) && isDatabaseUnavailable(error);
}

/**
 * Keeps a process alive through postgres.js's dropped types query (isDroppedTypesQueryFailure)
 * during a database outage: logged as a warning. Any other unhandled rejection still ends the
 * process, as Node's default does.
 */
export function surviveDroppedTypesQueries(log: (error: unknown) => void): void {
  process.on('unhandledRejection', (error) => {
    if (isDroppedTypesQueryFailure(error)) {
      log(error);
      return;
    }
    throw error;
  });
}
