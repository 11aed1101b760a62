import type { CaptureMethod, PaymentStatus, RefundStatus } from './payments';
import type { DisputeStage, DisputeStatus } from './disputes';
import { offSessionUnusable, type RecoveryView } from './recovery';

/** A payments row as postgres.js returns it (money as exact integers, see db/connect.ts). */
/** A payment's routing decision as recorded and shown (`routing`; shared/routing.ts RouteDecisionRecord). */
export interface RoutingDecisionView {
  strategy: 'static' | 'success_rate';
  candidates: { provider: string; approval_estimate: number | null; selection_probability: number }[];
  chosen: string;
  explored: boolean;
  reason: string;
}

export interface PaymentRow {
  id: string;
  tenant_id: string;
  order_id: string;
  amount_minor: number;
  currency: string;
  status: PaymentStatus;
  capture_method: CaptureMethod;
  payment_method: string;
  description: string | null;
  metadata: Record<string, string>;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  provider_charge_id: string | null;
  /** The configured PSP holding the charge (migration 009), set when the first charge attempt begins; null: none recorded, so the default provider. */
  provider: string | null;
  failure_code: string | null;
  failure_message: string | null;
  workflow_id: string;
  /** Where the PSP's challenge page sends the customer back (migration 007). */
  return_url: string | null;
  /** What the customer must do while the payment is requires_action; null otherwise. */
  next_action: { type: 'redirect_to_url'; redirect_to_url: { url: string; return_url: string | null } } | null;
  /** The customer it is for (migration 012); with setup_future_usage its card is saved for them once it succeeds. */
  customer_id: string | null;
  setup_future_usage: 'off_session' | null;
  /** Charged without the customer (a saved method). */
  off_session: boolean;
  /** Where its revenue recovery stands (migration 019); null: the payment never recovered. */
  recovery?: RecoveryView | null;
  /** The routing decision that sent it where it went (migration 029); null: the static route decided, with no decision recorded. */
  routing?: RoutingDecisionView | null;
  created_at: Date;
  updated_at: Date;
}

/** A customers row. */
export interface CustomerRow {
  id: string;
  tenant_id: string;
  email: string | null;
  name: string | null;
  metadata: Record<string, string>;
  created_at: Date;
}

/**
 * A payment_methods row: the card's brand, last4 and expiry, and what charging it again needs
 * (never shown: the card network's transaction id, each PSP's token, the card's fingerprint
 * and key); with its card's last hard decline of an off-session charge (tenant_cards, read
 * with it by db/customers-payment-methods.ts), null when there is none.
 */
export interface PaymentMethodRow {
  id: string;
  tenant_id: string;
  customer_id: string;
  card_brand: string;
  card_last4: string;
  card_exp_month: number;
  card_exp_year: number;
  network_transaction_id: string;
  provider_tokens: Record<string, string>;
  source_payment_id: string;
  detached_at: Date | null;
  created_at: Date;
  card_fingerprint: string | null;
  card_key: string;
  hard_decline_code: string | null;
  hard_declined_at: Date | null;
  hard_decline_payment_id: string | null;
}

export interface RefundRow {
  id: string;
  tenant_id: string;
  payment_id: string;
  amount_minor: number;
  currency: string;
  status: RefundStatus;
  reason: string | null;
  refund_key: string;
  provider_refund_id: string | null;
  failure_code: string | null;
  failure_message: string | null;
  workflow_id: string;
  created_at: Date;
  updated_at: Date;
}

