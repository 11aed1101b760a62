/**
 * TEMPORAL_MODE=cluster: the production Temporal server (1.29.1, the one inside the dev
 * server's CLI) on PostgreSQL, as a cluster of several processes on this machine. Each
 * node runs all four services (frontend, history, matching, worker) from the same config
 * template as docker-compose.yml (deploy/temporal/config/cluster.yaml); the nodes find
 * each other through the persistence database's membership table (ringpop on loopback)
 * and share the history shards between them. Used by `npm start`, the cluster tests and
 * the benchmark. The binaries are built on first use (scripts/install-temporal-cluster.sh).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection, isGrpcServiceError } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { createSql } from '../db/connect';
import { ensureDatabase } from '../db/migrate';
import { freePort } from './ports';
import { watchExit, type ExitInfo } from './process-exit';
import { guardUi } from '../lib/ui-guard';
import { namespaceServed, projectRoot, searchAttributeFlags, tunedDynamicConfig, versioningDynamicConfig } from './temporal-cli';

const toolsBin = path.join(projectRoot, '.tools', 'bin');
export const clusterBinaries = {
  server: path.join(toolsBin, 'temporal-server'),
  sqlTool: path.join(toolsBin, 'temporal-sql-tool'),
  uiServer: path.join(toolsBin, 'temporal-ui-server'),
  schema: path.join(projectRoot, '.tools', 'temporal-schema'),
};

/** Builds the server, schema tool and UI server into .tools/ once (a few minutes the first time). */
export function ensureClusterBinaries(): void {
  const script = path.join(projectRoot, 'scripts', 'install-temporal-cluster.sh');
  const result = spawnSync('bash', [script], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) throw new Error(`building the Temporal server failed (${script})`);
}

/** Where the cluster's frontend serves TLS (mTLS when clientCaFile is given). */
export interface ClusterTls {
  certFile: string;
  keyFile: string;
  /** Clients must present a certificate signed by this CA. */
  clientCaFile?: string;
  /** The certificate and key the server's own system worker connects to the frontend with. */
  systemWorkerCertFile?: string;
  systemWorkerKeyFile?: string;
  /** The CA that signed certFile, and the name certFile is valid for. */
  serverCaFile: string;
  serverName: string;
}

export interface ClusterOptions {
  /** The PostgreSQL server the cluster stores into (its databases are created when missing). */
  postgresUrl: string;
  databaseName?: string;
  visibilityDatabaseName?: string;
  /** Temporal server processes (default 2). */
  nodes?: number;
  /** History shards (default TEMPORAL_CLUSTER_SHARDS, else 8); fixed once the database holds a cluster. */
  shards?: number;
  /**
   * Each node's persistence pool: open and idle connections (default TEMPORAL_CLUSTER_SQL_MAX_CONNS
   * and TEMPORAL_CLUSTER_SQL_MAX_IDLE_CONNS, else 10 and 10; idle never above open).
   */
  sqlMaxConns?: number;
  sqlMaxIdleConns?: number;
  /** Node 1's frontend port (the address clients are given); other ports are picked free. */
  frontendPort?: number;
  /** The Web UI's port; no UI when omitted. */
  uiPort?: number;
  /** The codec server the Web UI decodes payloads through (lib/codec-server.ts). */
  uiCodecEndpoint?: string;
  /** The frontend address the Web UI is given (default node 1's; `npm start` gives it the balancer's). */
  uiTemporalAddress?: string;
  /**
   * Whether the Web UI offers terminate, cancel, signal, reset and batch actions. Off unless
   * set (TEMPORAL_UI_WRITE_ACTIONS=true): the UI has no login, and any payment's run could be
   * ended from it (docs/security.md, "The Temporal Web UI").
   */
  uiWriteActions?: boolean;
  namespace?: string;
  /** Folder for the nodes' logs and the rendered dynamic config. */
  dataDir: string;
  /** More dynamic config (over the tuned defaults). */
  dynamicConfig?: Record<string, unknown>;
  tls?: ClusterTls;
  logLevel?: string;
}

