import type { Types } from '@adyen/api-library';
import { z } from 'zod';
import { adyen } from './library';
import { ADYEN_MERCHANT_REFERENCE_MAX_LENGTH, ADYEN_PSP_REFERENCE_LENGTH } from './identifiers';
import { adyenTestCards } from './test-cards';
import type { DisputeStage, DisputeStatus } from '../../domain/disputes';
import { CANCEL_FAILED } from '../../shared/payments';
import { pspId, pspText, PSP_EVENT_TYPE_MAX_LENGTH } from '../wire-identifiers';
import { ProviderEventUnreadableError, readWire, type ProviderCharge, type ProviderDispute, type ProviderRefund, type ProviderWebhookEvent } from '../types';

type PaymentRequest = Types.checkout.PaymentRequest;
type PaymentResponse = Types.checkout.PaymentResponse;

/** What /payments (PaymentResponse) and /payments/details (PaymentDetailsResponse) both answer, as far as our charge reads it. */
export type AdyenPaymentAnswer = Pick<PaymentResponse, 'pspReference' | 'amount' | 'merchantReference' | 'refusalReason' | 'refusalReasonCode' | 'additionalData' | 'paymentMethod'> & {
  resultCode?: unknown;
  action?: { type?: unknown; url?: string } | null;
};
type NotificationRequestItem = Types.notification.NotificationRequestItem;

// Adyen's test cards live apart from the wire mapping, so the kind's descriptor (./index.ts) reads them without the SDK.
export { adyenTestCards, adyenThreeDSecureCards } from './test-cards';

/** Adyen's paymentMethod for one of our test payment methods; null for a name it has no card for. */
export function adyenPaymentMethod(paymentMethod: string): PaymentRequest['paymentMethod'] | null {
  const card = adyenTestCards[paymentMethod];
  if (!card) return null;
  return {
    type: adyen.Types.checkout.CardDetails.TypeEnum.Scheme,
    encryptedCardNumber: `test_${card.number}`,
    encryptedExpiryMonth: 'test_03',
    encryptedExpiryYear: 'test_2030',
    encryptedSecurityCode: 'test_737',
    holderName: card.holderName,
  };
}

/**
 * Our token of a card Adyen stored (storePaymentMethod): the shopper it is stored for and its
 * stored payment method id, both of which Adyen's charge by the token names.
 */
export function adyenSavedCardToken(shopperReference: string, storedPaymentMethodId: string): string {
  return `${shopperReference}/${storedPaymentMethodId}`;
}

/** The shopper and stored payment method id of our token; null for a token that is not Adyen's. */
export function parseAdyenSavedCardToken(token: string): { shopperReference: string; storedPaymentMethodId: string } | null {
  const match = /^([^/]+)\/([^/]+)$/.exec(token);
  return match ? { shopperReference: match[1]!, storedPaymentMethodId: match[2]! } : null;
}

/**
 * The card as Adyen can charge it again, from an authorised payment's additionalData (v72's
 * keys, ResponseAdditionalDataCommon and ResponseAdditionalDataCard): the network transaction id
 * (`networkTxReference`), the card (`paymentMethod.brand`, `cardSummary`, `expiryDate` as
 * `3/2030`), and our token when Adyen stored it (`tokenization.shopperReference` and
 * `tokenization.storedPaymentMethodId`). null when any of the card's fields is missing.
 */
export function savedCardOfPayment(payment: Pick<AdyenPaymentAnswer, 'additionalData' | 'paymentMethod'>): ProviderCharge['savedCard'] {
  const data = payment.additionalData ?? {};
  const networkTransactionId = data['networkTxReference'];
  const brand = payment.paymentMethod?.brand;
  const last4 = data['cardSummary'];
  const expiry = /^(\d{1,2})\/(\d{4})$/.exec(data['expiryDate'] ?? '');
  if (!networkTransactionId || !brand || !last4 || !expiry) return null;
  const shopper = data['tokenization.shopperReference'];
  const stored = data['tokenization.storedPaymentMethodId'];
  return {
    token: shopper && stored ? adyenSavedCardToken(shopper, stored) : null,
    networkTransactionId,
    card: { brand, last4, expMonth: Number(expiry[1]), expYear: Number(expiry[2]) },
  };
}

