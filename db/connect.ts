import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import postgres from 'postgres';
import { insideRecordingSpan, SpanKind, SpanStatusCode, tracer, tracingOn } from '../lib/tracing';

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

/**
 * The mend of postgres.js 3.4.9 that `npm install` applies (patches/postgres+3.4.9.patch,
 * by patch-package in package.json's postinstall, in the Docker image too). Unmended, the
 * driver ends the process during a database outage: a transaction's ROLLBACK written to a
 * connection that PostgreSQL closed throws from a setImmediate (an uncaught TypeError), and
 * the failure of the array types query it runs first on every new connection is an unhandled
 * rejection. Each mended place in the driver's connection.js, in both builds (src/ for import,
 * cjs/src/ for require), carries `marker`.
 */
export const driverMend = {
  version: '3.4.9',
  patch: 'patches/postgres+3.4.9.patch',
  marker: 'payment-orchestrator mend (patches/postgres+3.4.9.patch)',
  places: 4,
  files: ['src/connection.js', 'cjs/src/connection.js'],
} as const;

/** The folder of the postgres.js package this module loads (require resolves to its cjs/src/index.js). */
function installedDriverRoot(): string {
  return path.resolve(path.dirname(createRequire(import.meta.url).resolve('postgres')), '..', '..');
}

/**
 * Throws unless the driver at `driverRoot` (default: the one this process loads) is the
 * version the mend was written for, with the whole mend in both builds: `npm ci
 * --ignore-scripts` installs it unmended, and a process on it would die in the next outage.
 */
export function assertDriverMended(driverRoot: string = installedDriverRoot()): void {
  const { version } = JSON.parse(readFileSync(path.join(driverRoot, 'package.json'), 'utf8')) as { version: string };
  if (version !== driverMend.version) {
    throw new Error(
      `postgres.js is ${version}, ${driverMend.patch} was written for ${driverMend.version}: check whether this version still needs it ` +
        '(test/integration/postgres-driver.test.ts) and make the patch again for it (npx patch-package postgres) or remove it',
    );
  }
  for (const file of driverMend.files) {
    const places = readFileSync(path.join(driverRoot, file), 'utf8').split(driverMend.marker).length - 1;
    if (places !== driverMend.places) {
      throw new Error(`postgres.js is not patched: run npm install (${driverMend.patch}); ${driverRoot}/${file} has ${places} of its ${driverMend.places} mended places`);
    }
  }
}

let driverChecked = false;

/**
 * One injected postgres.js client per process. The first call checks that the driver is mended
 * (assertDriverMended): a process on an unmended driver refuses to start.
 */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  if (!driverChecked) {
    assertDriverMended();
    driverChecked = true;
  }
  const sql = postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 5,
    idle_timeout: 60,
    onnotice: () => {},
    types: { int8 } as never,
    connection: { application_name: options.applicationName ?? 'payment-orchestrator' },
  });
  // Tracing (docs/tracing.md): a span per statement; nothing in between while it is off.
  return tracingOn() ? tracedSql(sql) : sql;
}

/**
 * A statement's name for its span: its verb and the first table it names (`SELECT payments`,
 * `INSERT outbox`). Read from the statement's text, which holds no values: postgres.js sends
 * every interpolation as a parameter, and parameters never reach a span.
 */
export function statementName(text: string): { name: string; verb: string; table: string | null } {
  const words = text.replace(/--[^\n]*/g, ' ').trim().split(/\s+/);
  const verb = (words[0] ?? 'SQL').toUpperCase();
  const at = words.findIndex((word, i) => i > 0 && /^(from|into|update|join)$/i.test(words[i - 1]!) && /^[a-z_][a-z0-9_.]*$/i.test(word));
  const table = at > 0 ? words[at]!.toLowerCase() : null;
  return { name: table ? `${verb} ${table}` : verb, verb, table };
}

