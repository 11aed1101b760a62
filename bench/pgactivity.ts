/**
 * What PostgreSQL did during one measured round: checkpoints and the
 * buffers the checkpointer, the background writer and the backends wrote (pg_stat_bgwriter,
 * PostgreSQL 15), WAL bytes and full-page images (pg_current_wal_lsn, pg_stat_wal), autovacuum
 * and autoanalyze runs on each lane's tables (pg_stat_user_tables) and the autovacuum workers
 * seen running (pg_stat_activity, sampled), and each lane database's buffer hits and reads
 * (pg_stat_database). WAL, checkpoints and buffer writes are the whole cluster's; the lanes
 * are measured one at a time, so a round's WAL is mostly its own lane's.
 */
import type { Sql } from '../db/connect';
import { historyTables } from './common';

export interface ProbeLane {
  name: string;
  /** A connection to the lane's database (pg_stat_user_tables is per database). */
  sql: Sql;
  database: string;
}

interface Snapshot {
  at: number;
  bgwriter: Record<string, number>;
  walLsn: string;
  wal: { fpi: number; bytes: number };
  lanes: Record<string, { tables: Record<string, { autovacuum: number; autoanalyze: number; dead: number }>; hit: number; read: number }>;
}

/** One round's activity, as stored per round in latest.json. */
export interface RoundActivity {
  /** The lane measured in this run (the other one idles meanwhile). */
  lane: string;
  /** 1-based round, and this run's place in it (1 = first). */
  round: number;
  position: number;
  seconds: number;
  checkpointsTimed: number;
  checkpointsRequested: number;
  /** Buffers written by the checkpointer, the background writer, the backends (8 kB each). */
  buffersCheckpoint: number;
  buffersBgwriter: number;
  buffersBackend: number;
  walBytes: number;
  /** WAL full-page images: the first change of a page after a checkpoint logs the whole page. */
  walFullPageImages: number;
  /** Autovacuum / autoanalyze runs that finished during the run, per lane: "lane:table" → count. */
  autovacuums: Record<string, number>;
  autoanalyzes: Record<string, number>;
  /** Samples (every 250 ms) with at least one autovacuum worker running, of all samples; what they ran. */
  autovacuumWorkerSamples: number;
  samples: number;
  autovacuumWorkerQueries: string[];
  /** Samples in which the checkpointer was in a checkpoint (a spread one takes minutes, so it can cover a run without completing in it). */
  checkpointInProgressSamples?: number;
  /** Operations the run completed, warm-up and drain included (for the per-operation figures). */
  operations?: number;
  /** Per lane database: shared-buffer hits and reads during the run; dead tuples in the lane's tables at its end. */
  blocks: Record<string, { hit: number; read: number; deadTuplesAfter: number }>;
}

/** The server settings that decide whether checkpoints and autovacuum can land in a round. */
export async function pgSettings(sql: Sql): Promise<Record<string, string>> {
  const rows = await sql<{ name: string; setting: string; unit: string | null }[]>`
    SELECT name, setting, unit FROM pg_settings
    WHERE name IN ('server_version', 'autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_analyze_scale_factor',
                   'autovacuum_vacuum_insert_scale_factor', 'checkpoint_timeout', 'checkpoint_completion_target', 'max_wal_size',
                   'shared_buffers', 'full_page_writes', 'wal_compression', 'synchronous_commit')
    ORDER BY name`;
  return Object.fromEntries(rows.map((r) => [r.name, r.unit ? `${r.setting} ${r.unit}` : r.setting]));
}

export class PgActivityProbe {
  private samples = 0;
  private busySamples = 0;
  private checkpointSamples = 0;
  private queries = new Set<string>();
  private timer?: NodeJS.Timeout;
  private sampling = false;

  constructor(
    /** Any superuser connection (the cluster-wide views). */
    private readonly sql: Sql,
    private readonly lanes: ProbeLane[],
  ) {}

