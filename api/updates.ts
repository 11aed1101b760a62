import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, isGrpcDeadlineError, WorkflowNotFoundError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, type WorkflowUpdateHandle } from '@temporalio/client';
import { ApiError, type FinalResponse } from '../domain/errors';
import type { ApiDeps } from './context';
import { runOutOfUpdates, updateLostWithItsTask, type Dispatched } from './idempotency';

/**
 * Temporal's answers when an update meets a run that has closed or is closing: not found
 * ("workflow execution already completed", "workflow update was aborted by closing workflow")
 * or "workflow is closing". The SDK wraps them; the cause chain holds the server's words.
 */
function runClosedUnder(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    if (current instanceof WorkflowNotFoundError) return true;
    const text = `${(current as Error).message ?? ''} ${(current as { details?: string }).details ?? ''}`;
    if (/already completed|aborted by closing workflow|workflow is closing/i.test(text)) return true;
  }
  return false;
}

/** A command Temporal refused because its run has no room for another update yet: 503, nothing recorded. */
function noRoomForNow(): ApiError {
  return new ApiError('service_unavailable', 'The run this command acts on takes no more commands for a moment; nothing was done. Retry with the same Idempotency-Key.', {}, { 'Retry-After': '1' });
}

/** The type ApplicationFailure.nonRetryable gives a failure created without one. */
const SDK_DEFAULT_FAILURE_TYPE = 'Error';

/**
 * The SDK's rejection of an update that met its run before the run registered its handler:
 * the worker answers, at the end of the activation the update arrived in,
 * `ApplicationFailure.nonRetryable('No registered handler for update: <name>')`, whose type is
 * the SDK's default, `Error` (@temporalio/workflow rejectBufferedUpdates). A payment's run
 * registers capture and cancel only when its wait begins, so a command that reaches its first
 * workflow task (one run again after its worker died, say) meets no handler. That is no
 * refusal: the run's own refusals carry a type of ours (FailureType, DisputeNotOpen). Temporal
 * keeps no rejected update, so the same update id can be sent again.
 */
export function noHandlerYet(error: WorkflowUpdateFailedError): boolean {
  const cause = error.cause;
  return cause instanceof ApplicationFailure && (!cause.type || cause.type === SDK_DEFAULT_FAILURE_TYPE) && /^No registered handler for update\b/.test(cause.message);
}

/** The pauses between the sends of an update its run had no handler for yet, within the caller's wait. */
const RESEND_FIRST_MS = 50;
const RESEND_MAX_MS = 500;

/** The definitive answers of an update that never ran: its validator refused, or its run has closed. */
export interface UpdateRefusals {
  refused(error: WorkflowUpdateFailedError): FinalResponse;
  closed(): FinalResponse | Promise<FinalResponse>;
}

/**
 * A merchant's command carried to the run it acts on as an Update (capture and cancel of a
 * payment, a dispute's evidence and accept), started up to its acceptance by `start` (under an
 * update id derived from the scoped key, so Temporal deduplicates a repeated delivery too). Its
 * result is the operation's final response, which the run records; a refusal by the validator
 * or a run that has closed under it is a definitive answer, recorded by the API. A run with no
 * handler for the command yet (`noHandlerYet`) has refused nothing: the update is sent again,
 * with a short backoff, within the caller's wait. An outcome not there within that wait is
 * null (the operation is still running: 202, not recorded, so the client's retry sends it again).
 */
export async function dispatchUpdate(deps: ApiDeps, start: () => Promise<WorkflowUpdateHandle<FinalResponse>>, answers: UpdateRefusals): Promise<Dispatched> {
  let update: WorkflowUpdateHandle<FinalResponse> | null;
  try {
    update = await start();
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError && !noHandlerYet(error)) return { kind: 'decided', response: answers.refused(error) };
    if (runClosedUnder(error)) return { kind: 'decided', response: await answers.closed() };
    if (runOutOfUpdates(error)) throw noRoomForNow();
    if (!(error instanceof WorkflowUpdateFailedError) && !updateLostWithItsTask(error)) throw error;
    update = null;
  }
  return {
    kind: 'running',
    outcome: async (ms) => {
      const deadline = Date.now() + ms;
      for (let pause = RESEND_FIRST_MS; ; pause = Math.min(2 * pause, RESEND_MAX_MS)) {
        try {
          return await deps.temporal.connection.withDeadline(deadline, async () => (update ??= await start()).result());
        } catch (error) {
          if (error instanceof WorkflowUpdateFailedError && !noHandlerYet(error)) return answers.refused(error);
          if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isGrpcDeadlineError(error)) return null;
          if (runClosedUnder(error)) return answers.closed();
          if (runOutOfUpdates(error)) throw noRoomForNow();
          if (!(error instanceof WorkflowUpdateFailedError) && !updateLostWithItsTask(error)) throw error;
          // No handler yet, or the update was lost with its workflow task: the same update again
          // after a pause, if the wait leaves room for one.
          update = null;
          if (Date.now() + pause >= deadline) return null;
          await sleep(pause);
        }
      }
    },
  };
}
