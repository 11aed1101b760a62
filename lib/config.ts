import { z } from 'zod';
import { parsePayloadKeys, type PayloadKey } from './payload-codec';

/** The development admin token: printed in the README, so never accepted in production or off loopback. */
export const DEV_ADMIN_TOKEN = 'dev-admin-token-change-me';

/** Long, not the default, and not one character repeated: what a generated secret looks like. */
export function isStrongAdminToken(token: string | undefined): token is string {
  return token !== undefined && token.length >= 32 && token !== DEV_ADMIN_TOKEN && new Set(token).size >= 8;
}

/** Whether an address to listen on is loopback only. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Refuses to serve the development admin token beyond this machine: anyone who read the
 * README could administer tenants. Throws with the reason; the process does not start.
 */
export function assertSafeToListen(config: Pick<Config, 'HOST' | 'ADMIN_TOKEN'>): void {
  if (!isLoopbackHost(config.HOST) && config.ADMIN_TOKEN === DEV_ADMIN_TOKEN) {
    throw new Error(`refusing to listen on ${config.HOST} with the development ADMIN_TOKEN; set ADMIN_TOKEN to a secret (openssl rand -hex 32) or listen on 127.0.0.1`);
  }
}

const seconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/**
 * The environment, parsed once at start-up. Every process (API, worker, dev launcher) reads
 * the same variables; each uses the ones it needs. Documented in the README.
 */
