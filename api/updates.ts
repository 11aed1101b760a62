import { isGrpcDeadlineError, WorkflowNotFoundError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, type WorkflowUpdateHandle } from '@temporalio/client';
import type { FinalResponse } from '../domain/errors';
import type { ApiDeps } from './context';
import type { Dispatched } from './idempotency';

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
 * or a run that has closed under it is a definitive answer, recorded by the API. An outcome not
 * there within the caller's wait is null (the operation is still running: 202).
 */
export async function dispatchUpdate(deps: ApiDeps, start: () => Promise<WorkflowUpdateHandle<FinalResponse>>, answers: UpdateRefusals): Promise<Dispatched> {
  let update: WorkflowUpdateHandle<FinalResponse>;
  try {
    update = await start();
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError) return { kind: 'decided', response: answers.refused(error) };
    if (runClosedUnder(error)) return { kind: 'decided', response: await answers.closed() };
    throw error;
  }
  return {
    kind: 'running',
    outcome: async (ms) => {
      try {
        return await deps.temporal.connection.withDeadline(Date.now() + ms, () => update.result());
      } catch (error) {
        if (error instanceof WorkflowUpdateFailedError) return answers.refused(error);
        if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isGrpcDeadlineError(error)) return null;
        if (runClosedUnder(error)) return answers.closed();
        throw error;
      }
    },
  };
}
