import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { adminUrl, bannerPids, cleanUpLaunches, databasesToDrop, descendants, expectCleanExit, launchStart, waitForBanner } from '../helpers/launch';
import { holdFor } from '../helpers/eventually';

/**
 * `npm start` with several API processes behind one port (API_PROCESSES, api/primary.ts) and
 * several workers (WORKER_PROCESSES): payments go through, the tenants' rate limits hold across
 * the API processes (each enforces its share), and a revoked API key is refused by all of them
 * within 5 s. The acceptance figures for 1, 2 and 4 processes are printed (docs/scaling.md).
 */

afterEach(cleanUpLaunches, 120_000);

const WRITE_LIMIT = 40;
const MEASURE_MS = 4000;
const CONCURRENCY = 16;

async function launchWith(apiProcesses: number, workerProcesses: number) {
  const name = `payorch_scale_${randomBytes(4).toString('hex')}`;
  databasesToDrop.push(name);
  const launch = await launchStart({
    DATABASE_URL: adminUrl().replace(/\/[^/]*$/, `/${name}`),
    API_PROCESSES: String(apiProcesses),
    WORKER_PROCESSES: String(workerProcesses),
    RATE_LIMIT_WRITE_PER_SECOND: String(WRITE_LIMIT),
  });
  const banner = await waitForBanner(launch);
  const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
  const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)![1]!;
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const created = (await (await admin('POST', '/admin/tenants', { name: 'scale' })).json()) as { id: string; api_key: string };
  return { launch, banner, apiUrl, admin, tenantId: created.id, apiKey: created.api_key };
}

/**
 * Writes as fast as CONCURRENCY clients can for MEASURE_MS (many connections, so every API
 * process gets some): a POST without an Idempotency-Key is counted by the limiter and then
 * refused with 400, so what passes the limiter costs nothing else. Returns passed and 429 counts.
 */
async function measureWrites(apiUrl: string, apiKey: string): Promise<{ passed: number; limited: number; perSecond: number }> {
  let passed = 0;
  let limited = 0;
  const until = Date.now() + MEASURE_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const response = await fetch(`${apiUrl}/v1/payments`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: '{}',
        });
        await response.text();
        if (response.status === 429) limited++;
        else if (response.status === 400) passed++;
        else throw new Error(`unexpected ${response.status}`);
      }
    }),
  );
  return { passed, limited, perSecond: passed / (MEASURE_MS / 1000) };
}

async function pay(apiUrl: string, apiKey: string): Promise<number> {
  const key = `scale-${randomBytes(8).toString('hex')}`;
  for (;;) {
    const response = await fetch(`${apiUrl}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ order_id: `ord-${randomBytes(6).toString('hex')}`, amount_minor: 900, currency: 'EUR', payment_method: 'pm_card_visa' }),
    });
    await response.text();
    if (response.status !== 202 && response.status !== 429) return response.status;
    await holdFor(1100, 'the client’s pause before it retries');
  }
}

describe('several API and worker processes behind one port', () => {
  const figures: string[] = [];

  for (const apiProcesses of [1, 2, 4]) {
    it(`API_PROCESSES=${apiProcesses}: payments go through and the write limit (${WRITE_LIMIT}/s per tenant) holds across the processes`, async () => {
      const { launch, banner, apiUrl, apiKey, admin, tenantId } = await launchWith(apiProcesses, apiProcesses === 4 ? 2 : 1);
      const pids = bannerPids(banner);
      if (apiProcesses === 4) expect(Object.keys(pids)).toEqual(expect.arrayContaining(['worker-1', 'worker-2']));
      // The API processes are children of the one the supervisor watches.
      if (apiProcesses > 1) expect(descendants(pids.api!).length).toBeGreaterThanOrEqual(apiProcesses);
      expect(await pay(apiUrl, apiKey)).toBe(201);

      const { passed, limited, perSecond } = await measureWrites(apiUrl, apiKey);
      figures.push(`API_PROCESSES=${apiProcesses}: ${perSecond.toFixed(1)} writes/s passed the limiter (limit ${WRITE_LIMIT}/s), ${limited} refused with 429 in ${MEASURE_MS / 1000} s`);
      console.info(figures.at(-1));
      // Held: never more than the limit per second (one window of slack: the processes' windows are not aligned).
      expect(passed).toBeLessThanOrEqual(WRITE_LIMIT * (MEASURE_MS / 1000 + 1));
      // And not starved: the shares add up to most of the limit when clients use several connections.
      expect(perSecond).toBeGreaterThan(WRITE_LIMIT * 0.5);
      expect(limited).toBeGreaterThan(0);

      if (apiProcesses === 4) {
        // A revoked key is refused by every process within 5 s.
        const createdKey = (await (await admin('POST', `/admin/tenants/${tenantId}/api_keys`, {})).json()) as { id: string; api_key: string };
        expect(createdKey.api_key).toBeTruthy();
        const authorized = async () => {
          const statuses = await Promise.all(
            Array.from({ length: CONCURRENCY }, () =>
              fetch(`${apiUrl}/v1/payments?limit=1`, { headers: { authorization: `Bearer ${createdKey.api_key}` } }).then(async (r) => {
                await r.text();
                return r.status;
              }),
            ),
          );
          return statuses;
        };
        expect((await authorized()).filter((s) => s === 401)).toEqual([]); // cached by the processes now
        const revokedAt = Date.now();
        expect((await admin('DELETE', `/admin/tenants/${tenantId}/api_keys/${createdKey.id}`)).status).toBe(200);
        let refusedBy = 0;
        for (;;) {
          const statuses = await authorized();
          if (statuses.every((s) => s === 401)) {
            refusedBy = Date.now() - revokedAt;
            break;
          }
          if (Date.now() - revokedAt > 10_000) throw new Error(`the revoked key still works after 10 s: ${statuses.join(',')}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        figures.push(`API_PROCESSES=4: a revoked key was refused by every process ${refusedBy} ms after the revocation`);
        console.info(figures.at(-1));
        expect(refusedBy).toBeLessThan(5000);
      }

      const tree = descendants(launch.npm.pid!);
      launch.tree.push(...tree);
      process.kill(-launch.npm.pid!, 'SIGINT');
      await expectCleanExit(launch, tree);
    }, 400_000);
  }
});

