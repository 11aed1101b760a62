/** Every workflow the worker registers (this file is the bundle's entry point). */
export { paymentWorkflow } from './payment';
export { refundWorkflow } from './refund';
export { abandonedRunSweepWorkflow, reconciliationWorkflow, retentionWorkflow } from './jobs';
export { lateChargeWorkflow } from './late-charge';
export { disputeWorkflow } from './dispute';
// Each type's Worker Versioning behaviour (PINNED / AUTO_UPGRADE), set on the functions above.
import './versioning';
