/**
 * The tracing phase of `npm run bench` (docs/tracing.md, docs/bench.md): new payments on three
 * lanes of their own (fresh database, API, worker; the shared Temporal server and sandboxes),
 * tracing off, tracing at OTEL_TRACES_SAMPLER=parentbased_traceidratio with
 * OTEL_TRACES_SAMPLER_ARG=0.1, and at 1 (every trace), measured interleaved round by round. The
 * traced lanes export OTLP/HTTP to a receiver in the bench process on loopback, which reads and
 * counts what it is sent and parses nothing. Writes tracing.md and tracing.json beside the
 * other results.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { CpuMeter } from './cpu';
import { formatRatio, HttpClient, round, roundRatio, type LoopResult, type RoundRatio } from './load';
import { Scenarios } from './scenarios';
import type { BenchLane, BenchStack } from './stack';

interface Timing {
  warmupMs: number;
  windowMs: number;
}

type Part = { label: string; concurrency: number; operation: () => Promise<string | void>; meter?: CpuMeter };

export interface TracingPhaseOptions {
  stack: BenchStack;
  createTenant: (apiUrl: string) => Promise<{ id: string; apiKey: string }>;
  interleaved: (parts: Part[], rounds: number, timing: (concurrency: number) => Timing, options: { alternate?: boolean }) => Promise<LoopResult[]>;
  warmUp: (label: string, operation: () => Promise<string | void>, meter: CpuMeter) => Promise<unknown>;
  concurrencies: number[];
  rounds: (concurrency: number) => number;
  timing: (concurrency: number) => Timing;
  pgDatabases: (laneDatabase: string) => string[];
  say: (line: string) => void;
}

export interface TracingLaneResult {
  name: string;
  sampler: string | null;
  payments: Record<number, LoopResult>;
  /** What the lane's processes sent to the receiver over the phase (warm-up included). */
  exported: { requests: number; bytes: number };
}

export interface TracingResult {
  lanes: TracingLaneResult[];
  /** Throughput of each traced lane ÷ the untraced lane's, per round; by client count. */
  ratios: Record<string, Record<number, RoundRatio>>;
}

