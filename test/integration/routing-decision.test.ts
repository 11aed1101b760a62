import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { createActivities } from '../../activities';
import { createRouteDecisionSteps, type RouteDecisionSteps } from '../../activities/routing-decision';
import { providerRegistry } from '../../provider/registry';
import type { PaymentProvider } from '../../provider/types';
import type { DecidedRoute, DecideRouteInput, RouteSegment } from '../../shared/routing';
import { fileDatabaseUrl, insertTenant } from '../helpers/database';

/**
 * The routing activities (activities/routing-decision.ts) against real PostgreSQL: decideRoute
 * reads the shared counts and health and answers the decision the history records;
 * recordRouteOutcome feeds them; takeProviderCall holds a PSP's calls per second.
 */

let sql: Sql;
const visaEur: RouteSegment = { network: 'visa', currency: 'EUR', methodType: 'card' };

beforeAll(async () => {
  sql = createSql(await fileDatabaseUrl(), { max: 10 });
});
afterAll(async () => sql?.end());

/** PSP names of a test's own, so tests never read each other's counts. */
function psps(first: string, second: string): [string, string] {
  const tag = randomBytes(3).toString('hex');
  return [`${first}-${tag}`, `${second}-${tag}`];
}

async function tenantWith(routing: object | null): Promise<string> {
  const id = await insertTenant(sql, 'routing');
  if (routing) await sql`UPDATE tenants SET routing = ${sql.json(routing as Parameters<typeof sql.json>[0])} WHERE id = ${id}`;
  return id;
}

const payment = (tenantId: string, overrides: Partial<DecideRouteInput> = {}): DecideRouteInput => ({
  paymentId: `pay_${randomBytes(8).toString('hex')}`,
  tenantId,
  amountMinor: 10_000,
  currency: 'EUR',
  paymentMethod: 'pm_card_visa',
  segment: visaEur,
  ...overrides,
});

function expectWellFormed(route: DecidedRoute) {
  const sum = route.decision.candidates.reduce((total, c) => total + c.selection_probability, 0);
  expect(sum).toBeCloseTo(1, 9);
  expect(route.providers[0]).toBe(route.decision.chosen);
  expect(new Set(route.providers)).toEqual(new Set(route.decision.candidates.map((c) => c.provider)));
}

/** `n` first-attempt outcomes at a PSP, approved at `rate` (evenly spread). */
async function outcomes(steps: RouteDecisionSteps, provider: string, n: number, rate: number, tenantScope: string | null = null) {
  for (let i = 0; i < n; i++) {
    const approved = Math.floor((i + 1) * rate) > Math.floor(i * rate);
    await steps.recordRouteOutcome({ provider, segment: visaEur, outcome: approved ? 'approved' : 'declined', firstAttempt: true, tenantScope });
  }
}

