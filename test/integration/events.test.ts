import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';

/**
 * Events a merchant can recover: fetched one by one, their delivery attempts listed, and
 * resent (one by one or in bulk) after their webhook gave up, each resend idempotent.
 */

let stack: TestStack;
beforeAll(async () => {
  // Three attempts, 50 ms apart at first: an endpoint that is down exhausts them in well under a second.
  stack = await startStack({ relay: { maxAttempts: 3, retryBaseMs: 50, retryMaxMs: 200 } });
});
afterAll(async () => stack?.stop());

async function tenantWithEndpoint(url: string | null): Promise<Tenant> {
  const tenant = await stack.createTenant('events');
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: url }),
  });
  expect(response.status).toBe(200);
  return tenant;
}

const payment = () => ({ order_id: uniqueKey('ord'), amount_minor: 700, currency: 'EUR', payment_method: 'pm_card_visa' });

/**
 * A merchant's endpoint whose `answer` chooses each delivery's status and may take its time
 * (the delivery attempt waits for it); records each delivery's event id and body.
 */
async function startEndpoint(answer: (index: number) => number | Promise<number>) {
  const received: { eventId: string; body: string }[] = [];
  const endpoint = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', async () => {
      received.push({ eventId: String(req.headers['webhook-id']), body });
      res.writeHead(await answer(received.length - 1)).end();
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/hooks`,
    received,
    of: (eventId: string) => received.filter((d) => d.eventId === eventId),
    close: () =>
      new Promise<void>((resolve) => {
        endpoint.close(() => resolve());
        endpoint.closeAllConnections(); // the relay's idle keep-alive connections would hold close() up
      }),
  };
}

async function deliveryStatus(eventId: string): Promise<string> {
  const [row] = await stack.sql<{ delivery_state: string }[]>`SELECT delivery_state FROM outbox_events WHERE id = ${eventId}`;
  return row!.delivery_state;
}

describe('an event whose webhook gave up can be inspected and delivered again', () => {
  it('lists the failed attempts, finds the event under delivery_status=failed, and resends it once per key', async () => {
    let endpointUp = false;
    // The endpoint takes answerMs to answer each delivery: every attempt's duration covers it.
    const answerMs = 150;
    const receiver = await startEndpoint(async () => {
      await new Promise((resolve) => setTimeout(resolve, answerMs));
      return endpointUp ? 200 : 503;
    });
    const tenant = await tenantWithEndpoint(receiver.url);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const paid = await api.post('/v1/payments', payment(), uniqueKey());
    expect(paid.status).toBe(201);

    const [listed] = (await api.get('/v1/events')).json.data;
    const eventId: string = listed.id;
    await eventually(async () => (await deliveryStatus(eventId)) === 'failed');

    const fetched = await api.get(`/v1/events/${eventId}`);
    expect(fetched.status).toBe(200);
    expect(fetched.json).toEqual(listed);
    expect(JSON.parse(fetched.text)).toEqual(JSON.parse(receiver.of(eventId)[0]!.body));

    const attempts = await api.get(`/v1/events/${eventId}/deliveries`);
    expect(attempts.status).toBe(200);
    expect(attempts.json.data.map((a: { attempt: number }) => a.attempt)).toEqual([3, 2, 1]);
    // Oldest first: each attempt began after the one before it was recorded (the first, after
    // the event was made) and is recorded once it ended, so its duration fits in between.
    const oldestFirst = [...attempts.json.data].reverse() as { duration_ms: number; created_at: string }[];
    let began = Date.parse(listed.created_at);
    for (const attempt of oldestFirst) {
      expect(attempt).toMatchObject({ object: 'delivery_attempt', event_id: eventId, url: receiver.url, response_status: 503, error: 'HTTP 503' });
      expect(attempt.duration_ms).toBeGreaterThanOrEqual(answerMs);
      expect(attempt.duration_ms).toBeLessThanOrEqual(Date.parse(attempt.created_at) - began);
      began = Date.parse(attempt.created_at);
    }
    const failed = await api.get('/v1/events?delivery_status=failed');
    expect(failed.json.data.map((e: { id: string }) => e.id)).toEqual([eventId]);
    expect((await api.get('/v1/events?delivery_status=delivered')).json.data).toEqual([]);

    endpointUp = true;
    const key = uniqueKey('resend');
    const resends = await Promise.all([1, 2, 3].map(() => api.post(`/v1/events/${eventId}/resend`, {}, key)));
    expect(resends.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(new Set(resends.map((r) => r.text)).size).toBe(1);
    expect(resends.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(2);
    expect(resends[0]!.json).toMatchObject({ object: 'event_delivery', event_id: eventId, delivery_status: 'pending', attempts: 3 });

    await eventually(async () => (await deliveryStatus(eventId)) === 'delivered');
    // The three resends had answered before it was delivered, and they counted once (two
    // replayed): nothing can make the event due again, so its four attempts are all there are.
    const [counts] = await stack.sql<{ attempts: number; resend_requests: number }[]>`SELECT attempts, resend_requests FROM outbox_events WHERE id = ${eventId}`;
    expect(counts).toEqual({ attempts: 4, resend_requests: 1 });
    const received = receiver.of(eventId);
    expect(received).toHaveLength(4);
    expect(received[3]!.body).toBe(received[0]!.body);
    expect((await api.get(`/v1/events/${eventId}/deliveries?limit=1`)).json).toMatchObject({ data: [{ attempt: 4, response_status: 200, error: null }], has_more: true });

    // A new key is a new delivery of the same event, to an endpoint that already acknowledged it.
    expect((await api.post(`/v1/events/${eventId}/resend`, {}, uniqueKey('resend'))).status).toBe(200);
    await eventually(async () => receiver.of(eventId).length === 5);
    expect(await eventually(async () => (await deliveryStatus(eventId)) === 'delivered')).toBe(true);
    await receiver.close();
  });

  it('recovers every unacknowledged event since a time, and only those, once per key', async () => {
    let endpointUp = false;
    const receiver = await startWebhookReceiver(() => (endpointUp ? 204 : 500));
    const tenant = await tenantWithEndpoint(receiver.url);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const before = new Date(Date.now() - 1000).toISOString();
    for (let i = 0; i < 3; i++) expect((await api.post('/v1/payments', payment(), uniqueKey())).status).toBe(201);
    const events: { id: string }[] = (await api.get('/v1/events')).json.data;
    expect(events).toHaveLength(3);
    await eventually(async () => (await Promise.all(events.map((e) => deliveryStatus(e.id)))).every((s) => s === 'failed'));

    endpointUp = true;
    const key = uniqueKey('recover');
    const [first, second] = await Promise.all([api.post('/v1/webhook_endpoint/recover', { since: before }, key), api.post('/v1/webhook_endpoint/recover', { since: before }, key)]);
    expect(first!.json).toEqual({ object: 'event_recovery', since: new Date(before).toISOString(), resent: 3 });
    expect(second!.text).toBe(first!.text);
    await eventually(async () => (await Promise.all(events.map((e) => deliveryStatus(e.id)))).every((s) => s === 'delivered'));
    for (const event of events) expect(receiver.of(event.id)).toHaveLength(4);

    // Nothing is left unacknowledged: a new recovery resends nothing.
    expect((await api.post('/v1/webhook_endpoint/recover', { since: before }, uniqueKey('recover'))).json.resent).toBe(0);
    // The same key with another body is another request: refused, nothing done.
    const reused = await api.post('/v1/webhook_endpoint/recover', { since: new Date().toISOString() }, key);
    expect(reused.status).toBe(422);
    expect(reused.json.error.type).toBe('idempotency_key_reused');
    await receiver.close();
  });

  it('a resend asked for while an attempt is in flight is not swallowed by that attempt', async () => {
    // The endpoint holds its first answer (a 200) until the resend has committed.
    let releaseFirst!: () => void;
    const resendCommitted = new Promise<void>((resolve) => (releaseFirst = resolve));
    const endpoint = await startEndpoint(async (index) => {
      if (index === 0) await resendCommitted;
      return 200;
    });
    const tenant = await tenantWithEndpoint(endpoint.url);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    expect((await api.post('/v1/payments', payment(), uniqueKey())).status).toBe(201);
    await eventually(async () => endpoint.received.length === 1);
    const eventId = endpoint.received[0]!.eventId;
    expect((await api.post(`/v1/events/${eventId}/resend`, {}, uniqueKey('resend'))).status).toBe(200);
    releaseFirst();
    await eventually(async () => endpoint.received.length === 2);
    expect(endpoint.received.map((d) => d.eventId)).toEqual([eventId, eventId]);
    await eventually(async () => (await deliveryStatus(eventId)) === 'delivered');
    await endpoint.close();
  });

  it('keeps events to their tenant and refuses bad input with 4xx', async () => {
    const tenant = await tenantWithEndpoint(null);
    const other = await tenantWithEndpoint(null);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const intruder = apiClient(stack.apiUrl, other.apiKey);
    expect((await api.post('/v1/payments', payment(), uniqueKey())).status).toBe(201);
    const [event] = (await api.get('/v1/events')).json.data;
    expect((await intruder.get(`/v1/events/${event.id}`)).status).toBe(404);
    expect((await intruder.get(`/v1/events/${event.id}/deliveries`)).status).toBe(404);
    const stolen = await intruder.post(`/v1/events/${event.id}/resend`, {}, uniqueKey());
    expect(stolen.status).toBe(404);
    expect((await intruder.post('/v1/webhook_endpoint/recover', { since: '2000-01-01T00:00:00Z' }, uniqueKey())).json.resent).toBe(0);
    expect((await api.get('/v1/events/evt_nope')).status).toBe(404);

    expect((await api.post('/v1/webhook_endpoint/recover', { since: 'yesterday' }, uniqueKey())).json.error.type).toBe('invalid_request');
    expect((await api.post('/v1/webhook_endpoint/recover', { since: '2026-01-01T00:00:00Z', extra: 1 }, uniqueKey())).status).toBe(400);
    expect((await api.request('POST', `/v1/events/${event.id}/resend`, { body: {} })).json.error.type).toBe('idempotency_key_missing');
    expect((await api.request('POST', `/v1/events/${event.id}/resend`, { body: { force: true }, key: uniqueKey() })).status).toBe(400);
    // No body at all is a resend too (like capture and cancel).
    expect((await api.request('POST', `/v1/events/${event.id}/resend`, { key: uniqueKey() })).json.event_id).toBe(event.id);
    expect((await api.get('/v1/events?delivery_status=lost')).status).toBe(400);
    expect((await api.get(`/v1/events?starting_after=${event.id}&ending_before=${event.id}`)).status).toBe(400);
    // No endpoint configured: the event was skipped, and stays listed as such.
    await eventually(async () => (await deliveryStatus(event.id)) === 'skipped');
    expect((await api.get('/v1/events?delivery_status=skipped')).json.data.map((e: { id: string }) => e.id)).toEqual([event.id]);
  });
});

describe('every list walks both ways', () => {
  it('pages payments, refunds and events with starting_after and ending_before', async () => {
    const tenant = await tenantWithEndpoint(null);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await api.post('/v1/payments', payment(), uniqueKey())).json.id);
    // ids: newest first, as lists show them.
    const firstPage = await api.get('/v1/payments?limit=2');
    expect(firstPage.json.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(0, 2));
    const older = await api.get(`/v1/payments?limit=2&starting_after=${ids[1]}`);
    expect(older.json.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(2, 4));
    expect(older.json.has_more).toBe(true);
    const newer = await api.get(`/v1/payments?limit=2&ending_before=${ids[4]}`);
    expect(newer.json.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(2, 4));
    expect(newer.json.has_more).toBe(true);
    const newest = await api.get(`/v1/payments?limit=2&ending_before=${ids[2]}`);
    expect(newest.json.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(0, 2));
    expect(newest.json.has_more).toBe(false);

    const events: string[] = (await api.get('/v1/events?limit=100')).json.data.map((e: { id: string }) => e.id);
    expect(events).toHaveLength(5);
    expect((await api.get(`/v1/events?limit=3&ending_before=${events[4]}`)).json.data.map((e: { id: string }) => e.id)).toEqual(events.slice(1, 4));
    expect((await api.get(`/v1/events?limit=3&starting_after=${events[0]}`)).json.data.map((e: { id: string }) => e.id)).toEqual(events.slice(1, 4));

    const refunded = ids[0]!;
    const refunds: string[] = [];
    for (let i = 0; i < 3; i++) refunds.unshift((await api.post(`/v1/payments/${refunded}/refunds`, { amount_minor: 100 }, uniqueKey())).json.id);
    const refundPage = await api.get(`/v1/payments/${refunded}/refunds?limit=1&ending_before=${refunds[2]}`);
    expect(refundPage.json.data.map((r: { id: string }) => r.id)).toEqual([refunds[1]]);
    expect(refundPage.json.has_more).toBe(true);
  });
});