  private async snapshot(): Promise<Snapshot> {
    const [bgwriter] = await this.sql<Record<string, string>[]>`
      SELECT checkpoints_timed::text, checkpoints_req::text, buffers_checkpoint::text, buffers_clean::text, buffers_backend::text FROM pg_stat_bgwriter`;
    const [wal] = await this.sql<{ lsn: string; fpi: string; bytes: string }[]>`
      SELECT pg_current_wal_lsn()::text AS lsn, wal_fpi::text AS fpi, wal_bytes::text AS bytes FROM pg_stat_wal`;
    const lanes: Snapshot['lanes'] = {};
    for (const lane of this.lanes) {
      const tables = await lane.sql<{ relname: string; autovacuum: string; autoanalyze: string; dead: string }[]>`
        SELECT relname, autovacuum_count::text AS autovacuum, autoanalyze_count::text AS autoanalyze, n_dead_tup::text AS dead
        FROM pg_stat_user_tables WHERE relname IN ${lane.sql(historyTables)}`;
      const [blocks] = await this.sql<{ hit: string; read: string }[]>`
        SELECT blks_hit::text AS hit, blks_read::text AS read FROM pg_stat_database WHERE datname = ${lane.database}`;
      lanes[lane.name] = {
        tables: Object.fromEntries(tables.map((t) => [t.relname, { autovacuum: Number(t.autovacuum), autoanalyze: Number(t.autoanalyze), dead: Number(t.dead) }])),
        hit: Number(blocks?.hit ?? 0),
        read: Number(blocks?.read ?? 0),
      };
    }
    return {
      at: Date.now(),
      bgwriter: Object.fromEntries(Object.entries(bgwriter!).map(([k, v]) => [k, Number(v)])),
      walLsn: wal!.lsn,
      wal: { fpi: Number(wal!.fpi), bytes: Number(wal!.bytes) },
      lanes,
    };
  }

  private async sample(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const backends = await this.sql<{ type: string; datname: string | null; query: string; wait: string | null }[]>`
        SELECT backend_type AS type, datname, query, wait_event AS wait FROM pg_stat_activity WHERE backend_type IN ('autovacuum worker', 'checkpointer')`;
      const workers = backends.filter((b) => b.type === 'autovacuum worker');
      this.samples++;
      if (workers.length) this.busySamples++;
      // An idle checkpointer waits on CheckpointerMain; in a (spread) checkpoint it writes or waits on CheckpointWriteDelay.
      if (backends.some((b) => b.type === 'checkpointer' && b.wait !== 'CheckpointerMain')) this.checkpointSamples++;
      const laneOf = (db: string | null) => this.lanes.find((l) => l.database === db)?.name ?? db ?? '?';
      for (const w of workers) this.queries.add(`${laneOf(w.datname)}: ${w.query || '(starting)'}`);
    } catch {
      // a sample is informational only
    } finally {
      this.sampling = false;
    }
  }

  /** Runs `fn` (one measured run of `lane`), returning its result and what PostgreSQL did meanwhile. */
  async around<T>(lane: string, round: number, position: number, fn: () => Promise<T>): Promise<{ value: T; activity: RoundActivity }> {
    const before = await this.snapshot();
    this.samples = 0;
    this.busySamples = 0;
    this.checkpointSamples = 0;
    this.queries = new Set();
    this.timer = setInterval(() => void this.sample(), 250);
    let value: T;
    try {
      value = await fn();
    } finally {
      clearInterval(this.timer);
    }
    // Backends flush their statistics at most once a second: let the last of them land.
    await new Promise((r) => setTimeout(r, 1100));
    const after = await this.snapshot();
    const [walDiff] = await this.sql<{ bytes: string }[]>`SELECT pg_wal_lsn_diff(${after.walLsn}, ${before.walLsn})::text AS bytes`;
    const bg = (k: string) => (after.bgwriter[k] ?? 0) - (before.bgwriter[k] ?? 0);
    const autovacuums: Record<string, number> = {};
    const autoanalyzes: Record<string, number> = {};
    const blocks: RoundActivity['blocks'] = {};
    for (const [name, a] of Object.entries(after.lanes)) {
      const b = before.lanes[name];
      let dead = 0;
      for (const [table, t] of Object.entries(a.tables)) {
        const vacuumed = t.autovacuum - (b?.tables[table]?.autovacuum ?? 0);
        const analyzed = t.autoanalyze - (b?.tables[table]?.autoanalyze ?? 0);
        if (vacuumed) autovacuums[`${name}:${table}`] = vacuumed;
        if (analyzed) autoanalyzes[`${name}:${table}`] = analyzed;
        dead += t.dead;
      }
      blocks[name] = { hit: a.hit - (b?.hit ?? 0), read: a.read - (b?.read ?? 0), deadTuplesAfter: dead };
    }
    return {
      value,
      activity: {
        lane,
        round,
        position,
        seconds: Math.round((after.at - before.at) / 100) / 10,
        checkpointsTimed: bg('checkpoints_timed'),
        checkpointsRequested: bg('checkpoints_req'),
        buffersCheckpoint: bg('buffers_checkpoint'),
        buffersBgwriter: bg('buffers_clean'),
        buffersBackend: bg('buffers_backend'),
        walBytes: Number(walDiff?.bytes ?? 0),
        walFullPageImages: after.wal.fpi - before.wal.fpi,
        autovacuums,
        autoanalyzes,
        autovacuumWorkerSamples: this.busySamples,
        checkpointInProgressSamples: this.checkpointSamples,
        samples: this.samples,
        autovacuumWorkerQueries: [...this.queries],
        blocks,
      },
    };
  }
}
