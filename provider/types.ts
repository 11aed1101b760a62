/**
 * The payment service provider (PSP) as the orchestrator sees it. The sandbox client and
 * a real PSP adapter (Stripe) implement this same interface.
 *
 * Every mutating call carries an idempotency key derived from our own records (payment +
 * step), so a retried call after a crash or a lost response resolves to the same provider
 * object instead of a second one.
 */

export type ProviderChargeStatus =
  | 'succeeded' | 'requires_capture' | 'declined' | 'canceled'
  | 'requires_action'   // the customer must authenticate (3-D Secure): see nextAction
  | 'processing';       // the PSP has it, the outcome is pending (bank debits)

export interface ProviderNextAction { type: 'redirect_to_url'; url: string; returnUrl: string | null }

export interface ProviderCharge {
  id: string;
  status: ProviderChargeStatus;
  amountMinor: number;
  amountCapturedMinor: number;
  amountRefundedMinor: number;
  currency: string;
  /** Set when status is 'declined': e.g. 'card_declined', 'insufficient_funds'. */
  declineCode: string | null;
  declineMessage: string | null;
  /** Set while status is 'requires_action'. */
  nextAction: ProviderNextAction | null;
  /** Our reference (payment id) as the PSP stored it. */
  reference: string;
}

export type ProviderRefundStatus = 'succeeded' | 'failed';

export interface ProviderRefund {
  id: string;
  chargeId: string;
  status: ProviderRefundStatus;
  amountMinor: number;
  failureCode: string | null;
  failureMessage: string | null;
}

export interface CreateChargeRequest {
  idempotencyKey: string;
  amountMinor: number;
  currency: string;
  paymentMethod: string;
  /** true: authorize and capture at once; false: authorize only (manual capture). */
  capture: boolean;
  /** Our payment id, so charges can be reconciled (and counted) per payment. */
  reference: string;
  description?: string | null;
  /** Where the challenge page sends the customer back. */ returnUrl?: string | null;
}

export interface CaptureChargeRequest {
  idempotencyKey: string;
  chargeId: string;
  /** Omitted: capture the whole authorized amount. */
  amountMinor?: number;
}

export interface VoidChargeRequest {
  idempotencyKey: string;
  chargeId: string;
}

export interface CreateRefundRequest {
  idempotencyKey: string;
  chargeId: string;
  amountMinor: number;
  /** Our refund id. */
  reference: string;
}

export interface CallOptions {
  /** Aborts the HTTP call; the outcome is then unknown (ProviderUnavailableError). */
  signal?: AbortSignal;
}

export interface PaymentProvider {
  /** A decline is a normal result (status 'declined'), not an error. */
  createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge>;
  /** The charge made under this idempotency key, or null if the provider never committed one. */
  findChargeByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderCharge | null>;
  /** Every charge made for this reference (our payment id): reconciliation counts them. */
  listChargesByReference(reference: string, options?: CallOptions): Promise<ProviderCharge[]>;
  captureCharge(request: CaptureChargeRequest, options?: CallOptions): Promise<ProviderCharge>;
  voidCharge(request: VoidChargeRequest, options?: CallOptions): Promise<ProviderCharge>;
  /** A refund the provider refuses is a normal result (status 'failed'), not an error. */
  createRefund(request: CreateRefundRequest, options?: CallOptions): Promise<ProviderRefund>;
  findRefundByIdempotencyKey(idempotencyKey: string, options?: CallOptions): Promise<ProviderRefund | null>;
  /** The charge as the PSP holds it now (status poll). */
  retrieveCharge(chargeId: string, options?: CallOptions): Promise<ProviderCharge>;
  /** Verifies a webhook on its raw body; throws ProviderWebhookError (bad/missing/stale signature, bad JSON). */
  verifyWebhook(rawBody: string, headers: Record<string, string | undefined>, now?: Date): ProviderWebhookEvent;
  /** One page of the PSP's balance transactions created in [from, to). */
  listBalanceTransactions(query: { from: Date; to: Date; startingAfter?: string; limit?: number }, options?: CallOptions):
    Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }>;
}

export interface ProviderWebhookEvent {
  id: string;                 // the PSP's event id, unique per provider
  type: string;               // e.g. 'charge.requires_action' | 'charge.processing' | 'charge.succeeded' | 'charge.requires_capture' | 'charge.declined' | 'charge.canceled' | 'charge.refunded' | 'refund.succeeded' | 'refund.failed'
  createdAt: Date;
  charge: ProviderCharge | null;   // the charge as it was when the event was made
  refund: ProviderRefund | null;
}
export class ProviderWebhookError extends Error {}   // → 400 at the inbound route

export interface ProviderBalanceTransaction {
  id: string;                        // e.g. 'txn_…'
  type: 'charge' | 'refund';
  source: string;                    // the charge id ('ch_…') or refund id ('re_…')
  chargeId: string;                  // for refunds, the refunded charge
  reference: string | null;          // our payment id (charges) or refund id (refunds)
  amountMinor: number;               // positive for charges, negative for refunds
  feeMinor: number;
  currency: string;                  // upper-case ISO 4217
  status: 'pending' | 'available';
  createdAt: Date;
}

/**
 * The outcome is unknown: network error, timeout, 5xx, 429. The call may or may not have
 * taken effect, so the caller retries with the same key and looks the operation up first.
 */
export class ProviderUnavailableError extends Error {
  override readonly name = 'ProviderUnavailableError';
  constructor(message: string, readonly status?: number, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The provider refused the request itself (4xx other than a decline): invalid parameters,
 * an idempotency key reused with different parameters, a charge in the wrong state.
 * Nothing happened and retrying the same request cannot help.
 */
export class ProviderRejectedError extends Error {
  override readonly name = 'ProviderRejectedError';
  constructor(message: string, readonly status: number, readonly code: string) {
    super(message);
  }
}
