/**
 * The engine's floor for the automatic-capture payment's shape: a workflow with the same
 * activity calls (regular, local) with the payment's options, doing nothing. Workflow
 * code: bundled by bench/workflows.ts, it imports only @temporalio/workflow.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { FloorActivities } from './floor-activities';

/** Same options as workflows/activities.ts `records` (minus the non-retryable type, never thrown here). */
const local = proxyLocalActivities<FloorActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** Same options as workflows/activities.ts `provider`. */
const regular = proxyActivities<FloorActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** chargeAttempt (regular) → recordChargeOutcome (local), each a no-op. */
export async function floorWorkflow(input: { id: string }): Promise<string> {
  await regular.floorNoop(input.id);
  await local.floorNoop(input.id);
  return input.id;
}

/**
 * The engine's floor for any one-workflow-per-payment design: start, complete, no activity.
 * Whatever a payment costs above this is the price of its steps, not of having a workflow.
 */
export async function emptyWorkflow(input: { id: string }): Promise<string> {
  return input.id;
}
