import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { adminUrl, bannerPids, cleanUpLaunches, databasesToDrop, descendants, expectCleanExit, expectStopOrder, isAlive, launchStart, waitForBanner, type Launch } from '../helpers/launch';
import { eventually } from '../helpers/eventually';

/**
 * The supervisor behind `npm start` (devstack/supervisor.ts) keeps the stack alive: a child
 * that dies is restarted with backoff and its new pid logged, while clients that retry by key
 * see no failure; only a crash loop (or PostgreSQL's death) stops everything, saying why; and
 * Ctrl-C still stops everything in order. Real launches on non-default ports, real kill -9.
 */

afterEach(cleanUpLaunches, 120_000);

/** A fresh database on the machine's PostgreSQL for one launch (dropped after the test). */
function launchDatabase(): { url: string; name: string } {
  const name = `payorch_sup_${randomBytes(4).toString('hex')}`;
  databasesToDrop.push(name);
  return { url: adminUrl().replace(/\/[^/]*$/, `/${name}`), name };
}

async function createTenant(apiUrl: string, banner: string): Promise<string> {
  const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)![1]!;
  const response = await fetch(`${apiUrl}/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'supervisor test' }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { api_key: string }).api_key;
}

/**
 * One payment from a client that retries by key until a final answer, as the README tells
 * clients to: on 202, on 503 and when the connection is refused (the API process being
 * restarted). Returns every status it saw.
 */
async function payUntilFinal(apiUrl: string, apiKey: string, timeoutMs = 120_000): Promise<{ final: number; seen: number[] }> {
  const key = `sup-${randomBytes(8).toString('hex')}`;
  const body = JSON.stringify({ order_id: `ord-${randomBytes(6).toString('hex')}`, amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa' });
  const seen: number[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`${apiUrl}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(30_000),
    }).then(
      async (r) => {
        await r.text();
        return r.status;
      },
      () => 0, // refused or reset: the API is being restarted
    );
    seen.push(status);
    if (status !== 0 && status !== 202 && status !== 503) return { final: status, seen };
    if (Date.now() > deadline) return { final: status, seen };
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** SIGKILLs `pid`, then waits for the supervisor's next `[start] <what> restarted (pid N…`; returns N. */
async function killAndAwaitRestart(launch: Launch, what: string, pid: number, timeoutMs = 120_000): Promise<number> {
  const pattern = new RegExp(`\\[start\\] ${what} restarted \\(pid (\\d+)`);
  const from = launch.output().length;
  process.kill(pid, 'SIGKILL');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const restarted = pattern.exec(launch.output().slice(from));
    if (restarted) return Number(restarted[1]);
    if (launch.hasExited()) throw new Error(`npm start exited instead of restarting ${what}:\n${launch.output().slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`${what} not restarted within ${timeoutMs} ms:\n${launch.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('the supervisor keeps the stack alive', () => {
  it('restarts each child killed with SIGKILL (worker, API, both sandboxes, codec server, Temporal dev server) and logs its new pid; payments retried by key succeed after each; Ctrl-C still stops everything in order', async () => {
    const launch = await launchStart({ DATABASE_URL: launchDatabase().url });
    const banner = await waitForBanner(launch);
    const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
    const apiKey = await createTenant(apiUrl, banner);
    const pids = bannerPids(banner);
    expect((await payUntilFinal(apiUrl, apiKey)).final).toBe(201);

    for (const [name, logged] of [
      ['worker', 'worker'],
      ['api', 'api'],
      ['sandbox-a', 'sandbox-a'],
      ['sandbox-b', 'sandbox-b'],
      ['codec', 'codec'],
      ['temporal', 'Temporal dev server'],
    ] as const) {
      const old = pids[name]!;
      const fresh = await killAndAwaitRestart(launch, logged, old);
      expect(fresh).not.toBe(old);
      expect(isAlive(fresh), `${name}'s new pid ${fresh}`).toBe(true);
      expect(descendants(launch.npm.pid!)).toContain(fresh);
      pids[name] = fresh;
      const payment = await payUntilFinal(apiUrl, apiKey);
      expect(payment.final, `after ${name} was killed: ${payment.seen.join(',')}`).toBe(201);
      // Never a 500 on the way: refusals while the API restarts, 503 or 202 otherwise.
      expect(payment.seen.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    }
    expect(launch.hasExited()).toBe(false);

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox-a stopped', 'codec stopped', 'Temporal stopped', 'all stopped']);
  }, 600_000);

  it('stops everything when a child crash-loops, and says which child and why', async () => {
    const launch = await launchStart({ DATABASE_URL: launchDatabase().url });
    const banner = await waitForBanner(launch);
    let pid = bannerPids(banner)['sandbox-b']!;
    // Five exits within a minute: the fifth is not restarted.
    for (let exit = 1; exit <= 4; exit++) {
      pid = await killAndAwaitRestart(launch, 'sandbox-b', pid);
    }
    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    process.kill(pid, 'SIGKILL');
    const result = await Promise.race([launch.exited, new Promise((r) => setTimeout(r, 120_000)).then(() => null)]);
    expect(result, launch.output().slice(-3000)).toEqual({ code: 1, signal: null });
    expect(launch.output()).toMatch(/the sandbox-b process is crash-looping \(5 exits within 60 s\): restarting it cannot help; last exit: killed by SIGKILL/);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'codec stopped', 'Temporal stopped', 'all stopped after a failure']);
    expect(tree.filter(isAlive).filter((p) => p !== launch.npm.pid)).toEqual([]);
  }, 600_000);

  it('TEMPORAL_MODE=cluster: kill -9 of each Temporal node in turn, then of the frontend balancer, under load: every node is restarted, payments keep being accepted (no 500 for a client retrying by key) and in-flight ones complete', async () => {
    const { url } = launchDatabase();
    const id = randomBytes(3).toString('hex');
    const temporalDatabases = [`payorch_sup_${id}_temporal`, `payorch_sup_${id}_visibility`];
    databasesToDrop.push(...temporalDatabases);
    const launch = await launchStart({ DATABASE_URL: url, TEMPORAL_MODE: 'cluster', TEMPORAL_DB_NAME: temporalDatabases[0], TEMPORAL_VISIBILITY_DB_NAME: temporalDatabases[1] });
    const banner = await waitForBanner(launch, 300_000);
    // Clients are given the balancer's address, on TEMPORAL_PORT.
    expect(banner).toContain(`Temporal       127.0.0.1:${launch.ports.temporal} (balancer over temporal-1 127.0.0.1:`);
    const pids = bannerPids(banner);
    expect(Object.keys(pids).sort()).toEqual(['api', 'balancer', 'codec', 'sandbox-a', 'sandbox-b', 'temporal-1', 'temporal-2', 'worker']);
    const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
    const apiKey = await createTenant(apiUrl, banner);

    // A payment every 300 ms for the whole run, each from a client that retries by key.
    const payments: ReturnType<typeof payUntilFinal>[] = [];
    let loading = true;
    const load = (async () => {
      while (loading) {
        payments.push(payUntilFinal(apiUrl, apiKey, 240_000));
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    try {
      for (const [name, logged] of [
        ['temporal-1', 'Temporal temporal-1'],
        ['temporal-2', 'Temporal temporal-2'],
        ['balancer', 'balancer'],
      ] as const) {
        // Some load on the whole cluster first: a few more payments sent since the last kill.
        const sent = payments.length;
        await eventually(() => payments.length >= sent + 6, 30_000, 100, 'six more payments sent');
        const fresh = await killAndAwaitRestart(launch, logged, pids[name]!, 240_000);
        expect(isAlive(fresh)).toBe(true);
        pids[name] = fresh;
      }
    } finally {
      loading = false;
      await load;
    }
    const answers = await Promise.all(payments);
    const statuses = answers.flatMap((a) => a.seen);
    console.info(`cluster under kill -9: ${answers.length} payments, ${statuses.filter((s) => s === 503).length} answers 503 on the way, ${statuses.filter((s) => s === 0).length} refused connections, ${statuses.filter((s) => s === 202).length} 202`);
    expect(answers.map((a) => a.final).filter((s) => s !== 201)).toEqual([]);
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    expect(answers.length).toBeGreaterThan(20);
    expect(launch.hasExited()).toBe(false);

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox-a stopped', 'codec stopped', 'balancer stopped', 'Temporal cluster stopped', 'all stopped']);
  }, 900_000);
});
