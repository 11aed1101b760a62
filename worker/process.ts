import { Client } from '@temporalio/client';
import { NativeConnection, type Worker, type WorkerOptions } from '@temporalio/worker';
import { createSql, type Sql } from '../db/connect';
import { loadConfig, type Config } from '../lib/config';
import { createLogger, type Logger } from '../lib/logger';
import { createProviderRegistry } from '../provider/registry';
import { OutboxRelay } from './outbox-relay';
import { showSharedHealth } from './provider-health';
import { webhookTargetPolicy } from '../lib/webhook-target';
import { ensureSchedules, scheduleSettings } from './schedules';
import { installTemporalRuntime, serveWorkerMetrics } from './observability';
import { createWorkerMetrics, type WorkerMetrics } from '../lib/metrics';
import { listenerLimits } from '../lib/listener';
import { createActivities } from '../activities';
import { challengeReturnUrl } from '../shared/payments';
import { paymentDataConverter } from '../lib/data-converter';
import { createPaymentWorker, workerWorkflowBundle } from './worker';
import { describeVersion, makeCurrentIfNone, workerBuildId, type WorkerVersion } from './versioning';
import { describeTemporalConnection, temporalConnectionSettings, type TemporalConnectionSettings } from '../lib/temporal-connection';
import { TemporalConnection } from '../lib/temporal';
import { startTracing, stopTracing, tracingClientInterceptors } from '../lib/tracing';

/** What a process may add to the product worker (the benchmark registers its floor workflow beside the product's). */
export interface WorkerProcessExtras {
  /** Bundle entry that re-exports workflows/index.ts plus more workflows. */
  workflowsPath?: string;
  /** Activities registered beside the product's. */
  activities?: Record<string, (...args: never[]) => Promise<unknown>>;
}

/**
 * The worker's production settings from the environment (documented in docs/operating.md and docs/scaling.md):
 * - shutdownGraceTime: on SIGTERM the worker stops polling and lets running activities
 *   finish for this long before cancelling them (a charge in flight completes rather than
 *   being retried by another worker after its timeout).
 * - the sticky cache and slot counts, left to the SDK's defaults unless set.
 */
export function workerTuning(config: Pick<Config, 'WORKER_SHUTDOWN_GRACE_SECONDS' | 'WORKER_MAX_CACHED_WORKFLOWS' | 'WORKER_MAX_CONCURRENT_ACTIVITIES' | 'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS'>): Partial<WorkerOptions> {
  return {
    shutdownGraceTime: `${config.WORKER_SHUTDOWN_GRACE_SECONDS}s`,
    ...(config.WORKER_MAX_CACHED_WORKFLOWS !== null ? { maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS } : {}),
    ...(config.WORKER_MAX_CONCURRENT_ACTIVITIES !== null ? { maxConcurrentActivityTaskExecutions: config.WORKER_MAX_CONCURRENT_ACTIVITIES } : {}),
    ...(config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS !== null ? { maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS } : {}),
  };
}

/** A payment worker built from the configuration, with what the process around it needs of it. */
export interface PaymentWorkerParts {
  worker: Worker;
  /** Its Worker Deployment Version (TEMPORAL_WORKER_VERSIONING=on), or undefined: unversioned. */
  version: WorkerVersion | undefined;
  /** Its registry: the PSPs' shared health, outcomes (the worker process serves it on WORKER_METRICS_PORT). */
  metrics: WorkerMetrics;
  /** The configured PSPs' names (the health gauge's labels). */
  providerNames: readonly string[];
}

/**
 * The payment worker as every process that hosts one builds it: the worker process, and the
 * API process with API_EAGER_START=on (api/eager-start.ts). The PSP clients by configured name,
 * the workflow bundle and, from it, the Worker Deployment Version.
 * `connection` is the worker's NativeConnection; `client` the activities' (the jobs' Schedules
 * and looks at runs), with the data converter of every client.
 */
