import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { inject } from 'vitest';
import { serve } from '@hono/node-server';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { createApp } from '../../api/app';
import { CompletionWaiter } from '../../api/completions';
import type { ApiDeps } from '../../api/context';
import { createSql, type Sql } from '../../db/connect';
import { createLogger, type Logger } from '../../lib/logger';
import { createApiMetrics, createWorkerMetrics, type ApiMetrics, type WorkerMetrics } from '../../lib/metrics';
import { installTemporalRuntime } from '../../worker/observability';
import { Reconciler } from '../../worker/reconciler';
import { freePort } from './ports';
import { SandboxProvider } from '../../provider/sandbox-client';
import { startSandbox } from '../../sandbox/server';
import { OutboxRelay, type RelayOptions } from '../../worker/outbox-relay';
import { RetentionJob } from '../../worker/retention';
import { createPaymentWorker } from '../../worker/worker';

/**
 * One logger per test process, also installed as the Temporal runtime's logger (once per
 * process, before anything creates the runtime). Its JSON lines are kept only while a test
 * captures them (captureLogs), so tests can read what API, workflow and activity really log.
 */
const capturedLines: string[] = [];
let capturing = false;
const testLogger = createLogger({
  name: 'test',
  level: 'debug',
  destination: { write: (line: string) => void (capturing && capturedLines.push(line)) },
});
let runtimeInstalled = false;
async function installRuntime() {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  installTemporalRuntime(testLogger, `127.0.0.1:${await freePort()}`);
}

/** Starts keeping log lines; `lines()` returns them parsed. */
export function captureLogs() {
  capturedLines.length = 0;
  capturing = true;
  return {
    lines: () => capturedLines.map((line) => JSON.parse(line) as Record<string, unknown>),
    text: () => capturedLines.join(''),
    stop: () => void (capturing = false),
  };
}

export interface StackOptions {
  api?: Partial<ApiDeps['config']>;
  sandbox?: { slowMs?: number; flakyFailures?: number };
  providerTimeoutMs?: number;
  relay?: Partial<RelayOptions>;
  /** Start no in-process worker (a test that runs workers as child processes). */
  worker?: boolean;
  /** Use these instead of the run's shared database / Temporal server. */
  databaseUrl?: string;
  /** The sandbox's own database (default: the same as databaseUrl). */
  sandboxDatabaseUrl?: string;
  temporalAddress?: string;
  taskQueue?: string;
}

export interface Tenant {
  id: string;
  apiKey: string;
  webhookSecret: string;
}

