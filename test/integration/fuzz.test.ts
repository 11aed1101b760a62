import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ADMIN_TOKEN, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * Property-based fuzz of every route: arbitrary JSON, control and unicode characters (NUL,
 * lone surrogates, bidi overrides), huge and fractional numbers, odd path parameters and
 * query strings; every admin route as the OpenAPI document lists it, with and without
 * bodies, and every body-taking route with empty, missing and wrong content types. Whatever arrives: never a 5xx, always the error shape for a 4xx; and after
 * the run no workflow is left running without a reason and no idempotency record is stuck.
 * The run count is modest so the file stays well under a minute.
 */

let stack: TestStack;
let tenant: Tenant;
let adminTenant: Tenant;
let paymentId: string;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('fuzz');
  adminTenant = await stack.createTenant('fuzz-admin');
  const paid = await call('POST', '/v1/payments', { body: JSON.stringify(validPayment()), key: uniqueKey(), token: tenant.apiKey });
  paymentId = JSON.parse(paid.text).id;
});
afterAll(async () => stack?.stop());

function validPayment() {
  return { order_id: uniqueKey('ord'), amount_minor: 1000, currency: 'EUR', payment_method: 'pm_card_visa' };
}

/** contentType: undefined sends JSON's, null sends none at all (a body of raw bytes, which fetch does not label). */
async function call(method: string, path: string, options: { body?: string; key?: string; token: string; contentType?: string | null }) {
  const headers: Record<string, string> = { authorization: `Bearer ${options.token}` };
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  if (options.body !== undefined && options.contentType !== null) headers['content-type'] = options.contentType ?? 'application/json';
  const body = options.body === undefined ? undefined : options.contentType === null ? new TextEncoder().encode(options.body) : options.body;
  const response = await fetch(`${stack.apiUrl}${path}`, { method, headers, body });
  return { status: response.status, text: await response.text(), contentType: response.headers.get('content-type') ?? '' };
}

/** Never a 5xx; a 4xx always in the error shape, as JSON. */
function expectWellFormed(answer: { status: number; text: string; contentType: string }, what: string) {
  expect(answer.status, `${what} → ${answer.text.slice(0, 300)}`).toBeLessThan(500);
  if (answer.status >= 400) {
    expect(JSON.parse(answer.text), what).toMatchObject({ error: { type: expect.any(String), message: expect.any(String) } });
    expect(answer.contentType, what).toMatch(/application\/json/);
  }
}

// Strings where the trouble is: control characters, NUL, lone surrogates, bidi overrides, emoji, very long ones.
const nasty = fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\u202e', '\ufeff', '😀', '\u0007', '%00', '%', '..', '../admin', ' ', '', 'null', '\\', '"', 'pay_' + 'a'.repeat(26));
const anyString = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), nasty, fc.string({ maxLength: 3000 }));
const oddNumber = fc.oneof(fc.constantFrom(0, -1, 0.5, 1e308, -1e308, 2 ** 53 + 1, 1e-300, Number.MAX_SAFE_INTEGER, 4999.0000001), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer());
const anyValue: fc.Arbitrary<unknown> = fc.oneof(anyString, oddNumber, fc.boolean(), fc.constant(null), fc.jsonValue({ maxDepth: 3 }), fc.dictionary(anyString, anyString, { maxKeys: 5 }));
// A valid request with one field replaced or added: closest to what passes validation.
const mutatedPayment = fc.record({ field: fc.oneof(fc.constantFrom('order_id', 'amount_minor', 'currency', 'payment_method', 'capture_method', 'description', 'metadata'), anyString), value: anyValue }).map(({ field, value }) => ({ ...validPayment(), [field]: value }));
// Valid requests with unusual but storable text: these reach the workflows.
const unusualPayment = fc
  .record({ note: fc.string({ unit: 'grapheme', maxLength: 30 }), description: fc.string({ unit: 'grapheme', minLength: 0, maxLength: 50 }), capture_method: fc.constantFrom('automatic', 'manual') })
  .map(({ note, description, capture_method }) => ({ ...validPayment(), metadata: { note }, description, capture_method }));
