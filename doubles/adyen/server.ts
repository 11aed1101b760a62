import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Types } from '@adyen/api-library';
import { adyen } from '../../provider/adyen/library';
import { eventFromNotification } from '../../provider/adyen/wire';
import { faultsJson, webhookFaultsBody, webhookFaultsOf } from '../../sandbox/webhooks';
import { refusalOf } from './models';
import { NotificationOutbox, paymentOf } from './notifications';

type NotificationRequestItem = Types.notification.NotificationRequestItem;
const { NotificationRequestItem } = adyen.Types.notification;

/**
 * What the double does to its answers (the sandbox's outage control, `POST /_sandbox/outage`):
 * `unavailable` answers 503 and does nothing; `down` drops the connection and does nothing;
 * `lose-answers` does what was asked, then drops the connection before answering (a lost answer).
 */
export type AdyenDoubleOutage = 'none' | 'unavailable' | 'down' | 'lose-answers';

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
}

interface HeldPayment {
  pspReference: string;
  merchantReference: string;
  value: number;
  currency: string;
  holderName: string;
  authorised: boolean;
  capturedMinor: number;
  refundedMinor: number;
}

interface StoredCard {
  number: string;
  holderName: string;
}

export interface AdyenDouble {
  url: string;
  /** Every notification item made (sent, lost to a fault, or kept without a webhook URL), in order. */
  readonly notifications: readonly NotificationRequestItem[];
  /** Sends the notifications to this URL from now on (loopback only; e.g. an API started after the double). */
  setWebhookUrl(url: string | null): void;
  /** How many payments the double authorised or refused: a replay makes none. */
  paymentsMade(): number;
  close(): Promise<void>;
}

const API_VERSION = /^\/v\d+/;

/**
 * A faithful double of Adyen's Checkout API for tests and `npm start` (as stripe-mock is for
 * Stripe): /payments, and a payment's /captures, /cancels and /refunds, each body checked
 * against the official library's model of it (a field it does not carry, or a required one
 * missing, is refused in Adyen's error shape), answered in Adyen's shapes, replayed by
 * Idempotency-Key (the same key answers the first answer, and does nothing again). A capture,
 * cancel or refund is answered `received`; its outcome comes later as a signed (HMAC) batch of
 * notifications (CAPTURE, or CAPTURE_FAILED for the card held by `CAPTURE_FAILED`;
 * CANCELLATION; REFUND), sent to the webhook URL until answered `[accepted]`, with the sandbox's
 * webhook faults and control calls (./notifications.ts; `/_sandbox/webhook_faults`,
 * `/_sandbox/events?charge=`, `/_sandbox/events/{id}/redeliver`, `/_sandbox/outage`). Test cards: Adyen's, with the
 * refusal asked for by the holder name (`DECLINED`, `NOT_ENOUGH_BALANCE`). An authorised card
 * answers a network transaction id of the double's own (it shares no card network with the
 * sandbox); a payment with `storePaymentMethod` (and its shopperReference and
 * recurringProcessingModel) stores the card for that shopper and answers its stored id; a
 * payment by `storedPaymentMethodId` charges the shopper's stored card, merchant-initiated only
 * (`ContAuth`).
 */
