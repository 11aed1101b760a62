import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { Connection } from '@temporalio/client';
import { createSql, ping } from '../db/connect';
import { ensureDatabase, ensureSiblingDatabase, migrate } from '../db/migrate';
import { providerDoubles } from '../provider/registry';
import type { ProviderDouble } from '../provider/kind';
import { assertSafeToListen, codecCorsOrigins, isLoopbackHost, loadConfig, providerWebhookSecretVariable } from '../lib/config';
import { generatePayloadKey, parsePayloadKeys } from '../lib/payload-codec';
import { freePort, httpStatus } from './ports';
import { namespaceServed, projectRoot, startTemporalDevServer, type DevServer } from './temporal-cli';
import { startTemporalCluster, type TemporalCluster } from './temporal-cluster';
import { describeTemporalConnection, temporalConnectionSettings, type TemporalConnectionSettings } from '../lib/temporal-connection';
import { describeExit, spawnService, watchExit, type ExitInfo, type ManagedChild } from './children';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded-postgres';
import { ensureJaeger, startJaeger, type RunningJaeger } from './jaeger';
import { complain, prefix, say } from './output';
import { networkTimeScale, sandboxEnvironment } from './sandbox-environment';
import { clearRampingVersion, deploymentRouting, describeVersion, openPinnedRuns, setCurrentVersion, setRampingVersion, waitUntilDrained, type WorkerVersion } from './worker-deployment';

/**
 * The process behind `npm start` (scripts/start.ts runs it in its own session, so a Ctrl-C
 * in the terminal reaches only the launcher, which asks this process to stop, and nothing
 * here is interrupted out of order). Starts Temporal (in cluster mode: the nodes and the
 * frontend balancer every client connects through), PostgreSQL, the migrations, the provider
 * sandbox, the worker and the API; keeps them alive (a child that dies is restarted with
 * backoff, its new pid logged; PostgreSQL's death or a crash loop stops everything, saying
 * why); stops them in reverse order.
 */

const port = z.coerce.number().int().min(1).max(65535);
const launcherSchema = z
  .object({
    DATA_DIR: z.string().min(1).optional(),
    TEMPORAL_PORT: port.default(7233),
    TEMPORAL_UI_PORT: port.default(8233),
    EMBEDDED_PG_PORT: port.default(5433),
    /** The two sandbox PSPs: sandbox-a on SANDBOX_PORT, sandbox-b on SANDBOX_B_PORT. */
    SANDBOX_PORT: port.default(4010),
    SANDBOX_B_PORT: port.default(4011),
    SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
    /**
     * Doubles of real PSPs to run beside the sandboxes, by kind: any kind that declares one
     * (provider/<kind>/double.ts) runs its double (doubles/<kind>/) as the PSP `<kind>-test`, on
     * the port its declaration's variable gives.
     */
    PSP_DOUBLES: z
      .string()
      .default('')
      .transform((list) => list.split(',').map((d) => d.trim()).filter(Boolean))
      .pipe(z.array(z.enum([...providerDoubles.keys()] as [string, ...string[]], { error: `PSP_DOUBLES knows only ${[...providerDoubles.keys()].join(', ')}` }))),
    /** sandbox-b's own database (its schema is named `sandbox` too); default: `<database>_sandbox_b` on the same server, created when missing. */
    SANDBOX_B_DATABASE_URL: z.string().min(1).optional(),
    /** The API's port; 0 (any port) is not allowed here, the banner must name it. */
    PORT: port.default(3000),
    HOST: z.string().min(1).optional(),
    TEMPORAL_UI_URL: z.string().url().optional(),
    START_READY_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(180),
    /** TEMPORAL_MODE=cluster: history shards (fixed once .data holds the cluster) and server processes. */
    TEMPORAL_CLUSTER_SHARDS: z.coerce.number().int().positive().default(8),
    TEMPORAL_CLUSTER_NODES: z.coerce.number().int().min(1).max(5).default(2),
    /** API processes behind PORT (api/primary.ts) and worker processes on the task queue. */
    API_PROCESSES: z.coerce.number().int().min(1).max(64).default(1),
    WORKER_PROCESSES: z.coerce.number().int().min(1).max(64).default(1),
    /** "true" lets the Web UI terminate, cancel, signal and reset runs, in dev and cluster mode alike (off: it has no login). */
    TEMPORAL_UI_WRITE_ACTIONS: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    /** "on": Jaeger all-in-one (built into .tools/ on first use) receives every trace of the stack (docs/tracing.md). */
    TRACING: z.enum(['on', 'off']).default('off'),
    /** TRACING=on: Jaeger's UI, its OTLP/HTTP receiver and its query gRPC port, on loopback. */
    JAEGER_UI_PORT: port.default(16686),
    JAEGER_OTLP_PORT: port.default(4318),
    JAEGER_QUERY_GRPC_PORT: port.default(16685),
  });
/** The launcher's own variables (lib/config.ts has the ones the API and worker share); set in main(). */
let launcherEnv: z.output<typeof launcherSchema>;

const GRACE_MS: Record<string, number> = { api: 10_000, worker: 30_000, sandbox: 10_000, doubles: 5_000, codec: 5_000, balancer: 5_000 };
/** The services that are PSP doubles (PSP_DOUBLES), by name: they stop after the sandboxes. */
const doubleServices = new Set<string>();

/**
 * Restarts: a child that dies is started again after 1 s, 2 s, 4 s … (at most 30 s); a child
 * that ran for a minute is healthy again (its delay starts over). Five exits within a minute
 * is a crash loop: restarting cannot help (bad configuration, a port taken, a bug at start),
 * so everything stops and the message says which child and why.
 */
const RESTART = { firstDelayMs: 1000, maxDelayMs: 30_000, healthyAfterMs: 60_000, crashLoopExits: 5, crashLoopWindowMs: 60_000 };

/** A child the supervisor keeps alive: the process of the moment (it changes with each restart). */
interface Supervised {
  name: string;
  current: ManagedChild;
  restarts: number;
  /**
   * Starts a replacement and makes it the current process (the old one's exit is then
   * expected). `envChanges` apply to it and every later restart (e.g. ports the old one still holds).
   */
  replace(envChanges?: NodeJS.ProcessEnv): ManagedChild;
  /** Undoes the last replace (a rolled-back upgrade): `previous` is the current process again, with its environment. */
  revert(previous: ManagedChild): void;
  /** The environment of the process the last replace superseded (a draining worker started again with it keeps its version). */
  previousEnv(): NodeJS.ProcessEnv;
}

/**
 * What to do when a supervised child exited on its own: null to restart it (after the delay
 * returned), or the reason to stop everything (a crash loop).
 */
function restartPlan(name: string, exits: number[], startedAt: number, previousDelay: number): { delayMs: number } | { stop: string } {
  const now = Date.now();
  exits.push(now);
  while (exits.length && exits[0]! < now - RESTART.crashLoopWindowMs) exits.shift();
  if (exits.length >= RESTART.crashLoopExits) {
    return { stop: `${name} is crash-looping (${exits.length} exits within ${RESTART.crashLoopWindowMs / 1000} s): restarting it cannot help` };
  }
  const ranMs = now - startedAt;
  const delayMs = ranMs >= RESTART.healthyAfterMs || previousDelay === 0 ? RESTART.firstDelayMs : Math.min(previousDelay * 2, RESTART.maxDelayMs);
  return { delayMs };
}

