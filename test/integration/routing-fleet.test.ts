import { readFileSync } from 'node:fs';
import path from 'node:path';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { createActivities, type ActivityDeps } from '../../activities';
import { createSql, type Sql } from '../../db/connect';
import { HEALTH_DEFAULTS, listHealth } from '../../db/routing';
import { SandboxProvider } from '../../provider/sandbox/client';
import { providerRegistry } from '../../provider/registry';
import { testDataConverter } from '../../testkit/payload-keys';
import { spawnWorker, type ServiceProcess } from '../../testkit/processes';
import { projectRoot } from '../../devstack/temporal-cli';
import { createPaymentWorker } from '../../worker/worker';
import { adminCall, apiClient, eventually, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * The fleet shares what it knows of each PSP only through PostgreSQL: two Worker instances on
 * one task queue, each with its own activity dependencies (its own pool, its own PSP clients; no
 * memory in common), behind the stack's API with two sandbox PSPs (`sandbox` first, `sandbox-b`).
 * - A PSP that starts failing is moved out of first place by both within 20 of its payments,
 *   then probed back once it recovers (db/routing.ts routing_health; activities/routing-decision.ts).
 * - A PSP's calls per second hold across both (PROVIDER_RATE_LIMITS; lib/provider-limits.ts).
 */

let stack: TestStack;
beforeAll(async () => {
  // The API answers 202 soon: the payments' clients never wait on a PSP that fails.
  stack = await startStack({ worker: false, secondSandbox: {}, api: { IDEMPOTENCY_WAIT_MS: 500 } });
}, 60_000);
afterAll(async () => stack?.stop());

interface FleetWorker {
  /** The payments whose charge attempts this worker ran. */
  charged: Set<string>;
  stop(): Promise<void>;
}

/** One worker of the fleet: its own pool and PSP clients, on the stack's task queue. */
async function startFleetWorker(extra: Partial<ActivityDeps>): Promise<FleetWorker> {
  const sql: Sql = createSql(stack.databaseUrl, { max: 5 });
  const second = stack.secondSandbox!;
  const providers = providerRegistry({
    sandbox: new SandboxProvider({ baseUrl: stack.sandboxUrl, timeoutMs: 1500, webhookSecret: stack.sandboxWebhookSecret }),
    'sandbox-b': new SandboxProvider({ baseUrl: second.url, timeoutMs: 1500, webhookSecret: second.webhookSecret }),
  });
  const activities = createActivities({ sql, providers, ...extra });
  const charged = new Set<string>();
  const connection = await NativeConnection.connect({ address: stack.temporalAddress });
  const worker: Worker = await createPaymentWorker({
    connection,
    namespace: 'default',
    taskQueue: stack.taskQueue,
    deps: { sql, providers },
    dataConverter: testDataConverter,
    workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') },
    tuning: {
      activities: {
        ...activities,
        chargeAttempt: async (input: Parameters<typeof activities.chargeAttempt>[0]) => {
          charged.add(input.paymentId);
          return activities.chargeAttempt(input);
        },
      },
    },
  });
  const running = worker.run();
  return {
    charged,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
      await sql.end({ timeout: 5 });
    },
  };
}

async function tenantWith(routing: unknown): Promise<Tenant> {
  const tenant = await stack.createTenant(uniqueKey('fleet'));
  if (routing !== null) {
    const patched = await adminCall(stack, 'PATCH', `/admin/tenants/${tenant.id}`, { routing });
    expect(patched.status, patched.text).toBe(200);
  }
  return tenant;
}

