import canonicalize from 'canonicalize';
import type { Db } from './connect';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';
import { lockPayment } from './payments';
import { paymentOfCharge } from './provider-events';
import { disputeMovesForward, withdrawsFunds, type DisputeStage, type DisputeStatus } from '../domain/disputes';
import { newId, sha256Hex } from '../domain/ids';
import type { DisputeRow, PaymentRow } from '../domain/resources';
import type { ProviderDispute } from '../shared/disputes';

/** What applying the PSP's word on a dispute did to its row. */
export interface AppliedDispute {
  row: DisputeRow;
  /** Where the row stood before (null: this report created it). */
  before: { stage: DisputeStage; status: DisputeStatus } | null;
  /** The payment the disputed charge belongs to. */
  payment: PaymentRow;
}

/** Whether the dispute is held for an operator: nothing of it is posted or sent until it is released. */
export const isHeld = (row: Pick<DisputeRow, 'held_reason' | 'released_at'>): boolean => row.held_reason !== null && row.released_at === null;

/**
 * Why a new dispute of the payment is held for an operator, or null: its currency is not the
 * payment's, or the payment's disputed total (every dispute of it not held, this one with them)
 * would pass what was captured.
 */
async function newDisputeHold(db: Db, payment: PaymentRow, dispute: ProviderDispute): Promise<string | null> {
  if (dispute.currency.toUpperCase() !== payment.currency) return `its currency ${dispute.currency} is not the payment's ${payment.currency}`;
  const [disputed] = await db<{ total: number }[]>`
    SELECT coalesce(sum(amount_minor), 0)::float8 AS total FROM disputes
    WHERE payment_id = ${payment.id} AND (held_reason IS NULL OR released_at IS NOT NULL)`;
  const total = Number(disputed!.total) + dispute.amountMinor;
  if (total > Number(payment.amount_captured_minor)) {
    return `the payment's disputed total would be ${total} ${payment.currency}, more than the ${payment.amount_captured_minor} captured`;
  }
  return null;
}

/** How a report of a recorded dispute disagrees with it (its next stages are that dispute's: its charge, amount and currency). */
function reportDisagreements(row: DisputeRow, dispute: ProviderDispute): string[] {
  return [
    dispute.chargeId !== row.provider_charge_id ? `charge ${dispute.chargeId}, not ${row.provider_charge_id}` : null,
    dispute.amountMinor !== Number(row.amount_minor) ? `amount ${dispute.amountMinor}, not ${row.amount_minor}` : null,
    dispute.currency.toUpperCase() !== row.currency ? `currency ${dispute.currency}, not ${row.currency}` : null,
  ].filter((d): d is string => d !== null);
}

/**
 * Holds the dispute for an operator (the reason recorded on it, a release undone) and flags its
 * payment `needs_operator`: nothing of the dispute is posted or sent until an operator releases it.
 */
async function holdDispute(db: Db, row: DisputeRow, reason: string): Promise<DisputeRow> {
  const [held] = await db<DisputeRow[]>`
    UPDATE disputes SET held_reason = ${reason}, released_at = NULL, updated_at = now() WHERE id = ${row.id} RETURNING *`;
  await db`
    UPDATE payments SET failure_code = 'needs_operator',
      failure_message = ${`Dispute ${row.id} (${row.provider_dispute_id} at ${row.provider}) is held for an operator: ${reason}. Nothing of it was posted.`},
      updated_at = now()
    WHERE id = ${row.payment_id} AND failure_code IS DISTINCT FROM 'needs_operator'`;
  return held!;
}

/**
 * Records the dispute as the PSP reports it, in the caller's transaction: inserted once per
 * (provider, PSP dispute id) under the payment whose charge it disputes, then moved only
 * forward (domain/disputes.ts): a stale or reordered report changes nothing. Every report is
 * checked first (docs/CONTRACT.md §3.6.1, 12): a new dispute in another currency than the
 * payment's, or past what the payment's disputes leave of its captured amount, is recorded held
 * for an operator; a report of a recorded dispute naming another charge, amount or currency
 * holds it and moves nothing. The payment's row and the dispute's are locked for the rest of
 * the transaction, in that order. null: no payment of ours has that charge.
 */
