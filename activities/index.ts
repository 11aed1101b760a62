import type { Sql } from '../db/connect';
import type { PaymentProvider } from '../provider/types';
import { createProviderSteps } from './provider-steps';
import { createRecordSteps } from './records';

export interface ActivityDeps {
  sql: Sql;
  provider: PaymentProvider;
}

/** All activities, built from injected dependencies (real ones in the worker, fakes in unit tests). */
export function createActivities(deps: ActivityDeps) {
  return { ...createRecordSteps(deps.sql), ...createProviderSteps(deps.provider) };
}

export type { RecordSteps, BeginPaymentResult, BeginRefundResult } from './records';
export type { ProviderSteps } from './provider-steps';
