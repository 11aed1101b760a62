/**
 * The payment service provider (PSP) as the orchestrator sees it. The sandbox client and
 * every real PSP's adapter (provider/<kind>/client.ts) implement this same interface.
 *
 * Every mutating call carries an idempotency key derived from our own records (payment +
 * step), so a retried call after a crash or a lost response resolves to the same provider
 * object instead of a second one.
 */

import type { ChargeState } from '../domain/payments';
import type { CardDetails } from '../shared/customers';
import type { ProviderCharge, ProviderNextAction } from '../shared/payments';
import type { ProviderDispute } from '../shared/disputes';

export type { ProviderCharge, ProviderDispute, ProviderNextAction };

/** The charge's status at the PSP: the lifecycle table's charge states (domain/payments.ts). */
export type ProviderChargeStatus = ChargeState;

/**
 * `pending`: received, not yet confirmed: only a kind whose modifications are `notified` answers
 * it, and its REFUND (or REFUND_FAILED) notification later says `succeeded` or `failed`.
 */
export type ProviderRefundStatus = 'succeeded' | 'failed' | 'pending';

export interface ProviderRefund {
  id: string;
  chargeId: string;
  status: ProviderRefundStatus;
  amountMinor: number;
  failureCode: string | null;
  failureMessage: string | null;
  /** The reference the refund was asked under (our refund id, or the payment id for a compensation), when the PSP's report names it. */
  reference?: string;
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
  /** Where the challenge page sends the customer back (methods that need authentication). */
  returnUrl?: string | null;
  /** The customer is not there: the PSP must not ask for a challenge (it declines with `authentication_required` instead). */
  offSession?: boolean;
  /** Save the card, as the PSP's own token, for later charges without the customer. */
  setupFutureUsage?: 'off_session' | null;
  /**
   * Charge a saved card instead of paymentMethod: by this PSP's token when it saved the card
   * (token), else by the card network's transaction id of its first payment and its details.
   */
  savedMethod?: { token: string | null; networkTransactionId: string; card: CardDetails } | null;
}

export interface CaptureChargeRequest {
  idempotencyKey: string;
  chargeId: string;
  /** Omitted: capture the whole authorized amount. */
  amountMinor?: number;
  /** The charge's currency: a PSP whose modification names its amount in full needs it. */
  currency?: string;
}

export interface VoidChargeRequest {
  idempotencyKey: string;
  /** '' for a charge the PSP has not named yet: a kind that names charges late cancels it by `reference`. */
  chargeId: string;
  /** Our reference the charge was made under (the payment id). */
  reference?: string;
}

export interface CreateRefundRequest {
  idempotencyKey: string;
  chargeId: string;
  amountMinor: number;
  /** The charge's currency: a PSP whose modification names its amount in full needs it. */
  currency?: string;
  /** Our refund id. */
  reference: string;
}

/**
 * The details call of a kind whose challengeReturn is `orchestrator`: what the PSP sent the
 * customer back to our return route with, for the charge's outcome.
 */
export interface CompleteChallengeRequest {
  idempotencyKey: string;
  chargeId: string;
  /** What the PSP appended to the returnUrl (its redirect result), as the customer brought it back. */
  redirectResult: string;
  /** The charge's figures as asked for, read where the PSP's answer leaves them out. */
  amountMinor: number;
  currency: string;
  reference: string;
  capture: boolean;
}

export interface CallOptions {
  /** Aborts the HTTP call; the outcome is then unknown (ProviderUnavailableError). */
  signal?: AbortSignal;
}

/** Evidence for a dispute: named text fields (`uncategorized_text`, `refund_policy`, …). */
export type DisputeEvidence = Record<string, string>;

export interface UpdateDisputeRequest {
  idempotencyKey: string;
  disputeId: string;
  evidence: DisputeEvidence;
  /** true: the evidence goes to the network for its decision (the dispute is then under review). */
  submit: boolean;
  /** The dispute as we recorded it: what a PSP whose answer does not carry the dispute (disputeSource `notification`) answers, moved on. */
  recorded?: ProviderDispute;
}

export interface CloseDisputeRequest {
  idempotencyKey: string;
  disputeId: string;
  /** The dispute as we recorded it: what a PSP whose answer does not carry the dispute (disputeSource `notification`) answers, closed. */
  recorded?: ProviderDispute;
}