/** Adyen's refusal reason codes (resultCode `Refused`) in our decline codes; any other is `card_declined`. */
const declineCodes: Readonly<Record<string, string>> = {
  '5': 'card_declined', // Blocked card
  '6': 'expired_card',
  '7': 'incorrect_amount',
  '12': 'insufficient_funds',
  '14': 'fraudulent', // Acquirer fraud
  '20': 'fraudulent', // FRAUD
  '11': 'authentication_failed', // 3D Not Authenticated: the shopper failed or refused the challenge
  '24': 'incorrect_cvc',
};

/**
 * What our charge is, from Adyen's answer to /payments (or /payments/details) for it (`capture`: it
 * was asked for at once). `RedirectShopper` is the customer's 3-D Secure challenge: the charge
 * `requires_action`, its next action the redirect to Adyen's `action.url` (`returnUrl`: where
 * Adyen sends the customer back, our return route). Adyen may answer a redirect without its
 * pspReference (it names the payment in the /payments/details answer and the AUTHORISATION): the
 * charge's id is then '' (not named yet), and the charge is known by its reference until a report
 * names it (workflows/payments/state.ts noteReport).
 */
export function chargeFromPayment(
  payment: AdyenPaymentAnswer,
  request: { amountMinor: number; currency: string; reference: string; capture: boolean; returnUrl?: string | null },
): ProviderCharge {
  const base = {
    id: payment.pspReference ?? '',
    amountMinor: payment.amount?.value ?? request.amountMinor,
    amountCapturedMinor: 0,
    amountRefundedMinor: 0,
    currency: (payment.amount?.currency ?? request.currency).toUpperCase(),
    declineCode: null,
    declineMessage: null,
    nextAction: null,
    reference: payment.merchantReference ?? request.reference,
  };
  switch (String(payment.resultCode)) {
    case 'Authorised': {
      const savedCard = savedCardOfPayment(payment);
      const authorised = savedCard ? { ...base, savedCard } : base;
      return request.capture ? { ...authorised, status: 'succeeded', amountCapturedMinor: base.amountMinor } : { ...authorised, status: 'requires_capture' };
    }
    case 'Refused':
    case 'Cancelled':
      return {
        ...base,
        status: 'declined',
        declineCode: declineCodes[payment.refusalReasonCode ?? ''] ?? 'card_declined',
        declineMessage: payment.refusalReason ?? 'The card was refused.',
      };
    case 'RedirectShopper': {
      const url = payment.action?.url;
      if (String(payment.action?.type) !== 'redirect' || !url) return { ...base, status: 'processing' };
      return { ...base, status: 'requires_action', nextAction: { type: 'redirect_to_url', url, returnUrl: request.returnUrl ?? null } };
    }
    case 'Error':
      // An error at Adyen's side of the processing, not about the card: another PSP may be asked (§3.8).
      return { ...base, status: 'declined', declineCode: 'processing_error', declineMessage: payment.refusalReason ?? 'An error occurred while processing the card.' };
    default:
      // Pending, Received: the outcome comes by notification (AUTHORISATION).
      return { ...base, status: 'processing' };
  }
}

/**
 * A captured or cancelled charge as its confirming notification says it is: CAPTURE success
 * (the money was taken), CAPTURE_FAILED or CAPTURE refused (still only authorized: the
 * capture did not take place; decline code `capture_failed`), CANCELLATION (or TECHNICAL_CANCEL,
 * the answer to a cancel by our reference) success (`canceled`)
 * or not (still authorized: decline code `cancel_failed`), AUTHORISATION (authorized:
 * `requires_capture`; the charge events step reads it as `succeeded` for a payment with automatic
 * capture, where Adyen captures without a CAPTURE notification). The charge's amount is the notification's.
 */