const schema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    DATABASE_URL: z.string().min(1).default('postgres://postgres@127.0.0.1:5432/payments'),
    DATABASE_POOL_SIZE: z.coerce.number().int().positive().default(10),
    TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
    /** Which Temporal `npm start`, the tests and the benchmark run: dev server, local cluster, or none (external). */
    TEMPORAL_MODE: z.enum(['dev', 'cluster', 'external']).default('dev'),
    /** mTLS to Temporal: client certificate and key (PEM files), and the CA that signed the server's certificate. */
    TEMPORAL_TLS_CERT: z.string().min(1).optional(),
    TEMPORAL_TLS_KEY: z.string().min(1).optional(),
    TEMPORAL_TLS_CA: z.string().min(1).optional(),
    /** The name the server's certificate must carry, when it is not the address's host. */
    TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
    /** TLS without a client certificate (the system's root CAs). */
    TEMPORAL_TLS: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    /** Temporal Cloud API key (sent as a bearer token, over TLS). */
    TEMPORAL_API_KEY: z.string().min(1).optional(),
    TASK_QUEUE: z.string().min(1).default('payments'),
    /**
     * Bearer token of the /admin endpoints. A development default is used outside production,
     * and only on a loopback address (api/main.ts refuses anything else). In production it
     * must be given, at least 32 characters, and not the default.
     */
    ADMIN_TOKEN: z.string().min(16).optional(),
    /** The address the API and the worker's /metrics listen on: loopback unless set (0.0.0.0 in a container). */
    HOST: z.string().min(1).default('127.0.0.1'),
    /** Bearer token of the API's /metrics (the admin token also works); unset: only the admin token. */
    METRICS_TOKEN: z.string().min(16).optional(),
    /** Internal addresses webhooks may go to anyway: comma-separated CIDRs (e.g. "10.1.0.0/16"). Empty: none. */
    WEBHOOK_ALLOWED_CIDRS: z.string().default(''),
    /** Plain http webhook URLs (development only): "true" to allow. */
    WEBHOOK_ALLOW_HTTP: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    /** Default per-tenant rate limits (requests per second), each API process; PATCH /admin/tenants/{id} overrides per tenant. */
    RATE_LIMIT_READ_PER_SECOND: z.coerce.number().int().positive().default(100),
    RATE_LIMIT_WRITE_PER_SECOND: z.coerce.number().int().positive().default(100),
    /** Failed authentications allowed per client address per minute, each API process. */
    AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().positive().default(30),
    /** How long an idempotency key's outcome is remembered (default 72 h, above any sane retry horizon). */
    IDEMPOTENCY_RETENTION_SECONDS: seconds(72 * 3600),
    /** How long a request waits for its operation's outcome before answering 202. */
    IDEMPOTENCY_WAIT_MS: z.coerce.number().int().min(0).default(5000),
    /** Upper bound on any one call to Temporal from the API; past it the API answers 503. */
    TEMPORAL_RPC_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
    /** How long a manual-capture authorization may wait before it is voided (default 7 days). */
    AUTHORIZATION_WINDOW_SECONDS: seconds(7 * 24 * 3600),
    /** How long a customer has to finish a 3-D Secure challenge before the payment expires (default 15 min). */
    AUTHENTICATION_WINDOW_SECONDS: seconds(900),
    /** How long an asynchronous method's outcome (a bank debit) is awaited before the payment expires (default 7 days). */
    ASYNC_SETTLEMENT_WINDOW_SECONDS: seconds(7 * 24 * 3600),
    /** While a payment waits, the workflow polls the PSP: first after this long, then doubling… */
    PROVIDER_POLL_FIRST_MS: z.coerce.number().int().positive().default(30_000),
    /** …up to this interval. */
    PROVIDER_POLL_MAX_MS: z.coerce.number().int().positive().default(3_600_000),
    /** Which PSP the worker calls: the sandbox (PROVIDER_URL) or Stripe (STRIPE_API_KEY). */
    PROVIDER: z.enum(['sandbox', 'stripe']).default('sandbox'),
    STRIPE_API_KEY: z.string().min(1).optional(),
    PROVIDER_URL: z.string().url().default('http://127.0.0.1:4010'),
    /** The secret the sandbox signs its webhooks with (Sandbox-Signature); npm start generates one. Unset: sandbox webhooks are refused. */
    SANDBOX_WEBHOOK_SECRET: z.string().min(16).optional(),
    /** Stripe's signing secret of the webhook endpoint ('whsec_…'); unset: Stripe webhooks are refused. */
    STRIPE_WEBHOOK_SECRET: z.string().min(1).optional(),
    /** One provider call; past it the outcome is unknown and the next attempt looks it up first. */
    PROVIDER_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
    /** Outbox relay: first retry delay, doubled per attempt up to the cap, for this many attempts. */
    WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().positive().default(5_000),
    WEBHOOK_RETRY_MAX_MS: z.coerce.number().int().positive().default(3_600_000),
    WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().positive().default(12),
    WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
    /** Worker: its /metrics endpoint (its own metrics followed by the Temporal SDK's). */
    WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
    /** Worker: where the Temporal SDK's Prometheus exporter binds (scraped through WORKER_METRICS_PORT). */
    TEMPORAL_SDK_METRICS_ADDRESS: z.string().min(1).default('127.0.0.1:9465'),
    /** The hourly reconciliation's Schedule covers this many whole hours before the current one. */
    RECONCILIATION_LOOKBACK_HOURS: z.coerce.number().int().min(1).max(48).default(3),
    /** The Schedules of the retention job and the abandoned-run sweeper: every this many seconds. */
    RETENTION_JOB_INTERVAL_SECONDS: seconds(300),
    /** Worker: create or update the periodic jobs' Temporal Schedules at start (`off`: leave them to `npm run schedules`). */
    WORKER_SCHEDULES: z.enum(['on', 'off']).default('on'),
    /** Worker: on SIGTERM, how long running activities may take to finish before they are cancelled. */
    WORKER_SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(0).default(30),
    /** Worker: workflows kept in memory between tasks (sticky cache); each costs a V8 context's memory. */
    WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).optional(),
    /** Worker: activities and workflow tasks run at once (slots). */
    WORKER_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().positive().optional(),
    WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: z.coerce.number().int().min(2).optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** AES-256 keys of the Temporal payload codec, `id:base64key,…`: the first encrypts, all decrypt. */
    TEMPORAL_PAYLOAD_KEYS: z.string().optional(),
    /** `off` writes Temporal payloads in clear; production refuses to run without keys otherwise. */
    TEMPORAL_PAYLOAD_ENCRYPTION: z.enum(['on', 'off']).default('on'),
    /** The codec server (lib/codec-server.ts) the Web UI calls to show decoded payloads. */
    CODEC_PORT: z.coerce.number().int().min(0).max(65535).default(8888),
    /** When set, the codec server answers only requests bearing it (`Authorization: Bearer …`). */
    CODEC_TOKEN: z.string().min(16).optional(),
    /** Web UI origins allowed to call the codec server from a browser, comma-separated. */
    CODEC_CORS_ORIGINS: z.string().default('http://127.0.0.1:8233,http://localhost:8233'),
  })
  .transform((env, ctx) => {
    if (env.PROVIDER === 'stripe' && !env.STRIPE_API_KEY) {
      ctx.addIssue({ code: 'custom', path: ['STRIPE_API_KEY'], message: 'STRIPE_API_KEY is required with PROVIDER=stripe' });
      return z.NEVER;
    }
    if (Boolean(env.TEMPORAL_TLS_CERT) !== Boolean(env.TEMPORAL_TLS_KEY)) {
      ctx.addIssue({ code: 'custom', path: ['TEMPORAL_TLS_CERT'], message: 'TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together' });
      return z.NEVER;
    }
    if (env.NODE_ENV === 'production' && !isStrongAdminToken(env.ADMIN_TOKEN)) {
      ctx.addIssue({
        code: 'custom',
        path: ['ADMIN_TOKEN'],
        message: 'in production ADMIN_TOKEN must be set to a long random secret: 32+ characters, not the development default (openssl rand -hex 32)',
      });
      return z.NEVER;
    }
    let payloadKeys: PayloadKey[] | null = null;
    if (env.TEMPORAL_PAYLOAD_ENCRYPTION === 'on' && env.TEMPORAL_PAYLOAD_KEYS) {
      try {
        payloadKeys = parsePayloadKeys(env.TEMPORAL_PAYLOAD_KEYS);
      } catch (error) {
        ctx.addIssue({ code: 'custom', path: ['TEMPORAL_PAYLOAD_KEYS'], message: (error as Error).message });
        return z.NEVER;
      }
    }
    if (env.NODE_ENV === 'production' && env.TEMPORAL_PAYLOAD_ENCRYPTION === 'on' && !payloadKeys) {
      ctx.addIssue({
        code: 'custom',
        path: ['TEMPORAL_PAYLOAD_KEYS'],
        message: 'TEMPORAL_PAYLOAD_KEYS is required in production (or TEMPORAL_PAYLOAD_ENCRYPTION=off to write Temporal payloads in clear)',
      });
      return z.NEVER;
    }
    return {
      ...env,
      ADMIN_TOKEN: env.ADMIN_TOKEN ?? DEV_ADMIN_TOKEN,
      STRIPE_API_KEY: env.STRIPE_API_KEY ?? null,
      // Every key present (null: not set), so the parsed config lists every variable it reads.
      TEMPORAL_TLS_CERT: env.TEMPORAL_TLS_CERT ?? null,
      TEMPORAL_TLS_KEY: env.TEMPORAL_TLS_KEY ?? null,
      TEMPORAL_TLS_CA: env.TEMPORAL_TLS_CA ?? null,
      TEMPORAL_TLS_SERVER_NAME: env.TEMPORAL_TLS_SERVER_NAME ?? null,
      TEMPORAL_API_KEY: env.TEMPORAL_API_KEY ?? null,
      WORKER_MAX_CACHED_WORKFLOWS: env.WORKER_MAX_CACHED_WORKFLOWS ?? null,
      WORKER_MAX_CONCURRENT_ACTIVITIES: env.WORKER_MAX_CONCURRENT_ACTIVITIES ?? null,
      WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: env.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS ?? null,
      METRICS_TOKEN: env.METRICS_TOKEN ?? null,
      /** null: payloads are written in clear (no keys outside production, or encryption off). */
      TEMPORAL_PAYLOAD_KEYS: payloadKeys,
      CODEC_TOKEN: env.CODEC_TOKEN ?? null,
      CODEC_CORS_ORIGINS: env.CODEC_CORS_ORIGINS.split(',').map((o) => o.trim()).filter(Boolean),
    };
  });

export type Config = z.output<typeof schema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  return parsed.data;
}