export interface ClusterNode {
  name: string;
  /** This node's frontend, host:port. */
  address: string;
  logFile: string;
  readonly process: ChildProcess;
  readonly pid: number;
  /** The current process has exited. */
  hasExited(): boolean;
  exited(): Promise<ExitInfo>;
  /** SIGTERM (then SIGKILL after 20 s), or the signal given; resolves on exit. */
  stop(signal?: NodeJS.Signals): Promise<ExitInfo>;
  /** Starts the node again (after stop) with the same ports; resolves once its frontend answers (and, once the cluster is up, serves the namespace). */
  start(): Promise<void>;
}

export interface TemporalCluster {
  /** Node 1's frontend: what clients connect to. */
  address: string;
  namespace: string;
  nodes: ClusterNode[];
  uiUrl: string | null;
  ui: ChildProcess | null;
  databaseName: string;
  visibilityDatabaseName: string;
  /** History shards and each node's persistence pool (open/idle), as started. */
  shards: number;
  sqlMaxConns: number;
  sqlMaxIdleConns: number;
  stop(): Promise<void>;
}

/** A positive integer from the environment, or `fallback` when unset. */
function envCount(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: expected a positive integer, got ${raw}`);
  return n;
}

/** Ports of one node: each service needs a gRPC port and a ringpop membership port. */
async function nodePorts(frontendPort?: number): Promise<Record<string, string>> {
  const ports: Record<string, string> = { FRONTEND_GRPC_PORT: String(frontendPort ?? (await freePort())) };
  for (const name of ['FRONTEND_HTTP_PORT', 'HISTORY_GRPC_PORT', 'MATCHING_GRPC_PORT', 'WORKER_GRPC_PORT']) ports[name] = String(await freePort());
  for (const name of ['FRONTEND_MEMBERSHIP_PORT', 'HISTORY_MEMBERSHIP_PORT', 'MATCHING_MEMBERSHIP_PORT', 'WORKER_MEMBERSHIP_PORT']) ports[name] = String(await freePort());
  return ports;
}

/** The dynamic config file the nodes read: deploy/temporal/dynamicconfig.yaml plus the tuning. */
function writeDynamicConfig(file: string, extra: Record<string, unknown>): void {
  const base = readFileSync(path.join(projectRoot, 'deploy', 'temporal', 'dynamicconfig.yaml'), 'utf8');
  const tuned = Object.entries(extra)
    .map(([key, value]) => `${key}:\n  - value: ${JSON.stringify(value)}\n`)
    .join('');
  writeFileSync(file, `${base}\n# Added by devstack/temporal-cluster.ts (tunedDynamicConfig and the caller's values).\n${tuned}`);
}

function sqlToolArgs(url: URL, database: string): string[] {
  const args = ['--plugin', 'postgres12', '--ep', url.hostname, '-p', url.port || '5432', '-u', decodeURIComponent(url.username || 'postgres'), '--db', database];
  if (url.password) args.push('--pw', decodeURIComponent(url.password));
  return args;
}

/** Creates (if missing) and upgrades the persistence and visibility schemas with the schema tool. */
export async function setupClusterSchema(postgresUrl: string, databaseName: string, visibilityDatabaseName: string): Promise<void> {
  const url = new URL(postgresUrl);
  const adminUrl = new URL(postgresUrl);
  adminUrl.pathname = '/postgres';
  const admin = createSql(adminUrl.toString(), { max: 1 });
  try {
    await ensureDatabase(admin, databaseName);
    await ensureDatabase(admin, visibilityDatabaseName);
  } finally {
    await admin.end({ timeout: 5 });
  }
  for (const [database, folder] of [
    [databaseName, 'temporal'],
    [visibilityDatabaseName, 'visibility'],
  ] as const) {
    for (const command of [['setup-schema', '-v', '0.0'], ['update-schema', '-d', path.join(clusterBinaries.schema, folder, 'versioned')]]) {
      const result = spawnSync(clusterBinaries.sqlTool, [...sqlToolArgs(url, database), ...command], { encoding: 'utf8' });
      if (result.status !== 0) throw new Error(`temporal-sql-tool ${command[0]} on ${database} failed: ${result.stderr || result.stdout}`);
    }
  }
}

