import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSql } from '../db/connect';
import { serveHttp, type ListenerLimits } from '../lib/listener';
import { createSandboxApp } from './app';
import { noWebhookFaults, type SandboxDeps, type WebhookFaults } from './deps';
import { migrateSandbox } from './migrate';
import { advanceDisputes } from './disputes';
import { DEFAULT_NETWORK_KEY } from './network';
import { settleDueCharges, startPollingLoop } from './settlement';
import { WebhookDelivery } from './webhooks';

export interface StartSandboxOptions {
  databaseUrl: string;
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  /** Timeouts, connection cap and Host names of the listener (lib/listener.ts); its defaults when omitted. */
  limits?: ListenerLimits;
  slowMs?: number;
  flakyFailures?: number;
  /** Forget idempotency keys after this many seconds (as card PSPs do after 24 hours); never when omitted. */
  idempotencyKeyTtlSeconds?: number | null;
  /** pm_sepa_debit*: processing for this long, then settled (default 5000). */
  asyncSettleMs?: number;
  /** Balance transactions are 'available' this long after they are made (default 2 days). */
  availableAfterMs?: number;
  /** Where events are POSTed, signed with the secret; omitted: they are kept, not sent (setWebhook later). */
  webhook?: { url: string; secret: string } | null;
  webhookFaults?: Partial<WebhookFaults>;
  /** Webhook retries: first delay, doubled per attempt up to the cap (defaults 500 ms, 30 s); one POST's timeout (5 s). */
  webhookRetryBaseMs?: number;
  webhookRetryMaxMs?: number;
  webhookTimeoutMs?: number;
  /** pm_card_createDispute*: the dispute opens this long after the capture (default 3000). */
  disputeAfterMs?: number;
  /** Submitted evidence is decided this long after submission (default 3000). */
  disputeDecisionMs?: number;
  /** A dispute's evidence is due this many seconds after it opens (default 7 days). */
  disputeEvidenceSeconds?: number;
  /** How often the settlement, dispute and delivery loops look for due work (default 200 ms). */
  pollMs?: number;
  /** The base of challenge URLs (default: the URL it listens on). */
  publicUrl?: string;
  /** The card network's key, shared by every sandbox on the network (default: network.ts DEFAULT_NETWORK_KEY). */
  networkKey?: string;
  /** The card network's database, shared by the sandboxes on one network (default: databaseUrl). */
  networkDatabaseUrl?: string;
  /** Multiplies the network's durations (default 1; tests as RECOVERY_TIME_SCALE). */
  networkTimeScale?: number;
}

export interface RunningSandbox {
  url: string;
  /** Points the webhooks elsewhere (or nowhere): events made from now on go there. */
  setWebhook(webhook: { url: string; secret: string } | null): void;
  close(): Promise<void>;
}

/** Migrates the sandbox schema and serves the sandbox; used by main.ts, tests and the dev launcher. */
export async function startSandbox(options: StartSandboxOptions): Promise<RunningSandbox> {
  // Its own pool: 20 concurrent same-key requests each hold a connection while they wait
  // for the winner's commit, so a pool that small would only queue them, never deadlock.
  const sql = createSql(options.databaseUrl, { max: 20, applicationName: 'payment-sandbox' });
  try {
    await migrateSandbox(sql);
  } catch (error) {
    await sql.end();
    throw error;
  }

  // The network's own pool when it lives elsewhere; its migrations are the sandbox's (the table is in every sandbox schema).
  const networkSql = options.networkDatabaseUrl && options.networkDatabaseUrl !== options.databaseUrl ? createSql(options.networkDatabaseUrl, { max: 5, applicationName: 'payment-sandbox-network' }) : sql;
  try {
    if (networkSql !== sql) await migrateSandbox(networkSql);
  } catch (error) {
    await Promise.all([sql.end(), networkSql.end()]);
    throw error;
  }
  const pollMs = options.pollMs ?? 200;
  const logError = (what: string) => (error: unknown) => console.error(`sandbox: ${what} failed`, error);
  const deps: SandboxDeps = {
    sql,
    networkSql,
    config: {
      slowMs: options.slowMs ?? 3000,
      flakyFailures: options.flakyFailures ?? 2,
      idempotencyKeyTtlSeconds: options.idempotencyKeyTtlSeconds ?? null,
      asyncSettleMs: options.asyncSettleMs ?? 5000,
      availableAfterMs: options.availableAfterMs ?? 2 * 24 * 3600 * 1000,
      disputeAfterMs: options.disputeAfterMs ?? 3000,
      disputeDecisionMs: options.disputeDecisionMs ?? 3000,
      disputeEvidenceSeconds: options.disputeEvidenceSeconds ?? 7 * 24 * 3600,
      networkKey: options.networkKey ?? DEFAULT_NETWORK_KEY,
      networkTimeScale: options.networkTimeScale ?? 1,
    },
    runtime: {
      publicUrl: options.publicUrl ?? '',
      webhook: options.webhook ?? null,
      faults: { ...noWebhookFaults, ...options.webhookFaults },
      outage: 'none',
      wakeDelivery: () => delivery.wake(),
    },
  };
  const delivery = new WebhookDelivery(
    deps,
    { pollMs, retryBaseMs: options.webhookRetryBaseMs ?? 500, retryMaxMs: options.webhookRetryMaxMs ?? 30_000, timeoutMs: options.webhookTimeoutMs ?? 5000 },
    logError('webhook delivery'),
  );
  const app = createSandboxApp(deps, delivery);
  const host = options.host ?? '127.0.0.1';
  const server = await serveHttp(app.fetch, { port: options.port ?? 4010, hostname: host, limits: options.limits });
  const { port } = server.address() as AddressInfo;
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = `http://${urlHost}:${port}`;
  deps.runtime.publicUrl ||= url;
  delivery.start();
  const settlement = startPollingLoop(() => settleDueCharges(deps), pollMs, logError('settlement'));
  const disputes = startPollingLoop(() => advanceDisputes(deps), pollMs, logError('disputes'));

  return {
    url,
    setWebhook(webhook) {
      deps.runtime.webhook = webhook;
      delivery.wake();
    },
    async close() {
      await settlement.stop();
      await disputes.stop();
      await delivery.stop();
      await new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Held-open lost responses would keep close() waiting forever; dropping the
        // sockets aborts them, exactly as a crash of a real PSP would.
        server.closeAllConnections();
      });
      await sql.end({ timeout: 5 });
      if (networkSql !== sql) await networkSql.end({ timeout: 5 });
    },
  };
}