export async function applyDisputeReport(db: Db, input: { provider: string; dispute: ProviderDispute; feeMinor: number; workflowId: string }): Promise<AppliedDispute | null> {
  const { provider, dispute } = input;
  // A recorded dispute's reports are that dispute's, whatever charge they name.
  const [recorded] = await db<{ payment_id: string }[]>`SELECT payment_id FROM disputes WHERE provider = ${provider} AND provider_dispute_id = ${dispute.id}`;
  const owner = recorded ? { id: recorded.payment_id } : await paymentOfCharge(db, provider, dispute.reference, dispute.chargeId);
  if (!owner) return null;
  // The payment first, then the dispute: a refund's decision (activities/refunds.ts
  // beginRefund) locks the payment too, so a refund and a dispute's recording take turns and
  // each sees the other's outcome (a refund before the chargeback is its evidence).
  const payment = await lockPayment(db, owner.id);
  const hold = recorded ? null : await newDisputeHold(db, payment, dispute);
  const inserted = await db`
    INSERT INTO disputes (id, tenant_id, payment_id, provider, provider_dispute_id, provider_charge_id, amount_minor, currency,
                          reason, stage, status, fee_minor, evidence_due_by, evidence_submitted_at, workflow_id)
    VALUES (${newId('dsp')}, ${payment.tenant_id}, ${payment.id}, ${provider}, ${dispute.id}, ${dispute.chargeId}, ${dispute.amountMinor},
            ${dispute.currency}, ${dispute.reason}, 'inquiry', 'needs_response', 0, ${dispute.evidenceDueBy}, NULL, ${input.workflowId})
    ON CONFLICT (provider, provider_dispute_id) DO NOTHING
    RETURNING id`;
  let [current] = await db<DisputeRow[]>`
    SELECT * FROM disputes WHERE provider = ${provider} AND provider_dispute_id = ${dispute.id} FOR UPDATE`;
  const before = inserted.length > 0 ? null : { stage: current!.stage, status: current!.status };
  if (hold) current = await holdDispute(db, current!, hold);
  const disagreements = before === null ? [] : reportDisagreements(current!, dispute);
  if (disagreements.length > 0) {
    const reason = `a report of it disagrees with it: ${disagreements.join('; ')}`;
    if (current!.held_reason !== reason) return { row: await holdDispute(db, current!, reason), before, payment };
    if (isHeld(current!)) return { row: current!, before, payment };
    // Released by an operator with this very disagreement: the reports go on as the PSP's word.
  }
  const standing = before ?? { stage: 'inquiry' as const, status: 'needs_response' as const };
  const moves = before === null || disputeMovesForward(standing, dispute);
  if (!moves) return { row: current!, before, payment };
  const [row] = await db<DisputeRow[]>`
    UPDATE disputes
    SET stage = ${dispute.stage}, status = ${dispute.status}, evidence_due_by = ${dispute.evidenceDueBy},
        evidence_submitted_at = COALESCE(evidence_submitted_at, ${dispute.evidenceSubmittedAt}),
        fee_minor = ${withdrawsFunds(dispute.stage) ? input.feeMinor : 0}, updated_at = now()
    WHERE id = ${current!.id}
    RETURNING *`;
  return { row: row!, before, payment };
}

/**
 * An operator's release of a held dispute: from now on it is booked as the PSP reports it (its
 * run posts and sends what its standing means at its next report). The dispute as released;
 * null when the tenant has no such dispute, or it is not held.
 */
export async function releaseDispute(db: Db, disputeId: string): Promise<DisputeRow | null> {
  const [row] = await db<DisputeRow[]>`
    UPDATE disputes SET released_at = COALESCE(released_at, now()), updated_at = now()
    WHERE id = ${disputeId} AND held_reason IS NOT NULL
    RETURNING *`;
  return row ?? null;
}

/** How much evidence one dispute takes (DISPUTE_EVIDENCE_MAX_REQUESTS, DISPUTE_EVIDENCE_MAX_BYTES). */
export interface EvidenceLimits {
  maxRequests: number;
  maxBytes: number;
}

