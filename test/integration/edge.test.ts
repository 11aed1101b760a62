import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { webhookTargetPolicy } from '../../lib/webhook-target';
import { OutboxRelay } from '../../worker/outbox-relay';
import { ADMIN_TOKEN, apiClient, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';

/**
 * The public edge: SSRF checks of webhook targets, security headers, /metrics access, rate
 * limits, failed-authentication limits, API key lifecycle across API processes, webhook
 * secret rotation, and tenant isolation of writes.
 */

let stack: TestStack;
let admin: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
});
afterAll(async () => stack?.stop());

const payment = (extra: Record<string, unknown> = {}) => ({ order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa', ...extra });
const patchTenant = (id: string, body: unknown) => admin.request('PATCH', `/admin/tenants/${id}`, { body });

describe('webhook targets (SSRF)', () => {
  // The test stack allows loopback over http (as npm start does); everything else internal is refused.
  const refused: [string, RegExp][] = [
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://2852039166/', /link-local/],
    ['http://0xa9.0xfe.0xa9.0xfe/', /link-local/],
    ['http://[::ffff:169.254.169.254]/', /IPv4-mapped/],
    ['http://10.0.0.1/hooks', /RFC 1918/],
    ['http://192.168.0.10/hooks', /RFC 1918/],
    ['http://100.100.100.200/', /carrier-grade/],
    ['http://[fd00::1]/', /unique local/],
    ['http://[fe80::1]/', /link-local/],
    ['http://user:secret@127.0.0.1:9/hooks', /credentials/],
    ['ftp://127.0.0.1/hooks', /http/],
    ['http://0.0.0.0:9464/metrics', /unspecified/],
  ];
  for (const [url, reason] of refused) {
    it(`PATCH refuses ${url} with 400 and the reason, and keeps the old URL`, async () => {
      const tenant = await stack.createTenant('ssrf');
      const response = await patchTenant(tenant.id, { webhook_url: url });
      expect(response.status, response.text).toBe(400);
      expect(response.json.error.type).toBe('invalid_request');
      expect(response.json.error.issues[0].path).toBe('webhook_url');
      expect(response.json.error.message).toMatch(reason);
      const [row] = await stack.sql<{ webhook_url: string | null }[]>`SELECT webhook_url FROM tenants WHERE id = ${tenant.id}`;
      expect(row!.webhook_url).toBeNull();
    });
  }

  it('a URL allowed when it was set is checked again on the address dialled at delivery (DNS rebinding)', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await stack.createTenant('rebinding');
    // As if a public name now resolved to loopback: the URL is in the table, the relay's policy allows no internal address.
    const rebound = receiver.url.replace('127.0.0.1', 'localhost');
    await stack.sql`UPDATE tenants SET webhook_url = ${rebound} WHERE id = ${tenant.id}`;
    await stack.relay.stop();
    const strictRelay = new OutboxRelay(stack.sql, stack.logger, {
      retryBaseMs: 60_000, retryMaxMs: 60_000, maxAttempts: 3, timeoutMs: 2000, batchSize: 10, pollMs: 100,
      targetPolicy: webhookTargetPolicy({ allowedCidrs: '', allowHttp: true }),
    });
    await strictRelay.start();
    try {
      const paid = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', payment(), uniqueKey());
      expect(paid.status).toBe(201);
      const [attempt] = await eventually(async () => {
        const rows = await stack.sql<{ error: string | null; response_status: number | null }[]>`
          SELECT d.error, d.response_status FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id WHERE e.tenant_id = ${tenant.id}`;
        return rows.length > 0 && rows;
      });
      expect(attempt!.response_status).toBeNull();
      expect(attempt!.error).toMatch(/webhook target refused: (127\.0\.0\.1|::1).*loopback/);
      expect(receiver.deliveries).toHaveLength(0);
    } finally {
      await strictRelay.stop();
      await stack.relay.start();
      await receiver.close();
    }
  });
});

describe('answers and /metrics', () => {
  it('every API answer says no-store and nosniff, errors included', async () => {
    const tenant = await stack.createTenant('headers');
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const answers = [await api.get('/v1/payments'), await api.get('/v1/payments/pay_nope'), await apiClient(stack.apiUrl, 'sk_wrong').get('/v1/payments'), await api.post('/v1/payments', payment(), uniqueKey())];
    for (const answer of answers) {
      expect(answer.headers.get('cache-control')).toBe('no-store');
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('/metrics needs METRICS_TOKEN or the admin token', async () => {
    const metricsToken = `metrics-${uniqueKey()}`;
    const api = await stack.startApi({ METRICS_TOKEN: metricsToken });
    try {
      const scrape = (token?: string) => fetch(`${api.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
      const anonymous = await scrape();
      expect(anonymous.status).toBe(401);
      expect(((await anonymous.json()) as any).error.type).toBe('unauthorized');
      expect((await scrape('guess-guess-guess-guess')).status).toBe(401);
      const withToken = await scrape(metricsToken);
      expect(withToken.status).toBe(200);
      expect(await withToken.text()).toMatch(/http_request_duration_seconds/);
      expect((await scrape(ADMIN_TOKEN)).status).toBe(200);
    } finally {
      await api.close();
    }
  });
});

describe('rate limits', () => {
  it('reads over the tenant limit are 429 rate_limited with Retry-After and the RateLimit fields', async () => {
    const tenant = await stack.createTenant('reads');
    const patched = await patchTenant(tenant.id, { rate_limits: { read_per_second: 5, write_per_second: 50 } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.rate_limits).toEqual({ read_per_second: 5, write_per_second: 50 });
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const answers = await Promise.all(Array.from({ length: 12 }, () => api.get('/v1/payments')));
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(ok.length + limited.length).toBe(12);
    expect(limited.length).toBeGreaterThan(0);
    // At most two one-second windows can be touched by one burst.
    expect(ok.length).toBeLessThanOrEqual(10);
    expect(ok[0]!.headers.get('ratelimit-policy')).toBe('"read";q=5;w=1');
    expect(ok[0]!.headers.get('ratelimit')).toMatch(/^"read";r=[0-4];t=1$/);
    for (const answer of limited) {
      expect(answer.json.error.type).toBe('rate_limited');
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(answer.headers.get('ratelimit')).toMatch(/^"read";r=0;t=\d+$/);
    }
    // Writes are counted apart: reads being exhausted does not stop a write.
    expect((await api.post('/v1/payments', payment(), uniqueKey())).status).toBe(201);
  });

  it('a 429 is never a key\'s outcome: the retry with the same Idempotency-Key runs normally', async () => {
    const tenant = await stack.createTenant('writes');
    expect((await patchTenant(tenant.id, { rate_limits: { write_per_second: 1 } })).status).toBe(200);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    const requests = [{ key: uniqueKey(), body: payment() }, { key: uniqueKey(), body: payment() }, { key: uniqueKey(), body: payment() }];
    const answers = await Promise.all(requests.map((r) => api.post('/v1/payments', r.body, r.key)));
    const limitedIndex = answers.findIndex((a) => a.status === 429);
    expect(limitedIndex, answers.map((a) => a.status).join()).toBeGreaterThanOrEqual(0);
    const limited = requests[limitedIndex]!;
    expect(answers[limitedIndex]!.headers.get('ratelimit-policy')).toBe('"write";q=1;w=1');
    const records = await stack.sql`SELECT 1 FROM idempotency_records WHERE tenant_id = ${tenant.id} AND idempotency_key = ${limited.key}`;
    expect(records).toHaveLength(0);

    const retried = await eventually(async () => {
      const answer = await api.post('/v1/payments', limited.body, limited.key);
      return answer.status !== 429 && answer;
    }, 10_000, 500);
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(retried.json.order_id).toBe(limited.body.order_id);
  });

  it('each API process enforces the full limit on its own (docs/security.md states it): two processes allow twice as much', async () => {
    const tenant = await stack.createTenant('two-processes');
    expect((await patchTenant(tenant.id, { rate_limits: { read_per_second: 5 } })).status).toBe(200);
    const other = await stack.startApi();
    try {
      const burst = (url: string) => Promise.all(Array.from({ length: 12 }, () => apiClient(url, tenant.apiKey).get('/v1/payments')));
      const [first, second] = await Promise.all([burst(stack.apiUrl), burst(other.url)]);
      const accepted = [first, second].map((answers) => answers.filter((a) => a.status === 200).length);
      console.log(`read limit 5/s, 12 requests to each of two API processes at once: accepted ${accepted.join(' + ')}`);
      for (const count of accepted) {
        expect(count).toBeGreaterThanOrEqual(5);
        expect(count).toBeLessThanOrEqual(10);
      }
      expect(accepted[0]! + accepted[1]!).toBeGreaterThan(5);
    } finally {
      await other.close();
    }
  });

  it('PATCH refuses a limit that is not a positive integer', async () => {
    const tenant = await stack.createTenant('bad-limits');
    for (const rate_limits of [{ read_per_second: 0 }, { write_per_second: 1.5 }, { read_per_second: '10' }, { burst: 10 }]) {
      const response = await patchTenant(tenant.id, { rate_limits });
      expect(response.status, JSON.stringify(rate_limits)).toBe(400);
      expect(response.json.error.type).toBe('invalid_request');
    }
  });

  it('failed authentication is limited per client address: bad keys and admin token guesses alike', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 5 });
    try {
      const tenant = await stack.createTenant('auth-limit');
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await apiClient(api.url, `sk_guess_${i}`).get('/v1/payments')).status);
      statuses.push((await apiClient(api.url, 'admin-guess-0123456789').request('POST', '/admin/tenants', { body: { name: 'x' } })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401]);
      const limited = await apiClient(api.url, 'sk_guess_x').get('/v1/payments');
      expect(limited.status).toBe(429);
      expect(limited.json.error.type).toBe('rate_limited');
      expect(limited.headers.get('retry-after')).toBe('60');
      // Only failures are limited: the right credentials from that very address still pass.
      expect((await apiClient(api.url, tenant.apiKey).get('/v1/payments')).status).toBe(200);
      expect((await apiClient(api.url, ADMIN_TOKEN).request('POST', '/admin/tenants', { body: { name: 'y' } })).status).toBe(201);
      expect((await apiClient(api.url, 'sk_guess_y').get('/v1/payments')).status).toBe(429);
      // Another API process keeps its own count (per-process limits, docs/security.md).
      expect((await apiClient(stack.apiUrl, 'sk_guess_z').get('/v1/payments')).status).toBe(401);
    } finally {
      await api.close();
    }
  });
});

describe('API keys', () => {
  it('several keys per tenant; listed without secrets; a revoked key is refused by every API process within 5 s', async () => {
    const tenant = await stack.createTenant('keys');
    const second = await admin.post(`/admin/tenants/${tenant.id}/api_keys`, {}, 'unused');
    expect(second.status, second.text).toBe(201);
    expect(second.json.api_key).toMatch(/^sk_/);
    expect(second.json.id).toMatch(/^key_/);
    const secondKey = second.json.api_key as string;

    const other = await stack.startApi();
    try {
      for (const url of [stack.apiUrl, other.url]) {
        for (const key of [tenant.apiKey, secondKey]) expect((await apiClient(url, key).get('/v1/payments')).status).toBe(200);
      }
      const listed = await admin.get(`/admin/tenants/${tenant.id}/api_keys`);
      expect(listed.status).toBe(200);
      expect(listed.json.data).toHaveLength(2);
      expect(listed.text).not.toContain(tenant.apiKey);
      expect(listed.text).not.toContain(secondKey);
      for (const key of listed.json.data) {
        expect(Object.keys(key).sort()).toEqual(['created_at', 'id', 'last_used_at', 'object', 'prefix', 'revoked_at']);
        expect(key.last_used_at).not.toBeNull();
      }

      const revoked = await admin.request('DELETE', `/admin/tenants/${tenant.id}/api_keys/${second.json.id}`);
      expect(revoked.status, revoked.text).toBe(200);
      expect(revoked.json.revoked_at).not.toBeNull();
      const revokedAt = Date.now();
      // Both processes have the key cached; each must refuse it within 5 s.
      await eventually(async () => {
        const statuses = await Promise.all([stack.apiUrl, other.url].map(async (url) => (await apiClient(url, secondKey).get('/v1/payments')).status));
        return statuses.every((s) => s === 401);
      }, 5000, 100);
      console.log(`revoked key refused by both API processes after ${Date.now() - revokedAt} ms`);
      expect((await apiClient(other.url, tenant.apiKey).get('/v1/payments')).status).toBe(200);
      expect((await admin.request('DELETE', `/admin/tenants/${tenant.id}/api_keys/key_01jd6w8b3m4x0c2q7yk5h9t1ve`)).status).toBe(404);
      expect((await admin.request('DELETE', `/admin/tenants/ten_01jd6w8b3m4x0c2q7yk5h9t1ve/api_keys/${second.json.id}`)).status).toBe(404);
    } finally {
      await other.close();
    }
  });
});

describe('webhook secret rotation', () => {
  it('deliveries carry both signatures during the overlap, then the new one alone', async () => {
    const receiver = await startWebhookReceiver();
    const tenant = await stack.createTenant('rotation');
    expect((await patchTenant(tenant.id, { webhook_url: receiver.url })).status).toBe(200);
    const api = apiClient(stack.apiUrl, tenant.apiKey);
    try {
      const rotated = await admin.post(`/admin/tenants/${tenant.id}/webhook_secret/rotate`, { overlap_seconds: 3 }, 'unused');
      expect(rotated.status, rotated.text).toBe(200);
      const newSecret = rotated.json.webhook_secret as string;
      expect(newSecret).toMatch(/^whsec_/);
      expect(newSecret).not.toBe(tenant.webhookSecret);

      const during = await api.post('/v1/payments', payment(), uniqueKey());
      const first = await eventually(async () => receiver.deliveries.find((d) => JSON.parse(d.body).data.object.id === during.json.id));
      expect(String(first.headers['webhook-signature']).split(' ')).toHaveLength(2);
      for (const secret of [tenant.webhookSecret, newSecret]) {
        expect(() => new Webhook(secret).verify(first.body, first.headers as Record<string, string>)).not.toThrow();
      }

      // The overlap ends when the relay's own test (the old secret's expiry against the
      // database's clock, db/outbox.ts) says so.
      await eventually(async () => {
        const [tenantRow] = await stack.sql<{ ended: boolean }[]>`
          SELECT previous_webhook_secret_expires_at <= now() AS ended FROM tenants WHERE id = ${tenant.id}`;
        return tenantRow!.ended;
      }, 10_000, 50, 'the old secret expired');
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(rotated.json.previous_secret_valid_until));
      const after = await api.post('/v1/payments', payment(), uniqueKey());
      const second = await eventually(async () => receiver.deliveries.find((d) => JSON.parse(d.body).data.object.id === after.json.id));
      expect(String(second.headers['webhook-signature']).split(' ')).toHaveLength(1);
      expect(() => new Webhook(newSecret).verify(second.body, second.headers as Record<string, string>)).not.toThrow();
      expect(() => new Webhook(tenant.webhookSecret).verify(second.body, second.headers as Record<string, string>)).toThrow();
    } finally {
      await receiver.close();
    }
  });
});

describe('tenant isolation of writes', () => {
  let a: Tenant;
  let b: Tenant;
  beforeAll(async () => {
    a = await stack.createTenant('isolation-a');
    b = await stack.createTenant('isolation-b');
  });

  it("B's capture, cancel and refund of A's payment, and B's reads of A's refunds and events, are 404 and change nothing", async () => {
    const apiA = apiClient(stack.apiUrl, a.apiKey);
    const apiB = apiClient(stack.apiUrl, b.apiKey);
    const authorized = await apiA.post('/v1/payments', payment({ capture_method: 'manual' }), uniqueKey());
    expect(authorized.json.status).toBe('requires_capture');
    const paid = await apiA.post('/v1/payments', payment(), uniqueKey());
    expect(paid.status).toBe(201);
    const refund = await apiA.post(`/v1/payments/${paid.json.id}/refunds`, { amount_minor: 100 }, uniqueKey());
    expect(refund.status).toBe(201);

    const attempts = [
      await apiB.post(`/v1/payments/${authorized.json.id}/capture`, {}, uniqueKey()),
      await apiB.post(`/v1/payments/${authorized.json.id}/cancel`, {}, uniqueKey()),
      await apiB.post(`/v1/payments/${paid.json.id}/refunds`, { amount_minor: 100 }, uniqueKey()),
      await apiB.get(`/v1/payments/${paid.json.id}/refunds`),
      await apiB.get(`/v1/refunds/${refund.json.id}`),
      await apiB.get(`/v1/payments/${paid.json.id}`),
    ];
    for (const attempt of attempts) {
      expect(attempt.status, attempt.text).toBe(404);
      expect(attempt.json.error.type).toBe('not_found');
    }
    const events = await apiB.get('/v1/events?limit=100');
    expect(events.status).toBe(200);
    expect(events.json.data).toEqual([]);

    const [records] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM idempotency_records WHERE tenant_id = ${b.id}`;
    expect(records!.n).toBe(0);
    expect((await apiA.get(`/v1/payments/${authorized.json.id}`)).json.status).toBe('requires_capture');
    const afterRefunds = await apiA.get(`/v1/payments/${paid.json.id}/refunds`);
    expect(afterRefunds.json.data).toHaveLength(1);
    // A's own capture still works: nothing of B's touched the authorization.
    expect((await apiA.post(`/v1/payments/${authorized.json.id}/capture`, {}, uniqueKey())).status).toBe(200);
  });
});