/** The payment object of the HTTP API (docs/CONTRACT.md §3.3). Field order is part of the bytes. */
export function paymentResource(row: PaymentRow) {
  return {
    id: row.id,
    object: 'payment' as const,
    order_id: row.order_id,
    amount_minor: row.amount_minor,
    currency: row.currency,
    status: row.status,
    capture_method: row.capture_method,
    amount_captured_minor: row.amount_captured_minor,
    amount_refunded_minor: row.amount_refunded_minor,
    payment_method: row.payment_method,
    description: row.description,
    provider_charge_id: row.provider_charge_id,
    provider: row.provider ?? null,
    failure: row.failure_code ? { code: row.failure_code, message: row.failure_message ?? '' } : null,
    next_action: row.next_action ?? null,
    customer: row.customer_id,
    setup_future_usage: row.setup_future_usage,
    off_session: row.off_session,
    // Only a payment that recovered has it: every other payment's bytes stay as they were.
    ...(row.recovery ? { recovery: row.recovery } : {}),
    // Only a payment routed by success rate has it (docs/routing-and-waits.md).
    ...(row.routing ? { routing: row.routing } : {}),
    workflow_id: row.workflow_id,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
export type PaymentResource = ReturnType<typeof paymentResource>;

/** The refund object of the HTTP API. */
export function refundResource(row: RefundRow) {
  return {
    id: row.id,
    object: 'refund' as const,
    payment_id: row.payment_id,
    amount_minor: row.amount_minor,
    currency: row.currency,
    status: row.status,
    reason: row.reason,
    failure: row.failure_code ? { code: row.failure_code, message: row.failure_message ?? '' } : null,
    workflow_id: row.workflow_id,
    created_at: row.created_at.toISOString(),
  };
}
export type RefundResource = ReturnType<typeof refundResource>;

/** A disputes row (migration 014). */
export interface DisputeRow {
  id: string;
  tenant_id: string;
  payment_id: string;
  provider: string;
  provider_dispute_id: string;
  provider_charge_id: string;
  amount_minor: number;
  currency: string;
  reason: string;
  stage: DisputeStage;
  status: DisputeStatus;
  fee_minor: number;
  evidence: Record<string, string>;
  evidence_due_by: Date;
  evidence_submitted_at: Date | null;
  workflow_id: string;
  /** Why the dispute is held for an operator (null: it never was); nothing of it is posted or sent until released_at. */
  held_reason: string | null;
  released_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The dispute as the API shows it (docs/CONTRACT.md, disputes). */
export function disputeResource(row: DisputeRow) {
  return {
    id: row.id,
    object: 'dispute' as const,
    payment_id: row.payment_id,
    provider: row.provider,
    amount_minor: row.amount_minor,
    currency: row.currency,
    reason: row.reason,
    stage: row.stage,
    status: row.status,
    evidence_due_by: row.evidence_due_by.toISOString(),
    evidence_submitted_at: row.evidence_submitted_at?.toISOString() ?? null,
    hold: row.held_reason === null ? null : { reason: row.held_reason, released_at: row.released_at?.toISOString() ?? null },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export type DisputeResource = ReturnType<typeof disputeResource>;
/** The customer object of the HTTP API (docs/CONTRACT.md §3.9). */
export function customerResource(row: CustomerRow) {
  return {
    id: row.id,
    object: 'customer' as const,
    email: row.email,
    name: row.name,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
  };
}
export type CustomerResource = ReturnType<typeof customerResource>;

/** The payment method object of the HTTP API: the card as shown, never its tokens or network transaction id. */
export function paymentMethodResource(row: PaymentMethodRow) {
  return {
    id: row.id,
    object: 'payment_method' as const,
    customer: row.customer_id,
    card: { brand: row.card_brand, last4: row.card_last4, exp_month: row.card_exp_month, exp_year: row.card_exp_year },
    detached_at: row.detached_at?.toISOString() ?? null,
    off_session_unusable:
      row.hard_decline_code !== null && row.hard_declined_at !== null ? offSessionUnusable({ code: row.hard_decline_code, at: row.hard_declined_at, paymentId: row.hard_decline_payment_id }) : null,
    created_at: row.created_at.toISOString(),
  };
}
export type PaymentMethodResource = ReturnType<typeof paymentMethodResource>;

export function paymentLocation(paymentId: string): string {
  return `/v1/payments/${paymentId}`;
}

export function refundLocation(refundId: string): string {
  return `/v1/refunds/${refundId}`;
}
