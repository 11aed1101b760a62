/**
 * The benchmark's stack, in production's shape: a Temporal of its own (the dev server, or
 * with temporalMode 'cluster' a two-node cluster of the production server on PostgreSQL), a fresh
 * database on the local PostgreSQL, two provider sandboxes (`sandbox-a`, the default, and
 * `sandbox-b`, each with a database of its own, as `npm start` runs them; PROVIDERS names
 * both), the worker and the API as separate processes, each on free ports, compiled into
 * dist/ and run with plain node as production runs them (Dockerfile). Everything started here is stopped and
 * the databases dropped by `stop()`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { createSql, type Sql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { freePort, httpStatus } from '../devstack/ports';
import { watchExit } from '../devstack/process-exit';
import { projectRoot, startTemporalDevServer } from '../devstack/temporal-cli';
import { startTemporalCluster } from '../devstack/temporal-cluster';
import { tsxLoader } from '../devstack/children';
import { paymentDataConverter } from '../lib/data-converter';
import { generatePayloadKey, parsePayloadKeys } from '../lib/payload-codec';

const exitWithParent = path.join(projectRoot, 'devstack', 'exit-with-parent.mjs');

export interface BenchStackOptions {
  /** postgres://…/postgres of the server the bench database is created on. */
  adminUrl: string;
  /** 'file': SQLite file with WAL + synchronous=NORMAL, as `npm start` runs it; 'memory': in-memory. */
  temporalStore: 'file' | 'memory';
  /** 'dev': the dev server (temporalStore applies); 'cluster': devstack/temporal-cluster.ts, in databases of its own. */
  temporalMode: 'dev' | 'cluster';
  /** Temporal payloads encrypted by the codec (lib/payload-codec.ts, a key made for the run), as in production; false: in clear. */
  payloadEncryption: boolean;
  /** The API's PAYMENT_ANSWER. */
  paymentAnswer: 'notify' | 'update';
  /** The API's API_EAGER_START: a payment worker in the API's process, runs started eagerly. */
  eagerStart?: boolean;
  /** Dynamic config of the dev server (`--dynamic-config-value`) or of the cluster (its file). */
  dynamicConfig?: Record<string, unknown>;
  /** Children to run with `--cpu-prof` (their .cpuprofile files, one per thread, land in `workDir`/<name>-profile). */
  profile?: string[];
  /** Keep the children's logs (in `workDir`) after stop. */
  keepLogs?: boolean;
  log: (line: string) => void;
}

export interface BenchChild {
  name: string;
  pid: number;
  logFile: string;
  process: ChildProcess;
}

/** One provider sandbox (a PSP of PROVIDERS) and the database that holds its charges (schema sandbox). */
export interface BenchSandbox {
  /** Its name in PROVIDERS: sandbox-a (the default: tenants without routing charge there) or sandbox-b. */
  name: string;
  url: string;
  /** The bench's own client on the sandbox's database (counting its charges). */
  sql: Sql;
  databaseName: string;
}

/**
 * One API + worker pair on a database of its own, on the shared Temporal server (its own
 * task queue) and the shared provider sandboxes. The stack starts with one lane, `base`; the
 * history-size phase adds a second, `grown`, whose tables it fills, so both sizes can be
 * measured side by side (interleaved) rather than one after the other.
 */
export interface BenchLane {
  name: string;
  apiUrl: string;
  /** The worker's /metrics (its own and the Temporal SDK's: slots, poll and task latencies). */
  workerMetricsUrl: string;
  taskQueue: string;
  databaseName: string;
  databaseUrl: string;
  /** The bench's own PostgreSQL client on the lane's database (seeding, counting effects). */
  sql: Sql;
  /** The lane's API and worker processes. */
  api: BenchChild;
  worker: BenchChild;
}

export interface BenchStack extends BenchLane {
  /** The default PSP's URL (sandbox-a): where a tenant without routing charges. */
  sandboxUrl: string;
  /** Both PSPs, the default first. */
  sandboxes: BenchSandbox[];
  /** Kills a sandbox's process (SIGKILL: connections refused from then on), an expected exit. */
  killSandbox(name: string): Promise<void>;
  /** Starts a killed sandbox again on its port and database; resolves once it answers /healthz. */
  restartSandbox(name: string): Promise<void>;
  temporalAddress: string;
  adminToken: string;
  /** The bench's own Temporal client (drives the floor workflow). */
  temporal: Client;
  /** Temporal's server processes (one, or one per cluster node), for the CPU tables. */
  temporalPids: () => number[];
  /** The cluster's own PostgreSQL databases (none for the dev server), whose backends count as PostgreSQL's CPU. */
  temporalDatabases: string[];
  /** What Temporal ran on, for the report. */
  temporalDescription: string;
  /** The server binary, for its version. */
  temporalBinary: string;
  /** Every child process running (the sandboxes and each lane's API and worker; a restarted sandbox replaces its entry). */
  children: BenchChild[];
  workDir: string;
  /**
   * Starts another lane (fresh database, API, worker), on the stack's Temporal or the one at
   * `temporalAddress`, its processes with `env` added (the tracing phase's OTEL_* variables), and
   * waits until it answers.
   */
  addLane(name: string, temporalAddress?: string, env?: NodeJS.ProcessEnv): Promise<BenchLane>;
  /** Runs `close` at stop(), before whatever was set up until now (a lane's own Temporal server). */
  defer(close: () => Promise<unknown>): void;
  stop(): Promise<void>;
}

