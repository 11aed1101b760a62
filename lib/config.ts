import { z } from 'zod';
import { paymentWindows } from '../domain/payments';
import { WAIT_DEFAULTS } from '../shared/payments';
import { DISPUTE_DEFAULTS } from '../shared/disputes';
import { parsePayloadKeys, type PayloadKey } from './payload-codec';
import { knownProviderKinds, parseProvidersList, providerConnection, providerSettingVariable, type ProviderConnection } from '../provider/registry';
import { cidrBlockList } from './webhook-target';
import { FeeSchedule } from '../domain/routing-fees';

/** The development admin token: printed in the README, so never accepted in production or off loopback. */
export const DEV_ADMIN_TOKEN = 'dev-admin-token-change-me';

/** Long, not the default, and not one character repeated: what a generated secret looks like. */
export function isStrongAdminToken(token: string | undefined): token is string {
  return token !== undefined && token.length >= 32 && token !== DEV_ADMIN_TOKEN && new Set(token).size >= 8;
}

/** Names of this machine: what a developer's browser or a local client sends as `Host`. */
export const LOOPBACK_HOST_NAMES = ['localhost', '127.0.0.1', '::1'];

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

/**
 * Refuses to run the codec server open beyond a developer's machine: whoever can call /decode
 * reads every payment, and /encode writes under the live key. In production (NODE_ENV=production,
 * or any address other than loopback) it needs a long random CODEC_TOKEN and an explicit list of
 * the Web UI's origins. Throws with the reason; the process does not start.
 */
export function assertSafeCodecServer(config: Pick<Config, 'NODE_ENV' | 'HOST' | 'CODEC_TOKEN' | 'CODEC_CORS_ORIGINS'>): void {
  if (config.NODE_ENV !== 'production' && isLoopbackHost(config.HOST)) return;
  const where = config.NODE_ENV === 'production' ? 'in production' : `on ${config.HOST}`;
  if (!isStrongAdminToken(config.CODEC_TOKEN ?? undefined)) {
    throw new Error(`refusing to run the codec server ${where} without CODEC_TOKEN: 32+ random characters (openssl rand -hex 32), sent as "Authorization: Bearer <CODEC_TOKEN>"`);
  }
  if (!config.CODEC_CORS_ORIGINS?.length) {
    throw new Error(`refusing to run the codec server ${where} without CODEC_CORS_ORIGINS: the Web UI's origin(s), e.g. https://temporal-ui.example.com`);
  }
}

/** An origin as a browser sends it: scheme, host, optional port; no path, no wildcard. */
const originPattern = /^https?:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/;

const DEV_CODEC_CORS_ORIGINS = 'http://127.0.0.1:8233,http://localhost:8233';

/** The Web UI origins the codec server admits: CODEC_CORS_ORIGINS, or the dev UI's outside production. */
export function codecCorsOrigins(config: Pick<Config, 'CODEC_CORS_ORIGINS'>): string[] {
  return config.CODEC_CORS_ORIGINS ?? DEV_CODEC_CORS_ORIGINS.split(',');
}