/** The evidence of one request as it is stored: its canonical JSON's SHA-256 and size in bytes. */
export function evidenceDigest(evidence: Record<string, string>): { digest: string; bytes: number } {
  const canonical = canonicalize(evidence)!;
  return { digest: sha256Hex(canonical), bytes: Buffer.byteLength(canonical) };
}

/**
 * Admits one evidence request to the dispute, in the caller's transaction (the one that claims
 * its idempotency key): under the dispute row's lock, so concurrent requests cannot overrun the
 * limits, it counts the request and its bytes and stores the evidence under its digest (the run
 * reads it from here; its history holds only the digest). Returns the refusal's message when
 * the request would take the dispute past a limit, having changed nothing.
 */
export async function admitEvidence(db: Db, disputeId: string, evidence: Record<string, string>, limits: EvidenceLimits): Promise<string | null> {
  const { digest, bytes } = evidenceDigest(evidence);
  const [taken] = await db<{ evidence_requests: number; evidence_request_bytes: number }[]>`
    SELECT evidence_requests, evidence_request_bytes::float8 AS evidence_request_bytes FROM disputes WHERE id = ${disputeId} FOR UPDATE`;
  if (!taken) return `dispute ${disputeId} is not recorded`;
  if (taken.evidence_requests + 1 > limits.maxRequests) {
    return `dispute ${disputeId} has taken ${taken.evidence_requests} evidence requests, the most one dispute takes (${limits.maxRequests}); nothing was sent`;
  }
  if (taken.evidence_request_bytes + bytes > limits.maxBytes) {
    return `dispute ${disputeId} has taken ${taken.evidence_request_bytes} bytes of evidence; this request's ${bytes} would pass the ${limits.maxBytes} one dispute takes; nothing was sent`;
  }
  await db`
    INSERT INTO dispute_evidence (dispute_id, digest, evidence, bytes) VALUES (${disputeId}, ${digest}, ${db.json(evidence)}, ${bytes})
    ON CONFLICT (dispute_id, digest) DO NOTHING`;
  await db`
    UPDATE disputes SET evidence_requests = evidence_requests + 1, evidence_request_bytes = evidence_request_bytes + ${bytes}
    WHERE id = ${disputeId}`;
  return null;
}

/** Gives back what admitEvidence counted, when the request ran nothing (Temporal unreachable): its retry counts again. */
export async function giveBackEvidence(db: Db, disputeId: string, evidence: Record<string, string>): Promise<void> {
  const { bytes } = evidenceDigest(evidence);
  await db`
    UPDATE disputes SET evidence_requests = greatest(evidence_requests - 1, 0), evidence_request_bytes = greatest(evidence_request_bytes - ${bytes}, 0)
    WHERE id = ${disputeId}`;
}

/** The evidence stored under this digest for the dispute (admitEvidence), or null. */
export async function storedEvidence(db: Db, disputeId: string, digest: string): Promise<Record<string, string> | null> {
  const [row] = await db<{ evidence: Record<string, string> }[]>`SELECT evidence FROM dispute_evidence WHERE dispute_id = ${disputeId} AND digest = ${digest}`;
  return row?.evidence ?? null;
}

/** Stores staged evidence on the dispute (the merchant's own copy; the PSP holds the one that counts). */
export async function stageEvidence(db: Db, disputeId: string, evidence: Record<string, string>): Promise<void> {
  await db`UPDATE disputes SET evidence = evidence || ${db.json(evidence)}, updated_at = now() WHERE id = ${disputeId}`;
}