describe('decideRoute', () => {
  it('is static by default: the configured order, the first chosen with probability 1', async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b] });
    const route = await steps.decideRoute(payment(await tenantWith(null)));
    expectWellFormed(route);
    expect(route.decision).toMatchObject({ strategy: 'static', chosen: a, explored: false });
    expect(route.decision.reason).toMatch(/no routing: the configured order/);
    expect(route.providers).toEqual([a, b]);
    expect(route.tenantScope).toBeNull();
  });

  it('with success_rate, sends the payment where the shared counts say the issuers approve, the same way for the same payment', async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b] });
    await outcomes(steps, a, 80, 0.5);
    await outcomes(steps, b, 80, 0.95);
    const tenant = await tenantWith({ strategy: 'success_rate', exploration: 0 });
    const input = payment(tenant);
    const route = await steps.decideRoute(input);
    expectWellFormed(route);
    expect(route.decision).toMatchObject({ strategy: 'success_rate', chosen: b, explored: false });
    expect(route.providers).toEqual([b, a]);
    const estimateOf = (p: string) => route.decision.candidates.find((c) => c.provider === p)!.approval_estimate!;
    expect(estimateOf(b)).toBeGreaterThan(0.85);
    expect(estimateOf(a)).toBeLessThan(0.6);
    expect(await steps.decideRoute(input)).toEqual(route);
  });

  it('moves a PSP whose errors rose out of first place for every strategy, then lets one payment probe it', async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b] });
    await outcomes(steps, a, 40, 0.95);
    await outcomes(steps, b, 40, 0.6);
    for (let i = 0; i < 7; i++) await steps.recordRouteOutcome({ provider: a, segment: visaEur, outcome: 'error', firstAttempt: true, tenantScope: null });
    const staticRoute = await steps.decideRoute(payment(await tenantWith(null)));
    expect(staticRoute.providers).toEqual([b, a]);
    expect(staticRoute.decision.reason).toMatch(new RegExp(`${a} moved last: its errors`));
    const learnt = await steps.decideRoute(payment(await tenantWith({ strategy: 'success_rate' })));
    expectWellFormed(learnt);
    expect(learnt.decision.chosen).toBe(b);
    expect(learnt.decision.candidates.find((c) => c.provider === a)!.selection_probability).toBe(0);
    // The elimination's time passes (moved back rather than waited for): the next payment probes a, the one after does not.
    await sql`UPDATE routing_health SET eliminated_until = now() - interval '1 second' WHERE provider = ${a}`;
    const probing = await steps.decideRoute(payment(await tenantWith({ strategy: 'success_rate' })));
    expect(probing.decision.chosen).toBe(a);
    expect(probing.decision.reason).toMatch(/probing/);
    const meanwhile = await steps.decideRoute(payment(await tenantWith({ strategy: 'success_rate' })));
    expect(meanwhile.decision.chosen).toBe(b);
  });

  it('in a static order, a half-open PSP takes its probe only where the payment tries it first', async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b] });
    for (const provider of [a, b]) for (let i = 0; i < 5; i++) await steps.recordRouteOutcome({ provider, segment: visaEur, outcome: 'error', firstAttempt: true, tenantScope: null });
    await sql`UPDATE routing_health SET eliminated_until = now() - interval '1 second' WHERE provider IN (${a}, ${b})`;
    // b behind a: a takes the probe and goes first; b, half-open without its probe, goes last.
    const route = await steps.decideRoute(payment(await tenantWith({ fallback: [a, b] })));
    expect(route.providers).toEqual([a, b]);
    const probing = async () => (await sql<{ provider: string }[]>`SELECT provider FROM routing_health WHERE provider IN (${a}, ${b}) AND probe_until > now() ORDER BY provider`).map((r) => r.provider);
    expect(await probing()).toEqual([a]);
    // With a's probe held, the next payment of the order [b, a] probes b.
    const next = await steps.decideRoute(payment(await tenantWith({ fallback: [b, a] })));
    expect(next.providers).toEqual([b, a]);
    expect(await probing()).toEqual([a, b]);
  });

  it("with scope tenant, learns from the tenant's own outcomes", async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b] });
    const tenant = await tenantWith({ strategy: 'success_rate', scope: 'tenant', exploration: 0 });
    const first = await steps.decideRoute(payment(tenant));
    expect(first.tenantScope).toBe(tenant);
    // This tenant's own payments say b (they count in the pool too); the pool, with the others' since, says a.
    await outcomes(steps, a, 60, 0.3, tenant);
    await outcomes(steps, b, 60, 0.95, tenant);
    await outcomes(steps, a, 200, 0.95);
    await outcomes(steps, b, 200, 0.4);
    expect((await steps.decideRoute(payment(tenant))).decision.chosen).toBe(b);
    expect((await steps.decideRoute(payment(await tenantWith({ strategy: 'success_rate', exploration: 0 })))).decision.chosen).toBe(a);
  });

  it('with the net objective, prefers the PSP that keeps more of the amount at equal approvals', async () => {
    const [a, b] = psps('a', 'b');
    const steps = createRouteDecisionSteps({ sql, providerNames: [a, b], fees: { [a]: { '*': { approval: { bps: 1500, fixed_minor: 0 } } } } });
    await outcomes(steps, a, 100, 0.9);
    await outcomes(steps, b, 100, 0.9);
    const net = await steps.decideRoute(payment(await tenantWith({ strategy: 'success_rate', objective: 'net', exploration: 0 })));
    expectWellFormed(net);
    expect(net.decision.chosen).toBe(b);
    // The tenant's own fees replace the deployment's: now b costs more.
    const own = await steps.decideRoute(
      payment(await tenantWith({ strategy: 'success_rate', objective: 'net', exploration: 0, fees: { [a]: { '*': {} }, [b]: { EUR: { approval: { bps: 2000, fixed_minor: 0 } } } } })),
    );
    expect(own.decision.chosen).toBe(a);
  });
});

describe('takeProviderCall', () => {
  it("holds a limited PSP to its budget and leaves one without a limit alone", async () => {
    const [limited, free] = psps('limited', 'free');
    const steps = createRouteDecisionSteps({ sql, providerNames: [limited, free], callLimits: { [limited]: { perSecond: 1, burst: 2 } } });
    expect(await steps.takeProviderCall({ provider: limited })).toEqual({ allowed: true });
    expect(await steps.takeProviderCall({ provider: limited })).toEqual({ allowed: true });
    const third = await steps.takeProviderCall({ provider: limited });
    expect(third.allowed).toBe(false);
    // At 1 call per second with the burst spent, the next token is about a second away.
    const waitMs = third.allowed ? -1 : third.waitMs;
    expect(waitMs).toBeGreaterThan(500);
    expect(waitMs).toBeLessThanOrEqual(1000);
    for (let i = 0; i < 5; i++) expect(await steps.takeProviderCall({ provider: free })).toEqual({ allowed: true });
    const [{ n } = { n: -1 }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM provider_call_tokens WHERE provider = ${free}`;
    expect(n).toBe(0);
  });
});

describe('the worker registers them', () => {
  it('among its activities', () => {
    const activities = createActivities({ sql, providers: providerRegistry({ 'sandbox-a': {} as PaymentProvider }) });
    expect(typeof activities.decideRoute).toBe('function');
    expect(typeof activities.recordRouteOutcome).toBe('function');
    expect(typeof activities.takeProviderCall).toBe('function');
  });
});