/** A variable holding JSON, parsed then validated by `schema`; a refusal names the JSON path. */
function jsonVariable<T extends z.ZodType>(schema: T) {
  return z
    .string()
    .transform((text, ctx): unknown => {
      try {
        return JSON.parse(text);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `not JSON: ${(error as Error).message}` });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** A PSP's calls per second across the fleet (db/routing.ts takeCall), and the most taken at once after a quiet spell (default: one second's worth). */
const ProviderCallLimit = z.strictObject({
  calls_per_second: z.number().positive('calls_per_second is positive').max(100_000),
  burst: z.number().int('burst is a whole number of calls').positive('burst is positive').max(1_000_000).optional(),
});

const seconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const milliseconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/**
 * The environment, parsed once at start-up. Every process (API, worker, dev launcher) reads
 * the same variables; each uses the ones it needs. Documented in docs/operating.md.
 */
const variables = z.object({
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
   * Worker Versioning (docs/versioning.md): `on`, the worker polls as one version of the
   * Worker Deployment TEMPORAL_DEPLOYMENT_NAME and runs only the workflows routed to that
   * version; `off`, an unversioned worker (the test suite's workers on their own task queues).
   */
  TEMPORAL_WORKER_VERSIONING: z.enum(['on', 'off']).default('on'),
  /** The Worker Deployment every version of this worker belongs to (no '.' or ':'). */
  TEMPORAL_DEPLOYMENT_NAME: z
    .string()
    .min(1)
    .regex(/^[^.:]+$/, "a deployment name cannot contain '.' or ':'")
    .default('payment-orchestrator'),
  /**
   * This worker's version (build id) within the deployment. Unset: `<package.json version>-<first
   * 12 hex digits of the SHA-256 of the workflow bundle>` (worker/versioning.ts), so changed
   * workflow code is always a new version and unchanged code always the same one.
   */
  TEMPORAL_WORKER_BUILD_ID: z.string().min(1).max(255).optional(),
  /**
   * Bearer token of the /admin endpoints. A development default is used outside production,
   * and only on a loopback address (api/process.ts refuses anything else). In production it
   * must be given, at least 32 characters, and not the default.
   */
  ADMIN_TOKEN: z.string().min(16).optional(),
  /**
   * The API's address as customers' browsers reach it (scheme, host, port, optional path): a PSP
   * whose challenge comes back to us (challengeReturn `orchestrator`) is given `<API_PUBLIC_URL>/return/{payment_id}` as
   * the payment's returnUrl. Unset: the loopback API, http://127.0.0.1:<PORT> (development).
   */
  API_PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  /**
   * The operator console's links (docs/console.md), shown only to operators without a tenant: the
   * Temporal Web UI's base URL (a payment links to `<url>/namespaces/<namespace>/workflows/<workflow id>`)
   * and a trace viewer's (a payment links to `<url>/<trace id>`, e.g. Jaeger's `http://host:16686/trace`). Unset: no link.
   */
  CONSOLE_TEMPORAL_UI_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  CONSOLE_TRACE_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
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
  /**
   * The reverse proxies in front of the API, comma-separated CIDRs or addresses. A request whose
   * socket comes from one of them is counted under the client address the proxies recorded in
   * X-Forwarded-For (the nearest hop that is not a trusted proxy). Empty: the socket's address,
   * and X-Forwarded-For is ignored (anyone can write it).
   */
  TRUSTED_PROXIES: z.string().default(''),
  /** How long an idempotency key's outcome is remembered (default 72 h, above any sane retry horizon). */
  IDEMPOTENCY_RETENTION_SECONDS: seconds(72 * 3600),
  /** How long a request waits for its operation's outcome before answering 202. */
  IDEMPOTENCY_WAIT_MS: z.coerce.number().int().min(0).default(5000),
  /**
   * How the API learns a new payment's first answer: `notify`, the record's completion
   * NOTIFY (sent at the commit of the run's outcome transaction, after a plain start);
   * `update`, Update-With-Start (the start carries a firstAnswer update whose result is that
   * answer). bench/NOTES.md has the two measured side by side.
   */
  PAYMENT_ANSWER: z.enum(['notify', 'update']).default('notify'),
  /**
   * `on`: the API process also runs a payment worker (the worker process's, without the outbox
   * relay and the Schedules) and starts payments and refunds with eager start: Temporal answers
   * the start with the run's first workflow task, which this process's worker runs, instead of
   * handing it out through matching. The API then spends the first task's CPU; deploy it as part
   * of the workers' Worker Deployment (docs/scaling.md "Eager start"). `off`: the API only starts runs.
   */
  API_EAGER_START: z.enum(['on', 'off']).default('off'),
  /** Upper bound on any one call to Temporal from the API; past it the API answers 503. */
  TEMPORAL_RPC_TIMEOUT_MS: z.coerce.number().int().positive().default(5000),
  // The waiting windows: their keys and defaults are the lifecycle table's (domain/payments.ts paymentWindows).
  /** How long a manual-capture authorization may wait before it is voided (default 7 days). */
  AUTHORIZATION_WINDOW_SECONDS: seconds(paymentWindows.authorization.defaultSeconds),
  /** How long a customer has to finish a 3-D Secure challenge before the payment expires (default 15 min). */
  AUTHENTICATION_WINDOW_SECONDS: seconds(paymentWindows.authentication.defaultSeconds),
  /** How long an asynchronous method's outcome (a bank debit) is awaited before the payment expires (default 7 days). */
  ASYNC_SETTLEMENT_WINDOW_SECONDS: seconds(paymentWindows.settlement.defaultSeconds),
  /** While a payment waits, the workflow polls the PSP: first after this long, then doubling… */
  PROVIDER_POLL_FIRST_MS: z.coerce.number().int().positive().default(WAIT_DEFAULTS.statusPoll.firstMs),
  /** …up to this interval. */
  PROVIDER_POLL_MAX_MS: z.coerce.number().int().positive().default(WAIT_DEFAULTS.statusPoll.maxMs),
  /**
   * When a wait's window ends, how long the run keeps asking an unreachable PSP for the charge
   * before it decides without its answer (default 5 min: outlasts a PSP restart or a short outage).
   */
  PROVIDER_DECISION_GRACE_SECONDS: seconds(300),
  /**
   * A payment's run continues as new during a wait once it has taken this many updates, or its
   * history this many events (unset: PAYMENT_CONTINUE_AFTER in shared/payments.ts, well before
   * Temporal's limits). Set lower only to see it happen (tests).
   */
  PAYMENT_CONTINUE_AFTER_UPDATES: z.coerce.number().int().positive().optional(),
  PAYMENT_CONTINUE_AFTER_EVENTS: z.coerce.number().int().positive().optional(),
  /**
   * Multiplies every duration of the revenue recovery policy (domain/recovery.ts: the retry
   * schedule, the advice waits, the card's 24-hour and 30-day windows, the recovery window).
   * 1 in production; tests use e.g. 0.000277, so an hour is a second.
   */
  RECOVERY_TIME_SCALE: z.coerce.number().positive().max(1).default(1),
  /** The longest recovery window a payment gets, whatever its `recovery.window_days` asks (default 60 days). */
  RECOVERY_MAX_WINDOW_SECONDS: seconds(paymentWindows.recovery.defaultSeconds),
  /** When a dispute's evidence deadline nears, reminders (dispute.evidence_due_soon) this many seconds before it: a comma list. */
  DISPUTE_REMINDER_SECONDS: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'a comma list of whole seconds')
    .default(DISPUTE_DEFAULTS.reminderSeconds.join(','))
    .transform((list) => list.split(',').map(Number)),
  /** While a dispute is open its workflow asks the PSP this often (a lost webhook delays it by at most this). */
  DISPUTE_POLL_SECONDS: seconds(DISPUTE_DEFAULTS.pollSeconds),
  /** Evidence requests one dispute takes (POST /v1/disputes/{id}/evidence); past it: 409 dispute_evidence_limit. */
  DISPUTE_EVIDENCE_MAX_REQUESTS: z.coerce.number().int().positive().default(DISPUTE_DEFAULTS.evidenceMaxRequests),
  /** Bytes of evidence (the canonical JSON of each request's `evidence`, summed) one dispute takes; past it: 409 dispute_evidence_limit. */
  DISPUTE_EVIDENCE_MAX_BYTES: z.coerce.number().int().positive().default(DISPUTE_DEFAULTS.evidenceMaxBytes),
  /**
   * The PSPs, each named with its kind (provider/kinds.ts): `name=kind:url,…`, e.g.
   * `sandbox-a=sandbox:http://127.0.0.1:4010,sandbox-b=sandbox:http://127.0.0.1:4011,psp-eu=<kind>:https://psp.example`
   * (`name=kind` alone: the kind's default URL). Names: lowercase [a-z0-9-], unique. A missing or
   * unknown kind stops the process. Each connection's other settings (its kind's schema):
   * PROVIDER_<NAME>_<SETTING> (name upper-cased, `-` as `_`, e.g. PROVIDER_SANDBOX_B_WEBHOOK_SECRET),
   * else the kind-wide <KIND>_<SETTING> (SANDBOX_WEBHOOK_SECRET, <KIND>_API_KEY).
   * The first is the default (a payment that records no provider, and tenants without routing).
   * Unset: the one PSP of PROVIDER.
   */
  PROVIDERS: z.string().optional(),
  /** Without PROVIDERS: the one PSP's kind, also its name (e.g. `sandbox`). Unset, with PROVIDER_URL unset too: the development sandbox. */
  PROVIDER: z.string().optional(),
  /** Without PROVIDERS: the one PSP's URL (unset: its kind's default). */
  PROVIDER_URL: z.string().optional(),
  /**
   * What each PSP charges, for `routing.objective: "net"` (domain/routing-fees.ts): JSON,
   * `{"<provider>":{"<currency or *>":{"approval":{"bps":140,"fixed_minor":25},"attempt":{"bps":0,"fixed_minor":2}}}}`.
   * A tenant's `routing.fees` replaces a PSP's entry for its payments. Unset: no fees.
   */
  PROVIDER_FEES: jsonVariable(FeeSchedule).optional(),
  /**
   * Each PSP's calls per second across every worker and API process (db/routing.ts takeCall, a
   * token bucket in PostgreSQL): every call to a named PSP takes a token first and waits over the
   * limit (lib/provider-limits.ts). JSON, `{"<provider>":{"calls_per_second":50,"burst":100}}`.
   * A PSP not named: no limit.
   */
  PROVIDER_RATE_LIMITS: jsonVariable(z.record(z.string(), ProviderCallLimit)).optional(),
  /** One provider call; past it the outcome is unknown and the next attempt looks it up first. */
  PROVIDER_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  /**
   * Worker: the tries a PSP gets for one charge attempt (activities/provider-steps.ts
   * chargeAttempt): a transient failure (a timeout, a 5xx, a refused connection) is tried again
   * there under the same sub-key, with backoff, before the payment moves to its next candidate.
   */
  PROVIDER_TRANSIENT_TRIES: z.coerce.number().int().min(1).max(20).default(3),
  /**
   * Worker: a payment's charge budget, from its run's start (workflows/payments/charge.ts): after
   * the last candidate's transient failure the route starts again within it; past it, a payment
   * that certainly took no money fails `psp_unavailable`.
   */
  PAYMENT_CHARGE_BUDGET_SECONDS: seconds(60),
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
  // OpenTelemetry's standard variables (lib/tracing.ts reads them; validated here so that a bad one refuses to start).
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  OTEL_TRACES_SAMPLER: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).optional(),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  /** AES-256 keys of the Temporal payload codec, `id:base64key,…`: the first encrypts, all decrypt. */
  TEMPORAL_PAYLOAD_KEYS: z.string().optional(),
  /** `off` writes Temporal payloads in clear; production refuses to run without keys otherwise. */
  TEMPORAL_PAYLOAD_ENCRYPTION: z.enum(['on', 'off']).default('on'),
  /** The codec server (lib/codec-server.ts) the Web UI calls to show decoded payloads. */
  CODEC_PORT: z.coerce.number().int().min(0).max(65535).default(8888),
  /** When set, the codec server answers only requests bearing it (`Authorization: Bearer …`); required in production. */
  CODEC_TOKEN: z.string().min(16).optional(),
  /** Web UI origins allowed to call the codec server from a browser, comma-separated; required in production. */
  CODEC_CORS_ORIGINS: z.string().optional(),
  /** POST /encode (the UI encodes what an operator types into a signal or a start): off unless "true". */
  CODEC_ENABLE_ENCODE: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  /** The Web UI guard process (lib/ui-guard-main.ts): the port it listens on, in front of the UI. */
  UI_GUARD_PORT: z.coerce.number().int().min(0).max(65535).default(8233),
  /** … and the UI it forwards to, `host:port` (compose: temporal-ui:8080); the guard refuses to start without it. */
  UI_GUARD_TARGET: z
    .string()
    .regex(/^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'expected host:port')
    .refine((value) => Number(value.slice(value.lastIndexOf(':') + 1)) <= 65535, 'the port is above 65535')
    .optional(),
  /** "true" lets the Web UI terminate, cancel, signal, update, reset, start and run batches; read-only otherwise (it has no login). */
  TEMPORAL_UI_WRITE_ACTIONS: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  /** Every listener (API, codec server, sandbox, worker /metrics; lib/listener.ts): the whole request must arrive within this. */
  HTTP_REQUEST_TIMEOUT_MS: milliseconds(30_000),
  /** … and its headers within this (an idle or half-sent request is cut). */
  HTTP_HEADERS_TIMEOUT_MS: milliseconds(10_000),
  /** An idle keep-alive connection is closed after this. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: milliseconds(5_000),
  /** Connections each listener holds at once; more are dropped when accepted. */
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().positive().default(1_000),
  /** Host names the `Host` header may carry (DNS rebinding), comma-separated; default: the loopback names and HOST; `*`: any. */
  HTTP_ALLOWED_HOSTS: z.string().optional(),
});