export function chargeFromNotification(item: NotificationRequestItem): ProviderCharge | null {
  const id = item.originalReference ?? item.pspReference;
  const base = {
    id,
    amountMinor: item.amount.value ?? 0,
    amountCapturedMinor: 0,
    amountRefundedMinor: 0,
    currency: (item.amount.currency ?? '').toUpperCase(),
    declineCode: null,
    declineMessage: null,
    nextAction: null,
    reference: item.merchantReference,
  };
  const success = item.success === 'true';
  // Still only authorized: the capture did not take place, and the decline code says so.
  const captureFailed: ProviderCharge = { ...base, status: 'requires_capture', declineCode: 'capture_failed', declineMessage: item.reason || 'The capture failed.' };
  switch (String(item.eventCode)) {
    case 'AUTHORISATION':
      return success
        ? { ...base, id: item.pspReference, status: 'requires_capture', authorizedAt: item.eventDate }
        : { ...base, id: item.pspReference, status: 'declined', declineCode: /3D Not Authenticated/i.test(item.reason ?? '') ? 'authentication_failed' : 'card_declined', declineMessage: item.reason ?? null };
    case 'CAPTURE':
      return success ? { ...base, status: 'succeeded', amountCapturedMinor: base.amountMinor, succeededAt: item.eventDate } : captureFailed;
    case 'CAPTURE_FAILED':
      return captureFailed;
    case 'CANCELLATION':
    case 'TECHNICAL_CANCEL':
      // TECHNICAL_CANCEL: a cancel asked by our reference (of a charge Adyen had not named to us yet).
      // Refused: still authorized, and the decline code says the cancel did not take place.
      return success ? { ...base, status: 'canceled' } : { ...base, status: 'requires_capture', declineCode: CANCEL_FAILED, declineMessage: item.reason || 'The cancel failed.' };
    default:
      return null;
  }
}

/** A refund as its REFUND (or REFUND_FAILED) notification settles it; null for any other event. */
export function refundFromNotification(item: NotificationRequestItem): ProviderRefund | null {
  const code = String(item.eventCode);
  if (code !== 'REFUND' && code !== 'REFUND_FAILED') return null;
  const succeeded = code === 'REFUND' && item.success === 'true';
  return {
    id: item.pspReference,
    chargeId: item.originalReference ?? '',
    status: succeeded ? 'succeeded' : 'failed',
    amountMinor: item.amount.value ?? 0,
    failureCode: succeeded ? null : 'refund_failed',
    failureMessage: succeeded ? null : (item.reason || 'The refund failed.'),
    // The reference the refund was asked under: our refund id (or the payment id of a compensation).
    reference: item.merchantReference,
  };
}

/**
 * Adyen's dispute event codes (its standard notifications; the dispute's own pspReference,
 * shared by all of them, and the disputed payment's as originalReference): where each leaves the
 * dispute, whether evidence was submitted by then, and our event type. NOTIFICATION_OF_CHARGEBACK
 * and REQUEST_FOR_INFORMATION open it without moving money (our `inquiry`); CHARGEBACK debits
 * it; CHARGEBACK_REVERSED gives it back (won, though Adyen says not for good: the issuer may
 * take it to a second round); SECOND_CHARGEBACK (the issuer declined the defence: debited again)
 * and PREARBITRATION_LOST close that second round lost, PREARBITRATION_WON won (our
 * `pre_arbitration`, which moves a chargeback closed won); DISPUTE_DEFENSE_PERIOD_ENDED is an
 * undefended (or accepted) dispute, lost. Any other (INFORMATION_SUPPLIED, ISSUER_COMMENTS,
 * NOTIFICATION_OF_FRAUD, …) passes through as `adyen.<CODE>`. A dispute is moved only forward
 * (domain/disputes.ts): a CHARGEBACK_REVERSED delivered after the second round changes nothing.
 */
