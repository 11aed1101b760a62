/**
 * The whole product in one process: the provider sandbox, a worker on its own task queue,
 * the outbox relay, and the API over real HTTP, against a PostgreSQL database and a
 * Temporal server the caller names. The tests (test/helpers/stack.ts), the history recorder
 * and the fault suite use it; `npm start` runs the same parts as separate processes.
 */
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, type Worker, type WorkerOptions } from '@temporalio/worker';
import { createApp } from '../api/app';
import { listenerLimits, serveHttp } from '../lib/listener';
import { CompletionWaiter } from '../api/completions';
import { disputeReceiving } from '../api/routes/provider-webhooks';
import type { ApiDeps } from '../api/context';
import { createSql, type Sql } from '../db/connect';
import { ensureSiblingDatabase } from '../db/migrate';
import { SandboxProvider } from '../provider/sandbox/client';
import { capabilitiesOf, providerRegistry } from '../provider/registry';
import { challengeReturnUrl } from '../shared/payments';
import type { RoutePlanner } from '../activities';
import type { PaymentProvider } from '../provider/types';
import { startSandbox, type RunningSandbox, type StartSandboxOptions } from '../sandbox/server';
import type { WebhookFaults } from '../sandbox/deps';
import type { CallLimit } from '../db/routing';
import { OutboxRelay, type RelayOptions } from '../worker/outbox-relay';
import { Reconciliation } from '../activities/reconciliation';
import { RetentionJob } from '../activities/retention';
import { AbandonedRunSweeper } from '../activities/abandoned-runs';
import { disputeTimesOf, restartDispute } from '../lib/dispute';
import { LOOPBACK_CIDRS, webhookTargetPolicy } from '../lib/webhook-target';
import { createPaymentWorker } from '../worker/worker';
import { createLogger, type Logger } from '../lib/logger';
import { tracingClientInterceptors } from '../lib/tracing';
import type { TemporalConnectionSettings } from '../lib/temporal-connection';
import { TemporalConnection } from '../lib/temporal';
import { createApiMetrics, createWorkerMetrics, type ApiMetrics, type WorkerMetrics } from '../lib/metrics';

export type ApiConfig = ApiDeps['config'];

/** When a sandbox's disputes open, are decided and fall due. */
export type SandboxDisputeTimes = Pick<StartSandboxOptions, 'disputeAfterMs' | 'disputeDecisionMs' | 'disputeEvidenceSeconds'>;

