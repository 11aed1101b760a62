import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIGNIN_LIMITS } from '../../api/console/session';
import { adminRequest, ConsoleClient, createOperator, hiddenField, OPERATOR_PASSWORD, signedInClient } from '../helpers/console';
import { apiClient, eventually, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * The operator console (docs/console.md) on the real stack: operators managed with the admin
 * token, sessions in PostgreSQL, CSRF on every form, viewers and tenants kept to what they may
 * do and see, client text escaped, and a refund that happens once however often it is confirmed.
 */

let stack: TestStack;
let tenant: Tenant;
let other: Tenant;
beforeAll(async () => {
  stack = await startStack({
    api: { CONSOLE_TEMPORAL_UI_URL: 'http://temporal-ui.test', CONSOLE_TRACE_URL: 'http://traces.test/trace' },
    // Disputes open 200 ms after a pm_card_createDispute charge and wait 10 minutes for evidence;
    // a merchant endpoint that is down exhausts its three delivery attempts in well under a second.
    sandbox: { disputes: { disputeAfterMs: 200, disputeDecisionMs: 200, disputeEvidenceSeconds: 600 } },
    relay: { maxAttempts: 3, retryBaseMs: 50, retryMaxMs: 200 },
  });
  [tenant, other] = await Promise.all([stack.createTenant('console'), stack.createTenant('console-other')]);
});
afterAll(async () => stack?.stop());

async function pay(owner: Tenant, fields: Record<string, unknown> = {}): Promise<{ id: string; order_id: string }> {
  const paid = await apiClient(stack.apiUrl, owner.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 5000, currency: 'EUR', payment_method: 'pm_card_visa', ...fields }, uniqueKey());
  expect(paid.status).toBe(201);
  return paid.json;
}

