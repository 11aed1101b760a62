import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { createSql, type Sql } from '../db/connect';
import { ensureSiblingDatabase, migrate } from '../db/migrate';
import { providerWebhookSecretVariable } from '../lib/config';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../devstack/embedded-postgres';
import { freePort } from '../devstack/ports';
import { startTemporalDevServer, type DevServer } from '../devstack/temporal-cli';
import { startTemporalCluster, type TemporalCluster } from '../devstack/temporal-cluster';
import { startFrontendBalancer } from '../lib/frontend-balancer';
import { TemporalConnection } from '../lib/temporal';
import { setTenantWebhookUrl, startMerchant, type Merchant } from '../testkit/merchant';
import { TEST_PAYLOAD_KEYS, testDataConverter } from '../testkit/payload-keys';
import { spawnService, spawnWorker } from '../testkit/processes';
import { startNetworkProxy, type NetworkProxy } from './network-proxy';
import { scheduleId } from '../shared/jobs';
import type { DoubleCensusPayment } from '../doubles/control';
import { providerDoubles } from '../provider/registry';
import { doubleFaultKinds, faultKindsFor, type Fault, type FaultKind, type TemporalMode } from './nemesis';
import { readDoubleCensus } from './psp-doubles';
import { Supervisor, type Supervisable } from './supervisor';

export interface EnvironmentOptions {
  /** Where logs go. */
  logsDir: string;
  /** The sandbox forgets idempotency keys after this many seconds. */
  keyTtlSeconds: number;
  apiCount: number;
  /** The dev server, or the production server as a two-node cluster. */
  temporal: TemporalMode;
  /** CHAOS_KILL_AT for the n-th worker process (null: none). */
  killPointFor: (workerIndex: number) => string | null;
}

const ADMIN_TOKEN = 'chaos-admin-token-0123456789';

/** The run's two sandbox PSPs, in the order the sandbox tenants' payments try them. */
export const PSPS = ['sandbox-a', 'sandbox-b'] as const;
export type PspName = (typeof PSPS)[number];
/**
 * The third PSP: the double of the first kind that declares one (provider/<kind>/double.ts; its
 * code in doubles/<kind>/), as `npm start` runs it with PSP_DOUBLES=<kind>.
 */
export const [DOUBLE_KIND, DOUBLE] = [...providerDoubles.entries()][0]!;
/** The double's PSP name (`<kind>-test`). */
export const DOUBLE_PSP = DOUBLE.name;
/**
 * The tenants' routings: `chaos` tries sandbox-a first, sandbox-b when A certainly took no
 * money; `chaos-split` tries sandbox-a first for 70 % of its payments, sandbox-b for 30 %,
 * then the other; `chaos-double` tries the PSP double first, then sandbox-b.
 */
export const TENANT_ROUTINGS = {
  chaos: { fallback: [...PSPS] },
  'chaos-split': { split: [{ provider: 'sandbox-a', weight: 70 }, { provider: 'sandbox-b', weight: 30 }], fallback: [...PSPS] },
  'chaos-double': { fallback: [DOUBLE_PSP, 'sandbox-b'] },
};
/** The tenants whose route starts at the PSP double: their clients tell only the stories it can do (chaos/workload.ts). */
export const DOUBLE_TENANTS = new Set(['chaos-double']);
/** The faults that strike sandbox-a's one process (one at a time; the network kinds strike its proxy). */
const sandboxAKinds = new Set<FaultKind>(['kill-sandbox', 'stall-sandbox', 'outage-unavailable', 'outage-down', 'outage-declining']);
const TASK_QUEUE = 'chaos';

/**
 * Payments that wait, at the chaos run's pace: a customer who abandons the challenge is expired
 * after 20 s, a debit settles at the sandbox after 3 s and is awaited up to 60 s (longer than any
 * outage the nemesis makes), the workflows poll the PSP after 3 s, then every 10 s at most (a lost
 * webhook costs seconds). Webhooks: a fifth duplicated, a tenth reordered or lost, each delayed.
 */
