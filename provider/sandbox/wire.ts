import type { ProviderBalanceTransaction, ProviderCharge, ProviderDispute, ProviderRefund, ProviderWebhookEvent } from '../types';

/**
 * The sandbox's wire mapping: its JSON objects and their translation into the orchestrator's
 * ProviderCharge, ProviderRefund, ProviderBalanceTransaction and ProviderWebhookEvent. The
 * client (./client.ts) reads its answers through it, the webhook verification (./webhook.ts)
 * the events it has verified.
 */

/** The sandbox's wire shapes (snake_case, integer minor units). */
export interface ChargeJson {
  id: string;
  object: 'charge';
  status: ProviderCharge['status'];
  amount_minor: number;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  currency: string;
  failure_code: string | null;
  failure_message: string | null;
  reference: string;
  next_action: { type: 'redirect_to_url'; redirect_to_url: { url: string; return_url: string | null } } | null;
  succeeded_at?: string | null;
  authorized_at?: string | null;
  card?: { brand: string; last4: string; exp_month: number; exp_year: number } | null;
  saved_card?: string | null;
  network_transaction_id?: string | null;
}

export interface RefundJson {
  id: string;
  object: 'refund';
  charge: string;
  amount_minor: number;
  status: ProviderRefund['status'];
  failure_code: string | null;
  failure_message: string | null;
}

export interface DisputeJson {
  id: string;
  object: 'dispute';
  charge: string;
  reference: string | null;
  amount_minor: number;
  currency: string;
  reason: string;
  stage: ProviderDispute['stage'];
  status: ProviderDispute['status'];
  evidence_due_by: string;
  evidence_submitted_at: string | null;
  created_at: string;
  fee_minor: number;
}

export interface ErrorJson {
  error?: { type?: string; code?: string; message?: string; charge?: ChargeJson };
}

export interface ListJson<T> {
  object: 'list';
  data: T[];
  has_more?: boolean;
}

export interface BalanceTransactionJson {
  id: string;
  object: 'balance_transaction';
  type: ProviderBalanceTransaction['type'];
  source: string;
  charge: string;
  reference: string | null;
  amount_minor: number;
  fee_minor: number;
  currency: string;
  status: 'pending' | 'available';
  created_at: string;
}

export const toCharge = (c: ChargeJson): ProviderCharge => ({
  id: c.id,
  status: c.status,
  amountMinor: c.amount_minor,
  amountCapturedMinor: c.amount_captured_minor,
  amountRefundedMinor: c.amount_refunded_minor,
  currency: c.currency,
  declineCode: c.failure_code,
  declineMessage: c.failure_message,
  nextAction:
    c.next_action?.type === 'redirect_to_url'
      ? { type: 'redirect_to_url', url: c.next_action.redirect_to_url.url, returnUrl: c.next_action.redirect_to_url.return_url }
      : null,
  reference: c.reference,
  succeededAt: c.succeeded_at ?? null,
  authorizedAt: c.authorized_at ?? null,
  ...(c.network_transaction_id && c.card
    ? {
        savedCard: {
          token: c.saved_card ?? null,
          networkTransactionId: c.network_transaction_id,
          card: { brand: c.card.brand, last4: c.card.last4, expMonth: c.card.exp_month, expYear: c.card.exp_year },
        },
      }
    : {}),
});

export const toRefund = (r: RefundJson): ProviderRefund => ({
  id: r.id,
  chargeId: r.charge,
  status: r.status,
  amountMinor: r.amount_minor,
  failureCode: r.failure_code,
  failureMessage: r.failure_message,
});

export const toDispute = (d: DisputeJson): ProviderDispute => ({
  id: d.id,
  chargeId: d.charge,
  reference: d.reference,
  amountMinor: d.amount_minor,
  currency: d.currency.toUpperCase(),
  reason: d.reason,
  stage: d.stage,
  status: d.status,
  evidenceDueBy: d.evidence_due_by,
  evidenceSubmittedAt: d.evidence_submitted_at,
  createdAt: d.created_at,
  feeMinor: d.fee_minor,
});

export const toBalanceTransaction = (t: BalanceTransactionJson): ProviderBalanceTransaction => ({
  id: t.id,
  type: t.type,
  source: t.source,
  chargeId: t.charge,
  reference: t.reference,
  amountMinor: t.amount_minor,
  feeMinor: t.fee_minor,
  currency: t.currency,
  status: t.status,
  createdAt: new Date(t.created_at),
});

/** A webhook's body once its signature is verified and its shape checked (./webhook.ts). */
export interface EventJson {
  id: string;
  type: string;
  /** Unix seconds. */
  created: number;
  data: { object: { object?: unknown } };
}

/** The event's object is the charge, the refund or the dispute as the API answers it; any other object maps to none. */
export const toWebhookEvent = (event: EventJson): ProviderWebhookEvent => {
  const object = event.data.object;
  return {
    id: event.id,
    type: event.type,
    createdAt: new Date(event.created * 1000),
    charge: object.object === 'charge' ? toCharge(object as unknown as ChargeJson) : null,
    refund: object.object === 'refund' ? toRefund(object as unknown as RefundJson) : null,
    dispute: object.object === 'dispute' ? toDispute(object as unknown as DisputeJson) : null,
  };
};