const auditCount = async (objectId: string) => (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM operator_audit WHERE object_id = ${objectId}`)[0]!.n;
const refundsOf = (paymentId: string) => stack.sql<{ id: string; refund_key: string; amount_minor: number }[]>`SELECT id, refund_key, amount_minor FROM refunds WHERE payment_id = ${paymentId}`;

describe('/admin/operators', () => {
  it('creates, lists, disables and re-passwords operators with the admin token; never shows the password hash', async () => {
    const created = await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email: `Ops-${uniqueKey('e')}@Example.com`, role: 'viewer', password: OPERATOR_PASSWORD });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ object: 'operator', role: 'viewer', tenant_id: null, disabled: false });
    expect(created.json.email).toBe(created.json.email.toLowerCase());
    expect(JSON.stringify(created.json)).not.toMatch(/scrypt|password_hash/);
    const listed = await adminRequest(stack.apiUrl, 'GET', '/admin/operators');
    expect(listed.json.data.map((o: { id: string }) => o.id)).toContain(created.json.id);
    expect((await adminRequest(stack.apiUrl, 'POST', `/admin/operators/${created.json.id}/disable`)).json.disabled).toBe(true);
    expect((await adminRequest(stack.apiUrl, 'POST', `/admin/operators/${created.json.id}/password`, { password: 'another long password' })).status).toBe(200);
    const [stored] = await stack.sql<{ password_hash: string }[]>`SELECT password_hash FROM operators WHERE id = ${created.json.id}`;
    expect(stored!.password_hash).toMatch(/^scrypt\$\d+\$8\$1\$/);
  });

  it('refuses bad input with a 4xx and creates nothing: a short password, an unknown tenant, a taken email, no token', async () => {
    const email = `${uniqueKey('dup')}@example.com`;
    const before = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM operators`)[0]!.n;
    expect((await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email, role: 'viewer', password: 'short' })).status).toBe(400);
    expect((await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email, role: 'admin', password: OPERATOR_PASSWORD })).status).toBe(400);
    expect((await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email, role: 'viewer', tenant_id: 'ten_nope', password: OPERATOR_PASSWORD })).status).toBe(400);
    expect((await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM operators`)[0]!.n).toBe(before);
    expect((await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email, role: 'viewer', password: OPERATOR_PASSWORD })).status).toBe(201);
    const taken = await adminRequest(stack.apiUrl, 'POST', '/admin/operators', { email: email.toUpperCase(), role: 'operator', password: OPERATOR_PASSWORD });
    expect(taken.status).toBe(409);
    expect(taken.json.error.type).toBe('operator_email_taken');
    expect((await fetch(`${stack.apiUrl}/admin/operators`)).status).toBe(401);
    expect((await adminRequest(stack.apiUrl, 'POST', '/admin/operators/opr_nope/disable')).status).toBe(404);
  });
});

describe('sign-in and sessions', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie for /console, not Secure over http; Secure when API_PUBLIC_URL is https', async () => {
    const operator = await createOperator(stack.apiUrl, { role: 'viewer' });
    const client = new ConsoleClient(stack.apiUrl);
    const answer = await client.signIn(operator.email, operator.password);
    expect(answer.status).toBe(303);
    const cookie = answer.headers.getSetCookie().find((line) => line.startsWith('console_session='))!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/console/);
    expect(cookie).not.toMatch(/Secure/);
    const https = await stack.startApi({ API_PUBLIC_URL: 'https://console.example' });
    try {
      const secure = await new ConsoleClient(https.url).signIn(operator.email, operator.password);
      expect(secure.headers.getSetCookie().find((line) => line.startsWith('console_session='))).toMatch(/Secure/);
    } finally {
      await https.close();
    }
  });

  it('refuses a wrong password (401) and a sign-in form without its token (403)', async () => {
    const operator = await createOperator(stack.apiUrl, { role: 'viewer' });
    expect((await new ConsoleClient(stack.apiUrl).signIn(operator.email, 'wrong password here')).status).toBe(401);
    const noForm = await new ConsoleClient(stack.apiUrl).post('/console/sign-in', { form_token: 'x', email: operator.email, password: operator.password });
    expect(noForm.status).toBe(403);
    expect((await new ConsoleClient(stack.apiUrl).get('/console/payments')).location).toBe('/console/sign-in');
  });

  it('limits failed sign-ins per account across API processes: past the limit even the right password is refused', async () => {
    const operator = await createOperator(stack.apiUrl, { role: 'viewer' });
    const second = await stack.startApi();
    try {
      for (let i = 0; i < SIGNIN_LIMITS.perAccount; i++) {
        const url = i % 2 === 0 ? stack.apiUrl : second.url;
        expect((await new ConsoleClient(url).signIn(operator.email, `wrong password ${i}`)).status).toBe(401);
      }
      expect((await new ConsoleClient(second.url).signIn(operator.email, operator.password)).status).toBe(429);
      expect((await new ConsoleClient(stack.apiUrl).signIn(operator.email, operator.password)).status).toBe(429);
    } finally {
      await second.close();
    }
  });

  it('limits failed sign-ins per client address across accounts, and leaves other addresses alone', async () => {
    const operator = await createOperator(stack.apiUrl, { role: 'viewer' });
    // Behind a trusted proxy (loopback here), each X-Forwarded-For is another client address.
    const proxied = await stack.startApi({ TRUSTED_PROXIES: '127.0.0.0/8' });
    try {
      const guesser = { 'x-forwarded-for': '203.0.113.7' };
      for (let i = 0; i < SIGNIN_LIMITS.perAddress; i++) {
        expect((await new ConsoleClient(proxied.url, guesser).signIn(`nobody-${i}-${uniqueKey('e')}@example.com`, 'some password')).status).toBe(401);
      }
      expect((await new ConsoleClient(proxied.url, guesser).signIn(operator.email, operator.password)).status).toBe(429);
      expect((await new ConsoleClient(proxied.url, { 'x-forwarded-for': '198.51.100.9' }).signIn(operator.email, operator.password)).status).toBe(303);
    } finally {
      await proxied.close();
    }
  });

  it('ends the session at sign-out: the same cookie no longer opens a page', async () => {
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    const cookie = client.cookies.get('console_session')!;
    expect((await client.post('/console/sign-out', { _csrf: await client.csrf() })).location).toBe('/console/sign-in');
    const replay = new ConsoleClient(stack.apiUrl);
    replay.cookies.set('console_session', cookie);
    expect((await replay.get('/console/payments')).location).toBe('/console/sign-in');
  });

  it('ends sessions when the operator is disabled or given a new password, after 30 idle minutes and after 12 hours', async () => {
    const operator = await createOperator(stack.apiUrl, { role: 'operator' });
    const signedOut = async (client: ConsoleClient) => (await client.get('/console/payments')).location === '/console/sign-in';

    const a = await signedInClient(stack.apiUrl, operator);
    expect(await signedOut(a)).toBe(false);
    await adminRequest(stack.apiUrl, 'POST', `/admin/operators/${operator.id}/password`, { password: 'a brand new password' });
    expect(await signedOut(a)).toBe(true);
    operator.password = 'a brand new password';

    const idle = await signedInClient(stack.apiUrl, operator);
    await stack.sql`UPDATE operator_sessions SET last_seen_at = now() - interval '31 minutes' WHERE operator_id = ${operator.id} AND ended_at IS NULL`;
    expect(await signedOut(idle)).toBe(true);

    const old = await signedInClient(stack.apiUrl, operator);
    await stack.sql`UPDATE operator_sessions SET expires_at = now() - interval '1 second' WHERE operator_id = ${operator.id} AND ended_at IS NULL`;
    expect(await signedOut(old)).toBe(true);

    const b = await signedInClient(stack.apiUrl, operator);
    expect(await signedOut(b)).toBe(false);
    await adminRequest(stack.apiUrl, 'POST', `/admin/operators/${operator.id}/disable`);
    expect(await signedOut(b)).toBe(true);
    expect((await new ConsoleClient(stack.apiUrl).signIn(operator.email, operator.password)).status).toBe(401);
  });

  it('serves pages under a strict Content-Security-Policy: self only, no inline script or style', async () => {
    const page = await new ConsoleClient(stack.apiUrl).get('/console/sign-in');
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.html).not.toMatch(/<script|style=/);
    expect((await fetch(`${stack.apiUrl}/console/assets/console.css`)).headers.get('content-type')).toMatch(/text\/css/);
  });
});

describe('what an operator may see and do', () => {
  it('refuses a POST without the session CSRF token, or with another session\'s (403, nothing recorded)', async () => {
    const payment = await pay(tenant);
    const operator = await createOperator(stack.apiUrl, { role: 'operator' });
    const client = await signedInClient(stack.apiUrl, operator);
    const otherClient = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator' }));
    expect((await client.post(`/console/payments/${payment.id}/refunds`, { amount: '1.00' })).status).toBe(403);
    expect((await client.post(`/console/payments/${payment.id}/refunds`, { amount: '1.00', _csrf: await otherClient.csrf() })).status).toBe(403);
    expect(await auditCount(payment.id)).toBe(0);
  });

  it('shows a viewer no action, and refuses a viewer\'s POST with a valid CSRF token (403, nothing changes)', async () => {
    const payment = await pay(tenant);
    const viewer = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    const page = await viewer.get(`/console/payments/${payment.id}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain('/refunds"');
    const refused = await viewer.post(`/console/payments/${payment.id}/refunds`, { amount: '1.00', _csrf: await viewer.csrf() });
    expect(refused.status).toBe(403);
    expect(await auditCount(payment.id)).toBe(0);
    expect(await refundsOf(payment.id)).toEqual([]);
  });

  it("keeps a tenant's operator to that tenant: another tenant's payment is 404, and is never listed", async () => {
    const mine = await pay(tenant);
    const theirs = await pay(other);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: tenant.id }));
    expect((await client.get(`/console/payments/${mine.id}`)).status).toBe(200);
    expect((await client.get(`/console/payments/${theirs.id}`)).status).toBe(404);
    const listed = await client.get(`/console/payments?tenant_id=${other.id}&order_id=${theirs.order_id}`);
    expect(listed.status).toBe(200);
    expect(listed.html).not.toContain(theirs.id);
    const refused = await client.post(`/console/payments/${theirs.id}/refunds`, { amount: '1.00', _csrf: await client.csrf() });
    expect(refused.status).toBe(404);
    expect((await client.get(`/console/payments/${mine.id}`)).html).not.toContain('temporal-ui.test');
  });

  it('links an operator without a tenant to the payment\'s run in the Temporal UI', async () => {
    const payment = await pay(tenant);
    const page = await (await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }))).get(`/console/payments/${payment.id}`);
    expect(page.html).toContain(`http://temporal-ui.test/namespaces/default/workflows/`);
  });

  it('shows every text a client sent escaped: markup in the order id, description and metadata is text', async () => {
    const markup = '<script>alert(1)</script><img src=x onerror=alert(2)>';
    const payment = await pay(tenant, { order_id: `${uniqueKey('ord')}${markup}`, description: markup, metadata: { note: markup } });
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    for (const path of [`/console/payments/${payment.id}`, `/console/payments?order_id=${encodeURIComponent(payment.order_id)}`]) {
      const page = await client.get(path);
      expect(page.status).toBe(200);
      expect(page.html).not.toContain('<script>');
      expect(page.html).not.toContain('<img src=x');
      expect(page.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    }
  });

  it('answers bad search input with a 400 page and runs nothing', async () => {
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    for (const query of ['status=bogus', 'from=yesterday', 'customer=nobody', 'starting_after=pay_nope', 'order_id=%00']) {
      expect((await client.get(`/console/payments?${query}`)).status, query).toBe(400);
    }
  });
});

