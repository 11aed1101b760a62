import type { ChargeEventInput, ChargeEventResult } from '../shared/payments';
import { chargeEvents } from './activities';

/**
 * One PSP event about a charge of ours, handed over by the webhook route
 * (api/routes/provider-webhooks.ts) once it verified and stored it, under
 * chargeEventWorkflowId(provider, event id): every delivery of the event lands on this one run.
 * Its one step decides what the charge, as the PSP holds it, does to the payment: passed to the
 * payment's run, held for an operator, its late money given back
 * (activities/payments-charge-events.ts). The step retries until the PSP answers; the route
 * answers the PSP at once, with the decision when it came within its wait.
 */
export async function chargeEventWorkflow(input: ChargeEventInput): Promise<ChargeEventResult> {
  return chargeEvents.actOnChargeEvent(input);
}
