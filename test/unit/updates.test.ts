import { describe, expect, it } from 'vitest';
import { ApplicationFailure, ServiceError, WorkflowUpdateFailedError } from '@temporalio/client';
import { dispatchUpdate, noHandlerYet } from '../../api/updates';
import { runOutOfUpdates } from '../../api/idempotency';
import type { ApiDeps } from '../../api/context';
import { ApiError } from '../../domain/errors';
import { FailureType } from '../../shared/definitions';

/** An update's failure as the client decodes it: the workflow's ApplicationFailure as the cause. */
const failed = (cause: Error) => new WorkflowUpdateFailedError('Workflow Update failed', cause);

describe('noHandlerYet: a run not ready for a command is told from a refusal (api/updates.ts)', () => {
  it('knows the SDK rejection of an update that met no registered handler', () => {
    // As @temporalio/workflow rejects a buffered update at the end of its activation.
    expect(noHandlerYet(failed(ApplicationFailure.nonRetryable('No registered handler for update: capture')))).toBe(true);
    expect(noHandlerYet(failed(ApplicationFailure.nonRetryable('No registered handler for update: evidence')))).toBe(true);
  });

  it("takes the run's own refusals, typed, as refusals, whatever their message", () => {
    for (const type of [FailureType.PaymentNotCapturable, FailureType.PaymentNotCancelable, FailureType.CaptureExceedsAuthorized, 'DisputeNotOpen']) {
      expect(noHandlerYet(failed(ApplicationFailure.create({ type, message: 'payment pay_1 is succeeded', nonRetryable: true })))).toBe(false);
      expect(noHandlerYet(failed(ApplicationFailure.create({ type, message: 'No registered handler for update: capture', nonRetryable: true })))).toBe(false);
    }
  });

  it('takes any other untyped failure, or none, as a refusal', () => {
    expect(noHandlerYet(failed(ApplicationFailure.nonRetryable('payment pay_1 already has a capture in progress')))).toBe(false);
    expect(noHandlerYet(failed(new Error('No registered handler for update: capture')))).toBe(false);
    expect(noHandlerYet(new WorkflowUpdateFailedError('Workflow Update failed', undefined))).toBe(false);
  });
});

describe('a run out of room for updates: 503, never 500 (api/updates.ts dispatchUpdate)', () => {
  /** Temporal's refusal as the client hands it over: a ServiceError whose cause is the gRPC status (FAILED_PRECONDITION). */
  const outOfUpdates = () => {
    const grpc = Object.assign(new Error('9 FAILED_PRECONDITION: limit on number of total updates has been reached (2000)'), {
      code: 9,
      details: 'limit on number of total updates has been reached (2000)',
      metadata: {},
    });
    return new ServiceError('Unexpected error while making gRPC request', { cause: grpc });
  };
  const answers = { refused: () => ({ status: 409, body: '{}', location: null }), closed: () => ({ status: 409, body: '{}', location: null }) };

  it('a command whose run has taken all its updates is 503 service_unavailable with Retry-After, nothing decided', async () => {
    expect(runOutOfUpdates(outOfUpdates())).toBe(true);
    const error = await dispatchUpdate({} as ApiDeps, () => Promise.reject(outOfUpdates()), answers).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(503);
    expect((error as ApiError).headers['Retry-After']).toBe('1');
  });

  it('other refusals of the same status are not taken for it', () => {
    const lost = Object.assign(new Error('9 FAILED_PRECONDITION: Unable to perform workflow execution update due to unexpected workflow task failure.'), { code: 9, details: 'workflow task failure', metadata: {} });
    expect(runOutOfUpdates(lost)).toBe(false);
    expect(runOutOfUpdates(new Error('limit on number of total updates has been reached (2000)'))).toBe(false);
  });
});