/** Connection options for one of the cluster's frontends (TLS when the cluster has it). */
export function clusterConnectionTls(tls: ClusterTls | undefined, client?: { certFile: string; keyFile: string }) {
  if (!tls) return undefined;
  return {
    serverNameOverride: tls.serverName,
    serverRootCACertificate: readFileSync(tls.serverCaFile),
    ...(client ? { clientCertPair: { crt: readFileSync(client.certFile), key: readFileSync(client.keyFile) } } : {}),
  };
}

export async function startTemporalCluster(options: ClusterOptions): Promise<TemporalCluster> {
  if (!existsSync(clusterBinaries.server) || !existsSync(clusterBinaries.sqlTool) || !existsSync(path.join(clusterBinaries.schema, 'temporal'))) ensureClusterBinaries();
  const namespace = options.namespace ?? 'default';
  const databaseName = options.databaseName ?? 'temporal';
  const visibilityDatabaseName = options.visibilityDatabaseName ?? 'temporal_visibility';
  const nodeCount = options.nodes ?? 2;
  const shards = options.shards ?? envCount('TEMPORAL_CLUSTER_SHARDS', 8);
  const sqlMaxConns = options.sqlMaxConns ?? envCount('TEMPORAL_CLUSTER_SQL_MAX_CONNS', 10);
  const sqlMaxIdleConns = Math.min(sqlMaxConns, options.sqlMaxIdleConns ?? envCount('TEMPORAL_CLUSTER_SQL_MAX_IDLE_CONNS', sqlMaxConns));
  mkdirSync(options.dataDir, { recursive: true });
  await setupClusterSchema(options.postgresUrl, databaseName, visibilityDatabaseName);

  const dynamicConfigFile = path.join(options.dataDir, 'temporal-dynamicconfig.yaml');
  writeDynamicConfig(dynamicConfigFile, { ...tunedDynamicConfig, ...versioningDynamicConfig, ...options.dynamicConfig });
  const pg = new URL(options.postgresUrl);
  const tls = options.tls;
  const common: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: options.logLevel ?? 'warn',
    NUM_HISTORY_SHARDS: String(shards),
    DBNAME: databaseName,
    VISIBILITY_DBNAME: visibilityDatabaseName,
    POSTGRES_SEEDS: pg.hostname,
    DB_PORT: pg.port || '5432',
    POSTGRES_USER: decodeURIComponent(pg.username || 'postgres'),
    POSTGRES_PWD: decodeURIComponent(pg.password),
    // Caps of one pool: 10 persistence + 3 visibility connections by default. A node opens
    // several pools (presumably one per service it runs): under the bench, two nodes held 44
    // persistence and 12 visibility connections (bench/NOTES.md, "The cluster in the same run"), out of the
    // PostgreSQL that the app, the tests' own clusters and stacks share on one machine.
    SQL_MAX_CONNS: String(sqlMaxConns),
    SQL_MAX_IDLE_CONNS: String(sqlMaxIdleConns),
    SQL_VIS_MAX_CONNS: '3',
    SQL_VIS_MAX_IDLE_CONNS: '3',
    DYNAMIC_CONFIG_FILE_PATH: dynamicConfigFile,
    BIND_ON_IP: '127.0.0.1',
    TEMPORAL_BROADCAST_ADDRESS: '127.0.0.1',
    ...(tls
      ? {
          TEMPORAL_TLS_FRONTEND_CERT: tls.certFile,
          TEMPORAL_TLS_FRONTEND_KEY: tls.keyFile,
          TEMPORAL_TLS_REQUIRE_CLIENT_AUTH: tls.clientCaFile ? 'true' : 'false',
          TEMPORAL_TLS_CLIENT_CA: tls.clientCaFile ?? '',
          TEMPORAL_TLS_SYSTEM_WORKER_CERT: tls.systemWorkerCertFile ?? '',
          TEMPORAL_TLS_SYSTEM_WORKER_KEY: tls.systemWorkerKeyFile ?? '',
          TEMPORAL_TLS_SERVER_CA: tls.serverCaFile,
          TEMPORAL_TLS_FRONTEND_SERVER_NAME: tls.serverName,
        }
      : {}),
  };
  const systemWorker = tls?.systemWorkerCertFile && tls.systemWorkerKeyFile ? { certFile: tls.systemWorkerCertFile, keyFile: tls.systemWorkerKeyFile } : undefined;
  const connectTo = (address: string) => Connection.connect({ address, connectTimeout: 2000, tls: clusterConnectionTls(tls, systemWorker) });

  const nodes: ClusterNode[] = [];
  let ui: ChildProcess | null = null;
  const stop = async () => {
    if (ui && ui.exitCode === null && ui.signalCode === null) {
      const exited = new Promise((r) => ui!.once('exit', r));
      ui.kill('SIGTERM');
      await exited;
    }
    await Promise.all(nodes.map((node) => node.stop()));
  };
  try {
    for (let index = 1; index <= nodeCount; index++) {
      const ports = await nodePorts(index === 1 ? options.frontendPort : undefined);
      const node = createNode(`temporal-${index}`, { ...common, ...ports }, path.join(options.dataDir, `temporal-${index}.log`), connectTo);
      nodes.push(node);
    }
    // The first node creates the cluster's metadata; the others join it.
    await nodes[0]!.start();
    await Promise.all(nodes.slice(1).map((node) => node.start()));
    await registerNamespace(nodes, namespace, connectTo);
    // A node started again (after a stop or a crash) is ready once it serves the namespace as well.
    for (const node of nodes) {
      const startProcess = node.start.bind(node);
      node.start = async () => {
        await startProcess();
        await untilNodeServes(node, namespace, connectTo);
      };
    }
    if (options.uiPort) ui = await startUi(options.uiPort, options.uiTemporalAddress ?? nodes[0]!.address, namespace, options.dataDir, options.uiCodecEndpoint, options.uiWriteActions ?? false);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    address: nodes[0]!.address,
    namespace,
    nodes,
    uiUrl: ui ? `http://127.0.0.1:${options.uiPort}` : null,
    ui,
    databaseName,
    visibilityDatabaseName,
    shards,
    sqlMaxConns,
    sqlMaxIdleConns,
    stop,
  };
}

