/**
 * The workflows' view of the activities, with the timeouts and retry policies that make
 * each step safe to repeat.
 */
import { proxyActivities, proxyLocalActivities, type ActivityOptions } from '@temporalio/workflow';
import type { ChargeEventSteps, DisputeEventSteps, DisputeProviderSteps, DisputeSteps, JobSteps, ProviderSteps, RecordSteps, RefundEventSteps } from '../activities';
import { FailureType } from '../shared/definitions';
import { JobFailureType } from '../shared/jobs';

/**
 * Database steps run as local activities: each is one short PostgreSQL transaction that is
 * safe to repeat, so they skip the task-queue round trip of a regular activity.
 * They retry without limit (PostgreSQL down means "wait", never "give up") except when the
 * ledger refuses for good, which the workflow answers with compensation.
 */
const recordOptions = {
  // One transaction of a few statements; 15 s only trips on a stuck connection.
  startToCloseTimeout: '15 seconds',
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '10 seconds',
    nonRetryableErrorTypes: [FailureType.LedgerRejected],
  },
} satisfies ActivityOptions;
export const records = proxyLocalActivities<RecordSteps>(recordOptions);
/** The dispute workflow's database steps (activities/disputes.ts), as the other records. */
export const disputeRecords = proxyLocalActivities<DisputeSteps>(recordOptions);

/**
 * Provider calls run as regular activities that heartbeat: a worker killed mid-call is
 * noticed within the heartbeat timeout, and the retry on another worker looks the
 * operation up by its sub-key before acting. Attempts are unlimited: a payment is never
 * given up while a charge may exist; only the provider's own refusal stops the retries.
 */
const providerOptions: ActivityOptions = {
  // Upper bound for one attempt; the provider client's own timeout ends a hung call sooner.
  startToCloseTimeout: '2 minutes',
  // The activity beats every second; 5 s of silence means its worker is gone.
  heartbeatTimeout: '5 seconds',
  retry: {
    initialInterval: '500 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    nonRetryableErrorTypes: [FailureType.ProviderRejected],
  },
};
export const providerSteps = proxyActivities<ProviderSteps>(providerOptions);
/** The dispute calls at the PSP (activities/disputes.ts), retried like every provider call. */
export const disputeProvider = proxyActivities<DisputeProviderSteps>(providerOptions);
/**
 * The dispute run's scheduled look at the PSP: a few tries only. A look that fails is made up
 * by the next one; retrying it without end would hold back the run's reminders, its deadline
 * and the reports that come meanwhile.
 */
export const disputeLook = proxyActivities<Pick<DisputeProviderSteps, 'retrieveDispute'>>({ ...providerOptions, retry: { ...providerOptions.retry, maximumAttempts: 3 } });

/**
 * A payment's first charge attempt, run as a local activity inside the run's first workflow
 * task, so a payment the PSP answers at once (succeeded, declined) completes in that one task.
 * One try only: an unknown outcome (a timeout, a 5xx, an unreachable database) is handed to the
 * regular chargeAttempt activity, which asks the PSP first, heartbeats and retries without
 * limit. A worker that dies mid-charge is noticed by the workflow task's timeout; the next
 * worker's try finds attempt 1 recorded and asks the PSP before it charges
 * (activities/routing.ts createFirstAttemptPlanner). Re-sending the charge is safe in any
 * case: the PSP answers a repeated sub-key with the charge it made.
 */
export const firstCharge = proxyLocalActivities<Pick<ProviderSteps, 'chargeAttempt'>>({
  startToCloseTimeout: providerOptions.startToCloseTimeout!,
  retry: { maximumAttempts: 1 },
});

/**
 * The same provider steps, retried for at most `withinMs` in all: the look at a waiting charge
 * when its window ends, which must come to a decision even while the PSP stays unreachable.
 */
export function providerStepsWithin(withinMs: number) {
  return proxyActivities<ProviderSteps>({ ...providerOptions, scheduleToCloseTimeout: withinMs });
}

/**
 * The periodic jobs' passes (workflows/jobs.ts). Off the payment path: a failed pass is
 * retried a few times, then its run is recorded as failed and the next scheduled run
 * starts afresh; a job never retries forever behind the Schedule's back.
 */
export const jobs = proxyActivities<JobSteps>({
  // A day's report is many pages; the activity heartbeats per page, so a dead worker is
  // noticed within the heartbeat timeout, not after this bound.
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  retry: {
    initialInterval: '5 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 5,
    nonRetryableErrorTypes: [JobFailureType.Misconfigured],
  },
});