export async function createConfiguredWorker(options: {
  config: Config;
  logger: Logger;
  sql: Sql;
  connection: NativeConnection;
  client: Client;
  extras?: WorkerProcessExtras;
  /** The worker's identity in histories (WorkflowTaskStarted); the SDK's `pid@host` when omitted. */
  identity?: string;
}): Promise<PaymentWorkerParts> {
  const { config, logger, sql, extras = {} } = options;
  const metrics = createWorkerMetrics();
  // The configured PSPs by name (PROVIDERS, or the one PROVIDER): provider/registry.ts.
  const providers = await createProviderRegistry(config);
  // Each PSP's health is shared in PostgreSQL (db/routing.ts): every charge attempt feeds it,
  // every route's decision reads it; /metrics shows it (worker/provider-health.ts).
  const deps = {
    sql,
    providers,
    metrics,
    logger,
    temporal: options.client,
    retentionSeconds: config.IDEMPOTENCY_RETENTION_SECONDS,
    disputeTimes: { reminderSeconds: config.DISPUTE_REMINDER_SECONDS, pollSeconds: config.DISPUTE_POLL_SECONDS },
    // Where a PSP whose challenge comes back to us sends the customer: the API's return route.
    returnRoute: (paymentId: string) => challengeReturnUrl(config.API_PUBLIC_URL, paymentId),
    // Routing's decision and the PSPs' calls across the fleet (activities/routing-decision.ts).
    routingFees: config.PROVIDER_FEES,
    callLimits: config.PROVIDER_RATE_LIMITS,
    // How a payment is charged along its route: each PSP's tries, the payment's charge budget.
    charging: { transientTries: config.PROVIDER_TRANSIENT_TRIES, budgetMs: config.PAYMENT_CHARGE_BUDGET_SECONDS * 1000 },
  };
  // The bundle is loaded (or built) here rather than by the SDK: its hash is the default build id.
  // Webpack's report goes to debug; its warnings and errors stay visible.
  const workflowCode = await workerWorkflowBundle(extras.workflowsPath, {
    log: (_level, message, meta) => logger.debug({ ...meta }, message),
    trace: (message, meta) => logger.trace({ ...meta }, message),
    debug: (message, meta) => logger.debug({ ...meta }, message),
    info: (message, meta) => logger.debug({ ...meta }, message),
    warn: (message, meta) => logger.warn({ ...meta }, message),
    error: (message, meta) => logger.error({ ...meta }, message),
  });
  const version =
    config.TEMPORAL_WORKER_VERSIONING === 'on'
      ? { deploymentName: config.TEMPORAL_DEPLOYMENT_NAME, buildId: config.TEMPORAL_WORKER_BUILD_ID ?? workerBuildId(workflowCode) }
      : undefined;
  const worker = await createPaymentWorker({
    connection: options.connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TASK_QUEUE,
    deps,
    dataConverter: paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS),
    workflowBundle: { code: workflowCode },
    ...(version ? { version } : {}),
    tuning: {
      ...workerTuning(config),
      ...(options.identity ? { identity: options.identity } : {}),
      ...(extras.activities ? { activities: { ...createActivities(deps), ...extras.activities } } : {}),
    },
  });
  return { worker, version, metrics, providerNames: providers.names };
}

/**
 * The worker process: Temporal worker (workflows + activities, the periodic jobs' included)
 * and outbox relay, until SIGINT/SIGTERM. At start it creates or updates the periodic jobs'
 * Temporal Schedules (worker/schedules.ts): no job runs on a timer in this process. worker/main.ts runs it as is; the benchmark's worker
 * (bench/worker.ts) runs this same process with its floor workflow added, so both are
 * measured on one worker.
 */
