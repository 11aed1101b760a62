import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdyenDouble, type AdyenDouble } from '../../doubles/adyen/server';
import { AdyenProvider } from '../../provider/adyen/client';
import { verifyAdyenNotifications } from '../../provider/adyen/webhook';
import { DEFAULT_NETWORK_KEY, networkCardOf } from '../../sandbox/network';
import { ProviderRejectedError, ProviderUnavailableError, ProviderWebhookError, type ProviderWebhookEvent } from '../../provider/types';
import { eventually } from '../helpers/eventually';

/**
 * The adyen kind's client (through the official library) against the Adyen double, both on
 * loopback, with a webhook endpoint that validates each notification batch by the library's
 * HMAC and answers `[accepted]`: what the kind's capabilities say (replay, notified
 * modifications, batches) is what the PSP does.
 */
const hmacKey = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const merchantAccount = 'OrchestratorTest';
const apiKey = 'test_api_key';
let double: AdyenDouble;
let provider: AdyenProvider;
const received: ProviderWebhookEvent[] = [];
const refused: string[] = [];
let close: () => Promise<void>;

beforeAll(async () => {
  const endpoint = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        received.push(...verifyAdyenNotifications(Buffer.concat(chunks).toString('utf8'), { hmacKey }));
        res.writeHead(200, { 'Content-Type': 'text/plain' }).end('[accepted]');
      } catch (error) {
        refused.push((error as Error).message);
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  const webhookUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/provider_webhooks/adyen-test`;
  double = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl });
  provider = new AdyenProvider({ baseUrl: double.url, apiKey, merchantAccount, hmacKey, timeoutMs: 2000 });
  close = async () => {
    await double.close();
    endpoint.closeAllConnections();
    await new Promise((resolve) => endpoint.close(resolve));
  };
});
afterAll(() => close());

let n = 0;
const charge = (paymentMethod: string, capture = true) => {
  n += 1;
  return provider.createCharge({ idempotencyKey: `pay_${n}:charge`, amountMinor: 1250, currency: 'eur', paymentMethod, capture, reference: `pay_${n}` });
};
/** Until a new connection to the double is refused (a pooled one it closed is seen closed first). */
const refusing = () => eventually(() => fetch(`${double.url}/healthz`).then(() => false, (e: { cause?: { code?: string } }) => e.cause?.code === 'ECONNREFUSED'), 5_000, 20, 'the double refusing connections');
const eventOf = (type: string, chargeId: string) => eventually(() => received.find((e) => e.type === type && (e.charge?.id ?? e.refund?.chargeId) === chargeId), 10_000, 50, `${type} of ${chargeId}`);

describe('the adyen kind against its double', () => {
  it('a card payment captured at once succeeds; its AUTHORISATION arrives signed, in a batch answered [accepted]', async () => {
    const paid = await charge('pm_card_visa');
    expect(paid).toMatchObject({ status: 'succeeded', amountMinor: 1250, amountCapturedMinor: 1250, currency: 'EUR' });
    const event = await eventOf('charge.requires_capture', paid.id);
    expect(event.charge).toMatchObject({ id: paid.id, reference: paid.reference });
  });

  it('a refusal is a decline with its reason as our code', async () => {
    expect(await charge('pm_card_declined')).toMatchObject({ status: 'declined', declineCode: 'card_declined' });
    expect(await charge('pm_card_chargeDeclinedInsufficientFunds')).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds' });
  });

  it('a manual capture is answered received (still requires_capture, never succeeded) and confirmed by its CAPTURE notification', async () => {
    const authorized = await charge('pm_card_visa', false);
    expect(authorized.status).toBe('requires_capture');
    const answer = await provider.captureCharge({ idempotencyKey: `${authorized.reference}:capture`, chargeId: authorized.id, amountMinor: 1250, currency: 'EUR' });
    expect(answer).toMatchObject({ id: authorized.id, status: 'requires_capture', amountCapturedMinor: 0 });
    const confirmed = await eventOf('charge.succeeded', authorized.id);
    expect(confirmed.charge).toMatchObject({ status: 'succeeded', amountCapturedMinor: 1250 });
  });

  it('a capture the acquirer refuses comes as CAPTURE_FAILED: the charge is still only authorized', async () => {
    const authorized = await charge('pm_card_captureFailed', false);
    await provider.captureCharge({ idempotencyKey: `${authorized.reference}:capture`, chargeId: authorized.id, amountMinor: 1250, currency: 'EUR' });
    const failed = await eventOf('charge.capture_failed', authorized.id);
    expect(failed.charge).toMatchObject({ status: 'requires_capture', amountCapturedMinor: 0 });
    expect(received.some((e) => e.type === 'charge.succeeded' && e.charge?.id === authorized.id)).toBe(false);
  });

  it('a cancel and a refund are confirmed by CANCELLATION and REFUND', async () => {
    const authorized = await charge('pm_card_visa', false);
    await provider.voidCharge({ idempotencyKey: `${authorized.reference}:void`, chargeId: authorized.id });
    expect((await eventOf('charge.canceled', authorized.id)).charge?.status).toBe('canceled');
    const paid = await charge('pm_card_visa');
    const refund = await provider.createRefund({ idempotencyKey: `${paid.reference}:refund:1`, chargeId: paid.id, amountMinor: 500, currency: 'EUR', reference: 'ref_1' });
    // Received, not yet refunded: only the REFUND notification settles it.
    expect(refund).toMatchObject({ status: 'pending', amountMinor: 500, reference: 'ref_1' });
    const confirmed = await eventOf('refund.succeeded', paid.id);
    expect(confirmed.refund).toMatchObject({ id: refund.id, amountMinor: 500, status: 'succeeded' });
  });

  it('a 3-D Secure redirect is answered without its pspReference (a charge not named yet), and cancelled by our reference: TECHNICAL_CANCEL, read as a cancel', async () => {
    n += 1;
    const waiting = await provider.createCharge({ idempotencyKey: `pay_${n}:charge`, amountMinor: 1250, currency: 'EUR', paymentMethod: 'pm_card_threeDSecureRequired', capture: true, reference: `pay_${n}`, returnUrl: 'http://127.0.0.1:1/return' });
    expect(waiting).toMatchObject({ id: '', status: 'requires_action', reference: `pay_${n}`, nextAction: { type: 'redirect_to_url' } });
    // Without the reference a charge not named yet cannot be cancelled: refused, nothing sent.
    expect(await provider.voidCharge({ idempotencyKey: `pay_${n}:void`, chargeId: '' }).catch((e: unknown) => e)).toBeInstanceOf(ProviderRejectedError);
    expect(await provider.voidCharge({ idempotencyKey: `pay_${n}:void`, chargeId: '', reference: `pay_${n}` })).toMatchObject({ id: '', received: true });
    const canceled = await eventually(() => received.find((e) => e.type === 'charge.canceled' && e.charge?.reference === `pay_${n}`), 10_000, 50, 'the TECHNICAL_CANCEL');
    expect(canceled.id).toMatch(/:TECHNICAL_CANCEL:true$/);
    // It names the payment: its pspReference is the charge's id from now on.
    expect(canceled.charge!.id).toMatch(/^[0-9A-F]{16}$/);
  });

  it('a lost answer is resolved by the same request under its Idempotency-Key: the first answer again, one payment only', async () => {
    const before = double.paymentsMade();
    await fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode: 'lose-answers' }) });
    const request = { idempotencyKey: 'pay_lost:charge', amountMinor: 990, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: 'pay_lost' };
    expect(await provider.createCharge(request).catch((e: unknown) => e)).toBeInstanceOf(ProviderUnavailableError);
    await fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body: JSON.stringify({ mode: 'none' }) });
    const replayed = await provider.createCharge(request);
    expect(await provider.createCharge(request)).toEqual(replayed);
    expect(replayed.status).toBe('succeeded');
    expect(double.paymentsMade()).toBe(before + 1);
  });

  it('down: connections are refused (nothing sent, the client knows it), until for_ms has passed or the handle ends it; a bad outage body is 400', async () => {
    const control = (body: string) => fetch(`${double.url}/_sandbox/outage`, { method: 'POST', body }).then(async (r) => ({ status: r.status, body: (await r.json()) as { errorCode?: string; message?: string } }));
    expect(await control('{')).toMatchObject({ status: 400, body: { errorCode: '702' } });
    expect(await control(JSON.stringify({ mode: 'sideways' }))).toMatchObject({ status: 400, body: { message: expect.stringContaining('mode must be') } });
    expect(await control(JSON.stringify({ mode: 'none', for_ms: 10 }))).toMatchObject({ status: 400, body: { message: 'for_ms is for mode down only' } });
    const before = double.paymentsMade();
    const request = (key: string) => ({ idempotencyKey: key, amountMinor: 990, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: key });
    expect((await control(JSON.stringify({ mode: 'down', for_ms: 1500 }))).status).toBe(200);
    await refusing();
    const refusedCall = await provider.createCharge(request('pay_down_1:charge')).catch((e: unknown) => e);
    expect(refusedCall).toBeInstanceOf(ProviderUnavailableError);
    expect(refusedCall).toMatchObject({ notSent: true });
    expect(double.paymentsMade()).toBe(before);
    // Listening again once for_ms has passed.
    const paid = await eventually(() => provider.createCharge(request('pay_down_2:charge')).catch(() => null), 10_000, 200, 'the double listening again');
    expect(paid.status).toBe('succeeded');
    await double.setOutage('down');
    await refusing();
    expect(await provider.createCharge(request('pay_down_3:charge')).catch((e: unknown) => e)).toMatchObject({ notSent: true });
    await double.setOutage('none');
    expect((await provider.createCharge(request('pay_down_3:charge'))).status).toBe('succeeded');
    expect(double.paymentsMade()).toBe(before + 2);
  });

  it("refuses in Adyen's error shape what the library's models would not carry", async () => {
    const post = (body: unknown) =>
      fetch(`${double.url}/v72/payments`, { method: 'POST', headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const valid = { merchantAccount, amount: { value: 100, currency: 'EUR' }, reference: 'pay_x', returnUrl: '', paymentMethod: { type: 'scheme', encryptedCardNumber: 'test_4111111111111111' } };
    expect(await post({ ...valid, offSession: true, customerId: 'cus_1' })).toEqual({ status: 400, body: expect.objectContaining({ status: 400, errorCode: '702', errorType: 'validation', message: expect.stringContaining('customerId') }) });
    expect(await post({ ...valid, paymentMethod: { ...valid.paymentMethod, cardToken: 'x' } })).toMatchObject({ status: 400, body: { message: expect.stringContaining('paymentMethod.cardToken') } });
    const { reference: _, ...noReference } = valid;
    expect(await post(noReference)).toMatchObject({ status: 422, body: { errorCode: '100', message: "Required field 'reference' is not provided." } });
    expect(await provider.createCharge({ idempotencyKey: 'k', amountMinor: 1, currency: 'EUR', paymentMethod: 'pm_unknown', capture: true, reference: 'p' }).catch((e: unknown) => e)).toBeInstanceOf(ProviderRejectedError);
  });

  it('a notification whose HMAC does not match is refused, and none of its batch is read', () => {
    const item = double.notifications[0]!;
    const forged = { ...item, amount: { ...item.amount, value: (item.amount.value ?? 0) + 1 } };
    const batch = (items: unknown[]) => JSON.stringify({ live: 'false', notificationItems: items.map((NotificationRequestItem) => ({ NotificationRequestItem })) });
    expect(verifyAdyenNotifications(batch([item]), { hmacKey })).toHaveLength(1);
    expect(() => verifyAdyenNotifications(batch([item, forged]), { hmacKey })).toThrow(ProviderWebhookError);
    expect(() => verifyAdyenNotifications(batch([item]), { hmacKey: null })).toThrow(ProviderWebhookError);
    expect(refused).toEqual([]);
  });
});

describe('saved cards at the adyen kind (storePaymentMethod, then ContAuth by the stored id)', () => {
  const saveCard = (paymentMethod: string) => {
    n += 1;
    return provider.createCharge({ idempotencyKey: `pay_${n}:charge`, amountMinor: 900, currency: 'EUR', paymentMethod, capture: true, reference: `pay_${n}`, setupFutureUsage: 'off_session' });
  };
  const chargeSaved = (savedMethod: { token: string | null; networkTransactionId: string; card: { brand: string; last4: string; expMonth: number; expYear: number } }) => {
    n += 1;
    return provider.createCharge({ idempotencyKey: `pay_${n}:charge`, amountMinor: 700, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: `pay_${n}`, offSession: true, savedMethod });
  };

  it('a payment that stores the card answers our token (its shopper and stored id), the network transaction id and the card; the stored card is charged by that token, merchant-initiated', async () => {
    const first = await saveCard('pm_card_mastercard');
    expect(first.status).toBe('succeeded');
    expect(first.savedCard).toMatchObject({ token: `${first.reference}/${first.savedCard!.token!.split('/')[1]}`, card: { brand: 'mc', last4: '1115', expMonth: 3, expYear: 2030 } });
    // The card network's id (the sandboxes' network, its development key): the test card charged and Adyen's number's last4.
    expect(networkCardOf(DEFAULT_NETWORK_KEY, first.savedCard!.networkTransactionId)).toMatchObject({ card: 'pm_card_mastercard', last4: '1115' });
    const again = await chargeSaved(first.savedCard!);
    expect(again).toMatchObject({ status: 'succeeded', amountMinor: 700, amountCapturedMinor: 700 });
    expect(again.id).not.toBe(first.id);
    // The stored card's charge names the id of the payment that stored it: one card account at the network.
    expect(again.savedCard?.networkTransactionId).toBe(first.savedCard!.networkTransactionId);
    // A payment that does not store the card still reports a network transaction id of its own, with no token.
    const plain = await charge('pm_card_visa');
    expect(plain.savedCard).toMatchObject({ token: null, card: { brand: 'visa', last4: '1111' } });
    expect(networkCardOf(DEFAULT_NETWORK_KEY, plain.savedCard!.networkTransactionId)).toMatchObject({ card: 'pm_card_visa', last4: '1111' });
    expect(networkCardOf(DEFAULT_NETWORK_KEY, plain.savedCard!.networkTransactionId)!.account).not.toBe(networkCardOf(DEFAULT_NETWORK_KEY, first.savedCard!.networkTransactionId)!.account);
    // Under another key the double's ids are that network's: the development network does not know them.
    const stranger = await startAdyenDouble({ apiKey, merchantAccount, hmacKey, webhookUrl: null, networkKey: 'another-card-network-key-0123' });
    try {
      const elsewhere = await new AdyenProvider({ baseUrl: stranger.url, apiKey, merchantAccount, hmacKey, timeoutMs: 2000 }).createCharge({ idempotencyKey: 'k_stranger', amountMinor: 100, currency: 'EUR', paymentMethod: 'pm_card_visa', capture: true, reference: 'p_stranger' });
      expect(networkCardOf(DEFAULT_NETWORK_KEY, elsewhere.savedCard!.networkTransactionId)).toBeNull();
      expect(networkCardOf('another-card-network-key-0123', elsewhere.savedCard!.networkTransactionId)).toMatchObject({ card: 'pm_card_visa' });
    } finally {
      await stranger.close();
    }
  });

  it('refused, nothing charged: another processor\'s network transaction id (no token), a token not of Adyen\'s shape, a stored id of another shopper', async () => {
    const first = await saveCard('pm_card_visa');
    const made = double.paymentsMade();
    const card = first.savedCard!;
    await expect(chargeSaved({ ...card, token: null })).rejects.toMatchObject({ code: 'network_transaction_id_unsupported' });
    await expect(chargeSaved({ ...card, token: 'cus_1' })).rejects.toMatchObject({ code: 'invalid_saved_card_token' });
    const [, storedId] = card.token!.split('/');
    await expect(chargeSaved({ ...card, token: `someone_else/${storedId}` })).rejects.toBeInstanceOf(ProviderRejectedError);
    expect(double.paymentsMade()).toBe(made);
  });

  it('the double refuses what the library\'s PaymentRequest does not carry, and a store or stored charge without its shopper', async () => {
    const post = (body: Record<string, unknown>) =>
      fetch(`${double.url}/v72/payments`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey }, body: JSON.stringify({ merchantAccount, amount: { value: 100, currency: 'EUR' }, reference: 'raw', returnUrl: '', ...body }) }).then(async (r) => ({ status: r.status, body: (await r.json()) as { errorCode?: string; resultCode?: string } }));
    const card = { type: 'scheme', encryptedCardNumber: 'test_4111111111111111', holderName: 'Test Shopper' };
    expect(await post({ paymentMethod: card, storePaymentMethod: true, shopperReference: 'shopper_1', recurringProcessingModel: 'UnscheduledCardOnFile', shopperInteraction: 'Ecommerce' })).toMatchObject({ status: 200, body: { resultCode: 'Authorised' } });
    // Not fields of PaymentRequest: Stripe's names are refused by Adyen's parser.
    expect(await post({ paymentMethod: card, setup_future_usage: 'off_session' })).toMatchObject({ status: 400, body: { errorCode: '702' } });
    expect(await post({ paymentMethod: { ...card, network_transaction_id: '123' } })).toMatchObject({ status: 400, body: { errorCode: '702' } });
    expect(await post({ paymentMethod: card, storePaymentMethod: true })).toMatchObject({ status: 422 });
    expect(await post({ paymentMethod: { type: 'scheme', storedPaymentMethodId: 'X' }, shopperInteraction: 'ContAuth', recurringProcessingModel: 'UnscheduledCardOnFile' })).toMatchObject({ status: 422 });
  });
});