export async function getDispute(db: Db, tenantId: string, disputeId: string): Promise<DisputeRow | null> {
  const [row] = await db<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${disputeId} AND tenant_id = ${tenantId}`;
  return row ?? null;
}

/** The dispute by id alone (a workflow step, which owns it), or null. */
export async function findDispute(db: Db, disputeId: string): Promise<DisputeRow | null> {
  const [row] = await db<DisputeRow[]>`SELECT * FROM disputes WHERE id = ${disputeId}`;
  return row ?? null;
}

/** A tenant's disputes, newest first, optionally of one payment and in one status. */
export async function listDisputes(db: Db, tenantId: string, filter: { paymentId?: string; status?: DisputeStatus }, query: PageQuery): Promise<Page<DisputeRow>> {
  const rows = await db<DisputeRow[]>`
    SELECT * FROM disputes
    WHERE tenant_id = ${tenantId}
      ${filter.paymentId !== undefined ? db`AND payment_id = ${filter.paymentId}` : db``}
      ${filter.status !== undefined ? db`AND status = ${filter.status}` : db``}
      ${keysetPage(db, 'id', query)}`;
  return toPage(rows, query);
}

/**
 * What the card network holds or has taken of the payment's money: the amounts of its
 * chargebacks (first or second round) that withdrew funds and were not won back (waiting for a
 * response, under review, or lost). A refund may return at most what the network did not take,
 * or the cardholder gets the money twice; a won chargeback reinstates its amount, which counts
 * as refundable again until a second round takes it.
 */
export async function amountTakenByChargebacks(db: Db, paymentId: string): Promise<{ amountMinor: number; disputeIds: string[] }> {
  const rows = await db<{ id: string; amount_minor: number }[]>`
    SELECT id, amount_minor FROM disputes
    WHERE payment_id = ${paymentId} AND stage IN ('chargeback', 'pre_arbitration') AND status IN ('needs_response', 'under_review', 'lost')
    ORDER BY id`;
  return { amountMinor: rows.reduce((sum, row) => sum + Number(row.amount_minor), 0), disputeIds: rows.map((row) => row.id) };
}

/** The PSP dispute ids of ours among these (reconciliation: which disputes the PSP lists that we never saw). */
export async function knownProviderDisputes(db: Db, provider: string, providerDisputeIds: string[]): Promise<Set<string>> {
  const rows = await db<{ provider_dispute_id: string }[]>`
    SELECT provider_dispute_id FROM disputes WHERE provider = ${provider} AND provider_dispute_id = ANY(${providerDisputeIds})`;
  return new Set(rows.map((r) => r.provider_dispute_id));
}

/** An open dispute and its workflow, as the sweeper checks that a run is there to follow it. */
export interface OpenDispute {
  id: string;
  provider: string;
  provider_dispute_id: string;
  workflow_id: string;
}

/**
 * Disputes the PSP has not closed (needs a response, or under review), untouched for
 * `minAgeSeconds`: each should have a running workflow. A sample of at most `limit`, drawn at
 * random, so that over successive sweeps every open dispute is looked at however many there are.
 */
export async function openDisputes(db: Db, minAgeSeconds: number, limit: number): Promise<OpenDispute[]> {
  return db<OpenDispute[]>`
    SELECT id, provider, provider_dispute_id, workflow_id FROM disputes
    WHERE status IN ('needs_response', 'under_review') AND updated_at < now() - make_interval(secs => ${minAgeSeconds})
    ORDER BY random()
    LIMIT ${limit}`;
}

/**
 * The dispute as we recorded it, in the PSP's terms (ProviderDispute), with the evidence staged
 * on it so far, or null: what stands in for the PSP's word at a PSP that has no read of a
 * dispute (disputeSource `notification`).
 */
export async function recordedProviderDispute(db: Db, provider: string, providerDisputeId: string): Promise<{ dispute: ProviderDispute; evidence: Record<string, string> } | null> {
  const [row] = await db<DisputeRow[]>`SELECT * FROM disputes WHERE provider = ${provider} AND provider_dispute_id = ${providerDisputeId}`;
  if (!row) return null;
  const dispute: ProviderDispute = {
    id: row.provider_dispute_id,
    chargeId: row.provider_charge_id,
    reference: row.payment_id,
    amountMinor: row.amount_minor,
    currency: row.currency,
    reason: row.reason,
    stage: row.stage,
    status: row.status,
    evidenceDueBy: row.evidence_due_by.toISOString(),
    evidenceSubmittedAt: row.evidence_submitted_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    feeMinor: row.fee_minor,
  };
  return { dispute, evidence: row.evidence };
}