export async function startAdyenDouble(options: AdyenDoubleOptions): Promise<AdyenDouble> {
  const payments = new Map<string, HeldPayment>();
  /** The cards stored per shopperReference, by their stored payment method id. */
  const stored = new Map<string, Map<string, StoredCard>>();
  const networkTxReference = () => String(100_000_000_000_000 + (randomBytes(6).readUIntBE(0, 6) % 900_000_000_000_000));
  const answered = new Map<string, { status: number; body: unknown }>();
  const outbox = new NotificationOutbox({ hmacKey: options.hmacKey, webhookUrl: options.webhookUrl });
  const timers = new Set<NodeJS.Timeout>();
  let outage: AdyenDoubleOutage = 'none';
  let made = 0;
  const confirmAfterMs = options.confirmAfterMs ?? 50;

  const pspReference = () => randomBytes(8).toString('hex').toUpperCase();
  const later = (ms: number, run: () => void) => {
    const timer = setTimeout(() => (timers.delete(timer), run()), ms);
    timers.add(timer);
  };

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

  type Answer = { status: number; body: unknown };
  const error = (status: number, errorCode: string, message: string, errorType = 'validation'): Answer => ({ status, body: { status, errorCode, message, errorType } });

  /** The card a payment names: a stored one by its id (charged without the shopper: ContAuth), or the card itself. */
  const cardOf = (body: Types.checkout.PaymentRequest): { number: string; holderName: string } | Answer => {
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
   * transaction id, the card's summary and expiry, and, when asked to store it, the shopper and
   * the stored payment method id.
   */
  const cardAnswer = (body: Types.checkout.PaymentRequest, card: StoredCard) => {
    const additionalData: Record<string, string> = { networkTxReference: networkTxReference(), cardSummary: card.number.slice(-4), expiryDate: '3/2030' };
    if (body.storePaymentMethod && body.shopperReference) {
      const cards = stored.get(body.shopperReference) ?? new Map<string, StoredCard>();
      const id = [...cards].find(([, kept]) => kept.number === card.number && kept.holderName === card.holderName)?.[0] ?? pspReference();
      cards.set(id, card);
      stored.set(body.shopperReference, cards);
      Object.assign(additionalData, { 'tokenization.shopperReference': body.shopperReference, 'tokenization.storedPaymentMethodId': id, 'tokenization.store.operationType': 'created' });
    }
    return { additionalData, paymentMethod: { type: 'scheme', brand: card.number.startsWith('5') ? 'mc' : 'visa' } };
  };

  const pay = (body: Types.checkout.PaymentRequest): Answer => {
    const card = cardOf(body);
    if ('status' in card) return card;
    made += 1;
    const holderName = card.holderName;
    const payment: HeldPayment = { pspReference: pspReference(), merchantReference: body.reference, value: body.amount.value, currency: body.amount.currency, holderName, authorised: false, capturedMinor: 0, refundedMinor: 0 };
    payments.set(payment.pspReference, payment);
    const common = { pspReference: payment.pspReference, merchantReference: body.reference, amount: body.amount };
    const refusal = holderName === 'DECLINED' ? { code: '2', reason: 'Refused' } : holderName === 'NOT_ENOUGH_BALANCE' ? { code: '12', reason: 'Not enough balance' } : null;
    if (refusal) {
      notify('AUTHORISATION', payment, { pspReference: payment.pspReference, value: payment.value, success: false, reason: refusal.reason, original: false });
      return { status: 200, body: { ...common, resultCode: 'Refused', refusalReason: refusal.reason, refusalReasonCode: refusal.code } };
    }
    payment.authorised = true;
    if (body.additionalData?.manualCapture !== 'true') payment.capturedMinor = payment.value;
    notify('AUTHORISATION', payment, { pspReference: payment.pspReference, value: payment.value, success: true, original: false });
    return { status: 200, body: { ...common, resultCode: 'Authorised', ...cardAnswer(body, card) } };
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
        if (!fails) payment.capturedMinor += value;
        notify(fails ? 'CAPTURE_FAILED' : 'CAPTURE', payment, { pspReference: reference, value, success: !fails, ...(fails ? { reason: 'Capture failed at the acquirer' } : {}) });
      });
      return { status: 201, body: { ...answer, amount: body.amount } };
    }
    if (kind === 'cancels') {
      later(confirmAfterMs, () => {
        const cancels = payment.authorised && payment.capturedMinor === 0;
        if (cancels) payment.authorised = false;
        notify('CANCELLATION', payment, { pspReference: reference, value: payment.value, success: cancels });
      });
      return { status: 201, body: answer };
    }
    later(confirmAfterMs, () => {
      // A card whose holder name is REFUND_FAILED has its refunds refused after they were received.
      if (payment.holderName === 'REFUND_FAILED') return notify('REFUND_FAILED', payment, { pspReference: reference, value, success: false, reason: 'Refund refused by the acquirer' });
      const refunds = value <= payment.capturedMinor - payment.refundedMinor;
      if (refunds) payment.refundedMinor += value;
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
    const route = path.replace(API_VERSION, '');
    const modification = /^\/payments\/([^/]+)\/(captures|cancels|refunds)$/.exec(route);
    const model = route === '/payments' ? 'PaymentRequest' : modification ? { captures: 'PaymentCaptureRequest', cancels: 'PaymentCancelRequest', refunds: 'PaymentRefundRequest' }[modification[2]!]! : null;
    if (!model) return error(404, '000', `No such endpoint ${path}`);
    const refusal = refusalOf(body, model);
    if (refusal) return error(refusal.errorCode === '702' ? 400 : 422, refusal.errorCode, refusal.message);
    if ((body as { merchantAccount: string }).merchantAccount !== options.merchantAccount) return error(403, '901', 'Invalid Merchant Account', 'security');
    if (!modification) return pay(body as Types.checkout.PaymentRequest);
    const payment = payments.get(modification[1]!);
    if (!payment) return error(422, '167', 'Original pspReference required for this operation');
    return modify(modification[2] as 'captures' | 'cancels' | 'refunds', payment, body as { amount?: { value: number; currency: string } });
  };

  /** The sandbox's control calls, in the same shapes: webhook faults, a payment's notifications, their redelivery. */
  const control = (method: string, path: string, query: URLSearchParams, raw: string): Answer => {
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
        const mode = (JSON.parse(raw || '{}') as { mode?: AdyenDoubleOutage }).mode;
        if (!mode || !['none', 'unavailable', 'down', 'lose-answers'].includes(mode)) return reply(res, error(400, '702', 'mode must be none, unavailable, down or lose-answers'));
        outage = mode;
        return reply(res, { status: 200, body: { mode } });
      }
      if (path.startsWith('/_sandbox/')) return reply(res, control(req.method ?? 'GET', path, new URL(req.url ?? '/', 'http://double').searchParams, raw));
      if (path === '/healthz') return reply(res, { status: 200, body: { ok: true } });
      if (outage === 'unavailable') return reply(res, error(503, '000', 'Service unavailable (double outage)', 'internal'));
      if (outage === 'down') return void req.socket.destroy();
      // The same Idempotency-Key answers the first answer again and does nothing (Adyen's replay).
      const key = req.headers['idempotency-key'];
      const replayed = typeof key === 'string' ? answered.get(key) : undefined;
      const answer = replayed ?? handle(req.method ?? 'GET', path, req.headers, raw);
      if (typeof key === 'string' && !replayed && answer.status < 500) answered.set(key, answer);
      if (outage === 'lose-answers') return void req.socket.destroy();
      reply(res, answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get notifications() {
      return outbox.kept.map((k) => k.item);
    },
    setWebhookUrl: (url) => {
      outbox.webhookUrl = url;
    },
    paymentsMade: () => made,
    async close() {
      outbox.close();
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

