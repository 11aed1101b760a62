import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, inject } from 'vitest';
import { createSql } from '../../db/connect';
import { projectRoot } from '../../devstack/temporal-cli';
import { freePort } from '../../devstack/ports';

/**
 * `npm start` as a new user runs it, for the tests that launch it (test/launch/start.test.ts,
 * test/cluster/supervisor.test.ts): the real launcher in a child process of its own process
 * group, on free ports and a temporary data folder, its output kept, its process tree found
 * from /proc.
 */

export const BANNER_END = 'Ctrl-C stops everything.';

export interface Launch {
  npm: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: () => boolean;
  ports: Record<'api' | 'sandbox' | 'sandboxB' | 'temporal' | 'ui' | 'postgres' | 'workerMetrics' | 'sdkMetrics' | 'codec', number>;
  dataDir: string;
  /** Its process tree once it was up, for the clean-up after a failure. */
  tree: number[];
}

const launches: Launch[] = [];
/** Databases a test created for a launch, dropped by cleanUpLaunches(). */
export const databasesToDrop: string[] = [];

/** After each test: a failed test must not leave a stack running: Ctrl-C it, then kill what is left. */
export async function cleanUpLaunches(): Promise<void> {
  for (const launch of launches.splice(0)) {
    if (!launch.hasExited()) {
      launch.tree.push(...descendants(launch.npm.pid!));
      launch.npm.kill('SIGINT');
      await Promise.race([launch.exited, sleep(45_000)]);
      launch.npm.kill('SIGKILL');
    }
    for (const pid of new Set(launch.tree)) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(launch.dataDir, { recursive: true, force: true });
  }
  if (databasesToDrop.length) {
    const admin = createSql(adminUrl(), { max: 1 });
    for (const name of databasesToDrop.splice(0)) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

export async function launchStart(extraEnv: NodeJS.ProcessEnv): Promise<Launch> {
  const ports = {
    api: await freePort(),
    sandbox: await freePort(),
    sandboxB: await freePort(),
    temporal: await freePort(),
    ui: await freePort(),
    postgres: await freePort(),
    workerMetrics: await freePort(),
    sdkMetrics: await freePort(),
    codec: await freePort(),
  };
  const dataDir = mkdtempSync(path.join(tmpdir(), 'payorch-start-'));
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Nothing of the test run's own wiring may leak in: the launcher must find its own way.
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'PROVIDER', 'PROVIDER_URL', 'PROVIDERS', 'ADMIN_TOKEN', 'HOST', 'TEMPORAL_UI_URL', 'FORCE_COLOR', 'TEMPORAL_PAYLOAD_KEYS']) delete env[name];
  Object.assign(env, {
    PORT: String(ports.api),
    SANDBOX_PORT: String(ports.sandbox),
    SANDBOX_B_PORT: String(ports.sandboxB),
    TEMPORAL_PORT: String(ports.temporal),
    TEMPORAL_UI_PORT: String(ports.ui),
    EMBEDDED_PG_PORT: String(ports.postgres),
    WORKER_METRICS_PORT: String(ports.workerMetrics),
    TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${ports.sdkMetrics}`,
    CODEC_PORT: String(ports.codec),
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'development',
    ...extraEnv,
  });
  // sandbox-b's database beside a given one (devstack/supervisor.ts) goes with it.
  const given = extraEnv.DATABASE_URL ? new URL(extraEnv.DATABASE_URL).pathname.slice(1) : null;
  if (given && databasesToDrop.includes(given) && !extraEnv.SANDBOX_B_DATABASE_URL) databasesToDrop.push(`${given}_sandbox_b`);
  // Its own process group, like a shell job, so a test can Ctrl-C the group.
  const npm = spawn('npm', ['start'], { cwd: projectRoot, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    npm.once('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    }),
  );
  const launch: Launch = { npm, output: () => output, exited, hasExited: () => done, ports, dataDir, tree: [] };
  launches.push(launch);
  return launch;
}

/**
 * One entry file (api/main.ts, worker/main.ts) as `npm run api` / `npm run worker` run it, with the
 * test run's own wiring removed and `extraEnv` added; resolves when it exits, with its output.
 * For processes that stop at start (a refused configuration): it is killed after `timeoutMs`.
 */
export async function runEntryToExit(script: string, extraEnv: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'PROVIDER', 'PROVIDER_URL', 'PROVIDERS', 'ADMIN_TOKEN', 'HOST', 'FORCE_COLOR', 'TEMPORAL_PAYLOAD_KEYS']) delete env[name];
  Object.assign(env, { LOG_LEVEL: 'warn', NODE_ENV: 'development', ...extraEnv });
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: projectRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  clearTimeout(timer);
  return { code, signal, output };
}

export async function waitForBanner(launch: Launch, timeoutMs = 180_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const output = launch.output();
    const end = output.indexOf(BANNER_END);
    if (end >= 0) return output.slice(output.lastIndexOf('Payment orchestrator is running.', end), end);
    if (launch.hasExited()) throw new Error(`npm start exited before its banner:\n${output}`);
    if (Date.now() > deadline) throw new Error(`no banner within ${timeoutMs} ms:\n${output}`);
    await sleep(200);
  }
}

export function bannerPids(banner: string): Record<string, number> {
  const line = /pids\s+(.+)/.exec(banner)?.[1] ?? '';
  return Object.fromEntries(line.split(',').map((part) => part.trim().split(' ')).map(([name, pid]) => [name!, Number(pid)]));
}

export async function expectCleanExit(launch: Launch, tree: number[]): Promise<void> {
  const started = Date.now();
  const result = await Promise.race([launch.exited, sleep(60_000).then(() => null)]);
  expect(result, `npm start did not exit within 60 s of SIGINT:\n${launch.output().slice(-4000)}`).not.toBeNull();
  expect(result, launch.output().slice(-4000)).toEqual({ code: 0, signal: null });
  expect(Date.now() - started).toBeLessThan(60_000);
  // Everything it started is gone (a moment for the kernel to reap what just exited).
  const deadline = Date.now() + 3000;
  let alive = tree.filter(isAlive);
  while (alive.length && Date.now() < deadline) {
    await sleep(100);
    alive = tree.filter(isAlive);
  }
  expect(alive.map((pid) => `${pid} ${commandOf(pid)}`)).toEqual([]);
}

export function expectStopOrder(output: string, steps: string[]): void {
  const positions = steps.map((step) => output.indexOf(`[start] ${step}`));
  for (const [i, position] of positions.entries()) expect(position, `"${steps[i]}" missing:\n${output.slice(-3000)}`).toBeGreaterThanOrEqual(0);
  expect([...positions].sort((a, b) => a - b)).toEqual(positions);
}

/** Every process below `root` right now, from /proc (children in other sessions included). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = parentOf(Number(entry));
    if (ppid === null) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length) {
    const pid = queue.shift()!;
    for (const child of children.get(pid) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

export function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command may contain spaces and parentheses: fields start after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

export function parentOf(pid: number): number | null {
  const fields = procStat(pid);
  return fields ? Number(fields[1]) : null;
}

/** Running or sleeping; a zombie has exited. */
export function isAlive(pid: number): boolean {
  const fields = procStat(pid);
  return fields !== null && fields[0] !== 'Z' && fields[0] !== 'X';
}

export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '?';
  }
}

export async function portAnswers(port: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export function adminUrl(): string {
  return inject('databaseUrl').replace(/\/[^/]*$/, '/postgres');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
