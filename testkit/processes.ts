import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../devstack/ports';
import { projectRoot } from '../devstack/temporal-cli';
import { TEST_PAYLOAD_KEYS } from './payload-keys';

// Dies with the process that spawned it (SIGKILL: a worker must not live on against a dropped database).
const dieWithParent = fileURLToPath(new URL('../devstack/exit-with-parent.mjs', import.meta.url));

/** Where spawned processes log unless told otherwise (scripts/faults.ts points FAULT_LOGS_DIR at its run). */
export const DEFAULT_LOGS_DIR = path.resolve(projectRoot, process.env.FAULT_LOGS_DIR ?? 'test/artifacts/faults-logs');

const living = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of living) child.kill('SIGKILL');
});

/** One of the product's processes (worker, API, sandbox, relay) run as a real child process. */
export interface ServiceProcess {
  name: string;
  pid: number;
  logFile: string;
  /** When the process was spawned, and when its ready URL first answered. */
  spawnedAt: number;
  readyAt: number;
  exited(): boolean;
  /** Resolves when the process is gone. */
  whenExited: Promise<void>;
  /** SIGKILL: no shutdown hook runs, in-flight work dies with it. */
  kill(): Promise<void>;
  /** SIGTERM, the ordinary shutdown (SIGKILL if it takes longer than `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

export interface ServiceOptions {
  name: string;
  /** The entry point, relative to the project root (`api/main.ts`, `worker/main.ts`...). */
  script: string;
  /** Added to a minimal environment (PATH, HOME, NODE_ENV=test, LOG_LEVEL=warn). */
  env: Record<string, string>;
  /** Polled until it answers 2xx. */
  readyUrl: string;
  /** Output is appended to `<logsDir>/<name>.log`. */
  logsDir?: string;
  readyTimeoutMs?: number;
}

/**
 * Spawns `node --import tsx <script>` (it dies with this process) and waits until
 * `readyUrl` answers 2xx. Shared by the fault tests, the chaos run and anything else that
 * needs a process it can SIGKILL.
 */
export async function spawnService(options: ServiceOptions): Promise<ServiceProcess> {
  const logsDir = options.logsDir ?? DEFAULT_LOGS_DIR;
  mkdirSync(logsDir, { recursive: true });
  const logFile = path.join(logsDir, `${options.name}.log`);
  const out = openSync(logFile, 'a');
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', dieWithParent, path.join(projectRoot, options.script)], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, EXIT_WITH_PARENT_SIGNAL: 'SIGKILL', NODE_ENV: 'test', LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', out, out],
  });
  closeSync(out);
  if (child.pid === undefined) throw new Error(`could not spawn ${options.name}`);
  living.add(child);
  let exited = false;
  const whenExited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      living.delete(child);
      resolve();
    }),
  );
  const readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) throw new Error(`${options.name} exited during start-up (see ${logFile})`);
    const ready = await fetch(options.readyUrl, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${options.name} not ready within ${readyTimeoutMs} ms (see ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const readyAt = Date.now();
  return {
    name: options.name,
    pid: child.pid,
    logFile,
    spawnedAt,
    readyAt,
    exited: () => exited,
    whenExited,
    async kill() {
      if (!exited) child.kill('SIGKILL');
      await whenExited;
    },
    async stop(graceMs = 15_000) {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await whenExited;
      clearTimeout(timer);
    },
  };
}

/** `worker/main.ts` as a real process: Temporal worker and outbox relay; at start it creates or updates the periodic jobs' Schedules. */
export type WorkerProcess = ServiceProcess;

export interface WorkerEnvironment {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  providerUrl: string;
  /** Anything else from lib/config.ts (PROVIDER_TIMEOUT_MS, WEBHOOK_*, LOG_LEVEL…). */
  env?: Record<string, string>;
  logsDir?: string;
}

/**
 * Spawns `worker/main.ts` with free ports for its metrics and the SDK's exporter, and waits
 * until it serves /metrics (it has bundled the workflows and created its Temporal worker by then).
 */
export async function spawnWorker(name: string, environment: WorkerEnvironment, readyTimeoutMs = 180_000): Promise<WorkerProcess> {
  const metricsPort = await freePort();
  const sdkPort = await freePort();
  return spawnService({
    name,
    script: 'worker/main.ts',
    env: {
      LOG_LEVEL: 'info',
      DATABASE_URL: environment.databaseUrl,
      DATABASE_POOL_SIZE: '10',
      TEMPORAL_ADDRESS: environment.temporalAddress,
      TASK_QUEUE: environment.taskQueue,
      PROVIDER: 'sandbox',
      PROVIDER_URL: environment.providerUrl,
      WORKER_METRICS_PORT: String(metricsPort),
      TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${sdkPort}`,
      // The key of the test stacks' clients: this worker reads what their API wrote.
      TEMPORAL_PAYLOAD_KEYS: TEST_PAYLOAD_KEYS,
      // The merchant's endpoint listens on this machine, over plain http.
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8,::1',
      WEBHOOK_ALLOW_HTTP: 'true',
      // Unversioned, like the test stacks' in-process workers it often shares a task queue with:
      // versioned workers of every test on one server would share one Worker Deployment's routing.
      TEMPORAL_WORKER_VERSIONING: 'off',
      ...environment.env,
    },
    readyUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    logsDir: environment.logsDir,
    readyTimeoutMs,
  });
}
