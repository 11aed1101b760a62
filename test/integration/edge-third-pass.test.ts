import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signSandboxWebhook } from '../../provider/sandbox/webhook';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * A security probe's findings against the running API, each reproduced for real: the
 * failed-authentication limit per client address (clients on 127.0.0.2 and 127.0.0.3, a
 * socket bound to each); a signed PSP webhook whose own figures would decide a waiting payment;
 * signed events PostgreSQL cannot store; unstorable text in admin bodies; empty bodies in every
 * framing; return_urls every PSP refuses. (The Web UI's findings: temporal-ui-guard.test.ts.)
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('third-pass');
});
afterAll(async () => stack?.stop());

interface Answer {
  status: number;
  json: any;
}

/** One request whose socket is bound to `localAddress` (a loopback address of its own: another client). */
function from(localAddress: string, url: string, options: { method?: string; token?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: options.method ?? 'GET', localAddress, agent: false, headers: options.token ? { authorization: `Bearer ${options.token}` } : {} }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: any = null;
        try {
          json = JSON.parse(text);
        } catch {
          // not JSON (the /metrics text)
        }
        resolve({ status: response.statusCode!, json });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end();
  });
}

describe('the failed-authentication limit counts each client address apart, and never refuses a valid credential', () => {
  it('30 bad keys from 127.0.0.2: it is limited; 127.0.0.3 is not; valid tenant key, admin token and /metrics pass from every address', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 30 });
    try {
      const bad = (address: string) => from(address, `${api.url}/v1/payments`, { token: `sk_bad_${uniqueKey()}` });
      const first30 = await Promise.all(Array.from({ length: 30 }, () => bad('127.0.0.2')));
      expect(first30.map((a) => a.status)).toEqual(Array(30).fill(401));
      const limited = await bad('127.0.0.2');
      expect(limited.status).toBe(429);
      expect(limited.json.error.type).toBe('rate_limited');

      // Another address has its own count: its bad key is a plain 401.
      const other = await bad('127.0.0.3');
      expect(other.status, JSON.stringify(other.json)).toBe(401);

      for (const address of ['127.0.0.3', '127.0.0.1', '127.0.0.2']) {
        expect((await from(address, `${api.url}/v1/payments`, { token: tenant.apiKey })).status, `tenant key from ${address}`).toBe(200);
        expect((await from(address, `${api.url}/admin/tenants/${tenant.id}`, { token: ADMIN_TOKEN })).status, `admin token from ${address}`).toBe(200);
        expect((await from(address, `${api.url}/metrics`, { token: ADMIN_TOKEN })).status, `/metrics from ${address}`).toBe(200);
      }
      // 127.0.0.2 is still limited for what fails, admin and metrics guesses included.
      expect((await bad('127.0.0.2')).status).toBe(429);
      expect((await from('127.0.0.2', `${api.url}/admin/tenants/${tenant.id}`, { token: 'admin-guess-0123456789' })).status).toBe(429);
      expect((await from('127.0.0.2', `${api.url}/metrics`, { token: 'metrics-guess-0123456789' })).status).toBe(429);
    } finally {
      await api.close();
    }
  });

  it('with TRUSTED_PROXIES, the forwarded address counts: two clients behind one proxy are limited apart, and a client cannot forge its way out', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 3, TRUSTED_PROXIES: '127.0.0.5' });
    try {
      const viaProxy = (forwardedFor: string, token: string) =>
        fetch(`${api.url}/v1/payments`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': forwardedFor } }).then((r) => r.status);
      // The test's sockets come from 127.0.0.1, not a trusted proxy: the header is ignored, whatever it says.
      const direct = [];
      for (let i = 0; i < 4; i++) direct.push(await viaProxy(`198.51.100.${i}`, `sk_bad_${uniqueKey()}`));
      expect(direct).toEqual([401, 401, 401, 429]);
      // Through the trusted proxy (a socket on 127.0.0.5), each forwarded client has its own count.
      const proxied = (client: string, token: string) =>
        new Promise<number>((resolve, reject) => {
          const request = httpRequest(`${api.url}/v1/payments`, { localAddress: '127.0.0.5', agent: false, headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': `forged, ${client}` } }, (response) => {
            response.resume();
            response.on('end', () => resolve(response.statusCode!));
          });
          request.on('error', reject);
          request.end();
        });
      const clientA = [];
      for (let i = 0; i < 4; i++) clientA.push(await proxied('203.0.113.10', `sk_bad_${uniqueKey()}`));
      expect(clientA).toEqual([401, 401, 401, 429]);
      expect(await proxied('203.0.113.11', `sk_bad_${uniqueKey()}`)).toBe(401);
      expect(await proxied('203.0.113.10', tenant.apiKey)).toBe(200);
    } finally {
      await api.close();
    }
  });
});

