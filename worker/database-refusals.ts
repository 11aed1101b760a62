import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { isDeterministicDatabaseError, sqlState } from '../db/sqlstate';
import { FailureType } from '../shared/definitions';

/**
 * A database error that no retry can cure (db/sqlstate.ts) fails the activity for good, as
 * ApplicationFailure type FailureType.DatabaseRefused, instead of being retried without end (the record
 * steps retry forever, which is right for an outage and wrong for a value PostgreSQL refuses).
 * Applies to local activities as well: the worker runs the same interceptors for both.
 */
export const databaseRefusalInterceptor: ActivityInterceptorsFactory = () => ({
  inbound: {
    async execute(input, next) {
      try {
        return await next(input);
      } catch (error) {
        if (!isDeterministicDatabaseError(error)) throw error;
        throw ApplicationFailure.create({
          type: FailureType.DatabaseRefused,
          message: `PostgreSQL refused the step (SQLSTATE ${sqlState(error)}): ${(error as Error).message}`,
          nonRetryable: true,
          cause: error as Error,
        });
      }
    },
  },
});