/** A tagged template's statement name, read once per call site (its strings array is the same object each time). */
const namesOfTemplates = new WeakMap<readonly string[], ReturnType<typeof statementName>>();
function templateName(strings: readonly string[]): ReturnType<typeof statementName> {
  let named = namesOfTemplates.get(strings);
  if (!named) namesOfTemplates.set(strings, (named = statementName(strings.join('$'))));
  return named;
}

/**
 * Opens the statement's span when it is first awaited (a fragment inside another statement
 * never is) and ends it with its answer. Only a statement made inside a sampled span of the
 * product's (a request, an activity, a delivery) is wrapped at all: the background polls (the
 * relay's claims, the listeners) would otherwise each be a trace of one statement, and a
 * statement of a trace the sampler dropped costs nothing more than with tracing off.
 */
function spanWhenRun<Q extends object>(query: Q, { name, verb, table }: ReturnType<typeof statementName>): Q {
  const started = () => {
    const span = tracer().startSpan(name, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system': 'postgresql', 'db.operation.name': verb, ...(table ? { 'db.collection.name': table } : {}), 'db.query.summary': name },
    });
    void Promise.prototype.then.call(
      query,
      () => span.end(),
      (error: unknown) => {
        span.setStatus({ code: SpanStatusCode.ERROR, message: String((error as { code?: unknown })?.code ?? 'error') });
        span.end();
      },
    );
  };
  let opened = false;
  for (const method of ['then', 'catch', 'finally'] as const) {
    const original = (query as Record<string, unknown>)[method] as (...args: unknown[]) => unknown;
    Object.defineProperty(query, method, {
      configurable: true,
      value(this: Q, ...args: unknown[]) {
        if (!opened) {
          opened = true;
          started();
        }
        return original.apply(this, args);
      },
    });
  }
  return query;
}

/**
 * The client with a span per statement of ours: tagged templates and `unsafe`, in the client
 * and in its transactions and savepoints (whose clients are wrapped alike).
 */
function tracedSql<T extends object>(sql: T): T {
  return new Proxy(sql, {
    apply(target, thisArg, args: unknown[]) {
      const result = Reflect.apply(target as (...a: unknown[]) => unknown, thisArg, args) as object;
      const strings = args[0];
      return Array.isArray(strings) && 'raw' in strings && insideRecordingSpan() ? spanWhenRun(result, templateName(strings)) : result;
    },
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      const call = value as (...a: unknown[]) => unknown;
      if (property === 'begin' || property === 'savepoint') {
        return (...args: unknown[]) => {
          const body = args.at(-1) as (tx: object) => unknown;
          return call.apply(target, [...args.slice(0, -1), (tx: object) => body(tracedSql(tx))]);
        };
      }
      if (property === 'unsafe') {
        return (text: string, ...rest: unknown[]) => {
          const query = call.call(target, text, ...rest) as object;
          return insideRecordingSpan() ? spanWhenRun(query, statementName(text)) : query;
        };
      }
      return call.bind(target);
    },
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
/**
 * Words of the code's own vocabulary (statuses, states) written into a statement as quoted
 * literals: a partial index is used only by a query that states its predicate, and a value
 * passed as a parameter proves nothing to a generic plan. Only for a closed set of lowercase
 * words (a client's value only after validation against such a set); anything else throws.
 */
export function constantLiterals(db: Db, values: readonly string[]) {
  for (const value of values) if (!/^[a-z_]+$/.test(value)) throw new Error(`not a constant word: ${JSON.stringify(value)}`);
  return db.unsafe(values.map((value) => `'${value}'`).join(', '));
}

export async function ping(db: Db): Promise<void> {
  await db`SELECT 1`;
}

/** Sends a NOTIFY on `channel` (the payload is a topic the listeners filter on). */
export async function notify(db: Db, channel: string, payload: string): Promise<void> {
  await db`SELECT pg_notify(${channel}, ${payload})`;
}
