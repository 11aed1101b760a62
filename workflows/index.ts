/** Every workflow the worker registers (this file is the bundle's entry point). */
export { paymentWorkflow } from './payments';
export { refundWorkflow } from './refunds';
export { abandonedRunSweepWorkflow, retentionWorkflow } from './jobs';
export { reconciliationWorkflow } from './reconciliation';
export { lateChargeWorkflow } from './payments-late-charge';
export { chargeEventWorkflow } from './payments-charge-events';
export { disputeWorkflow } from './disputes';
export { disputeEventWorkflow, refundEventWorkflow } from './provider-events';
// Each type's Worker Versioning behaviour (PINNED / AUTO_UPGRADE), set on the functions above.
import './versioning';
