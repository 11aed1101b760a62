import type { Sql } from '../db/connect';
import type { PaymentProvider } from '../provider/types';
import type { WorkerMetrics } from '../lib/metrics';
import { createProviderSteps } from './provider-steps';
import { createRecordSteps } from './records';

export interface ActivityDeps {
  sql: Sql;
  provider: PaymentProvider;
  /** Optional: outcome counters (the worker process passes its registry). */
  metrics?: WorkerMetrics;
}

/** All activities, built from injected dependencies (real ones in the worker, fakes in unit tests). */
export function createActivities(deps: ActivityDeps) {
  return { ...createRecordSteps(deps.sql, deps.metrics), ...createProviderSteps(deps.provider) };
}

export type { RecordSteps, BeginPaymentResult, BeginRefundResult } from './records';
export type { ProviderSteps } from './provider-steps';
