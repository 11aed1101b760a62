import { ApplicationFailure } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import { JobFailureType } from '../shared/jobs';

/** The worker's Temporal client, for a step that signals or starts runs; a worker without one fails the step for good. */
export function temporalOf(deps: { temporal?: Client | undefined }, what: string): Client {
  if (!deps.temporal) throw ApplicationFailure.nonRetryable(`${what} need a Temporal client in the worker`, JobFailureType.Misconfigured);
  return deps.temporal;
}

/**
 * Signals a run that may wait for it; false when no run is open under that id (never started,
 * or closed: a closed run is final, and the signal would change nothing).
 */
export async function signalIfOpen<Args extends unknown[]>(client: Client, workflowId: string, signal: SignalDefinition<Args>, ...args: Args): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).signal(signal, ...args);
    return true;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError || /already completed/i.test(String((error as Error)?.message))) return false;
    throw error;
  }
}
