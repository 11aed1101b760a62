import { disputeEvent, recordDisputeTransaction } from './effects';
import type { Tx } from './idempotency';
import { newDisputeId, type ChargeRow, type DisputeRow } from './objects';
import { paymentMethodBehaviour } from './payment-methods';
import type { SandboxDeps } from './deps';

/**
 * The card network's side of a dispute, driven by stored times (sandbox migration 008), so a restart of
 * the sandbox keeps every one of them:
 *
 * - a charge whose `dispute_at` has come receives its dispute for the whole captured amount,
 *   reason `fraudulent`: a chargeback withdraws the amount and the dispute fee at once
 *   (`charge.dispute.created`, `charge.dispute.funds_withdrawn`); an inquiry moves nothing;
 * - submitted evidence is decided `decide_at` (SANDBOX_DISPUTE_DECISION_MS after submission):
 *   `uncategorized_text` containing `winning_evidence` (and not `losing_evidence`) wins, as does
 *   any evidence for a charge refunded in full before the dispute opened; anything else loses. A won chargeback reinstates the amount (`charge.dispute.funds_reinstated`; the fee
 *   is kept); a lost inquiry escalates to a chargeback;
 * - evidence not submitted by `evidence_due_by` loses: a chargeback closes lost, an inquiry
 *   escalates to a chargeback.
 *
 * Every closing sends `charge.dispute.closed`. SKIP LOCKED: several sandbox processes on one
 * database act on each row once.
 */

const disputeReason = 'fraudulent';

/** Whether submitted evidence wins, by the sandbox's rule on `uncategorized_text`. */
export function evidenceWins(evidence: Record<string, string>): boolean {
  const text = evidence.uncategorized_text ?? '';
  return text.includes('winning_evidence') && !text.includes('losing_evidence');
}

