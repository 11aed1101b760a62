import type { Sql } from '../db/connect';
import type { PaymentProvider } from '../provider/types';
import type { WorkerMetrics } from '../lib/metrics';
import { LedgerAccounts } from '../db/ledger';
import { createPaymentSteps, type PaymentSteps } from './payment-steps';
import { createProviderSteps } from './provider-steps';
import { createRefundSteps, type RefundSteps } from './refund-steps';

export interface ActivityDeps {
  sql: Sql;
  provider: PaymentProvider;
  /** Optional: outcome counters (the worker process passes its registry). */
  metrics?: WorkerMetrics;
}

/**
 * All activities, built from injected dependencies (real ones in the worker, fakes in unit tests).
 * Their method names are the activity type names workflow histories record: never rename one.
 */
export function createActivities(deps: ActivityDeps) {
  // One cache of ledger account ids for the process's database (db/ledger.ts).
  const accounts = new LedgerAccounts();
  return { ...createPaymentSteps(deps.sql, deps.metrics, accounts), ...createRefundSteps(deps.sql, deps.metrics, accounts), ...createProviderSteps(deps.provider) };
}

/** The database steps (run as local activities): the payment's and the refund's. */
export type RecordSteps = PaymentSteps & RefundSteps;
export type { BeginPaymentResult } from './payment-steps';
export type { BeginRefundResult } from './refund-steps';
export type { ProviderSteps } from './provider-steps';