function createNode(name: string, env: NodeJS.ProcessEnv, logFile: string, connectTo: (address: string) => Promise<Connection>): ClusterNode {
  const address = `127.0.0.1:${env.FRONTEND_GRPC_PORT}`;
  let child: ChildProcess | null = null;
  let exit: ReturnType<typeof watchExit> | null = null;
  const node: ClusterNode = {
    name,
    address,
    logFile,
    get process() {
      if (!child) throw new Error(`${name} was never started`);
      return child;
    },
    get pid() {
      return node.process.pid!;
    },
    hasExited: () => !exit || exit.hasExited(),
    exited: () => exit?.exited ?? Promise.resolve({ code: null, signal: null }),
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!child || !exit || exit.hasExited()) return node.exited();
      child.kill(signal);
      const timer = setTimeout(() => child?.kill('SIGKILL'), 20_000);
      const info = await exit.exited;
      clearTimeout(timer);
      return info;
    },
    async start() {
      if (child && exit && !exit.hasExited()) throw new Error(`${name} is running`);
      const out = openSync(logFile, 'a');
      child = spawn(clusterBinaries.server, ['--root', projectRoot, '--config', 'deploy/temporal/config', '--env', 'cluster', '--allow-no-auth', 'start'], {
        env,
        stdio: ['ignore', out, out],
      });
      exit = watchExit(child);
      const deadline = Date.now() + 90_000;
      while (!(await namespaceServed(address, 'temporal-system', connectTo))) {
        if (exit.hasExited()) throw new Error(`${name} exited during start; see ${logFile}`);
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error(`${name} did not answer within 90 s; see ${logFile}`);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    },
  };
  return node;
}

const ALREADY_EXISTS = 6;
const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

/**
 * The real server, unlike the dev server, creates no namespace: registers it (72 h
 * retention) and the custom search attributes, then waits until every node's frontend
 * serves it (each refreshes its namespace cache on its own, every few seconds).
 */