/** An OTLP/HTTP endpoint on loopback that reads each request whole, counts it, and answers 200 (what a collector's receiver does first). */
async function startCountingReceiver() {
  const counts = new Map<string, { requests: number; bytes: number }>();
  const server = createServer((request, response) => {
    const lane = (request.url ?? '').split('/')[1] ?? '';
    const count = counts.get(lane) ?? { requests: 0, bytes: 0 };
    counts.set(lane, count);
    request.on('data', (chunk: Buffer) => (count.bytes += chunk.length));
    request.on('end', () => {
      count.requests++;
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    /** The lane's own endpoint (its path names it, so each lane's exports are counted apart). */
    endpoint: (lane: string) => `http://127.0.0.1:${port}/${lane}/v1/traces`,
    counted: (lane: string) => ({ ...(counts.get(lane) ?? { requests: 0, bytes: 0 }) }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const lanes = [
  { name: 'trace-off', sampler: null },
  { name: 'trace-10', sampler: '0.1' },
  { name: 'trace-100', sampler: '1' },
] as const;

export async function runTracingPhase(options: TracingPhaseOptions): Promise<TracingResult> {
  const { stack } = options;
  const receiver = await startCountingReceiver();
  stack.defer(() => receiver.close());
  const started: { lane: BenchLane; scenarios: Scenarios; meter: CpuMeter; http: HttpClient; sampler: string | null }[] = [];
  for (const { name, sampler } of lanes) {
    const env = sampler === null ? {} : { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.endpoint(name), OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: sampler };
    const lane = await stack.addLane(name, undefined, env);
    const http = new HttpClient(lane.apiUrl, 64);
    stack.defer(async () => http.close());
    const scenarios = new Scenarios({ ...lane, temporal: stack.temporal, sandboxUrl: stack.sandboxUrl }, http, await options.createTenant(lane.apiUrl));
    const meter = new CpuMeter(
      () => ({ temporal: stack.temporalPids(), 'sandbox-a': stack.children.find((c) => c.name === 'sandbox-a')!.pid, worker: lane.worker.pid, api: lane.api.pid }),
      lane.sql,
      options.pgDatabases(lane.databaseName),
    );
    started.push({ lane, scenarios, meter, http, sampler });
  }
  for (const lane of started) await options.warmUp(`warm-up of the ${lane.lane.name} lane: payments`, () => lane.scenarios.newPayment(), lane.meter);

  const results: TracingLaneResult[] = started.map(({ lane, sampler }) => ({ name: lane.name, sampler, payments: {}, exported: { requests: 0, bytes: 0 } }));
  const ratios: TracingResult['ratios'] = { 'trace-10': {}, 'trace-100': {} };
  for (const c of options.concurrencies) {
    const runs = await options.interleaved(
      started.map((lane) => ({ label: `${lane.lane.name} new payments`, concurrency: c, operation: () => lane.scenarios.newPayment(), meter: lane.meter })),
      options.rounds(c),
      options.timing,
      { alternate: true },
    );
    runs.forEach((run, i) => (results[i]!.payments[c] = run));
    const [off, ten, all] = runs as [LoopResult, LoopResult, LoopResult];
    ratios['trace-10']![c] = roundRatio(ten, off, (r) => r.throughput);
    ratios['trace-100']![c] = roundRatio(all, off, (r) => r.throughput);
    options.say(
      `tracing c=${c}: off ${off.throughput}/s p50 ${off.latency.p50} ms | 10 % ${ten.throughput}/s p50 ${ten.latency.p50} ms | 100 % ${all.throughput}/s p50 ${all.latency.p50} ms | ` +
        `throughput ÷ off: 10 % ${formatRatio(ratios['trace-10']![c]!)}, 100 % ${formatRatio(ratios['trace-100']![c]!)}`,
    );
  }
  for (const result of results) result.exported = receiver.counted(result.name);
  return { lanes: results, ratios };
}

/** tracing.md and tracing.json in `outDir`. */
export function writeTracingReport(result: TracingResult, outDir: string, context: { startedAt: string; commit: string; machine: string; command: string; otherCores: number }): string[] {
  const md = path.join(outDir, 'tracing.md');
  const json = path.join(outDir, 'tracing.json');
  const [off, ten, all] = result.lanes as [TracingLaneResult, TracingLaneResult, TracingLaneResult];
  const concurrencies = Object.keys(off.payments).map(Number);
  const cpu = (lane: TracingLaneResult, c: number, name: string) => lane.payments[c]?.cpuPerOperation?.[name] ?? '–';
  const lines = [
    '# Tracing on against tracing off',
    '',
    `Command: \`${context.command}\`; ${context.startedAt}, code ${context.commit}, ${context.machine}; other processes used ${context.otherCores} cores on average during the run.`,
    'Three lanes of their own (fresh database, API and worker, on the shared Temporal dev server and sandbox-a), measured interleaved round by round',
    '(bench/tracing.ts): tracing off; `OTEL_TRACES_SAMPLER=parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG=0.1` (10 %); the same with `1` (100 %).',
    'The traced lanes export OTLP/HTTP (JSON) to a receiver in the bench process on 127.0.0.1, which reads and counts each request and parses nothing.',
    'Ratios are the traced lane’s throughput ÷ the untraced lane’s, per round: median (range). CPU is ms per payment by process (from /proc).',
    '',
    '| clients | off /s | 10 % /s | 100 % /s | 10 % ÷ off | 100 % ÷ off | p50 ms off / 10 % / 100 % | api CPU off / 10 % / 100 % | worker CPU off / 10 % / 100 % |',
    '|---|---|---|---|---|---|---|---|---|',
    ...concurrencies.map(
      (c) =>
        `| ${c} | ${off.payments[c]!.throughput} | ${ten.payments[c]!.throughput} | ${all.payments[c]!.throughput} | ${formatRatio(result.ratios['trace-10']![c]!)} | ${formatRatio(result.ratios['trace-100']![c]!)} | ` +
        `${off.payments[c]!.latency.p50} / ${ten.payments[c]!.latency.p50} / ${all.payments[c]!.latency.p50} | ${cpu(off, c, 'api')} / ${cpu(ten, c, 'api')} / ${cpu(all, c, 'api')} | ${cpu(off, c, 'worker')} / ${cpu(ten, c, 'worker')} / ${cpu(all, c, 'worker')} |`,
    ),
    '',
    `Exported over the phase (warm-up included): 10 % ${ten.exported.requests} requests, ${round(ten.exported.bytes / 1e6, 1)} MB; 100 % ${all.exported.requests} requests, ${round(all.exported.bytes / 1e6, 1)} MB; off ${off.exported.requests}.`,
    '',
  ];
  writeFileSync(md, lines.join('\n'));
  writeFileSync(json, `${JSON.stringify({ ...context, ...result }, null, 2)}\n`);
  return [md, json];
}
