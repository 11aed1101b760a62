import { describe, expect, it } from 'vitest';
import { ApplicationFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import { noHandlerYet } from '../../api/updates';
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