describe('refund from the console', () => {
  it('proposes with a server-minted key, confirms through the API operation, and a double submit refunds once; audited', async () => {
    const payment = await pay(tenant);
    const operator = await createOperator(stack.apiUrl, { role: 'operator' });
    const client = await signedInClient(stack.apiUrl, operator);
    const csrf = await client.csrf();
    const proposed = await client.post(`/console/payments/${payment.id}/refunds`, { amount: '12.50', reason: 'requested_by_customer', _csrf: csrf });
    expect(proposed.status).toBe(303);
    const actionPath = proposed.location!;
    expect(actionPath).toMatch(/^\/console\/actions\/act_/);
    const confirmation = await client.get(actionPath);
    expect(confirmation.html).toContain('12.50 EUR');
    expect(await refundsOf(payment.id)).toEqual([]);

    const confirm = () => client.post(`${actionPath}/confirm`, { _csrf: hiddenField(confirmation.html, '_csrf') });
    const answers = await Promise.all([confirm(), confirm(), confirm()]);
    expect(answers.map((a) => a.status)).toEqual([303, 303, 303]);
    const again = await confirm();
    expect(again.status).toBe(303);

    const refunds = await refundsOf(payment.id);
    expect(refunds).toHaveLength(1);
    expect(Number(refunds[0]!.amount_minor)).toBe(1250);
    const [audit] = await stack.sql<{ state: string; idempotency_key: string; actor: string; outcome: { result_id: string } }[]>`SELECT * FROM operator_audit WHERE object_id = ${payment.id}`;
    expect(audit).toMatchObject({ state: 'done', actor: operator.id });
    expect(refunds[0]!.refund_key).toBe(audit!.idempotency_key);
    expect(audit!.outcome.result_id).toBe(refunds[0]!.id);
    const result = await client.get(actionPath);
    expect(result.html).toContain(refunds[0]!.id);
    const api = await apiClient(stack.apiUrl, tenant.apiKey).get(`/v1/payments/${payment.id}`);
    expect(api.json.amount_refunded_minor).toBe(1250);
    const page = await client.get(`/console/payments/${payment.id}`);
    expect(page.html).toContain(audit!.idempotency_key);
  });

  it('records a refusal of the operation on the audit row (more than captured: 409), and refunds nothing', async () => {
    const payment = await pay(tenant);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator' }));
    const proposed = await client.post(`/console/payments/${payment.id}/refunds`, { amount: '99.00', _csrf: await client.csrf() });
    const confirmation = await client.get(proposed.location!);
    await client.post(`${proposed.location!}/confirm`, { _csrf: hiddenField(confirmation.html, '_csrf') });
    const audit = await eventually(async () => (await stack.sql<{ state: string; outcome: { error: string } }[]>`SELECT * FROM operator_audit WHERE object_id = ${payment.id} AND state <> 'proposed'`)[0], 10_000, 50, 'the decision');
    expect(audit).toMatchObject({ state: 'failed', outcome: { error: 'refund_exceeds_captured' } });
    expect(await refundsOf(payment.id)).toEqual([]);
    expect((await client.post(`/console/payments/${payment.id}/refunds`, { amount: 'lots', _csrf: await client.csrf() })).status).toBe(400);
  });
});