/** The processes the bench starts, compiled (scripts/build.ts with the bench's worker added). */
const benchEntries = ['bench/worker.ts', 'bench/api.ts', 'bench/workflows.ts'];
let built = false;

/**
 * Compiles the product and the bench's worker into dist/ once per bench process: the API, the
 * worker and the sandboxes run as production runs them, plain node on compiled JavaScript (no
 * tsx loader, whose CPU production never spends).
 */
function buildOnce(log: (line: string) => void): void {
  if (built) return;
  const started = Date.now();
  const result = spawnSync(process.execPath, ['--import', tsxLoader, path.join(projectRoot, 'scripts', 'build.ts'), ...benchEntries], { cwd: projectRoot, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`scripts/build.ts failed:\n${result.stdout}\n${result.stderr}`);
  built = true;
  log(`compiled the product, the bench worker and API into dist/ in ${Date.now() - started} ms`);
}

/** 'api/main.ts' → the compiled dist/api/main.js. */
function compiledEntry(entry: string): string {
  return path.join(projectRoot, 'dist', entry.replace(/\.ts$/, '.js'));
}

export async function startBenchStack(options: BenchStackOptions): Promise<BenchStack> {
  buildOnce(options.log);
  const workDir = mkdtempSync(path.join(tmpdir(), 'payorch-bench-'));
  const closers: (() => Promise<unknown>)[] = [async () => (options.keepLogs ? undefined : rmSync(workDir, { recursive: true, force: true }))];
  let stopping = false;
  const stop = async () => {
    stopping = true;
    for (let close = closers.pop(); close; close = closers.pop()) await close().catch((error: unknown) => options.log(`cleanup: ${String(error)}`));
  };
  try {
    const admin = createSql(options.adminUrl, { max: 1, applicationName: 'payment-bench-admin' });
    closers.push(() => admin.end({ timeout: 5 }));
    /** A fresh database, dropped at the end; migrated for a lane (a sandbox migrates its own schema). */
    const createDatabase = async (lane: string, appSchema = true) => {
      const databaseName = `payorch_bench_${randomBytes(4).toString('hex')}`;
      await ensureDatabase(admin, databaseName);
      closers.push(() => admin.unsafe(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`));
      const databaseUrl = options.adminUrl.replace(/\/[^/]*$/, `/${databaseName}`);
      const sql = createSql(databaseUrl, { max: appSchema ? 4 : 1, applicationName: 'payment-bench' });
      closers.push(() => sql.end({ timeout: 5 }));
      if (appSchema) await migrate(sql);
      options.log(`database ${databaseName} (${lane}) created${appSchema ? ' and migrated' : ''}`);
      return { databaseName, databaseUrl, sql };
    };
    const base = await createDatabase('lane base');
    // Two PSPs are two companies, neither of them us: each sandbox keeps its charges in a
    // database of its own, so the product's database holds (and its pages count) only our work.
    const sandboxADatabase = await createDatabase('sandbox-a', false);
    const sandboxBDatabase = await createDatabase('sandbox-b', false);

    const startTemporal = async () => {
      if (options.temporalMode === 'cluster') {
        const prefix = `payorch_bench_${randomBytes(4).toString('hex')}`;
        for (const name of [`${prefix}_temporal`, `${prefix}_visibility`]) closers.push(() => admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
        const cluster = await startTemporalCluster({
          postgresUrl: options.adminUrl,
          databaseName: `${prefix}_temporal`,
          visibilityDatabaseName: `${prefix}_visibility`,
          dataDir: workDir,
          ...(options.dynamicConfig ? { dynamicConfig: options.dynamicConfig } : {}),
        });
        closers.push(() => cluster.stop());
        options.log(`Temporal cluster: ${cluster.nodes.map((node) => `${node.name} ${node.address}`).join(', ')} (PostgreSQL ${prefix}_*)`);
        return {
          address: cluster.address,
          pids: () => cluster.nodes.map((node) => node.pid),
          databases: [cluster.databaseName, cluster.visibilityDatabaseName],
          description: `Temporal cluster of ${cluster.nodes.length} production server processes (devstack/temporal-cluster.ts) on PostgreSQL, ${cluster.shards} history shards, persistence pool ${cluster.sqlMaxConns}/${cluster.sqlMaxIdleConns} (open/idle) per node`,
          binary: cluster.nodes[0]!.process.spawnfile,
        };
      }
      const devServer = await startTemporalDevServer({
        port: await freePort(),
        headless: true,
        ...(options.dynamicConfig ? { dynamicConfig: options.dynamicConfig } : {}),
        logFile: path.join(workDir, 'temporal.log'),
        ...(options.temporalStore === 'file' ? { dbFilename: path.join(workDir, 'temporal.db') } : {}),
      });
      closers.push(() => devServer.stop());
      options.log(`Temporal dev server on ${devServer.address} (${options.temporalStore === 'file' ? 'SQLite file, WAL, synchronous=NORMAL' : 'in-memory SQLite'})`);
      return {
        address: devServer.address,
        pids: () => [devServer.process.pid!],
        databases: [],
        description: `Temporal dev server, ${options.temporalStore === 'file' ? 'SQLite file with WAL + synchronous=NORMAL, as `npm start` runs it' : 'in-memory SQLite'}`,
        binary: devServer.process.spawnfile,
      };
    };
    const temporalServer = await startTemporal();

    const adminToken = `bench-admin-${randomBytes(12).toString('hex')}`;
    const payloadKeys = options.payloadEncryption ? generatePayloadKey('bench') : null;
    // Each sandbox serves every lane from its own database.
    const sandboxes: (BenchSandbox & { port: number; databaseUrl: string })[] = [];
    for (const [name, database] of [['sandbox-a', sandboxADatabase], ['sandbox-b', sandboxBDatabase]] as const) {
      const port = await freePort();
      sandboxes.push({ name, port, url: `http://127.0.0.1:${port}`, sql: database.sql, databaseName: database.databaseName, databaseUrl: database.databaseUrl });
    }
    const sandboxUrl = sandboxes[0]!.url;
    const common: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // Production mode: JSON logs at info, the admin token required (given).
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      TEMPORAL_ADDRESS: temporalServer.address,
      // The first is the default: a tenant without routing charges at sandbox-a only.
      PROVIDERS: sandboxes.map((sandbox) => `${sandbox.name}=sandbox:${sandbox.url}`).join(','),
      ADMIN_TOKEN: adminToken,
      ...(payloadKeys ? { TEMPORAL_PAYLOAD_KEYS: payloadKeys } : { TEMPORAL_PAYLOAD_ENCRYPTION: 'off' }),
      // The benchmark measures the service, not its per-tenant rate limits (one tenant, storms).
      RATE_LIMIT_READ_PER_SECOND: '1000000',
      RATE_LIMIT_WRITE_PER_SECOND: '1000000',
      PAYMENT_ANSWER: options.paymentAnswer,
      API_EAGER_START: options.eagerStart ? 'on' : 'off',
    };
    const children: BenchChild[] = [];
    /** Children the bench itself killed (a sandbox's outage): their exit is no crash. */
    const killed = new Set<ChildProcess>();
    let crashed: string | undefined;
    const spawnChild = (name: string, entry: string, baseEnv: NodeJS.ProcessEnv) => {
      const logFile = path.join(workDir, `${name}.log`);
      const out = openSync(logFile, 'a');
      // Logs go to a file, as a production process's stdout goes to its collector: the
      // bench process does not spend the measured CPU on relaying them.
      const profile = options.profile?.includes(name) ? ['--cpu-prof', `--cpu-prof-dir=${path.join(workDir, `${name}-profile`)}`] : [];
      const child = spawn(process.execPath, [...profile, '--import', exitWithParent, compiledEntry(entry)], {
        cwd: projectRoot,
        env: baseEnv,
        stdio: ['ignore', out, out],
      });
      closeSync(out);
      const { exited, hasExited } = watchExit(child);
      const handle: BenchChild = { name, pid: child.pid!, logFile, process: child };
      children.push(handle);
      closers.push(async () => {
        if (hasExited()) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      });
      void exited.then((info) => {
        if (stopping || killed.has(child)) return;
        crashed ??= `${name} exited unexpectedly (${JSON.stringify(info)}); last lines:\n${tail(logFile)}`;
        options.log(crashed);
      });
      return handle;
    };
    const waitFor = async (what: string, check: () => Promise<boolean>) => {
      const deadline = Date.now() + 180_000;
      for (;;) {
        if (crashed) throw new Error(crashed);
        if (await check().catch(() => false)) return;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };

    const startSandbox = (sandbox: (typeof sandboxes)[number]) =>
      spawnChild(sandbox.name, 'sandbox/main.ts', { ...common, DATABASE_URL: sandbox.databaseUrl, SANDBOX_PORT: String(sandbox.port), SANDBOX_HOST: '127.0.0.1' });
    const sandboxesUp = () => Promise.all(sandboxes.map((sandbox) => waitFor(sandbox.name, async () => (await httpStatus(`${sandbox.url}/healthz`)) === 200)));
    for (const sandbox of sandboxes) startSandbox(sandbox);
    const sandboxNamed = (name: string) => {
      const sandbox = sandboxes.find((s) => s.name === name);
      if (!sandbox) throw new Error(`no sandbox named ${name}`);
      return { sandbox, index: children.findIndex((child) => child.name === name) };
    };
    const connection = await Connection.connect({ address: temporalServer.address });
    closers.push(() => connection.close());
    const temporal = new Client({ connection, dataConverter: paymentDataConverter(payloadKeys ? parsePayloadKeys(payloadKeys) : null) });

    /** Worker and API of one lane (the base lane's are named plainly: worker, api). */
    const startLane = async (name: string, database: Awaited<ReturnType<typeof createDatabase>>, temporalAddress = temporalServer.address, env: NodeJS.ProcessEnv = {}): Promise<BenchLane> => {
      const suffix = name === 'base' ? '' : `-${name}`;
      const [apiPort, metricsPort, sdkMetricsPort] = await Promise.all([freePort(), freePort(), freePort()]);
      const taskQueue = `bench-${name}-${randomBytes(3).toString('hex')}`;
      const laneEnv = { ...common, ...env, TEMPORAL_ADDRESS: temporalAddress, DATABASE_URL: database.databaseUrl, TASK_QUEUE: taskQueue };
      const laneConnection = temporalAddress === temporalServer.address ? connection : await Connection.connect({ address: temporalAddress });
      if (laneConnection !== connection) closers.push(() => laneConnection.close());
      const worker = spawnChild(`worker${suffix}`, 'bench/worker.ts', {
        ...laneEnv,
        WORKER_METRICS_PORT: String(metricsPort),
        TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${sdkMetricsPort}`,
      });
      const api = spawnChild(`api${suffix}`, 'bench/api.ts', { ...laneEnv, PORT: String(apiPort), HOST: '127.0.0.1' });
      const apiUrl = `http://127.0.0.1:${apiPort}`;
      await Promise.all([
        sandboxesUp(),
        waitFor(`the API (${name})`, async () => (await httpStatus(`${apiUrl}/readyz`)) === 200),
        waitFor(`the worker (${name}) to poll`, async () => {
          const response = await laneConnection.workflowService.describeTaskQueue({
            namespace: 'default',
            taskQueue: { name: taskQueue, kind: 1 },
            taskQueueType: 1,
          });
          return (response.pollers ?? []).some((poller) => poller.identity?.startsWith(`${worker.pid}@`));
        }),
      ]);
      options.log(`lane ${name}: worker (pid ${worker.pid}) and API (pid ${api.pid}) up; logs in ${workDir}`);
      return { name, apiUrl, workerMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, taskQueue, ...database, api, worker };
    };

    const baseLane = await startLane('base', base);
    return {
      ...baseLane,
      sandboxUrl,
      sandboxes: sandboxes.map(({ name, url, sql, databaseName }) => ({ name, url, sql, databaseName })),
      killSandbox: async (name) => {
        const child = children[sandboxNamed(name).index]!;
        killed.add(child.process);
        const { exited, hasExited } = watchExit(child.process);
        if (!hasExited()) child.process.kill('SIGKILL');
        await exited;
      },
      restartSandbox: async (name) => {
        const { sandbox, index } = sandboxNamed(name);
        if (!killed.has(children[index]!.process)) throw new Error(`${name} is running`);
        children.splice(index, 1);
        startSandbox(sandbox);
        await sandboxesUp();
      },
      temporalAddress: temporalServer.address,
      adminToken,
      temporal,
      temporalPids: temporalServer.pids,
      temporalDatabases: temporalServer.databases,
      temporalDescription: temporalServer.description,
      temporalBinary: temporalServer.binary,
      children,
      workDir,
      addLane: async (name, temporalAddress, env) => startLane(name, await createDatabase(name), temporalAddress, env),
      defer: (close) => closers.push(close),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
