import type { Connection } from '@temporalio/client';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports';
import { guardUi } from '../lib/ui-guard';

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Search attributes an operator filters payments by in the Web UI (docs/CONTRACT.md §5.9). */
export const searchAttributeFlags = ['TenantId=Keyword', 'OrderId=Keyword', 'PaymentStatus=Keyword'];

/** TEMPORAL_CLI_PATH, then `temporal` on PATH, then the project's own install (.tools/bin). */
export function resolveTemporalCli(): string | null {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv && existsSync(fromEnv)) return fromEnv;
  const onPath = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  if (onPath.status === 0 && onPath.stdout.trim()) return onPath.stdout.trim();
  const local = path.join(projectRoot, '.tools', 'bin', 'temporal');
  return existsSync(local) ? local : null;
}

/** Resolves the CLI, running scripts/install-temporal.sh once if it is missing. */
export function ensureTemporalCli(): string {
  const found = resolveTemporalCli();
  if (found) return found;
  const result = spawnSync('bash', [path.join(projectRoot, 'scripts', 'install-temporal.sh')], { stdio: 'inherit' });
  const installed = resolveTemporalCli();
  if (result.status !== 0 || !installed) throw new Error('the Temporal CLI is missing and scripts/install-temporal.sh failed');
  return installed;
}

export interface DevServerOptions {
  port: number;
  uiPort?: number;
  /** Persist to this SQLite file; in memory when omitted. */
  dbFilename?: string;
  headless?: boolean;
  namespace?: string;
  logFile?: string;
  /** More `--dynamic-config-value KEY=JSON` pairs (over tunedDynamicConfig). */
  dynamicConfig?: Record<string, unknown>;
  /** The codec server the Web UI calls to show decoded payloads (`--ui-codec-endpoint`). */
  uiCodecEndpoint?: string;
  /** More `--sqlite-pragma NAME=VALUE` pairs for a file-backed server (over the defaults below). */
  sqlitePragmas?: Record<string, string>;
  /** The Web UI's terminate, cancel, signal, reset… (TEMPORAL_UI_WRITE_ACTIONS=true); read-only when omitted. */
  uiWriteActions?: boolean;
}

/**
 * Why: the dev server has ONE history shard, so limits meant per shard of a cluster become
 * limits of the whole server (the cluster of devstack/temporal-cluster.ts gets the same values:
 * there the reader limits apply to each of its shards, and the hop latency is the same) (measured with npm run bench, bench/results/latest.md):
 * - each history queue reader loads new tasks at most 20 times a second by default, so every
 *   hop (workflow task, activity task, close, visibility) waited ~35 ms for its load: an empty
 *   workflow took 50 ms, a 3-activity one 150 ms. 1000/s keeps batching under load.
 * - one task-queue partition: with the default 4, a task can land on a partition whose
 *   poller is elsewhere and be forwarded; one worker process gains nothing from four.
 * - eager activity dispatch: an activity scheduled by a workflow task is handed back in the
 *   reply to that task's completion instead of a trip through matching (same events, same
 *   retries and timeouts; a worker without free slots simply does not ask for it).
 */
export const tunedDynamicConfig: Record<string, unknown> = {
  'history.transferProcessorMaxPollRPS': 1000,
  'history.visibilityProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxPollRPS': 1000,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
  'system.enableActivityEagerExecution': true,
};

/**
 * The dev server always serves the frontend's HTTP API (on a free port when not given), without
 * authentication: a page on another site could start batch operations with a cross-site
 * text/plain POST. Nothing of ours uses it, and no flag turns it off, so it is closed with its
 * own Host check: it answers only a name that cannot resolve (.invalid, RFC 6761), which no
 * browser can send; everything else is 403 "Host not allowed".
 */
export const closedHttpApi = { 'frontend.httpAllowedHosts': ['temporal-http-api-closed.invalid'] };

