import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../provider/sandbox/client';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { ProviderUnavailableError, ProviderWebhookError, type CreateChargeRequest, type ProviderWebhookEvent } from '../../provider/types';
import { noWebhookFaults } from '../../sandbox/deps';
import { startSandbox, type RunningSandbox, type StartSandboxOptions } from '../../sandbox/server';
import { parseWebhookFaults } from '../../sandbox/webhooks';
import { completeChallenge, sandboxControls } from '../../testkit/sandbox';
import { startWebhookReceiver, type Delivery } from '../../testkit/webhook-receiver';
import { createSql, type Sql } from '../../db/connect';
import { chargeRequest, unique } from '../helpers/charge-request';
import { fileDatabaseUrl } from '../helpers/database';
import { eventually } from '../helpers/eventually';

/**
 * The sandbox PSP's flows for payments that wait, its outages and its
 * report and discrepancies, against the real sandbox server on real PostgreSQL,
 * seen through SandboxProvider as the orchestrator sees it. Webhooks go to loopback receivers.
 * Each test starts its own sandbox (and receiver): they share the file's database, and each
 * finishes what it makes before it closes.
 */

const secret = `whsec_${randomBytes(16).toString('hex')}`;
let databaseUrl: string;
/** The sandbox's tables, read while no sandbox runs. */
let sql: Sql;

beforeAll(async () => {
  databaseUrl = await fileDatabaseUrl();
  sql = createSql(databaseUrl, { max: 1 });
});
afterAll(async () => sql?.end());

/**
 * Waits, while the sandbox is down, until the charge's `settle_at` or `dispute_at` has come by
 * the database's clock: the test the sandbox's own pass makes of what is due.
 */
const cameDue = (chargeId: string, column: 'settle_at' | 'dispute_at') =>
  eventually(async () => {
    const [row] = await sql<{ due: boolean }[]>`SELECT ${sql(column)} <= clock_timestamp() AS due FROM sandbox.charges WHERE id = ${chargeId}`;
    return row!.due;
  }, 15_000, 50, `${chargeId} ${column} come`);

interface Opened {
  sandbox: RunningSandbox;
  provider: SandboxProvider;
  receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  events: () => ProviderWebhookEvent[];
  close(): Promise<void>;
}

const opened: Opened[] = [];
afterAll(async () => {
  for (const o of opened) await o.close().catch(() => {});
});

async function open(
  options: Partial<StartSandboxOptions> = {},
  respond?: Parameters<typeof startWebhookReceiver>[0],
  receiverPort?: number,
): Promise<Opened> {
  const receiver = await startWebhookReceiver(respond, receiverPort ? { port: receiverPort } : {});
  const sandbox = await startSandbox({
    databaseUrl,
    port: 0,
    asyncSettleMs: 300,
    pollMs: 50,
    webhookRetryBaseMs: 100,
    webhookRetryMaxMs: 400,
    webhook: { url: receiver.url, secret },
    ...options,
  });
  const provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: 5_000, webhookSecret: secret });
  let closed = false;
  const o: Opened = {
    sandbox,
    provider,
    receiver,
    // Every delivery verified as the orchestrator would; a bad signature fails the test here.
    events: () => receiver.deliveries.map((d: Delivery) => provider.verifyWebhook(d.body, d.headers as Record<string, string>)),
    async close() {
      if (closed) return;
      closed = true;
      provider.close();
      await sandbox.close();
      await receiver.close();
    },
  };
  opened.push(o);
  return o;
}


const postForm = completeChallenge;

const admin = (sandbox: RunningSandbox, path: string, body?: unknown) => sandboxControls(sandbox.url).call(path, body);

const json = async (response: Promise<Response>): Promise<any> => (await response).json();

const typesFor = (o: Opened, chargeId: string) => o.events().filter((e) => (e.charge?.id ?? e.refund?.chargeId) === chargeId).map((e) => e.type);

