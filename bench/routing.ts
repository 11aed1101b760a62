/**
 * The routing phase: what a routed payment costs against a single-provider payment, measured interleaved in the same run, and the
 * failover timeline: how long from sandbox-a going down until payments succeed at sandbox-b,
 * until the shared health has put A out of first place (provider_circuit_state open), and, once A is back, until payments go
 * back to A.
 */
import { HEALTH_DEFAULTS } from '../db/routing';
import { round, summarise, type HttpClient, type LatencySummary, type LoopResult } from './load';
import { Scenarios } from './scenarios';
import type { BenchStack } from './stack';

export type Tenant = { id: string; apiKey: string };
/** `unavailable`: A answers 503 to creates (lookups answer); `kill`: A's process SIGKILLed (connections refused), then restarted. */
export type FailoverMode = 'unavailable' | 'kill';

export const routedRouting = {
  fallback: ['sandbox-a', 'sandbox-b'],
  split: [
    { provider: 'sandbox-a', weight: 70 },
    { provider: 'sandbox-b', weight: 30 },
  ],
};
export const failoverRouting = { fallback: ['sandbox-a', 'sandbox-b'] };

export interface RoutingComparison {
  clients: number;
  /** The tenant without routing: the default PSP (sandbox-a) only. */
  single: LoopResult;
  /** The tenant with routedRouting: the split picks the first PSP. */
  routed: LoopResult;
}

/** Payments started in one part of the failover timeline. */
export interface FailoverWindow {
  payments: number;
  failed: number;
  latency: LatencySummary;
  /** Where they succeeded, by PSP. */
  succeededAt: Record<string, number>;
  /** Whose first attempt went to sandbox-b (the breaker put A last). */
  firstAttemptAtB: number;
  /** Who moved from A to B within the payment (attempt 2 at B). */
  movedToB: number;
}

export interface FailoverResult {
  mode: FailoverMode;
  clients: number;
  /** ms from the outage's start (A answering 503, or A's process killed). */
  firstSuccessAtBMs: number | null;
  /** The first payment started after the outage began whose first attempt went straight to B. */
  firstStraightToBMs: number | null;
  /** provider_circuit_state{provider="sandbox-a"} on the worker's /metrics reads open (polled every 100 ms). */
  breakerOpenMs: number | null;
  /** The outage's length, start to A answering again (for `kill`: its restart included). */
  outageMs: number;
  /** kill: the sandbox process's restart until it answers /healthz. */
  restartMs?: number;
  /** ms from the outage's end: the breaker half-open, closed (metrics), and the first payment started after the end that went to A first and succeeded there (its start and its answer). */
  breakerHalfOpenAfterEndMs: number | null;
  breakerClosedAfterEndMs: number | null;
  backAtAStartedAfterEndMs: number | null;
  backAtAAnsweredAfterEndMs: number | null;
  /** Successes at sandbox-a per second in the 3 s before the outage (what the breaker's window held). */
  successesAtAPerSecond: number;
  /**
   * Payments answered in the 3 s before the outage (started and answered before it), those
   * caught by it (answered after its start, started before its end: in flight at its start too),
   * and those started after it until the first payment back at A.
   */
  before: FailoverWindow;
  outage: FailoverWindow;
  recovery: FailoverWindow;
  /** The breaker's states seen on /metrics, ms from the outage's start. */
  breakerStates: { atMs: number; state: string }[];
}

export interface RoutingResult {
  comparisons: RoutingComparison[];
  routing: typeof routedRouting;
  /** The routed tenant's payments by the PSP holding them (the split as drawn). */
  routedSplit: Record<string, number>;
  failover: FailoverResult[];
  failoverRouting: typeof failoverRouting;
}

export interface RoutingContext {
  stack: BenchStack;
  http: HttpClient;
  createTenant: () => Promise<Tenant>;
  /** main.ts's interleaved(): the parts' rounds alternate, each measure()d with its CPU. */
  interleaved: (
    parts: { label: string; concurrency: number; operation: () => Promise<string | void> }[],
    rounds: number,
    timing: () => { warmupMs: number; windowMs: number },
  ) => Promise<LoopResult[]>;
  concurrencies: number[];
  rounds: number;
  timing: { warmupMs: number; windowMs: number };
  failoverClients: number;
  failoverModes: FailoverMode[];
  say: (line: string) => void;
  status: (line: string) => void;
  clear: () => void;
}