/** Starts a payment; its id (the answer may be 202 while it is still being charged). */
async function startPayment(tenant: Tenant): Promise<string> {
  const created = await apiClient(stack.apiUrl, tenant.apiKey).post('/v1/payments', { order_id: uniqueKey('ord'), amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa' }, uniqueKey('pay'));
  expect([201, 202], created.text).toContain(created.status);
  return created.json.id as string;
}

async function finalStatus(tenant: Tenant, id: string, timeoutMs = 60_000): Promise<string> {
  const api = apiClient(stack.apiUrl, tenant.apiKey);
  return eventually(
    async () => {
      const { json } = await api.get(`/v1/payments/${id}`);
      return ['requires_action', 'processing'].includes(json.status) ? null : (json.status as string);
    },
    timeoutMs,
    200,
    `payment ${id} decided`,
  );
}

/** Where each payment's first attempt was recorded. */
async function firstAttempts(ids: readonly string[]): Promise<Map<string, string>> {
  const rows = await stack.sql<{ payment_id: string; provider: string }[]>`SELECT payment_id, provider FROM payment_attempts WHERE attempt = 1 AND payment_id = ANY (${[...ids]}::text[])`;
  return new Map(rows.map((row) => [row.payment_id, row.provider]));
}

async function outage(mode: 'unavailable' | 'none'): Promise<void> {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}

const healthOf = async (provider: string) => (await listHealth(stack.sql)).find((row) => row.provider === provider)?.state ?? 'closed';

describe('a failing PSP across workers', () => {
  // The elimination's time shortened (30 s in production) so the probe comes within the test.
  const health = { ...HEALTH_DEFAULTS, eliminateMs: 4000 };
  let fleet: FleetWorker[] = [];
  beforeAll(async () => {
    fleet = [await startFleetWorker({ routingHealth: health }), await startFleetWorker({ routingHealth: health })];
  }, 60_000);
  afterAll(async () => {
    await outage('none');
    for (const worker of fleet) await worker.stop();
  });

  it('is moved out of first place by every worker within 20 of its payments, then a probe brings it back', async () => {
    const tenant = await tenantWith({ fallback: ['sandbox', 'sandbox-b'] });
    // Healthy: the static order's first PSP takes the payments.
    const before = await Promise.all([0, 1, 2, 3].map(() => startPayment(tenant)));
    for (const id of before) expect(await finalStatus(tenant, id)).toBe('succeeded');
    expect([...(await firstAttempts(before)).values()]).toEqual(['sandbox', 'sandbox', 'sandbox', 'sandbox']);

    // sandbox fails every charge (503, nothing done): 4 clients send 60 payments one after another.
    await outage('unavailable');
    const during: string[] = [];
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        for (let i = 0; i < 15; i++) during.push(await startPayment(tenant));
      }),
    );
    // Attempt 1 is recorded before its PSP is called: every one soon.
    const firsts = await eventually(async () => {
      const found = await firstAttempts(during);
      return found.size === 60 ? found : null;
    }, 20_000, 200, 'every first attempt recorded');
    const toFailing = during.filter((id) => firsts.get(id) === 'sandbox');
    // The trip (at most 7 weighted errors) and the payments already deciding meanwhile, plus one
    // probe per elimination that ended during the outage: at most 20 in all.
    expect(toFailing.length).toBeLessThanOrEqual(20);
    // Both workers decided from the same health: each ran payments that started at sandbox-b.
    const movedOn = during.filter((id) => firsts.get(id) === 'sandbox-b');
    for (const worker of fleet) expect(movedOn.some((id) => worker.charged.has(id))).toBe(true);
    // Every payment ends succeeded: the ones at sandbox moved on once its lookups found no charge.
    for (const id of during) expect(await finalStatus(tenant, id)).toBe('succeeded');

    // It recovers: once its elimination ends, one probe payment tries it first, and its success brings it back.
    await outage('none');
    const probe = await eventually(
      async () => {
        const id = await startPayment(tenant);
        return (await firstAttempts([id])).get(id) === 'sandbox' ? id : null;
      },
      30_000,
      250,
      'a payment probing sandbox',
    );
    expect(await finalStatus(tenant, probe)).toBe('succeeded');
    await eventually(async () => ((await healthOf('sandbox')) === 'closed' ? true : null), 10_000, 100, 'sandbox back in');
    const after = await Promise.all([0, 1, 2, 3].map(() => startPayment(tenant)));
    expect([...(await firstAttempts(after)).values()]).toEqual(['sandbox', 'sandbox', 'sandbox', 'sandbox']);
    for (const id of after) expect(await finalStatus(tenant, id)).toBe('succeeded');
  });
});

describe("a PSP's calls per second across workers", () => {
  // Two worker processes (worker/main.ts) configured as a deployment is: their own pools, their
  // own PSP clients, their own event loops, nothing shared but PostgreSQL.
  const limits = { sandbox: { calls_per_second: 5, burst: 5 } };
  let workers: ServiceProcess[] = [];
  beforeAll(async () => {
    const environment = {
      databaseUrl: stack.databaseUrl,
      temporalAddress: stack.temporalAddress,
      taskQueue: stack.taskQueue,
      providerUrl: stack.sandboxUrl,
      env: { LOG_LEVEL: 'info', PROVIDER_RATE_LIMITS: JSON.stringify(limits), WORKER_SCHEDULES: 'off' },
      logsDir: path.join(projectRoot, 'test', 'artifacts', 'routing-fleet'),
    };
    workers = await Promise.all([spawnWorker(`limits-worker-1-${stack.taskQueue}`, environment), spawnWorker(`limits-worker-2-${stack.taskQueue}`, environment)]);
  }, 240_000);
  afterAll(async () => {
    for (const worker of workers) await worker.stop();
  });

  it('40 payments at once all succeed, and the PSP never sees more than 5 + burst calls in one second (one more for the way there)', async () => {
    const tenant = await tenantWith(null);
    const ids = await Promise.all(Array.from({ length: 40 }, () => startPayment(tenant)));
    for (const id of ids) expect(await finalStatus(tenant, id)).toBe('succeeded');
    // Both processes charged some of them (each logs the charges it sends).
    for (const worker of workers) {
      const log = readFileSync(worker.logFile, 'utf8');
      expect(ids.some((id) => log.includes(id)), worker.name).toBe(true);
    }
    // The sandbox's own record of the requests: each charge row's creation time (clock_timestamp()).
    const rows = await stack.sql<{ at: number }[]>`SELECT extract(epoch FROM created_at)::float8 AS at FROM sandbox.charges WHERE reference = ANY (${ids}::text[]) ORDER BY created_at`;
    expect(rows).toHaveLength(40);
    const times = rows.map((row) => row.at);
    const { perSecond, burst } = { perSecond: limits.sandbox.calls_per_second, burst: limits.sandbox.burst };
    // The busiest one-second window starting at any request: the bucket lets at most burst + 5 leave
    // in a second; one more is allowed for the way there (calls that left a moment apart may be
    // stored closer together). Without the limit the 40 would all land within about a second.
    const busiest = Math.max(...times.map((start) => times.filter((t) => t >= start && t < start + 1).length));
    expect(busiest, times.map((t) => Math.round((t - times[0]!) * 1000)).join(' ')).toBeLessThanOrEqual(perSecond + burst + 1);
    // 40 calls at 5 per second after a burst of 5 take at least 7 s from the first to the last.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual((40 - burst) / perSecond - 0.5);
  });
});
