/**
 * npm run bench:eager — what eager workflow start saves on this machine. Eager start needs the
 * starting client and a worker of the task queue in one process, on one NativeConnection: the
 * server then hands the run's first workflow task back in the start's answer instead of through
 * matching. The product starts payments from the API process and runs them in the worker
 * process, so this measures the lever on its own before the product would pay for it: one
 * process, a worker and a client on the Temporal dev server as `npm start` runs it (file-backed
 * SQLite, devstack/temporal-cli.ts's dynamic config), a workflow started and its result awaited,
 * plain and eager interleaved round by round (the same client counts, the same window).
 * The workflows are the bench's floor (bench/floor.ts): the empty workflow (the payment's shape
 * when the PSP answers at once is one workflow task) and the 3-step floor.
 * Writes bench/results/eager-start.md and .json (BENCH_OUT to write elsewhere).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { freePort } from '../devstack/ports';
import { startTemporalDevServer } from '../devstack/temporal-cli';
import { closedLoop, formatRatio, mergeRuns, roundRatio, type LoopResult, type LoopRun } from './load';
import { floorActivities } from './floor-activities';
import type { emptyWorkflow } from './floor';

const env = process.env;
const rounds = Number(env.BENCH_ROUNDS ?? 3);
const windowMs = Number(env.BENCH_WINDOW_MS ?? 4000);
const clientCounts = (env.BENCH_CONCURRENCY ?? '1,8').split(',').map(Number);
const outDir = env.BENCH_OUT ?? fileURLToPath(new URL('./results/', import.meta.url));

Runtime.install({ logger: new DefaultLogger('ERROR') });
const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-eager-'));
const server = await startTemporalDevServer({ port: await freePort(), headless: true, dbFilename: path.join(dataDir, 'temporal.db') });
const connection = await NativeConnection.connect({ address: server.address });
const taskQueue = `eager-${randomBytes(4).toString('hex')}`;
const worker = await Worker.create({ connection, taskQueue, workflowsPath: fileURLToPath(new URL('./floor.ts', import.meta.url)), activities: floorActivities });
const running = worker.run();
const client = new Client({ connection });

type Shape = 'empty' | 'floor';
type Mode = 'plain' | 'eager';
const shapes: Shape[] = ['empty', 'floor'];
const modes: Mode[] = ['plain', 'eager'];
const runs = new Map<string, LoopRun[]>();
const eagerlyStarted = new Map<string, { eager: number; of: number }>();

async function once(shape: Shape, mode: Mode, tally: { eager: number; of: number }): Promise<string | void> {
  const id = randomBytes(8).toString('hex');
  const options = { taskQueue, workflowId: `${shape}-${mode}-${id}`, args: [{ id }] as [{ id: string }], requestEagerStart: mode === 'eager' };
  // By type name: this process runs the workflows in its worker's workflow isolate, never imports them.
  const handle = await client.workflow.start<typeof emptyWorkflow>(shape === 'empty' ? 'emptyWorkflow' : 'floorWorkflow', options);
  tally.of++;
  if (handle.eagerlyStarted) tally.eager++;
  if ((await handle.result()) !== id) return 'wrong result';
}

try {
  for (let round = 1; round <= rounds; round++) {
    for (const clients of clientCounts) {
      for (const shape of shapes) {
        for (const mode of modes) {
          const key = `${shape}|${mode}|${clients}`;
          const tally = eagerlyStarted.get(key) ?? { eager: 0, of: 0 };
          eagerlyStarted.set(key, tally);
          const run = await closedLoop({ concurrency: clients, warmupMs: 1000, durationMs: windowMs, operation: () => once(shape, mode, tally) });
          runs.set(key, [...(runs.get(key) ?? []), run]);
          console.log(`round ${round} ${clients} clients ${shape} ${mode}: ${run.result.throughput}/s p50 ${run.result.latency.p50} ms`);
        }
      }
    }
  }
} finally {
  worker.shutdown();
  await running;
  await connection.close();
  await server.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

const result = (shape: Shape, mode: Mode, clients: number): LoopResult => mergeRuns(runs.get(`${shape}|${mode}|${clients}`)!);
const lines = [
  '# Eager workflow start, measured on its own',
  '',
  `Command: \`npm run bench:eager\` (BENCH_ROUNDS=${rounds}, BENCH_WINDOW_MS=${windowMs}, BENCH_CONCURRENCY=${clientCounts.join(',')}); ${new Date().toISOString().slice(0, 10)}, ${(await import('node:os')).cpus().length} cores. ` +
    'One process: a worker and a client sharing a NativeConnection to the Temporal dev server as `npm start` runs it. Each operation starts a workflow and awaits its result; ' +
    'plain and eager (`requestEagerStart`) alternate round by round. Ratios are eager ÷ plain per round: median (range).',
  '',
  '| workflow | clients | plain /s | eager /s | throughput eager ÷ plain | plain p50 ms | eager p50 ms | p50 eager ÷ plain | eagerly started |',
  '|---|---|---|---|---|---|---|---|---|',
];
const json: Record<string, unknown>[] = [];
for (const shape of shapes) {
  for (const clients of clientCounts) {
    const plain = result(shape, 'plain', clients);
    const eager = result(shape, 'eager', clients);
    const throughput = roundRatio(eager, plain, (r) => r.throughput);
    const p50 = roundRatio(eager, plain, (r) => r.p50);
    const tally = eagerlyStarted.get(`${shape}|eager|${clients}`)!;
    lines.push(
      `| ${shape} | ${clients} | ${plain.throughput} | ${eager.throughput} | ${formatRatio(throughput)} | ${plain.latency.p50} | ${eager.latency.p50} | ${formatRatio(p50)} | ${tally.eager} of ${tally.of} |`,
    );
    json.push({ shape, clients, plain, eager, throughput, p50, eagerlyStarted: tally });
  }
}
mkdirSync(outDir, { recursive: true });
writeFileSync(path.join(outDir, 'eager-start.md'), `${lines.join('\n')}\n`);
writeFileSync(path.join(outDir, 'eager-start.json'), `${JSON.stringify({ rounds, windowMs, clientCounts, results: json }, null, 2)}\n`);
console.log(lines.join('\n'));
