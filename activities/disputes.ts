import { ApplicationFailure, log } from '@temporalio/activity';
import type { Db, Sql } from '../db/connect';
import { applyDisputeReport, findDispute, isHeld, recordedProviderDispute, stageEvidence, storedEvidence, type AppliedDispute } from '../db/disputes';
import { completeRecord } from '../db/idempotency-records';
import { errorResponse, type FinalResponse } from '../domain/errors';
import { disputeLossLines, disputeReinstatementLines, disputeWithdrawalLines, isPosted, postTransaction, type LedgerAccounts } from '../db/ledger';
import { insertEvent } from '../db/outbox';
import { flagPaymentForOperator, paymentRefundFigures } from '../db/payments';
import { isDisputeClosed, withdrawsFunds, type DisputeStage, type DisputeStatus } from '../domain/disputes';
import { disputeResource, type DisputeRow } from '../domain/resources';
import { capabilitiesOf, UnknownProviderError, type ProviderRegistry } from '../provider/registry';
import type { DisputeProvider, ProviderDispute } from '../provider/types';
import type { ScopedKey } from '../shared/definitions';
import { refundSummary, type DisputeEventType, type DisputeReport, type DisputeStanding } from '../shared/disputes';
import { businessEventKey, type DisputeMoneyFact } from '../shared/keys';
import { isRetriedTry, providerCall } from './provider-steps';
import { step, workflowId } from './record-step';

/**
 * The steps of disputeWorkflow (workflows/disputes.ts). The database step records the PSP's word
 * on a dispute in one transaction with everything that follows from it: the row (forward only),
 * the ledger postings (each once, by its business event key) and the merchant's events (each
 * once per fact). The provider steps read and answer the dispute at the PSP that holds the charge.
 */

export type { DisputeStanding };

const standingOf = (applied: AppliedDispute | null): DisputeStanding =>
  applied
    ? {
        disputeId: applied.row.id,
        paymentId: applied.row.payment_id,
        stage: applied.row.stage,
        status: applied.row.status,
        evidenceDueBy: applied.row.evidence_due_by.toISOString(),
        closed: isDisputeClosed(applied.row.status),
        paymentRefundedInFull: applied.payment.amount_captured_minor > 0 && applied.payment.amount_refunded_minor >= applied.payment.amount_captured_minor,
        paymentRefund: { refundedMinor: applied.payment.amount_refunded_minor, capturedMinor: applied.payment.amount_captured_minor, currency: applied.payment.currency },
      }
    : { disputeId: null, paymentId: null, stage: null, status: null, evidenceDueBy: null, closed: false, paymentRefundedInFull: false };

/** One merchant event about the dispute, once per (type, detail). */
const disputeEvent = (tx: Db, row: DisputeRow, type: DisputeEventType, detail = '') =>
  insertEvent(tx, { tenantId: row.tenant_id, type, eventKey: businessEventKey.disputeEvent(row.id, type, detail), object: disputeResource(row) });

/** Posts one of the dispute's money facts; true when it was posted now (not before). */
function postDisputeMoney(tx: Db, accounts: LedgerAccounts, row: DisputeRow, fact: DisputeMoneyFact): Promise<boolean> {
  const lines =
    fact === 'withdrawal'
      ? disputeWithdrawalLines(row.currency, row.amount_minor, row.fee_minor)
      : fact === 'second_withdrawal'
        ? disputeWithdrawalLines(row.currency, row.amount_minor, 0)
        : fact === 'reinstatement'
          ? disputeReinstatementLines(row.currency, row.amount_minor)
          : disputeLossLines(row.currency, row.amount_minor);
  return postTransaction(
    tx,
    { tenantId: row.tenant_id, eventKey: businessEventKey.disputeMoney(row.id, fact), paymentId: row.payment_id, disputeId: row.id, description: `dispute ${row.id} ${fact}`, lines },
    accounts,
  );
}

/**
 * Everything that follows from the dispute standing where it does now, each fact once: a
 * chargeback withdrew its funds (even when the report that says so is the one that also closes
 * it: a lost webhook skips no money), a won chargeback reinstated them, a lost one wrote the
 * claim off; a second round (pre-arbitration) lost after the chargeback was won withdrew the
 * reinstated amount again before writing it off; and the events of each, the dispute's creation
 * and its closing (again for a second round).
 */
