import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectRoot } from '../../../devstack/temporal-cli';
import { freePort } from '../../../devstack/ports';
import { TEST_PAYLOAD_KEYS } from '../../helpers/payload-keys';
import { LOGS_DIR } from './config';

// Dies with the test process (SIGKILL: a worker must not live on against a dropped database).
const dieWithParent = fileURLToPath(new URL('../../../devstack/exit-with-parent.mjs', import.meta.url));

/** `worker/main.ts` as a real process: Temporal worker, outbox relay, retention job and reconciler. */
export interface WorkerProcess {
  name: string;
  pid: number;
  logFile: string;
  /** When the process was spawned, and when its metrics endpoint first answered. */
  spawnedAt: number;
  readyAt: number;
  exited(): boolean;
  /** SIGKILL: no shutdown hook runs, in-flight activities and deliveries die with it. */
  kill(): Promise<void>;
  /** SIGTERM, the ordinary shutdown (SIGKILL if it takes longer than `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

export interface WorkerEnvironment {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  providerUrl: string;
  /** Anything else from lib/config.ts (PROVIDER_TIMEOUT_MS, WEBHOOK_*, LOG_LEVEL…). */
  env?: Record<string, string>;
}

const living = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of living) child.kill('SIGKILL');
});

/**
 * Spawns `node --import tsx worker/main.ts` with free ports for its metrics and the SDK's
 * exporter, and waits until it serves /metrics (it has bundled the workflows and created
 * its Temporal worker by then). Its output goes to a log file under LOGS_DIR.
 */
export async function spawnWorker(name: string, environment: WorkerEnvironment, readyTimeoutMs = 180_000): Promise<WorkerProcess> {
  mkdirSync(LOGS_DIR, { recursive: true });
  const logFile = path.join(LOGS_DIR, `${name}.log`);
  const out = openSync(logFile, 'a');
  const metricsPort = await freePort();
  const sdkPort = await freePort();
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', dieWithParent, path.join(projectRoot, 'worker/main.ts')], {
    cwd: projectRoot,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      EXIT_WITH_PARENT_SIGNAL: 'SIGKILL',
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: environment.databaseUrl,
      DATABASE_POOL_SIZE: '10',
      TEMPORAL_ADDRESS: environment.temporalAddress,
      TASK_QUEUE: environment.taskQueue,
      PROVIDER_URL: environment.providerUrl,
      WORKER_METRICS_PORT: String(metricsPort),
      TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${sdkPort}`,
      // The key of the test stacks' clients: this worker reads what their API wrote.
      TEMPORAL_PAYLOAD_KEYS: TEST_PAYLOAD_KEYS,
      // The merchant's endpoint listens on this machine, over plain http.
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8,::1',
      WEBHOOK_ALLOW_HTTP: 'true',
      ...environment.env,
    },
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  if (child.pid === undefined) throw new Error(`could not spawn worker ${name}`);
  living.add(child);
  let exitedFlag = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exitedFlag = true;
      living.delete(child);
      resolve();
    }),
  );

  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exitedFlag) throw new Error(`worker ${name} exited during start-up (see ${logFile})`);
    const answered = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2000) })
      .then((r) => r.ok)
      .catch(() => false);
    if (answered) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`worker ${name} not ready within ${readyTimeoutMs} ms (see ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const readyAt = Date.now();

  return {
    name,
    pid: child.pid,
    logFile,
    spawnedAt,
    readyAt,
    exited: () => exitedFlag,
    async kill() {
      if (!exitedFlag) child.kill('SIGKILL');
      await exit;
    },
    async stop(graceMs = 15_000) {
      if (exitedFlag) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exit;
      clearTimeout(timer);
    },
  };
}