describe('3-D Secure: pm_card_threeDSecureRequired', () => {
  it('requires_action with a challenge page; Approve succeeds and sends the customer back (303) with the payment id', async () => {
    const o = await open();
    const request = chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired', returnUrl: 'http://127.0.0.1:9/shop/return?order=7' });
    const charge = await o.provider.createCharge(request);
    expect(charge).toMatchObject({ status: 'requires_action', amountCapturedMinor: 0, reference: request.reference });
    expect(charge.nextAction).toEqual({ type: 'redirect_to_url', url: `${o.sandbox.url}/challenge/${charge.id}`, returnUrl: request.returnUrl });

    const page = await fetch(charge.nextAction!.url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<button type="submit" name="result" value="approve"');
    expect(html).toContain('value="deny"');
    expect(html).toContain('25.00 EUR');

    const done = await postForm(charge.nextAction!.url, 'approve');
    expect(done.status).toBe(303);
    const location = new URL(done.location!);
    expect(`${location.origin}${location.pathname}`).toBe('http://127.0.0.1:9/shop/return');
    expect(Object.fromEntries(location.searchParams)).toEqual({ order: '7', payment_id: request.reference, charge_id: charge.id });

    const now = await o.provider.retrieveCharge(charge.id);
    expect(now).toMatchObject({ status: 'succeeded', amountCapturedMinor: 2_500, nextAction: null });
    expect(await o.provider.findChargeByIdempotencyKey(request.idempotencyKey)).toMatchObject({ id: charge.id, status: 'succeeded' });
    expect((await o.provider.listChargesByReference(request.reference)).map((c) => c.status)).toEqual(['succeeded']);
    // The create's answer replays as it was first given (requires_action); lookups show the charge now.
    expect(await o.provider.createCharge(request)).toEqual(charge);

    // A second submit (a double click, the back button) changes nothing and sends them back again.
    const again = await postForm(charge.nextAction!.url, 'deny');
    expect(again.status).toBe(303);
    expect((await o.provider.retrieveCharge(charge.id)).status).toBe('succeeded');
    const after = await (await fetch(charge.nextAction!.url)).text();
    expect(after).toContain('Authentication complete');
    expect(after).not.toContain('<button');

    await eventually(() => typesFor(o, charge.id).length >= 2, 15_000, 50, 'both events');
    expect(typesFor(o, charge.id)).toEqual(['charge.requires_action', 'charge.succeeded']);
    await o.close();
  });

  it('without capture, an approved challenge waits for capture (requires_action → requires_capture → succeeded)', async () => {
    const o = await open();
    const charge = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired', capture: false, returnUrl: 'http://127.0.0.1:9/r' }));
    expect((await postForm(charge.nextAction!.url, 'approve')).status).toBe(303);
    expect(await o.provider.retrieveCharge(charge.id)).toMatchObject({ status: 'requires_capture', amountCapturedMinor: 0 });
    const captured = await o.provider.captureCharge({ chargeId: charge.id, idempotencyKey: unique('cap') });
    expect(captured).toMatchObject({ status: 'succeeded', amountCapturedMinor: 2_500 });
    await eventually(() => typesFor(o, charge.id).length >= 3, 15_000, 50, 'three events');
    expect(typesFor(o, charge.id)).toEqual(['charge.requires_action', 'charge.requires_capture', 'charge.succeeded']);
    await o.close();
  });

  it('_declined: approved at the bank, then declined card_declined; Deny on any challenge declines authentication_failed', async () => {
    const o = await open();
    const declined = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired_declined', returnUrl: 'http://127.0.0.1:9/r' }));
    expect(declined.status).toBe('requires_action');
    expect((await postForm(declined.nextAction!.url, 'approve')).status).toBe(303);
    expect(await o.provider.retrieveCharge(declined.id)).toMatchObject({ status: 'declined', declineCode: 'card_declined', amountCapturedMinor: 0 });

    const denied = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired', returnUrl: 'http://127.0.0.1:9/r' }));
    expect((await postForm(denied.nextAction!.url, 'deny')).status).toBe(303);
    expect(await o.provider.retrieveCharge(denied.id)).toMatchObject({ status: 'declined', declineCode: 'authentication_failed' });
    // Without a return_url the page itself says how it ended.
    const bare = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired' }));
    expect(bare.nextAction!.returnUrl).toBeNull();
    const shown = await fetch(bare.nextAction!.url, { method: 'POST', body: new URLSearchParams({ result: 'deny' }) });
    expect(shown.status).toBe(200);
    expect(await shown.text()).toContain('Authentication failed');
    expect((await postForm(bare.nextAction!.url, 'maybe')).status).toBe(400);
    await o.close();
  });

  it('a charge waiting for its challenge can be voided; the challenge then shows expired and changes nothing', async () => {
    const o = await open();
    const charge = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired', returnUrl: 'http://127.0.0.1:9/r' }));
    const voided = await o.provider.voidCharge({ chargeId: charge.id, idempotencyKey: unique('void') });
    expect(voided).toMatchObject({ status: 'canceled', nextAction: null });
    const page = await fetch(charge.nextAction!.url);
    expect(page.status).toBe(410);
    expect(await page.text()).toContain('expired');
    const late = await postForm(charge.nextAction!.url, 'approve');
    expect(late.status).toBe(410);
    expect(await o.provider.retrieveCharge(charge.id)).toMatchObject({ status: 'canceled', amountCapturedMinor: 0 });
    await eventually(() => typesFor(o, charge.id).length >= 2, 15_000, 50, 'two events');
    expect(typesFor(o, charge.id)).toEqual(['charge.requires_action', 'charge.canceled']);
    await o.close();
  });
});

describe('asynchronous methods: pm_sepa_debit', () => {
  it('processing, then succeeded after SANDBOX_ASYNC_SETTLE_MS; _fails ends declined debit_failed', async () => {
    const o = await open({ asyncSettleMs: 400 });
    // Before the create: the settle timer starts at the sandbox's commit, somewhere after this
    // (taken after the creates, a loaded machine's slow second create ate into the window).
    const created = Date.now();
    const ok = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_sepa_debit' }));
    const bad = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_sepa_debit_fails' }));
    expect(ok).toMatchObject({ status: 'processing', amountCapturedMinor: 0, nextAction: null });
    expect(bad.status).toBe('processing');
    const settled = await eventually(async () => {
      const charge = await o.provider.retrieveCharge(ok.id);
      return charge.status !== 'processing' && charge;
    }, 15_000, 50, 'settlement');
    expect(Date.now() - created).toBeGreaterThanOrEqual(400);
    expect(settled).toMatchObject({ status: 'succeeded', amountCapturedMinor: 2_500 });
    expect(await eventually(async () => {
      const charge = await o.provider.retrieveCharge(bad.id);
      return charge.status !== 'processing' && charge;
    }, 15_000, 50, 'failure')).toMatchObject({ status: 'declined', declineCode: 'debit_failed' });
    await eventually(() => typesFor(o, ok.id).length >= 2 && typesFor(o, bad.id).length >= 2, 15_000, 50, 'events');
    expect(typesFor(o, ok.id)).toEqual(['charge.processing', 'charge.succeeded']);
    expect(typesFor(o, bad.id)).toEqual(['charge.processing', 'charge.declined']);
    // A processing charge cannot be voided (as at Stripe).
    const pending = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_sepa_debit' }));
    await expect(o.provider.voidCharge({ chargeId: pending.id, idempotencyKey: unique('void') })).rejects.toMatchObject({ code: 'invalid_state' });
    await eventually(async () => (await o.provider.retrieveCharge(pending.id)).status === 'succeeded', 15_000, 50, 'settled');
    await o.close();
  });

  it('settlement survives a restart of the sandbox: what came due while it was down settles when it is back', async () => {
    const first = await open({ asyncSettleMs: 800 });
    const charge = await first.provider.createCharge(chargeRequest({ paymentMethod: 'pm_sepa_debit' }));
    await first.close();
    await cameDue(charge.id, 'settle_at');
    const second = await open({ asyncSettleMs: 800 });
    expect(await eventually(async () => {
      const now = await second.provider.retrieveCharge(charge.id);
      return now.status === 'succeeded' && now;
    }, 15_000, 50, 'settled after the restart')).toMatchObject({ amountCapturedMinor: 2_500 });
    await second.close();
  });
});

describe('outbound webhooks', () => {
  it('are signed (Sandbox-Signature over t.body), carry the object as GET shows it, and fail verification when tampered or stale', async () => {
    const o = await open();
    const charge = await o.provider.createCharge(chargeRequest());
    const [delivery] = await eventually(() => o.receiver.deliveries.length > 0 && o.receiver.deliveries, 15_000, 50, 'a delivery');
    const header = delivery!.headers['sandbox-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const body = JSON.parse(delivery!.body);
    expect(body).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'charge.succeeded', created: expect.any(Number) });
    const shown = await (await fetch(`${o.sandbox.url}/v1/charges/${charge.id}`)).json();
    expect(body.data.object).toEqual(shown);

    const verified = o.provider.verifyWebhook(delivery!.body, { 'Sandbox-Signature': header });
    expect(verified).toMatchObject({ id: body.id, type: 'charge.succeeded', charge: { id: charge.id, status: 'succeeded' }, refund: null });
    expect(() => o.provider.verifyWebhook(delivery!.body.replace('2500', '2600'), { 'sandbox-signature': header })).toThrow(ProviderWebhookError);
    expect(() => o.provider.verifyWebhook(delivery!.body, {})).toThrow(ProviderWebhookError);
    const stale = signSandboxWebhook(delivery!.body, secret, Math.floor(Date.now() / 1000) - 600);
    expect(() => o.provider.verifyWebhook(delivery!.body, { 'sandbox-signature': stale })).toThrow(/tolerance/);
    expect(() => o.provider.verifyWebhook(delivery!.body, { 'sandbox-signature': signSandboxWebhook(delivery!.body, 'another-secret-value') })).toThrow(ProviderWebhookError);
    // Several v1 signatures (a secret being rotated): one match is enough; a future timestamp is stale too.
    const other = signSandboxWebhook(delivery!.body, 'the-previous-secret-value').split(',')[1];
    expect(o.provider.verifyWebhook(delivery!.body, { 'sandbox-signature': `${header},${other}` }).id).toBe(body.id);
    const future = signSandboxWebhook(delivery!.body, secret, Math.floor(Date.now() / 1000) + 600);
    expect(() => o.provider.verifyWebhook(delivery!.body, { 'sandbox-signature': future })).toThrow(/tolerance/);
    const noSecret = new SandboxProvider({ baseUrl: o.sandbox.url, timeoutMs: 1000 });
    expect(() => noSecret.verifyWebhook(delivery!.body, { 'sandbox-signature': header })).toThrow(ProviderWebhookError);
    expect(() => o.provider.verifyWebhook('not json', { 'sandbox-signature': signSandboxWebhook('not json', secret) })).toThrow(/not JSON/);

    // Refunds: refund.succeeded with the refund, and charge.refunded with the charge.
    const refund = await o.provider.createRefund({ chargeId: charge.id, amountMinor: 500, reference: unique('ref'), idempotencyKey: unique('rk') });
    await eventually(() => o.events().length >= 3, 15_000, 50, 'refund events');
    const [, refunded, chargeRefunded] = o.events();
    expect(refunded).toMatchObject({ type: 'refund.succeeded', refund: { id: refund.id, amountMinor: 500 }, charge: null });
    expect(chargeRefunded).toMatchObject({ type: 'charge.refunded', charge: { id: charge.id, amountRefundedMinor: 500 } });
    await o.close();
  });

  it('are retried with backoff until a 2xx, the same event each time, and survive a restart of the sandbox', async () => {
    let answer = 503;
    const o = await open({}, () => answer);
    const charge = await o.provider.createCharge(chargeRequest());
    await eventually(() => o.receiver.deliveries.length >= 3, 15_000, 50, 'three failed attempts');
    await o.sandbox.close();
    const port = Number(new URL(o.receiver.url).port);
    await o.receiver.close();
    answer = 200;
    // The sandbox comes back, and so does the endpoint, at the same URL.
    const back = await open({}, () => 200, port);
    const delivered = await eventually(() => back.receiver.deliveries.length > 0 && back.events(), 15_000, 50, 'a delivery');
    expect(delivered[0]).toMatchObject({ type: 'charge.succeeded', charge: { id: charge.id } });
    const ids = new Set(o.receiver.deliveries.map((d) => JSON.parse(d.body).id));
    expect(ids).toEqual(new Set([delivered[0]!.id]));
    // The sandbox records the 2xx once the endpoint's answer is back, after the endpoint saw the delivery.
    const listed = await eventually(async () => {
      const events = await json(admin(back.sandbox, `/events?charge=${charge.id}`));
      return events.data[0]?.state !== 'pending' && events;
    }, 15_000, 50, 'the event recorded as delivered');
    expect(listed.data).toMatchObject([{ id: delivered[0]!.id, state: 'delivered', last_status: 200 }]);
    expect(listed.data[0].attempts).toBeGreaterThanOrEqual(4);
    await back.close();
  });

  it('faults: duplicate sends twice, loss sends nothing until redelivered, delay waits, reorder lets a later event overtake', async () => {
    expect(parseWebhookFaults('duplicate=0.3,reorder=0.2,delay_ms=2000,loss=0.1', noWebhookFaults)).toMatchObject({ duplicate: 0.3, reorder: 0.2, delayMs: 2000, loss: 0.1 });
    expect(() => parseWebhookFaults('loss=2', noWebhookFaults)).toThrow();
    expect(() => parseWebhookFaults('flood=1', noWebhookFaults)).toThrow();

    const o = await open({ webhookFaults: { duplicate: 1 } });
    const twice = await o.provider.createCharge(chargeRequest());
    await eventually(() => o.receiver.deliveries.length >= 2, 15_000, 50, 'two deliveries');
    expect(o.events().map((e) => [e.id, e.charge?.id])).toEqual([
      [o.events()[0]!.id, twice.id],
      [o.events()[0]!.id, twice.id],
    ]);

    expect(await json(admin(o.sandbox, '/webhook_faults', { loss: 1 }))).toMatchObject({ loss: 1, duplicate: 0 });
    const lost = await o.provider.createCharge(chargeRequest());
    // Events go out in the order they were made: once a later one has arrived, the lost one would have too.
    expect(await json(admin(o.sandbox, '/webhook_faults', {}))).toMatchObject({ loss: 0 });
    const later = await o.provider.createCharge(chargeRequest());
    await eventually(() => typesFor(o, later.id).length > 0, 15_000, 50, 'the later event');
    expect(typesFor(o, lost.id)).toEqual([]);
    const [event] = (await json(admin(o.sandbox, `/events?charge=${lost.id}`))).data;
    expect(event).toMatchObject({ type: 'charge.succeeded', state: 'lost' });
    const redelivered = await json(admin(o.sandbox, `/events/${event.id}/redeliver`, {}));
    expect(redelivered).toMatchObject({ id: event.id, delivered: true, status: 200 });
    expect(o.events().filter((e) => e.id === event.id)).toHaveLength(1);
    expect((await admin(o.sandbox, '/events/evt_nope/redeliver', {})).status).toBe(404);

    await admin(o.sandbox, '/webhook_faults', { delay_ms: 700 });
    const started = Date.now();
    const late = await o.provider.createCharge(chargeRequest());
    await eventually(() => typesFor(o, late.id).length > 0, 15_000, 50, 'the delayed event');
    expect(Date.now() - started).toBeGreaterThanOrEqual(650);

    await admin(o.sandbox, '/webhook_faults', { reorder: 1, reorder_hold_ms: 1500 });
    const sepa = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_sepa_debit' }));
    await eventually(() => typesFor(o, sepa.id).length >= 2, 20_000, 50, 'both events');
    expect(typesFor(o, sepa.id)).toEqual(['charge.succeeded', 'charge.processing']);
    expect((await admin(o.sandbox, '/webhook_faults', { loss: 3 })).status).toBe(400);
    await o.close();
  });
});

