/**
 * Worker Versioning behaviour of every workflow type (docs/versioning.md). The worker runs
 * as one version of its Worker Deployment (worker/worker.ts); a run's behaviour says which
 * version executes its later tasks:
 * - PINNED: every task of the run, its activities included, goes to the version that started
 *   it, until it closes. A change to the workflow ships as a new version and never meets a
 *   history recorded by other code; the old version's workers stay until its runs drain.
 *   A pinned workflow type carries no patches (test/replay/histories.test.ts holds it to that).
 * - AUTO_UPGRADE: the run moves to the current version at its next task, so every change must
 *   replay the recorded histories of that type (patched() where it would not). patched() is
 *   used only in such a type.
 *
 * Every type but the dispute's is pinned: each one's longest run is bounded (below), so an old
 * version drains in that time at most, and no change has to be written for histories it did
 * not record. A dispute lives for weeks: it auto-upgrades (below).
 * A new workflow type is added here too (the worker's default would also pin it, silently).
 */
import type { VersioningBehavior } from '@temporalio/common';
import { setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import { abandonedRunSweepWorkflow, retentionWorkflow } from './jobs';
import { reconciliationWorkflow } from './reconciliation';
import { disputeEventWorkflow, refundEventWorkflow } from './provider-events';
import { disputeWorkflow } from './disputes';
import { lateChargeWorkflow } from './payments-late-charge';
import { chargeEventWorkflow } from './payments-charge-events';
import { paymentWorkflow } from './payments';
import { refundWorkflow } from './refunds';

/**
 * `behavior` on a versioned worker. An unversioned worker (TEMPORAL_WORKER_VERSIONING=off: the
 * test suite's) must send none: the server refuses a workflow task completed with a behaviour
 * but without a deployment version. Read once per run, when its first task starts (or is
 * replayed): the worker's version then, or the one that recorded that task (an unversioned
 * worker reports a build id of its own but no deployment name).
 */
const onVersionedWorkers = (versioningBehavior: VersioningBehavior) => () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior } : {});

// A payment waits at most its longest window (a manual capture's AUTHORIZATION_WINDOW_SECONDS,
// an asynchronous method's ASYNC_SETTLEMENT_WINDOW_SECONDS: 7 days each by default) and is
// then voided or expired by its own run: the old version drains within that. Money moves in
// it: its capture or void runs on the code that authorized it.
setWorkflowOptions(onVersionedWorkers('PINNED'), paymentWorkflow);
// A refund is one provider call and its record: seconds.
setWorkflowOptions(onVersionedWorkers('PINNED'), refundWorkflow);
// A late charge looks at the payment for about 2 h 20 min at most, then acts once.
setWorkflowOptions(onVersionedWorkers('PINNED'), lateChargeWorkflow);
// A charge event is one step: the PSP asked, the payment acted on. Seconds, or as long as the PSP stays unreachable.
setWorkflowOptions(onVersionedWorkers('PINNED'), chargeEventWorkflow);
// A refund's or a dispute's PSP event is one step too: the runs it concerns signalled (a dispute's
// after the PSP is asked). Seconds, or as long as the PSP stays unreachable.
setWorkflowOptions(onVersionedWorkers('PINNED'), refundEventWorkflow);
setWorkflowOptions(onVersionedWorkers('PINNED'), disputeEventWorkflow);
// A dispute lives for weeks (the network's evidence window, then its decision), far longer than a
// version should be kept running for it. It moves to the current version at its next task
// (AUTO_UPGRADE): its history is one short loop of recorded reports, reminders and polls, each
// step forward-only and keyed, and a change to it must replay the recorded dispute histories
// (test/histories, patched() where it would not).
setWorkflowOptions(onVersionedWorkers('AUTO_UPGRADE'), disputeWorkflow);
// The periodic jobs: one activity pass each, minutes; the next Schedule run starts on the current version.
setWorkflowOptions(onVersionedWorkers('PINNED'), reconciliationWorkflow);
setWorkflowOptions(onVersionedWorkers('PINNED'), retentionWorkflow);
setWorkflowOptions(onVersionedWorkers('PINNED'), abandonedRunSweepWorkflow);
