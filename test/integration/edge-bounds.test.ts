import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adyen } from '../../provider/adyen/library';
import { StripeProvider } from '../../provider/stripe/client';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { adyenPspReference, adyenTestSettings, startTestAdyenDouble, testAdyenClient } from '../helpers/adyen';
import { startStripeFake, type StripeFake } from '../helpers/stripe-fake';
import type { AdyenDouble } from '../../doubles/adyen/server';
import { ADMIN_TOKEN, apiClient, decidedPayment, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * The edge's bounds, each reproduced through the running API: every identifier a PSP sends is
 * bounded at the schema, for every kind (a signed item with a 3 000-character pspReference, or
 * charge or event id, is 400 `invalid_request` with its path and stores nothing, never a 5xx);
 * the PSP webhook route takes JSON only (415 before the signature is checked, a charset passes);
 * a tenant's recovery limit above the networks' names its field in `issues`; and the customer's
 * return route, which has no API key, tells nothing of a payment but the merchant's return_url.
 */

const STRIPE_WEBHOOK_SECRET = 'whsec_edge_bounds_0123456789';
let stack: TestStack;
let double: AdyenDouble;
let stripeFake: StripeFake;
let tenant: Tenant;

beforeAll(async () => {
  double = await startTestAdyenDouble();
  stripeFake = await startStripeFake({ webhookSecret: STRIPE_WEBHOOK_SECRET });
  const stripe = new StripeProvider({ apiKey: 'sk_test_bounds', host: stripeFake.host, port: stripeFake.port, protocol: 'http', timeoutMs: 1_500, webhookSecret: STRIPE_WEBHOOK_SECRET });
  stack = await startStack({ extraProviders: { 'adyen-test': testAdyenClient(double.url), 'stripe-test': stripe } });
  tenant = await stack.createTenant('edge-bounds');
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  await double?.close();
  await stripeFake?.close();
});

/** Text of `length` characters that compresses badly (as a PSP's could): hex. */
const long = (length: number) => randomBytes(Math.ceil(length / 2)).toString('hex').slice(0, length);
const now = () => Math.floor(Date.now() / 1000);

/** Each kind's signed delivery of a body, as its PSP signs it, to its route; `contentType` as sent. */
interface Kind {
  provider: string;
  post(body: unknown, contentType?: string, options?: { badSignature?: boolean }): Promise<{ status: number; json: any }>;
}

const send = async (provider: string, raw: string, headers: Record<string, string>) => {
  const answer = await fetch(`${stack.apiUrl}/provider_webhooks/${provider}`, { method: 'POST', headers, body: raw });
  const text = await answer.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: answer.status, json };
};

const stripeSigner = new Stripe('sk_test_bounds');
const adyenValidator = new adyen.hmacValidator();

const kinds: Record<string, Kind> = {
  sandbox: {
    provider: 'sandbox',
    post: (body, contentType = 'application/json', options = {}) => {
      const raw = JSON.stringify(body);
      const signature = signSandboxWebhook(raw, options.badSignature ? 'not-the-secret-0123456789' : stack.sandboxWebhookSecret);
      return send('sandbox', raw, { 'content-type': contentType, 'sandbox-signature': signature });
    },
  },
  stripe: {
    provider: 'stripe-test',
    post: (body, contentType = 'application/json', options = {}) => {
      const raw = JSON.stringify(body);
      const signature = stripeSigner.webhooks.generateTestHeaderString({ payload: raw, secret: options.badSignature ? 'whsec_another' : STRIPE_WEBHOOK_SECRET });
      return send('stripe-test', raw, { 'content-type': contentType, 'stripe-signature': signature });
    },
  },
  adyen: {
    provider: 'adyen-test',
    post: (body, contentType = 'application/json', options = {}) => {
      // Adyen signs each item (its fields, not the bytes): the test signs every item it sends.
      const batch = body as { notificationItems: { NotificationRequestItem: Record<string, unknown> }[] };
      const key = options.badSignature ? 'AB'.repeat(32) : adyenTestSettings.hmacKey;
      for (const { NotificationRequestItem: item } of batch.notificationItems) {
        item.additionalData = { hmacSignature: adyenValidator.calculateHmac(item as never, key) };
      }
      return send('adyen-test', JSON.stringify(body), { 'content-type': contentType });
    },
  },
};

/** A sandbox charge event (sandbox/objects.ts chargeJson's fields) for a charge no payment has. */
const sandboxEvent = (eventId: string, chargeId: string) => ({
  id: eventId,
  type: 'charge.succeeded',
  created: now(),
  data: {
    object: {
      id: chargeId, object: 'charge', status: 'succeeded', amount_minor: 100, amount_captured_minor: 100, amount_refunded_minor: 0, currency: 'EUR',
      reference: 'pay_none', failure_code: null, failure_message: null, next_action: null,
    },
  },
});