class Cancelled extends Error {}

interface State {
  stopping: boolean;
  temporal: DevServer | null;
  cluster: TemporalCluster | null;
  temporalExit: { exited: Promise<ExitInfo>; hasExited(): boolean } | null;
  postgres: EmbeddedPostgresHandle | null;
  jaeger: RunningJaeger | null;
  services: Supervised[];
  /** Workers of a version a rolling upgrade moved away from, kept until its pinned runs closed. */
  draining: ManagedChild[];
}
const state: State = { stopping: false, temporal: null, cluster: null, temporalExit: null, postgres: null, jaeger: null, services: [], draining: [] };

let startup: Promise<void> = Promise.resolve();
let shuttingDown: Promise<never> | null = null;
let signals = 0;

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    signals++;
    if (signals === 1) void shutdown(`${signal} received`, 0);
    else forceExit(`${signal} received again: killing everything`);
  });
}
process.on('uncaughtException', (error) => void shutdown(`unexpected error: ${error.stack ?? error}`, 1));
process.on('unhandledRejection', (error) => void shutdown(`unexpected error: ${(error as Error)?.stack ?? error}`, 1));

// If the launcher in front of this process is killed outright, stop as if asked to.
const launcherPid = process.ppid;
setInterval(() => {
  if (process.ppid !== launcherPid && !state.stopping) void shutdown('the launcher went away', 1);
}, 500).unref();

startup = main();
startup.catch((error: unknown) => {
  if (error instanceof Cancelled) return;
  void shutdown(`start-up failed: ${(error as Error)?.message ?? error}`, 1);
});