/**
 * The decision on one PSP event handed over by the webhook route: a charge's
 * (workflows/payments-charge-events.ts: the PSP asked, the payment flagged, signalled or its late
 * money handed on), a refund's report (workflows/refunds.ts refundEventWorkflow: the runs that
 * wait for it signalled, or a compensation's refusal flagged), a dispute's
 * (workflows/disputes-events.ts: the PSP asked, the dispute's run signalled), each part safe to
 * repeat. Retried without limit, as every provider call: the event was acknowledged to the PSP,
 * so nothing else would act on it. A PSP call inside is bounded by PROVIDER_TIMEOUT_MS.
 */
const providerEventOptions = {
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
} satisfies ActivityOptions;
export const chargeEvents = proxyActivities<ChargeEventSteps>(providerEventOptions);
export const refundEvents = proxyActivities<RefundEventSteps>(providerEventOptions);
export const disputeEvents = proxyActivities<DisputeEventSteps>(providerEventOptions);

/**
 * What each step does, in an operator's words: Temporal's user metadata on each scheduled
 * activity, shown in the Web UI's timeline (encrypted like every payload, decoded by the
 * codec server). Set by the workflow interceptor (workflows/interceptors.ts). Fixed text
 * only: never an amount, a card token or a merchant's metadata.
 */
export const activitySummaries: Record<
  keyof ProviderSteps | keyof RecordSteps | keyof JobSteps | keyof DisputeSteps | keyof DisputeProviderSteps | keyof ChargeEventSteps | keyof RefundEventSteps | keyof DisputeEventSteps,
  string
> = {
  chargeAttempt: 'charge attempt at one PSP (attempt 1: decide the route)',
  recordOrderTaken: 'record 409: the order has another payment',
  recordAttempt: 'record attempt outcome (+ next attempt)',
  recordChargeOutcome: 'record outcome + ledger + outbox',
  retrieveCharge: 'poll charge status at provider',
  completeChallenge: 'details call at provider: the customer is back from 3-D Secure',
  recordSettlement: "record the wait's outcome + ledger + outbox",
  recordExpiry: 'record expiry + outbox',
  captureCharge: 'capture at provider',
  recordCapture: 'record capture + ledger + outbox',
  voidCharge: 'void authorization at provider',
  recordCancel: 'record cancel + outbox',
  recordRecovering: 'record 202 recovering: the first attempt declined softly',
  recordRecoveryAttempt: 'record a failed recovery retry + outbox',
  recordRecoveryEnd: "record the recovery's end + ledger + outbox",
  reserveCardAttempt: "reserve the attempt in the card's budget",
  refundCharge: 'refund at provider',
  recordPaymentFailure: 'record failure + outbox',
  recordOffSessionRefusal: 'record 402: the saved card is held by a hard decline, nothing charged',
  beginRefund: 'reserve refund under payment lock',
  recordRefundOutcome: 'record refund outcome + ledger + outbox',
  recordRefundUnconfirmed: 'record 202: refund left pending, unconfirmed by the PSP',
  lateChargeStanding: 'read whether a late charge is ours to give back',
  storedCancellation: "read the PSP's stored CANCELLATION of the charge",
  storedRefundSettlement: "read the PSP's stored settlement of the refund",
  recordLateCharge: 'record late charge given back + outbox',
  reconcileProviderWindow: "compare the PSP's report with payments, refunds, ledger",
  recordReconciliationFailure: 'record the reconciliation run as failed',
  deleteExpiredIdempotencyRecords: 'delete expired idempotency records',
  sweepAbandonedRuns: 'answer operations whose run ended without an outcome',
  recordDisputeReport: 'record dispute report + ledger + outbox',
  recordDisputeReminder: 'record dispute evidence reminder + outbox',
  flagDisputedRefundedPayment: 'flag a refunded payment disputed for an operator',
  retrieveDispute: 'read dispute at provider',
  updateDispute: 'send dispute evidence to provider',
  closeDispute: 'concede dispute at provider',
  recordDisputeCommand: 'record dispute command + idempotency answer + outbox',
  recordDisputeRefusal: 'record 409: the dispute takes no more evidence',
  actOnChargeEvent: "check a PSP charge event's charge at the PSP and act on it",
  actOnRefundEvent: "pass a PSP refund report to the runs that wait for it, or flag a compensation's refusal",
  actOnDisputeEvent: "read a PSP dispute event's dispute at the PSP and report it to its run",
};