// ── The PSPs, disputes, recovery, reconciliation, endpoints and audit pages, and the other actions ──

const markup = '<script>alert(1)</script><img src=x onerror=alert(2)>';

/** A tenant whose merchant endpoint refuses every connection: its events fail after three attempts. */
async function tenantWithDeadEndpoint(name: string): Promise<Tenant> {
  const created = await stack.createTenant(name);
  const patched = await fetch(`${stack.apiUrl}/admin/tenants/${created.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: 'http://127.0.0.1:9/hooks' }),
  });
  expect(patched.status).toBe(200);
  return created;
}

/** A tenant's payment whose first event has failed its deliveries. */
async function failedEvent(owner: Tenant): Promise<{ paymentId: string; eventId: string }> {
  const payment = await pay(owner);
  const eventId = await eventually(async () => {
    const [row] = await stack.sql<{ id: string }[]>`SELECT id FROM outbox_events WHERE tenant_id = ${owner.id} AND delivery_state = 'failed' AND payload->'data'->'object'->>'id' = ${payment.id} ORDER BY seq LIMIT 1`;
    return row?.id ?? null;
  }, 20_000, 50, 'the event failed');
  return { paymentId: payment.id, eventId };
}

async function openDispute(owner: Tenant): Promise<{ id: string; payment_id: string; amount_minor: number }> {
  const payment = await pay(owner, { payment_method: 'pm_card_createDispute' });
  return eventually(async () => (await stack.sql<{ id: string; payment_id: string; amount_minor: number; status: string }[]>`SELECT id, payment_id, amount_minor, status FROM disputes WHERE payment_id = ${payment.id} AND status = 'needs_response'`)[0], 20_000, 50, 'the dispute opened');
}

/** An off-session payment declined softly, now waiting 12 hours for its first recovery retry. */
async function recoveringPayment(owner: Tenant): Promise<string> {
  const api = apiClient(stack.apiUrl, owner.apiKey);
  const customer = (await api.post('/v1/customers', { email: 'jane@example.com' }, uniqueKey('cus'))).json.id as string;
  const first = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: `pm_card_recoverAfter2__${customer.replace(/[^A-Za-z0-9]/g, '').slice(-20)}`, customer, setup_future_usage: 'off_session' }, uniqueKey());
  expect(first.status, first.text).toBe(201);
  const method = await eventually(async () => ((await api.get(`/v1/customers/${customer}/payment_methods`)).json.data[0]?.id as string | undefined) ?? null);
  const created = await api.post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 2500, currency: 'EUR', payment_method: method, customer, off_session: true, recovery: { window_days: 14 } }, uniqueKey());
  expect(created.status, created.text).toBe(202);
  expect(created.json.status).toBe('recovering');
  return created.json.id;
}

const recordsOf = async (key: string) => (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM idempotency_records WHERE idempotency_key = ${key}`)[0]!.n;
const auditOfAction = async (path: string) => (await stack.sql<{ state: string; idempotency_key: string; action: string; outcome: { message: string } }[]>`SELECT * FROM operator_audit WHERE id = ${path.split('/').at(-1)!}`)[0]!;

/** Proposes with `propose` (a path and its form), then confirms three times at once and once more: the answers and the action. */
async function proposeAndConfirmFourTimes(client: ConsoleClient, path: string, form: Record<string, string> = {}) {
  const proposed = await client.post(path, { ...form, _csrf: await client.csrf() });
  expect(proposed.status, proposed.html).toBe(303);
  const actionPath = proposed.location!;
  const confirmation = await client.get(actionPath);
  expect(confirmation.status).toBe(200);
  const confirm = () => client.post(`${actionPath}/confirm`, { _csrf: hiddenField(confirmation.html, '_csrf') });
  const answers = [...(await Promise.all([confirm(), confirm(), confirm()])), await confirm()];
  expect(answers.map((a) => a.status)).toEqual([303, 303, 303, 303]);
  return { actionPath, confirmation: confirmation.html, result: (await client.get(actionPath)).html, action: await auditOfAction(actionPath) };
}

describe('the PSPs page', () => {
  it("shows a tenant's operator the figures of its own tenant's attempts only, per bucket, as plots without inline style; a bad bucket is a 400", async () => {
    const [mine, theirs] = await Promise.all([stack.createTenant('console-psps'), stack.createTenant('console-psps-other')]);
    await Promise.all([pay(mine), pay(mine), pay(theirs), pay(theirs), pay(theirs)]);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer', tenantId: mine.id }));
    for (const bucket of ['5m', '1h', '1d']) {
      const page = await client.get(`/console/psps?bucket=${bucket}`);
      expect(page.status).toBe(200);
      const span = page.html.slice(page.html.indexOf('Over the whole span'), page.html.indexOf('Over time'));
      // One PSP (the sandbox): its 2 attempts, both approved, none failed, all of the traffic.
      expect([...span.matchAll(/<tr><td>([\w-]+)<\/td><td>(\d+)<\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><td>([^<]*)<\/td><\/tr>/g)].map((m) => m.slice(1))).toEqual([['sandbox', '2', '100%', '0%', '100%']]);
      expect(page.html.match(/<svg /g)).toHaveLength(5);
      expect(page.html).not.toMatch(/style=|<script/);
    }
    expect((await client.get('/console/psps?bucket=2m')).status).toBe(400);
  });

  it("narrows the figures to one routing segment, each attempt's own (network, currency, method type); a malformed segment is a 400", async () => {
    const tenant = await stack.createTenant('console-psps-segments');
    await Promise.all([pay(tenant), pay(tenant), pay(tenant, { payment_method: 'pm_card_mastercard' }), pay(tenant, { payment_method: 'pm_card_mastercard', currency: 'USD' })]);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer', tenantId: tenant.id }));
    const wholeSpan = async (query: string) => {
      const page = await client.get(`/console/psps?bucket=1h${query}`);
      expect(page.status, page.html.slice(0, 300)).toBe(200);
      const span = page.html.slice(page.html.indexOf('Over the whole span'), page.html.indexOf('Over time'));
      return { html: page.html, rows: [...span.matchAll(/<tr><td>([\w-]+)<\/td><td>(\d+)<\/td>/g)].map((m) => m.slice(1)) };
    };
    const all = await wholeSpan('');
    expect(all.rows).toEqual([['sandbox', '4']]);
    // The segments offered are those of the tenant's attempts in the span.
    for (const segment of ['visa:EUR:card', 'mastercard:EUR:card', 'mastercard:USD:card']) expect(all.html).toContain(`segment=${encodeURIComponent(segment)}`);
    expect((await wholeSpan('&segment=visa:EUR:card')).rows).toEqual([['sandbox', '2']]);
    expect((await wholeSpan('&segment=mastercard:EUR:card')).rows).toEqual([['sandbox', '1']]);
    expect((await wholeSpan('&segment=mastercard:USD:card')).rows).toEqual([['sandbox', '1']]);
    expect((await wholeSpan('&segment=visa:GBP:card')).rows).toEqual([]);
    for (const bad of ['visa', '<b>x</b>:EUR:card', 'visa:eur:card', `${'a'.repeat(40)}:EUR:card`]) expect((await client.get(`/console/psps?segment=${encodeURIComponent(bad)}`)).status).toBe(400);
  });
});

describe('disputes, recovery, reconciliation, endpoints and the audit, per tenant', () => {
  it("shows a tenant's operator its own disputes by deadline with their evidence, and answers 404 for another tenant's", async () => {
    const [mine, theirs] = await Promise.all([openDispute(tenant), openDispute(other)]);
    const evidence = await apiClient(stack.apiUrl, tenant.apiKey).post(`/v1/disputes/${mine.id}/evidence`, { evidence: { uncategorized_text: markup } }, uniqueKey());
    expect(evidence.status, evidence.text).toBe(200);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: tenant.id }));
    const list = await client.get('/console/disputes');
    expect(list.status).toBe(200);
    expect(list.html).toContain(mine.id);
    expect(list.html).not.toContain(theirs.id);
    const page = await client.get(`/console/disputes/${mine.id}`);
    expect(page.status).toBe(200);
    expect(page.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.html).not.toContain('<script>');
    expect(page.html).not.toContain('<img src=x');
    expect((await client.get(`/console/disputes/${theirs.id}`)).status).toBe(404);
    expect((await client.post(`/console/disputes/${theirs.id}/accept`, { _csrf: await client.csrf() })).status).toBe(404);
    expect(await auditCount(theirs.id)).toBe(0);
  });

  it("lists a tenant's recovering payments with their next attempt to its operator only", async () => {
    const [mine, theirs] = await Promise.all([recoveringPayment(tenant), recoveringPayment(other)]);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer', tenantId: tenant.id }));
    const page = await client.get('/console/recovery');
    expect(page.status).toBe(200);
    expect(page.html).toContain(mine);
    expect(page.html).not.toContain(theirs);
    const [row] = await stack.sql<{ next: string }[]>`SELECT recovery->>'next_attempt_at' AS next FROM payments WHERE id = ${mine}`;
    expect(page.html).toContain(row!.next.replace('T', ' ').slice(0, 19));
    for (const period of ['day', 'week', 'month']) expect((await client.get(`/console/recovery?period=${period}`)).status).toBe(200);
    expect((await client.get('/console/recovery?period=year')).status).toBe(400);
    const payment = await client.get(`/console/payments/${mine}`);
    expect(payment.html).toContain('Next attempt');
    expect(payment.html).toContain(row!.next.replace('T', ' ').slice(0, 19));
  });

  it("shows a tenant's operator the discrepancies about its own payments only, and no run (runs cover every tenant); figures escaped", async () => {
    const [mine, theirs] = await Promise.all([pay(tenant), pay(other)]);
    // A run's findings as reconciliation records them (db/reconciliation.ts finishRun), written here for two payments of two tenants.
    const runId = `rcn_${uniqueKey('run').replace(/[^a-z0-9]/gi, '')}`;
    const from = new Date(Date.now() - 3600_000);
    const to = new Date();
    await stack.sql`INSERT INTO reconciliation_runs (id, run_key, workflow_id, provider, window_from, window_to, status, finished_at, discrepancy_count)
      VALUES (${runId}, ${runId}, ${runId}, 'sandbox', ${from}, ${to}, 'discrepancies', now(), 2)`;
    for (const payment of [mine, theirs]) {
      const id = `dsc_${uniqueKey('d').replace(/[^a-z0-9]/gi, '')}`;
      await stack.sql`INSERT INTO reconciliation_discrepancies (id, provider, window_from, window_to, kind, subject, payment_id, provider_reference, first_run_id)
        VALUES (${id}, 'sandbox', ${from}, ${to}, 'amount_mismatch', ${payment.id}, ${payment.id}, ${markup}, ${runId})`;
      await stack.sql`INSERT INTO reconciliation_findings (run_id, discrepancy_id, ours, provider_figures) VALUES (${runId}, ${id}, ${stack.sql.json({ amount_minor: 5000 })}, ${stack.sql.json({ amount_minor: 4000, note: markup })})`;
    }
    const tenantOperator = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer', tenantId: tenant.id }));
    const page = await tenantOperator.get('/console/reconciliation');
    expect(page.status).toBe(200);
    expect(page.html).toContain(mine.id);
    expect(page.html).not.toContain(theirs.id);
    expect(page.html).not.toContain('Latest runs');
    expect(page.html).not.toContain('<script>');
    const everyTenant = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    const all = await everyTenant.get('/console/reconciliation');
    expect(all.html).toContain(mine.id);
    expect(all.html).toContain(theirs.id);
    expect(all.html).toContain(runId);
    expect(all.html).not.toContain('<script>');
    expect(all.html).toContain('&lt;script&gt;');
  });

  it("lists a tenant's failing endpoint and its events to its operator only; another tenant's event is 404", async () => {
    const [mine, theirs] = await Promise.all([tenantWithDeadEndpoint('console-endpoint'), tenantWithDeadEndpoint('console-endpoint-other')]);
    const [a, b] = await Promise.all([failedEvent(mine), failedEvent(theirs)]);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: mine.id }));
    const page = await client.get('/console/endpoints');
    expect(page.status).toBe(200);
    expect(page.html).toContain(a.eventId);
    expect(page.html).toContain('http://127.0.0.1:9/hooks');
    expect(page.html).not.toContain(b.eventId);
    expect(page.html).not.toContain(theirs.id);
    expect((await client.post(`/console/events/${b.eventId}/resend`, { _csrf: await client.csrf() })).status).toBe(404);
    expect(await auditCount(b.eventId)).toBe(0);
  });

  it("shows each operator action on the audit page (who, what, on which object, which key) to its tenant's operators only", async () => {
    const payment = await pay(tenant);
    const operator = await createOperator(stack.apiUrl, { role: 'operator', tenantId: tenant.id });
    const client = await signedInClient(stack.apiUrl, operator);
    const proposed = await client.post(`/console/payments/${payment.id}/refunds`, { amount: '1.00', reason: markup, _csrf: await client.csrf() });
    const action = await auditOfAction(proposed.location!);
    const page = await client.get('/console/audit');
    expect(page.status).toBe(200);
    for (const shown of [operator.email, action.idempotency_key, payment.id, '1.00 EUR', 'refund']) expect(page.html).toContain(shown);
    expect(page.html).not.toContain('<script>');
    const otherOperator = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: other.id }));
    expect((await otherOperator.get('/console/audit')).html).not.toContain(action.idempotency_key);
    expect((await otherOperator.get(proposed.location!)).status).toBe(404);
    expect((await client.get('/console/audit?starting_after=nope')).status).toBe(400);
  });
});

