import type { Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import type { ProviderRegistry } from '../provider/registry';
import type { WorkerMetrics } from '../lib/metrics';
import type { DisputeTimes } from '../lib/dispute';
import { createLogger, type Logger } from '../lib/logger';
import { callLimitedRegistry } from '../lib/provider-limits';
import { createDisputeProviderSteps, createDisputeSteps, type DisputeProviderSteps, type DisputeSteps } from './disputes';
import { createDisputeEventSteps, type DisputeEventSteps } from './disputes-events';
import { createJobSteps, type JobSteps } from './jobs';
import { LedgerAccounts } from '../db/ledger';
import { createLateChargeSteps, type LateChargeSteps } from './payments-late-charge';
import { createChargeEventSteps, type ChargeEventSteps } from './payments-charge-events';
import { createPaymentSteps, type PaymentSteps } from './payments';
import { createProviderSteps } from './provider-steps';
import { currencyOfRefundReference } from '../db/refunds';
import { createRecoverySteps, type RecoverySteps } from './recovery';
import { createRefundSteps, type RefundSteps } from './refunds';
import { createRefundEventSteps, type RefundEventSteps } from './refunds-events';
import { createFirstAttemptPlanner, createRouteSteps, type RoutePlanner, type RouteSteps } from './routing';
import { createRouteDecisionSteps, type RouteDecisionSteps } from './routing-decision';
import type { FeeSchedule } from '../domain/routing-fees';
import type { CallLimit, HealthSettings } from '../db/routing';

export interface ActivityDeps {
  sql: Sql;
  /** The PSP clients by configured name (provider/registry.ts); its default holds the payments that record none. */
  providers: ProviderRegistry;
  /** The routing of payments across the providers (default: activities/routing.ts planRouteFor, the routing seam). */
  route?: RoutePlanner;
  /** The deployment's fee schedule (PROVIDER_FEES) the net objective of decideRoute reads; absent: none. */
  routingFees?: FeeSchedule | null;
  /**
   * Each PSP's calls per second across the fleet (PROVIDER_RATE_LIMITS): every call of the
   * activities to a PSP it names takes a token first (lib/provider-limits.ts); absent: none.
   */
  callLimits?: Readonly<Record<string, CallLimit>> | null;
  /** The shared health's settings (db/routing.ts HEALTH_DEFAULTS when absent; tests shorten its times). */
  routingHealth?: HealthSettings;
  /** Optional: outcome counters (the worker process passes its registry). */
  metrics?: WorkerMetrics;
  /** The periodic jobs log their findings here (default: a silent logger). */
  logger?: Logger;
  /** The abandoned-run sweep asks Temporal how runs ended, and a PSP's event (a charge's, a refund's, a dispute's) signals the runs it concerns; without it those fail (non-retryable). */
  temporal?: Client;
  /** How long idempotency outcomes are kept (IDEMPOTENCY_RETENTION_SECONDS; default 72 h). */
  retentionSeconds?: number;
  /** The settings of dispute workflows the reconciliation starts (DISPUTE_REMINDER_SECONDS, DISPUTE_POLL_SECONDS). */
  disputeTimes?: DisputeTimes;
  /** Our return route's URL for a payment (API_PUBLIC_URL): where a PSP whose challengeReturn is `orchestrator` sends the customer back. */
  returnRoute?: (paymentId: string) => string;
  /**
   * How a payment is charged along its route: the tries a PSP gets for one attempt
   * (PROVIDER_TRANSIENT_TRIES) and the payment's charge budget (PAYMENT_CHARGE_BUDGET_SECONDS,
   * in ms), carried to the run with its route plan. Absent: the defaults (3 tries, 60 s).
   */
  charging?: { transientTries?: number; budgetMs?: number };
}

/**
 * All activities, built from injected dependencies (real ones in the worker, fakes in unit tests).
 * Their method names are the activity type names workflow histories record: never rename one.
 */
export function createActivities(deps: ActivityDeps) {
  // One cache of ledger account ids for the process's database (db/ledger.ts).
  const accounts = new LedgerAccounts();
  const decisions = createRouteDecisionSteps({ sql: deps.sql, providerNames: deps.providers.names, fees: deps.routingFees ?? null, callLimits: deps.callLimits ?? null, ...(deps.routingHealth ? { health: deps.routingHealth } : {}) });
  // Every PSP call of every activity takes its PSP's token first (PROVIDER_RATE_LIMITS).
  const providers = callLimitedRegistry(deps.providers, Object.keys(deps.callLimits ?? {}), (provider) => decisions.takeProviderCall({ provider }));
  const jobs = createJobSteps({
    sql: deps.sql,
    providers: Object.fromEntries(providers.names.map((name) => [name, providers.get(name)])),
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
    logger: deps.logger ?? createLogger({ name: 'jobs', level: 'silent' }),
    ...(deps.temporal ? { temporal: deps.temporal } : {}),
    retentionSeconds: deps.retentionSeconds ?? 72 * 3600,
    ...(deps.disputeTimes ? { disputeTimes: deps.disputeTimes } : {}),
  });
  const temporal = deps.temporal ? { temporal: deps.temporal } : {};
  const routeDeps = {
    sql: deps.sql,
    providers,
    ...(deps.route ? { route: deps.route } : {}),
    decide: decisions.decideRoute,
    ...(deps.charging?.budgetMs !== undefined ? { chargeBudgetMs: deps.charging.budgetMs } : {}),
  };
  return {
    ...createPaymentSteps(deps.sql, deps.metrics, accounts),
    ...createRecoverySteps(deps.sql),
    ...createRefundSteps(deps.sql, deps.metrics, accounts),
    ...createLateChargeSteps(deps.sql, deps.metrics),
    ...createDisputeSteps(deps.sql, accounts, providers),
    ...createDisputeProviderSteps(providers, deps.sql),
    ...createChargeEventSteps({ sql: deps.sql, providers, ...temporal }),
    ...createRefundEventSteps({ sql: deps.sql, ...temporal }),
    ...createDisputeEventSteps({ providers, ...temporal }),
    ...createRouteSteps(routeDeps),
    ...decisions,
    ...createProviderSteps(
      providers,
      createFirstAttemptPlanner(routeDeps),
      (reference) => currencyOfRefundReference(deps.sql, reference),
      deps.returnRoute,
      decisions.recordRouteOutcome,
      deps.charging?.transientTries,
    ),
    ...jobs,
  };
}

/** The database steps (run as local activities): the payment's, the refund's, the routing's and the late charge's. */
export type RecordSteps = PaymentSteps & RefundSteps & RouteSteps & LateChargeSteps & RecoverySteps;
export type { RoutePlanner };
export type { BeginRefundResult } from './refunds';
export type { LateChargeOutcome, LateChargeStanding } from './payments-late-charge';
export type { ProviderSteps } from './provider-steps';
export type { JobSteps, DisputeSteps, DisputeProviderSteps, ChargeEventSteps, RouteDecisionSteps, RefundEventSteps, DisputeEventSteps };
export type { DisputeStanding } from './disputes';