/**
 * The dispute capability: a kind that implements it lets the orchestrator read, list, answer and
 * concede the PSP's disputes. Optional: a kind without it receives no dispute events (they pass
 * through as ignored). A kind whose disputeSource is `notification` (provider/kind.ts) answers
 * and concedes only: its retrieveDispute, listDisputes and retrieveEvidence refuse
 * (ProviderRejectedError), and no step calls them.
 */
export interface DisputeProvider {
  retrieveDispute(disputeId: string, options?: CallOptions): Promise<ProviderDispute>;
  /**
   * One page of the PSP's disputes (the sandbox's oldest first, another kind's maybe newest first).
   * `created`: a PSP that can filter by creation lists only those created in [from, to); one
   * that cannot lists them all (the caller filters).
   */
  listDisputes(query: { startingAfter?: string; limit?: number; created?: { from: Date; to: Date } }, options?: CallOptions): Promise<{ data: ProviderDispute[]; hasMore: boolean }>;
  /** The evidence the PSP holds for the dispute (staged or submitted), by field. */
  retrieveEvidence(disputeId: string, options?: CallOptions): Promise<Record<string, string>>;
  /** Stages evidence, or submits it; a dispute no longer open is a ProviderRejectedError. */
  updateDispute(request: UpdateDisputeRequest, options?: CallOptions): Promise<ProviderDispute>;
  /** Concedes the dispute (it is lost). */
  closeDispute(request: CloseDisputeRequest, options?: CallOptions): Promise<ProviderDispute>;
}

export interface PaymentProvider {
  /**
   * The kind whose client this is (provider/kinds.ts): the steps read its capabilities
   * (provider/registry.ts capabilitiesOf). Absent (a test's own fake): a `lookup` kind whose
   * modifications are final.
   */
  readonly kind?: string;
  /** The PSP's disputes, where the kind supports them. */
  readonly disputes?: DisputeProvider;
  /** A decline is a normal result (status 'declined'), not an error. */
  createCharge(request: CreateChargeRequest, options?: CallOptions): Promise<ProviderCharge>;
  /**
   * A kind whose challengeReturn is `orchestrator`: the charge as the PSP's details call decides
   * it, from what the customer came back with. A result the PSP does not know is a
   * ProviderRejectedError.
   */
  completeChallenge?(request: CompleteChallengeRequest, options?: CallOptions): Promise<ProviderCharge>;
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
  /**
   * Verifies a webhook on its raw body (headers by any case); throws ProviderWebhookError for a
   * bad, missing or stale signature, or a body that is not an event.
   */
  verifyWebhook(rawBody: string, headers: Record<string, string | undefined>, now?: Date): ProviderWebhookEvent;
  /**
   * A kind whose notifications come in batches (capabilities.notifications `batch`): every item
   * verified and read, each with the item as sent; throws as verifyWebhook does, for the whole batch.
   */
  verifyWebhookBatch?(rawBody: string, headers: Record<string, string | undefined>, now?: Date): { event: ProviderWebhookEvent; payload: unknown }[];
  /** One page of the PSP's balance transactions created in [from, to). */
  listBalanceTransactions(
    query: { from: Date; to: Date; startingAfter?: string; limit?: number },
    options?: CallOptions,
  ): Promise<{ data: ProviderBalanceTransaction[]; hasMore: boolean }>;
}

/** A PSP's webhook, verified and in our terms. */
export interface ProviderWebhookEvent {
  /** The PSP's event id, unique per provider. */
  id: string;
  /**
   * 'charge.requires_action' | 'charge.processing' | 'charge.succeeded' | 'charge.requires_capture' |
   * 'charge.declined' | 'charge.canceled' | 'charge.refunded' | 'refund.succeeded' | 'refund.failed';
   * 'charge.dispute.*' (with the dispute); other PSP events pass through under their own names
   * (e.g. '<kind>.customer.created').
   */
  type: string;
  createdAt: Date;
  /** The charge as it was when the event was made. */
  charge: ProviderCharge | null;
  refund: ProviderRefund | null;
  /** The dispute as it was when the event was made ('charge.dispute.*' events of a kind with disputes). */
  dispute: ProviderDispute | null;
}

/** An unverified or unreadable webhook (bad, missing or stale signature; a body that is not JSON, or ProviderEventUnreadableError): 400 at the inbound route. */
export class ProviderWebhookError extends Error {
  override readonly name: string = 'ProviderWebhookError';
}