describe('capture, cancel, resend and accept from the console', () => {
  it("refuses a viewer's proposal and confirmation of each, even with a valid CSRF token (403, nothing recorded or changed)", async () => {
    const endpointTenant = await tenantWithDeadEndpoint('console-viewer-resend');
    const [manual, event, dispute] = await Promise.all([pay(tenant, { capture_method: 'manual' }), failedEvent(endpointTenant), openDispute(tenant)]);
    const viewer = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    const csrf = await viewer.csrf();
    const page = await viewer.get(`/console/payments/${manual.id}`);
    expect(page.html).not.toMatch(/\/capture"|\/cancel"|\/resend/);
    expect((await viewer.get(`/console/disputes/${dispute.id}`)).html).not.toContain('/accept"');
    for (const path of [`/console/payments/${manual.id}/capture`, `/console/payments/${manual.id}/cancel`, `/console/events/${event.eventId}/resend`, `/console/disputes/${dispute.id}/accept`]) {
      expect((await viewer.post(path, { _csrf: csrf })).status, path).toBe(403);
    }
    // An operator's proposal, which the viewer then tries to confirm.
    const operator = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator' }));
    const proposed = await operator.post(`/console/payments/${manual.id}/capture`, { _csrf: await operator.csrf() });
    expect((await viewer.post(`${proposed.location!}/confirm`, { _csrf: csrf })).status).toBe(403);
    expect((await auditOfAction(proposed.location!)).state).toBe('proposed');
    expect(await auditCount(event.eventId)).toBe(0);
    expect(await auditCount(dispute.id)).toBe(0);
    expect(await auditCount(manual.id)).toBe(1);
    const [state] = await stack.sql<{ status: string; resend_requests: number; dispute: string }[]>`
      SELECT p.status, e.resend_requests, d.status AS dispute FROM payments p, outbox_events e, disputes d WHERE p.id = ${manual.id} AND e.id = ${event.eventId} AND d.id = ${dispute.id}`;
    expect(state).toEqual({ status: 'requires_capture', resend_requests: 0, dispute: 'needs_response' });
  });

  it('captures once however often the capture is confirmed, through the API operation under the minted key; audited', async () => {
    const payment = await pay(tenant, { capture_method: 'manual' });
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator' }));
    const { confirmation, result, action } = await proposeAndConfirmFourTimes(client, `/console/payments/${payment.id}/capture`, { amount: '30.00' });
    expect(confirmation).toContain('Capture 30.00 EUR');
    expect(action).toMatchObject({ action: 'capture', state: 'done' });
    expect(result).toContain('Captured');
    expect(await recordsOf(action.idempotency_key)).toBe(1);
    const api = await apiClient(stack.apiUrl, tenant.apiKey).get(`/v1/payments/${payment.id}`);
    expect(api.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 3000 });
  });

  it('cancels once however often the cancel is confirmed; a payment that takes no cancel is refused at once (409), nothing recorded', async () => {
    const payment = await pay(tenant, { capture_method: 'manual' });
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator' }));
    const { confirmation, action } = await proposeAndConfirmFourTimes(client, `/console/payments/${payment.id}/cancel`);
    expect(confirmation).toContain('Cancel 50.00 EUR');
    expect(action).toMatchObject({ action: 'cancel', state: 'done' });
    expect(await recordsOf(action.idempotency_key)).toBe(1);
    expect((await apiClient(stack.apiUrl, tenant.apiKey).get(`/v1/payments/${payment.id}`)).json.status).toBe('canceled');
    expect((await client.post(`/console/payments/${payment.id}/cancel`, { _csrf: await client.csrf() })).status).toBe(409);
    expect(await auditCount(payment.id)).toBe(1);
  });

  it('resends an event once however often the resend is confirmed', async () => {
    const endpointTenant = await tenantWithDeadEndpoint('console-resend');
    const { paymentId, eventId } = await failedEvent(endpointTenant);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: endpointTenant.id }));
    const { confirmation, result, action } = await proposeAndConfirmFourTimes(client, `/console/events/${eventId}/resend?payment=${paymentId}`);
    expect(confirmation).toContain(`Resend ${eventId}`);
    expect(confirmation).toContain(`/console/payments/${paymentId}`);
    expect(action).toMatchObject({ action: 'event.resend', state: 'done' });
    expect(result).toContain('Resent');
    const [event] = await stack.sql<{ resend_requests: number }[]>`SELECT resend_requests FROM outbox_events WHERE id = ${eventId}`;
    expect(event!.resend_requests).toBe(1);
    expect(await recordsOf(action.idempotency_key)).toBe(1);
  });

  it('accepts a dispute once however often the accept is confirmed: the dispute is lost', async () => {
    const dispute = await openDispute(tenant);
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'operator', tenantId: tenant.id }));
    const { confirmation, action } = await proposeAndConfirmFourTimes(client, `/console/disputes/${dispute.id}/accept`);
    expect(confirmation).toContain('Accept the dispute: lose 50.00 EUR');
    expect(action).toMatchObject({ action: 'dispute.accept', state: 'done' });
    expect(await recordsOf(action.idempotency_key)).toBe(1);
    const [row] = await stack.sql<{ status: string }[]>`SELECT status FROM disputes WHERE id = ${dispute.id}`;
    expect(row!.status).toBe('lost');
    expect((await client.get(`/console/disputes/${dispute.id}`)).html).toContain(action.idempotency_key);
  });
});