async function recordFacts(tx: Db, accounts: LedgerAccounts, applied: AppliedDispute): Promise<void> {
  const { row, before } = applied;
  // Held for an operator: recorded, and nothing posted or sent until it is released.
  if (isHeld(row)) return;
  const round = row.stage === 'pre_arbitration' ? 'pre_arbitration' : '';
  // Once per dispute (its event key): at its first report, or at the first after its release.
  if (before === null || row.held_reason !== null) await disputeEvent(tx, row, 'dispute.created');
  if (withdrawsFunds(row.stage) && (await postDisputeMoney(tx, accounts, row, 'withdrawal'))) await disputeEvent(tx, row, 'dispute.funds_withdrawn');
  if (row.status === 'under_review') await disputeEvent(tx, row, 'dispute.updated', `${row.stage}:under_review`);
  if (!isDisputeClosed(row.status)) return;
  if (withdrawsFunds(row.stage)) {
    if (row.status === 'won') {
      if (await postDisputeMoney(tx, accounts, row, 'reinstatement')) await disputeEvent(tx, row, 'dispute.funds_reinstated');
    } else {
      const reinstated = round !== '' && (await isPosted(tx, row.tenant_id, businessEventKey.disputeMoney(row.id, 'reinstatement')));
      if (reinstated && (await postDisputeMoney(tx, accounts, row, 'second_withdrawal'))) await disputeEvent(tx, row, 'dispute.funds_withdrawn', round);
      await postDisputeMoney(tx, accounts, row, 'loss');
    }
  }
  await disputeEvent(tx, row, 'dispute.closed', round);
}

/**
 * The evidence of a merchant's command: its digest (the API stored the evidence under it,
 * db/disputes.ts admitEvidence), or the evidence itself (the updates that carried it inline);
 * neither for a concession.
 */
type CommandEvidence = { evidenceDigest: string; evidence?: undefined } | { evidence: Record<string, string> | null; evidenceDigest?: undefined };

/** The evidence the API stored for the dispute under this digest; a digest without it fails the step for good. */
async function evidenceOf(db: Db, ref: { disputeId: string; digest: string }): Promise<Record<string, string>> {
  const evidence = await storedEvidence(db, ref.disputeId, ref.digest);
  if (!evidence) throw ApplicationFailure.nonRetryable(`no evidence stored for dispute ${ref.disputeId} under digest ${ref.digest}`, 'EvidenceMissing');
  return evidence;
}

/** The dispute as the PSP holds it if its evidence was submitted with every field of `evidence` as given; null otherwise. */
async function submittedWith(disputes: DisputeProvider, disputeId: string, evidence: Record<string, string>, signal: AbortSignal): Promise<ProviderDispute | null> {
  const dispute = await disputes.retrieveDispute(disputeId, { signal });
  if (dispute.evidenceSubmittedAt === null) return null;
  const held = await disputes.retrieveEvidence(disputeId, { signal });
  return Object.entries(evidence).every(([field, value]) => held[field] === value) ? dispute : null;
}

/** The disputes of the PSP by its configured name; a name this worker has no client for, or a kind without disputes, fails the step for good. */
export function disputesAt(registry: ProviderRegistry, name: string): DisputeProvider {
  let disputes: DisputeProvider | undefined;
  try {
    disputes = registry.get(name).disputes;
  } catch (error) {
    if (error instanceof UnknownProviderError) throw ApplicationFailure.nonRetryable(error.message, 'UnknownProvider');
    throw error;
  }
  if (!disputes) throw ApplicationFailure.nonRetryable(`provider ${name} does not support disputes`, 'DisputesUnsupported');
  return disputes;
}

/** Whether the named PSP's disputes are known only by their notifications (its kind's disputeSource); false for a name not configured. */
export const disputesNotifiedAt = (registry: ProviderRegistry | undefined, provider: string): boolean =>
  registry?.has(provider) === true && capabilitiesOf(registry.get(provider)).disputeSource === 'notification';