describe('a PSP webhook is a hint: the charge the PSP holds is what decides, and it must agree with the payment', () => {
  const returnUrl = 'http://127.0.0.1:9/return';
  const threeDs = () => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: returnUrl });
  const signedEvent = (charge: Record<string, unknown>) => {
    const raw = JSON.stringify({ id: uniqueKey('evt'), type: `charge.${String(charge.status)}`, created: Math.floor(Date.now() / 1000), data: { object: charge } });
    return fetch(`${stack.apiUrl}/provider_webhooks/sandbox`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
      body: raw,
    });
  };
  const chargeJson = (id: string, reference: string, figures: { status: string; amount_minor: number; amount_captured_minor: number }) => ({
    id, object: 'charge', ...figures, amount_refunded_minor: 0, currency: 'EUR', capture: true, reference,
    failure_code: null, failure_message: null, next_action: null, created_at: new Date().toISOString(),
  });
  const merchantBalance = async (client: ReturnType<typeof apiClient>) =>
    ((await client.get('/v1/balance')).json.accounts as { account: string; currency: string; balance_minor: number }[]).find((a) => a.account === 'merchant_balance' && a.currency === 'EUR')?.balance_minor ?? 0;

  it('a signed charge.succeeded capturing 1 for a charge still requires_action decides nothing; the challenge then decides it for 2500', async () => {
    const merchant = await stack.createTenant('forged-figures');
    const api = apiClient(stack.apiUrl, merchant.apiKey);
    const created = await api.post('/v1/payments', threeDs(), uniqueKey());
    expect(created.status, created.text).toBe(202);
    const payment = created.json;

    const forged = await signedEvent(chargeJson(payment.provider_charge_id, payment.id, { status: 'succeeded', amount_minor: 2500, amount_captured_minor: 1 }));
    expect(forged.status).toBe(200);
    expect(await forged.json()).toMatchObject({ duplicate: false, disposition: 'forward' });
    expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'requires_action', amount_captured_minor: 0 });
    expect(await merchantBalance(api)).toBe(0);

    // The customer approves: the PSP's own charge decides it, whole. Had the forged figures been
    // applied, the payment would already be succeeded with 1 captured.
    const approved = await fetch(payment.next_action.redirect_to_url.url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });
    expect(approved.status).toBe(303);
    const done = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${payment.id}`);
      return json.status !== 'requires_action' && json;
    });
    expect(done).toMatchObject({ status: 'succeeded', amount_captured_minor: 2500, failure: null });
    expect(await merchantBalance(api)).toBeGreaterThan(1);
  });

  /**
   * A 3-D Secure payment waiting for its customer, whose charge the PSP holds as succeeded for
   * 2400 instead of the 2500 asked (a PSP-side error), and a signed event reporting just that.
   */
  async function disagreeingCharge(tenantName: string) {
    const merchant = await stack.createTenant(tenantName);
    const api = apiClient(stack.apiUrl, merchant.apiKey);
    const created = await api.post('/v1/payments', threeDs(), uniqueKey());
    expect(created.status, created.text).toBe(202);
    const payment = created.json;
    await stack.sql`UPDATE sandbox.charges SET status = 'succeeded', amount_minor = 2400, amount_captured_minor = 2400 WHERE id = ${payment.provider_charge_id}`;
    const report = () => signedEvent(chargeJson(payment.provider_charge_id, payment.id, { status: 'succeeded', amount_minor: 2400, amount_captured_minor: 2400 }));
    return { merchant, api, payment, report };
  }

  it('a charge the PSP holds with other figures than the payment (amount) is not applied: the payment is flagged needs_operator and keeps waiting', async () => {
    const { merchant, api, payment, report } = await disagreeingCharge('disagreeing-charge');
    const answer = await report();
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ duplicate: false, disposition: 'held_for_operator' });
    const held = (await api.get(`/v1/payments/${payment.id}`)).json;
    expect(held).toMatchObject({ status: 'requires_action', amount_captured_minor: 0, failure: { code: 'needs_operator' } });
    expect(held.failure.message).toMatch(/amount 2400, not 2500/);
    expect(await merchantBalance(api)).toBe(0);
    const events = await stack.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE tenant_id = ${merchant.id} AND type = 'payment.succeeded'`;
    expect(events).toHaveLength(0);
  });

  it('the PSP cannot be asked when the webhook comes: acknowledged as handed_over, and the event’s workflow decides once the PSP answers', async () => {
    const { api, payment, report } = await disagreeingCharge('psp-down-at-webhook');
    const outage = (mode: 'down' | 'none') =>
      fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
    expect((await outage('down')).status).toBe(200);
    try {
      const answer = await report();
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ duplicate: false, disposition: 'handed_over' });
      // Nothing decided while the PSP cannot be asked.
      expect((await api.get(`/v1/payments/${payment.id}`)).json).toMatchObject({ status: 'requires_action', failure: null });
    } finally {
      expect((await outage('none')).status).toBe(200);
    }
    const held = await eventually(async () => {
      const { json } = await api.get(`/v1/payments/${payment.id}`);
      return json.failure?.code === 'needs_operator' && json;
    }, 60_000);
    expect(held).toMatchObject({ status: 'requires_action', amount_captured_minor: 0 });
    expect(held.failure.message).toMatch(/amount 2400, not 2500/);
  });
});

