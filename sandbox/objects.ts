import { randomBytes } from 'node:crypto';
import { testCard } from './payment-methods';

export type ChargeStatus = 'succeeded' | 'requires_capture' | 'declined' | 'canceled' | 'requires_action' | 'processing';
export type ChallengeState = 'pending' | 'approved' | 'denied' | 'expired';
export type RefundStatus = 'succeeded' | 'failed';
export type DisputeStage = 'inquiry' | 'chargeback';
export type DisputeStatus = 'needs_response' | 'under_review' | 'won' | 'lost';

/** A row of sandbox.charges, as postgres.js returns it (int8 parsed to exact integers). */
export interface ChargeRow {
  id: string;
  status: ChargeStatus;
  amount_minor: number;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  currency: string;
  payment_method: string;
  reference: string;
  description: string | null;
  idempotency_key: string;
  failure_code: string | null;
  failure_message: string | null;
  created_at: Date;
  capture: boolean;
  return_url: string | null;
  challenge_url: string | null;
  challenge_state: ChallengeState | null;
  settle_at: Date | null;
  updated_at: Date;
  /** When the charge changed state (migration 006's trigger stamps them). */
  succeeded_at: Date | null;
  authorized_at: Date | null;
  failed_at: Date | null;
  canceled_at: Date | null;
  /** pm_card_createDispute*: when the network opens its dispute (migration 008). */
  dispute_at: Date | null;
  /** A charge without its customer (migration 007). */
  off_session: boolean;
  /** The saved card token this charge made or charged. */
  saved_card: string | null;
  /** The card network's transaction id this charge was made with, or that its authorization got when it saved the card. */
  network_transaction_id: string | null;
  /** A declined charge's scheme signal (migration 009): response code, Visa category, Mastercard advice. */
  network_decline_code: string | null;
  decline_category: number | null;
  network_advice_code: string | null;
}

export interface RefundRow {
  id: string;
  charge_id: string;
  amount_minor: number;
  status: RefundStatus;
  reference: string;
  idempotency_key: string;
  failure_code: string | null;
  failure_message: string | null;
  created_at: Date;
}

/** The public charge object; the field order here is the order on the wire. */
export function chargeJson(row: ChargeRow) {
  return {
    id: row.id,
    object: 'charge' as const,
    status: row.status,
    amount_minor: row.amount_minor,
    amount_captured_minor: row.amount_captured_minor,
    amount_refunded_minor: row.amount_refunded_minor,
    currency: row.currency,
    payment_method: row.payment_method,
    reference: row.reference,
    description: row.description,
    idempotency_key: row.idempotency_key,
    failure_code: row.failure_code,
    failure_message: row.failure_message,
    created_at: row.created_at.toISOString(),
    capture: row.capture,
    return_url: row.return_url,
    /** As a card PSP's payment intent: where the customer authenticates, while status is requires_action. */
    next_action:
      row.status === 'requires_action' && row.challenge_url !== null
        ? { type: 'redirect_to_url' as const, redirect_to_url: { url: row.challenge_url, return_url: row.return_url } }
        : null,
    /** A processing charge settles at this time. */
    settle_at: row.status === 'processing' && row.settle_at ? row.settle_at.toISOString() : null,
    /** When the charge took the money, was authorized, declined, voided: the PSP's own clock. */
    succeeded_at: row.succeeded_at?.toISOString() ?? null,
    authorized_at: row.authorized_at?.toISOString() ?? null,
    failed_at: row.failed_at?.toISOString() ?? null,
    canceled_at: row.canceled_at?.toISOString() ?? null,
    off_session: row.off_session,
    /** The card charged (brand, last4, expiry); null for a method that is no card. */
    card: testCard(row.payment_method),
    /** Once authorized: the saved card token the charge made or charged, and the card network's transaction id. */
    saved_card: row.authorized_at !== null ? row.saved_card : null,
    network_transaction_id: row.authorized_at !== null ? row.network_transaction_id : null,
    /** As a card PSP's charge outcome: a decline's scheme signal (Visa category, Mastercard Merchant Advice Code); null when none. */
    outcome:
      row.network_decline_code !== null
        ? { network_decline_code: row.network_decline_code, decline_category: row.decline_category, network_advice_code: row.network_advice_code }
        : null,
  };
}

export type ChargeJson = ReturnType<typeof chargeJson>;

export function refundJson(row: RefundRow) {
  return {
    id: row.id,
    object: 'refund' as const,
    charge: row.charge_id,
    amount_minor: row.amount_minor,
    status: row.status,
    reference: row.reference,
    idempotency_key: row.idempotency_key,
    failure_code: row.failure_code,
    failure_message: row.failure_message,
    created_at: row.created_at.toISOString(),
  };
}

/**
 * The card network's fee for a chargeback, withdrawn with the disputed amount (a card PSP's is
 * typically 15.00 in the account's currency). It is kept when the dispute is won: only the amount is reinstated.
 */
export const disputeFeeMinor = 1500;

/** A row of sandbox.disputes. */
export interface DisputeRow {
  id: string;
  charge_id: string;
  amount_minor: number;
  currency: string;
  reason: string;
  stage: DisputeStage;
  status: DisputeStatus;
  evidence: Record<string, string>;
  evidence_due_by: Date;
  evidence_submitted_at: Date | null;
  decide_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * The public dispute object, after a card PSP's: `stage` says whether it is an inquiry (a PSP's
 * `warning_*` statuses: no money moved) or a chargeback; `reference` is the disputed charge's
 * (our payment id), so a merchant finds its payment without a second call.
 */
export function disputeJson(row: DisputeRow, charge: Pick<ChargeRow, 'reference'>) {
  return {
    id: row.id,
    object: 'dispute' as const,
    charge: row.charge_id,
    reference: charge.reference,
    amount_minor: row.amount_minor,
    currency: row.currency,
    reason: row.reason,
    stage: row.stage,
    status: row.status,
    evidence: row.evidence,
    evidence_due_by: row.evidence_due_by.toISOString(),
    evidence_submitted_at: row.evidence_submitted_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    /** The fee withdrawn with a chargeback's amount. */
    fee_minor: row.stage === 'chargeback' ? disputeFeeMinor : 0,
  };
}

export type DisputeJson = ReturnType<typeof disputeJson>;

export function listJson<T>(data: T[]) {
  return { object: 'list' as const, data };
}

/** 96 random bits: ids are unguessable and never collide in practice. */
export const newChargeId = () => `ch_${randomBytes(12).toString('hex')}`;
/** A saved card's token at this sandbox. */
export const newSavedCardId = () => `card_${randomBytes(12).toString('hex')}`;
export const newRefundId = () => `re_${randomBytes(12).toString('hex')}`;
export const newEventId = () => `evt_${randomBytes(12).toString('hex')}`;
export const newDisputeId = () => `dp_${randomBytes(12).toString('hex')}`;
export const newBalanceTransactionId = () => `txn_${randomBytes(12).toString('hex')}`;
