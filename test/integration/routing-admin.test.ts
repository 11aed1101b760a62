import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordOutcome } from '../../db/routing';
import { adminCall, startStack, type Tenant, type TestStack } from '../helpers/stack';

/**
 * Success-rate routing as an operator sets and sees it: the tenant routing object's new fields
 * (PATCH /admin/tenants/{id}, 400 with the path when refused, nothing changed), GET
 * /admin/routing (?tenant=) and routing's figures on /metrics. Real PostgreSQL, the API over HTTP.
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack({ worker: false, providerNames: ['sandbox-a', 'sandbox-b'] });
  tenant = await stack.createTenant('routing-admin');
}, 60_000);
afterAll(async () => stack?.stop());

const call = (method: string, path: string, body?: unknown, token = stack.adminToken) => adminCall(stack, method, path, body, token);

/**
 * The pooled counts are the whole database's (other files share it under `npm test`): this file's
 * outcomes go to a currency of its own, so its segment's counts and shares are its own.
 */
const currency = `Z${String.fromCharCode(65 + Math.floor(Math.random() * 26))}${String.fromCharCode(65 + Math.floor(Math.random() * 26))}`;
const segment = { network: 'visa', currency, methodType: 'card' };
const finestKey = `visa:${currency}:card`;

describe('the tenant routing object', () => {
  const routing = {
    strategy: 'success_rate',
    fallback: ['sandbox-a', 'sandbox-b'],
    scope: 'tenant',
    objective: 'net',
    exploration: 0.1,
    fees: { 'sandbox-b': { EUR: { approval: { bps: 120, fixed_minor: 10 }, attempt: { bps: 0, fixed_minor: 2 } } } },
  };

  it('takes strategy, scope, objective, exploration and fees, and reads them back', async () => {
    const response = await call('PATCH', `/admin/tenants/${tenant.id}`, { routing });
    expect(response.status, response.text).toBe(200);
    expect(response.json.routing).toEqual(routing);
    expect((await call('GET', `/admin/tenants/${tenant.id}`)).json.routing).toEqual(routing);
  });

  it('refuses bad ones with 400 and the path, and changes nothing', async () => {
    const refused: [unknown, string, RegExp][] = [
      [{ ...routing, fees: { stripe: {} } }, 'routing.fees.stripe', /unknown provider "stripe"/],
      [{ ...routing, exploration: 2 }, 'routing.exploration', /at most 0\.5/],
      [{ ...routing, strategy: 'fastest' }, 'routing.strategy', /./],
      [{ ...routing, fees: { 'sandbox-a': { EUR: { approval: { bps: 100 } } } } }, 'routing.fees.sandbox-a.EUR.approval.fixed_minor', /./],
    ];
    for (const [body, path, reason] of refused) {
      const response = await call('PATCH', `/admin/tenants/${tenant.id}`, { routing: body });
      expect(response.status, response.text).toBe(400);
      expect(response.json.error.type).toBe('invalid_request');
      const issue = (response.json.error.issues as { path: string; message: string }[]).find((i) => i.path === path);
      expect(issue, response.text).toBeDefined();
      expect(issue!.message).toMatch(reason);
    }
    expect((await call('GET', `/admin/tenants/${tenant.id}`)).json.routing).toEqual(routing);
  });
});

describe('GET /admin/routing and /metrics', () => {
  beforeAll(async () => {
    for (let i = 0; i < 10; i++) {
      await recordOutcome(stack.sql, { provider: 'sandbox-a', segment, outcome: i < 9 ? 'approved' : 'declined', firstAttempt: true });
      await recordOutcome(stack.sql, { provider: 'sandbox-b', segment, outcome: i < 5 ? 'approved' : 'declined', firstAttempt: true, tenantScope: tenant.id });
    }
    await recordOutcome(stack.sql, { provider: 'sandbox-b', segment, outcome: 'error', firstAttempt: true, tenantScope: tenant.id });
  });

  it("shows the pool's estimates per segment level and each PSP's health", async () => {
    const response = await call('GET', '/admin/routing');
    expect(response.status, response.text).toBe(200);
    expect(response.json).toMatchObject({ object: 'routing_estimates', tenant: null, scope: 'pooled', strategy: null });
    const levels = (response.json.segments as { segment: string }[]).map((s) => s.segment);
    expect(levels).toEqual(expect.arrayContaining([finestKey, 'visa:*:card', '*:*:card', '*:*:*']));
    const finest = response.json.segments.find((s: { segment: string }) => s.segment === finestKey);
    const a = finest.providers.find((p: { provider: string }) => p.provider === 'sandbox-a');
    const b = finest.providers.find((p: { provider: string }) => p.provider === 'sandbox-b');
    expect(a).toMatchObject({ approvals: 9, declines: 1, errors: 0 });
    expect(b).toMatchObject({ approvals: 5, declines: 5, errors: 1 });
    expect(a.approval_estimate).toBeGreaterThan(b.approval_estimate);
    expect(a.share + b.share).toBeCloseTo(1, 9);
    expect(response.json.health).toEqual(
      expect.arrayContaining([
        { provider: 'sandbox-a', state: 'closed', reason: null, eliminated_until: null },
        { provider: 'sandbox-b', state: 'closed', reason: null, eliminated_until: null },
      ]),
    );
  });

  it("with ?tenant=, the counts that tenant's payments are decided from (its own, with scope tenant)", async () => {
    const response = await call('GET', `/admin/routing?tenant=${tenant.id}`);
    expect(response.status, response.text).toBe(200);
    expect(response.json).toMatchObject({ tenant: tenant.id, scope: 'tenant', strategy: 'success_rate' });
    const finest = response.json.segments.find((s: { segment: string }) => s.segment === finestKey);
    expect(finest.providers.map((p: { provider: string }) => p.provider)).toEqual(['sandbox-b']);
    expect((await call('GET', '/admin/routing?tenant=ten_01jd6w8b3m4x0c2q7yk5h9t1ve')).json).toMatchObject({ error: { type: 'not_found' } });
    expect((await call('GET', '/admin/routing', undefined, tenant.apiKey)).status).toBe(401);
  });

  it('puts approvals, declines, errors, share and estimate per PSP and segment level on /metrics, with no tenant', async () => {
    const response = await call('GET', '/metrics');
    expect(response.status).toBe(200);
    expect(response.text).toContain(`routing_outcomes_total{provider="sandbox-a",segment="${finestKey}",outcome="approved"} 9`);
    expect(response.text).toContain('routing_outcomes_total{provider="sandbox-b",segment="*:*:*",outcome="error"} 1');
    expect(response.text).toMatch(new RegExp(`routing_traffic_share\\{provider="sandbox-a",segment="${finestKey}"\\} 0\\.\\d+`));
    expect(response.text).toMatch(/routing_approval_estimate\{provider="sandbox-b",segment="visa:\*:card"\} 0\.\d+/);
    expect(response.text).toContain('routing_provider_health{provider="sandbox-a"} 0');
    expect(response.text).not.toContain(tenant.id);
  });
});
