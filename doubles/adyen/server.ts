import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Types } from '@adyen/api-library';
import { adyen } from '../../provider/adyen/library';
import { adyenThreeDSecureCards, eventFromNotification } from '../../provider/adyen/wire';
import { AdyenChallenges, type ChallengeOf } from './challenge';
import { faultsJson, webhookFaultsBody, webhookFaultsOf } from '../../sandbox/webhooks';
import { AdyenCensus } from './census';
import { DISPUTES_PATH, DoubleDisputes, type DisputeMoneyMovement, type DoubleDisputeOptions } from './disputes';
import { DEFAULT_NETWORK_KEY } from '../../sandbox/network';
import { refusalOf } from './models';
import { NotificationOutbox, paymentOf } from './notifications';
import { networkTxReference } from './network';
import { Listening, outageBody, type AdyenDoubleOutageMode } from './down';
import { SettlementBatches, type SettlementReportUser } from './settlement';
import { cancelable, cancelRefusal } from './cancels';
import { authoriseControl, PendingAuthorisations } from './pending';

type NotificationRequestItem = Types.notification.NotificationRequestItem;
const { NotificationRequestItem } = adyen.Types.notification;

/**
 * What the double does to its answers (the sandbox's outage control, `POST /_sandbox/outage`):
 * `unavailable` answers 503 and does nothing; `down` stops listening, so connections are refused
 * and nothing is sent (./down.ts; for `for_ms`, or until the handle's setOutage ends it);
 * `lose-answers` does what was asked, then drops the connection before answering (a lost answer).
 */
export type AdyenDoubleOutage = AdyenDoubleOutageMode;

export interface AdyenDoubleOptions {
  /** 0: any free port (loopback only). */
  port?: number;
  apiKey: string;
  merchantAccount: string;
  /** Hex HMAC key the notifications are signed with. */
  hmacKey: string;
  /** Where the notifications go (loopback only); null: none are sent (they are still kept in `notifications`). */
  webhookUrl: string | null;
  /** How long a capture, cancel or refund is held `received` before its notification; default 50 ms. */
  confirmAfterMs?: number;
  /** The card network's key, the sandboxes' SANDBOX_NETWORK_KEY (default: sandbox/network.ts DEFAULT_NETWORK_KEY): its network transaction ids are the network's (./network.ts). */
  networkKey?: string;
  /** The report user its settlement reports are served to (./settlement.ts); default: reportUserOf(merchantAccount). */
  reportUser?: SettlementReportUser;
  /** The disputes' timing (./disputes.ts). */
  disputes?: DoubleDisputeOptions;
}

/** The report user a double has unless told: `report@Company.<merchant account>`, password `report_password`, no API key. */
export const reportUserOf = (merchantAccount: string): SettlementReportUser => ({ username: `report@Company.${merchantAccount}`, password: 'report_password', apiKey: null });

export interface HeldPayment {
  pspReference: string;
  merchantReference: string;
  value: number;
  currency: string;
  holderName: string;
  authorised: boolean;
  capturedMinor: number;
  refundedMinor: number;
  /** A 3-D Secure payment (./challenge.ts): the request, kept for its outcome once the shopper decides. */
  challenged?: { request: Types.checkout.PaymentRequest; card: StoredCard; answer: Answer | null };
}

interface StoredCard {
  number: string;
  holderName: string;
  /** The network transaction id of the payment that stored it: its off-session charges name it. */
  networkTxReference?: string;
}

