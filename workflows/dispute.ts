import { allHandlersFinished, ApplicationFailure, condition, log, setHandler } from '@temporalio/workflow';
import type { DisputeStanding } from '../activities';
import {
  disputeAcceptUpdate,
  disputeEvidenceUpdate,
  disputeReportSignal,
  FailureType,
  refundEvidence,
  type DisputeAcceptRequest,
  type DisputeEvidenceRequest,
  type FinalResponse,
  type ProviderDispute,
  type DisputeReport,
  type DisputeWorkflow,
  type DisputeWorkflowInput,
  type DisputeWorkflowResult,
} from '../shared/definitions';
import { providerSubKey } from '../shared/keys';
import { disputeProvider, disputeRecords } from './activities';
import { failureOfType } from './saga';

/**
 * One PSP dispute, from the network's first word to its decision (weeks). Started with
 * signal-with-start by the inbound webhook route (api/routes/provider-webhooks.ts) and by the
 * reconciliation run that finds a dispute whose webhook was lost, under
 * disputeWorkflowId(provider, PSP dispute id): every delivery of every event of the dispute,
 * duplicates included, is one more `disputeReport` signal to this one run.
 *
 * Each report (the dispute as the PSP holds it, never the event's own figures) is recorded by
 * one step (activities/dispute-steps.ts recordDisputeReport): the row moves only forward, and
 * the withdrawal, reinstatement or loss is posted once with its events. Between reports the run
 * waits on one durable timer for the earliest of:
 * - a reminder (`dispute.evidence_due_soon`) each of input.remindersBeforeMs before the evidence
 *   deadline, while the dispute needs a response (again for a chargeback an inquiry became);
 * - the deadline itself, when the PSP is asked (it decides an unanswered dispute);
 * - the next poll of the PSP (input.pollEveryMs): a lost webhook delays a decision by at most that.
 * The run ends when the dispute is closed (won or lost), or at once when no payment of ours has
 * the disputed charge.
 *
 * A payment refunded in full before its dispute came is answered by the run itself: the refund
 * is submitted as evidence (once, under its sub-key) and the payment flagged for an operator.
 *
 * The merchant's commands are updates (POST /v1/disputes/{id}/evidence and /accept): their
 * validator refuses a dispute that no longer needs a response or whose deadline has passed; the
 * handler calls the PSP, records its answer as a report and completes the operation's
 * idempotency record. The run ends only once every handler has finished.
 */
