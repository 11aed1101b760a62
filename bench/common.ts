/**
 * What the bench's load generator, scenarios, database probes and phases share. A leaf: it imports no
 * other bench module, so they can all import it without importing each other.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { OutgoingHttpHeaders } from 'node:http';
import path from 'node:path';
import { createSql, type Sql } from '../db/connect';
import { migrate } from '../db/migrate';

/** JSON request headers for `body`, computed once per request shape rather than per request. */
export function jsonHeaders(headers: Record<string, string>, body: Buffer): OutgoingHttpHeaders {
  return { ...headers, 'content-type': 'application/json', 'content-length': body.length };
}

/** The tables a lane's history lives in (the ones seedHistory grows). */
export const historyTables = ['payments', 'idempotency_records', 'ledger_transactions', 'ledger_entries', 'outbox_events'];

/** A command-line option's value (`--name value`), else the fallback. */
export function option(args: readonly string[], name: string, fallback: string): string {
  const at = args.indexOf(name);
  return (at >= 0 ? args[at + 1] : undefined) ?? fallback;
}

/** Percentiles of a sample in ms, to 0.01 ms. */
export function percentiles(samples: readonly number[]): { n: number; p50: number; p90: number; p95: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 100) / 100;
  return { n: sorted.length, p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99), max: at(1) };
}

/** Writes a phase's results as `<name>.json` and `<name>.md` in `out` (made if missing) and prints the report. */
export function writeResults(out: string, name: string, results: unknown, report: string): void {
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, `${name}.json`), JSON.stringify(results, null, 2) + '\n');
  writeFileSync(path.join(out, `${name}.md`), report);
  console.log(report);
}

/** The server the bench makes its databases on (BENCH_ADMIN_DATABASE_URL). */
export const benchAdminUrl = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A database of this name made anew (dropped first if it is there) on the bench's server, migrated, with a client of `max` connections. */
export async function freshDatabase(name: string, max: number): Promise<Sql> {
  const admin = createSql(benchAdminUrl, { max: 1 });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const sql = createSql(benchAdminUrl.replace(/\/[^/]*$/, `/${name}`), { max });
  await migrate(sql);
  return sql;
}