export interface TestStack {
  apiUrl: string;
  sandboxUrl: string;
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  databaseUrl: string;
  temporalAddress: string;
  logger: Logger;
  apiMetrics: ApiMetrics;
  workerMetrics: WorkerMetrics;
  reconciler: Reconciler;
  /** The API's config, to build a second API process on the same database (see isolatedApi). */
  apiConfig: ApiDeps['config'];
  relay: OutboxRelay;
  retention: RetentionJob;
  worker: Worker | null;
  adminToken: string;
  createTenant(name?: string): Promise<Tenant>;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/**
 * The whole product on the real Temporal dev server and real PostgreSQL: the provider
 * sandbox, a worker on its own task queue, the outbox relay, and the API over real HTTP.
 */
export async function startStack(options: StackOptions = {}): Promise<TestStack> {
  await installRuntime();
  const databaseUrl = options.databaseUrl ?? inject('databaseUrl');
  const temporalAddress = options.temporalAddress ?? inject('temporalAddress');
  const taskQueue = options.taskQueue ?? `test-${randomBytes(4).toString('hex')}`;
  const logger = testLogger;
  const sql = createSql(databaseUrl, { max: 20, connectTimeoutSeconds: 2 });

  const sandbox = await startSandbox({ databaseUrl: options.sandboxDatabaseUrl ?? databaseUrl, port: 0, slowMs: options.sandbox?.slowMs ?? 1500, flakyFailures: options.sandbox?.flakyFailures });
  const provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: options.providerTimeoutMs ?? 1500 });

  const workerMetrics = createWorkerMetrics();
  let worker: Worker | null = null;
  let workerRun: Promise<void> | null = null;
  let workerConnection: NativeConnection | null = null;
  if (options.worker !== false) {
    workerConnection = await NativeConnection.connect({ address: temporalAddress });
    worker = await createPaymentWorker({
      connection: workerConnection,
      namespace: 'default',
      taskQueue,
      deps: { sql, provider, metrics: workerMetrics },
      workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') },
    });
    workerRun = worker.run();
  }

  const relay = new OutboxRelay(sql, logger, {
    retryBaseMs: 100,
    retryMaxMs: 2000,
    maxAttempts: 8,
    timeoutMs: 2000,
    batchSize: 50,
    pollMs: 200,
    ...options.relay,
  }, workerMetrics);
  await relay.start();
  const retention = new RetentionJob(sql, logger, 60_000);

  const connection = await Connection.connect({ address: temporalAddress });
  const temporal = new Client({ connection, namespace: 'default' });
  const completions = new CompletionWaiter(sql, logger);
  await completions.start();
  const config: ApiDeps['config'] = {
    ADMIN_TOKEN,
    TASK_QUEUE: taskQueue,
    IDEMPOTENCY_RETENTION_SECONDS: 72 * 3600,
    IDEMPOTENCY_WAIT_MS: 10_000,
    TEMPORAL_RPC_TIMEOUT_MS: 3000,
    AUTHORIZATION_WINDOW_SECONDS: 3600,
    ...options.api,
  };
  const apiMetrics = createApiMetrics();
  const app = createApp({ sql, temporal, completions, config, logger, metrics: apiMetrics });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const stopWorker = async () => {
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await workerRun;
    await workerConnection?.close();
    worker = null;
  };

  return {
    apiUrl,
    sandboxUrl: sandbox.url,
    sql,
    temporal,
    taskQueue,
    databaseUrl,
    temporalAddress,
    logger,
    apiMetrics,
    workerMetrics,
    reconciler: new Reconciler({ sql, provider, metrics: workerMetrics, logger }, 60_000),
    apiConfig: config,
    relay,
    retention,
    get worker() {
      return worker;
    },
    adminToken: ADMIN_TOKEN,
    async createTenant(name = 'test tenant') {
      const response = await fetch(`${apiUrl}/admin/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      if (response.status !== 201) throw new Error(`tenant creation failed: ${response.status} ${await response.text()}`);
      const body = (await response.json()) as { id: string; api_key: string; webhook_secret: string };
      return { id: body.id, apiKey: body.api_key, webhookSecret: body.webhook_secret };
    },
    stopWorker,
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await completions.stop();
      await relay.stop();
      await stopWorker();
      await connection.close();
      await sandbox.close();
      await sql.end({ timeout: 5 });
    },
  };
}

/** A small client for the API under test. */
export function apiClient(apiUrl: string, apiKey: string) {
  const request = async (method: string, path: string, options: { body?: unknown; rawBody?: string; key?: string; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, ...options.headers };
    if (options.key) headers['idempotency-key'] = options.key;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${apiUrl}${path}`, { method, headers, body });
    const text = await response.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.status, headers: response.headers, text, json };
  };
  return {
    request,
    get: (path: string) => request('GET', path),
    post: (path: string, body: unknown, key: string, headers?: Record<string, string>) => request('POST', path, { body, key, headers }),
  };
}

export function uniqueKey(label = 'key'): string {
  return `${label}-${randomBytes(8).toString('hex')}`;
}

/** Polls until `check` returns a value, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A second API process on the stack's database, with its own Temporal client (e.g. one whose
 * server is unreachable), served over real HTTP.
 */
export async function isolatedApi(stack: TestStack, temporal: Client, config: Partial<ApiDeps['config']> = {}) {
  const completions = new CompletionWaiter(stack.sql, stack.logger);
  const app = createApp({ sql: stack.sql, temporal, completions, logger: stack.logger, metrics: createApiMetrics(), config: { ...stack.apiConfig, ...config } });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await completions.stop();
    },
  };
}
