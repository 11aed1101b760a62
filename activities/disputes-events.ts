import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { reportDispute } from '../lib/dispute';
import type { ProviderRegistry } from '../provider/registry';
import { FailureType } from '../shared/definitions';
import type { DisputeEventInput, DisputeEventResult, ProviderDispute } from '../shared/disputes';
import { disputesAt, disputesNotifiedAt } from './disputes';
import { providerCall } from './provider-steps';
import { temporalOf } from './workflow-signals';

/**
 * What a PSP's dispute event does, decided in the disputes area (disputeEventWorkflow,
 * workflows/disputes-events.ts; the webhook route only verifies, stores and hands over). The
 * event is a hint: the dispute as the PSP holds it now is reported to its dispute's workflow
 * (signal-with-start, lib/dispute.ts reportDispute), whose step checks it before anything follows
 * (db/disputes.ts applyDisputeReport: the currency, the disputed total within the captured
 * amount, one dispute per PSP dispute id). Safe to repeat: the dispute's run applies a report
 * forward only.
 */
export function createDisputeEventSteps(deps: { providers: ProviderRegistry; temporal?: Client }) {
  return {
    /**
     * Re-reads the dispute from the PSP (a kind with no read of a dispute, disputeSource
     * `notification`: the signed notification's dispute is the PSP's word) and reports it:
     * `dispute`. A dispute the PSP does not hold is `ignored`. Retried until the PSP answers.
     */
    async actOnDisputeEvent(input: DisputeEventInput): Promise<DisputeEventResult> {
      const { provider } = input;
      const disputes = disputesAt(deps.providers, provider);
      let dispute: ProviderDispute = input.dispute;
      if (!disputesNotifiedAt(deps.providers, provider)) {
        try {
          dispute = await providerCall((signal) => disputes.retrieveDispute(input.dispute.id, { signal }));
        } catch (error) {
          if (!(error instanceof ApplicationFailure && error.type === FailureType.ProviderRejected)) throw error;
          log.warn('a dispute event for a dispute the PSP does not hold; ignored', { provider_dispute_id: input.dispute.id, event_id: input.eventId });
          return { disposition: 'ignored' };
        }
      }
      const temporal = temporalOf(deps, 'dispute events');
      await reportDispute(temporal, Context.current().info.taskQueue, provider, { source: 'webhook', eventId: input.eventId, dispute }, input.times);
      return { disposition: 'dispute' };
    },
  };
}

export type DisputeEventSteps = ReturnType<typeof createDisputeEventSteps>;
