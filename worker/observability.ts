import type { Server } from 'node:http';
import { createLimitedServer, type ListenerLimits } from '../lib/listener';
import { Runtime } from '@temporalio/worker';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';

/**
 * The Temporal SDK's runtime, installed once per process before anything creates it: its
 * logs (worker, workflow and activity lines, with their workflow/activity attributes and
 * our request_id) go to pino, and its own metrics (task latencies, slots, polls…) are
 * exported in Prometheus format on `sdkMetricsAddress` (null: not exported, as in an API process
 * that hosts a worker for eager start beside a worker process on the same host).
 */
export function installTemporalRuntime(logger: Logger, sdkMetricsAddress: string | null): void {
  const forward = (level: LogLevel, message: string, meta?: LogMetadata) => {
    const method = level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
    // Why: the SDK logs each workflow and activity start and end at DEBUG; below the level,
    // skip building the line's metadata at all (a few per payment, on the worker's hot path).
    if (!logger.isLevelEnabled(method)) return;
    logger[method]({ ...meta, sdk_component: meta?.sdkComponent }, message);
  };
  Runtime.install({
    logger: {
      log: forward,
      trace: (message, meta) => forward('TRACE', message, meta),
      debug: (message, meta) => forward('DEBUG', message, meta),
      info: (message, meta) => forward('INFO', message, meta),
      warn: (message, meta) => forward('WARN', message, meta),
      error: (message, meta) => forward('ERROR', message, meta),
    },
    ...(sdkMetricsAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress: sdkMetricsAddress, countersTotalSuffix: true, useSecondsForDurations: true } } } } : {}),
  });
}

/**
 * The worker's one scrape endpoint, GET /metrics: its own metrics (outcomes, reconciliation,
 * webhooks, outbox backlog) followed by the Temporal SDK's.
 */
export function serveWorkerMetrics(options: {
  port: number;
  /** Loopback unless HOST says otherwise. */
  host?: string;
  metrics: WorkerMetrics;
  sdkMetricsUrl: string;
  beforeScrape?: () => Promise<void>;
  logger: Logger;
  /** Timeouts, connection cap and Host names (lib/listener.ts). */
  limits?: ListenerLimits;
}): Server {
  const server = createLimitedServer(async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    try {
      await options.beforeScrape?.();
      const own = await options.metrics.registry.metrics();
      const sdk = await fetch(options.sdkMetricsUrl, { signal: AbortSignal.timeout(2000) }).then((r) => r.text()).catch(() => '');
      res.writeHead(200, { 'content-type': options.metrics.registry.contentType }).end(`${own}\n${sdk}`);
    } catch (error) {
      options.logger.warn({ err: error }, 'metrics scrape failed');
      res.writeHead(500).end();
    }
  }, options.limits);
  const host = options.host ?? '127.0.0.1';
  server.listen(options.port, host, () => options.logger.info({ host, port: options.port }, `worker metrics on http://${host}:${options.port}/metrics`));
  return server;
}
