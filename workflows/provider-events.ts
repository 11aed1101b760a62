/**
 * The workflows the PSP webhook route hands a refund's or a dispute's event to, one per event,
 * each of its area (a charge's: workflows/payments-charge-events.ts). Gathered here so that the
 * worker's entry point (workflows/index.ts) registers them in one line.
 */
export { refundEventWorkflow } from './refunds';
export { disputeEventWorkflow } from './disputes-events';
