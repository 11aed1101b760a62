import type { DisputeEventInput, DisputeEventResult } from '../shared/disputes';
import { disputeEvents } from './activities';

/**
 * One PSP dispute event, handed over by the webhook route (api/routes/provider-webhooks.ts) once
 * it verified and stored it, under disputeEventWorkflowId(provider, event id): every delivery of
 * the event lands on this one run. Its one step asks the PSP for the dispute (the event is a
 * hint) and reports it to the dispute's own run (disputeWorkflow, workflows/disputes.ts), which
 * checks and records it (activities/disputes-events.ts). A type of its own, pinned, beside the
 * dispute's auto-upgrading one: this run lasts one step (docs/versioning.md).
 */
export async function disputeEventWorkflow(input: DisputeEventInput): Promise<DisputeEventResult> {
  return disputeEvents.actOnDisputeEvent(input);
}