async function registerNamespace(nodes: ClusterNode[], namespace: string, connectTo: (address: string) => Promise<Connection>): Promise<void> {
  const connection = await connectTo(nodes[0]!.address);
  try {
    try {
      await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('72h'), description: 'payment orchestrator' });
    } catch (error) {
      if (!(isGrpcServiceError(error) && error.code === ALREADY_EXISTS)) throw error;
    }
    const searchAttributes = Object.fromEntries(searchAttributeFlags.map((flag) => [flag.split('=')[0]!, KEYWORD]));
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const existing = await connection.operatorService.listSearchAttributes({ namespace });
        const missing = Object.fromEntries(Object.entries(searchAttributes).filter(([name]) => !(name in (existing.customAttributes ?? {}))));
        if (Object.keys(missing).length === 0) break;
        await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
      } catch (error) {
        // NOT_FOUND until the namespace reached this frontend's cache.
        if (Date.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    await connection.close();
  }
  // Each frontend must serve the namespace, and reach history and matching through the ring
  // (right after start, "not enough hosts" until membership is stable): a probe workflow is
  // started and terminated through each node.
  for (const node of nodes) await untilNodeServes(node, namespace, connectTo);
}

/**
 * Until `node`'s frontend serves the namespace and reaches history and matching through the
 * ring (right after a start, "not enough hosts" until membership is stable): a probe workflow
 * is started through it, with the custom search attributes set (each frontend caches their
 * mapping and refuses a start that uses them until its cache has it), and terminated.
 */
async function untilNodeServes(node: ClusterNode, namespace: string, connectTo: (address: string) => Promise<Connection>): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const served = await connectTo(node.address)
      .then(async (c) => {
        try {
          const probe = await new Client({ connection: c, namespace }).workflow.start('clusterProbe', {
            taskQueue: 'cluster-probe',
            workflowId: `cluster-probe-${node.name}-${Date.now()}`,
            searchAttributes: Object.fromEntries(searchAttributeFlags.map((flag) => [flag.split('=')[0]!, ['probe']])),
          });
          await c.workflowService.describeTaskQueue({ namespace, taskQueue: { name: 'cluster-probe', kind: 1 }, taskQueueType: 1 });
          await probe.terminate('cluster start-up probe');
          return true;
        } finally {
          await c.close();
        }
      })
      .catch(() => false);
    if (served) return;
    if (Date.now() > deadline) throw new Error(`${node.name} does not serve namespace ${namespace} after 60 s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The Web UI server (temporalio/ui-server) with a config written for this cluster, on a private
 * loopback port behind the guard of lib/ui-guard.ts on `port`, as the dev server's UI is.
 * The UI server's own read-only rule (`disableWriteActions`, its DisableWriteMiddleware) lets
 * through any POST whose decoded path contains `/workflows/` and `/query/`, while it routes on
 * the path as sent: `…/workflows/{id}/signal-with-start/query%2F` passes the rule and starts a
 * workflow of any type with any input. It checks no Host either. The guard admits only the
 * query route's exact shape.
 */
export async function startUi(port: number, frontend: string, namespace: string, dataDir: string, codecEndpoint: string | undefined, writeActions: boolean): Promise<ChildProcess> {
  if (!existsSync(clusterBinaries.uiServer)) ensureClusterBinaries();
  const root = path.join(dataDir, 'temporal-ui');
  const privatePort = await freePort();
  mkdirSync(path.join(root, 'config'), { recursive: true });
  writeFileSync(
    path.join(root, 'config', 'cluster.yaml'),
    [
      `temporalGrpcAddress: ${frontend}`,
      'host: 127.0.0.1',
      `port: ${privatePort}`,
      'enableUi: true',
      `defaultNamespace: ${namespace}`,
      'cors:',
      '  allowOrigins: []',
      'auth:',
      '  enabled: false',
      `disableWriteActions: ${!writeActions}`,
      `batchActionsDisabled: ${!writeActions}`,
      ...(codecEndpoint ? ['codec:', `  endpoint: ${codecEndpoint}`] : []),
      '',
    ].join('\n'),
  );
  const out = openSync(path.join(dataDir, 'temporal-ui.log'), 'a');
  const child = spawn(clusterBinaries.uiServer, ['--root', root, '--config', 'config', '--env', 'cluster', 'start'], { stdio: ['ignore', out, out] });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answered = await fetch(`http://127.0.0.1:${privatePort}/`, { signal: AbortSignal.timeout(1000) }).then(
      () => true,
      () => false,
    );
    if (answered) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the Temporal UI server did not start; see ${path.join(dataDir, 'temporal-ui.log')}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  try {
    await guardUi(child, { port, hostname: '127.0.0.1', target: { host: '127.0.0.1', port: privatePort }, writeActions });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return child;
}
