import cluster from 'node:cluster';
import net, { type AddressInfo } from 'node:net';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createSql } from '../db/connect';
import { assertSafeToListen, loadConfig, type Config } from '../lib/config';
import { createLogger, type Logger } from '../lib/logger';
import { startTracing, stopTracing } from '../lib/tracing';
import { listenerLimits, serveHttp } from '../lib/listener';
import { createApiMetrics } from '../lib/metrics';
import { paymentDataConverter } from '../lib/data-converter';
import { connectTemporal } from '../lib/temporal';
import { temporalConnectionSettings } from '../lib/temporal-connection';
import { createApp } from './app';
import { configuredProviderNames } from '../provider/registry';
import { providerWebhookReceivers } from './routes/provider-webhooks';
import { CompletionWaiter } from './completions';
import { EagerStart } from './eager-start';
import { installTemporalRuntime } from '../worker/observability';
import type { WorkerProcessExtras } from '../worker/process';

/** What a process may add to the API's hosted worker (API_EAGER_START=on): the benchmark's floor workflows. */
export interface ApiProcessExtras {
  worker?: WorkerProcessExtras;
}

/**
 * The API process: parse the environment, build the app from real dependencies, serve it until
 * SIGINT/SIGTERM. api/main.ts runs it as is; the benchmark's API (bench/api.ts) adds the floor's
 * workflows to the worker it hosts with eager start, so that worker and the bench's worker run one bundle.
 */
export async function runApiProcess(extras: ApiProcessExtras = {}): Promise<void> {
  const config = loadConfig();
  assertSafeToListen(config);
  // Before every client it traces: the database's, Temporal's (docs/tracing.md).
  startTracing('payment-api');
  const logger = createLogger({ name: 'api', level: config.LOG_LEVEL });
  const sql = createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'payment-api' });
  const temporal = await connectTemporal(temporalConnectionSettings(config), config.TEMPORAL_NAMESPACE, paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS));
  const completions = new CompletionWaiter(sql, logger);
  await completions.start();
  // API_EAGER_START=on: a payment worker in this process takes each run's first task from the
  // start's answer (api/eager-start.ts). Its SDK runtime logs to this process's logger and exports
  // no metrics port of its own (a worker process on the same host has that one).
  let eager: EagerStart | null = null;
  if (config.API_EAGER_START === 'on') {
    installTemporalRuntime(logger, null);
    eager = new EagerStart({ config, logger, sql, temporal, ...(extras.worker ? { extras: extras.worker } : {}) });
    eager.start();
  }

  // Under api/primary.ts (API_PROCESSES > 1) the port is shared: the primary says how many API
  // processes are alive, and this one enforces its share of the rate limits.
  let liveProcesses = Number(process.env.API_LIVE_PROCESSES ?? 1);
  if (cluster.isWorker) {
    process.on('message', (message: { type?: string; live?: number }) => {
      if (message?.type === 'api-processes' && typeof message.live === 'number' && message.live > 0) liveProcesses = message.live;
    });
  }
  const app = createApp({
    sql,
    // What a tenant's routing may name: the configured PSPs, in order.
    providerNames: configuredProviderNames(config),
    temporal,
    ...(eager ? { eagerStart: () => eager.client(), moreMetrics: async () => (eager.metrics ? eager.metrics.registry.metrics() : '') } : {}),
    completions,
    config,
    logger,
    metrics: createApiMetrics(),
    providerWebhooks: await providerWebhookReceivers(config, sql),
    liveProcesses: () => liveProcesses,
  });
  const server = await serveHttp(app.fetch, { port: config.PORT, hostname: config.HOST, limits: listenerLimits(config) });
  const { port } = server.address() as AddressInfo;
  logger.info({ host: config.HOST, port, allowed_hosts: config.HTTP_ALLOWED_HOSTS }, `api listening on http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`);

  stopOnSignals(server, config, logger, async () => {
    // The hosted worker finishes the tasks it holds (WORKER_SHUTDOWN_GRACE_SECONDS) with the database still open.
    await eager?.stop().catch((err: unknown) => logger.error({ err }, 'the payment worker of this API process did not stop cleanly'));
    await completions.stop();
    await temporal.connection.close().catch(() => {});
    await sql.end({ timeout: 5 });
  });
}

/**
 * On SIGINT or SIGTERM: stop taking connections, let the requests in flight finish, then close
 * what the process holds (`closeResources`) and exit.
 */
function stopOnSignals(server: Server, config: Config, logger: Logger, closeResources: () => Promise<void>): void {
  let stopping = false;
  let draining = false;
  server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    if (draining && !response.headersSent) response.setHeader('Connection', 'close');
  });
  async function shutdown(signal: string) {
    // SIGINT and SIGTERM may both arrive (a terminal, then a supervisor): stop once.
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'api shutting down');
    // Requests in flight finish (a rolling upgrade replaces this process under load). New
    // connections go to the other processes, but an idle keep-alive connection is not cut: a
    // client may be sending on it at that very moment, and would see a reset. Each request
    // still arriving on one is answered with `Connection: close`, and a connection nobody uses
    // ends at the keep-alive timeout the client was told. Whatever is still open after the
    // longest wait a request can make is cut. (http.Server#close would close idle connections
    // at once, so the listening socket is closed through net.Server's close.)
    draining = true;
    const closed = new Promise<void>((resolve) => net.Server.prototype.close.call(server, () => resolve()));
    const cap = setTimeout(() => 'closeAllConnections' in server && server.closeAllConnections(), config.IDEMPOTENCY_WAIT_MS + 5000);
    await closed;
    clearTimeout(cap);
    await closeResources();
    await stopTracing();
    process.exit(0);
  }
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
}