describe('a signed PSP webhook PostgreSQL cannot store is 400 with the field path, and nothing is stored', () => {
  const post = (event: Record<string, unknown>) => {
    const raw = JSON.stringify(event);
    return fetch(`${stack.apiUrl}/provider_webhooks/sandbox`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'sandbox-signature': signSandboxWebhook(raw, stack.sandboxWebhookSecret) },
      body: raw,
    });
  };
  const charge = (id: string) => ({
    id, object: 'charge', status: 'succeeded', amount_minor: 100, amount_captured_minor: 100, amount_refunded_minor: 0, currency: 'EUR', capture: true,
    reference: 'pay_none', failure_code: null, failure_message: null, next_action: null, created_at: new Date().toISOString(),
  });
  const cases: [string, (id: string) => Record<string, unknown>, string][] = [
    ['created 1e300', (id) => ({ id, type: 'charge.succeeded', created: 1e300, data: { object: charge(uniqueKey('ch')) } }), 'created'],
    ['created -99999999999999', (id) => ({ id, type: 'charge.succeeded', created: -99999999999999, data: { object: charge(uniqueKey('ch')) } }), 'created'],
    ['an event id with U+0000', (id) => ({ id: `${id}\u0000x`, type: 'charge.succeeded', created: Math.floor(Date.now() / 1000), data: { object: charge(uniqueKey('ch')) } }), 'id'],
    ['a lone surrogate in the charge', (id) => ({ id, type: 'charge.succeeded', created: Math.floor(Date.now() / 1000), data: { object: { ...charge(uniqueKey('ch')), failure_message: 'x\uD800' } } }), 'data.object.failure_message'],
  ];
  for (const [name, event, path] of cases) {
    it(`${name}: 400 invalid_request naming ${path}`, async () => {
      const id = uniqueKey('evt');
      const answer = await post(event(id));
      const body = (await answer.json()) as any;
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(body.error.type).toBe('invalid_request');
      expect(body.error.issues.map((i: { path: string }) => i.path)).toEqual([path]);
      expect(await stack.sql`SELECT 1 FROM provider_events WHERE event_id LIKE ${`${id}%`}`).toHaveLength(0);
    });
  }
});

describe('admin bodies: text PostgreSQL cannot store is 400 with the path, as in /v1, and never reaches PostgreSQL', () => {
  const cases: [string, string][] = [
    ['U+0000', 'pm_\u0000sepa'],
    ['a lone surrogate', 'pm_\uD800'],
  ];
  for (const [name, prefix] of cases) {
    it(`routing payment_method_prefix with ${name}: 400 naming routing.rules.0.when.payment_method_prefix; the routing is unchanged`, async () => {
      const target = await stack.createTenant(`prefix-${name}`);
      const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
      const answer = await admin.request('PATCH', `/admin/tenants/${target.id}`, { body: { routing: { fallback: ['sandbox'], rules: [{ when: { payment_method_prefix: prefix }, fallback: ['sandbox'] }] } } });
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json.error.type).toBe('invalid_request');
      expect(answer.json.error.issues.map((i: { path: string }) => i.path)).toEqual(['routing.rules.0.when.payment_method_prefix']);
      const [row] = await stack.sql<{ routing: unknown }[]>`SELECT routing FROM tenants WHERE id = ${target.id}`;
      expect(row!.routing).toBeNull();
    });
  }

  it('the other admin text fields too: a tenant name or webhook_url with U+0000 is 400 with its path', async () => {
    const target = await stack.createTenant('admin-text');
    const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
    for (const [field, value] of [['name', 'Acme\u0000'], ['webhook_url', 'https://example.com/\u0000']] as const) {
      const answer = await admin.request('PATCH', `/admin/tenants/${target.id}`, { body: { [field]: value } });
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json.error.issues.map((i: { path: string }) => i.path)).toContain(field);
    }
  });
});