export const WAITS = {
  /** A manual capture's authorization is voided this long after its wait began (AUTHORIZATION_WINDOW_SECONDS). */
  authorizationWindowSeconds: 7 * 24 * 3600,
  authenticationWindowSeconds: 20,
  settlementWindowSeconds: 60,
  asyncSettleMs: 3000,
  pollFirstMs: 3000,
  pollMaxMs: 10_000,
  webhookFaults: 'duplicate=0.2,reorder=0.1,loss=0.1,delay_ms=300',
  /**
   * The PSP double's webhooks get the same faults (POST /_sandbox/webhook_faults). A webhook
   * it lost stays lost until redelivered: a PSP retries one until it is accepted, and at a kind
   * whose modifications are `notified` the product learns a capture's or refund's outcome only
   * from its notification (no retrieval), so the run redelivers the lost ones every
   * `doubleRedeliverMs`, as the PSP's retries would deliver them late.
   */
  doubleWebhookFaults: { duplicate: 0.2, reorder: 0.1, loss: 0.1, delay_ms: 300 },
  doubleRedeliverMs: 15_000,
} as const;

/**
 * Disputes at the chaos run's pace, so every one closes within the run's wait for quiet, the unanswered
 * ones too: the network opens one 1 s after the capture and decides submitted evidence 2 s
 * later; evidence is due 20 s after it opens (an unanswered inquiry escalates then, and its
 * chargeback is lost 20 s later); one reminder 10 s before each deadline; the run asks the PSP
 * every 5 s (a lost webhook delays a dispute by at most that).
 */
export const DISPUTE_TIMES = {
  openAfterMs: 1000,
  decisionMs: 2000,
  evidenceSeconds: 20,
  reminderSeconds: [10],
  pollSeconds: 5,
} as const;

/**
 * Revenue recovery at the chaos run's pace (docs/recovery.md): an hour is 0.36 s, a day 8.6 s,
 * so a recovering payment's window of 1 to 3 days (chaos/workload.ts) ends within the run's
 * wait for quiet; the card network's windows and advice waits on the same scale.
 */
export const RECOVERY_TIME_SCALE = 0.0001;

/**
 * The product as separate processes, each of which the nemesis can take away: a private
 * embedded PostgreSQL (never the machine's shared server), a private file-backed Temporal
 * dev server (or, with `temporal: 'cluster'`, the production server as two nodes on a
 * PostgreSQL of their own, reached through a TCP balancer as a deployment would), two sandbox
 * PSPs (sandbox-a and sandbox-b, each on its own database of a second private PostgreSQL), the
 * worker (sandbox-a behind a fault-injecting proxy, sandbox-b direct), a separate outbox relay, and `apiCount` API processes. A merchant
 * endpoint in this process counts the webhooks it acknowledged.
 */
