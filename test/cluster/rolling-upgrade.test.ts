import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createSql } from '../../db/connect';
import { projectRoot } from '../../devstack/temporal-cli';
import { adminUrl, bannerPids, cleanUpLaunches, databasesToDrop, descendants, expectCleanExit, isAlive, launchStart, waitForBanner } from '../helpers/launch';
import { eventually, holdFor } from '../helpers/eventually';

/**
 * `npm run rolling-upgrade` against a running `npm start` (two workers, two API processes)
 * under load: every worker, then every API process, is replaced one at a time, and no client
 * request fails (no 5xx, no refused or reset connection), every payment ends succeeded (no
 * stuck run), and the old processes are gone.
 */

afterEach(cleanUpLaunches, 120_000);

interface Outcome {
  final: number;
  seen: number[];
}

/** A payment from a client that retries by key (on 202, 429, 503 and a failed connection, counted as 0); anything else is final. */
async function payUntilFinal(apiUrl: string, apiKey: string, method: string): Promise<Outcome> {
  const key = `roll-${randomBytes(8).toString('hex')}`;
  const body = JSON.stringify({ order_id: `ord-${randomBytes(6).toString('hex')}`, amount_minor: 700, currency: 'EUR', payment_method: method });
  const seen: number[] = [];
  const deadline = Date.now() + 180_000;
  for (;;) {
    const status = await fetch(`${apiUrl}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body,
    }).then(
      async (r) => {
        await r.text();
        return r.status;
      },
      () => 0,
    );
    seen.push(status);
    // 429 too: a client retries after Retry-After (a 429 is never a key's outcome).
    if ((status !== 202 && status !== 503 && status !== 429 && status !== 0) || Date.now() > deadline) return { final: status, seen };
    await holdFor(1000, 'the client’s pause before it retries');
  }
}

describe('npm run rolling-upgrade', () => {
  it('replaces two workers and two API processes one at a time under load: no failed request, no stuck run', async () => {
    const dbName = `payorch_roll_${randomBytes(4).toString('hex')}`;
    databasesToDrop.push(dbName);
    const databaseUrl = adminUrl().replace(/\/[^/]*$/, `/${dbName}`);
    const launch = await launchStart({ DATABASE_URL: databaseUrl, API_PROCESSES: '2', WORKER_PROCESSES: '2' });
    const banner = await waitForBanner(launch);
    const before = bannerPids(banner);
    const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
    const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)![1]!;
    const tenant = (await (
      await fetch(`${apiUrl}/admin/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'rolling' }),
      })
    ).json()) as { api_key: string };
    const apiProcessesBefore = descendants(before.api!);

    // A payment every 600 ms (a third of them with a slow provider call, in flight while workers are replaced).
    const payments: Promise<Outcome>[] = [];
    let loading = true;
    const load = (async () => {
      while (loading) {
        payments.push(payUntilFinal(apiUrl, tenant.api_key, payments.length % 3 === 0 ? 'pm_card_slow' : 'pm_card_visa'));
        await new Promise((r) => setTimeout(r, 600));
      }
    })();

    await eventually(() => payments.length >= 3, 30_000, 100, 'load before the upgrade');
    const upgrade = spawn('npm', ['run', 'rolling-upgrade'], { cwd: projectRoot, env: { ...process.env, DATA_DIR: launch.dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let upgradeOutput = '';
    upgrade.stdout.on('data', (chunk: Buffer) => (upgradeOutput += chunk.toString()));
    upgrade.stderr.on('data', (chunk: Buffer) => (upgradeOutput += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => upgrade.once('exit', resolve));
    const sentByUpgradeEnd = payments.length;
    await eventually(() => payments.length >= sentByUpgradeEnd + 3, 30_000, 100, 'load after the upgrade');
    loading = false;
    await load;
    expect(code, `${upgradeOutput}\n${launch.output().slice(-3000)}`).toBe(0);
    expect(upgradeOutput).toMatch(/replaced worker-1 \d+ -> \d+/);
    expect(upgradeOutput).toMatch(/replaced worker-2 \d+ -> \d+/);
    expect(upgradeOutput).toMatch(/replaced api-1 \d+ -> \d+/);
    expect(upgradeOutput).toMatch(/replaced api-2 \d+ -> \d+/);
    expect(upgradeOutput).toContain('rolling upgrade done');

    const outcomes = await Promise.all(payments);
    const seen = outcomes.flatMap((o) => o.seen);
    console.info(
      `rolling upgrade under load: ${outcomes.length} payments; answers seen: ${seen.filter((s) => s === 201).length} 201, ${seen.filter((s) => s === 202).length} 202, ${seen.filter((s) => s === 503).length} 503, ${seen.filter((s) => s === 0).length} failed connections`,
    );
    expect(outcomes.map((o) => o.final).filter((s) => s !== 201)).toEqual([]);
    expect(seen.filter((s) => s === 0 || s >= 500)).toEqual([]);
    expect(outcomes.length).toBeGreaterThan(10);

    // No stuck run: nothing left processing, and the old processes are gone.
    const sql = createSql(databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ processing: number; total: number }[]>`
        SELECT count(*) FILTER (WHERE status = 'processing')::int AS processing, count(*)::int AS total FROM payments`;
      expect(row).toEqual({ processing: 0, total: outcomes.length });
    } finally {
      await sql.end();
    }
    // A replaced process finishes its in-flight work before it exits: gone within 20 s (under
    // load an old API process may still be in its last moments right after the upgrade).
    for (const [name, pid] of [['worker-1', before['worker-1']!], ['worker-2', before['worker-2']!], ...apiProcessesBefore.map((p) => ['API', p] as const)] as const) {
      const deadline = Date.now() + 20_000;
      while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(isAlive(pid), `old ${name} process ${pid}`).toBe(false);
    }
    expect(isAlive(before.api!)).toBe(true); // the primary stays: its port was never closed

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
  }, 600_000);
});
