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
  stack = await startStack({ api: { CONSOLE_TEMPORAL_UI_URL: 'http://temporal-ui.test', CONSOLE_TRACE_URL: 'http://traces.test/trace' } });
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
    const [audit] = await stack.sql<{ state: string; idempotency_key: string; actor: string; outcome: { refund_id: string } }[]>`SELECT * FROM operator_audit WHERE object_id = ${payment.id}`;
    expect(audit).toMatchObject({ state: 'done', actor: operator.id });
    expect(refunds[0]!.refund_key).toBe(audit!.idempotency_key);
    expect(audit!.outcome.refund_id).toBe(refunds[0]!.id);
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