/** A Stripe event carrying a PaymentIntent that no payment has. */
const stripeEvent = (eventId: string, intentId: string) => ({
  id: eventId,
  object: 'event',
  type: 'payment_intent.succeeded',
  created: now(),
  data: { object: { id: intentId, object: 'payment_intent', amount: 100, amount_received: 100, currency: 'eur', status: 'succeeded', capture_method: 'automatic', metadata: { reference: 'pay_none' } } },
});

/** An Adyen batch of AUTHORISATION items (one per pspReference), for payments we do not have. */
const adyenBatch = (pspReferences: string[]) => ({
  live: 'false',
  notificationItems: pspReferences.map((pspReference) => ({
    NotificationRequestItem: {
      amount: { currency: 'EUR', value: 100 },
      eventCode: 'AUTHORISATION',
      eventDate: new Date().toISOString(),
      merchantAccountCode: adyenTestSettings.merchantAccount,
      merchantReference: 'pay_none',
      pspReference,
      reason: '',
      success: 'true',
    } as Record<string, unknown>,
  })),
});

/** The rows a provider stored whose event id or charge id is one of `ids` (or starts with it: Adyen's event ids are `<pspReference>:<code>:<success>`). */
const storedWith = async (provider: string, ids: string[]) =>
  stack.sql<{ event_id: string }[]>`
    SELECT event_id FROM provider_events
    WHERE provider = ${provider} AND (event_id IN ${stack.sql(ids)} OR charge_id IN ${stack.sql(ids)} OR split_part(event_id, ':', 1) IN ${stack.sql(ids)})`;

const expectRefused = (answer: { status: number; json: any }, paths: string[]) => {
  expect(answer.status, JSON.stringify(answer.json)).toBe(400);
  expect(answer.json.error.type).toBe('invalid_request');
  expect(answer.json.error.issues.map((i: { path: string }) => i.path)).toEqual(paths);
};

describe('an identifier longer than its PSP documents is 400 invalid_request naming it, and nothing is stored (every kind)', () => {
  it('sandbox: a charge id of 3 000 characters, and an event id of 3 000', async () => {
    const [eventId, chargeId] = [uniqueKey('evt'), long(3000)];
    expectRefused(await kinds.sandbox!.post(sandboxEvent(eventId, chargeId)), ['data.object.id']);
    const longEventId = long(3000);
    expectRefused(await kinds.sandbox!.post(sandboxEvent(longEventId, uniqueKey('ch'))), ['id']);
    expect(await storedWith('sandbox', [eventId, chargeId, longEventId])).toEqual([]);
  });

  it('stripe: a PaymentIntent id of 3 000 characters, and an event id of 3 000', async () => {
    const [eventId, intentId] = [`evt_${long(24)}`, long(3000)];
    expectRefused(await kinds.stripe!.post(stripeEvent(eventId, intentId)), ['data.object.id']);
    const longEventId = long(3000);
    expectRefused(await kinds.stripe!.post(stripeEvent(longEventId, `pi_${long(24)}`)), ['id']);
    expect(await storedWith('stripe-test', [eventId, intentId, longEventId])).toEqual([]);
  });

  it('adyen: a batch whose second item has a pspReference of 3 000 characters (or 17) stores neither item', async () => {
    for (const oversize of [long(3000), adyenPspReference() + 'X']) {
      const first = adyenPspReference();
      const answer = await kinds.adyen!.post(adyenBatch([first, oversize]));
      expectRefused(answer, ['notificationItems.1.NotificationRequestItem.pspReference']);
      expect(await storedWith('adyen-test', [first, oversize])).toEqual([]);
    }
  });

  it('the same deliveries with identifiers of the documented lengths are stored (each kind: 200)', async () => {
    const sandboxId = uniqueKey('evt');
    expect((await kinds.sandbox!.post(sandboxEvent(sandboxId, `ch_${long(252)}`))).status).toBe(200);
    const stripeId = `evt_${long(251)}`;
    expect((await kinds.stripe!.post(stripeEvent(stripeId, `pi_${long(252)}`))).status).toBe(200);
    const adyenId = adyenPspReference();
    const adyenAnswer = await kinds.adyen!.post(adyenBatch([adyenId]));
    expect(adyenAnswer, JSON.stringify(adyenAnswer.json)).toEqual({ status: 200, json: '[accepted]' });
    expect(await storedWith('sandbox', [sandboxId])).toHaveLength(1);
    expect(await storedWith('stripe-test', [stripeId])).toHaveLength(1);
    expect(await storedWith('adyen-test', [adyenId])).toHaveLength(1);
  });
});