export interface AdyenDouble {
  url: string;
  /** Every notification item made (sent, lost to a fault, or kept without a webhook URL), in order. */
  readonly notifications: readonly NotificationRequestItem[];
  /** Sends the notifications to this URL from now on (loopback only; e.g. an API started after the double). */
  setWebhookUrl(url: string | null): void;
  /** How many payments the double authorised or refused: a replay makes none. */
  paymentsMade(): number;
  /** Where it serves Adyen's Disputes service: a connection's `disputesUrl`. */
  disputesUrl: string;
  /** The disputes' money movements, in order (./disputes.ts), for a settlement report. */
  disputeMovements(): readonly DisputeMoneyMovement[];
  /** Its outage mode, as `POST /_sandbox/outage` sets it; the only way back from `down` but its `for_ms`. */
  setOutage(mode: AdyenDoubleOutage): Promise<void>;
  /** The payments it holds for a merchant reference (our payment id), refused ones included: what it authorised, captured and refunded. */
  paymentsFor(merchantReference: string): readonly Readonly<HeldPayment>[];
  /** How many /payments/details calls the double took, refused ones included (a replay by Idempotency-Key makes none). */
  detailsCalls(): number;
  /** Its settlement batches: every capture and refund it confirms is a line of the open one (./settlement.ts). */
  readonly settlement: SettlementBatches;
  close(): Promise<void>;
}

const API_VERSION = /^\/v\d+/;

type Answer = { status: number; body: unknown };

/**
 * A faithful double of Adyen's Checkout API for tests and `npm start` (as a PSP's own mock is
 * for its API): /payments, and a payment's /captures, /cancels and /refunds, each body checked
 * against the official library's model of it (a field it does not carry, or a required one
 * missing, is refused in Adyen's error shape), answered in Adyen's shapes, replayed by
 * Idempotency-Key (the same key answers the first answer, and does nothing again). A capture,
 * cancel or refund is answered `received`; its outcome comes later as a signed (HMAC) batch of
 * notifications (CAPTURE, or CAPTURE_FAILED for the card held by `CAPTURE_FAILED`;
 * CANCELLATION, refused for the card held by `CANCEL_FAILED` (./cancels.ts); REFUND), sent to the webhook URL until answered `[accepted]`, with the sandbox's
 * webhook faults and control calls (./notifications.ts; `/_sandbox/webhook_faults`,
 * `/_sandbox/events?charge=`, `/_sandbox/events/{id}/redeliver`, `/_sandbox/outage`), and a
 * read-only census of what it charged, captured, cancelled and refunded (`/_sandbox/payments`,
 * ./census.ts). Test cards: Adyen's, with the
 * refusal asked for by the holder name (`DECLINED`, `NOT_ENOUGH_BALANCE`). An authorised card
 * answers a network transaction id the sandboxes' card network issued for its test card
 * (./network.ts), so a sandbox on the network charges it by that id; a payment with
 * `storePaymentMethod` (and its shopperReference and recurringProcessingModel) stores the card
 * for that shopper and answers its stored id; a payment by `storedPaymentMethodId` charges the
 * shopper's stored card, merchant-initiated only (`ContAuth`). A 3-D Secure test card (4917 6100 0000 0000) with its shopper there answers
 * `RedirectShopper` with a redirect action to the issuer's challenge page (./challenge.ts: Approve
 * and Deny, or the sandbox's control `POST result=approve|deny`); the decision authorises (or
 * refuses: `3D Not Authenticated`) the payment, sends its AUTHORISATION, and sends the shopper
 * (303) to the payment's returnUrl with `redirectResult`, which `/payments/details` (checked
 * against PaymentDetailsRequest) exchanges for the outcome. A cancel ends a challenge still open.
 * Each capture it makes (at once, or confirmed later) and each refund it confirms
 * is a line of its Settlement details reports, served on its URL to the report user
 * (./settlement.ts; `/_sandbox/settlement/lines` and `/_sandbox/settlement/close` control them).
 * A captured payment of the card held by `CHARGEBACK` is disputed, and the Disputes
 * service is served under DISPUTES_PATH (./disputes.ts).
 */