describe('an empty body counts as {} in every framing and with any or no content type (one mechanism: api/middleware.ts jsonBody)', () => {
  /** A request written byte for byte on a socket: the framing is exactly what is asked. */
  function raw(path: string, framing: 'no length' | 'length 0' | 'chunked', contentType: string | null, body = ''): Promise<{ status: number; json: any }> {
    const url = new URL(stack.apiUrl);
    const lines = [`POST ${path} HTTP/1.1`, `Host: ${url.host}`, `Authorization: Bearer ${ADMIN_TOKEN}`, 'Connection: close'];
    if (contentType !== null) lines.push(`Content-Type: ${contentType}`);
    if (framing === 'length 0') lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
    if (framing === 'chunked') lines.push('Transfer-Encoding: chunked');
    const payload = framing === 'chunked' ? (body ? `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n` : '0\r\n\r\n') : body;
    return new Promise((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname);
      const chunks: Buffer[] = [];
      socket.on('data', (chunk) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
        const start = text.indexOf('{');
        const end = text.lastIndexOf('}');
        resolve({ status, json: start >= 0 ? JSON.parse(text.slice(start, end + 1)) : null });
      });
      socket.write(`${lines.join('\r\n')}\r\n\r\n${payload}`);
    });
  }

  const framings = ['no length', 'length 0', 'chunked'] as const;
  const types = [null, 'application/json', 'text/plain'];
  for (const framing of framings) {
    for (const type of types) {
      it(`${framing}, ${type ?? 'no content type'}: 201 with the defaults (webhook secret rotation: 24 h overlap)`, async () => {
        const target = await stack.createTenant('empty-body');
        const answer = await raw(`/admin/tenants/${target.id}/webhook_secret/rotate`, framing, type);
        expect(answer.status, JSON.stringify(answer.json)).toBeLessThan(300);
        const overlap = Date.parse(answer.json.previous_secret_valid_until) - Date.now();
        expect(overlap).toBeGreaterThan(23 * 3600_000);
      });
    }
  }

  it('a chunked body that is not empty is still JSON only, parsed and validated, and limited in size', async () => {
    const target = await stack.createTenant('chunked-body');
    const parsed = await raw(`/admin/tenants/${target.id}/webhook_secret/rotate`, 'chunked', 'application/json', '{"overlap_seconds":60}');
    expect(parsed.status, JSON.stringify(parsed.json)).toBeLessThan(300);
    expect(Date.parse(parsed.json.previous_secret_valid_until) - Date.now()).toBeLessThan(120_000);
    expect((await raw(`/admin/tenants/${target.id}/webhook_secret/rotate`, 'chunked', 'text/plain', '{"overlap_seconds":60}')).status).toBe(415);
    const invalid = await raw(`/admin/tenants/${target.id}/webhook_secret/rotate`, 'chunked', 'application/json', '{"overlap_seconds":-1}');
    expect(invalid.status).toBe(400);
    expect(invalid.json.error.issues.map((i: { path: string }) => i.path)).toEqual(['overlap_seconds']);
    expect((await raw(`/admin/tenants/${target.id}/webhook_secret/rotate`, 'chunked', 'application/json', `{"x":"${'a'.repeat(70_000)}"}`)).status).toBe(413);
  });
});

describe('return_url is refused at the API where every PSP would refuse it: 400 before anything runs', () => {
  const threeDs = (return_url: string) => ({ order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url });
  const long = (length: number) => {
    const base = 'https://shop.example/return?pad=';
    return base + 'a'.repeat(length - base.length);
  };
  const refused: [string, string][] = [
    ['2048 characters', long(2048)],
    ['2001 characters', long(2001)],
    ['https: without the slashes', 'https:evil.example/noslash'],
    ['one slash', 'https:/evil.example/x'],
    ['backslashes', 'https:\\\\evil.example\\x'],
    ['a tab the parser would drop', 'https://evil.exa\tmple/x'],
    ['no host', 'https:///path'],
  ];
  for (const [name, url] of refused) {
    it(`${name}: 400 naming return_url; no payment, no key recorded`, async () => {
      const merchant = await stack.createTenant('return-url');
      const key = uniqueKey();
      const answer = await apiClient(stack.apiUrl, merchant.apiKey).post('/v1/payments', threeDs(url), key);
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json.error.issues.map((i: { path: string }) => i.path)).toEqual(['return_url']);
      expect(await stack.sql`SELECT 1 FROM payments WHERE tenant_id = ${merchant.id}`).toHaveLength(0);
      expect(await stack.sql`SELECT 1 FROM idempotency_records WHERE tenant_id = ${merchant.id} AND idempotency_key = ${key}`).toHaveLength(0);
    });
  }

  it('the longest allowed (2000 characters) is one the PSP accepts: the challenge is offered with it', async () => {
    const url = long(2000);
    const answer = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', threeDs(url), uniqueKey());
    expect(answer.status, answer.text).toBe(202);
    expect(answer.json.next_action.redirect_to_url.return_url).toBe(url);
  });
});