const anyBody = fc.oneof(
  mutatedPayment.map((b) => JSON.stringify(b)),
  unusualPayment.map((b) => JSON.stringify(b)),
  anyValue.map((v) => JSON.stringify(v) ?? 'null'),
  fc.string({ unit: 'binary', maxLength: 200 }), // not even JSON
);
/** A URL cannot carry a lone surrogate (UTF-8 has no encoding for one): its bytes come from rawPathParam instead. */
const encode = (s: string) => encodeURIComponent(s.replace(/\p{Cs}/gu, '\ufffd'));
const pathParam = fc.oneof(anyString, fc.constant('PAYMENT')).map((s) => (s === 'PAYMENT' ? paymentId : encode(s)));
const rawPathParam = fc.constantFrom('%', '%zz', '%00', '%C0%AF', '..%2f..', '%ED%A0%80', 'a%2Fb');
const queryString = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom('limit', 'starting_after', 'order_id', 'type', 'ending_before'), anyString), fc.oneof(anyString, oddNumber.map(String))), { maxLength: 4 })
  .map((pairs) => pairs.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&'));
// Idempotency keys: mostly valid, sometimes missing or odd.
const idempotencyKey = fc.oneof(fc.constant(undefined), fc.constant('short'), fc.uuid(), fc.string({ minLength: 8, maxLength: 40 }).filter((s) => /^[\x21-\x7e]+$/.test(s)));

/** Admin bodies never carry a URL with a host: the fuzz must not make the API look names up in DNS. */
const noUrls = (text: string) => !/[a-z][a-z0-9+.-]*:\/\//i.test(text);

type Request = { method: string; path: string; body?: string; key?: string; admin?: boolean };
const routes: fc.Arbitrary<Request>[] = [
  fc.record({ id: fc.oneof(pathParam, rawPathParam), q: queryString }).map(({ id, q }) => ({ method: 'GET', path: `/v1/payments/${id}?${q}` })),
  queryString.map((q) => ({ method: 'GET', path: `/v1/payments?${q}` })),
  queryString.map((q) => ({ method: 'GET', path: `/v1/events?${q}` })),
  queryString.map((q) => ({ method: 'GET', path: `/v1/balance?${q}` })),
  fc.record({ id: fc.oneof(pathParam, rawPathParam), q: queryString }).map(({ id, q }) => ({ method: 'GET', path: `/v1/payments/${id}/refunds?${q}` })),
  fc.oneof(pathParam, rawPathParam).map((id) => ({ method: 'GET', path: `/v1/refunds/${id}` })),
  fc.record({ body: anyBody, key: idempotencyKey }).map(({ body, key }) => ({ method: 'POST', path: '/v1/payments', body, key })),
  fc.record({ body: unusualPayment, key: fc.uuid() }).map(({ body, key }) => ({ method: 'POST', path: '/v1/payments', body: JSON.stringify(body), key })),
  fc.record({ id: pathParam, body: anyBody, key: idempotencyKey, action: fc.constantFrom('capture', 'cancel', 'refunds') }).map(({ id, body, key, action }) => ({ method: 'POST', path: `/v1/payments/${id}/${action}`, body, key })),
  fc.record({ id: fc.oneof(pathParam, fc.constant('ADMIN')), body: anyBody.filter(noUrls) }).map(({ id, body }) => ({ method: 'PATCH', path: `/admin/tenants/${id === 'ADMIN' ? adminTenant.id : id}`, body, admin: true })),
  anyBody.filter(noUrls).map((body) => ({ method: 'POST', path: '/admin/tenants', body, admin: true })),
  fc.record({ id: fc.oneof(pathParam, fc.constant('ADMIN')), body: anyBody, what: fc.constantFrom('api_keys', 'webhook_secret/rotate') }).map(({ id, body, what }) => ({ method: 'POST', path: `/admin/tenants/${id === 'ADMIN' ? adminTenant.id : id}/${what}`, body, admin: true })),
  fc.record({ id: fc.oneof(pathParam, fc.constant('ADMIN')), key: fc.oneof(pathParam, rawPathParam) }).map(({ id, key }) => ({ method: 'DELETE', path: `/admin/tenants/${id === 'ADMIN' ? adminTenant.id : id}/api_keys/${key}`, admin: true })),
  fc.record({ id: fc.oneof(pathParam, fc.constant('ADMIN')) }).map(({ id }) => ({ method: 'GET', path: `/admin/tenants/${id === 'ADMIN' ? adminTenant.id : id}/api_keys`, admin: true })),
];

describe('fuzz of every route', () => {
  it('never a 5xx, always the error shape', async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.oneof(...routes), async (request) => {
        const answer = await call(request.method, request.path, { body: request.body, key: request.key, token: request.admin ? ADMIN_TOKEN : tenant.apiKey });
        seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1);
        expectWellFormed(answer, `${request.method} ${request.path} ${request.body?.slice(0, 200)}`);
      }),
      { numRuns: 400, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    console.log(`fuzz statuses: ${[...seen].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')}`);
    // Some writes passed validation, so the fuzz reached the workflows too.
    expect([...seen.keys()].some((s) => s === 201)).toBe(true);
  });

  it('every admin route (from the OpenAPI document), with and without bodies, with empty, missing and wrong content types: never a 5xx, always the error shape', async () => {
    const doc = (await (await fetch(`${stack.apiUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/admin/'))
      .flatMap(([path, methods]) => Object.keys(methods).map((method) => ({ method: method.toUpperCase(), path })));
    expect(operations.length).toBeGreaterThanOrEqual(6);
    // A path parameter: the fuzz tenant (so writes reach the handler), an odd string, or a raw escape.
    const param = (name: string) => (name === 'id' ? fc.oneof(fc.constant(adminTenant.id), fc.constant(adminTenant.id), pathParam, rawPathParam) : fc.oneof(pathParam, rawPathParam));
    const contentType = fc.oneof(
      fc.constant(undefined), // application/json
      fc.constantFrom(null, '', 'text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/jsonx', 'application/problem+json', '*/*', 'application/json, text/plain', '\tapplication/json'),
    );
    const body = fc.oneof(fc.constant(undefined), fc.constant(''), fc.constant('{}'), anyBody.filter(noUrls));
    const request = fc
      .record({ operation: fc.constantFrom(...operations), body, contentType })
      .chain(({ operation, body, contentType }) => {
        const names = [...operation.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
        return fc.tuple(...names.map(param)).map((values) => ({
          method: operation.method,
          template: operation.path,
          path: names.reduce((path, name, i) => path.replace(`{${name}}`, values[i]!), operation.path) + (operation.method === 'GET' ? '?limit=2' : ''),
          body: operation.method === 'GET' || operation.method === 'DELETE' ? undefined : body,
          contentType,
        }));
      });
    const covered = new Set<string>();
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        covered.add(`${r.method} ${r.template}`);
        const answer = await call(r.method, r.path, { body: r.body, token: ADMIN_TOKEN, contentType: r.contentType });
        expectWellFormed(answer, `${r.method} ${r.path} [${String(r.contentType)}] ${r.body?.slice(0, 200)}`);
      }),
      { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    expect([...covered].sort()).toEqual(operations.map((o) => `${o.method} ${o.path}`).sort());
  });

  it('every route that takes a body, with each content type and an empty, absent or JSON body: never a 5xx', async () => {
    const bodies = [undefined, '', '{}', '[]', 'null', '{"a":', JSON.stringify(validPayment())];
    const types = [undefined, null, '', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', 'application/jsonx'];
    const targets: { method: string; path: string; admin: boolean; key?: boolean }[] = [
      { method: 'POST', path: '/v1/payments', admin: false, key: true },
      { method: 'POST', path: `/v1/payments/${paymentId}/capture`, admin: false, key: true },
      { method: 'POST', path: `/v1/payments/${paymentId}/cancel`, admin: false, key: true },
      { method: 'POST', path: `/v1/payments/${paymentId}/refunds`, admin: false, key: true },
      { method: 'POST', path: '/v1/webhook_endpoint/recover', admin: false, key: true },
      { method: 'POST', path: '/admin/tenants', admin: true },
      { method: 'PATCH', path: `/admin/tenants/${adminTenant.id}`, admin: true },
      { method: 'POST', path: `/admin/tenants/${adminTenant.id}/api_keys`, admin: true },
      { method: 'POST', path: `/admin/tenants/${adminTenant.id}/webhook_secret/rotate`, admin: true },
    ];
    for (const target of targets) {
      for (const body of bodies) {
        for (const contentType of types) {
          const answer = await call(target.method, target.path, { body, contentType, token: target.admin ? ADMIN_TOKEN : tenant.apiKey, ...(target.key ? { key: uniqueKey() } : {}) });
          expectWellFormed(answer, `${target.method} ${target.path} [${String(contentType)}] ${String(body).slice(0, 60)}`);
        }
      }
    }
  });

  it('afterwards no workflow runs without a reason and no idempotency record is stuck', async () => {
    // A manual-capture payment waits for its capture: that is a reason. Anything else must end.
    await eventually(async () => {
      const running: string[] = [];
      for await (const run of stack.temporal.workflow.list({ query: `ExecutionStatus = "Running" AND TenantId = "${tenant.id}"` })) {
        const status = run.searchAttributes?.PaymentStatus?.[0];
        if (status !== 'requires_capture') running.push(`${run.workflowId}:${String(status)}`);
      }
      return running.length === 0;
    }, 30_000, 500);
    await eventually(async () => {
      const [stuck] = await stack.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM idempotency_records r
        WHERE r.tenant_id = ${tenant.id} AND r.state = 'running'
          -- a capture or cancel of a payment awaiting capture is answered by its run's update
          AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.id = r.resource_id AND p.status = 'requires_capture')`;
      return stuck!.n === 0;
    }, 30_000, 500);
  });
});