describe('the PSP webhook route takes JSON only: 415 before the signature is checked (every kind)', () => {
  const bodyOf: Record<string, (id: string) => unknown> = {
    sandbox: (id) => sandboxEvent(id, uniqueKey('ch')),
    stripe: (id) => stripeEvent(id, `pi_${long(24)}`),
    adyen: (id) => adyenBatch([id]),
  };
  const idOf: Record<string, () => string> = { sandbox: () => uniqueKey('evt'), stripe: () => `evt_${long(24)}`, adyen: adyenPspReference };

  for (const name of Object.keys(kinds)) {
    it(`${name}: text/plain is 415 whether signed or not, nothing stored; application/json; charset=utf-8 is received`, async () => {
      const kind = kinds[name]!;
      const [signedId, forgedId, charsetId] = [idOf[name]!(), idOf[name]!(), idOf[name]!()];
      for (const [id, badSignature] of [[signedId, false], [forgedId, true]] as const) {
        const answer = await kind.post(bodyOf[name]!(id), 'text/plain', { badSignature });
        expect(answer.status, JSON.stringify(answer.json)).toBe(415);
        expect(answer.json.error.type).toBe('unsupported_media_type');
      }
      expect(await storedWith(kind.provider, [signedId, forgedId])).toEqual([]);
      const received = await kind.post(bodyOf[name]!(charsetId), 'application/json; charset=utf-8');
      expect(received.status, JSON.stringify(received.json)).toBe(200);
      expect(await storedWith(kind.provider, [charsetId])).toHaveLength(1);
    });
  }
});

describe("a tenant's recovery limit above the networks' is 400 with the field's path in issues", () => {
  it('each limit too high names recovery.<field>, and nothing changes', async () => {
    const target = await stack.createTenant('recovery-limits');
    const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
    const before = (await admin.get(`/admin/tenants/${target.id}`)).json;
    const cases: [Record<string, number>, string[]][] = [
      [{ per_day: 11 }, ['recovery.per_day']],
      [{ per_30_days: 16 }, ['recovery.per_30_days']],
      [{ max_retries: 9 }, ['recovery.max_retries']],
      [{ per_day: 11, max_retries: 9 }, ['recovery.per_day', 'recovery.max_retries']],
    ];
    for (const [recovery, paths] of cases) {
      const refused = await admin.request('PATCH', `/admin/tenants/${target.id}`, { body: { recovery } });
      expect(refused.status, refused.text).toBe(400);
      expect(refused.json.error.type).toBe('invalid_request');
      expect(refused.json.error.issues.map((i: { path: string }) => i.path)).toEqual(paths);
    }
    expect((await admin.get(`/admin/tenants/${target.id}`)).json).toEqual(before);
  });
});

describe('GET /return/{payment_id} without a key tells nothing of the payment but its merchant’s return_url', () => {
  const api = () => apiClient(stack.apiUrl, tenant.apiKey);
  const returnOf = (id: string) => fetch(`${stack.apiUrl}/return/${id}?redirectResult=${encodeURIComponent('X3JlZGlyZWN0')}`, { redirect: 'manual' });
  /** Everything the answer says: status line, headers and body, as text. */
  const said = async (answer: Response) => `${answer.status} ${[...answer.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${await answer.text()}`;

  it('a payment with a return_url: 303 to exactly that URL with payment_id added, and nothing else (no status, no amount)', async () => {
    const returnUrl = 'https://shop.example/back?order=ord-7&lang=en';
    const created = await api().post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 4321, currency: 'EUR', payment_method: 'pm_card_visa', return_url: returnUrl }, uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    const payment = await decidedPayment(api(), created.json.id);
    const answer = await returnOf(payment.id);
    expect(answer.status).toBe(303);
    const location = new URL(answer.headers.get('location')!);
    expect(location.origin + location.pathname).toBe('https://shop.example/back');
    expect([...location.searchParams.entries()]).toEqual([['order', 'ord-7'], ['lang', 'en'], ['payment_id', payment.id]]);
    const text = await said(answer);
    for (const secret of [payment.status, '4321', '43.21', 'EUR', 'pm_card_visa', payment.provider_charge_id, payment.order_id]) expect(text).not.toContain(secret);
  });

  it('a payment without a return_url: a page that says nothing of it (no status, no amount)', async () => {
    const created = await api().post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1234, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey('pay'));
    expect([201, 202], created.text).toContain(created.status);
    const answer = await returnOf(created.json.id);
    expect(answer.status).toBe(200);
    const text = await said(answer);
    for (const secret of [created.json.status, 'succeeded', '1234', '12.34', 'EUR', 'pm_card_visa', created.json.provider_charge_id, created.json.order_id]) expect(text).not.toContain(secret);
  });
});