export interface StackOptions {
  databaseUrl: string;
  temporalAddress: string;
  /** TLS / API key for temporalAddress (lib/temporal-connection.ts). */
  temporalConnection?: Omit<TemporalConnectionSettings, 'address'>;
  /** lib/data-converter.ts (with the run's payload keys): used by the stack's worker and client. */
  dataConverter: DataConverter;
  namespace?: string;
  /** A fresh task queue per stack when omitted, so stacks on one server never share work. */
  taskQueue?: string;
  /** The sandbox's own database (default: databaseUrl). */
  sandboxDatabaseUrl?: string;
  sandbox?: {
    slowMs?: number;
    flakyFailures?: number;
    asyncSettleMs?: number;
    /** The sandbox's dispute timers (StartSandboxOptions). */
    disputes?: SandboxDisputeTimes;
    webhookFaults?: Partial<WebhookFaults>;
    /** The secret of the sandbox's webhooks to the stack's API (/provider_webhooks/sandbox); random when omitted. */
    webhookSecret?: string;
  };
  /**
   * A second provider sandbox, `sandbox-b`, as `npm start` runs it: its
   * own process state and its own database (`<sandbox database>_sandbox_b` on the same server,
   * created when missing, unless `databaseUrl` names one). The worker's registry holds both
   * (`sandbox` the default, `sandbox-b`), the API receives both's webhooks
   * (/provider_webhooks/sandbox-b) and the reconciliation covers both; which payments go to
   * which is `route`'s decision.
   */
  /** Multiplies the card network's durations at both sandboxes (tests of recovery: as RECOVERY_TIME_SCALE); default 1. */
  networkTimeScale?: number;
  secondSandbox?: {
    databaseUrl?: string;
    slowMs?: number;
    flakyFailures?: number;
    asyncSettleMs?: number;
    disputes?: SandboxDisputeTimes;
    webhookFaults?: Partial<WebhookFaults>;
    webhookSecret?: string;
  };
  /** The PSP names a tenant's routing may name (the API's providerNames); default: the stack's sandboxes' names. */
  providerNames?: readonly string[];
  /** The provider client's per-call timeout: what turns a lost response into a retry. */
  providerTimeoutMs?: number;
  /**
   * The routing of payments over the stack's providers (`sandbox`, and `sandbox-b` with
   * secondSandbox): how the first charge attempt plans the route (default: activities/routing.ts planRouteFor).
   */
  route?: RoutePlanner;
  /** Each PSP's calls per second across the fleet (PROVIDER_RATE_LIMITS, parsed): the worker's PSP calls take its tokens; none by default. */
  callLimits?: Record<string, CallLimit>;
  /** More PSP clients by name for the worker's registry (e.g. one at an address nobody listens on). */
  extraProviders?: Record<string, PaymentProvider>;
  /** The worker's PROVIDER_TRANSIENT_TRIES and PAYMENT_CHARGE_BUDGET_SECONDS (as ms): ActivityDeps.charging; default 3 tries, 60 s. */
  charging?: { transientTries?: number; budgetMs?: number };
  /** false: no in-process worker (e.g. workers run as child processes). */
  worker?: boolean;
  /** Pre-built workflow bundle; the worker bundles workflows/ itself when omitted. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** More worker options (e.g. shutdownGraceTime, slots). */
  workerTuning?: Partial<WorkerOptions>;
  relay?: Partial<RelayOptions>;
  api?: Partial<ApiConfig>;
  logger?: Logger;
  adminToken?: string;
  /** Connections of the stack's one pool (API, worker, relay and jobs share it; default 20). */
  databasePoolSize?: number;
}

export interface RunningApi {
  url: string;
  close(): Promise<void>;
}

export interface Tenant {
  id: string;
  apiKey: string;
  webhookSecret: string;
}

/** A sandbox PSP of the stack beside the first one (StackOptions.secondSandbox). */
export interface StackSandbox {
  name: string;
  url: string;
  sandbox: RunningSandbox;
  /** A client of it, with the webhook secret (verifyWebhook). */
  provider: SandboxProvider;
  webhookSecret: string;
  /** The database holding its `sandbox` schema. */
  databaseUrl: string;
}

export interface Stack {
  apiUrl: string;
  sandboxUrl: string;
  /** The stack's sandbox (e.g. setWebhook to point its events elsewhere). */
  sandbox: RunningSandbox;
  /** The worker's client of the sandbox, with the webhook secret (verifyWebhook). */
  provider: SandboxProvider;
  sandboxWebhookSecret: string;
  /** `sandbox-b` when StackOptions.secondSandbox was given, else null. */
  secondSandbox: StackSandbox | null;
  sql: Sql;
  temporal: Client;
  taskQueue: string;
  databaseUrl: string;
  temporalAddress: string;
  logger: Logger;
  apiMetrics: ApiMetrics;
  workerMetrics: WorkerMetrics;
  /** The API's config, for other API processes on the same database (startApi). */
  apiConfig: ApiConfig;
  relay: OutboxRelay;
  /**
   * The periodic jobs' passes, for tests to run directly. The stack creates no Schedules (a
   * worker process does at start: worker/schedules.ts); a test that wants them calls ensureSchedules.
   */
  retention: RetentionJob;
  abandonedRuns: AbandonedRunSweeper;
  reconciliation: Reconciliation;
  worker: Worker | null;
  adminToken: string;
  createTenant(name?: string): Promise<Tenant>;
  /** Another API process on the same database, with other settings or another Temporal client. */
  startApi(config?: Partial<ApiConfig>, temporal?: Client): Promise<RunningApi>;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const namespace = options.namespace ?? 'default';
  const taskQueue = options.taskQueue ?? `stack-${randomBytes(4).toString('hex')}`;
  const adminToken = options.adminToken ?? `admin-${randomBytes(12).toString('hex')}`;
  const logger = options.logger ?? createLogger({ name: 'stack', level: process.env.LOG_LEVEL ?? 'silent' });
  const sql = createSql(options.databaseUrl, { max: options.databasePoolSize ?? 20, connectTimeoutSeconds: 2 });
  const closers: (() => Promise<unknown>)[] = [() => sql.end({ timeout: 5 })];
  const stop = async () => {
    for (let close = closers.pop(); close; close = closers.pop()) await close().catch(() => {});
  };

