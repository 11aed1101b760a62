import { z } from 'zod';
import { noWebhookFaults } from './deps';
import { loadListenerConfig } from '../lib/config';
import { listenerLimits } from '../lib/listener';
import { startSandbox } from './server';
import { parseWebhookFaults } from './webhooks';

const env = z
  .object({
    DATABASE_URL: z.string().min(1).default('postgres://postgres@127.0.0.1:5432/payments'),
    SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
    SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(4010),
    SANDBOX_SLOW_MS: z.coerce.number().int().min(0).default(3000),
    SANDBOX_FLAKY_FAILURES: z.coerce.number().int().min(0).default(2),
    /** Unset: keys are remembered forever. */
    SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS: z.coerce.number().int().positive().optional(),
    /** pm_sepa_debit*: how long a charge is processing before it settles. */
    SANDBOX_ASYNC_SETTLE_MS: z.coerce.number().int().min(0).default(5000),
    /** pm_card_createDispute*: how long after the capture the card network opens its dispute. */
    SANDBOX_DISPUTE_AFTER_MS: z.coerce.number().int().min(0).default(3000),
    /** How long after evidence is submitted the network decides. */
    SANDBOX_DISPUTE_DECISION_MS: z.coerce.number().int().min(0).default(3000),
    /** How long a dispute waits for evidence before it is lost. */
    SANDBOX_DISPUTE_EVIDENCE_SECONDS: z.coerce.number().int().positive().default(7 * 24 * 3600),
    /** Where the sandbox POSTs its signed events (the orchestrator's /provider_webhooks/sandbox); unset: kept, not sent. */
    SANDBOX_WEBHOOK_URL: z.url({ protocol: /^https?$/ }).optional(),
    /** The HMAC secret of the Sandbox-Signature header; required with SANDBOX_WEBHOOK_URL. */
    SANDBOX_WEBHOOK_SECRET: z.string().min(16).optional(),
    /** e.g. `duplicate=0.3,reorder=0.2,delay_ms=2000,loss=0.1` (also POST /_sandbox/webhook_faults). */
    SANDBOX_WEBHOOK_FAULTS: z.string().default(''),
    /** The base of challenge URLs when the sandbox is reached under another address than it listens on. */
    SANDBOX_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
    /** The simulated card network's key: every sandbox that should accept another's network transaction ids is given the same (sandbox/network.ts). */
    SANDBOX_NETWORK_KEY: z.string().min(16).optional(),
    /** The card network's database, shared by the sandboxes of one network (default: DATABASE_URL, this sandbox's own). */
    SANDBOX_NETWORK_DATABASE_URL: z.string().min(1).optional(),
    /** Multiplies the network's durations (advice waits, the 24-hour and 30-day windows); as RECOVERY_TIME_SCALE. */
    SANDBOX_NETWORK_TIME_SCALE: z.coerce.number().positive().max(1).default(1),
    /** The names clients reach it by (Host check); with the other HTTP_* listener settings read by lib/config.ts loadListenerConfig. */
    HTTP_ALLOWED_HOSTS: z.string().optional(),
  })
  .refine((env) => !env.SANDBOX_WEBHOOK_URL || env.SANDBOX_WEBHOOK_SECRET, {
    message: 'SANDBOX_WEBHOOK_SECRET (16+ characters) is required with SANDBOX_WEBHOOK_URL',
    path: ['SANDBOX_WEBHOOK_SECRET'],
  })
  .parse(process.env);

const sandbox = await startSandbox({
  databaseUrl: env.DATABASE_URL,
  host: env.SANDBOX_HOST,
  port: env.SANDBOX_PORT,
  limits: listenerLimits(loadListenerConfig(process.env, env.SANDBOX_HOST)),
  slowMs: env.SANDBOX_SLOW_MS,
  flakyFailures: env.SANDBOX_FLAKY_FAILURES,
  idempotencyKeyTtlSeconds: env.SANDBOX_IDEMPOTENCY_KEY_TTL_SECONDS ?? null,
  asyncSettleMs: env.SANDBOX_ASYNC_SETTLE_MS,
  disputeAfterMs: env.SANDBOX_DISPUTE_AFTER_MS,
  disputeDecisionMs: env.SANDBOX_DISPUTE_DECISION_MS,
  disputeEvidenceSeconds: env.SANDBOX_DISPUTE_EVIDENCE_SECONDS,
  webhook: env.SANDBOX_WEBHOOK_URL ? { url: env.SANDBOX_WEBHOOK_URL, secret: env.SANDBOX_WEBHOOK_SECRET! } : null,
  webhookFaults: parseWebhookFaults(env.SANDBOX_WEBHOOK_FAULTS, noWebhookFaults),
  ...(env.SANDBOX_PUBLIC_URL ? { publicUrl: env.SANDBOX_PUBLIC_URL.replace(/\/+$/, '') } : {}),
  ...(env.SANDBOX_NETWORK_KEY ? { networkKey: env.SANDBOX_NETWORK_KEY } : {}),
  ...(env.SANDBOX_NETWORK_DATABASE_URL ? { networkDatabaseUrl: env.SANDBOX_NETWORK_DATABASE_URL } : {}),
  networkTimeScale: env.SANDBOX_NETWORK_TIME_SCALE,
});
console.log(`provider sandbox listening on ${sandbox.url}${env.SANDBOX_WEBHOOK_URL ? `; webhooks to ${env.SANDBOX_WEBHOOK_URL}` : ''}`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    sandbox.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('provider sandbox: error while stopping', error);
        process.exit(1);
      },
    );
  });
}
