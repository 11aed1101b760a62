import { ActivityFailure, allHandlersFinished, ApplicationFailure, condition, continueAsNew, log, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import { FailureType, type FinalResponse } from '../shared/definitions';
import { disputeAcceptUpdate, disputeEvidenceUpdate, disputeReportSignal, refundEvidence, type DisputeAcceptRequest, type DisputeCarried, type DisputeEvidenceRequest, type DisputeStanding, type ProviderDispute, type DisputeReport, type DisputeWorkflow, type DisputeWorkflowInput, type DisputeWorkflowResult } from '../shared/disputes';
import { providerSubKey } from '../shared/keys';
import { disputeLook, disputeProvider, disputeRecords } from './activities';
import { failureOfType } from './saga';

/**
 * One PSP dispute, from the network's first word to its decision (weeks). Started with
 * signal-with-start by a dispute event's workflow (workflows/disputes-events.ts, to which the
 * inbound webhook route hands each stored event) and by the reconciliation run that finds a dispute whose webhook was lost, under
 * disputeWorkflowId(provider, PSP dispute id): every delivery of every event of the dispute,
 * duplicates included, is one more `disputeReport` signal to this one run.
 *
 * Each report (the dispute as the PSP holds it, never the event's own figures) is recorded by
 * one step (activities/disputes.ts recordDisputeReport): the row moves only forward, and
 * the withdrawal, reinstatement or loss is posted once with its events. Between reports the run
 * waits on one durable timer for the earliest of:
 * - a reminder (`dispute.evidence_due_soon`) each of input.remindersBeforeMs before the evidence
 *   deadline, while the dispute needs a response (again for a chargeback an inquiry became);
 * - the deadline itself, when the PSP is asked (it decides an unanswered dispute);
 * - the next poll of the PSP (input.pollEveryMs): a lost webhook delays a decision by at most that.
 * A PSP that has no read of a dispute (the standing's disputeSource `notification`) is
 * never asked: the run waits for its next notification (and its reminders), the deadline's included.
 * The run ends when the dispute is closed (won or lost) and no report waits (one that came
 * meanwhile is recorded first: a chargeback closed won may move on to its second round), or at
 * once when no payment of ours has the disputed charge. A run that ended otherwise (terminated, failed, timed out) is started
 * again by the next report (signal-with-start) or merchant's command (api/routes/disputes.ts):
 * a new run without a report asks the PSP first.
 *
 * Its history stays bounded whatever arrives: the merchant's evidence is stored by the API and
 * its updates carry only the digest, and past input.continueAfterEvents events (or 4 MiB, or when
 * Temporal suggests it) the run continues as new when no handler runs, carrying its standing,
 * the reminders sent, whether the refund was sent as evidence and the next poll time
 * (input.continued): once no report waits, or, in a flood of reports, between two of them,
 * carrying those still waiting.
 *
 * A payment refunded (in full or in part) before its dispute came is answered by the run itself:
 * the refund is submitted as evidence (once, under its sub-key) and the payment flagged for an
 * operator.
 *
 * The merchant's commands are updates (POST /v1/disputes/{id}/evidence and /accept): their
 * validator refuses a dispute that no longer needs a response or whose deadline has passed (a
 * run that has not recorded the dispute yet decides once it has); the handler calls the PSP,
 * records its answer as a report and completes the operation's idempotency record. The run ends
 * only once every handler has finished.
 */
export const disputeWorkflow: DisputeWorkflow = async function disputeWorkflow(input: DisputeWorkflowInput): Promise<DisputeWorkflowResult> {
  return new DisputeRun(input).run();
};

/** History events past which a run continues as new (input.continueAfterEvents), and bytes. */
const CONTINUE_AFTER_EVENTS = 2_000;
const CONTINUE_AFTER_BYTES = 4 * 1024 * 1024;

/** Any refund of the payment before its dispute came (a step recorded without the amounts: a refund in full). */
const refundedBefore = (standing: DisputeStanding): boolean => (standing.paymentRefund?.refundedMinor ?? 0) > 0 || standing.paymentRefundedInFull;

/** The run's state in one object; its steps as methods (each over the one loop in run()). */
class DisputeRun {
  private readonly reports: DisputeReport[] = [];
  private readonly reminded: Set<string>;
  private standing: DisputeStanding | null;
  private refundEvidenceSent: boolean;
  private nextPollAt: number;

  constructor(private readonly input: DisputeWorkflowInput) {
    const carried = input.continued;
    this.standing = carried?.standing ?? null;
    this.reminded = new Set(carried?.reminded ?? []);
    this.refundEvidenceSent = carried?.refundEvidenceSent ?? false;
    this.nextPollAt = carried?.nextPollAt ?? Date.now() + input.pollEveryMs; // workflow time: deterministic on replay
    this.reports.push(...(carried?.reports ?? []));
    const { provider, providerDisputeId } = input;
    setHandler(disputeReportSignal, (report) => {
      if (report.dispute.id === providerDisputeId) this.reports.push(report);
    });
    setHandler(
      disputeEvidenceUpdate,
      (request: DisputeEvidenceRequest) =>
        this.whenRecorded(() =>
          this.command(request.idempotency, request, (disputeId) =>
            disputeProvider.updateDispute({
              provider,
              providerDisputeId,
              subKey: providerSubKey.disputeEvidence(disputeId, request.idempotency.fingerprint),
              ...(request.evidenceDigest !== undefined ? { evidenceOf: { disputeId, digest: request.evidenceDigest } } : { evidence: request.evidence! }),
              submit: request.submit,
            }),
          ),
        ),
      { validator: (_request: DisputeEvidenceRequest) => this.refuseUnlessOpen() },
    );
    setHandler(
      disputeAcceptUpdate,
      (request: DisputeAcceptRequest) =>
        this.whenRecorded(() => this.command(request.idempotency, null, (disputeId) => disputeProvider.closeDispute({ provider, providerDisputeId, subKey: providerSubKey.disputeAccept(disputeId) }))),
      { validator: (_request: DisputeAcceptRequest) => this.refuseUnlessOpen() },
    );
  }

  async run(): Promise<DisputeWorkflowResult> {
    // Signal-with-start delivers the first report with the start; a run started without one
    // asks. A run that continued another goes on from the standing it carried.
    if (this.standing === null && !(await condition(() => this.reports.length > 0, 1))) await this.poll();
    for (;;) {
      while (this.reports.length > 0) {
        this.standing = await disputeRecords.recordDisputeReport({ provider: this.input.provider, report: this.reports.shift()! });
        if (this.standing.disputeId === null || this.standing.closed) {
          // A command in flight (an accept that closed it) answers before the run ends.
          await condition(allHandlersFinished);
          // A report that came meanwhile may move the closed dispute on (a second round after a
          // chargeback won): it is recorded before the run ends, or it would be lost with it.
          if (this.reports.length > 0 && patched('dispute-reports-after-close')) continue;
          return { disputeId: this.standing.disputeId, status: this.standing.status };
        }
        // A flood (reports arriving faster than they are recorded) bounds the history too: the
        // reports still waiting go on in the new run, which records them first.
        if (this.reports.length > 0 && this.historyIsLong() && patched('dispute-flood-continues')) await this.continueAsNewWhenQuiet(this.standing, 'carrying reports');
      }
      const current: DisputeStanding = this.standing!;
      if (refundedBefore(current) && current.status === 'needs_response' && !this.refundEvidenceSent) {
        await this.submitRefundAsEvidence(current);
        continue;
      }
      if (this.historyIsLong()) {
        await this.continueAsNewWhenQuiet(current);
        continue;
      }
      await this.waitForNext(current);
    }
  }

  /** Whether the run's history has grown past its bound (or Temporal suggests a new run). */
  private historyIsLong(): boolean {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength >= (this.input.continueAfterEvents ?? CONTINUE_AFTER_EVENTS) || info.historySize >= CONTINUE_AFTER_BYTES;
  }

  /**
   * Continues as new once no handler runs. A report waiting then sends the run back to the loop,
   * which records it first; while reports flood in, they are carried to the new run instead.
   */
  private async continueAsNewWhenQuiet(current: DisputeStanding, waiting: 'carrying reports' | 'when none waits' = 'when none waits'): Promise<void> {
    await condition(allHandlersFinished);
    if (this.reports.length > 0 && waiting === 'when none waits') return;
    const continued: DisputeCarried = {
      standing: current,
      reminded: [...this.reminded],
      refundEvidenceSent: this.refundEvidenceSent,
      nextPollAt: this.nextPollAt,
      ...(this.reports.length > 0 ? { reports: [...this.reports] } : {}),
    };
    log.info('the dispute run continues as new', { dispute_id: current.disputeId, history_length: workflowInfo().historyLength, reports_carried: this.reports.length });
    await continueAsNew<DisputeWorkflow>({ ...this.input, continued });
  }

  /**
   * Runs a command at once when the dispute is recorded; one that reaches a run that has not
   * recorded it yet (a run started again, asking the PSP first) waits for it and is judged then.
   */
  private whenRecorded(command: () => Promise<FinalResponse>): Promise<FinalResponse> {
    if (this.standing !== null) return command();
    return condition(() => this.standing !== null).then(() => {
      this.refuseUnlessOpen();
      return command();
    });
  }

  /** Refuses a command the dispute no longer takes (the API answers 409 dispute_not_open with the reason); a dispute not recorded yet is judged once it is. */
  private refuseUnlessOpen(): void {
    const { standing } = this;
    if (standing === null) return;
    const reason =
      standing.disputeId === null
        ? 'no payment here has the disputed charge'
        : standing.status !== 'needs_response'
          ? `the dispute is ${standing.status}`
          : Date.now() >= Date.parse(standing.evidenceDueBy!)
            ? `the evidence was due by ${standing.evidenceDueBy}`
            : null;
    if (reason) throw ApplicationFailure.create({ type: 'DisputeNotOpen', message: `${reason}; it takes no more evidence`, nonRetryable: true });
  }

  /** A merchant's command at the PSP, its answer recorded as a report; a refusal recorded as the command's answer. */
  private async command(idempotency: DisputeEvidenceRequest['idempotency'], request: DisputeEvidenceRequest | null, act: (disputeId: string) => Promise<ProviderDispute>): Promise<FinalResponse> {
    const disputeId = this.standing!.disputeId!;
    let dispute: ProviderDispute;
    try {
      dispute = await act(disputeId);
    } catch (error) {
      // The PSP refused: the dispute moved on (decided, or past its deadline at the PSP).
      if (!failureOfType(error, FailureType.ProviderRejected)) throw error;
      return disputeRecords.recordDisputeRefusal({ disputeId, idempotency, message: 'the PSP no longer takes evidence for this dispute' });
    }
    const evidence = request?.evidenceDigest !== undefined ? { evidenceDigest: request.evidenceDigest } : { evidence: request?.evidence ?? null };
    const response = await disputeRecords.recordDisputeCommand({ provider: this.input.provider, dispute, ...evidence, idempotency });
    this.reports.push({ source: 'poll', eventId: null, dispute });
    return response;
  }

  /** Asks the PSP until it answers: the run has nothing to go on without the dispute. */
  private async poll(): Promise<void> {
    const { provider, providerDisputeId } = this.input;
    this.reports.push({ source: 'poll', eventId: null, dispute: await disputeProvider.retrieveDispute({ provider, providerDisputeId }) });
  }

  /** The scheduled look at the PSP, a few tries: one that fails leaves it to the next (pollEveryMs later). */
  private async look(): Promise<void> {
    const { provider, providerDisputeId } = this.input;
    try {
      this.reports.push({ source: 'poll', eventId: null, dispute: await disputeLook.retrieveDispute({ provider, providerDisputeId }) });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      log.warn('the PSP did not answer the scheduled look at the dispute; the next look asks again', { provider, provider_dispute_id: providerDisputeId });
    }
  }

  /** A payment refunded (in full or in part) before its dispute came: its refund is the evidence (once), and an operator looks. */
  private async submitRefundAsEvidence(current: DisputeStanding): Promise<void> {
    const { provider, providerDisputeId } = this.input;
    const disputeId = current.disputeId!;
    this.refundEvidenceSent = true;
    const answered = await disputeProvider.updateDispute({
      provider,
      providerDisputeId,
      subKey: providerSubKey.disputeRefundEvidence(disputeId),
      evidence: refundEvidence(current.paymentId!, current.paymentRefund),
      submit: true,
    });
    await disputeRecords.flagDisputedRefundedPayment({ disputeId });
    log.warn('dispute of a refunded payment: its refund submitted as evidence, the payment flagged for an operator', { dispute_id: disputeId, refunded_minor: current.paymentRefund?.refundedMinor ?? null });
    this.reports.push({ source: 'poll', eventId: null, dispute: answered });
  }

  /** Sends the reminders that are due, then waits for a report, the next reminder, the deadline or the next poll. */
  private async waitForNext(current: DisputeStanding): Promise<void> {
    const disputeId = current.disputeId!;
    const dueAt = Date.parse(current.evidenceDueBy!);
    const waiting = current.status === 'needs_response';
    const now = Date.now();
    const reminderTimes: number[] = [];
    for (const beforeMs of waiting ? this.input.remindersBeforeMs : []) {
      const key = `${current.stage}:${beforeMs}`;
      if (this.reminded.has(key) || now >= dueAt) continue;
      if (dueAt - beforeMs <= now) {
        this.reminded.add(key);
        await disputeRecords.recordDisputeReminder({ disputeId, beforeMs });
      } else {
        reminderTimes.push(dueAt - beforeMs);
      }
    }
    // A PSP without a read of its disputes is never asked: its notifications (the deadline's too) are the reports.
    const asks = current.disputeSource !== 'notification';
    const wakeAt = Math.min(asks ? this.nextPollAt : Infinity, ...reminderTimes, asks && waiting && dueAt > now ? dueAt : Infinity);
    if (wakeAt === Infinity) {
      await condition(() => this.reports.length > 0);
      return;
    }
    if (await condition(() => this.reports.length > 0, Math.max(wakeAt - Date.now(), 1))) return;
    if (asks && (Date.now() >= this.nextPollAt || (waiting && Date.now() >= dueAt))) {
      this.nextPollAt = Date.now() + this.input.pollEveryMs;
      await this.look();
    }
  }
}