/**
 * Worker Versioning on the development servers (dev server and the local cluster): a version
 * that stopped being current is DRAINED once visibility shows no open run pinned to it. The
 * server first waits out a grace period (visibility may lag behind the routing change), then
 * looks again at an interval: 3 minutes each by default, sized for a production fleet.
 * Here both are seconds, so `npm run rolling-upgrade` stops the old workers moments after
 * their last pinned run closes.
 */
export const versioningDynamicConfig: Record<string, unknown> = {
  'matching.wv.VersionDrainageStatusVisibilityGracePeriod': '5s',
  'matching.wv.VersionDrainageStatusRefreshInterval': '3s',
};

export interface DevServer {
  address: string;
  uiUrl: string | null;
  /** The frontend's HTTP API port: served, but to no Host a browser can send (closedHttpApi). */
  httpApiPort: number;
  process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts `temporal server start-dev` with the custom search attributes registered and
 * waits until its frontend answers. Used by `npm start`, the test suite and the benchmark.
 */
export async function startTemporalDevServer(options: DevServerOptions): Promise<DevServer> {
  const cli = ensureTemporalCli();
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'error'];
  for (const flag of searchAttributeFlags) args.push('--search-attribute', flag);
  if (options.namespace) args.push('--namespace', options.namespace);
  if (options.dbFilename) {
    // WAL + NORMAL: the file-backed dev server is several times faster and still durable
    // across a process crash (only an OS crash can lose the last transactions).
    const pragmas = { journal_mode: 'WAL', synchronous: 'NORMAL', ...options.sqlitePragmas };
    args.push('--db-filename', options.dbFilename);
    for (const [name, value] of Object.entries(pragmas)) args.push('--sqlite-pragma', `${name}=${value}`);
  }
  for (const [key, value] of Object.entries({ ...tunedDynamicConfig, ...closedHttpApi, ...versioningDynamicConfig, ...options.dynamicConfig })) {
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  }
  const httpApiPort = await freePort();
  args.push('--http-port', String(httpApiPort));
  // The embedded UI listens on a private port; its public one (uiPort) is the guard's (lib/ui-guard.ts).
  const withUi = !(options.headless ?? !options.uiPort);
  const privateUiPort = withUi ? await freePort() : null;
  if (privateUiPort === null) args.push('--headless');
  else args.push('--ui-ip', '127.0.0.1', '--ui-port', String(privateUiPort));
  if (options.uiCodecEndpoint) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);

  const { openSync } = await import('node:fs');
  const out = options.logFile ? openSync(options.logFile, 'a') : 'ignore';
  const child = spawn(cli, args, { stdio: ['ignore', out, out], detached: false });
  const address = `127.0.0.1:${options.port}`;
  let exited = false;
  child.once('exit', () => (exited = true));

  const deadline = Date.now() + 60_000;
  while (!(await namespaceServed(address))) {
    if (exited) throw new Error(`temporal dev server exited during start (args: ${args.join(' ')})`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('temporal dev server did not become ready within 60 s');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  if (privateUiPort !== null) {
    try {
      await guardUi(child, { port: options.uiPort!, hostname: '127.0.0.1', target: { host: '127.0.0.1', port: privateUiPort }, writeActions: options.uiWriteActions ?? false });
    } catch (error) {
      child.kill('SIGKILL');
      throw error;
    }
  }
  return {
    address,
    uiUrl: privateUiPort === null ? null : `http://127.0.0.1:${options.uiPort}`,
    httpApiPort,
    process: child,
    stop: (signal = 'SIGTERM') =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}

/**
 * True once a frontend serves `namespace`, not merely once its port is open. `connect` opens
 * the connection (the dev server's: plaintext, 1 s timeout; the cluster passes its own, TLS).
 */
export async function namespaceServed(
  address: string,
  namespace = 'default',
  connect: (address: string) => Promise<Connection> = async (at) =>
    (await import('@temporalio/client')).Connection.connect({ address: at, connectTimeout: 1000 }),
): Promise<boolean> {
  try {
    const connection = await connect(address);
    try {
      await connection.workflowService.describeNamespace({ namespace });
      return true;
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}