/** `registry`: the worker's PSPs, whose kinds say how a dispute's run learns where it stands (absent: every PSP is read). */
export function createDisputeSteps(sql: Sql, accounts: LedgerAccounts, registry?: ProviderRegistry) {
  return {
    /**
     * Records the PSP's word on the run's dispute (forward only) and what follows from it. The
     * standing says when the PSP has no read of a dispute (`disputeSource`): the run then never asks it.
     */
    async recordDisputeReport(input: { provider: string; report: DisputeReport }): Promise<DisputeStanding> {
      const { dispute } = input.report;
      const applied = await step(sql, async (tx) => {
        const applied = await applyDisputeReport(tx, { provider: input.provider, dispute, feeMinor: dispute.feeMinor, workflowId: workflowId() });
        if (applied) await recordFacts(tx, accounts, applied);
        return applied;
      });
      if (!applied) log.warn('dispute for a charge no payment here has; nothing recorded', { provider: input.provider, provider_dispute_id: dispute.id, charge_id: dispute.chargeId });
      else if (isHeld(applied.row)) log.warn('dispute held for an operator; nothing posted', { dispute_id: applied.row.id, payment_id: applied.row.payment_id, reason: applied.row.held_reason });
      else if (applied.before === null) log.info('dispute recorded', { dispute_id: applied.row.id, payment_id: applied.row.payment_id, stage: applied.row.stage, status: applied.row.status });
      const standing = standingOf(applied);
      return disputesNotifiedAt(registry, input.provider) ? { ...standing, disputeSource: 'notification' } : standing;
    },

    /**
     * Records the PSP's answer to the merchant's command (evidence staged or submitted, or the
     * concession) like any report, the evidence on the dispute and dispute.updated once per
     * request, and completes the operation's idempotency record with the dispute: its final
     * response, replayed byte for byte.
     */
    async recordDisputeCommand(input: { provider: string; dispute: ProviderDispute; idempotency: ScopedKey } & CommandEvidence): Promise<FinalResponse> {
      return step(sql, async (tx) => {
        const applied = await applyDisputeReport(tx, { provider: input.provider, dispute: input.dispute, feeMinor: input.dispute.feeMinor, workflowId: workflowId() });
        if (!applied) throw ApplicationFailure.nonRetryable(`dispute ${input.dispute.id} has no payment here`, 'DisputeUnknown');
        const evidence = input.evidenceDigest !== undefined ? await evidenceOf(tx, { disputeId: applied.row.id, digest: input.evidenceDigest }) : (input.evidence ?? null);
        if (evidence) await stageEvidence(tx, applied.row.id, evidence);
        await recordFacts(tx, accounts, applied);
        const row = (await findDispute(tx, applied.row.id))!;
        if (evidence) await disputeEvent(tx, row, 'dispute.updated', `evidence:${input.idempotency.fingerprint.slice(0, 16)}`);
        const response = { status: 200, body: JSON.stringify(disputeResource(row)), location: null };
        return completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: row.id }, response);
      });
    },

    /** The PSP refused the command (the dispute moved on meanwhile): a 409 with its reason, recorded as the operation's answer. */
    async recordDisputeRefusal(input: { disputeId: string; message: string; idempotency: ScopedKey }): Promise<FinalResponse> {
      return step(sql, (tx) => completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: input.disputeId }, errorResponse('dispute_not_open', input.message)));
    },

    /** dispute.evidence_due_soon, once per reminder, while the dispute still waits for evidence. */
    async recordDisputeReminder(input: { disputeId: string; beforeMs: number }): Promise<boolean> {
      return step(sql, async (tx) => {
        const row = await findDispute(tx, input.disputeId);
        if (!row || row.status !== 'needs_response') return false;
        await disputeEvent(tx, row, 'dispute.evidence_due_soon', `${row.stage}:${input.beforeMs}`);
        return true;
      });
    },

    /**
     * A payment refunded (in full or in part) before its dispute came: the refund is the evidence,
     * submitted on the merchant's behalf, and the payment is flagged for an operator
     * (failure.code needs_operator, the message saying how much was refunded), who follows it up
     * with the PSP: the refunded money would otherwise leave twice.
     */
    async flagDisputedRefundedPayment(input: { disputeId: string }): Promise<void> {
      await step(sql, async (tx) => {
        const row = await findDispute(tx, input.disputeId);
        if (!row) return;
        const payment = await paymentRefundFigures(tx, row.payment_id);
        const refunded = refundSummary({ refundedMinor: payment!.amount_refunded_minor, capturedMinor: payment!.amount_captured_minor, currency: payment!.currency });
        await flagPaymentForOperator(tx, row.payment_id, `Dispute ${row.id} came after ${refunded}; the refund was submitted as evidence. An operator must follow it up with the PSP.`);
      });
    },
  };
}

export type DisputeSteps = ReturnType<typeof createDisputeSteps>;