/** Every variable the configuration reads (docs/operating.md documents each: test/unit/docs.test.ts). */
export const configVariables: readonly string[] = Object.keys(variables.shape);

const schema = variables.transform((env, ctx) => {
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
  try {
    cidrBlockList(env.TRUSTED_PROXIES, 'TRUSTED_PROXIES');
  } catch (error) {
    ctx.addIssue({ code: 'custom', path: ['TRUSTED_PROXIES'], message: (error as Error).message });
    return z.NEVER;
  }
  const corsOrigins = (env.CODEC_CORS_ORIGINS ?? DEV_CODEC_CORS_ORIGINS).split(',').map((o) => o.trim()).filter(Boolean);
  const badOrigin = corsOrigins.find((origin) => !originPattern.test(origin));
  if (badOrigin !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['CODEC_CORS_ORIGINS'], message: `"${badOrigin}" is not an origin (scheme://host[:port], no path, no wildcard)` });
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
    API_PUBLIC_URL: (env.API_PUBLIC_URL ?? `http://127.0.0.1:${env.PORT}`).replace(/\/+$/, ''),
    CONSOLE_TEMPORAL_UI_URL: env.CONSOLE_TEMPORAL_UI_URL?.replace(/\/+$/, '') ?? null,
    CONSOLE_TRACE_URL: env.CONSOLE_TRACE_URL?.replace(/\/+$/, '') ?? null,
    // Every key present (null: not set), so the parsed config lists every variable it reads.
    TEMPORAL_TLS_CERT: env.TEMPORAL_TLS_CERT ?? null,
    TEMPORAL_TLS_KEY: env.TEMPORAL_TLS_KEY ?? null,
    TEMPORAL_TLS_CA: env.TEMPORAL_TLS_CA ?? null,
    TEMPORAL_TLS_SERVER_NAME: env.TEMPORAL_TLS_SERVER_NAME ?? null,
    TEMPORAL_API_KEY: env.TEMPORAL_API_KEY ?? null,
    /** null: derived from the workflow bundle (worker/versioning.ts workerBuildId). */
    TEMPORAL_WORKER_BUILD_ID: env.TEMPORAL_WORKER_BUILD_ID ?? null,
    WORKER_MAX_CACHED_WORKFLOWS: env.WORKER_MAX_CACHED_WORKFLOWS ?? null,
    WORKER_MAX_CONCURRENT_ACTIVITIES: env.WORKER_MAX_CONCURRENT_ACTIVITIES ?? null,
    WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: env.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS ?? null,
    METRICS_TOKEN: env.METRICS_TOKEN ?? null,
    PAYMENT_CONTINUE_AFTER_UPDATES: env.PAYMENT_CONTINUE_AFTER_UPDATES ?? null,
    PAYMENT_CONTINUE_AFTER_EVENTS: env.PAYMENT_CONTINUE_AFTER_EVENTS ?? null,
    OTEL_EXPORTER_OTLP_ENDPOINT: env.OTEL_EXPORTER_OTLP_ENDPOINT ?? null,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? null,
    OTEL_TRACES_SAMPLER: env.OTEL_TRACES_SAMPLER ?? null,
    OTEL_TRACES_SAMPLER_ARG: env.OTEL_TRACES_SAMPLER_ARG ?? null,
    OTEL_SERVICE_NAME: env.OTEL_SERVICE_NAME ?? null,
    /** null: payloads are written in clear (no keys outside production, or encryption off). */
    TEMPORAL_PAYLOAD_KEYS: payloadKeys,
    CODEC_TOKEN: env.CODEC_TOKEN ?? null,
    UI_GUARD_TARGET: env.UI_GUARD_TARGET ?? null,
    /** null: not given (development: the dev UI's origins, codecCorsOrigins(); production refuses to start). */
    CODEC_CORS_ORIGINS: env.CODEC_CORS_ORIGINS === undefined ? null : corsOrigins,
    HTTP_ALLOWED_HOSTS: allowedHosts(env.HTTP_ALLOWED_HOSTS, env.HOST),
    PROVIDER: env.PROVIDER ?? null,
    PROVIDER_URL: env.PROVIDER_URL ?? null,
    PROVIDER_FEES: env.PROVIDER_FEES ?? null,
    PROVIDER_RATE_LIMITS: env.PROVIDER_RATE_LIMITS
      ? Object.fromEntries(Object.entries(env.PROVIDER_RATE_LIMITS).map(([name, l]) => [name, { perSecond: l.calls_per_second, burst: l.burst ?? Math.max(1, Math.ceil(l.calls_per_second)) }]))
      : null,
  };
});