const disputeCodes: Readonly<Record<string, { stage: DisputeStage; status: DisputeStatus; defended: boolean; type: string }>> = {
  REQUEST_FOR_INFORMATION: { stage: 'inquiry', status: 'needs_response', defended: false, type: 'charge.dispute.created' },
  NOTIFICATION_OF_CHARGEBACK: { stage: 'inquiry', status: 'needs_response', defended: false, type: 'charge.dispute.created' },
  CHARGEBACK: { stage: 'chargeback', status: 'needs_response', defended: false, type: 'charge.dispute.funds_withdrawn' },
  CHARGEBACK_REVERSED: { stage: 'chargeback', status: 'won', defended: true, type: 'charge.dispute.funds_reinstated' },
  SECOND_CHARGEBACK: { stage: 'pre_arbitration', status: 'lost', defended: true, type: 'charge.dispute.closed' },
  PREARBITRATION_WON: { stage: 'pre_arbitration', status: 'won', defended: true, type: 'charge.dispute.closed' },
  PREARBITRATION_LOST: { stage: 'pre_arbitration', status: 'lost', defended: true, type: 'charge.dispute.closed' },
  DISPUTE_DEFENSE_PERIOD_ENDED: { stage: 'chargeback', status: 'lost', defended: false, type: 'charge.dispute.closed' },
};

/** Adyen's dispute event codes that we map (the rest pass through). */
export const adyenDisputeEventCodes: readonly string[] = Object.keys(disputeCodes);

/**
 * The dispute a dispute notification reports (null for any other event), as Adyen says it
 * stands: Adyen has no read of a dispute, so the signed notification is the dispute (the
 * kind's disputeSource `notification`). Its id is the dispute's pspReference, its charge the
 * disputed payment (originalReference), its reference our payment id (merchantReference); the
 * reason the scheme's code (additionalData.chargebackReasonCode), the deadline
 * additionalData.defensePeriodEndsAt (else the event's time). Adyen books a chargeback's fee
 * apart from the dispute (its settlement report): the fee here is 0.
 */
export function disputeFromNotification(item: NotificationRequestItem): ProviderDispute | null {
  const standing = disputeCodes[String(item.eventCode)];
  if (!standing) return null;
  const data = (item.additionalData ?? {}) as Record<string, unknown>;
  const eventTime = new Date(item.eventDate).toISOString();
  const dueBy = typeof data['defensePeriodEndsAt'] === 'string' ? new Date(data['defensePeriodEndsAt']).toISOString() : eventTime;
  const reason = typeof data['chargebackReasonCode'] === 'string' && data['chargebackReasonCode'] !== '' ? data['chargebackReasonCode'] : item.reason || 'unknown';
  return {
    id: item.pspReference,
    chargeId: item.originalReference!,
    reference: item.merchantReference || null,
    amountMinor: item.amount.value ?? 0,
    currency: (item.amount.currency ?? '').toUpperCase(),
    reason,
    stage: standing.stage,
    status: standing.status,
    evidenceDueBy: dueBy,
    evidenceSubmittedAt: standing.defended ? eventTime : null,
    createdAt: eventTime,
    feeMinor: 0,
  };
}

/** A time PostgreSQL's timestamptz holds (years 1 to 9999), as Adyen writes its eventDate (ISO 8601). */
const eventDate = z.string().refine((text) => {
  const time = Date.parse(text);
  if (!Number.isFinite(time)) return false;
  const year = new Date(time).getUTCFullYear();
  return year >= 1 && year <= 9999;
}, 'must be an ISO 8601 time between 0001-01-01 and 9999-12-31 (UTC)');

/**
 * The fields of Adyen's NotificationRequestItem (the official library's model) that we read or
 * that its HMAC signs, each of the type the model says: what a notification must carry before its
 * signature is checked and it is mapped. Fields it does not name pass through unread. Its
 * identifiers are bounded at the lengths Adyen documents (./identifiers.ts, ../wire-identifiers.ts): a
 * pspReference (and an originalReference, another item's pspReference) is 16 characters, a
 * merchant reference at most 80; the others at most 255, an event code 128.
 */