export const disputeWorkflow: DisputeWorkflow = async function disputeWorkflow(input: DisputeWorkflowInput): Promise<DisputeWorkflowResult> {
  const { provider, providerDisputeId } = input;
  const reports: DisputeReport[] = [];
  setHandler(disputeReportSignal, (report) => {
    if (report.dispute.id === providerDisputeId) reports.push(report);
  });

  /** Refuses a command the dispute no longer takes (the API answers 409 dispute_not_open with the reason). */
  const refuseUnlessOpen = (): void => {
    const reason =
      standing === null || standing.disputeId === null
        ? 'the dispute is not recorded yet'
        : standing.status !== 'needs_response'
          ? `the dispute is ${standing.status}`
          : Date.now() >= Date.parse(standing.evidenceDueBy!)
            ? `the evidence was due by ${standing.evidenceDueBy}`
            : null;
    if (reason) throw ApplicationFailure.create({ type: 'DisputeNotOpen', message: `${reason}; it takes no more evidence`, nonRetryable: true });
  };
  const command = async (idempotency: DisputeEvidenceRequest['idempotency'], evidence: Record<string, string> | null, act: (disputeId: string) => Promise<ProviderDispute>): Promise<FinalResponse> => {
    const disputeId = standing!.disputeId!;
    let dispute: ProviderDispute;
    try {
      dispute = await act(disputeId);
    } catch (error) {
      // The PSP refused: the dispute moved on (decided, or past its deadline at the PSP).
      if (!failureOfType(error, FailureType.ProviderRejected)) throw error;
      return disputeRecords.recordDisputeRefusal({ disputeId, idempotency, message: 'the PSP no longer takes evidence for this dispute' });
    }
    const response = await disputeRecords.recordDisputeCommand({ provider, dispute, evidence, idempotency });
    reports.push({ source: 'poll', eventId: null, dispute });
    return response;
  };
  setHandler(
    disputeEvidenceUpdate,
    (request: DisputeEvidenceRequest) =>
      command(request.idempotency, request.evidence, (disputeId) =>
        disputeProvider.updateDispute({
          provider,
          providerDisputeId,
          subKey: providerSubKey.disputeEvidence(disputeId, request.idempotency.fingerprint),
          evidence: request.evidence,
          submit: request.submit,
        }),
      ),
    { validator: (_request: DisputeEvidenceRequest) => refuseUnlessOpen() },
  );
  setHandler(
    disputeAcceptUpdate,
    (request: DisputeAcceptRequest) =>
      command(request.idempotency, null, (disputeId) => disputeProvider.closeDispute({ provider, providerDisputeId, subKey: providerSubKey.disputeAccept(disputeId) })),
    { validator: (_request: DisputeAcceptRequest) => refuseUnlessOpen() },
  );

  const poll = async (): Promise<void> => {
    reports.push({ source: 'poll', eventId: null, dispute: await disputeProvider.retrieveDispute({ provider, providerDisputeId }) });
  };
  const reminded = new Set<string>();
  let standing: DisputeStanding | null = null;
  let refundEvidenceSent = false;
  let nextPollAt = Date.now() + input.pollEveryMs; // workflow time: deterministic on replay

  // Signal-with-start delivers the first report with the start; a run started without one asks.
  if (!(await condition(() => reports.length > 0, 1))) await poll();

  for (;;) {
    while (reports.length > 0) {
      standing = await disputeRecords.recordDisputeReport({ provider, report: reports.shift()! });
      if (standing.disputeId === null || standing.closed) {
        // A command in flight (an accept that closed it) answers before the run ends.
        await condition(allHandlersFinished);
        return { disputeId: standing.disputeId, status: standing.status };
      }
    }
    const current: DisputeStanding = standing!;
    const disputeId = current.disputeId!;

    if (current.paymentRefundedInFull && current.status === 'needs_response' && !refundEvidenceSent) {
      refundEvidenceSent = true;
      const answered = await disputeProvider.updateDispute({
        provider,
        providerDisputeId,
        subKey: providerSubKey.disputeRefundEvidence(disputeId),
        evidence: refundEvidence(current.paymentId!),
        submit: true,
      });
      await disputeRecords.flagDisputedRefundedPayment({ disputeId });
      log.warn('dispute of a payment refunded in full: its refund submitted as evidence, the payment flagged for an operator', { dispute_id: disputeId });
      reports.push({ source: 'poll', eventId: null, dispute: answered });
      continue;
    }

    const dueAt = Date.parse(current.evidenceDueBy!);
    const waiting = current.status === 'needs_response';
    const now = Date.now();
    const reminderTimes: number[] = [];
    for (const beforeMs of waiting ? input.remindersBeforeMs : []) {
      const key = `${current.stage}:${beforeMs}`;
      if (reminded.has(key) || now >= dueAt) continue;
      if (dueAt - beforeMs <= now) {
        reminded.add(key);
        await disputeRecords.recordDisputeReminder({ disputeId, beforeMs });
      } else {
        reminderTimes.push(dueAt - beforeMs);
      }
    }
    const wakeAt = Math.min(nextPollAt, ...reminderTimes, waiting && dueAt > now ? dueAt : Infinity);
    if (await condition(() => reports.length > 0, Math.max(wakeAt - Date.now(), 1))) continue;
    if (Date.now() >= nextPollAt || (waiting && Date.now() >= dueAt)) {
      nextPollAt = Date.now() + input.pollEveryMs;
      await poll();
    }
  }
};
