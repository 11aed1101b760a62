/**
 * CPU time per process of the stack (Linux /proc), to say where each operation's cost goes:
 * the Temporal server, the worker, the API, the sandbox, PostgreSQL (the backends serving
 * the bench database) and the bench process itself (load generator and floor client), and
 * `other`: whatever else kept the machine's CPUs busy meanwhile (another user's work, and
 * PostgreSQL's shared background processes: WAL writer, checkpointer, autovacuum).
 */
import { readFileSync } from 'node:fs';
import type { Sql } from '../db/connect';

const ticksPerSecond = 100; // USER_HZ on Linux

export type CpuSnapshot = Record<string, number>;

/** Not CPU: PostgreSQL buffer hits and reads (blocks), carried alongside and kept out of the totals. */
export const blockHit = 'pg_blocks_hit';
export const blockRead = 'pg_blocks_read';

function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of /proc/<pid>/stat (1-based); after "(comm) " they are at 11 and 12.
    return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
  } catch {
    return 0;
  }
}

/** CPU ms the whole machine spent busy (all CPUs, /proc/stat: everything but idle and iowait). */
function machineBusyMs(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  return ((total - fields[3]! - fields[4]!) / ticksPerSecond) * 1000;
}

export class CpuMeter {
  constructor(
    /**
     * A name's pids are summed (the cluster's server processes count as one `temporal`). A
     * function is asked at each snapshot (a restarted process's new pid counts under its name).
     */
    private readonly processes: Record<string, number | number[]> | (() => Record<string, number | number[]>),
    private readonly sql: Sql,
    /** The databases whose backends count as `postgres` (the bench's, and the cluster's own). */
    private readonly database: string | string[],
  ) {}

  async snapshot(): Promise<CpuSnapshot> {
    const snapshot: CpuSnapshot = {};
    const processes = typeof this.processes === 'function' ? this.processes() : this.processes;
    for (const [name, pids] of Object.entries(processes)) snapshot[name] = [pids].flat().reduce((sum, pid) => sum + processCpuMs(pid), 0);
    const own = process.cpuUsage();
    snapshot.bench = (own.user + own.system) / 1000;
    const backends = await this.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname IN ${this.sql([this.database].flat())}`;
    snapshot.postgres = 0;
    for (const { pid } of backends) snapshot.postgres += processCpuMs(pid);
    snapshot.machine = machineBusyMs();
    // PostgreSQL's shared-buffer hits and reads of the lane's own database (the first one):
    // per operation, they tell whether a slower figure touched more pages or just got less CPU.
    // Backends report these at most once a second and when going idle, so per-run figures
    // carry up to a second of slack at each end.
    const [blocks] = await this.sql<{ hit: string; read: string }[]>`
      SELECT blks_hit::text AS hit, blks_read::text AS read FROM pg_stat_database WHERE datname = ${[this.database].flat()[0]!}`;
    snapshot[blockHit] = Number(blocks?.hit ?? 0);
    snapshot[blockRead] = Number(blocks?.read ?? 0);
    return snapshot;
  }

  /** CPU ms by process between two snapshots (backends that came and went are missed), with the total. */
  static delta(before: CpuSnapshot, after: CpuSnapshot): Record<string, number> {
    const result: Record<string, number> = {};
    let total = 0;
    for (const name of Object.keys(after)) {
      if (name === 'machine') continue;
      if (name === blockHit || name === blockRead) {
        result[name] = Math.max(0, (after[name] ?? 0) - (before[name] ?? 0));
        continue;
      }
      const ms = Math.max(0, (after[name] ?? 0) - (before[name] ?? 0));
      total += ms;
      result[name] = ms;
    }
    result.total = total;
    result.other = Math.max(0, (after.machine ?? 0) - (before.machine ?? 0) - total);
    return result;
  }
}