const chargeOf = async (tx: Tx, chargeId: string) =>
  (await tx<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${chargeId}`)[0]!;

/** Opens the disputes that are due; returns how many. */
async function openDueDisputes(deps: SandboxDeps, limit: number): Promise<number> {
  return deps.sql.begin(async (tx) => {
    const due = await tx<ChargeRow[]>`
      SELECT * FROM sandbox.charges
      WHERE dispute_at <= clock_timestamp()
      ORDER BY dispute_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`;
    for (const charge of due) {
      await tx`UPDATE sandbox.charges SET dispute_at = NULL WHERE id = ${charge.id}`;
      const behaviour = paymentMethodBehaviour(charge.payment_method);
      if (behaviour?.kind === 'dispute' && charge.amount_captured_minor > 0) await openDispute(tx, deps, charge, behaviour.stage);
    }
    return due.length;
  });
}

/**
 * The network disputes the charge's whole captured amount (refunded or not: a cardholder may
 * dispute a charge already refunded), with its events; a chargeback withdraws at once. null:
 * the charge has its dispute already (one per charge). The caller holds the charge's row lock.
 */
export async function openDispute(tx: Tx, deps: SandboxDeps, charge: ChargeRow, stage: DisputeRow['stage']): Promise<DisputeRow | null> {
  const [dispute] = await tx<DisputeRow[]>`
    INSERT INTO sandbox.disputes (id, charge_id, amount_minor, currency, reason, stage, status, evidence_due_by)
    VALUES (
      ${newDisputeId()}, ${charge.id}, ${charge.amount_captured_minor}, ${charge.currency}, ${disputeReason},
      ${stage}, 'needs_response',
      clock_timestamp() + ${deps.config.disputeEvidenceSeconds}::bigint * interval '1 second'
    )
    ON CONFLICT (charge_id) DO NOTHING
    RETURNING *`;
  if (!dispute) return null;
  await disputeEvent(tx, deps, 'charge.dispute.created', dispute, charge);
  if (dispute.stage === 'chargeback') await withdraw(tx, deps, dispute, charge);
  return dispute;
}

async function withdraw(tx: Tx, deps: SandboxDeps, dispute: DisputeRow, charge: ChargeRow): Promise<void> {
  await recordDisputeTransaction(tx, deps, dispute, charge, 'dispute');
  await disputeEvent(tx, deps, 'charge.dispute.funds_withdrawn', dispute, charge);
}

/** An inquiry the merchant did not win (or conceded) becomes a chargeback: the funds are withdrawn and a new deadline runs. */
export async function escalate(tx: Tx, deps: SandboxDeps, inquiry: DisputeRow): Promise<DisputeRow> {
  const [dispute] = await tx<DisputeRow[]>`
    UPDATE sandbox.disputes
    SET stage = 'chargeback', status = 'needs_response', evidence_submitted_at = NULL, decide_at = NULL,
        evidence_due_by = clock_timestamp() + ${deps.config.disputeEvidenceSeconds}::bigint * interval '1 second',
        updated_at = clock_timestamp()
    WHERE id = ${inquiry.id} RETURNING *`;
  await withdraw(tx, deps, dispute!, await chargeOf(tx, dispute!.charge_id));
  return dispute!;
}

/** Closes a dispute won or lost, with its reinstatement when a chargeback is won. */
export async function closeDispute(tx: Tx, deps: SandboxDeps, open: DisputeRow, outcome: 'won' | 'lost'): Promise<DisputeRow> {
  const [dispute] = await tx<DisputeRow[]>`
    UPDATE sandbox.disputes SET status = ${outcome}, decide_at = NULL, updated_at = clock_timestamp()
    WHERE id = ${open.id} RETURNING *`;
  const charge = await chargeOf(tx, dispute!.charge_id);
  if (outcome === 'won' && dispute!.stage === 'chargeback') {
    await recordDisputeTransaction(tx, deps, dispute!, charge, 'dispute_reversal');
    await disputeEvent(tx, deps, 'charge.dispute.funds_reinstated', dispute!, charge);
  }
  await disputeEvent(tx, deps, 'charge.dispute.closed', dispute!, charge);
  return dispute!;
}

/** Locks the disputes `due` selects (SKIP LOCKED) and acts on each, in one transaction. */
async function eachDueDispute(deps: SandboxDeps, due: (tx: Tx) => Promise<DisputeRow[]>, act: (tx: Tx, dispute: DisputeRow) => Promise<unknown>): Promise<number> {
  return deps.sql.begin(async (tx) => {
    const rows = await due(tx);
    for (const dispute of rows) await act(tx, dispute);
    return rows.length;
  });
}

/** The charge was refunded in full before its dispute opened: the network sees the credit, and the submitted evidence wins. */
async function creditedBeforeDispute(tx: Tx, dispute: DisputeRow): Promise<boolean> {
  const [row] = await tx<{ refunded: number }[]>`
    SELECT coalesce(sum(amount_minor), 0)::bigint AS refunded FROM sandbox.refunds
    WHERE charge_id = ${dispute.charge_id} AND status = 'succeeded' AND created_at < ${dispute.created_at}`;
  return Number(row!.refunded) >= dispute.amount_minor;
}

/** Decides disputes whose evidence was submitted and whose decision time has come: a lost inquiry escalates. */
const decideDueDisputes = (deps: SandboxDeps, limit: number) =>
  eachDueDispute(
    deps,
    (tx) => tx<DisputeRow[]>`
      SELECT * FROM sandbox.disputes WHERE status = 'under_review' AND decide_at <= clock_timestamp()
      ORDER BY decide_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
    async (tx, dispute) => {
      const wins = evidenceWins(dispute.evidence) || (await creditedBeforeDispute(tx, dispute));
      return !wins && dispute.stage === 'inquiry' ? escalate(tx, deps, dispute) : closeDispute(tx, deps, dispute, wins ? 'won' : 'lost');
    },
  );

/** Disputes whose deadline passed without evidence: a chargeback is lost, an inquiry escalates. */
const expireOverdueDisputes = (deps: SandboxDeps, limit: number) =>
  eachDueDispute(
    deps,
    (tx) => tx<DisputeRow[]>`
      SELECT * FROM sandbox.disputes WHERE status = 'needs_response' AND evidence_due_by <= clock_timestamp()
      ORDER BY evidence_due_by LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
    (tx, dispute) => (dispute.stage === 'inquiry' ? escalate(tx, deps, dispute) : closeDispute(tx, deps, dispute, 'lost')),
  );

/** One pass of the network's side: opens, decides and expires what is due. */
export async function advanceDisputes(deps: SandboxDeps, limit = 50): Promise<number> {
  return (await openDueDisputes(deps, limit)) + (await decideDueDisputes(deps, limit)) + (await expireOverdueDisputes(deps, limit));
}