  try {
    const sandbox = await startSandbox({
      databaseUrl: options.sandboxDatabaseUrl ?? options.databaseUrl,
      port: 0,
      slowMs: options.sandbox?.slowMs ?? 1500,
      flakyFailures: options.sandbox?.flakyFailures,
      asyncSettleMs: options.sandbox?.asyncSettleMs,
      ...options.sandbox?.disputes,
      webhookFaults: options.sandbox?.webhookFaults,
      networkTimeScale: options.networkTimeScale,
    });
    closers.push(() => sandbox.close());
    const sandboxWebhookSecret = options.sandbox?.webhookSecret ?? randomBytes(24).toString('hex');
    const provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: options.providerTimeoutMs ?? 1500, webhookSecret: sandboxWebhookSecret });

    let secondSandbox: StackSandbox | null = null;
    if (options.secondSandbox) {
      const second = options.secondSandbox;
      const databaseUrl = second.databaseUrl ?? (await ensureSiblingDatabase(options.sandboxDatabaseUrl ?? options.databaseUrl, 'sandbox_b'));
      const running = await startSandbox({
        databaseUrl,
        port: 0,
        slowMs: second.slowMs ?? 1500,
        flakyFailures: second.flakyFailures,
        asyncSettleMs: second.asyncSettleMs,
        ...second.disputes,
        webhookFaults: second.webhookFaults,
        // One card network: its count of a card's attempts lives in the first sandbox's database.
        networkDatabaseUrl: options.sandboxDatabaseUrl ?? options.databaseUrl,
        networkTimeScale: options.networkTimeScale,
      });
      closers.push(() => running.close());
      const webhookSecret = second.webhookSecret ?? randomBytes(24).toString('hex');
      secondSandbox = {
        name: 'sandbox-b',
        url: running.url,
        sandbox: running,
        provider: new SandboxProvider({ baseUrl: running.url, timeoutMs: options.providerTimeoutMs ?? 1500, webhookSecret }),
        webhookSecret,
        databaseUrl,
      };
    }

    // The worker's PSPs by name: `sandbox` (the default) and, when there, `sandbox-b`.
    const clients: Record<string, SandboxProvider> = { sandbox: provider, ...(secondSandbox ? { [secondSandbox.name]: secondSandbox.provider } : {}) };
    const providers = providerRegistry({ ...clients, ...options.extraProviders });

    // Before the worker: the jobs' activities use this client (the abandoned-run sweep). The
    // product's connection (lib/temporal.ts): stop() closes it with calls still retrying when a
    // test has made Temporal unreachable.
    const connection = await TemporalConnection.connect({ ...options.temporalConnection, address: options.temporalAddress });
    closers.push(() => connection.close());
    const temporal = new Client({ connection, namespace, dataConverter: options.dataConverter, interceptors: tracingClientInterceptors() });
    const retentionSeconds = options.api?.IDEMPOTENCY_RETENTION_SECONDS ?? 72 * 3600;

    // The API's address, once it listens (below): the return route a PSP's challenge comes back to.
    let publicApiUrl = 'http://127.0.0.1:0';
    const workerMetrics = createWorkerMetrics();
    let worker: Worker | null = null;
    let stopWorker = async () => {};
    if (options.worker !== false) {
      const workerConnection = await NativeConnection.connect({ ...options.temporalConnection, address: options.temporalAddress });
      closers.push(() => workerConnection.close());
      const running = await createPaymentWorker({
        connection: workerConnection,
        namespace,
        taskQueue,
        deps: { sql, providers, metrics: workerMetrics, logger, temporal, retentionSeconds, returnRoute: (paymentId: string) => challengeReturnUrl(publicApiUrl, paymentId), ...(options.route ? { route: options.route } : {}), ...(options.callLimits ? { callLimits: options.callLimits } : {}), ...(options.charging ? { charging: options.charging } : {}) },
        dataConverter: options.dataConverter,
        ...(options.workflowBundle ? { workflowBundle: options.workflowBundle } : {}),
        ...(options.workerTuning ? { tuning: options.workerTuning } : {}),
      });
      worker = running;
      const run = running.run();
      stopWorker = async () => {
        if (running.getState() === 'RUNNING') running.shutdown();
        await run;
        worker = null;
      };
      closers.push(() => stopWorker());
    }

    const relay = new OutboxRelay(
      sql,
      logger,
      {
        retryBaseMs: 100,
        retryMaxMs: 2000,
        maxAttempts: 8,
        timeoutMs: 2000,
        batchSize: 50,
        pollMs: 200,
        // Test receivers listen on this machine, over plain http.
        targetPolicy: webhookTargetPolicy({ allowedCidrs: LOOPBACK_CIDRS, allowHttp: true }),
        ...options.relay,
      },
      workerMetrics,
    );
    await relay.start();
    closers.push(() => relay.stop());

    const completions = new CompletionWaiter(sql, logger);
    await completions.start();
    closers.push(() => completions.stop());

    const apiConfig: ApiConfig = {
      ADMIN_TOKEN: adminToken,
      TASK_QUEUE: taskQueue,
      IDEMPOTENCY_RETENTION_SECONDS: retentionSeconds,
      IDEMPOTENCY_WAIT_MS: 10_000,
      TEMPORAL_RPC_TIMEOUT_MS: 3000,
      AUTHORIZATION_WINDOW_SECONDS: 3600,
      WEBHOOK_ALLOWED_CIDRS: LOOPBACK_CIDRS,
      WEBHOOK_ALLOW_HTTP: true,
      // Storms of one tenant's requests are what many tests are about: the rate limits and the
      // failed-authentication limit are tested on their own, with their own settings.
      RATE_LIMIT_READ_PER_SECOND: 1_000_000,
      RATE_LIMIT_WRITE_PER_SECOND: 1_000_000,
      AUTH_FAILURES_PER_MINUTE: 1_000_000,
      // The worker's PSPs as the API reads them (their kinds: which payment methods and saved cards a route can take);
      // a test's client without a kind is left out. Their addresses are the stack's concern (providerWebhooks below).
      PROVIDERS: [
        ...Object.keys(clients).map((name) => ({ name, kind: 'sandbox', settings: { url: name === 'sandbox' ? sandbox.url : secondSandbox!.url, webhookSecret: null } })),
        ...Object.entries<PaymentProvider>(options.extraProviders ?? {}).flatMap(([name, client]) => (client.kind === undefined ? [] : [{ name, kind: client.kind, settings: { url: 'http://127.0.0.1:9', webhookSecret: null } }])),
      ],
      ...options.api,
    };
    const apiMetrics = createApiMetrics();
    // The API verifies the sandbox's webhooks with the worker's client (it holds the shared secret).
    // Every PSP of the worker's registry (extraProviders too: e.g. a kind's client against its PSP's mock) gets its inbound route.
    const providerWebhooks = Object.entries<PaymentProvider>({ ...clients, ...options.extraProviders }).map(([name, client]) => ({
      name,
      verify: (raw: string, headers: Record<string, string | undefined>, now?: Date) => client.verifyWebhook(raw, headers, now),
      notifications: capabilitiesOf(client).notifications,
      challengeReturn: capabilitiesOf(client).challengeReturn,
      ...(client.verifyWebhookBatch ? { verifyBatch: client.verifyWebhookBatch.bind(client) } : {}),
      retrieveCharge: (chargeId: string) => client.retrieveCharge(chargeId),
      ...disputeReceiving(client),
    }));
    const providerNames = options.providerNames ?? Object.keys(clients);
    const startApi = async (overrides: Partial<ApiConfig> = {}, client: Client = temporal): Promise<RunningApi> => {
      // Its own completion listener when it talks to another Temporal (it is another process).
      const waiter = client === temporal ? completions : new CompletionWaiter(sql, logger);
      if (waiter !== completions) await waiter.start();
      const app = createApp({ sql, temporal: client, completions: waiter, config: { ...apiConfig, ...overrides }, logger, metrics: createApiMetrics(), providerWebhooks, providerNames });
      const server = await serveHttp(app.fetch, { port: 0, hostname: '127.0.0.1', limits: listenerLimits({ ...apiConfig, ...overrides }) });
      const close = async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
        if (waiter !== completions) await waiter.stop();
      };
      closers.push(close);
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close };
    };
    const app = createApp({ sql, temporal, completions, config: apiConfig, logger, metrics: apiMetrics, providerWebhooks, providerNames });
    const server = await serveHttp(app.fetch, { port: 0, hostname: '127.0.0.1', limits: listenerLimits(apiConfig) });
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    publicApiUrl = apiUrl;
    // The sandbox's events go to the API's inbound PSP webhook route, signed with the shared secret.
    sandbox.setWebhook({ url: `${apiUrl}/provider_webhooks/sandbox`, secret: sandboxWebhookSecret });
    secondSandbox?.sandbox.setWebhook({ url: `${apiUrl}/provider_webhooks/${secondSandbox.name}`, secret: secondSandbox.webhookSecret });

    return {
      apiUrl,
      sandboxUrl: sandbox.url,
      sandbox,
      provider,
      sandboxWebhookSecret,
      secondSandbox,
      sql,
      temporal,
      taskQueue,
      databaseUrl: options.databaseUrl,
      temporalAddress: options.temporalAddress,
      logger,
      apiMetrics,
      workerMetrics,
      apiConfig,
      relay,
      retention: new RetentionJob(sql, logger),
      abandonedRuns: new AbandonedRunSweeper({
        sql,
        temporal,
        provider,
        providers: clients,
        logger,
        retentionSeconds: apiConfig.IDEMPOTENCY_RETENTION_SECONDS,
        restartDispute: (dispute) => restartDispute(temporal, taskQueue, dispute.provider, dispute.providerDisputeId, disputeTimesOf(apiConfig)),
      }),
      reconciliation: new Reconciliation({ sql, providers: clients, metrics: workerMetrics, logger }),
      get worker() {
        return worker;
      },
      adminToken,
      async createTenant(name = 'tenant') {
        const response = await fetch(`${apiUrl}/admin/tenants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name }),
        });
        if (response.status !== 201) throw new Error(`tenant creation failed: ${response.status} ${await response.text()}`);
        const body = (await response.json()) as { id: string; api_key: string; webhook_secret: string };
        return { id: body.id, apiKey: body.api_key, webhookSecret: body.webhook_secret };
      },
      startApi,
      stopWorker: () => stopWorker(),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** One answer of the API: status, headers, raw text and parsed JSON (null if not JSON). */
export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** A small client for the API, authenticated as one tenant. */
export function apiClient(apiUrl: string, apiKey: string) {
  const request = async (
    method: string,
    path: string,
    options: { body?: unknown; rawBody?: string; key?: string; headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<ApiResponse> => {
    const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, ...options.headers };
    if (options.key) headers['idempotency-key'] = options.key;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${apiUrl}${path}`, { method, headers, body, signal: options.signal });
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
