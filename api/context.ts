import type { Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import type { TenantRow } from '../db/tenants';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { ApiMetrics, IdempotencyOutcome } from '../lib/metrics';
import type { IdempotencyRecord } from '../db/idempotency-records';
import type { ProviderCharge, ProviderWebhookEvent } from '../provider/types';
import type { CompletionWaiter } from './completions';

/**
 * The types every part of the API is built on (its dependencies and the request's variables).
 * Middleware, the idempotency protocol and the routes import this module; it imports none of them.
 */

/** One configured PSP's webhook verification (its client's verifyWebhook, with its secret). */
export interface ProviderWebhookReceiver {
  /** The provider's configured name, as in the path (PROVIDERS; the kind's name with PROVIDER, e.g. `sandbox`). */
  name: string;
  verify(rawBody: string, headers: Record<string, string | undefined>, now?: Date): ProviderWebhookEvent;
  /** Where the PSP's kind sends a customer back from a challenge (capabilities.challengeReturn); absent: `merchant`. */
  challengeReturn?: 'merchant' | 'orchestrator';
  /** How the PSP's kind frames its webhooks (capabilities.notifications); absent: `event`. */
  notifications?: 'event' | 'batch';
  /**
   * A PSP whose kind frames its notifications in batches (capabilities.notifications `batch`):
   * every item verified and read, each with the item as sent (what is stored); the batch is
   * answered `[accepted]`. Absent: one event per request, answered with our JSON.
   */
  verifyBatch?: (rawBody: string, headers: Record<string, string | undefined>, now?: Date) => { event: ProviderWebhookEvent; payload: unknown }[];
  /** The charge as this PSP holds it now (its client's retrieveCharge): what a webhook's report is checked against. */
  retrieveCharge(chargeId: string): Promise<ProviderCharge>;
  /**
   * A kind with disputes: its dispute events are handed to the disputes area (disputeEventWorkflow),
   * which reads the dispute from the PSP, or takes the notification's where the kind has no read
   * of one. Absent: its dispute events are stored and ignored.
   */
  disputes?: true;
}

/** What a route's early replay check read (api/idempotency.ts replayFirst), handed to the protocol when it did not answer. */
export interface EarlyLookup {
  operation: string;
  /** SHA-256 of the request's path and exact body bytes: stored with a new claim. */
  requestHash: string;
  /** The key's record as read then (a rejection if the read failed: the protocol meets it as its own). */
  record: Promise<IdempotencyRecord | null>;
}

/** What the API is built from; tests build it from the real PostgreSQL and Temporal too. */
export interface ApiDeps {
  sql: Sql;
  temporal: Client;
  /**
   * API_EAGER_START=on (api/eager-start.ts): the client on this process's payment worker's
   * connection, which asks for eager start, or null while that worker does not run. Omitted
   * (or null): runs are started through `temporal`.
   */
  eagerStart?: () => Client | null;
  /** Prometheus text GET /metrics appends to the API's own: the hosted worker's registry with eager start. */
  moreMetrics?: () => Promise<string>;
  completions: CompletionWaiter;
  config: Pick<
    Config,
    | 'ADMIN_TOKEN'
    | 'TASK_QUEUE'
    | 'IDEMPOTENCY_RETENTION_SECONDS'
    | 'IDEMPOTENCY_WAIT_MS'
    | 'TEMPORAL_RPC_TIMEOUT_MS'
    | 'AUTHORIZATION_WINDOW_SECONDS'
  > &
    // The edge's settings; lib/config.ts defaults apply when a caller leaves them out.
    Partial<
      Pick<
        Config,
        | 'NODE_ENV'
        | 'AUTHENTICATION_WINDOW_SECONDS'
        | 'ASYNC_SETTLEMENT_WINDOW_SECONDS'
        | 'PROVIDER_POLL_FIRST_MS'
        | 'PROVIDER_POLL_MAX_MS'
        | 'PROVIDER_DECISION_GRACE_SECONDS'
        | 'PAYMENT_CONTINUE_AFTER_UPDATES'
        | 'PAYMENT_CONTINUE_AFTER_EVENTS'
        | 'RECOVERY_TIME_SCALE'
        | 'RECOVERY_MAX_WINDOW_SECONDS'
        | 'DISPUTE_REMINDER_SECONDS'
        | 'PAYMENT_ANSWER'
        | 'DISPUTE_POLL_SECONDS'
        | 'DISPUTE_EVIDENCE_MAX_REQUESTS'
        | 'DISPUTE_EVIDENCE_MAX_BYTES'
        | 'PROVIDER'
        // The configured PSPs: the first is the default, where a payment that records no provider is charged.
        | 'PROVIDERS'
        // The console's (api/console/): cookies are Secure when the API's public URL is https; links to the Temporal UI and traces.
        | 'API_PUBLIC_URL' | 'TEMPORAL_NAMESPACE' | 'CONSOLE_TEMPORAL_UI_URL' | 'CONSOLE_TRACE_URL'
        | 'METRICS_TOKEN' | 'WEBHOOK_ALLOWED_CIDRS' | 'WEBHOOK_ALLOW_HTTP' | 'RATE_LIMIT_READ_PER_SECOND' | 'RATE_LIMIT_WRITE_PER_SECOND' | 'AUTH_FAILURES_PER_MINUTE' | 'TRUSTED_PROXIES'
        // The listener's (lib/listener.ts), for the servers the dev and test stacks make.
        | 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_KEEP_ALIVE_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS' | 'HTTP_ALLOWED_HOSTS'
      >
    >;
  logger: Logger;
  metrics: ApiMetrics;
  /**
   * How many API processes share the port (and so the tenants' rate limits): each enforces
   * its share of every limit (api/primary.ts tells its processes how many are alive). 1 when omitted.
   */
  liveProcesses?: () => number;
  /**
   * The deployment's PSP names, in configured order (PROVIDERS): what a tenant's routing may
   * name (api/process.ts: configuredProviderNames(config)). Omitted: the one provider of PROVIDER.
   */
  providerNames?: readonly string[];
  /** The configured PSPs' inbound webhooks (POST /provider_webhooks/{provider}), one per name; absent: none are received. */
  providerWebhooks?: ProviderWebhookReceiver | readonly ProviderWebhookReceiver[];
}

/** The signed-in console operator of a /console request (api/console/session.ts). */
export interface ConsoleSignedIn {
  operatorId: string;
  email: string;
  role: 'viewer' | 'operator';
  /** null: every tenant. */
  tenantId: string | null;
  csrfToken: string;
  tokenHash: string;
}

export interface AppEnv {
  Variables: {
    requestId: string;
    logger: Logger;
    tenant: TenantRow;
    idempotencyKey: string;
    /** For the request log line: how the idempotency layer answered, and what it acted on. */
    idempotencyOutcome?: IdempotencyOutcome;
    resourceId?: string;
    /** What the route's early replay check read (api/idempotency.ts replayFirst), for the protocol. */
    earlyLookup?: EarlyLookup;
    /** Under /console: who is signed in. */
    consoleOperator?: ConsoleSignedIn;
  };
}