describe('outages', () => {
  it('unavailable: writes answer 503 doing nothing, lookups answer; down: everything 503; none ends it', async () => {
    const o = await open();
    expect(await json(admin(o.sandbox, '/outage', { mode: 'unavailable' }))).toEqual({ mode: 'unavailable' });
    const request = chargeRequest();
    const refused = await o.provider.createCharge(request).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ProviderUnavailableError);
    expect((refused as ProviderUnavailableError).status).toBe(503);
    // The lookup answers, and shows that nothing was charged.
    expect(await o.provider.findChargeByIdempotencyKey(request.idempotencyKey)).toBeNull();
    expect(await o.provider.listChargesByReference(request.reference)).toEqual([]);

    await admin(o.sandbox, '/outage', { mode: 'down' });
    expect(await o.provider.findChargeByIdempotencyKey(request.idempotencyKey).catch((e: unknown) => e)).toMatchObject({ status: 503 });
    expect((await fetch(`${o.sandbox.url}/healthz`)).status).toBe(503);

    await admin(o.sandbox, '/outage', { mode: 'none' });
    expect(await o.provider.createCharge(request)).toMatchObject({ status: 'succeeded' });
    expect((await admin(o.sandbox, '/outage', { mode: 'sideways' })).status).toBe(400);
    await o.close();
  });

  it('timeout: the charge is committed but never answered, and lookups hang too, until the outage ends', async () => {
    const o = await open();
    const impatient = new SandboxProvider({ baseUrl: o.sandbox.url, timeoutMs: 600 });
    await admin(o.sandbox, '/outage', { mode: 'timeout' });
    const request = chargeRequest();
    expect(await impatient.createCharge(request).catch((e: unknown) => e)).toBeInstanceOf(ProviderUnavailableError);
    expect(await impatient.findChargeByIdempotencyKey(request.idempotencyKey).catch((e: unknown) => e)).toBeInstanceOf(ProviderUnavailableError);
    await admin(o.sandbox, '/outage', { mode: 'none' });
    expect(await o.provider.findChargeByIdempotencyKey(request.idempotencyKey)).toMatchObject({ status: 'succeeded', reference: request.reference });
    // The retry with the same key replays the committed charge: one charge.
    await o.provider.createCharge(request);
    expect(await o.provider.listChargesByReference(request.reference)).toHaveLength(1);
    impatient.close();
    await o.close();
  });
});