/** HTTP_ALLOWED_HOSTS as a list; by default the loopback names and the address listened on (unless a wildcard). */
function allowedHosts(given: string | undefined, host: string): string[] {
  if (given !== undefined) return given.split(',').map((h) => h.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1')).filter(Boolean);
  const names = [...LOOPBACK_HOST_NAMES];
  if (host !== '0.0.0.0' && host !== '::' && !names.includes(host)) names.push(host.toLowerCase());
  return names;
}

export type { ProviderConnection };

export type Config = Omit<z.output<typeof schema>, 'PROVIDERS'> & {
  /** The configured PSPs in order (never empty): the first is the default. */
  PROVIDERS: ProviderConnection[];
};

/** The one PSP's kind when neither PROVIDERS, PROVIDER nor PROVIDER_URL is set: the development sandbox. */
const DEVELOPMENT_PROVIDER_KIND = 'sandbox';

/** The variable holding a provider's own webhook secret: PROVIDER_SANDBOX_A_WEBHOOK_SECRET for `sandbox-a`. */
export function providerWebhookSecretVariable(name: string): string {
  return providerSettingVariable(name, 'webhookSecret');
}

/**
 * PROVIDERS parsed, or the single PROVIDER (with PROVIDER_URL) when it is unset. Throws with
 * the variable and the reason: a malformed entry, a bad or repeated name, a missing or unknown
 * kind, or settings the kind refuses (a bad URL, a missing key).
 */
export function parseProviders(env: NodeJS.ProcessEnv, parsed: Pick<z.output<typeof schema>, 'PROVIDERS' | 'PROVIDER' | 'PROVIDER_URL'>): ProviderConnection[] {
  if (parsed.PROVIDERS !== undefined && parsed.PROVIDERS.trim() !== '') {
    try {
      return parseProvidersList(parsed.PROVIDERS, env);
    } catch (error) {
      throw new Error(`PROVIDERS: ${(error as Error).message}`);
    }
  }
  const url = parsed.PROVIDER_URL || undefined;
  const kind = parsed.PROVIDER || undefined;
  if (kind === undefined && url !== undefined) {
    throw new Error(`PROVIDER: PROVIDER_URL is set but no kind: set PROVIDER=<kind> (known kinds: ${knownProviderKinds.join(', ')}) or PROVIDERS`);
  }
  try {
    const name = kind ?? DEVELOPMENT_PROVIDER_KIND;
    return [providerConnection(name, name, url, env)];
  } catch (error) {
    throw new Error(`PROVIDER: ${(error as Error).message}`);
  }
}

const listenerKeys = {
  HTTP_REQUEST_TIMEOUT_MS: true,
  HTTP_HEADERS_TIMEOUT_MS: true,
  HTTP_KEEP_ALIVE_TIMEOUT_MS: true,
  HTTP_MAX_CONNECTIONS: true,
  HTTP_ALLOWED_HOSTS: true,
} as const;
const listenerFields = schema.in.pick(listenerKeys);
const uiGuardFields = schema.in.pick({ ...listenerKeys, HOST: true, LOG_LEVEL: true, UI_GUARD_PORT: true, UI_GUARD_TARGET: true, TEMPORAL_UI_WRITE_ACTIONS: true });

/** Some of the variables, with the same defaults and rules as loadConfig; throws with every problem. */
function parseFields<T extends z.ZodType>(fields: T, env: NodeJS.ProcessEnv): z.output<T> {
  const parsed = fields.safeParse(env);
  if (!parsed.success) throw new Error(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * Only the listener settings (HTTP_*), for a process that does not load the whole
 * configuration (the provider sandbox): the same variables, defaults and rules as loadConfig.
 */
export function loadListenerConfig(env: NodeJS.ProcessEnv, host: string): Pick<Config, 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_KEEP_ALIVE_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS' | 'HTTP_ALLOWED_HOSTS'> {
  const parsed = parseFields(listenerFields, env);
  return { ...parsed, HTTP_ALLOWED_HOSTS: allowedHosts(parsed.HTTP_ALLOWED_HOSTS, host) };
}

export type UiGuardConfig = Pick<
  Config,
  'HOST' | 'LOG_LEVEL' | 'UI_GUARD_PORT' | 'TEMPORAL_UI_WRITE_ACTIONS' | 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_KEEP_ALIVE_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS' | 'HTTP_ALLOWED_HOSTS'
> & { UI_GUARD_TARGET: { host: string; port: number } | null };

/**
 * The Web UI guard's settings (lib/ui-guard-main.ts): its port and target, write actions, HOST
 * and the listener settings, and nothing else, so the guard needs none of the app's secrets.
 */
export function loadUiGuardConfig(env: NodeJS.ProcessEnv): UiGuardConfig {
  const parsed = parseFields(uiGuardFields, env);
  const target = parsed.UI_GUARD_TARGET;
  const colon = target?.lastIndexOf(':') ?? -1;
  return {
    ...parsed,
    UI_GUARD_TARGET: target === undefined ? null : { host: target.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(target.slice(colon + 1)) },
    HTTP_ALLOWED_HOSTS: allowedHosts(parsed.HTTP_ALLOWED_HOSTS, parsed.HOST),
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = parseFields(schema, env);
  let providers: ProviderConnection[];
  try {
    providers = parseProviders(env, parsed);
  } catch (error) {
    throw new Error(`invalid configuration: ${(error as Error).message}`);
  }
  // Fees and limits name configured PSPs only.
  const names = new Set(providers.map((p) => p.name));
  for (const [variable, named] of [['PROVIDER_FEES', parsed.PROVIDER_FEES], ['PROVIDER_RATE_LIMITS', parsed.PROVIDER_RATE_LIMITS]] as const) {
    const unknown = Object.keys(named ?? {}).filter((name) => !names.has(name));
    if (unknown.length) throw new Error(`invalid configuration: ${variable}: unknown provider ${unknown.map((n) => `"${n}"`).join(', ')}: the configured providers are ${[...names].map((n) => `"${n}"`).join(', ')}`);
  }
  return { ...parsed, PROVIDERS: providers };
}
