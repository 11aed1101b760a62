import { z } from 'zod';
import { disputeStages, disputeStatuses } from '../../domain/disputes';
import { chargeStates } from '../../domain/payments';
import { pspId, pspText, PSP_EVENT_TYPE_MAX_LENGTH } from '../wire-identifiers';
import { readWire, type ProviderBalanceTransaction, type ProviderCharge, type ProviderDispute, type ProviderRefund, type ProviderWebhookEvent } from '../types';

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
  card?: { brand: string; last4: string; exp_month: number; exp_year: number; fingerprint?: string | null } | null;
  saved_card?: string | null;
  network_transaction_id?: string | null;
  outcome?: { network_decline_code: string; decline_category: number | null; network_advice_code: string | null } | null;
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
  /** The evidence staged or submitted, by field (absent from an event's copy that omits it). */
  evidence?: Record<string, string>;
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
  ...(c.outcome ? { declineSignal: { networkCode: c.outcome.network_decline_code, category: c.outcome.decline_category, adviceCode: c.outcome.network_advice_code } } : {}),
  ...(c.network_transaction_id && c.card
    ? {
        savedCard: {
          token: c.saved_card ?? null,
          networkTransactionId: c.network_transaction_id,
          card: { brand: c.card.brand, last4: c.card.last4, expMonth: c.card.exp_month, expYear: c.card.exp_year },
          fingerprint: c.card.fingerprint ?? null,
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

/**
 * The fields of the sandbox's objects that the mapping reads, as zod schemas: a signed event
 * whose object lacks one, has it null where it may not be, or of another type is refused with
 * the field's path (ProviderEventUnreadableError) before anything is mapped. Other fields pass.
 * Its ids, references and codes are bounded (../wire-identifiers.ts: at most 255 characters).
 */
const minor = z.int().nonnegative();
const time = z.string().refine((s) => Number.isFinite(Date.parse(s)), 'must be an ISO 8601 time');
const currency = z.string().regex(/^[A-Za-z]{3}$/, 'must be an ISO 4217 code');

const chargeSchema = z.object({
  id: pspId(),
  object: z.literal('charge'),
  status: z.enum(chargeStates),
  amount_minor: minor,
  amount_captured_minor: minor,
  amount_refunded_minor: minor,
  currency,
  failure_code: pspText().nullable(),
  failure_message: z.string().nullable(),
  reference: pspText(),
  next_action: z.object({ type: z.literal('redirect_to_url'), redirect_to_url: z.object({ url: z.string(), return_url: z.string().nullable() }) }).nullable(),
  succeeded_at: time.nullish(),
  authorized_at: time.nullish(),
  card: z.object({ brand: z.string(), last4: z.string(), exp_month: z.int(), exp_year: z.int(), fingerprint: pspText().nullish() }).nullish(),
  saved_card: pspText().nullish(),
  network_transaction_id: pspText().nullish(),
  outcome: z.object({ network_decline_code: pspText(), decline_category: z.int().nullable(), network_advice_code: pspText().nullable() }).nullish(),
}) satisfies z.ZodType<ChargeJson>;

const refundSchema = z.object({
  id: pspId(),
  object: z.literal('refund'),
  charge: pspId(),
  amount_minor: minor,
  status: z.enum(['succeeded', 'failed']),
  failure_code: pspText().nullable(),
  failure_message: z.string().nullable(),
}) satisfies z.ZodType<RefundJson>;

const disputeSchema = z.object({
  id: pspId(),
  object: z.literal('dispute'),
  charge: pspId(),
  reference: pspText().nullable(),
  amount_minor: minor,
  currency,
  reason: pspText(),
  stage: z.enum(disputeStages),
  status: z.enum(disputeStatuses),
  evidence: z.record(z.string(), z.string()).optional(),
  evidence_due_by: time,
  evidence_submitted_at: time.nullable(),
  created_at: time,
  fee_minor: minor,
}) satisfies z.ZodType<DisputeJson>;

/** A webhook's body once its signature is verified (./webhook.ts): an event whose object is the charge, the refund, the dispute, or another object. */
const eventSchema = z.object({
  id: pspId(),
  type: pspId(PSP_EVENT_TYPE_MAX_LENGTH),
  /** Unix seconds. */
  created: z.number(),
  data: z.object({ object: z.looseObject({ object: z.unknown() }) }),
});

/**
 * The event's object is the charge, the refund or the dispute as the API answers it; any other
 * object maps to none. A field the mapping reads that is missing, null or of another type is a
 * ProviderEventUnreadableError naming its path in the event (`data.object.currency`).
 */
export const toWebhookEvent = (body: unknown): ProviderWebhookEvent => {
  const event = readWire(eventSchema, body);
  const object = event.data.object;
  const at = ['data', 'object'];
  return {
    id: event.id,
    type: event.type,
    createdAt: new Date(event.created * 1000),
    charge: object.object === 'charge' ? toCharge(readWire(chargeSchema, object, at)) : null,
    refund: object.object === 'refund' ? toRefund(readWire(refundSchema, object, at)) : null,
    dispute: object.object === 'dispute' ? toDispute(readWire(disputeSchema, object, at)) : null,
  };
};
