/**
 * Eager workflow start (API_EAGER_START=on): the API process runs a payment worker, and starts
 * payments and refunds through a client on that worker's NativeConnection with
 * `requestEagerStart`. Temporal then answers the start with the run's first workflow task, which
 * this process's worker runs at once, instead of putting it on the task queue for a poller: one
 * hop through matching fewer per run (bench/results/eager-start.md). A payment the PSP answers at
 * once completes in that task, in this process.
 *
 * Eager is a request, not a promise: the SDK asks only while this worker has a free workflow task
 * slot, and the server may decline. Every later task of the run (a wait's end, a retry) goes
 * through the task queue, to this process's worker or any other.
 *
 * Worker Versioning: the server (1.29) hands the eager task to the worker that asked, whatever the
 * deployment's routing says, and the run is then pinned to that worker's version. So with
 * TEMPORAL_WORKER_VERSIONING=on this process asks only while its version is the deployment's
 * current one (checked every ROUTING_CHECK_MS): a run it starts is pinned where routing would
 * have sent it. An API of a ramping, draining or unknown version starts runs plainly.
 *
 * Until the worker runs (Temporal not up yet, or the worker stopped) `client()` is null and the
 * API starts runs through its own client, as with API_EAGER_START=off.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { Sql } from '../db/connect';
import type { Config } from '../lib/config';
import { paymentDataConverter } from '../lib/data-converter';
import { tracingClientInterceptors } from '../lib/tracing';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import { temporalConnectionSettings } from '../lib/temporal-connection';
import { createConfiguredWorker, type WorkerProcessExtras } from '../worker/process';
import { deploymentRouting, describeVersion, type WorkerVersion } from '../worker/versioning';

/** How often a versioned API checks whether its version is the deployment's current one. */
export const ROUTING_CHECK_MS = 5000;
/** The wait before the next try when the hosted worker could not start. */
const BOOT_RETRY_MS = 5000;

export class EagerStart {
  private starter: Client | null = null;
  private worker: Worker | null = null;
  private connection: NativeConnection | null = null;
  private running: Promise<void> | null = null;
  private booting: Promise<void> | null = null;
  private stopping = false;
  /** Ends a wait between two tries to start the worker. */
  private readonly stopped = new AbortController();
  /** Unversioned, or versioned and the deployment's current version at the last check. */
  private routedHere = false;
  private routingCheck: NodeJS.Timeout | null = null;
  /** The hosted worker's registry (outcomes; each PSP's shared health is the API's own `routing_provider_health`), served on the API's /metrics; null until it runs. */
  metrics: WorkerMetrics | null = null;

  constructor(
    private readonly options: {
      config: Config;
      logger: Logger;
      /** The API's pool: the worker's activities share it. */
      sql: Sql;
      /** The API's client: the activities' (the same namespace and data converter). */
      temporal: Client;
      /** More workflows and activities for the hosted worker (the benchmark's floor). */
      extras?: WorkerProcessExtras;
    },
  ) {}

  /** Connects and starts the worker in the background. The Temporal runtime must be installed first (worker/observability.ts). */
  start(): void {
    this.booting = this.bootUntilRunning();
  }

  /** The client that asks for eager start, while this process's worker runs; otherwise null. */
  client(): Client | null {
    return this.routedHere ? this.starter : null;
  }

  /** Stops starting eagerly, lets the worker finish its tasks (WORKER_SHUTDOWN_GRACE_SECONDS), closes its connection. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.starter = null;
    this.stopped.abort();
    await this.booting;
    if (this.routingCheck) clearInterval(this.routingCheck);
    if (this.worker?.getState() === 'RUNNING') this.worker.shutdown();
    await this.running;
    await this.connection?.close();
  }

  /** Tries until the worker runs (Temporal may come up after the API), every BOOT_RETRY_MS; runs start plainly meanwhile. */
  private async bootUntilRunning(): Promise<void> {
    for (let attempt = 1; !this.stopping; attempt++) {
      try {
        await this.boot();
        return;
      } catch (err) {
        this.options.logger.warn({ err, attempt }, 'the payment worker of this API process could not start; runs start plainly until it does');
        await this.connection?.close().catch(() => {});
        this.connection = null;
        await sleep(BOOT_RETRY_MS, undefined, { signal: this.stopped.signal }).catch(() => {});
      }
    }
  }

  private async boot(): Promise<void> {
    const { config, logger, sql, temporal, extras } = this.options;
    // One try: bootUntilRunning retries, and a stop ends its wait between two tries at once.
    const connection = await NativeConnection.connect(temporalConnectionSettings(config));
    this.connection = connection;
    if (this.stopping) return;
    // Named apart from a worker process's `pid@host`: the history shows the runs this process started and ran eagerly.
    const identity = `${process.pid}@${hostname()}/api`;
    const { worker, version, metrics } = await createConfiguredWorker({ config, logger, sql, connection, client: temporal, identity, ...(extras ? { extras } : {}) });
    if (this.stopping) return;
    this.worker = worker;
    this.metrics = metrics;
    this.running = worker.run().then(
      () => {
        this.starter = null;
      },
      (err: unknown) => {
        this.starter = null;
        logger.error({ err }, 'the payment worker of this API process failed; eager start is off');
      },
    );
    // The eager task is started by the start request itself: its WorkflowTaskStarted carries the client's identity.
    this.starter = new Client({ connection, identity, namespace: config.TEMPORAL_NAMESPACE, dataConverter: paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS), interceptors: tracingClientInterceptors() });
    if (version) {
      await this.checkRouting(version);
      this.routingCheck = setInterval(() => void this.checkRouting(version), ROUTING_CHECK_MS).unref();
    } else {
      this.routedHere = true;
    }
    logger.info({ taskQueue: config.TASK_QUEUE, version: version ? describeVersion(version) : 'unversioned' }, 'this API process runs a payment worker for eager start');
  }

  /** Eager start on while this version is current; off when it is not, or when routing cannot be read. */
  private async checkRouting(version: WorkerVersion): Promise<void> {
    const { config, logger, temporal } = this.options;
    let current: string | null = null;
    try {
      current = (await temporal.connection.withDeadline(Date.now() + config.TEMPORAL_RPC_TIMEOUT_MS, () => deploymentRouting(temporal.connection, config.TEMPORAL_NAMESPACE, version.deploymentName))).current;
    } catch (err) {
      logger.debug({ err }, 'the deployment routing could not be read; eager start paused');
    }
    const routedHere = current === version.buildId;
    if (routedHere !== this.routedHere) {
      logger.info({ version: describeVersion(version), current }, routedHere ? 'eager start on: this version is current' : 'eager start paused: this version is not current');
    }
    this.routedHere = routedHere;
  }
}