/** The dispute calls at the PSP that holds the charge (regular activities, heartbeating). */
export function createDisputeProviderSteps(registry: ProviderRegistry, sql: Sql) {
  /** The dispute as we recorded it, and its evidence so far: a PSP without a read of its disputes answers its commands with it, moved on. */
  const recorded = async (provider: string, providerDisputeId: string) => {
    const known = await recordedProviderDispute(sql, provider, providerDisputeId);
    if (!known) throw ApplicationFailure.nonRetryable(`dispute ${providerDisputeId} at ${provider} is not recorded`, 'DisputeUnknown');
    return known;
  };
  return {
    /**
     * The dispute as the PSP holds it now. A PSP without a read of its disputes (disputeSource
     * `notification`) is not asked: the dispute as its notifications left it, as we recorded it.
     */
    async retrieveDispute(input: { provider: string; providerDisputeId: string }): Promise<ProviderDispute> {
      const disputes = disputesAt(registry, input.provider);
      if (disputesNotifiedAt(registry, input.provider)) return (await recorded(input.provider, input.providerDisputeId)).dispute;
      return providerCall((signal) => disputes.retrieveDispute(input.providerDisputeId, { signal }));
    },
    /**
     * Concedes the dispute under its sub-key. A retry looks first where the PSP can be read: a
     * dispute already lost is what the concession asked for (the PSP may have forgotten the key
     * of the attempt whose answer was lost, and would refuse the repeat as not open). Where it
     * cannot (disputeSource `notification`), the retry is the same request, which the PSP replays
     * under its key, and the answer is the dispute as recorded, closed.
     */
    async closeDispute(input: { provider: string; providerDisputeId: string; subKey: string }): Promise<ProviderDispute> {
      const disputes = disputesAt(registry, input.provider);
      if (disputesNotifiedAt(registry, input.provider)) {
        const known = await recorded(input.provider, input.providerDisputeId);
        return providerCall((signal) => disputes.closeDispute({ idempotencyKey: input.subKey, disputeId: input.providerDisputeId, recorded: known.dispute }, { signal }));
      }
      if (isRetriedTry()) {
        const now = await providerCall((signal) => disputes.retrieveDispute(input.providerDisputeId, { signal }));
        if (now.status === 'lost') return now;
      }
      return providerCall((signal) => disputes.closeDispute({ idempotencyKey: input.subKey, disputeId: input.providerDisputeId }, { signal }));
    },
    /**
     * Stages or submits evidence under the sub-key (the PSP replays a repeated call): the evidence
     * given, or the one the API stored under `evidenceOf` (read here, so it never enters the run's history).
     * A retry of a submission looks first, as a charge's retry does: the PSP keeps a key only
     * for a while, and a submission repeated after it forgot the key of the attempt whose answer
     * was lost is refused (the dispute is no longer open). A dispute whose submitted evidence
     * holds every field of this one, as given, is this submission's answer.
     */
    async updateDispute(
      input: { provider: string; providerDisputeId: string; subKey: string; submit: boolean } & ({ evidence: Record<string, string> } | { evidenceOf: { disputeId: string; digest: string } }),
    ): Promise<ProviderDispute> {
      const evidence = 'evidenceOf' in input ? await evidenceOf(sql, input.evidenceOf) : input.evidence;
      const disputes = disputesAt(registry, input.provider);
      if (disputesNotifiedAt(registry, input.provider)) {
        // No read to look at: the same requests again, which the PSP replays under their keys.
        // It holds what it was last sent (no merge of its own): the evidence staged so far goes with this one.
        const known = await recorded(input.provider, input.providerDisputeId);
        const all = { ...known.evidence, ...evidence };
        return providerCall((signal) => disputes.updateDispute({ idempotencyKey: input.subKey, disputeId: input.providerDisputeId, evidence: all, submit: input.submit, recorded: known.dispute }, { signal }));
      }
      if (input.submit && isRetriedTry()) {
        const submitted = await providerCall((signal) => submittedWith(disputes, input.providerDisputeId, evidence, signal));
        if (submitted) return submitted;
      }
      return providerCall((signal) => disputes.updateDispute({ idempotencyKey: input.subKey, disputeId: input.providerDisputeId, evidence, submit: input.submit }, { signal }));
    },
  };
}

export type DisputeProviderSteps = ReturnType<typeof createDisputeProviderSteps>;
