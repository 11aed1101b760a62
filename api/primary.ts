/**
 * API_PROCESSES > 1: several API processes behind one port. This primary (node:cluster) forks
 * API_PROCESSES copies of api/main.ts; they share PORT (the primary accepts each connection
 * and hands it to the next process, round robin). It tells each process how many are alive,
 * so that together they hold the tenants' rate limits (api/edge.ts), and restarts a process
 * that dies (after 1 s, doubling to 30 s). SIGTERM/SIGINT: every process stops gracefully
 * (finishing its requests), then the primary exits. SIGUSR2: a rolling replacement — for each
 * process, a new one is started and listening before the old one stops taking connections and
 * finishes what it serves (`npm run rolling-upgrade`); the port never goes unserved. `npm start`
 * always runs the API through it; in production a load balancer over separate API processes does
 * the same.
 */
import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { createLogger } from '../lib/logger';

const { API_PROCESSES: processes, LOG_LEVEL } = z
  .object({ API_PROCESSES: z.coerce.number().int().min(1).max(64).default(2), LOG_LEVEL: z.string().default('info') })
  .parse(process.env);
// Its lines are lifecycle events only (starts, exits, replacements), which the supervisor reads
// (devstack/supervisor.ts waits for "rolling replacement of the api processes done"): info at least.
const logger = createLogger({ name: 'api-primary', level: ['trace', 'debug'].includes(LOG_LEVEL) ? LOG_LEVEL : 'info' });

cluster.setupPrimary({ exec: fileURLToPath(new URL('./main.ts', import.meta.url)), execArgv: process.execArgv });

let stopping = false;
const delays = new Map<number, number>();
/** Processes being replaced: their exit is expected, not restarted. */
const retiring = new Set<Worker>();
const bySlot = new Map<number, Worker>();

const live = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && !w.isDead());
const announce = () => {
  const count = Math.max(1, live().length);
  for (const worker of live()) if (worker.isConnected()) worker.send({ type: 'api-processes', live: count });
};

function fork(slot: number): Worker {
  const startedAt = Date.now();
  const worker = cluster.fork({ API_LIVE_PROCESSES: String(processes), API_PROCESS_SLOT: String(slot) });
  bySlot.set(slot, worker);
  worker.on('online', announce);
  worker.on('listening', announce);
  worker.on('exit', (code, signal) => {
    announce();
    if (stopping || retiring.delete(worker)) return;
    // A process that ran a minute is healthy again: its next restart is quick.
    const delay = Date.now() - startedAt > 60_000 ? 1000 : Math.min((delays.get(slot) ?? 500) * 2, 30_000);
    delays.set(slot, delay);
    logger.warn({ slot, pid: worker.process.pid, code, signal, restart_in_ms: delay }, `api process ${slot} (pid ${worker.process.pid}) exited; restarting it`);
    setTimeout(() => {
      if (stopping) return;
      fork(slot);
    }, delay).unref();
  });
  worker.once('online', () => logger.info({ slot, pid: worker.process.pid }, `api process ${slot} started (pid ${worker.process.pid})`));
  return worker;
}

/** Replaces each process in turn: the new one listens before the old one stops accepting. */
let replacing = false;
async function replaceAll(): Promise<void> {
  if (replacing || stopping) return;
  replacing = true;
  logger.info({ processes }, 'rolling replacement of the api processes');
  try {
    for (let slot = 1; slot <= processes && !stopping; slot++) {
      const old = bySlot.get(slot);
      const fresh = fork(slot);
      await new Promise<void>((resolve, reject) => {
        fresh.once('listening', () => resolve());
        fresh.once('exit', () => reject(new Error(`the new api process for slot ${slot} exited before listening`)));
      });
      if (old && !old.isDead()) {
        retiring.add(old);
        const gone = new Promise<void>((resolve) => old.once('exit', () => resolve()));
        // SIGTERM: api/process.ts stops accepting, finishes its requests in flight, then exits.
        old.process.kill('SIGTERM');
        await gone;
      }
      logger.info({ slot, old_pid: old?.process.pid, pid: fresh.process.pid }, `api process ${slot} replaced (pid ${old?.process.pid} -> ${fresh.process.pid})`);
    }
    logger.info('rolling replacement of the api processes done');
  } catch (error) {
    logger.error({ err: error }, 'rolling replacement of the api processes failed');
  } finally {
    replacing = false;
  }
}
process.on('SIGUSR2', () => void replaceAll());

for (let slot = 1; slot <= processes; slot++) fork(slot);

async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'api primary stopping its processes');
  await Promise.all(
    live().map(
      (worker) =>
        new Promise<void>((resolve) => {
          worker.once('exit', () => resolve());
          worker.process.kill('SIGTERM');
        }),
    ),
  );
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
