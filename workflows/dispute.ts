import { condition, log, setHandler } from '@temporalio/workflow';
import type { DisputeStanding } from '../activities';
import {
  disputeReportSignal,
  refundEvidence,
  type DisputeReport,
  type DisputeWorkflow,
  type DisputeWorkflowInput,
  type DisputeWorkflowResult,
} from '../shared/definitions';
import { providerSubKey } from '../shared/keys';
import { disputeProvider, disputeRecords } from './activities';

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
 */
export const disputeWorkflow: DisputeWorkflow = async function disputeWorkflow(input: DisputeWorkflowInput): Promise<DisputeWorkflowResult> {
  const { provider, providerDisputeId } = input;
  const reports: DisputeReport[] = [];
  setHandler(disputeReportSignal, (report) => {
    if (report.dispute.id === providerDisputeId) reports.push(report);
  });

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
      if (standing.disputeId === null || standing.closed) return { disputeId: standing.disputeId, status: standing.status };
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
