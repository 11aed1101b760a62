/**
 * The engines phase: the two-node production cluster on
 * PostgreSQL (TEMPORAL_MODE=cluster) against the Temporal CLI dev server (SQLite file with WAL,
 * as `npm start` runs it) in the same run. The stack's own lane runs on the stack's Temporal;
 * the phase adds a lane on the other engine (its own Temporal, database, API and worker; the
 * same two provider sandboxes) and measures new payments on both interleaved (A, B, A, B…)
 * at each client count, so the machine's drift and the other agents' load hit both alike.
 *
 * BENCH_ENGINES_VARIANT (cluster mode) adds lanes: more clusters with other settings, one
 * object or a list, e.g. '{"shards":16}', '[{"shards":4},{"sqlMaxConns":20}]' or
 * '{"dynamicConfig":{"matching.numTaskqueueReadPartitions":4}}', measured interleaved with the
 * other lanes: a tuning's effect as a ratio to the stack's cluster within one run.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { freePort } from '../devstack/ports';
import { startTemporalDevServer } from '../devstack/temporal-cli';
import { startTemporalCluster } from '../devstack/temporal-cluster';
import { CpuMeter } from './cpu';
import { formatRatio, HttpClient, round, roundRatio, type LoopResult, type RoundRatio } from './load';
import { Scenarios } from './scenarios';
import type { BenchStack } from './stack';

/** Settings of the variant cluster (over the stack cluster's). */
export interface ClusterVariant {
  shards?: number;
  sqlMaxConns?: number;
  sqlMaxIdleConns?: number;
  dynamicConfig?: Record<string, unknown>;
}

export interface EngineLane {
  /** `cluster`, `dev`, or `variant` (`variant-1`, `variant-2`… when several). */
  name: string;
  description: string;
  /** New payments by client count. */
  payments: Record<number, LoopResult>;
}

/** One lane against another at one client count: medians of per-round ratios, with their range. */
export interface EngineRatio {
  of: string;
  to: string;
  clients: number;
  throughput: RoundRatio;
  p50: RoundRatio;
  p99: RoundRatio;
}

export interface EnginesResult {
  clients: number[];
  rounds: number;
  lanes: EngineLane[];
  ratios: EngineRatio[];
  variants?: ClusterVariant[];
  seconds: number;
}

type Part = { label: string; concurrency: number; operation: () => Promise<string | void>; meter: CpuMeter };
type Timing = { warmupMs: number; windowMs: number };

export interface EnginesOptions {
  stack: BenchStack;
  /** The stack's engine: the lane on it is the stack's base lane (its scenarios given here). */
  mode: 'dev' | 'cluster';
  baseScenarios: Scenarios;
  /** The stack's dynamic config (BENCH_TEMPORAL_DYNAMIC_CONFIG): the variant cluster starts from it too. */
  dynamicConfig: Record<string, unknown>;
  variants: ClusterVariant[];
  createTenant: (apiUrl: string) => Promise<{ id: string; apiKey: string }>;
  interleaved: (parts: Part[], rounds: number, timing: (concurrency: number) => Timing) => Promise<LoopResult[]>;
  concurrencies: number[];
  rounds: number;
  windowMs: number;
  say: (line: string) => void;
}

/**
 * CPU by process, with PostgreSQL split in two: `postgres` (the app's and the sandboxes'
 * databases) and `postgres-temporal` (the backends of the cluster's own databases: its
 * history, mutable state, task queues and visibility; none for the dev server, whose SQLite
 * runs inside its process).
 */
class EngineMeter extends CpuMeter {
  private readonly store: CpuMeter | null;
  constructor(processes: () => Record<string, number | number[]>, sql: BenchStack['sql'], appDatabases: string[], temporalDatabases: string[]) {
    super(processes, sql, appDatabases);
    this.store = temporalDatabases.length ? new CpuMeter({}, sql, temporalDatabases) : null;
  }

  override async snapshot() {
    const snapshot = await super.snapshot();
    if (this.store) snapshot['postgres-temporal'] = (await this.store.snapshot()).postgres!;
    return snapshot;
  }
}

/** Shorter windows than the payments phase: the phase should add about two minutes. */
function enginesTiming(windowMs: number) {
  return (concurrency: number): Timing => {
    const scale = concurrency >= 64 ? 2 : concurrency >= 8 ? 1 : 0.75;
    return { warmupMs: concurrency >= 64 ? 3000 : 1000, windowMs: Math.round(windowMs * scale) };
  };
}