/** One field of a signed event that cannot be read: its dotted path in the event (`data.object.currency`), as the API's issues name fields. */
export interface UnreadableField {
  path: string;
  code: string;
  message: string;
}

/**
 * A verified event whose fields the kind reads are missing, null or of the wrong type: 400
 * `invalid_request` at the inbound route, with one issue per field, and nothing stored.
 */
export class ProviderEventUnreadableError extends ProviderWebhookError {
  override readonly name: string = 'ProviderEventUnreadableError';
  constructor(readonly issues: UnreadableField[]) {
    super(`the event cannot be read: ${issues.map((i) => `${i.path || '(the event)'}: ${i.message}`).join('; ')}`);
  }
}

/** An issue as zod reports it: a union's carries the issues of each of its options. */
interface WireIssue {
  path: readonly PropertyKey[];
  code: string;
  message: string;
  errors?: readonly (readonly WireIssue[])[];
}

/** What readWire needs of a schema (a zod schema's safeParse), so this module imports no validation library. */
interface WireSchema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: readonly WireIssue[] } };
}

/** A union none of whose options took the value names the fields of the one option of the value's type (an id or an object: the object's). */
function wireIssues(issue: WireIssue): WireIssue[] {
  const ofItsType = (issue.errors ?? []).filter((option) => !option.every((i) => i.code === 'invalid_type' && i.path.length === 0));
  if (issue.code !== 'invalid_union' || ofItsType.length !== 1) return [issue];
  return ofItsType[0]!.flatMap((i) => wireIssues({ ...i, path: [...issue.path, ...i.path] }));
}

/**
 * A PSP's object in an event, checked by its kind's wire schema before it is mapped; `at` is
 * where it sits in the event (`['data', 'object']`). Throws ProviderEventUnreadableError naming
 * each field the schema refuses.
 */
export function readWire<T>(schema: WireSchema<T>, value: unknown, at: readonly PropertyKey[] = []): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new ProviderEventUnreadableError(
    parsed.error.issues.flatMap(wireIssues).map((issue) => ({ path: [...at, ...issue.path].map(String).join('.'), code: issue.code, message: issue.message })),
  );
}

/** One line of the PSP's report of money moved, which reconciliation compares with our payments, refunds and ledger. */
export interface ProviderBalanceTransaction {
  /** e.g. 'txn_…' */
  id: string;
  /**
   * A chargeback's withdrawal (negative amount, the dispute fee) is 'dispute'; its reinstatement
   * 'dispute_reversal'; the second round's withdrawal of what a reinstatement gave back (a
   * second chargeback) 'dispute_second'; the card network's fee for a retry that broke a scheme
   * rule (no amount, the fee; its source the charge) 'excessive_retry'.
   */
  type: 'charge' | 'refund' | 'dispute' | 'dispute_reversal' | 'dispute_second' | 'excessive_retry';
  /** The charge id, the refund id or the dispute id. */
  source: string;
  /** For refunds, the refunded charge. */
  chargeId: string;
  /** Our payment id (charges) or refund id (refunds). */
  reference: string | null;
  /** Positive for charges and reinstatements, negative for refunds and dispute withdrawals. */
  amountMinor: number;
  feeMinor: number;
  /** Upper-case ISO 4217. */
  currency: string;
  status: 'pending' | 'available';
  createdAt: Date;
}

/**
 * The outcome is unknown: network error, timeout, 5xx, 429. The call may or may not have
 * taken effect, so the caller retries with the same key and looks the operation up first.
 */
export class ProviderUnavailableError extends Error {
  override readonly name = 'ProviderUnavailableError';
  /**
   * true: the request certainly never reached the provider (the connection was refused), so
   * this call took no effect. Anything else (a reset, a timeout, a 5xx) leaves the outcome unknown.
   */
  readonly notSent: boolean;
  constructor(message: string, readonly status?: number, options?: { cause?: unknown; notSent?: boolean }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.notSent = options?.notSent ?? false;
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

/**
 * The PSP's report of money moved cannot be read: malformed (a CSV that breaks its grammar, a
 * missing column, an amount, date or record type that is not the PSP's), or not the report
 * asked for (another merchant account, another batch). Nothing of it is used: reading it again
 * cannot help, so the reconciliation run fails at once, for an operator.
 */
export class ProviderReportUnreadableError extends Error {
  override readonly name = 'ProviderReportUnreadableError';
}