const pspReference = pspId(ADYEN_PSP_REFERENCE_LENGTH);

export const notificationItemSchema = z.looseObject({
  additionalData: z.record(z.string(), z.unknown()).optional(),
  amount: z.looseObject({ value: z.int().nonnegative(), currency: z.string().regex(/^[A-Za-z]{3}$/, 'must be an ISO 4217 code') }),
  pspReference,
  originalReference: pspReference.optional(),
  eventCode: pspId(PSP_EVENT_TYPE_MAX_LENGTH),
  eventDate,
  merchantAccountCode: pspText(),
  merchantReference: pspText(ADYEN_MERCHANT_REFERENCE_MAX_LENGTH),
  paymentMethod: pspText().optional(),
  reason: z.string().optional(),
  success: z.enum(['true', 'false']),
});

/**
 * What a dispute notification must carry besides (disputeCodes): the disputed payment
 * (originalReference), and, where given, a deadline PostgreSQL holds and a reason code.
 */
export const disputeNotificationSchema = z.looseObject({
  originalReference: z.string({ error: 'is required: the disputed payment' }).min(1),
  reason: z.string().max(1000).optional(),
  additionalData: z
    .looseObject({ defensePeriodEndsAt: eventDate.optional(), chargebackReasonCode: pspText().optional() })
    .optional(),
});

/** Adyen's standard notification: a batch of items, each wrapped as `{ NotificationRequestItem }`. */
export const notificationBatchSchema = z.looseObject({
  live: z.enum(['true', 'false']).optional(),
  notificationItems: z.array(z.looseObject({ NotificationRequestItem: z.looseObject({}) })).min(1, 'must hold at least one item'),
});

/** Where an item sits in the batch, as the issues name it (`notificationItems.0.NotificationRequestItem`). */
export const notificationItemPath = (index: number) => ['notificationItems', index, 'NotificationRequestItem'] as const;

/**
 * The batch's items, each checked by the wire schema: throws ProviderEventUnreadableError naming
 * every field (of every item) that is missing, null or of another type.
 */
export function readNotificationBatch(body: unknown): NotificationRequestItem[] {
  const batch = readWire(notificationBatchSchema, body);
  const issues: ProviderEventUnreadableError[] = [];
  const items = batch.notificationItems.map((wrapped, index) => {
    try {
      const item = readWire(notificationItemSchema, wrapped.NotificationRequestItem, notificationItemPath(index)) as unknown as NotificationRequestItem;
      if (disputeCodes[String(item.eventCode)]) readWire(disputeNotificationSchema, item, notificationItemPath(index));
      return item;
    } catch (error) {
      if (!(error instanceof ProviderEventUnreadableError)) throw error;
      issues.push(error);
      return null;
    }
  });
  if (issues.length > 0) throw new ProviderEventUnreadableError(issues.flatMap((e) => e.issues));
  return items as NotificationRequestItem[];
}

/** Adyen's event codes in our event types; others pass through as `adyen.<CODE>`. */
export function eventFromNotification(item: NotificationRequestItem): ProviderWebhookEvent {
  const code = String(item.eventCode);
  const charge = chargeFromNotification(item);
  const refund = refundFromNotification(item);
  const dispute = disputeFromNotification(item);
  const type = dispute
    ? disputeCodes[code]!.type
    : refund
    ? `refund.${refund.status}`
    : charge
      ? code === 'CAPTURE_FAILED' || (code === 'CAPTURE' && item.success !== 'true')
        ? 'charge.capture_failed'
        : (code === 'CANCELLATION' || code === 'TECHNICAL_CANCEL') && item.success !== 'true'
          ? 'charge.cancel_failed'
          : `charge.${charge.status}`
      : `adyen.${code}`;
  return {
    // One notification is one event: its PSP reference with its code (a capture's CAPTURE and CAPTURE_FAILED share a reference).
    id: `${item.pspReference}:${code}:${item.success}`,
    type,
    createdAt: new Date(item.eventDate),
    charge,
    refund,
    dispute,
  };
}