export async function startAdyenDouble(options: AdyenDoubleOptions): Promise<AdyenDouble> {
  const payments = new Map<string, HeldPayment>();
  /** The cards stored per shopperReference, by their stored payment method id. */
  const stored = new Map<string, Map<string, StoredCard>>();
  const networkKey = options.networkKey ?? DEFAULT_NETWORK_KEY;
  const answered = new Map<string, { status: number; body: unknown }>();
  const outbox = new NotificationOutbox({ hmacKey: options.hmacKey, webhookUrl: options.webhookUrl });
  const settlement = new SettlementBatches({ companyAccount: 'OrchestratorCompany', merchantAccount: options.merchantAccount, user: options.reportUser ?? reportUserOf(options.merchantAccount) });
  /** The money a confirmed capture or refund moved: a line of the open settlement batch. */
  const settle = (type: 'Settled' | 'Refunded', payment: HeldPayment, modification: { pspReference: string; reference?: string | undefined; value: number }) =>
    settlement.record({ type, pspReference: payment.pspReference, merchantReference: payment.merchantReference, modificationReference: modification.pspReference, modificationMerchantReference: modification.reference ?? '', currency: payment.currency, grossMinor: modification.value });
  const timers = new Set<NodeJS.Timeout>();
  let outage: AdyenDoubleOutage = 'none';
  let made = 0;
  let details = 0;
  let baseUrl = '';
  const confirmAfterMs = options.confirmAfterMs ?? 50;
  // What it charged, captured, cancelled and refunded, read-only (GET /_sandbox/payments; ./census.ts).
  const census = new AdyenCensus({ payments, notifications: () => outbox.kept });
  const pending = new PendingAuthorisations<HeldPayment>();

  const pspReference = () => randomBytes(8).toString('hex').toUpperCase();
  const later = (ms: number, run: () => void) => {
    const timer = setTimeout(() => (timers.delete(timer), run()), ms);
    timers.add(timer);
  };
  // A dispute's money is a line of the settlement batch too, named by the chargeback's PSP reference.
  const disputes = new DoubleDisputes({
    merchantAccount: options.merchantAccount,
    outbox,
    later,
    pspReference,
    options: options.disputes ?? {},
    onMovement: (m) => settlement.record({ type: m.type, pspReference: m.originalReference, merchantReference: m.merchantReference, modificationReference: m.pspReference, currency: m.currency, grossMinor: Math.abs(m.amountMinor) }),
  });

  const notify = (eventCode: string, payment: HeldPayment, fields: { pspReference: string; value: number; success: boolean; reason?: string; original?: boolean }) =>
    outbox.add({
        amount: { currency: payment.currency, value: fields.value },
        eventCode: eventCode as Types.notification.NotificationRequestItem.EventCodeEnum,
        eventDate: new Date().toISOString(),
        merchantAccountCode: options.merchantAccount,
        merchantReference: payment.merchantReference,
        pspReference: fields.pspReference,
        ...(fields.original === false ? {} : { originalReference: payment.pspReference }),
        paymentMethod: 'visa',
        reason: fields.reason ?? '',
        success: fields.success ? NotificationRequestItem.SuccessEnum.True : NotificationRequestItem.SuccessEnum.False,
    });

  const error = (status: number, errorCode: string, message: string, errorType = 'validation'): Answer => ({ status, body: { status, errorCode, message, errorType } });

  /** The card a payment names: a stored one by its id (charged without the shopper: ContAuth), or the card itself. */
  const cardOf = (body: Types.checkout.PaymentRequest): StoredCard | Answer => {
    const method = body.paymentMethod as Types.checkout.CardDetails;
    if (method.storedPaymentMethodId !== undefined) {
      if (!body.shopperReference) return error(422, '130', 'Required field \'shopperReference\' is not provided.');
      const card = stored.get(body.shopperReference)?.get(method.storedPaymentMethodId);
      if (!card) return error(422, '800', 'Contract not found');
      if (String(body.shopperInteraction) !== 'ContAuth' || !body.recurringProcessingModel) return error(422, '000', 'A stored card is charged merchant-initiated here: shopperInteraction ContAuth with a recurringProcessingModel');
      return card;
    }
    const number = (method.encryptedCardNumber ?? method.number ?? '').replace(/^test_/, '');
    if (!/^\d{12,19}$/.test(number)) return error(422, '101', 'Invalid card number');
    if (body.storePaymentMethod && (!body.shopperReference || !body.recurringProcessingModel)) return error(422, '130', 'Storing a card needs a shopperReference and a recurringProcessingModel');
    return { number, holderName: method.holderName ?? '' };
  };

  /**
   * An authorised card's additionalData and paymentMethod as v72 answers them: the network
   * transaction id (a stored card's: the one of the payment that stored it), the card's summary
   * and expiry, and, when asked to store it, the shopper and the stored payment method id.
   */
  const cardAnswer = (body: Types.checkout.PaymentRequest, card: StoredCard) => {
    const reference = card.networkTxReference ?? networkTxReference(networkKey, card);
    const additionalData: Record<string, string> = { networkTxReference: reference, cardSummary: card.number.slice(-4), expiryDate: '3/2030' };
    if (body.storePaymentMethod && body.shopperReference) {
      const cards = stored.get(body.shopperReference) ?? new Map<string, StoredCard>();
      const id = [...cards].find(([, kept]) => kept.number === card.number && kept.holderName === card.holderName)?.[0] ?? pspReference();
      cards.set(id, { number: card.number, holderName: card.holderName, networkTxReference: reference });
      stored.set(body.shopperReference, cards);
      Object.assign(additionalData, { 'tokenization.shopperReference': body.shopperReference, 'tokenization.storedPaymentMethodId': id, 'tokenization.store.operationType': 'created' });
    }
    return { additionalData, paymentMethod: { type: 'scheme', brand: card.number.startsWith('5') ? 'mc' : 'visa' } };
  };

  const pay = (body: Types.checkout.PaymentRequest): Answer => {
    const card = cardOf(body);
    if ('status' in card) return card;
    const holderName = card.holderName;
    const payment: HeldPayment = { pspReference: pspReference(), merchantReference: body.reference, value: body.amount.value, currency: body.amount.currency, holderName, authorised: false, capturedMinor: 0, refundedMinor: 0 };
    payments.set(payment.pspReference, payment);
    // A 3-D Secure card with its shopper there (not a stored card charged ContAuth): the shopper is
    // redirected to the issuer's challenge; its outcome comes by /payments/details and AUTHORISATION.
    if (adyenThreeDSecureCards.includes(card.number) && String(body.shopperInteraction ?? 'Ecommerce') === 'Ecommerce') {
      payment.challenged = { request: body, card, answer: null };
      const url = challenges.open(baseUrl, { pspReference: payment.pspReference, merchantReference: body.reference, value: payment.value, currency: payment.currency, returnUrl: body.returnUrl });
      // Without its pspReference, as Adyen documents it: the payment is named in the details answer and its AUTHORISATION.
      return { status: 200, body: { merchantReference: body.reference, amount: body.amount, resultCode: 'RedirectShopper', action: { type: 'redirect', method: 'GET', url, paymentMethodType: 'scheme' } } };
    }
    return authorise(body, payment, card, null);
  };

  /** The payment authorised or refused (after its challenge: `challenged`, the shopper's decision), with its AUTHORISATION. */
  const authorise = (body: Types.checkout.PaymentRequest, payment: HeldPayment, card: StoredCard, challenged: 'approve' | 'deny' | null): Answer => {
    made += 1;
    const { holderName } = payment;
    const common = { pspReference: payment.pspReference, merchantReference: body.reference, amount: body.amount };
    const refusal =
      challenged === 'deny'
        ? { code: '11', reason: '3D Not Authenticated' }
        : holderName === 'DECLINED'
          ? { code: '2', reason: 'Refused' }
          : holderName === 'NOT_ENOUGH_BALANCE'
            ? { code: '12', reason: 'Not enough balance' }
            : null;
    if (refusal) {
      notify('AUTHORISATION', payment, { pspReference: payment.pspReference, value: payment.value, success: false, reason: refusal.reason, original: false });
      return { status: 200, body: { ...common, resultCode: 'Refused', refusalReason: refusal.reason, refusalReasonCode: refusal.code } };
    }
    if (pending.hold(payment, holderName, body.additionalData?.manualCapture === 'true')) return { status: 200, body: { ...common, resultCode: 'Received' } };
    payment.authorised = true;
    if (body.additionalData?.manualCapture !== 'true') {
      payment.capturedMinor = payment.value;
      settle('Settled', payment, { pspReference: payment.pspReference, value: payment.value });
    }
    notify('AUTHORISATION', payment, { pspReference: payment.pspReference, value: payment.value, success: true, original: false });
    disputes.captured(payment);
    return { status: 200, body: { ...common, resultCode: 'Authorised', ...cardAnswer(body, card) } };
  };

  const challenges = new AdyenChallenges((challenge: ChallengeOf, result) => {
    const payment = payments.get(challenge.pspReference);
    if (!payment?.challenged) return;
    payment.challenged.answer = authorise(payment.challenged.request, payment, payment.challenged.card, result);
  });

  /** /payments/details: the outcome of the challenge that issued this redirectResult; one the double never issued is refused. */
  const completeDetails = (body: Types.checkout.PaymentDetailsRequest): Answer => {
    details += 1;
    const redirectResult = body.details.redirectResult;
    const challenge = redirectResult ? challenges.byRedirectResult(redirectResult) : undefined;
    const answer = challenge ? payments.get(challenge.pspReference)?.challenged?.answer : undefined;
    if (!answer) return error(422, '000', 'Invalid redirectResult: no payment waits for it');
    return answer;
  };

  /** A cancel's outcome, notified a while after it was received: a challenge still open is ended, so the shopper can no longer decide it. */
  const cancelLater = (payment: HeldPayment, reference: string, eventCode: 'CANCELLATION' | 'TECHNICAL_CANCEL') =>
    later(confirmAfterMs, () => {
      const cancels = challenges.expire(payment.pspReference) || cancelable(payment);
      if (cancels) payment.authorised = false;
      notify(eventCode, payment, { pspReference: reference, value: payment.value, success: cancels, ...(cancels ? {} : { reason: cancelRefusal(payment) }) });
    });

  /**
   * /cancels, a cancel by the payment's merchant reference (the latest payment under it): how a
   * payment is cancelled before Adyen named it to the merchant. Confirmed by TECHNICAL_CANCEL.
   */
  const cancelByReference = (body: Types.checkout.StandalonePaymentCancelRequest): Answer => {
    const payment = [...payments.values()].reverse().find((p) => p.merchantReference === body.paymentReference);
    if (!payment) return error(422, '167', 'Original pspReference required for this operation');
    const reference = pspReference();
    cancelLater(payment, reference, 'TECHNICAL_CANCEL');
    return { status: 201, body: { merchantAccount: options.merchantAccount, paymentReference: body.paymentReference, pspReference: reference, status: 'received', ...(body.reference ? { reference: body.reference } : {}) } };
  };

  const modify = (kind: 'captures' | 'cancels' | 'refunds', payment: HeldPayment, body: { amount?: { value: number; currency: string }; reference?: string }): Answer => {
    if (body.amount && body.amount.currency !== payment.currency) return error(422, '137', 'Invalid amount specified: currency does not match the payment');
    const reference = pspReference();
    const value = body.amount?.value ?? 0;
    const answer = { merchantAccount: options.merchantAccount, paymentPspReference: payment.pspReference, pspReference: reference, status: 'received', ...(body.reference ? { reference: body.reference } : {}) };
    if (kind === 'captures') {
      if (!payment.authorised || value > payment.value - payment.capturedMinor) return error(422, '167', 'Original pspReference required for this operation');
      later(confirmAfterMs, () => {
        const fails = payment.holderName === 'CAPTURE_FAILED';
        if (!fails) {
          payment.capturedMinor += value;
          settle('Settled', payment, { pspReference: reference, reference: body.reference, value });
        }
        notify(fails ? 'CAPTURE_FAILED' : 'CAPTURE', payment, { pspReference: reference, value, success: !fails, ...(fails ? { reason: 'Capture failed at the acquirer' } : {}) });
        disputes.captured(payment);
      });
      return { status: 201, body: { ...answer, amount: body.amount } };
    }
    if (kind === 'cancels') {
      cancelLater(payment, reference, 'CANCELLATION');
      return { status: 201, body: answer };
    }
    later(confirmAfterMs, () => {
      // A card whose holder name is REFUND_FAILED has its refunds refused after they were received.
      if (payment.holderName === 'REFUND_FAILED') return notify('REFUND_FAILED', payment, { pspReference: reference, value, success: false, reason: 'Refund refused by the acquirer' });
      const refunds = value <= payment.capturedMinor - payment.refundedMinor;
      if (refunds) {
        payment.refundedMinor += value;
        settle('Refunded', payment, { pspReference: reference, reference: body.reference, value });
      }
      notify('REFUND', payment, { pspReference: reference, value, success: refunds });
    });
    return { status: 201, body: { ...answer, amount: body.amount } };
  };

  const handle = (method: string, path: string, headers: IncomingMessage['headers'], raw: string): Answer => {
    if (headers['x-api-key'] !== options.apiKey) return error(401, '000', 'HTTP Status Response - Unauthorized', 'security');
    if (method !== 'POST') return error(405, '905', `Method ${method} not allowed`);
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      return error(400, '702', 'Unable to parse the JSON request');
    }
    if (disputes.serves(path)) return disputes.handle(path, body);
    const route = path.replace(API_VERSION, '');
    if (route === '/payments/details') {
      const refused = refusalOf(body, 'PaymentDetailsRequest');
      if (refused) return error(refused.errorCode === '702' ? 400 : 422, refused.errorCode, refused.message);
      return completeDetails(body as Types.checkout.PaymentDetailsRequest);
    }
    const modification = /^\/payments\/([^/]+)\/(captures|cancels|refunds)$/.exec(route);
    const model = route === '/payments' ? 'PaymentRequest' : route === '/cancels' ? 'StandalonePaymentCancelRequest' : modification ? { captures: 'PaymentCaptureRequest', cancels: 'PaymentCancelRequest', refunds: 'PaymentRefundRequest' }[modification[2]!]! : null;
    if (!model) return error(404, '000', `No such endpoint ${path}`);
    const refusal = refusalOf(body, model);
    if (refusal) return error(refusal.errorCode === '702' ? 400 : 422, refusal.errorCode, refusal.message);
    if ((body as { merchantAccount: string }).merchantAccount !== options.merchantAccount) return error(403, '901', 'Invalid Merchant Account', 'security');
    if (route === '/cancels') return cancelByReference(body as Types.checkout.StandalonePaymentCancelRequest);
    if (!modification) return pay(body as Types.checkout.PaymentRequest);
    const payment = payments.get(modification[1]!);
    if (!payment) return error(422, '167', 'Original pspReference required for this operation');
    return modify(modification[2] as 'captures' | 'cancels' | 'refunds', payment, body as { amount?: { value: number; currency: string } });
  };

  /** The sandbox's control calls, in the same shapes: webhook faults, a payment's notifications, their redelivery. */
  const control = (method: string, path: string, query: URLSearchParams, raw: string): Answer => {
    const read = census.control(method, path, query);
    if (read) return read;
    if (path === '/_sandbox/webhook_faults' && method === 'GET') return { status: 200, body: faultsJson(outbox.faults) };
    if (path === '/_sandbox/webhook_faults' && method === 'POST') {
      let parsed;
      try {
        parsed = webhookFaultsBody.safeParse(JSON.parse(raw || '{}'));
      } catch {
        return error(400, '702', 'Unable to parse the JSON request');
      }
      if (!parsed.success) return error(400, '702', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
      outbox.faults = webhookFaultsOf(parsed.data);
      return { status: 200, body: faultsJson(outbox.faults) };
    }
    if (path === '/_sandbox/events' && method === 'GET') {
      const charge = query.get('charge');
      if (!charge) return error(400, '702', 'charge is required');
      const data = outbox.kept
        .filter((k) => paymentOf(k.item) === charge)
        .map((k) => ({ id: eventFromNotification(k.item).id, type: String(k.item.eventCode), state: k.state, attempts: k.attempts, object: k.item }));
      return { status: 200, body: { object: 'list', data } };
    }
    const settled = settlement.control(method, path, raw);
    if (settled) return settled.status < 300 ? settled : error(settled.status, '702', (settled.body as { message: string }).message);
    const authorise = authoriseControl(method, path);
    if (authorise !== null) {
      const payment = pending.authorise(authorise);
      if (!payment) return error(404, '000', `No payment ${authorise} waits for its authorisation`);
      notify('AUTHORISATION', payment, { pspReference: payment.pspReference, value: payment.value, success: true, original: false });
      return { status: 200, body: { pspReference: payment.pspReference, authorised: true } };
    }
    const redeliver = /^\/_sandbox\/events\/([^/]+)\/redeliver$/.exec(path);
    if (redeliver && method === 'POST') {
      const id = decodeURIComponent(redeliver[1]!).split(':')[0]!;
      if (!outbox.webhookUrl) return error(400, '702', 'no webhook URL is configured: nothing can be delivered');
      const sent = outbox.redeliver(id);
      return sent === 0 ? error(404, '000', `No notification ${id}`) : { status: 200, body: { id, redelivered: sent } };
    }
    return error(404, '000', `No such control ${method} ${path}`);
  };

  const reply = (res: ServerResponse, answer: Answer) => {
    res.writeHead(answer.status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(answer.body));
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const path = new URL(req.url ?? '/', 'http://double').pathname;
      if (path === '/_sandbox/outage' && req.method === 'POST') {
        let parsed;
        try {
          parsed = outageBody.safeParse(JSON.parse(raw || '{}'));
        } catch {
          return reply(res, error(400, '702', 'Unable to parse the JSON request'));
        }
        if (!parsed.success) return reply(res, error(400, '702', parsed.error.issues.map((i) => i.message).join('; ')));
        const { mode, for_ms: forMs } = parsed.data;
        // Down once the answer is out: the connection it went over closes with the rest.
        if (mode === 'down') res.once('finish', () => listening.goDown(forMs));
        outage = mode === 'down' ? 'none' : mode;
        return reply(res, { status: 200, body: { mode, ...(forMs === undefined ? {} : { for_ms: forMs }) } });
      }
      // The issuer's challenge page (the shopper's browser), apart from the API's outages.
      const page = challenges.handle(req.method ?? 'GET', path, req.headers['content-type'], raw);
      if (page) {
        res.writeHead(page.status, page.headers);
        return void res.end(page.body);
      }
      if (path.startsWith('/_sandbox/')) return reply(res, control(req.method ?? 'GET', path, new URL(req.url ?? '/', 'http://double').searchParams, raw));
      if (path === '/healthz') return reply(res, { status: 200, body: { ok: true } });
      if (outage === 'unavailable') return reply(res, error(503, '000', 'Service unavailable (double outage)', 'internal'));
      // The report host's downloads (Adyen's is another host; here, the double's own URL).
      if (settlement.serve(req, res, path)) return;
      // The same Idempotency-Key answers the first answer again and does nothing (Adyen's replay).
      const key = req.headers['idempotency-key'];
      const replayed = typeof key === 'string' ? answered.get(key) : undefined;
      const answer = replayed ?? handle(req.method ?? 'GET', path, req.headers, raw);
      if (typeof key === 'string' && !replayed && answer.status < 500) answered.set(key, answer);
      if (!replayed) census.note(path.replace(API_VERSION, ''), typeof key === 'string' ? key : null, answer);
      if (outage === 'lose-answers') return void req.socket.destroy();
      reply(res, answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const listening = new Listening(server, port);
  baseUrl = `http://127.0.0.1:${port}`;
  return {
    url: `http://127.0.0.1:${port}`,
    get notifications() {
      return outbox.kept.map((k) => k.item);
    },
    setWebhookUrl: (url) => {
      outbox.webhookUrl = url;
    },
    paymentsMade: () => made,
    disputesUrl: `http://127.0.0.1:${port}${DISPUTES_PATH}`,
    disputeMovements: () => disputes.movements,
    async setOutage(mode) {
      outage = mode === 'down' ? 'none' : mode;
      if (mode === 'down') return listening.goDown();
      await listening.up();
    },
    paymentsFor: (merchantReference) => [...payments.values()].filter((p) => p.merchantReference === merchantReference).map((p) => ({ ...p })),
    detailsCalls: () => details,
    settlement,
    async close() {
      listening.clearTimer();
      outbox.close();
      disputes.close();
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