describe('the report and discrepancies', () => {
  it('lists captured charges and refunds in a window, with fees, status and our reference, page by page', async () => {
    const o = await open();
    const from = new Date(Date.now() - 1000);
    const a = await o.provider.createCharge(chargeRequest({ amountMinor: 10_000 }));
    const auth = await o.provider.createCharge(chargeRequest({ capture: false }));
    const refundRef = unique('refund');
    const refund = await o.provider.createRefund({ chargeId: a.id, amountMinor: 3_000, reference: refundRef, idempotencyKey: unique('rk') });
    await o.provider.captureCharge({ chargeId: auth.id, amountMinor: 1_000, idempotencyKey: unique('cap') });
    await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_declined' }));
    const to = new Date(Date.now() + 1000);

    const lines = [];
    let startingAfter: string | undefined;
    for (let page = 0; page < 10; page++) {
      const result = await o.provider.listBalanceTransactions({ from, to, limit: 1, ...(startingAfter ? { startingAfter } : {}) });
      lines.push(...result.data);
      if (!result.hasMore) break;
      startingAfter = result.data.at(-1)!.id;
    }
    const mine = lines.filter((l) => [a.id, auth.id].includes(l.chargeId));
    expect(mine.map((l) => [l.type, l.source, l.amountMinor, l.feeMinor, l.reference, l.status, l.currency])).toEqual([
      ['charge', a.id, 10_000, 165, a.reference, 'pending', 'EUR'],
      ['refund', refund.id, -3_000, 0, refundRef, 'pending', 'EUR'],
      ['charge', auth.id, 1_000, 39, auth.reference, 'pending', 'EUR'],
    ]);
    expect(new Set(lines.map((l) => l.id)).size).toBe(lines.length);
    // Outside the window: nothing.
    expect((await o.provider.listBalanceTransactions({ from: new Date(0), to: from })).data.filter((l) => l.chargeId === a.id)).toEqual([]);
    const bad = await fetch(`${o.sandbox.url}/v1/reports/balance_transactions?from=${to.toISOString()}&to=${from.toISOString()}`);
    expect(bad.status).toBe(400);
    await o.close();
  });

  it('direct_charge, dashboard_refund and alter_amount show in lookups and in the report', async () => {
    const o = await open();
    const from = new Date(Date.now() - 1000);
    const ours = await o.provider.createCharge(chargeRequest({ amountMinor: 5_000 }));

    const direct = await json(admin(o.sandbox, '/discrepancies', { kind: 'direct_charge', reference: ours.reference, amount_minor: 5_000, currency: 'eur' }));
    expect(direct.charge).toMatchObject({ status: 'succeeded', reference: ours.reference, currency: 'EUR', amount_captured_minor: 5_000 });
    expect((await o.provider.listChargesByReference(ours.reference)).map((c) => c.id)).toEqual([ours.id, direct.charge.id]);

    const dashboard = await json(admin(o.sandbox, '/discrepancies', { kind: 'dashboard_refund', charge_id: ours.id, amount_minor: 1_200 }));
    expect(dashboard.refund).toMatchObject({ charge: ours.id, amount_minor: 1_200, status: 'succeeded' });
    expect(await o.provider.retrieveCharge(ours.id)).toMatchObject({ amountRefundedMinor: 1_200 });

    const altered = await admin(o.sandbox, '/discrepancies', { kind: 'alter_amount', charge_id: ours.id, amount_minor: 4_900 });
    expect(altered.status).toBe(200);
    expect(await o.provider.retrieveCharge(ours.id)).toMatchObject({ amountCapturedMinor: 4_900, amountRefundedMinor: 1_200 });

    const { data } = await o.provider.listBalanceTransactions({ from, to: new Date(Date.now() + 1000) });
    const lines = data.filter((l) => l.chargeId === ours.id || l.chargeId === direct.charge.id);
    expect(lines.map((l) => [l.type, l.chargeId, l.reference, l.amountMinor])).toEqual([
      ['charge', ours.id, ours.reference, 4_900],
      ['charge', direct.charge.id, ours.reference, 5_000],
      ['refund', ours.id, null, -1_200],
    ]);
    expect((await admin(o.sandbox, '/discrepancies', { kind: 'alter_amount', charge_id: ours.id, amount_minor: 100 })).status).toBe(400);
    expect((await admin(o.sandbox, '/discrepancies', { kind: 'dashboard_refund', charge_id: 'ch_nope', amount_minor: 1 })).status).toBe(404);
    expect((await admin(o.sandbox, '/discrepancies', { kind: 'teleport' })).status).toBe(400);
    await o.close();
  });
});