describe("a payment's routing decision and waits", () => {
  it('shows the wait of an authorized payment with its deadline, and the route that sent it where it went', async () => {
    const payment = await pay(tenant, { capture_method: 'manual' });
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer' }));
    const page = await client.get(`/console/payments/${payment.id}`);
    const [attempt] = await stack.sql<{ finished_at: Date }[]>`SELECT finished_at FROM payment_attempts WHERE payment_id = ${payment.id} ORDER BY attempt DESC LIMIT 1`;
    const deadline = new Date(attempt!.finished_at.getTime() + stack.apiConfig.AUTHORIZATION_WINDOW_SECONDS * 1000).toISOString().replace('T', ' ').slice(0, 19);
    expect(page.html).toContain(`<td>authorization</td><td>merchant</td>`);
    expect(page.html).toContain(deadline);
    expect(page.html).toContain('Routing decision');
    expect(page.html).toContain('No decision recorded');
  });

  it("shows a success-rate decision (strategy, candidates with estimate and probability, chosen, reason), and the tenant's own segments on the PSPs page", async () => {
    const routed = await stack.createTenant('console-routed');
    const patched = await adminRequest(stack.apiUrl, 'PATCH', `/admin/tenants/${routed.id}`, { routing: { strategy: 'success_rate', fallback: ['sandbox'], scope: 'tenant' } });
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    const payment = await pay(routed);
    const routing = (await apiClient(stack.apiUrl, routed.apiKey).get(`/v1/payments/${payment.id}`)).json.routing as { reason: string; candidates: { selection_probability: number }[] };
    const client = await signedInClient(stack.apiUrl, await createOperator(stack.apiUrl, { role: 'viewer', tenantId: routed.id }));
    const page = await client.get(`/console/payments/${payment.id}`);
    expect(page.html).toContain('<dt>Strategy</dt><dd>success_rate</dd>');
    expect(page.html).toContain(`<dd>${routing.reason.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}</dd>`);
    expect(page.html).toMatch(new RegExp(`<td>sandbox</td><td>[0-9.]+%</td><td>${(routing.candidates[0]!.selection_probability * 100).toFixed(1)}%</td>`));
    // Its routing keeps its own counts (scope tenant): the PSPs page shows its segments, the one payment approved at each level.
    const rowsOf = (html: string) => [...html.slice(html.indexOf('Per segment')).matchAll(/<tr><td>([^<]+)<\/td><td>sandbox<\/td><td>[^<]*<\/td><td>[^<]*<\/td><td>(\d+)<\/td><td>(\d+)<\/td><td>(\d+)<\/td><\/tr>/g)].map((m) => m.slice(1));
    const rows = await eventually(async () => {
      const found = rowsOf((await client.get('/console/psps')).html);
      return found.length > 0 ? found : null;
    }, 10_000, 100, "the tenant's segments");
    expect(rows.map((r) => r[0])).toContain('*:*:*');
    expect(rows.map((r) => r.slice(1))).toEqual(rows.map(() => ['1', '0', '0']));
  });
});
