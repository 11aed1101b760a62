/**
 * Where PostgreSQL's work per payment goes, statement by statement: `pg_stat_statements`
 * sampled around the new-payments phase for the lane's database (the product's own; the
 * sandboxes keep theirs apart), divided by the payments made meanwhile. Needs the module
 * preloaded (`shared_preload_libraries = 'pg_stat_statements'`, then a restart); without it
 * the report says so and the rest of the bench runs as before.
 */
import type { Sql } from '../db/connect';

/** One statement's counters, per payment. */
export interface StatementCost {
  query: string;
  calls: number;
  ms: number;
  /** Shared-buffer pages found in the cache, read into it, dirtied, per payment. */
  hit: number;
  read: number;
  dirtied: number;
}

export interface StatementProfile {
  /** Why there is no profile, when there is none. */
  unavailable?: string;
  payments: number;
  /** Over every statement, per payment. */
  total: { calls: number; ms: number; pages: number; dirtied: number };
  /** The statements, most pages first. */
  statements: StatementCost[];
}

interface Row {
  queryid: string;
  query: string;
  calls: number;
  ms: number;
  hit: number;
  read: number;
  dirtied: number;
}

type Snapshot = Map<string, Row>;

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export class StatementSampler {
  private constructor(
    private readonly sql: Sql,
    private readonly database: string,
    readonly unavailable: string | null,
  ) {}

  /** A sampler on the lane's database (its connection), or one that says why it cannot sample. */
  static async open(sql: Sql, database: string): Promise<StatementSampler> {
    try {
      await sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
      await sql`SELECT 1 FROM pg_stat_statements LIMIT 1`;
      return new StatementSampler(sql, database, null);
    } catch (error) {
      return new StatementSampler(sql, database, `pg_stat_statements is not available (${(error as Error).message}); preload it: shared_preload_libraries = 'pg_stat_statements'`);
    }
  }

  async snapshot(): Promise<Snapshot> {
    const rows = this.unavailable
      ? []
      : await this.sql<Row[]>`
          SELECT queryid::text AS queryid, query, calls::float8 AS calls, total_exec_time::float8 AS ms,
                 shared_blks_hit::float8 AS hit, shared_blks_read::float8 AS read, shared_blks_dirtied::float8 AS dirtied
          FROM pg_stat_statements
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = ${this.database})`;
    return new Map(rows.map((row) => [row.queryid, row]));
  }

  /** The statements' counters between two snapshots, per payment, most pages first. */
  profile(before: Snapshot, after: Snapshot, payments: number, top = 25): StatementProfile {
    const empty = { payments, total: { calls: 0, ms: 0, pages: 0, dirtied: 0 }, statements: [] };
    if (this.unavailable) return { ...empty, unavailable: this.unavailable };
    if (payments <= 0) return { ...empty, unavailable: 'no payment was made while it sampled' };
    const per = (n: number) => n / payments;
    const costs: StatementCost[] = [];
    for (const [id, row] of after) {
      const was = before.get(id);
      const calls = row.calls - (was?.calls ?? 0);
      if (calls <= 0) continue;
      costs.push({
        query: row.query.replace(/\s+/g, ' ').trim(),
        calls: per(calls),
        ms: per(row.ms - (was?.ms ?? 0)),
        hit: per(row.hit - (was?.hit ?? 0)),
        read: per(row.read - (was?.read ?? 0)),
        dirtied: per(row.dirtied - (was?.dirtied ?? 0)),
      });
    }
    costs.sort((a, b) => b.hit + b.read - (a.hit + a.read));
    const sum = (pick: (c: StatementCost) => number) => round(costs.reduce((n, c) => n + pick(c), 0));
    return {
      payments,
      total: { calls: sum((c) => c.calls), ms: sum((c) => c.ms), pages: sum((c) => c.hit + c.read), dirtied: sum((c) => c.dirtied) },
      statements: costs.slice(0, top).map((c) => ({ ...c, calls: round(c.calls), ms: round(c.ms, 3), hit: round(c.hit), read: round(c.read), dirtied: round(c.dirtied) })),
    };
  }
}

/** The report's section: the statements by pages per payment. */
export function statementsMarkdown(profile: StatementProfile): string[] {
  const lines = ['## Where PostgreSQL\'s pages go', ''];
  if (profile.unavailable) return [...lines, `No statement profile: ${profile.unavailable}.`, ''];
  lines.push(
    `\`pg_stat_statements\` for the product's database over the new-payments phase (every concurrency, warm-ups included), divided by the ${profile.payments} payments made in it: ` +
      `${profile.total.calls} statements, ${profile.total.ms} ms of execution, ${profile.total.pages} shared-buffer pages (hit + read) and ${profile.total.dirtied} dirtied per payment. ` +
      'It counts the API\'s, the worker\'s and its outbox relay\'s and jobs\' statements alike; a statement\'s text is PostgreSQL\'s normalized form. The most pages first:',
    '',
    '| statement | calls | ms | pages hit | pages read | dirtied |',
    '|---|---:|---:|---:|---:|---:|',
  );
  for (const s of profile.statements) {
    const text = s.query.length > 160 ? `${s.query.slice(0, 157)}…` : s.query;
    lines.push(`| \`${text.replace(/\|/g, '\\|').replace(/`/g, "'")}\` | ${s.calls} | ${s.ms} | ${s.hit} | ${s.read} | ${s.dirtied} |`);
  }
  lines.push('');
  return lines;
}
