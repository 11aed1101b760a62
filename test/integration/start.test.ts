import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../db/connect';
import { projectRoot } from '../../devstack/temporal-cli';
import { freePortOutsideEphemeralRange } from '../../devstack/ports';

/**
 * `npm start` as a new user runs it: the real launcher in a child process, on free ports and
 * a temporary data folder, until its banner; then one tenant and one payment over HTTP, the
 * Temporal Web UI, and a Ctrl-C after which the launcher exits 0 and leaves no process behind.
 */

const BANNER_END = 'Ctrl-C stops everything.';

interface Launch {
  npm: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: () => boolean;
  ports: Record<'api' | 'sandbox' | 'temporal' | 'ui' | 'postgres' | 'workerMetrics' | 'sdkMetrics' | 'codec', number>;
  dataDir: string;
  /** Its process tree once it was up, for the clean-up after a failure. */
  tree: number[];
}

const launches: Launch[] = [];
const databasesToDrop: string[] = [];

afterEach(async () => {
  // A failed test must not leave a stack running: Ctrl-C it, then kill what is left.
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
}, 120_000);

describe('npm start', () => {
  it('runs the stack on a DATABASE_URL (creating its database), serves a payment, and stops cleanly on Ctrl-C to the process group', async () => {
    const dbName = `payorch_start_${randomBytes(4).toString('hex')}`;
    databasesToDrop.push(dbName);
    const databaseUrl = adminUrl().replace(/\/[^/]*$/, `/${dbName}`);
    const launch = await launchStart({ DATABASE_URL: databaseUrl });

    const banner = await waitForBanner(launch);
    expect(banner).toContain(`DATABASE_URL   ${databaseUrl}`);
    expect(banner).not.toContain('embedded PostgreSQL');
    const pids = bannerPids(banner);
    expect(Object.keys(pids).sort()).toEqual(['api', 'codec', 'sandbox', 'temporal', 'worker']);

    const paymentId = await exercise(launch, banner);
    // The payment is in the database DATABASE_URL named, which the launcher created and migrated.
    const sql = createSql(databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
      expect(row?.status).toBe('succeeded');
    } finally {
      await sql.end();
    }

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    for (const pid of Object.values(pids)) expect(tree).toContain(pid);

    // A terminal's Ctrl-C: SIGINT to every process of the foreground group at once.
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox stopped', 'Temporal stopped', 'all stopped']);
    expect(launch.output()).not.toContain('PostgreSQL stopped');
  }, 300_000);

  it('starts an embedded PostgreSQL when DATABASE_URL is not set, serves a payment, and stops cleanly on SIGINT to npm', async () => {
    const launch = await launchStart({});

    const banner = await waitForBanner(launch);
    const databaseUrl = `postgres://postgres:postgres@127.0.0.1:${launch.ports.postgres}/payments`;
    expect(banner).toContain(`DATABASE_URL   ${databaseUrl} (embedded PostgreSQL`);
    const pids = bannerPids(banner);
    expect(Object.keys(pids).sort()).toEqual(['api', 'codec', 'postgres', 'sandbox', 'temporal', 'worker']);
    expect(existsSync(path.join(launch.dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    expect(existsSync(path.join(launch.dataDir, 'temporal.db'))).toBe(true);

    const paymentId = await exercise(launch, banner);
    const sql = createSql(databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
      expect(row?.status).toBe('succeeded');
    } finally {
      await sql.end();
    }

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    for (const pid of Object.values(pids)) expect(tree).toContain(pid);

    // `kill -INT <pid of npm>`: only npm is signalled, and the stop must still reach everything.
    launch.npm.kill('SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox stopped', 'Temporal stopped', 'PostgreSQL stopped', 'all stopped']);
    expect(await portAnswers(launch.ports.postgres)).toBe(false);
  }, 300_000);
});

/** Creates a tenant and a payment through the API the banner names; checks the docs and the Temporal UI. */
async function exercise(launch: Launch, banner: string): Promise<string> {
  const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
  expect(banner).toContain(`API            ${apiUrl}`);
  expect(banner).toContain(`API docs       ${apiUrl}/docs`);
  expect(banner).toContain(`PSP sandbox    http://127.0.0.1:${launch.ports.sandbox}`);
  expect(banner).toContain('Listening on   127.0.0.1 (loopback only');
  expect(banner).toContain('Webhooks       internal targets allowed: loopback only');
  const uiUrl = `http://127.0.0.1:${launch.ports.ui}`;
  expect(banner).toContain(`Temporal UI    ${uiUrl}`);
  // Payloads are encrypted with a development key kept in the data folder; the UI decodes through the codec server.
  const codecUrl = `http://127.0.0.1:${launch.ports.codec}`;
  expect(banner).toMatch(new RegExp(`Codec server   ${codecUrl} \\(Temporal payloads encrypted with key dev-\\d{4}-\\d{2}-\\d{2}, kept in `));
  expect(readFileSync(path.join(launch.dataDir, 'temporal-payload-keys'), 'utf8')).toMatch(/^dev-\d{4}-\d{2}-\d{2}:[A-Za-z0-9+/]{43}=\n$/);
  const uiSettings = (await (await fetch(`${uiUrl}/api/v1/settings`)).json()) as { Codec?: { Endpoint?: string } };
  expect(uiSettings.Codec?.Endpoint).toBe(codecUrl);
  const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)?.[1];
  expect(adminToken).toBeTruthy();
  expect(banner).toContain(`curl -s -X POST ${apiUrl}/admin/tenants -H 'Authorization: Bearer ${adminToken}'`);

  const tenantResponse = await fetch(`${apiUrl}/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'npm start test' }),
  });
  expect(tenantResponse.status).toBe(201);
  const tenant = (await tenantResponse.json()) as { api_key: string };

  const paymentResponse = await fetch(`${apiUrl}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.api_key}`, 'idempotency-key': `start-${randomBytes(8).toString('hex')}`, 'content-type': 'application/json' },
    body: JSON.stringify({ order_id: `ord-${randomBytes(4).toString('hex')}`, amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' }),
  });
  const paymentText = await paymentResponse.text();
  expect(paymentResponse.status, paymentText).toBe(201);
  const payment = JSON.parse(paymentText) as { id: string; status: string };
  expect(payment.status).toBe('succeeded');

  const docs = await fetch(`${apiUrl}/docs`);
  expect(docs.status).toBe(200);
  const ui = await fetch(uiUrl);
  expect(ui.status).toBe(200);
  expect(await ui.text()).toMatch(/<html/i);
  return payment.id;
}

async function launchStart(extraEnv: NodeJS.ProcessEnv): Promise<Launch> {
  // Ports the launcher's children bind seconds later: drawn where no other socket on the
  // machine is handed one by the kernel (EADDRINUSE was seen in CI with freePort()).
  const freePort = freePortOutsideEphemeralRange;
  const ports = {
    api: await freePort(),
    sandbox: await freePort(),
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
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'PROVIDER_URL', 'ADMIN_TOKEN', 'HOST', 'TEMPORAL_UI_URL', 'FORCE_COLOR', 'TEMPORAL_PAYLOAD_KEYS']) delete env[name];
  Object.assign(env, {
    PORT: String(ports.api),
    SANDBOX_PORT: String(ports.sandbox),
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

async function waitForBanner(launch: Launch, timeoutMs = 180_000): Promise<string> {
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

function bannerPids(banner: string): Record<string, number> {
  const line = /pids\s+(.+)/.exec(banner)?.[1] ?? '';
  return Object.fromEntries(line.split(',').map((part) => part.trim().split(' ')).map(([name, pid]) => [name!, Number(pid)]));
}

async function expectCleanExit(launch: Launch, tree: number[]): Promise<void> {
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

function expectStopOrder(output: string, steps: string[]): void {
  const positions = steps.map((step) => output.indexOf(`[start] ${step}`));
  for (const [i, position] of positions.entries()) expect(position, `"${steps[i]}" missing:\n${output.slice(-3000)}`).toBeGreaterThanOrEqual(0);
  expect([...positions].sort((a, b) => a - b)).toEqual(positions);
}

/** Every process below `root` right now, from /proc (children in other sessions included). */
function descendants(root: number): number[] {
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

function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command may contain spaces and parentheses: fields start after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

function parentOf(pid: number): number | null {
  const fields = procStat(pid);
  return fields ? Number(fields[1]) : null;
}

/** Running or sleeping; a zombie has exited. */
function isAlive(pid: number): boolean {
  const fields = procStat(pid);
  return fields !== null && fields[0] !== 'Z' && fields[0] !== 'X';
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '?';
  }
}

async function portAnswers(port: number): Promise<boolean> {
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

function adminUrl(): string {
  return inject('databaseUrl').replace(/\/[^/]*$/, '/postgres');
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