/** The breaker's sliding window of outcomes (30 s). */
const refillMs = HEALTH_DEFAULTS.windowMs;
const circuitStates: Record<string, string> = { '0': 'closed', '1': 'half_open', '2': 'open' };

export async function runRoutingPhase(ctx: RoutingContext): Promise<RoutingResult> {
  const { stack } = ctx;
  const single = new Scenarios(stack, ctx.http, await ctx.createTenant());
  const routedTenant = await ctx.createTenant();
  await setRouting(stack, routedTenant.id, routedRouting);
  const routed = new Scenarios(stack, ctx.http, routedTenant);

  const comparisons: RoutingComparison[] = [];
  for (const clients of ctx.concurrencies) {
    const [s, r] = await ctx.interleaved(
      [
        { label: 'single-PSP payments', concurrency: clients, operation: () => single.newPayment() },
        { label: 'routed payments (70/30)', concurrency: clients, operation: () => routed.newPayment() },
      ],
      ctx.rounds,
      () => ctx.timing,
    );
    comparisons.push({ clients, single: s!, routed: r! });
  }
  const split = await stack.sql<{ provider: string | null; n: number }[]>`
    SELECT provider, count(*)::int AS n FROM payments WHERE tenant_id = ${routedTenant.id} GROUP BY provider ORDER BY provider`;
  const routedSplit = Object.fromEntries(split.map((row) => [row.provider ?? '(none)', row.n]));

  const failover = ctx.failoverModes.length ? await measureFailover(ctx) : [];
  return { comparisons, routing: routedRouting, routedSplit, failover, failoverRouting };
}