export async function runWorkerProcess(extras: WorkerProcessExtras = {}): Promise<never> {
  const config = loadConfig();
  // Before every client it traces: the database's, Temporal's, the worker's (docs/tracing.md).
  startTracing('payment-worker');
  const logger = createLogger({ name: 'worker', level: config.LOG_LEVEL });
  installTemporalRuntime(logger, config.TEMPORAL_SDK_METRICS_ADDRESS);
  const sql = createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'payment-worker' });

  const temporal = temporalConnectionSettings(config);
  const connection = await connectNativeWithRetry(temporal, logger);
  // The jobs' client (Schedules, the sweeper's look at runs): the same data converter as the
  // API's, since the Schedules' workflow arguments are payloads the workers decode. Its close
  // at shutdown ends the calls of jobs still retrying against an unreachable Temporal
  // (TemporalConnection).
  const clientConnection = await TemporalConnection.connect(temporal);
  const client = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS), interceptors: tracingClientInterceptors() });
  const { worker, version, metrics, providerNames } = await createConfiguredWorker({ config, logger, sql, connection, client, extras });
  const relay = new OutboxRelay(sql, logger, {
    retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
    retryMaxMs: config.WEBHOOK_RETRY_MAX_MS,
    maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    batchSize: 50,
    pollMs: 1000,
    targetPolicy: webhookTargetPolicy({ allowedCidrs: config.WEBHOOK_ALLOWED_CIDRS, allowHttp: config.WEBHOOK_ALLOW_HTTP }),
  }, metrics);
  const metricsServer = serveWorkerMetrics({
    limits: listenerLimits(config),
    port: config.WORKER_METRICS_PORT,
    host: config.HOST,
    metrics,
    sdkMetricsUrl: `http://${config.TEMPORAL_SDK_METRICS_ADDRESS}/metrics`,
    beforeScrape: async () => {
      await relay.measureBacklog();
      await showSharedHealth(sql, metrics, providerNames);
    },
    logger,
  });
  await relay.start();
  if (config.WORKER_SCHEDULES === 'on') {
    // Every worker does it at start, so a deploy brings the Schedules up to date; a failure
    // leaves them as they were (npm run schedules retries it) and the worker still serves payments.
    await ensureSchedules(client, scheduleSettings(config), logger).catch((err: unknown) => logger.error({ err }, 'periodic job schedules could not be created or updated'));
  }
  const payloadKeys = config.TEMPORAL_PAYLOAD_KEYS?.map((k) => k.id) ?? 'off (payloads in clear)';
  logger.info(
    { taskQueue: config.TASK_QUEUE, temporal: describeTemporalConnection(temporal), payloadKeys, version: version ? describeVersion(version) : 'unversioned' },
    'worker running',
  );

  let stopping = false;
  const shutdown = (signal: string) => {
    // Why: npm start's Ctrl-C reaches us as SIGINT and then SIGTERM; a second
    // worker.shutdown() throws (the worker is no longer running).
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'worker shutting down');
    worker.shutdown();
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));

  const running = worker.run();
  if (version) {
    // A fresh deployment's first version is made current once the server saw this worker poll
    // (worker/versioning.ts); otherwise routing is the deploy's to change, never a worker's.
    void makeCurrentIfNone(clientConnection, config.TEMPORAL_NAMESPACE, version, logger, { identity: `${process.pid}@worker` }).catch((err: unknown) =>
      logger.error({ err, version: describeVersion(version) }, 'could not find out whether this worker version should be made current'),
    );
  }
  await running;
  await relay.stop();
  metricsServer.close();
  await clientConnection.close();
  await connection.close();
  await sql.end({ timeout: 5 });
  await stopTracing();
  process.exit(0);
}

/** A worker may start before Temporal is up (docker-compose, npm start): wait for it (a minute at most). */
async function connectNativeWithRetry(settings: TemporalConnectionSettings, logger: Logger): Promise<NativeConnection> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await NativeConnection.connect(settings);
    } catch (error) {
      if (attempt >= 60) throw error;
      logger.warn({ attempt, address: settings.address, error: (error as Error).message }, 'Temporal not reachable yet; retrying');
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