export async function runEnginesPhase(options: EnginesOptions): Promise<{ result: EnginesResult; laneSql: BenchStack['sql'][] }> {
  const { stack } = options;
  const started = Date.now();
  const sandboxPids = () => Object.fromEntries(stack.children.filter((c) => c.name.startsWith('sandbox-')).map((c) => [c.name, c.pid]));
  const sandboxDatabases = stack.sandboxes.map((s) => s.databaseName);
  const lanes: { name: string; description: string; scenarios: Scenarios; meter: CpuMeter }[] = [
    {
      name: options.mode,
      description: stack.temporalDescription,
      scenarios: options.baseScenarios,
      meter: new EngineMeter(
        () => ({ temporal: stack.temporalPids(), worker: stack.worker.pid, api: stack.api.pid, ...sandboxPids() }),
        stack.sql,
        [stack.databaseName, ...sandboxDatabases],
        stack.temporalDatabases,
      ),
    },
  ];
  const closers: (() => void)[] = [];

  /** A lane on a Temporal of its own: `pids` its server processes, `databases` its PostgreSQL databases (if any). */
  const addLane = async (name: string, description: string, address: string, pids: () => number[], databases: string[]) => {
    const lane = await stack.addLane(`engine-${name}`, address);
    const http = new HttpClient(lane.apiUrl, 64);
    closers.push(() => http.close());
    const scenarios = new Scenarios({ ...lane, temporal: stack.temporal, sandboxUrl: stack.sandboxUrl }, http, await options.createTenant(lane.apiUrl));
    const meter = new EngineMeter(
      () => ({ temporal: pids(), worker: lane.worker.pid, api: lane.api.pid, ...sandboxPids() }),
      stack.sql,
      // The sandboxes' databases: their backends work for this lane too.
      [lane.databaseName, ...sandboxDatabases],
      databases,
    );
    lanes.push({ name, description, scenarios, meter });
    options.say(`engines: lane ${name} up (${description})`);
    return lane;
  };

  const startCluster = async (name: string, settings: ClusterVariant) => {
    const prefix = `payorch_bench_${name.replace(/\W/g, '_')}_${randomBytes(3).toString('hex')}`;
    const databases = [`${prefix}_temporal`, `${prefix}_visibility`];
    for (const database of databases) stack.defer(() => stack.sql.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
    const cluster = await startTemporalCluster({
      postgresUrl: stack.databaseUrl,
      databaseName: databases[0],
      visibilityDatabaseName: databases[1],
      dataDir: path.join(stack.workDir, `temporal-${name}`),
      ...settings,
      dynamicConfig: { ...options.dynamicConfig, ...settings.dynamicConfig },
    });
    stack.defer(() => cluster.stop());
    const description =
      `cluster of ${cluster.nodes.length} nodes on PostgreSQL, ${cluster.shards} shards, pool ${cluster.sqlMaxConns}/${cluster.sqlMaxIdleConns}` +
      (settings.dynamicConfig ? `, dynamic config ${JSON.stringify(settings.dynamicConfig)}` : '');
    await addLane(name, description, cluster.address, () => cluster.nodes.map((n) => n.pid), databases);
  };

  try {
    if (options.mode === 'cluster') {
      const dev = await startTemporalDevServer({
        port: await freePort(),
        headless: true,
        logFile: path.join(stack.workDir, 'temporal-engine-dev.log'),
        dbFilename: path.join(stack.workDir, 'temporal-engine-dev.db'),
      });
      stack.defer(() => dev.stop());
      await addLane('dev', 'Temporal CLI dev server, SQLite file with WAL + synchronous=NORMAL, as `npm start` runs it', dev.address, () => [dev.process.pid!], []);
      for (const [i, variant] of options.variants.entries()) await startCluster(options.variants.length > 1 ? `variant-${i + 1}` : 'variant', variant);
    } else {
      await startCluster('cluster', {});
    }

    const timing = enginesTiming(options.windowMs);
    const parts = (concurrency: number, what: string): Part[] =>
      lanes.map((lane) => ({ label: `${what} ${lane.name}`, concurrency, operation: () => lane.scenarios.newPayment(), meter: lane.meter }));
    await options.interleaved(parts(32, 'engines warm-up:'), 1, () => ({ warmupMs: 1000, windowMs: 2000 }));
    const results = lanes.map(() => ({}) as Record<number, LoopResult>);
    for (const c of options.concurrencies) {
      const measured = await options.interleaved(parts(c, 'engines: new payments on'), options.rounds, timing);
      measured.forEach((r, i) => (results[i]![c] = r));
      options.say(
        `engines c=${c}: ` +
          lanes
            .map((lane, i) => `${lane.name} ${measured[i]!.throughput}/s p50 ${measured[i]!.latency.p50} p99 ${measured[i]!.latency.p99} ms (temporal ${measured[i]!.cpuPerOperation?.temporal}, pg-temporal ${measured[i]!.cpuPerOperation?.['postgres-temporal'] ?? 0} ms/payment)`)
            .join(' | '),
      );
    }

    const byName = (name: string) => lanes.findIndex((l) => l.name === name);
    const pairs: [string, string][] = [['cluster', 'dev'], ...lanes.filter((l) => l.name.startsWith('variant')).map((l): [string, string] => [l.name, 'cluster'])];
    const ratios: EngineRatio[] = [];
    for (const [of, to] of pairs) {
      for (const c of options.concurrencies) {
        const a = results[byName(of)]![c]!;
        const b = results[byName(to)]![c]!;
        const ratio: EngineRatio = {
          of,
          to,
          clients: c,
          throughput: roundRatio(a, b, (r) => r.throughput),
          p50: roundRatio(a, b, (r) => r.p50),
          p99: roundRatio(a, b, (r) => r.p99),
        };
        ratios.push(ratio);
        options.say(`engines c=${c}: ${of} ÷ ${to}: payments/s ${formatRatio(ratio.throughput)}, p50 ${formatRatio(ratio.p50)}, p99 ${formatRatio(ratio.p99)}`);
      }
    }
    return {
      result: {
        clients: options.concurrencies,
        rounds: options.rounds,
        lanes: lanes.map((lane, i) => ({ name: lane.name, description: lane.description, payments: results[i]! })),
        ratios,
        ...(options.variants.length ? { variants: options.variants } : {}),
        seconds: round((Date.now() - started) / 1000, 0),
      },
      laneSql: lanes.slice(1).map((lane) => lane.scenarios.sql),
    };
  } finally {
    for (const close of closers) close();
  }
}

const cpuColumns = ['temporal', 'postgres-temporal', 'postgres', 'worker', 'api', 'sandbox-a', 'sandbox-b', 'bench', 'total', 'other'];

/** latest.md's section for the phase. */
export function enginesMarkdown(engines: EnginesResult): string[] {
  const lines = ['## Engines: the cluster and the dev server in the same run', ''];
  lines.push(
    'New payments on each engine, its own lane (Temporal, database, API, worker; the same two sandboxes), the lanes measured interleaved ' +
      `(${engines.lanes.map((l) => l.name).join(', ')}, then again) at each client count, ${engines.rounds} rounds each (${engines.seconds} s with start-up). ` +
      'Ratios are medians of per-round ratios (round r of one lane against round r of the other), with their range.',
    '',
  );
  for (const lane of engines.lanes) lines.push(`- **${lane.name}**: ${lane.description}`);
  lines.push('', `| clients | ${engines.lanes.map((l) => `${l.name}: payments/s | ${l.name}: p50 / p99 ms`).join(' | ')} |`, `|---:|${engines.lanes.map(() => '---:|---:').join('|')}|`);
  for (const c of engines.clients) {
    lines.push(`| ${c} | ${engines.lanes.map((l) => `${l.payments[c]?.throughput ?? '–'} | ${l.payments[c]?.latency.p50 ?? '–'} / ${l.payments[c]?.latency.p99 ?? '–'}`).join(' | ')} |`);
  }
  lines.push('', '| ratio | clients | payments/s | p50 | p99 |', '|---|---:|---:|---:|---:|');
  for (const r of engines.ratios) lines.push(`| ${r.of} ÷ ${r.to} | ${r.clients} | ${formatRatio(r.throughput)} | ${formatRatio(r.p50)} | ${formatRatio(r.p99)} |`);
  lines.push(
    '',
    'CPU ms per payment by process (over each whole run, warm-up included): `temporal` the engine\'s server processes, `postgres-temporal` the backends of the cluster\'s own ' +
      'databases (its history, mutable state, task queues and visibility; the dev server keeps these in SQLite inside its process), `postgres` the app\'s and the sandboxes\' databases, ' +
      '`other` the rest of the machine meanwhile.',
    '',
    `| lane, clients | ${cpuColumns.join(' | ')} |`,
    `|---|${cpuColumns.map(() => '---:').join('|')}|`,
  );
  for (const c of engines.clients) {
    for (const lane of engines.lanes) {
      const cpu = lane.payments[c]?.cpuPerOperation;
      if (cpu) lines.push(`| ${lane.name}, ${c} | ${cpuColumns.map((p) => cpu[p] ?? (p === 'postgres-temporal' ? 0 : '–')).join(' | ')} |`);
    }
  }
  lines.push('');
  return lines;
}

/** BENCH_ENGINES_VARIANT (one object or a list), checked. */
export function parseVariants(raw: string | undefined): ClusterVariant[] {
  if (!raw) return [];
  const variants = [JSON.parse(raw) as ClusterVariant | ClusterVariant[]].flat();
  const known = new Set(['shards', 'sqlMaxConns', 'sqlMaxIdleConns', 'dynamicConfig']);
  for (const key of variants.flatMap((v) => Object.keys(v))) if (!known.has(key)) throw new Error(`BENCH_ENGINES_VARIANT: unknown setting ${key} (of ${[...known].join(', ')})`);
  return variants;
}