/** A double PSP_DOUBLES names, with its port (its declaration's variable, else its default; a bad one stops the start). */
function doubleToRun(kind: string, double: ProviderDouble): ProviderDouble & { kind: string; port: number } {
  const parsed = port.default(double.defaultPort).safeParse(process.env[double.portVariable]);
  if (!parsed.success) throw new Error(`invalid configuration: ${double.portVariable}: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  return { ...double, kind, port: parsed.data };
}

async function main(): Promise<void> {
  const parsed = launcherSchema.safeParse(process.env);
  if (!parsed.success) {
    throw new Error(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  launcherEnv = parsed.data;
  const doubles = launcherEnv.PSP_DOUBLES.map((kind) => doubleToRun(kind, providerDoubles.get(kind)!));
  const config = loadConfig(); // the same parsing (and ADMIN_TOKEN default) as the API's
  networkTimeScale(process.env, config); // one scale for recovery and the sandboxes' card network: refused now if two are asked
  const dataDir = launcherEnv.DATA_DIR ? path.resolve(launcherEnv.DATA_DIR) : path.join(projectRoot, '.data');
  mkdirSync(dataDir, { recursive: true });
  // TEMPORAL_ADDRESS alone (the default mode) still means "use that server", as before.
  const mode = config.TEMPORAL_MODE === 'dev' && process.env.TEMPORAL_ADDRESS ? 'external' : config.TEMPORAL_MODE;
  const externalTemporal = mode === 'external' ? temporalConnectionSettings(config) : undefined;
  const externalDatabase = process.env.DATABASE_URL;
  const apiHost = launcherEnv.HOST ?? '127.0.0.1';
  assertSafeToListen({ HOST: apiHost, ADMIN_TOKEN: config.ADMIN_TOKEN });
  // Development webhooks go to receivers on this machine: loopback (and plain http) only, said in the banner.
  const webhookCidrs = process.env.WEBHOOK_ALLOWED_CIDRS ?? '127.0.0.0/8,::1';
  const webhookHttp = process.env.WEBHOOK_ALLOW_HTTP ?? 'true';

  const sdkMetrics = /^(.*):(\d+)$/.exec(config.TEMPORAL_SDK_METRICS_ADDRESS);
  await refuseBusyPorts([
    { port: launcherEnv.PORT, host: apiHost, what: 'the API (PORT)' },
    ...(config.WORKER_METRICS_PORT ? [{ port: config.WORKER_METRICS_PORT, host: apiHost, what: "the worker's /metrics (WORKER_METRICS_PORT)" }] : []),
    ...(sdkMetrics ? [{ port: Number(sdkMetrics[2]), host: sdkMetrics[1]!, what: "the Temporal SDK's metrics (TEMPORAL_SDK_METRICS_ADDRESS)" }] : []),
    { port: launcherEnv.SANDBOX_PORT, host: launcherEnv.SANDBOX_HOST, what: 'the provider sandbox sandbox-a (SANDBOX_PORT)' },
    { port: launcherEnv.SANDBOX_B_PORT, host: launcherEnv.SANDBOX_HOST, what: 'the provider sandbox sandbox-b (SANDBOX_B_PORT)' },
    ...doubles.map((double) => ({ port: double.port, host: '127.0.0.1', what: `the ${double.kind} double ${double.name} (${double.portVariable})` })),
    ...(config.TEMPORAL_PAYLOAD_ENCRYPTION === 'on' ? [{ port: config.CODEC_PORT, host: '127.0.0.1', what: 'the codec server (CODEC_PORT)' }] : []),
    ...(externalTemporal
      ? []
      : [
          { port: launcherEnv.TEMPORAL_PORT, host: '127.0.0.1', what: 'Temporal (TEMPORAL_PORT)' },
          { port: launcherEnv.TEMPORAL_UI_PORT, host: '127.0.0.1', what: 'the Temporal Web UI (TEMPORAL_UI_PORT)' },
        ]),
    ...(externalDatabase ? [] : [{ port: launcherEnv.EMBEDDED_PG_PORT, host: '127.0.0.1', what: 'the embedded PostgreSQL (EMBEDDED_PG_PORT)' }]),
    ...(launcherEnv.TRACING === 'on'
      ? [
          { port: launcherEnv.JAEGER_UI_PORT, host: '127.0.0.1', what: "Jaeger's UI (JAEGER_UI_PORT)" },
          { port: launcherEnv.JAEGER_OTLP_PORT, host: '127.0.0.1', what: "Jaeger's OTLP receiver (JAEGER_OTLP_PORT)" },
          { port: launcherEnv.JAEGER_QUERY_GRPC_PORT, host: '127.0.0.1', what: "Jaeger's query gRPC (JAEGER_QUERY_GRPC_PORT)" },
        ]
      : []),
  ]);

  const payloadKeys = config.TEMPORAL_PAYLOAD_ENCRYPTION === 'on' ? developmentPayloadKeys(dataDir) : null;
  const codecUrl = payloadKeys ? `http://127.0.0.1:${config.CODEC_PORT}` : null;

  // Temporal and PostgreSQL start side by side; each registers itself as soon as it runs.
  // (allSettled: when one fails, the other still registers what it started, to be stopped.)
  // The cluster stores into that PostgreSQL, so it starts after it.
  const databaseStarting = startPostgres(externalDatabase, dataDir);
  const temporalStarting =
    mode === 'cluster'
      ? databaseStarting.then((url) => startCluster(url, dataDir, config.TEMPORAL_NAMESPACE, codecUrl))
      : startTemporal(externalTemporal, dataDir, config.TEMPORAL_NAMESPACE, codecUrl);
  const [temporalStart, databaseStart] = await Promise.allSettled([temporalStarting, databaseStarting]);
  if (temporalStart.status === 'rejected' || databaseStart.status === 'rejected') {
    const reasons = [...new Set([temporalStart, databaseStart].flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error)?.message ?? String(r.reason)] : [])))];
    throw new Error(reasons.join('\n'));
  }
  let temporal = temporalStart.value;
  if (state.cluster) {
    // Every process reaches every frontend through the balancer, on the port clients are given.
    const balancerAddress = `127.0.0.1:${launcherEnv.TEMPORAL_PORT}`;
    startService('balancer', 'lib/frontend-balancer-main.ts', {
      ...process.env,
      TEMPORAL_FRONTENDS: state.cluster.nodes.map((node) => node.address).join(','),
      BALANCER_PORT: String(launcherEnv.TEMPORAL_PORT),
      BALANCER_HOST: '127.0.0.1',
      TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    });
    await waitFor('the frontend balancer to serve the namespace', Date.now() + 60_000, () => namespaceServed(balancerAddress, config.TEMPORAL_NAMESPACE));
    temporal = { ...temporal, address: balancerAddress };
  }
  const temporalAddress = temporal.address;
  const databaseUrl = databaseStart.value;
  checkpoint();

  const sql = createSql(databaseUrl, { max: 1, applicationName: 'payment-start' });
  try {
    await migrate(sql, (line) => say(line));
  } finally {
    await sql.end({ timeout: 5 });
  }
  checkpoint();
  // Two PSPs are two companies: sandbox-b keeps its state in a database of its own.
  let sandboxBDatabaseUrl: string;
  try {
    sandboxBDatabaseUrl = launcherEnv.SANDBOX_B_DATABASE_URL ?? (await ensureSiblingDatabase(databaseUrl, 'sandbox_b'));
  } catch (error) {
    throw new Error(`cannot create sandbox-b's database beside ${withoutPassword(databaseUrl)} (${(error as Error).message}); create one and set SANDBOX_B_DATABASE_URL`);
  }
  checkpoint();

  const apiUrl = `http://127.0.0.1:${launcherEnv.PORT}`;
  // The two sandbox PSPs: each signs its webhooks to the API's /provider_webhooks/<name> with a
  // secret of its own, which the API and the worker verify them with (fresh per start unless given).
  const sandboxes = [
    { name: 'sandbox-a', port: launcherEnv.SANDBOX_PORT, databaseUrl, secret: process.env.PROVIDER_SANDBOX_A_WEBHOOK_SECRET ?? process.env.SANDBOX_WEBHOOK_SECRET ?? randomBytes(24).toString('hex') },
    { name: 'sandbox-b', port: launcherEnv.SANDBOX_B_PORT, databaseUrl: sandboxBDatabaseUrl, secret: process.env.PROVIDER_SANDBOX_B_WEBHOOK_SECRET ?? randomBytes(24).toString('hex') },
  ].map((sandbox) => ({ ...sandbox, url: `http://127.0.0.1:${sandbox.port}`, webhookUrl: `${apiUrl}/provider_webhooks/${sandbox.name}`, secretVariable: providerWebhookSecretVariable(sandbox.name) }));
  // PSP_DOUBLES: each double as a PSP of its own, `<kind>-test`, with the kind's settings shared by both sides (its declaration's environment).
  const runningDoubles = doubles.map((double) => {
    const url = `http://127.0.0.1:${double.port}`;
    return { ...double, url, env: double.environment(url, process.env) };
  });
  const providers =
    process.env.PROVIDERS ?? [...sandboxes.map((sandbox) => `${sandbox.name}=sandbox:${sandbox.url}`), ...runningDoubles.map((double) => `${double.name}=${double.kind}:${double.url}`)].join(',');
  // TRACING=on: Jaeger before the processes that export to it (unless an OTLP endpoint is given).
  if (launcherEnv.TRACING === 'on') {
    say(`starting Jaeger (UI on ${launcherEnv.JAEGER_UI_PORT}, OTLP/HTTP on ${launcherEnv.JAEGER_OTLP_PORT}; the first start builds it into .tools/)`);
    ensureJaeger();
    checkpoint();
    state.jaeger = await startJaeger({ dataDir, uiPort: launcherEnv.JAEGER_UI_PORT, otlpPort: launcherEnv.JAEGER_OTLP_PORT, queryGrpcPort: launcherEnv.JAEGER_QUERY_GRPC_PORT });
    checkpoint();
  }
  const common: NodeJS.ProcessEnv = {
    ...(state.jaeger && !process.env.OTEL_EXPORTER_OTLP_ENDPOINT ? { OTEL_EXPORTER_OTLP_ENDPOINT: state.jaeger.otlpEndpoint } : {}),
    ...process.env,
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    PROVIDERS: providers,
    ...Object.fromEntries(sandboxes.map((sandbox) => [sandbox.secretVariable, sandbox.secret])),
    SANDBOX_WEBHOOK_SECRET: sandboxes[0]!.secret,
    ...Object.assign({}, ...runningDoubles.map((double) => double.env)),
    LOG_LEVEL: config.LOG_LEVEL,
    ADMIN_TOKEN: config.ADMIN_TOKEN,
    ...(payloadKeys ? { TEMPORAL_PAYLOAD_KEYS: payloadKeys.text } : {}),
    HOST: apiHost,
    WEBHOOK_ALLOWED_CIDRS: webhookCidrs,
    WEBHOOK_ALLOW_HTTP: webhookHttp,
  };
  // Sandboxes first (the worker calls them), then the worker, then the API; they start together.
  for (const sandbox of sandboxes) {
    startService(sandbox.name, 'sandbox/main.ts', sandboxEnvironment(common, { ...sandbox, host: launcherEnv.SANDBOX_HOST }, process.env.SANDBOX_NETWORK_DATABASE_URL ?? databaseUrl, config));
  }
  // A double's webhooks go to the API's inbound route under its name. It is on the sandboxes'
  // card network: SANDBOX_NETWORK_KEY, when set, reaches it with the common environment as it
  // reaches them, so sandbox-b charges a card saved at it by its id.
  for (const double of runningDoubles) {
    doubleServices.add(double.name);
    startService(double.name, double.script, {
      ...common,
      [double.portVariable]: String(double.port),
      [double.webhookUrlVariable]: `${apiUrl}/provider_webhooks/${double.name}`,
    });
  }
  // Each worker beyond the first gets metrics ports of its own (the first keeps the configured ones).
  const workers: { pid: number; metricsPort: number }[] = [];
  for (let index = 1; index <= launcherEnv.WORKER_PROCESSES; index++) {
    const own = index === 1 ? null : { metrics: await freePort(), sdk: await freePort() };
    const child = startService(launcherEnv.WORKER_PROCESSES === 1 ? 'worker' : `worker-${index}`, 'worker/main.ts', {
      ...common,
      ...(own ? { WORKER_METRICS_PORT: String(own.metrics), TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${own.sdk}` } : {}),
    });
    workers.push({ pid: child.pid, metricsPort: own?.metrics ?? config.WORKER_METRICS_PORT });
  }
  // Always through api/primary.ts (node:cluster), even for one process: a rolling upgrade
  // starts the new API process on the shared port before the old one stops.
  startService('api', 'api/primary.ts', { ...common, PORT: String(launcherEnv.PORT), HOST: apiHost, API_PROCESSES: String(launcherEnv.API_PROCESSES) });
  const versioned = config.TEMPORAL_WORKER_VERSIONING === 'on';
  rollingUpgradeContext = { temporal, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TASK_QUEUE, dataDir, deploymentName: versioned ? config.TEMPORAL_DEPLOYMENT_NAME : null };
  // The Web UI's page calls the codec server from the browser: its origin must be allowed.
  const uiOrigins = [`http://127.0.0.1:${launcherEnv.TEMPORAL_UI_PORT}`, `http://localhost:${launcherEnv.TEMPORAL_UI_PORT}`, ...codecCorsOrigins(config)];
  if (codecUrl) startService('codec', 'lib/codec-server-main.ts', { ...common, CODEC_PORT: String(config.CODEC_PORT), CODEC_CORS_ORIGINS: [...new Set(uiOrigins)].join(','), HOST: '127.0.0.1' });

  const deadline = Date.now() + launcherEnv.START_READY_TIMEOUT_SECONDS * 1000;
  const [buildIds] = await Promise.all([
    Promise.all(workers.map((worker) => waitForWorker(temporal, config.TEMPORAL_NAMESPACE, config.TASK_QUEUE, worker.pid, deadline))),
    ...sandboxes.map((sandbox) => waitFor(`the provider sandbox ${sandbox.name} to answer /healthz`, deadline, async () => (await httpStatus(`${sandbox.url}/healthz`)) === 200)),
    ...runningDoubles.map((double) => waitFor(`the ${double.kind} double ${double.name} to answer /healthz`, deadline, async () => (await httpStatus(`${double.url}/healthz`)) === 200)),
    waitFor('the API to answer /readyz with 200', deadline, async () => (await httpStatus(`${apiUrl}/readyz`)) === 200),
    ...(codecUrl ? [waitFor('the codec server to answer /healthz', deadline, async () => (await httpStatus(`${codecUrl}/healthz`)) === 200)] : []),
  ]);
  checkpoint();
  // The stack's workers all run the code on disk: one version, made current so that tasks flow.
  const workerVersion = versioned ? await makeStackVersionCurrent(temporal, config.TEMPORAL_NAMESPACE, config.TEMPORAL_DEPLOYMENT_NAME, buildIds) : null;
  checkpoint();

  const uiUrl = state.temporal?.uiUrl ?? state.cluster?.uiUrl ?? launcherEnv.TEMPORAL_UI_URL ?? null;
  // Only the UIs this launcher runs (dev server, cluster) are known to be read-only or not.
  const uiMode =
    state.temporal?.uiUrl || state.cluster?.uiUrl
      ? launcherEnv.TEMPORAL_UI_WRITE_ACTIONS
        ? ' (write actions on: TEMPORAL_UI_WRITE_ACTIONS=true)'
        : ' (read-only; TEMPORAL_UI_WRITE_ACTIONS=true allows terminate, cancel, signal, reset)'
      : '';
  const rel = (file: string) => {
    const relative = path.relative(process.cwd(), file);
    return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
  };
  const pids = [
    ...state.services.map((s) => `${s.name} ${s.current.pid}`),
    ...(state.temporal?.process.pid ? [`temporal ${state.temporal.process.pid}`] : []),
    ...(state.cluster?.nodes.map((node) => `${node.name} ${node.pid}`) ?? []),
    ...(state.postgres ? [`postgres ${state.postgres.pid}`] : []),
  ];
  const databaseShown = state.postgres ? databaseUrl : withoutPassword(databaseUrl);
  say(
    [
      '',
      'Payment orchestrator is running.',
      `  API            ${apiUrl}`,
      `  API docs       ${apiUrl}/docs`,
      `  Temporal UI    ${uiUrl ?? `(not known for TEMPORAL_ADDRESS=${temporalAddress}; set TEMPORAL_UI_URL)`}${uiMode}`,
      `  Temporal       ${
        state.temporal
          ? `${temporalAddress} (dev server; ${rel(path.join(dataDir, 'temporal.db'))}, log ${rel(path.join(dataDir, 'temporal.log'))})`
          : state.cluster
            ? `${temporalAddress} (balancer over ${state.cluster.nodes.map((node) => `${node.name} ${node.address}`).join(', ')}; cluster of ${state.cluster.nodes.length} on PostgreSQL databases ${state.cluster.databaseName}, ${state.cluster.visibilityDatabaseName}; logs ${rel(path.join(dataDir, 'temporal-N.log'))})`
            : `${describeTemporalConnection(temporal)} (TEMPORAL_MODE=external)`
      }`,
      ...sandboxes.map(
        (sandbox) =>
          `  PSP ${sandbox.name.padEnd(11)}${sandbox.url} (webhooks to ${sandbox.webhookUrl}; database ${sandbox.databaseUrl === databaseUrl ? 'the same, schema sandbox' : new URL(sandbox.databaseUrl).pathname.slice(1)})`,
      ),
      ...runningDoubles.map((double) => `  PSP ${double.name.padEnd(11)}${double.url} (${double.describe(double.env)}; webhooks to /provider_webhooks/${double.name})`),
      `  PROVIDERS      ${providers}${process.env.PROVIDERS ? ' (from PROVIDERS)' : ''}`,
      payloadKeys
        ? `  Codec server   ${codecUrl} (Temporal payloads encrypted with key ${payloadKeys.encryptingId}${payloadKeys.file ? `, kept in ${rel(payloadKeys.file)}` : ', from TEMPORAL_PAYLOAD_KEYS'}; the Web UI decodes through it)`
        : '  Codec server   (off: TEMPORAL_PAYLOAD_ENCRYPTION=off, Temporal payloads are in clear)',
      `  Worker version ${workerVersion ? `${describeVersion(workerVersion)} (current; temporal worker deployment describe --name ${workerVersion.deploymentName} --address ${temporalAddress})` : 'unversioned (TEMPORAL_WORKER_VERSIONING=off)'}`,
      ...(config.WORKER_METRICS_PORT ? [`  Worker metrics ${workers.map((w) => `http://127.0.0.1:${w.metricsPort}/metrics`).join(', ')}`] : []),
      ...(launcherEnv.API_PROCESSES > 1 || launcherEnv.WORKER_PROCESSES > 1
        ? [`  Processes      ${launcherEnv.API_PROCESSES} API (one port, each enforcing 1/${launcherEnv.API_PROCESSES} of the rate limits), ${launcherEnv.WORKER_PROCESSES} worker`]
        : []),
      state.jaeger
        ? `  Jaeger         ${state.jaeger.uiUrl} (one trace per payment: its query API, ${state.jaeger.uiUrl}/api/traces?service=payment-api&tags={"payment.id":"pay_…"}; docs/tracing.md; log ${rel(path.join(dataDir, 'jaeger.log'))})`
        : '  Tracing        (off: TRACING=on runs Jaeger and sends it every trace)',
      `  API metrics    ${apiUrl}/metrics (bearer: the admin token, or METRICS_TOKEN if set)`,
      `  DATABASE_URL   ${databaseShown}${state.postgres ? ` (embedded PostgreSQL; ${rel(path.join(dataDir, 'postgres'))})` : ''}`,
      `  ADMIN_TOKEN    ${config.ADMIN_TOKEN}`,
      `  Listening on   ${apiHost}${isLoopbackHost(apiHost) ? ' (loopback only; HOST to change)' : ''}`,
      `  Webhooks       internal targets allowed: ${process.env.WEBHOOK_ALLOWED_CIDRS === undefined ? 'loopback only' : webhookCidrs || 'none'} (WEBHOOK_ALLOWED_CIDRS=${webhookCidrs})${webhookHttp === 'true' ? '; plain http allowed' : ''}`,
      `  pids           ${pids.join(', ')}`,
      '  Create a tenant:',
      `    curl -s -X POST ${apiUrl}/admin/tenants -H 'Authorization: Bearer ${config.ADMIN_TOKEN}' -H 'Content-Type: application/json' -d '{"name":"demo"}'`,
      `  Upgrade        npm run rolling-upgrade (DATA_DIR=${rel(dataDir)}): new workers; a changed workflow bundle is a new version, ramped, made current, the old one drained (docs/versioning.md); then the API processes, one at a time`,
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  writeFileSync(path.join(dataDir, 'supervisor.pid'), `${process.pid}\n`);
}

/** What a rolling upgrade needs to know of the running stack (set once it is up). */
let rollingUpgradeContext: {
  temporal: TemporalConnectionSettings;
  namespace: string;
  taskQueue: string;
  dataDir: string;
  /** The workers' Worker Deployment; null when they run unversioned (TEMPORAL_WORKER_VERSIONING=off). */
  deploymentName: string | null;
} | null = null;
let upgrading = false;

/** What `npm run rolling-upgrade` asks for (scripts/rolling-upgrade.ts writes it before the signal). */
const upgradeRequestSchema = z.object({
  /** The new workers' TEMPORAL_WORKER_BUILD_ID; unset: derived from the code on disk. */
  buildId: z.string().min(1).optional(),
  /** Share of new runs the new version takes during the ramp, and for how long, before it becomes current (0: no ramp). */
  rampPercent: z.number().min(0).max(100).default(20),
  rampSeconds: z.number().min(0).default(10),
});

/**
 * SIGUSR2 (`npm run rolling-upgrade`): new worker processes with the code now on disk, then
 * new API processes, while the stack keeps serving (docs/versioning.md). Each new worker must
 * poll the task queue before anything else happens; then:
 * - same version as the current one (the workflow bundle did not change): each old worker
 *   is stopped at once (SIGTERM: it stops polling and finishes its activities);
 * - a new version: it ramps (a share of new runs for a while; a new worker dying meanwhile
 *   rolls back: the old version keeps every new run and the new workers stop), becomes
 *   current, and the old workers keep serving the runs pinned to them until the server
 *   reports their version drained; only then are they stopped.
 * The API's primary starts each new API process on the shared port before the old one stops
 * accepting (api/primary.ts). The progress and the outcome are written to DATA_DIR/rolling-upgrade.json.
 */
process.on('SIGUSR2', () => void rollingUpgrade());
async function rollingUpgrade(): Promise<void> {
  const context = rollingUpgradeContext;
  if (!context || upgrading || state.stopping) return;
  upgrading = true;
  const statusFile = path.join(context.dataDir, 'rolling-upgrade.json');
  const steps: string[] = [];
  const startedAt = new Date().toISOString();
  const report = (phase: string, details: Record<string, unknown> = {}) =>
    writeFileSync(statusFile, JSON.stringify({ status: 'running', phase, startedAt, replaced: steps, ...details }, null, 2));
  let connection: Connection | null = null;
  try {
    const requestFile = path.join(context.dataDir, 'rolling-upgrade-request.json');
    const request = upgradeRequestSchema.parse(existsSync(requestFile) ? JSON.parse(readFileSync(requestFile, 'utf8')) : {});
    const deploymentName = context.deploymentName;
    connection = deploymentName ? await Connection.connect({ ...context.temporal, connectTimeout: 5000 }) : null;
    const previous = connection && deploymentName ? (await deploymentRouting(connection, context.namespace, deploymentName)).current : null;
    const oldVersion = deploymentName && previous ? { deploymentName, buildId: previous } : null;
    say(`rolling upgrade: new workers${oldVersion ? ` (current version ${describeVersion(oldVersion)})` : ''}, then the API processes`);
    report('workers');

    /** New workers of a new version, each beside the old one it replaces once that version drained. */
    const pending: { service: Supervised; old: ManagedChild; fresh: ManagedChild; oldEnv: NodeJS.ProcessEnv; stopping: boolean }[] = [];
    let newVersion: WorkerVersion | null = null;
    for (const service of state.services.filter((s) => s.name === 'worker' || s.name.startsWith('worker-'))) {
      const old = service.current;
      // Both run for a while: the new one's metrics go to ports of its own.
      const fresh = service.replace({
        WORKER_METRICS_PORT: String(await freePort()),
        TEMPORAL_SDK_METRICS_ADDRESS: `127.0.0.1:${await freePort()}`,
        ...(request.buildId ? { TEMPORAL_WORKER_BUILD_ID: request.buildId } : {}),
      });
      const buildId = await waitForWorker(context.temporal, context.namespace, context.taskQueue, fresh.pid, Date.now() + 300_000);
      if (!deploymentName || buildId === null || buildId === previous) {
        const info = await old.stop(GRACE_MS.worker!);
        steps.push(`${service.name} ${old.pid} -> ${fresh.pid}`);
        say(`rolling upgrade: ${service.name} replaced (pid ${old.pid} -> ${fresh.pid}${buildId ? `, same version ${buildId}` : ''}; the old one ${describeExit(info)})`);
        continue;
      }
      if (newVersion && newVersion.buildId !== buildId) throw new Error(`the new workers run two versions (${newVersion.buildId}, ${buildId}): was the code changed during the upgrade?`);
      newVersion = { deploymentName, buildId };
      pending.push({ service, old, fresh, oldEnv: service.previousEnv(), stopping: false });
      say(`rolling upgrade: ${service.name} of version ${buildId} polls (pid ${fresh.pid}); the old one (pid ${old.pid}) stays until its version drained`);
    }

    if (newVersion && connection) {
      try {
        if (oldVersion && request.rampPercent > 0 && request.rampSeconds > 0) {
          await retryUntilKnown(() => setRampingVersion(connection!, context.namespace, newVersion!, request.rampPercent));
          say(`rolling upgrade: version ${describeVersion(newVersion)} ramping: ${request.rampPercent}% of new runs for ${request.rampSeconds} s`);
          report('ramping', { version: describeVersion(newVersion), rampPercent: request.rampPercent });
          const rampEnd = Date.now() + request.rampSeconds * 1000;
          while (Date.now() < rampEnd) {
            const died = pending.find((p) => p.fresh.hasExited());
            if (died) throw new Error(`${died.service.name} of version ${newVersion.buildId} (pid ${died.fresh.pid}) exited during the ramp`);
            if (state.stopping) throw new Error('the stack is stopping');
            await new Promise((r) => setTimeout(r, 250));
          }
        }
        await retryUntilKnown(() => setCurrentVersion(connection!, context.namespace, newVersion!));
      } catch (error) {
        // Roll back: the old version keeps (or takes back) every new run, with the workers it has.
        if (oldVersion) await clearRampingVersion(connection, context.namespace, oldVersion.deploymentName).catch(() => {});
        for (const { service, old, fresh } of pending) {
          service.revert(old);
          await fresh.stop(GRACE_MS.worker!);
        }
        throw new Error(`version ${describeVersion(newVersion)} rolled back: ${(error as Error).message}`);
      }
      state.draining.push(...pending.map((p) => p.old));
      // The runs pinned to the old version have no other workers: one that dies while it drains is started again.
      for (const entry of pending) keepDraining(entry);
      say(`rolling upgrade: version ${describeVersion(newVersion)} is current${oldVersion ? `; ${describeVersion(oldVersion)} drains` : ''}`);
      report('current', { version: describeVersion(newVersion) });
    }

    const api = state.services.find((s) => s.name === 'api');
    if (api) {
      const output = api.current.process.stdout!;
      let seen = '';
      const done = new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('the API processes were not all replaced within 5 minutes')), 300_000);
        const listen = (chunk: Buffer) => {
          seen += chunk.toString();
          const outcome = /rolling replacement of the api processes (done|failed)/.exec(seen)?.[1];
          if (!outcome) return;
          clearTimeout(timer);
          output.off('data', listen);
          resolve(outcome);
        };
        output.on('data', listen);
      });
      api.current.process.kill('SIGUSR2');
      const outcome = await done;
      if (outcome !== 'done') throw new Error('the API primary could not replace its processes (see the [api] lines)');
      steps.push(...[...seen.matchAll(/api process (\d+) replaced \(pid (\d+) -> (\d+)\)/g)].map((m) => `api-${m[1]} ${m[2]} -> ${m[3]}`));
      say('rolling upgrade: API processes replaced');
    }

    if (pending.length && oldVersion && connection) {
      report('draining', { version: describeVersion(oldVersion) });
      await waitUntilDrained(
        connection,
        context.namespace,
        oldVersion,
        (drainage) => {
          say(`rolling upgrade: version ${describeVersion(oldVersion)} ${drainage.status}, ${drainage.openPinnedRuns} open run(s) pinned to it`);
          report('draining', { version: describeVersion(oldVersion), drainage: drainage.status, openPinnedRuns: drainage.openPinnedRuns });
        },
        () => state.stopping,
      );
    }
    for (const entry of pending) {
      const { service, old, fresh } = entry;
      entry.stopping = true;
      const info = await old.stop(GRACE_MS.worker!);
      state.draining = state.draining.filter((child) => child !== old);
      steps.push(`${service.name} ${old.pid} -> ${fresh.pid}`);
      say(`rolling upgrade: ${service.name} replaced (pid ${old.pid} -> ${fresh.pid}; the old one, of the drained version, ${describeExit(info)})`);
    }
    writeFileSync(statusFile, JSON.stringify({ status: 'done', startedAt, finishedAt: new Date().toISOString(), replaced: steps, ...(newVersion ? { version: describeVersion(newVersion) } : {}) }, null, 2));
    say('rolling upgrade: done');
  } catch (error) {
    complain(`rolling upgrade failed: ${(error as Error).message}`);
    writeFileSync(statusFile, JSON.stringify({ status: 'failed', startedAt, error: (error as Error).message, replaced: steps }, null, 2));
  } finally {
    upgrading = false;
    await connection?.close().catch(() => {});
  }
}

/** Starts a draining version's worker again (after 1 s) whenever it dies before its version drained. */
function keepDraining(entry: { service: Supervised; old: ManagedChild; oldEnv: NodeJS.ProcessEnv; stopping: boolean }): void {
  const watched = entry.old;
  void watched.exited.then(async (info) => {
    if (entry.stopping || state.stopping || entry.old !== watched) return;
    complain(`${entry.service.name} of the draining version (pid ${watched.pid}) exited (${describeExit(info)}); starting it again in 1 s: the runs pinned to its version have no other worker`);
    await new Promise((r) => setTimeout(r, 1000));
    if (entry.stopping || state.stopping) return;
    const again = spawnService(entry.service.name, 'worker/main.ts', entry.oldEnv);
    state.draining = state.draining.map((child) => (child === watched ? again : child));
    entry.old = again;
    say(`${entry.service.name} of the draining version started again (pid ${again.pid})`);
    keepDraining(entry);
  });
}

/** A routing change right after a worker's first poll: the server may not know its version yet (NOT_FOUND / FAILED_PRECONDITION for a moment). */
async function retryUntilKnown(change: () => Promise<void>, deadline = Date.now() + 30_000): Promise<void> {
  for (;;) {
    try {
      return await change();
    } catch (error) {
      if (Date.now() > deadline || state.stopping) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/**
 * At start: the stack's workers run the code on disk, one version, made current so that their
 * tasks flow (a versioned worker gets nothing until its version is current or ramping). A
 * version left current by an earlier start with other code has no workers any more: its
 * pinned runs wait until that code runs again (docs/versioning.md says how to move them).
 */
async function makeStackVersionCurrent(temporal: TemporalConnectionSettings, namespace: string, deploymentName: string, buildIds: (string | null)[]): Promise<WorkerVersion> {
  const distinct = [...new Set(buildIds)];
  if (distinct.length !== 1 || distinct[0] === null || distinct[0] === undefined) {
    throw new Error(`the workers poll as ${distinct.map((id) => id ?? 'unversioned').join(', ')}: expected one version of ${deploymentName}`);
  }
  const version: WorkerVersion = { deploymentName, buildId: distinct[0] };
  const connection = await Connection.connect({ ...temporal, connectTimeout: 5000 });
  try {
    const routing = await deploymentRouting(connection, namespace, deploymentName);
    if (routing.current === version.buildId && routing.ramping === null) return version;
    if (routing.current !== null && routing.current !== version.buildId) {
      const previous = { deploymentName, buildId: routing.current };
      const left = await openPinnedRuns(connection, namespace, previous);
      (left > 0 ? complain : say)(
        `the current version was ${describeVersion(previous)} (other code, no workers now)${left > 0 ? `: ${left} run(s) pinned to it wait until that code runs again (docs/versioning.md, "A version without workers")` : ''}`,
      );
    }
    if (routing.ramping !== null && routing.ramping !== version.buildId) await clearRampingVersion(connection, namespace, deploymentName);
    await retryUntilKnown(() => setCurrentVersion(connection, namespace, version));
    say(`worker version ${describeVersion(version)} is current`);
    return version;
  } finally {
    await connection.close();
  }
}

/**
 * The payload keys of this development stack: TEMPORAL_PAYLOAD_KEYS when set, otherwise a key
 * generated on the first start and kept in the data folder, so the histories Temporal keeps
 * in that folder stay readable across restarts.
 */
function developmentPayloadKeys(dataDir: string): { text: string; encryptingId: string; file: string | null } {
  const fromEnv = process.env.TEMPORAL_PAYLOAD_KEYS;
  if (fromEnv) return { text: fromEnv, encryptingId: parsePayloadKeys(fromEnv)[0]!.id, file: null };
  const file = path.join(dataDir, 'temporal-payload-keys');
  if (!existsSync(file)) {
    writeFileSync(file, `${generatePayloadKey(`dev-${new Date().toISOString().slice(0, 10)}`)}\n`, { mode: 0o600 });
    say(`generated a development payload key in ${file}`);
  }
  const text = readFileSync(file, 'utf8').trim();
  return { text, encryptingId: parsePayloadKeys(text)[0]!.id, file };
}

async function startTemporal(external: TemporalConnectionSettings | undefined, dataDir: string, namespace: string, codecUrl: string | null): Promise<TemporalConnectionSettings> {
  if (external) {
    try {
      const connection = await Connection.connect({ ...external, connectTimeout: 5000 });
      await connection.close();
    } catch (error) {
      throw new Error(`cannot reach Temporal at TEMPORAL_ADDRESS=${describeTemporalConnection(external)}: ${(error as Error).message}`);
    }
    say(`using the Temporal server at TEMPORAL_ADDRESS=${describeTemporalConnection(external)}`);
    return external;
  }
  say(`starting the Temporal dev server on 127.0.0.1:${launcherEnv.TEMPORAL_PORT} (Web UI on ${launcherEnv.TEMPORAL_UI_PORT})`);
  const logFile = path.join(dataDir, 'temporal.log');
  const options = {
    port: launcherEnv.TEMPORAL_PORT,
    uiPort: launcherEnv.TEMPORAL_UI_PORT,
    uiWriteActions: launcherEnv.TEMPORAL_UI_WRITE_ACTIONS,
    dbFilename: path.join(dataDir, 'temporal.db'),
    logFile,
    ...(namespace !== 'default' ? { namespace } : {}),
    ...(codecUrl ? { uiCodecEndpoint: codecUrl } : {}),
  };
  const exits: number[] = [];
  let delay = 0;
  const watch = (server: DevServer, startedAt: number) => {
    state.temporal = server;
    const exit = watchExit(server.process);
    state.temporalExit = exit;
    void exit.exited.then(async (info) => {
      if (state.stopping) return;
      const plan = restartPlan('the Temporal dev server', exits, startedAt, delay);
      if ('stop' in plan) return void shutdown(`${plan.stop}; last exit: ${describeExit(info)}; see ${logFile}`, 1);
      delay = plan.delayMs;
      complain(`the Temporal dev server exited unexpectedly (${describeExit(info)}; see ${logFile}); restarting it in ${delay} ms (its data is in ${options.dbFilename})`);
      await new Promise((r) => setTimeout(r, delay));
      if (state.stopping) return;
      try {
        const restarted = await startTemporalDevServer(options);
        if (state.stopping) return void (await restarted.stop());
        watch(restarted, Date.now());
        say(`Temporal dev server restarted (pid ${restarted.process.pid})`);
      } catch (error) {
        void shutdown(`the Temporal dev server could not be restarted: ${(error as Error).message}; see ${logFile}`, 1);
      }
    });
  };
  const temporal = await startTemporalDevServer(options);
  watch(temporal, Date.now());
  say(`Temporal is up at ${temporal.address}`);
  return { address: temporal.address };
}

/** TEMPORAL_MODE=cluster: the production server, several processes, on the stack's PostgreSQL. */
async function startCluster(databaseUrl: string, dataDir: string, namespace: string, codecUrl: string | null): Promise<TemporalConnectionSettings> {
  checkpoint();
  say(`starting a Temporal cluster of ${launcherEnv.TEMPORAL_CLUSTER_NODES} on PostgreSQL (frontend 127.0.0.1:${launcherEnv.TEMPORAL_PORT}, Web UI on ${launcherEnv.TEMPORAL_UI_PORT}; the first start builds the server into .tools/)`);
  const cluster = await startTemporalCluster({
    postgresUrl: databaseUrl,
    databaseName: process.env.TEMPORAL_DB_NAME ?? 'temporal',
    visibilityDatabaseName: process.env.TEMPORAL_VISIBILITY_DB_NAME ?? 'temporal_visibility',
    nodes: launcherEnv.TEMPORAL_CLUSTER_NODES,
    shards: launcherEnv.TEMPORAL_CLUSTER_SHARDS,
    // TEMPORAL_PORT is the balancer's (started next); the nodes' frontends get ports of their own.
    uiPort: launcherEnv.TEMPORAL_UI_PORT,
    uiTemporalAddress: `127.0.0.1:${launcherEnv.TEMPORAL_PORT}`,
    uiWriteActions: launcherEnv.TEMPORAL_UI_WRITE_ACTIONS,
    ...(codecUrl ? { uiCodecEndpoint: codecUrl } : {}),
    namespace,
    dataDir,
  });
  state.cluster = cluster;
  for (const node of cluster.nodes) {
    // A node that dies is started again on its ports; the balancer sends clients to the
    // others meanwhile, and the cluster moves its shards to them and back.
    const exits: number[] = [];
    let delay = 0;
    const watch = (startedAt: number) => {
      void node.exited().then(async (info) => {
        if (state.stopping) return;
        const plan = restartPlan(`Temporal ${node.name}`, exits, startedAt, delay);
        if ('stop' in plan) return void shutdown(`${plan.stop}; last exit: ${describeExit(info)}; see ${node.logFile}`, 1);
        delay = plan.delayMs;
        complain(`Temporal ${node.name} exited unexpectedly (${describeExit(info)}; see ${node.logFile}); restarting it in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay));
        if (state.stopping) return;
        try {
          await node.start();
        } catch (error) {
          // start() failing leaves the node exited: the next round of the plan counts it.
          complain(`Temporal ${node.name} did not come back: ${(error as Error).message}`);
          if (!node.hasExited()) await node.stop('SIGKILL');
        }
        if (state.stopping) return void (await node.stop());
        if (!node.hasExited()) say(`Temporal ${node.name} restarted (pid ${node.pid})`);
        watch(Date.now());
      });
    };
    watch(Date.now());
  }
  say(`Temporal cluster is up: ${cluster.nodes.map((node) => `${node.name} ${node.address}`).join(', ')}`);
  return { address: cluster.address };
}

async function startPostgres(external: string | undefined, dataDir: string): Promise<string> {
  if (external) {
    await ensureDatabaseOf(external);
    say(`using the PostgreSQL at DATABASE_URL=${withoutPassword(external)}`);
    return external;
  }
  say(`starting the embedded PostgreSQL on 127.0.0.1:${launcherEnv.EMBEDDED_PG_PORT}`);
  const postgres = await startEmbeddedPostgres({
    dataDir,
    port: launcherEnv.EMBEDDED_PG_PORT,
    database: 'payments',
    log: (line) => process.stdout.write(`${prefix('postgres')}${line}\n`),
  });
  state.postgres = postgres;
  void postgres.exited.then((info) => {
    // Not restarted: every other part stores into it, and its own crash recovery wants an operator's eye.
    if (!state.stopping) void shutdown(`the embedded PostgreSQL exited unexpectedly (${describeExit(info)}): every part of the stack depends on it, so everything stops; see the [postgres] lines above`, 1);
  });
  say(`PostgreSQL is up${postgres.firstStart ? ' (cluster created)' : ''}`);
  return postgres.url;
}

/** DATABASE_URL's database is created if missing, through the same server's `postgres` database. */
async function ensureDatabaseOf(url: string): Promise<void> {
  const sql = createSql(url, { max: 1 });
  try {
    await ping(sql);
    return;
  } catch (error) {
    if ((error as { code?: string }).code !== '3D000') {
      throw new Error(`cannot connect to DATABASE_URL=${withoutPassword(url)}: ${(error as Error).message}`);
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  target.pathname = '/postgres';
  const admin = createSql(target.toString(), { max: 1 });
  try {
    await ensureDatabase(admin, name);
    say(`created database ${name}`);
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/** Starts a child and keeps it alive: restarted with backoff when it dies, until a crash loop. */
function startService(name: string, entry: string, startEnv: NodeJS.ProcessEnv): ManagedChild {
  checkpoint();
  const env = { ...startEnv };
  let envBeforeReplace: NodeJS.ProcessEnv = { ...env };
  const exits: number[] = [];
  let delay = 0;
  const service: Supervised = {
    name,
    current: spawnService(name, entry, env),
    restarts: 0,
    replace(envChanges = {}) {
      envBeforeReplace = { ...env };
      Object.assign(env, envChanges);
      service.current = spawnService(name, entry, env);
      watch(service.current, Date.now());
      return service.current;
    },
    revert(previous) {
      for (const key of Object.keys(env)) if (!(key in envBeforeReplace)) delete env[key];
      Object.assign(env, envBeforeReplace);
      // Its exit watch is still pending: from now on its exit is a death again, restarted as before.
      service.current = previous;
    },
    previousEnv: () => ({ ...envBeforeReplace }),
  };
  state.services.push(service);
  const watch = (child: ManagedChild, startedAt: number) => {
    void child.exited.then(async (info) => {
      // A process replaced by a rolling upgrade was asked to stop: not a death.
      if (state.stopping || service.current !== child) return;
      const plan = restartPlan(`the ${name} process`, exits, startedAt, delay);
      if ('stop' in plan) return void shutdown(`${plan.stop}; last exit: ${describeExit(info)}; see the [${name}] lines above`, 1);
      delay = plan.delayMs;
      complain(`the ${name} process (pid ${child.pid}) exited unexpectedly (${describeExit(info)}); restarting it in ${delay} ms`);
      await new Promise((r) => setTimeout(r, delay));
      if (state.stopping) return;
      service.current = spawnService(name, entry, env);
      service.restarts++;
      say(`${name} restarted (pid ${service.current.pid}, restart ${service.restarts})`);
      watch(service.current, Date.now());
    });
  };
  watch(service.current, Date.now());
  return service.current;
}

/**
 * The worker is ready once it polls its task queue (it bundles the workflows first). Returns
 * the build id it polls as (null: unversioned).
 */
async function waitForWorker(temporal: TemporalConnectionSettings, namespace: string, taskQueue: string, pid: number, deadline: number): Promise<string | null> {
  const connection = await Connection.connect({ ...temporal, connectTimeout: 5000 });
  let buildId: string | null = null;
  try {
    await waitFor(`the worker to poll task queue ${taskQueue}`, deadline, async () => {
      const response = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue, kind: 1 /* NORMAL */ },
        taskQueueType: 1 /* WORKFLOW */,
      });
      const poller = (response.pollers ?? []).find((p) => p.identity?.startsWith(`${pid}@`));
      buildId = poller?.deploymentOptions?.buildId || null;
      return poller !== undefined;
    });
    return buildId;
  } finally {
    await connection.close();
  }
}

async function waitFor(what: string, deadline: number, check: () => Promise<boolean>): Promise<void> {
  for (;;) {
    checkpoint();
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function checkpoint(): void {
  if (state.stopping) throw new Cancelled('stopping');
}

async function refuseBusyPorts(ports: { port: number; host: string; what: string }[]): Promise<void> {
  const busy: string[] = [];
  for (const { port, host, what } of ports) {
    if (!(await portIsFree(port, host))) busy.push(`port ${port} (${what}) is already in use`);
  }
  if (busy.length) {
    throw new Error(
      `${busy.join('; ')}. Is another \`npm start\` running? Stop it, or choose other ports with the variables named ` +
        '(or point TEMPORAL_ADDRESS / DATABASE_URL at servers that are already running).',
    );
  }
}

function portIsFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

/**
 * Stops the API, the worker and the sandbox (each SIGTERM, then SIGKILL after its grace
 * period), then Temporal, then PostgreSQL, and exits.
 */
function shutdown(reason: string, code: number): Promise<never> {
  if (shuttingDown) return shuttingDown;
  state.stopping = true;
  (code === 0 ? say : complain)(reason);
  say('stopping');
  shuttingDown = (async () => {
    // Whatever step start-up was in finishes (or is cancelled) first, so that nothing it
    // starts afterwards is missed.
    await startup.catch(() => {});
    for (const name of ['api', 'worker', 'sandbox', 'doubles', 'codec', 'balancer'] as const) {
      // Several workers stop together (each finishing its activities within the grace period).
      const group = state.services.filter((s) => (name === 'doubles' ? doubleServices.has(s.name) : s.name === name || s.name.startsWith(`${name}-`)));
      await Promise.all([
        ...group.map(async (service) => {
          const info = await service.current.stop(GRACE_MS[name]!);
          say(`${service.name} stopped (${describeExit(info)})`);
        }),
        // The workers of a version still draining stop with the others.
        ...(name === 'worker'
          ? state.draining.map(async (child) => {
              const info = await child.stop(GRACE_MS.worker!);
              say(`${child.name} (pid ${child.pid}, draining version) stopped (${describeExit(info)})`);
            })
          : []),
      ]);
    }
    if (state.temporal) {
      await state.temporal.stop();
      say('Temporal stopped');
    }
    if (state.cluster) {
      await state.cluster.stop();
      say('Temporal cluster stopped');
    }
    if (state.postgres) {
      await state.postgres.stop();
      say('PostgreSQL stopped');
    }
    if (state.jaeger) {
      await state.jaeger.stop();
      say('Jaeger stopped');
    }
    say(code === 0 ? 'all stopped' : 'all stopped after a failure');
    process.exit(code);
  })();
  return shuttingDown;
}

/** A second Ctrl-C: no more waiting. */
function forceExit(reason: string): never {
  complain(reason);
  for (const service of state.services) service.current.kill();
  for (const child of state.draining) child.kill();
  if (state.temporal && !state.temporalExit?.hasExited()) state.temporal.process.kill('SIGKILL');
  for (const node of state.cluster?.nodes ?? []) if (!node.hasExited()) node.process.kill('SIGKILL');
  state.cluster?.ui?.kill('SIGKILL');
  state.postgres?.kill();
  state.jaeger?.process.kill('SIGKILL');
  process.exit(1);
}
