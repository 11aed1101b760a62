/**
 * The payment workflow (paymentWorkflow, a recorded workflow type: its name never changes). Its
 * run is split by phase under workflows/payments/ (docs/ARCHITECTURE.md, "The payment
 * workflow"): state.ts at the bottom (the run's state, status, memo, reports, the one wait,
 * continuing as new), commands.ts and compensation.ts on it, then the phases charge.ts,
 * recovery.ts, wait.ts and capture.ts, and run.ts on top, which composes them.
 */
export { paymentWorkflow } from './payments/run';