async function setRouting(stack: BenchStack, tenantId: string, routing: unknown): Promise<void> {
  const response = await fetch(`${stack.apiUrl}/admin/tenants/${tenantId}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ routing }),
  });
  if (response.status !== 200) throw new Error(`routing of tenant ${tenantId}: ${response.status} ${await response.text()}`);
}

/** One payment of the failover loop, as its client saw it (performance.now() ms). */
interface Traced {
  id?: string;
  failure?: string;
  start: number;
  end: number;
}

/** Where a payment went, from its tables: the PSP holding it, its status, its attempts' PSPs in order. */
interface Placement {
  provider: string | null;
  status: string;
  attempts: string[];
}

/**
 * A closed loop of `failoverClients` new payments for a tenant routed sandbox-a then sandbox-b,
 * running through every mode in turn: a few seconds of normal running, then A's outage at a
 * recorded instant, held until the breaker has opened plus a few seconds, then A back, until
 * the first payment that went to A first again succeeded there.
 */
async function measureFailover(ctx: RoutingContext): Promise<FailoverResult[]> {
  const { stack } = ctx;
  const tenant = await ctx.createTenant();
  await setRouting(stack, tenant.id, failoverRouting);
  const scenarios = new Scenarios(stack, ctx.http, tenant);
  const traced: Traced[] = [];
  let running = true;
  const clients = Array.from({ length: ctx.failoverClients }, async () => {
    while (running) {
      const start = performance.now();
      let outcome: { id?: string; failure?: string };
      try {
        outcome = await scenarios.pay();
      } catch (error) {
        outcome = { failure: (error as Error).message };
      }
      traced.push({ ...outcome, start, end: performance.now() });
    }
  });
  // The breaker's state for sandbox-a, as an operator's scrape sees it, every 100 ms.
  const states: { at: number; state: string }[] = [];
  const poller = (async () => {
    while (running) {
      const state = await circuitState(stack.workerMetricsUrl, 'sandbox-a').catch(() => null);
      if (state !== null && states.at(-1)?.state !== state) states.push({ at: performance.now(), state });
      await sleep(100);
    }
  })();
  const stateSince = (state: string, since: number) => states.find((s) => s.at >= since && s.state === state)?.at ?? null;
  /** Waits until `done()` or `capMs`; true when done. */
  const until = async (done: () => boolean | Promise<boolean>, capMs: number, label: string) => {
    const began = performance.now();
    while (performance.now() - began < capMs) {
      if (await done()) return true;
      ctx.status(`${label}  ${((performance.now() - began) / 1000).toFixed(1)} s  ${traced.length} payments`);
      await sleep(100);
    }
    return false;
  };
  /** performance.now() as a wall-clock Date (for the tables' timestamps). */
  const wall = (at: number) => new Date(Date.now() - (performance.now() - at));

  const marks: { mode: FailoverMode; before: number; t0: number; t1: number; back: number; restartMs?: number }[] = [];
  const beforeMs = 3000;
  try {
    await sleep(2500); // the tenant's first payments (its ledger accounts) and the loop's steady state
    for (const [index, mode] of ctx.failoverModes.entries()) {
      const before = performance.now();
      // The breaker opens once errors are half of the outcomes in its 30 s window, so how soon
      // depends on the successes at A in the 30 s before the outage. Before the first mode the
      // window holds the comparison's 8-client rounds and this loop's first seconds (steady
      // running at A); after a mode, A had only the probe for half a minute: 30 s of this loop
      // refill the window first (without it, a second mode's breaker opened in 4 s, not 20).
      await sleep(index === 0 ? beforeMs : refillMs);
      ctx.say(`failover (${mode}): sandbox-a goes down now, ${ctx.failoverClients} clients paying`);
      const t0 = performance.now();
      if (mode === 'kill') await stack.killSandbox('sandbox-a');
      else await outage(stack, 'sandbox-a', 'unavailable');
      // Held until the breaker opened, then a few seconds more (payments running at B).
      await until(() => stateSince('2', t0) !== null, 20_000, `failover (${mode}): A down, waiting for the breaker to open`);
      await sleep(4000);
      let restartMs: number | undefined;
      if (mode === 'kill') {
        const restarting = performance.now();
        await stack.restartSandbox('sandbox-a');
        restartMs = performance.now() - restarting;
      } else await outage(stack, 'sandbox-a', 'none');
      const t1 = performance.now();
      ctx.clear();
      ctx.say(`failover (${mode}): sandbox-a answers again after ${Math.round(t1 - t0)} ms; waiting for payments to go back to A`);
      let back = 0;
      await until(
        async () => {
          const [row] = await stack.sql<{ started: Date }[]>`
            SELECT a.started_at AS started FROM payment_attempts a JOIN payments p ON p.id = a.payment_id
            WHERE p.tenant_id = ${tenant.id} AND a.attempt = 1 AND a.provider = 'sandbox-a' AND a.outcome = 'succeeded' AND a.started_at > ${wall(t1)}
            LIMIT 1`;
          if (row) back = performance.now();
          return Boolean(row) && stateSince('0', t1) !== null;
        },
        45_000,
        `failover (${mode}): A back, waiting for the breaker to close`,
      );
      await sleep(500);
      marks.push({ mode, before, t0, t1, back: back || performance.now(), ...(restartMs !== undefined ? { restartMs } : {}) });
      ctx.clear();
    }
  } finally {
    running = false;
    ctx.status('failover: the last payments finishing');
    await Promise.all([...clients, poller]);
    ctx.clear();
  }

  const placements = await placementsOf(stack, tenant.id);
  return marks.map((mark, index) => {
    const next = marks[index + 1]?.before ?? Infinity;
    const started = (from: number, to: number) => traced.filter((p) => p.start >= from && p.start < to);
    const window = (payments: Traced[]) => windowFigures(payments, placements);
    const mine = started(mark.before, next);
    const placed = (p: Traced) => (p.id ? placements.get(p.id) : undefined);
    const firstOf = (payments: Traced[], pick: (p: Traced) => number) => (payments.length ? Math.min(...payments.map(pick)) : null);
    const atB = mine.filter((p) => !p.failure && placed(p)?.provider === 'sandbox-b' && p.end >= mark.t0);
    const straightToB = mine.filter((p) => p.start >= mark.t0 && placed(p)?.attempts[0] === 'sandbox-b');
    const backAtA = mine.filter((p) => p.start >= mark.t1 && !p.failure && placed(p)?.provider === 'sandbox-a' && placed(p)?.attempts.length === 1);
    const since = (at: number | null, from: number) => (at === null ? null : Math.round(at - from));
    return {
      mode: mark.mode,
      clients: ctx.failoverClients,
      firstSuccessAtBMs: since(firstOf(atB, (p) => p.end), mark.t0),
      firstStraightToBMs: since(firstOf(straightToB, (p) => p.start), mark.t0),
      breakerOpenMs: since(stateSince('2', mark.t0), mark.t0),
      outageMs: Math.round(mark.t1 - mark.t0),
      ...(mark.restartMs !== undefined ? { restartMs: Math.round(mark.restartMs) } : {}),
      breakerHalfOpenAfterEndMs: since(stateSince('1', mark.t1), mark.t1),
      breakerClosedAfterEndMs: since(stateSince('0', mark.t1), mark.t1),
      backAtAStartedAfterEndMs: since(firstOf(backAtA, (p) => p.start), mark.t1),
      backAtAAnsweredAfterEndMs: since(firstOf(backAtA, (p) => p.end), mark.t1),
      successesAtAPerSecond: round((traced.filter((p) => p.end >= mark.t0 - beforeMs && p.end < mark.t0 && !p.failure && placed(p)?.provider === 'sandbox-a').length / beforeMs) * 1000, 1),
      before: window(started(mark.t0 - beforeMs, mark.t0).filter((p) => p.end < mark.t0)),
      outage: window(mine.filter((p) => p.end >= mark.t0 && p.start < mark.t1)),
      recovery: window(started(mark.t1, mark.back)),
      breakerStates: states.filter((s) => s.at >= mark.before && s.at < next).map((s) => ({ atMs: Math.round(s.at - mark.t0), state: circuitStates[s.state] ?? s.state })),
    };
  });
}

function windowFigures(payments: Traced[], placements: Map<string, Placement>): FailoverWindow {
  const succeededAt: Record<string, number> = {};
  let firstAttemptAtB = 0;
  let movedToB = 0;
  for (const payment of payments) {
    const placement = payment.id ? placements.get(payment.id) : undefined;
    if (!placement) continue;
    if (!payment.failure && placement.provider) succeededAt[placement.provider] = (succeededAt[placement.provider] ?? 0) + 1;
    if (placement.attempts[0] === 'sandbox-b') firstAttemptAtB++;
    if (placement.attempts[0] === 'sandbox-a' && placement.attempts[1] === 'sandbox-b') movedToB++;
  }
  return {
    payments: payments.length,
    failed: payments.filter((p) => p.failure).length,
    latency: summarise(payments.map((p) => p.end - p.start)),
    succeededAt,
    firstAttemptAtB,
    movedToB,
  };
}

async function placementsOf(stack: BenchStack, tenantId: string): Promise<Map<string, Placement>> {
  const rows = await stack.sql<{ id: string; provider: string | null; status: string; attempts: string[] | null }[]>`
    SELECT p.id, p.provider, p.status,
           (SELECT array_agg(a.provider ORDER BY a.attempt) FROM payment_attempts a WHERE a.payment_id = p.id) AS attempts
    FROM payments p WHERE p.tenant_id = ${tenantId}`;
  return new Map(rows.map((row) => [row.id, { provider: row.provider, status: row.status, attempts: row.attempts ?? [] }]));
}

async function outage(stack: BenchStack, name: string, mode: 'unavailable' | 'none'): Promise<void> {
  const sandbox = stack.sandboxes.find((s) => s.name === name)!;
  const response = await fetch(`${sandbox.url}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  if (response.status !== 200) throw new Error(`${name} outage ${mode}: ${response.status} ${await response.text()}`);
}

/** provider_circuit_state of `provider` on the worker's /metrics ('0' closed, '1' half-open, '2' open), or null when absent. */
async function circuitState(metricsUrl: string, provider: string): Promise<string | null> {
  const text = await (await fetch(metricsUrl)).text();
  const match = new RegExp(`^provider_circuit_state\\{[^}]*provider="${provider}"[^}]*\\}\\s+(\\S+)`, 'm').exec(text);
  return match ? match[1]! : null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