export async function startEnvironment(options: EnvironmentOptions) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'payorch-chaos-'));
  mkdirSync(options.logsDir, { recursive: true });
  const closers: (() => Promise<unknown>)[] = [async () => rmSync(dataDir, { recursive: true, force: true })];
  const teardown = async () => {
    for (let close = closers.pop(); close; close = closers.pop()) await close().catch((e) => console.error('chaos teardown:', e));
  };
  try {
    const pg: EmbeddedPostgresHandle = await startEmbeddedPostgres({ dataDir, port: await freePort(), database: 'payments' });
    closers.push(() => pg.stop());
    const sql: Sql = createSql(pg.url, { max: 4, connectTimeoutSeconds: 2 });
    closers.push(() => sql.end({ timeout: 5 }));
    await migrate(sql);

    // The PSPs are other companies: one PostgreSQL of theirs, which the nemesis never stops,
    // and a database per PSP on it (as `npm start` gives sandbox-b `<database>_sandbox_b`):
    // each sandbox keeps its charges in its own `sandbox` schema.
    const providerPg = await startEmbeddedPostgres({ dataDir: path.join(dataDir, 'provider'), port: await freePort(), database: 'sandbox' });
    closers.push(() => providerPg.stop());
    const pspDatabaseUrls: Record<PspName, string> = { 'sandbox-a': providerPg.url, 'sandbox-b': await ensureSiblingDatabase(providerPg.url, 'b') };
    const pspSql = Object.fromEntries(PSPS.map((name) => [name, createSql(pspDatabaseUrls[name], { max: 2 })])) as Record<PspName, Sql>;
    closers.push(() => Promise.all(PSPS.map((name) => pspSql[name].end({ timeout: 5 }))));

    // Temporal: the dev server on a file, or two cluster nodes on a PostgreSQL of their own
    // (Temporal's storage, which the nemesis never stops: postgres-stop is the app's database).
    let temporalServer: DevServer | null = null;
    let startTemporal: () => Promise<DevServer> = () => Promise.reject(new Error('no dev server in cluster mode'));
    let cluster: TemporalCluster | null = null;
    let temporalAddress: string;
    if (options.temporal === 'cluster') {
      const clusterPg = await startEmbeddedPostgres({ dataDir: path.join(dataDir, 'temporal-pg'), port: await freePort(), database: 'temporal' });
      closers.push(() => clusterPg.stop());
      const started = await startTemporalCluster({ postgresUrl: clusterPg.adminUrl, nodes: 2, shards: 8, dataDir: path.join(options.logsDir, 'temporal-cluster') });
      cluster = started;
      closers.push(() => started.stop());
      // The product's own balancer (what `npm start` runs in cluster mode): a killed node's
      // clients reconnect to the other, and a hung one is cut off by the health check.
      const balancer = await startFrontendBalancer({ frontends: started.nodes.map((node) => node.address), namespace: started.namespace });
      closers.push(() => balancer.close());
      temporalAddress = balancer.address;
    } else {
      const temporalPort = await freePort();
      temporalAddress = `127.0.0.1:${temporalPort}`;
      startTemporal = () =>
        startTemporalDevServer({ port: temporalPort, dbFilename: path.join(dataDir, 'temporal.db'), headless: true, logFile: path.join(options.logsDir, 'temporal.log') });
      temporalServer = await startTemporal();
      closers.push(() => temporalServer?.stop('SIGKILL') ?? Promise.resolve());
    }
    const connection = await TemporalConnection.connect({ address: temporalAddress });
    closers.push(() => connection.close());
    // The workflows' memos are encrypted: the checker's client decodes them with the same keys.
    const temporal = new Client({ connection, dataConverter: testDataConverter });

    const merchant: Merchant = await startMerchant();
    closers.push(() => merchant.close());

    const supervisors: Supervisor[] = [];
    const supervise = async (name: string, start: (index: number) => Promise<Supervisable>) => {
      const supervisor = new Supervisor(name, start);
      supervisors.push(supervisor);
      await supervisor.run();
      return supervisor;
    };
    closers.push(() => Promise.all(supervisors.map((s) => s.stop())));

    const apiPorts = await Promise.all(Array.from({ length: options.apiCount }, () => freePort()));
    const apiUrls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
    // Two sandbox PSPs, each supervised, on its own database, signing its own
    // webhooks to the first API's /provider_webhooks/<name> with a secret of its own,
    // with the faults of a real PSP's: duplicated, reordered, delayed and lost. A sandbox retries
    // an unacknowledged one (an API down, Temporal unreachable) until it gets through; a lost one
    // is left to the workflows' own status polls. The nemesis strikes sandbox-a only.
    const psps = {} as Record<PspName, { url: string; secret: string; supervisor: Supervisor }>;
    for (const name of PSPS) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const secret = randomBytes(24).toString('hex');
      const supervisor = await supervise(name, (i) =>
        spawnService({
          name: `${name}-${i}`,
          script: 'sandbox/main.ts',
          env: {
            DATABASE_URL: pspDatabaseUrls[name],
            // One card network for both PSPs, on the database of the one the nemesis spares.
            SANDBOX_NETWORK_DATABASE_URL: pspDatabaseUrls['sandbox-b'],
            SANDBOX_PORT: String(port),
            SANDBOX_SLOW_MS: '2500',
            SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS: String(options.keyTtlSeconds),
            SANDBOX_ASYNC_SETTLE_MS: String(WAITS.asyncSettleMs),
            SANDBOX_WEBHOOK_URL: `${apiUrls[0]}/provider_webhooks/${name}`,
            SANDBOX_WEBHOOK_SECRET: secret,
            SANDBOX_WEBHOOK_FAULTS: WAITS.webhookFaults,
            SANDBOX_DISPUTE_AFTER_MS: String(DISPUTE_TIMES.openAfterMs),
            SANDBOX_DISPUTE_DECISION_MS: String(DISPUTE_TIMES.decisionMs),
            SANDBOX_DISPUTE_EVIDENCE_SECONDS: String(DISPUTE_TIMES.evidenceSeconds),
            // The card network's windows and advice waits on the recovering payments' time scale.
            SANDBOX_NETWORK_TIME_SCALE: String(RECOVERY_TIME_SCALE),
          },
          readyUrl: `${url}/healthz`,
          logsDir: options.logsDir,
        }),
      );
      psps[name] = { url, secret, supervisor };
    }
    const sandbox = psps['sandbox-a'].supervisor;
    // The PSP double as a third PSP, as `npm start` runs it (PSP_DOUBLES=<kind>): its own
    // process, its settings (its declaration's environment, every service on its own URL, fresh
    // secrets) shared with the API and the worker, its signed webhooks sent to the first API's
    // /provider_webhooks/<its name> with the sandboxes' webhook faults. It keeps its payments in
    // memory, as a PSP never forgets them: the nemesis puts it into its outage modes, never kills it.
    const doublePort = await freePort();
    const doubleUrl = `http://127.0.0.1:${doublePort}`;
    const doubleSettings = DOUBLE.environment(doubleUrl, {});
    const doubleControl = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
      const response = await fetch(`${doubleUrl}${path}`, {
        method,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(5000),
      });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`${DOUBLE_PSP} ${method} ${path}: ${response.status} ${text}`);
      return JSON.parse(text) as unknown;
    };
    await supervise(DOUBLE_PSP, async (i) => {
      const started = await spawnService({
        name: `${DOUBLE_PSP}-${i}`,
        script: DOUBLE.script,
        env: { ...doubleSettings, [DOUBLE.portVariable]: String(doublePort), [DOUBLE.webhookUrlVariable]: `${apiUrls[0]}/provider_webhooks/${DOUBLE_PSP}` },
        readyUrl: `${doubleUrl}/healthz`,
        logsDir: options.logsDir,
      });
      await doubleControl('POST', '/_sandbox/webhook_faults', WAITS.doubleWebhookFaults);
      return started;
    });
    /** Sends again every webhook the double lost (its loss fault), as its PSP's retries would deliver it at last; how many. */
    const redeliverLost = async (): Promise<number> => {
      const census = await readDoubleCensus(doubleUrl);
      const lost = new Set(census.flatMap((p) => p.notifications.filter((n) => n.state === 'lost').map((n) => n.pspReference)));
      for (const reference of lost) await doubleControl('POST', `/_sandbox/events/${encodeURIComponent(reference)}/redeliver`, {});
      return lost.size;
    };
    let doubleRedelivered = 0;
    const redelivery = setInterval(() => {
      redeliverLost().then(
        (n) => (doubleRedelivered += n),
        () => {}, // the API or the double busy for a moment: the next pass
      );
    }, WAITS.doubleRedeliverMs);
    closers.push(async () => clearInterval(redelivery));
    // The worker reaches sandbox-a through the fault-injecting proxy, sandbox-b and the double directly.
    const proxy: NetworkProxy = await startNetworkProxy(psps['sandbox-a'].url);
    closers.push(() => proxy.close());
    const providersVia = (aUrl: string) => `sandbox-a=sandbox:${aUrl},sandbox-b=sandbox:${psps['sandbox-b'].url},${DOUBLE_PSP}=${DOUBLE_KIND}:${doubleUrl}`;
    const pspSecrets = Object.fromEntries(PSPS.map((name) => [providerWebhookSecretVariable(name), psps[name].secret]));
    /** sandbox-a's outage mode (POST /_sandbox/outage; a restart ends one too). */
    const setOutage = async (mode: 'none' | 'unavailable' | 'down' | 'declining') => {
      const response = await fetch(`${psps['sandbox-a'].url}/_sandbox/outage`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ mode }),
        signal: AbortSignal.timeout(5000),
      });
      if (response.status !== 200) throw new Error(`outage ${mode}: ${response.status} ${await response.text()}`);
    };

    // A dispute's run is started by the API (its webhook route) or the worker (reconciliation): both with these times.
    const disputeTimes = { DISPUTE_REMINDER_SECONDS: DISPUTE_TIMES.reminderSeconds.join(','), DISPUTE_POLL_SECONDS: String(DISPUTE_TIMES.pollSeconds) };
    const common = { ...pspSecrets, ...doubleSettings, DATABASE_URL: pg.url, TEMPORAL_ADDRESS: temporalAddress, TASK_QUEUE, ADMIN_TOKEN, WEBHOOK_RETRY_BASE_MS: '300', WEBHOOK_RETRY_MAX_MS: '3000', WEBHOOK_MAX_ATTEMPTS: '60', WEBHOOK_TIMEOUT_MS: '5000', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8,::1', WEBHOOK_ALLOW_HTTP: 'true', TEMPORAL_PAYLOAD_KEYS: TEST_PAYLOAD_KEYS, ...disputeTimes };
    const workerKillPoints: (string | null)[] = [];
    const worker = await supervise('worker', async (i) => {
      const killAt = options.killPointFor(i);
      workerKillPoints.push(killAt);
      return spawnWorker(
        `chaos-worker-${i}`,
        {
          databaseUrl: pg.url,
          temporalAddress: common.TEMPORAL_ADDRESS,
          taskQueue: TASK_QUEUE,
          providerUrl: proxy.url,
          // API_PUBLIC_URL: where a double's challenge sends the customer back (our return route, on the first API).
          env: { ...common, API_PUBLIC_URL: apiUrls[0]!, PROVIDERS: providersVia(proxy.url), PROVIDER_TIMEOUT_MS: '5000', LOG_LEVEL: 'warn', ...(killAt ? { CHAOS_KILL_AT: killAt } : {}) },
          logsDir: options.logsDir,
        },
        240_000,
      );
    });

    // The run reconciles its own window once it has gone quiet (run.ts reconcileAfterRun). The
    // Schedules' reconciliation would do it too, at :10 past whichever hour the run spans, and
    // what a lost webhook leaves behind would depend on the clock: they are paused, as an
    // operator pauses a Schedule (a worker's restart keeps it paused; worker/schedules.ts).
    for (const job of ['reconciliation-hourly', 'reconciliation-daily'] as const) {
      await temporal.schedule.getHandle(scheduleId(TASK_QUEUE, job)).pause('chaos: the run reconciles its own window once it is quiet');
    }

    const relayPort = await freePort();
    const relay = await supervise('relay', (i) =>
      spawnService({ name: `relay-${i}`, script: 'chaos/relay-main.ts', env: { ...common, RELAY_HEALTH_PORT: String(relayPort) }, readyUrl: `http://127.0.0.1:${relayPort}/`, logsDir: options.logsDir }),
    );

    const apis = await Promise.all(
      apiPorts.map((port, n) =>
        supervise(`api-${n}`, (i) =>
          spawnService({
            name: `api-${n}-${i}`,
            script: 'api/main.ts',
            env: {
              ...common,
              PORT: String(port),
              HOST: '127.0.0.1',
              IDEMPOTENCY_WAIT_MS: '3000',
              TEMPORAL_RPC_TIMEOUT_MS: '3000',
              AUTHORIZATION_WINDOW_SECONDS: String(WAITS.authorizationWindowSeconds),
              PROVIDERS: providersVia(psps['sandbox-a'].url),
              AUTHENTICATION_WINDOW_SECONDS: String(WAITS.authenticationWindowSeconds),
              ASYNC_SETTLEMENT_WINDOW_SECONDS: String(WAITS.settlementWindowSeconds),
              PROVIDER_POLL_FIRST_MS: String(WAITS.pollFirstMs),
              PROVIDER_POLL_MAX_MS: String(WAITS.pollMaxMs),
              RECOVERY_TIME_SCALE: String(RECOVERY_TIME_SCALE),
            },
            readyUrl: `http://127.0.0.1:${port}/healthz`,
            logsDir: options.logsDir,
          }),
        ),
      ),
    );

    // The merchant's tenants, their webhooks sent to the endpoint above, each with its routing
    // (docs/CONTRACT.md §3.7–3.8): `chaos` tries sandbox-a then sandbox-b, `chaos-split` draws
    // its first PSP by the split and fails over to the other.
    const admin = async (method: string, path: string, body: unknown) => {
      const response = await fetch(`${apiUrls[0]}${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (response.status !== (method === 'POST' ? 201 : 200)) throw new Error(`${method} ${path} refused: ${response.status} ${await response.text()}`);
      return response.json() as Promise<{ id: string; api_key: string }>;
    };
    const tenants: { id: string; apiKey: string; name: string }[] = [];
    for (const [name, routing] of Object.entries(TENANT_ROUTINGS)) {
      const tenant = await admin('POST', '/admin/tenants', { name });
      await setTenantWebhookUrl(apiUrls[0]!, ADMIN_TOKEN, tenant.id, merchant.url);
      await admin('PATCH', `/admin/tenants/${tenant.id}`, { routing });
      tenants.push({ id: tenant.id, apiKey: tenant.api_key, name });
    }
    const tenant = tenants[0]!;

    let temporalDown = false;
    let postgresDown = false;
    const busy = new Set<string>();
    const injected: Record<FaultKind, number> = Object.fromEntries(
      faultKindsFor(options.temporal).map((k) => [k, 0]),
    ) as Record<FaultKind, number>;
    const skipped: Record<string, number> = {};
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    /** What the nemesis took away must come back, or the run cannot go quiet: retried until it does. */
    const untilDone = async <T>(what: string, attempt: () => Promise<T>): Promise<T> => {
      for (let tries = 1; ; tries++) {
        try {
          return await attempt();
        } catch (error) {
          if (tries >= 30) throw error;
          console.error(`chaos: ${what} failed (${(error as Error).message.split('\n')[0]}); retrying`);
          await sleep(2000);
        }
      }
    };

    /**
     * Strikes one fault and returns once it is over (the thing is back or being restarted);
     * `onStart` runs when the fault takes hold (its slot is free and it begins).
     */
    const strike = async (fault: Fault, onStart?: () => void): Promise<void> => {
      // One network fault at a time, one fault of sandbox-a's process at a time, one cluster
      // node down at a time (never both), one kill per process.
      const slot = fault.kind.startsWith('network')
        ? 'network'
        : sandboxAKinds.has(fault.kind)
          ? 'sandbox-a'
          : doubleFaultKinds.includes(fault.kind)
            ? DOUBLE_PSP
            : fault.kind === 'kill-temporal-node'
              ? fault.kind
              : `${fault.kind}#${fault.target}`;
      // The network kinds share the proxy, and sandbox-a's kill, stall and outages its one
      // process: one that finds its slot busy waits its turn rather than being skipped (a seed
      // once scheduled a kind's only strike inside another's, and the run then proved nothing
      // about that kind). A kill of another busy target is skipped: that kind was struck by
      // the fault that holds it.
      while ((slot === 'network' || slot === 'sandbox-a' || slot === DOUBLE_PSP) && busy.has(slot)) await sleep(100);
      if (busy.has(slot)) {
        skipped[fault.kind] = (skipped[fault.kind] ?? 0) + 1;
        return;
      }
      busy.add(slot);
      onStart?.();
      try {
        let struck = true;
        switch (fault.kind) {
          case 'kill-worker':
            struck = await worker.kill(fault.durationMs);
            break;
          case 'kill-api':
            struck = await apis[fault.target]!.kill(fault.durationMs);
            break;
          case 'kill-relay':
            struck = await relay.kill(fault.durationMs);
            break;
          case 'kill-sandbox':
            struck = await sandbox.kill(fault.durationMs);
            break;
          case 'stall-sandbox':
            await sandbox.whenUp();
            struck = await sandbox.stall(fault.durationMs);
            break;
          case 'outage-unavailable':
          case 'outage-down':
          case 'outage-declining':
            await sandbox.whenUp(); // after a kill, once it is back
            await untilDone('sandbox-a outage', () => setOutage(fault.kind.slice('outage-'.length) as 'unavailable' | 'down' | 'declining'));
            try {
              await sleep(fault.durationMs);
            } finally {
              await untilDone('sandbox-a outage end', () => setOutage('none'));
            }
            break;
          case 'double-outage-unavailable':
          case 'double-outage-down':
          case 'double-lose-answers': {
            const mode = fault.kind === 'double-lose-answers' ? 'lose-answers' : fault.kind.slice('double-outage-'.length);
            // Down, the double listens to nothing, its control route included: it is told for how long.
            const down = mode === 'down';
            await untilDone(`${DOUBLE_PSP} outage`, () => doubleControl('POST', '/_sandbox/outage', down ? { mode, for_ms: fault.durationMs } : { mode }));
            try {
              await sleep(fault.durationMs);
            } finally {
              if (down) await untilDone(`${DOUBLE_PSP} listening again`, () => doubleControl('GET', '/healthz'));
              else await untilDone(`${DOUBLE_PSP} outage end`, () => doubleControl('POST', '/_sandbox/outage', { mode: 'none' }));
            }
            break;
          }
          case 'postgres-stop':
            postgresDown = true;
            await pg.stop();
            await sleep(fault.durationMs);
            await untilDone('PostgreSQL start', () => pg.start());
            postgresDown = false;
            break;
          case 'temporal-restart':
            temporalDown = true;
            await temporalServer?.stop('SIGKILL');
            temporalServer = null;
            await sleep(fault.durationMs);
            temporalServer = await untilDone('Temporal start', startTemporal);
            temporalDown = false;
            break;
          case 'kill-temporal-node': {
            const node = cluster?.nodes[fault.target];
            if (!node) {
              struck = false;
              break;
            }
            temporalDown = true;
            try {
              await node.stop('SIGKILL');
              await sleep(fault.durationMs);
              // A start that did not get as far as serving the namespace leaves a process behind: killed before the next try.
              await untilDone(`${node.name} start`, async () => {
                if (!node.hasExited()) await node.stop('SIGKILL');
                await node.start();
              });
            } finally {
              temporalDown = false;
            }
            break;
          }
          default:
            proxy.set(
              fault.kind === 'network-delay'
                ? { kind: 'delay', ms: fault.delayMs ?? 1000 }
                : fault.kind === 'network-reset'
                  ? { kind: 'reset' }
                  : fault.kind === 'network-partition'
                    ? { kind: 'partition' }
                    : { kind: 'drop-responses' },
            );
            await sleep(fault.durationMs);
            proxy.set({ kind: 'pass' });
        }
        if (struck) injected[fault.kind]++;
        else skipped[fault.kind] = (skipped[fault.kind] ?? 0) + 1;
      } finally {
        busy.delete(slot);
      }
    };

    return {
      sql,
      pspSql,
      pspUrls: Object.fromEntries(PSPS.map((name) => [name, psps[name].url])) as Record<PspName, string>,
      /** The PSP double (DOUBLE_PSP): its URL, its census, and its lost webhooks sent again. */
      double: {
        name: DOUBLE_PSP,
        url: doubleUrl,
        census: (): Promise<DoubleCensusPayment[]> => readDoubleCensus(doubleUrl),
        /** Its webhook faults off (the run's end: nothing more is lost), then every lost webhook sent again. */
        async settle(): Promise<void> {
          await untilDone(`${DOUBLE_PSP} webhook faults off`, () => doubleControl('POST', '/_sandbox/webhook_faults', {}));
          doubleRedelivered += await untilDone(`${DOUBLE_PSP} redelivery`, redeliverLost);
        },
        redeliverLost: async () => (doubleRedelivered += await redeliverLost()),
        /** How many of its payments' lost webhooks were sent again. */
        redelivered: () => doubleRedelivered,
      },
      temporal,
      merchant,
      proxy,
      apiUrls,
      /** The first tenant's (routed sandbox-a, then sandbox-b). */
      apiKey: tenant.apiKey,
      tenantId: tenant.id,
      tenants,
      taskQueue: TASK_QUEUE,
      supervisors,
      workerKillPoints,
      injected,
      skipped,
      strike,
      /** Everything back: network clean, PostgreSQL and Temporal up, every process running. */
      async restore(): Promise<void> {
        proxy.set({ kind: 'pass' });
        while (busy.size > 0 || postgresDown || temporalDown) await sleep(200);
        await Promise.all(supervisors.map((s) => s.whenUp()));
      },
      /** Replaces an armed worker with an unarmed one, so the system can go quiet. */
      async disarmWorker(): Promise<void> {
        if (workerKillPoints[workerKillPoints.length - 1]) await worker.kill(0);
        await worker.whenUp();
      },
      teardown,
    };
  } catch (error) {
    await teardown();
    throw error;
  }
}

export type ChaosEnvironment = Awaited<ReturnType<typeof startEnvironment>>;