describe('disputes: pm_card_createDispute and pm_card_createDisputeInquiry', () => {
  const disputeTimes = { disputeAfterMs: 150, disputeDecisionMs: 150 };
  const disputeOf = async (o: Opened, chargeId: string) => {
    const { data } = await o.provider.disputes.listDisputes({ limit: 100 });
    return data.find((d) => d.chargeId === chargeId) ?? null;
  };
  const openedDispute = (o: Opened, chargeId: string) => eventually(() => disputeOf(o, chargeId), 15_000, 50, 'the dispute opened');
  const disputeTypesFor = (o: Opened, chargeId: string) =>
    o.events().filter((e) => e.dispute?.chargeId === chargeId).map((e) => `${e.type}:${e.dispute!.stage}/${e.dispute!.status}`);
  const reportFor = async (o: Opened, chargeId: string, from: Date) =>
    (await o.provider.listBalanceTransactions({ from, to: new Date(Date.now() + 1000), limit: 1000 })).data
      .filter((l) => l.chargeId === chargeId)
      .map((l) => [l.type, l.amountMinor, l.feeMinor]);

  it('a chargeback opens after SANDBOX_DISPUTE_AFTER_MS with the funds and the fee withdrawn; winning evidence reinstates the amount, not the fee', async () => {
    const o = await open(disputeTimes);
    const from = new Date(Date.now() - 1000);
    const charge = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_createDispute', amountMinor: 10_000 }));
    expect(charge.status).toBe('succeeded');
    const dispute = await openedDispute(o, charge.id);
    expect(dispute).toMatchObject({ reference: charge.reference, amountMinor: 10_000, currency: 'EUR', reason: 'fraudulent', stage: 'chargeback', status: 'needs_response', evidenceSubmittedAt: null });
    expect(new Date(dispute.evidenceDueBy).getTime() - new Date(dispute.createdAt).getTime()).toBeGreaterThan(6 * 24 * 3600 * 1000);
    expect(await o.provider.disputes.retrieveDispute(dispute.id)).toEqual(dispute);
    expect(await reportFor(o, charge.id, from)).toEqual([['charge', 10_000, 165], ['dispute', -10_000, 1_500]]);
    // The network holds the money: the PSP refuses to refund it.
    await expect(o.provider.createRefund({ chargeId: charge.id, amountMinor: 100, reference: unique('r'), idempotencyKey: unique('rk') })).rejects.toMatchObject({ code: 'charge_disputed' });

    const staged = await o.provider.disputes.updateDispute({ disputeId: dispute.id, idempotencyKey: unique('ev'), evidence: { uncategorized_text: 'the winning_evidence' }, submit: false });
    expect(staged).toMatchObject({ status: 'needs_response', evidenceSubmittedAt: null });
    const key = unique('ev');
    const submitted = await o.provider.disputes.updateDispute({ disputeId: dispute.id, idempotencyKey: key, evidence: { product_description: 'a lamp' }, submit: true });
    expect(submitted).toMatchObject({ status: 'under_review' });
    expect(submitted.evidenceSubmittedAt).not.toBeNull();
    // The same key replays; evidence after submission is refused.
    expect(await o.provider.disputes.updateDispute({ disputeId: dispute.id, idempotencyKey: key, evidence: { product_description: 'a lamp' }, submit: true })).toEqual(submitted);
    await expect(o.provider.disputes.updateDispute({ disputeId: dispute.id, idempotencyKey: unique('ev'), evidence: {}, submit: true })).rejects.toMatchObject({ code: 'dispute_not_open' });

    await eventually(async () => (await o.provider.disputes.retrieveDispute(dispute.id)).status === 'won', 15_000, 50, 'won');
    expect(await reportFor(o, charge.id, from)).toEqual([['charge', 10_000, 165], ['dispute', -10_000, 1_500], ['dispute_reversal', 10_000, 0]]);
    await eventually(() => disputeTypesFor(o, charge.id).length >= 6, 15_000, 50, 'the dispute events');
    expect(disputeTypesFor(o, charge.id)).toEqual([
      'charge.dispute.created:chargeback/needs_response',
      'charge.dispute.funds_withdrawn:chargeback/needs_response',
      'charge.dispute.updated:chargeback/needs_response',
      'charge.dispute.updated:chargeback/under_review',
      'charge.dispute.funds_reinstated:chargeback/won',
      'charge.dispute.closed:chargeback/won',
    ]);
    await o.close();
  });

  it('losing evidence loses with no reinstatement; accepting concedes at once; a closed dispute takes no evidence', async () => {
    const o = await open(disputeTimes);
    const from = new Date(Date.now() - 1000);
    const lost = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_createDispute' }));
    const accepted = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_createDispute' }));
    const first = await openedDispute(o, lost.id);
    await o.provider.disputes.updateDispute({ disputeId: first.id, idempotencyKey: unique('ev'), evidence: { uncategorized_text: 'losing_evidence' }, submit: true });
    await eventually(async () => (await o.provider.disputes.retrieveDispute(first.id)).status === 'lost', 15_000, 50, 'lost');
    expect(await reportFor(o, lost.id, from)).toEqual([['charge', 2_500, 60], ['dispute', -2_500, 1_500]]);

    const second = await openedDispute(o, accepted.id);
    const key = unique('close');
    const closed = await o.provider.disputes.closeDispute({ disputeId: second.id, idempotencyKey: key });
    expect(closed).toMatchObject({ status: 'lost', stage: 'chargeback' });
    expect(await o.provider.disputes.closeDispute({ disputeId: second.id, idempotencyKey: key })).toEqual(closed);
    await expect(o.provider.disputes.closeDispute({ disputeId: second.id, idempotencyKey: unique('close') })).rejects.toMatchObject({ code: 'dispute_not_open' });
    await expect(o.provider.disputes.updateDispute({ disputeId: second.id, idempotencyKey: unique('ev'), evidence: {}, submit: false })).rejects.toMatchObject({ code: 'dispute_not_open' });
    await expect(o.provider.disputes.retrieveDispute('dp_nope')).rejects.toMatchObject({ status: 404 });
    await o.close();
  });

  it('an inquiry moves no money; unanswered at its due date it escalates to a chargeback, which is lost at the next', async () => {
    const o = await open({ ...disputeTimes, disputeEvidenceSeconds: 1 });
    const from = new Date(Date.now() - 1000);
    const charge = await o.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_createDisputeInquiry' }));
    const inquiry = await openedDispute(o, charge.id);
    expect(inquiry).toMatchObject({ stage: 'inquiry', status: 'needs_response' });
    expect(await reportFor(o, charge.id, from)).toEqual([['charge', 2_500, 60]]);
    await eventually(async () => (await o.provider.disputes.retrieveDispute(inquiry.id)).stage === 'chargeback', 15_000, 50, 'escalated');
    expect(await reportFor(o, charge.id, from)).toEqual([['charge', 2_500, 60], ['dispute', -2_500, 1_500]]);
    await eventually(async () => (await o.provider.disputes.retrieveDispute(inquiry.id)).status === 'lost', 15_000, 50, 'lost at the due date');
    await eventually(() => disputeTypesFor(o, charge.id).length >= 3, 15_000, 50, 'events');
    expect(disputeTypesFor(o, charge.id)).toEqual([
      'charge.dispute.created:inquiry/needs_response',
      'charge.dispute.funds_withdrawn:chargeback/needs_response',
      'charge.dispute.closed:chargeback/lost',
    ]);
    // Evidence after the due date is refused (the dispute is closed by now).
    await expect(o.provider.disputes.updateDispute({ disputeId: inquiry.id, idempotencyKey: unique('ev'), evidence: {}, submit: true })).rejects.toMatchObject({ status: 400 });
    await o.close();
  });

  it('a dispute due while the sandbox was down opens when it is back; dispute events take the webhook faults (lost, then redelivered)', async () => {
    const first = await open({ disputeAfterMs: 600 });
    const charge = await first.provider.createCharge(chargeRequest({ paymentMethod: 'pm_card_createDispute' }));
    await first.close();
    await cameDue(charge.id, 'dispute_at');
    const second = await open({ disputeAfterMs: 600, webhookFaults: { loss: 1 } });
    const dispute = await openedDispute(second, charge.id);
    const controls = sandboxControls(second.sandbox.url);
    const events = await eventually(async () => {
      const list = (await json(controls.events(charge.id))) as { data: { id: string; type: string; state: string }[] };
      return list.data.filter((e) => e.type.startsWith('charge.dispute.')).length >= 2 && list.data;
    }, 15_000, 50, 'the dispute events stored');
    const created = events.find((e) => e.type === 'charge.dispute.created')!;
    expect(created.state).toBe('lost');
    expect(disputeTypesFor(second, charge.id)).toEqual([]);
    expect((await controls.redeliver(created.id)).status).toBe(200);
    await eventually(() => disputeTypesFor(second, charge.id).length === 1, 15_000, 50, 'redelivered');
    expect(second.events().find((e) => e.dispute)!.dispute).toMatchObject({ id: dispute.id, status: 'needs_response' });
    await second.close();
  });
});
