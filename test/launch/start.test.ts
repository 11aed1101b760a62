import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSql } from '../../db/connect';
import { adminUrl, bannerPids, cleanUpLaunches, databasesToDrop, descendants, expectCleanExit, expectStopOrder, launchStart, portAnswers, waitForBanner, type Launch } from '../helpers/launch';
import { eventually } from '../helpers/eventually';

/**
 * `npm start` as a new user runs it: the real launcher in a child process, on free ports and
 * a temporary data folder, until its banner; then one tenant and one payment over HTTP, the
 * Temporal Web UI, and a Ctrl-C after which the launcher exits 0 and leaves no process behind.
 */

afterEach(cleanUpLaunches, 120_000);

describe('npm start', () => {
  it('runs the stack on a DATABASE_URL (creating its database), serves a payment, and stops cleanly on Ctrl-C to the process group', async () => {
    const dbName = `payorch_start_${randomBytes(4).toString('hex')}`;
    databasesToDrop.push(dbName);
    const databaseUrl = adminUrl().replace(/\/[^/]*$/, `/${dbName}`);
    const launch = await launchStart({ DATABASE_URL: databaseUrl });

    const banner = await waitForBanner(launch);
    expect(banner).toContain(`DATABASE_URL   ${databaseUrl}`);
    expect(banner).not.toContain('embedded PostgreSQL');
    const pids = bannerPids(banner);
    expect(Object.keys(pids).sort()).toEqual(['api', 'codec', 'sandbox-a', 'sandbox-b', 'temporal', 'worker']);
    // sandbox-b keeps its state in a database of its own beside DATABASE_URL's.
    expect(banner).toContain(`database ${dbName}_sandbox_b)`);

    const paymentId = await exercise(launch, banner);
    // The payment is in the database DATABASE_URL named, which the launcher created and migrated.
    const sql = createSql(databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
      expect(row?.status).toBe('succeeded');
    } finally {
      await sql.end();
    }

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    for (const pid of Object.values(pids)) expect(tree).toContain(pid);

    // A terminal's Ctrl-C: SIGINT to every process of the foreground group at once.
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox-a stopped', 'Temporal stopped', 'all stopped']);
    expect(launch.output()).not.toContain('PostgreSQL stopped');
  }, 300_000);

  it('starts an embedded PostgreSQL when DATABASE_URL is not set, serves a payment, and stops cleanly on SIGINT to npm', async () => {
    const launch = await launchStart({});

    const banner = await waitForBanner(launch);
    const databaseUrl = `postgres://postgres:postgres@127.0.0.1:${launch.ports.postgres}/payments`;
    expect(banner).toContain(`DATABASE_URL   ${databaseUrl} (embedded PostgreSQL`);
    const pids = bannerPids(banner);
    expect(Object.keys(pids).sort()).toEqual(['api', 'codec', 'postgres', 'sandbox-a', 'sandbox-b', 'temporal', 'worker']);
    expect(existsSync(path.join(launch.dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    expect(existsSync(path.join(launch.dataDir, 'temporal.db'))).toBe(true);

    const paymentId = await exercise(launch, banner);
    const sql = createSql(databaseUrl, { max: 1 });
    try {
      const [row] = await sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
      expect(row?.status).toBe('succeeded');
    } finally {
      await sql.end();
    }

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    for (const pid of Object.values(pids)) expect(tree).toContain(pid);

    // `kill -INT <pid of npm>`: only npm is signalled, and the stop must still reach everything.
    launch.npm.kill('SIGINT');
    await expectCleanExit(launch, tree);
    expectStopOrder(launch.output(), ['api stopped', 'worker stopped', 'sandbox-a stopped', 'Temporal stopped', 'PostgreSQL stopped', 'all stopped']);
    expect(await portAnswers(launch.ports.postgres)).toBe(false);
  }, 300_000);
});

/** Creates a tenant and a payment through the API the banner names; checks the docs and the Temporal UI. */
async function exercise(launch: Launch, banner: string): Promise<string> {
  const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
  expect(banner).toContain(`API            ${apiUrl}`);
  expect(banner).toContain(`API docs       ${apiUrl}/docs`);
  // Two sandbox PSPs, each with its webhooks to its own route, both in PROVIDERS.
  expect(banner).toContain(`PSP sandbox-a  http://127.0.0.1:${launch.ports.sandbox} (webhooks to ${apiUrl}/provider_webhooks/sandbox-a; database the same, schema sandbox)`);
  expect(banner).toContain(`PSP sandbox-b  http://127.0.0.1:${launch.ports.sandboxB} (webhooks to ${apiUrl}/provider_webhooks/sandbox-b; database `);
  expect(banner).toContain(`PROVIDERS      sandbox-a=sandbox:http://127.0.0.1:${launch.ports.sandbox},sandbox-b=sandbox:http://127.0.0.1:${launch.ports.sandboxB}`);
  for (const port of [launch.ports.sandbox, launch.ports.sandboxB]) expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
  expect(banner).toContain('Listening on   127.0.0.1 (loopback only');
  expect(banner).toContain('Webhooks       internal targets allowed: loopback only');
  const uiUrl = `http://127.0.0.1:${launch.ports.ui}`;
  expect(banner).toContain(`Temporal UI    ${uiUrl}`);
  // Payloads are encrypted with a development key kept in the data folder; the UI decodes through the codec server.
  const codecUrl = `http://127.0.0.1:${launch.ports.codec}`;
  expect(banner).toMatch(new RegExp(`Codec server   ${codecUrl} \\(Temporal payloads encrypted with key dev-\\d{4}-\\d{2}-\\d{2}, kept in `));
  expect(readFileSync(path.join(launch.dataDir, 'temporal-payload-keys'), 'utf8')).toMatch(/^dev-\d{4}-\d{2}-\d{2}:[A-Za-z0-9+/]{43}=\n$/);
  const uiSettings = (await (await fetch(`${uiUrl}/api/v1/settings`)).json()) as { Codec?: { Endpoint?: string }; DisableWriteActions?: boolean };
  expect(uiSettings.Codec?.Endpoint).toBe(codecUrl);
  // The dev server's UI is read-only unless TEMPORAL_UI_WRITE_ACTIONS=true, and says so.
  expect(uiSettings.DisableWriteActions).toBe(true);
  expect(banner).toContain(`Temporal UI    ${uiUrl} (read-only;`);
  const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)?.[1];
  expect(adminToken).toBeTruthy();
  expect(banner).toContain(`curl -s -X POST ${apiUrl}/admin/tenants -H 'Authorization: Bearer ${adminToken}'`);

  const tenantResponse = await fetch(`${apiUrl}/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'npm start test' }),
  });
  expect(tenantResponse.status).toBe(201);
  const tenant = (await tenantResponse.json()) as { id: string; api_key: string };

  const paymentResponse = await fetch(`${apiUrl}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.api_key}`, 'idempotency-key': `start-${randomBytes(8).toString('hex')}`, 'content-type': 'application/json' },
    body: JSON.stringify({ order_id: `ord-${randomBytes(4).toString('hex')}`, amount_minor: 2500, currency: 'EUR', payment_method: 'pm_card_visa' }),
  });
  const paymentText = await paymentResponse.text();
  // 201 at once, or, on a machine slow enough that the first run outlasts the API's wait, 202
  // and then the payment as the contract's client polls for it (docs/CONTRACT.md §3.1.6).
  expect([201, 202], paymentText).toContain(paymentResponse.status);
  const first = JSON.parse(paymentText) as { id: string };
  const payment = await eventually(async () => {
    const polled = (await (await fetch(`${apiUrl}/v1/payments/${first.id}`, { headers: { authorization: `Bearer ${tenant.api_key}` } })).json()) as { id: string; status: string; provider: string };
    return polled.status === 'processing' ? null : polled;
  }, 60_000);
  expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-a' });

  // The tenant's routing sends its next payment to sandbox-b (its own process and database).
  const routed = await fetch(`${apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ routing: { rules: [{ when: { currency: ['EUR'] }, fallback: ['sandbox-b'] }] } }),
  });
  expect(routed.status, await routed.clone().text()).toBe(200);
  const second = await fetch(`${apiUrl}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.api_key}`, 'idempotency-key': `start-${randomBytes(8).toString('hex')}`, 'content-type': 'application/json' },
    body: JSON.stringify({ order_id: `ord-${randomBytes(4).toString('hex')}`, amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa' }),
  });
  const secondText = await second.text();
  expect(second.status, secondText).toBe(201);
  expect(JSON.parse(secondText)).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
  // Each PSP's circuit is on the worker's /metrics.
  const workerMetrics = await (await fetch(`http://127.0.0.1:${launch.ports.workerMetrics}/metrics`)).text();
  expect(workerMetrics).toContain('provider_circuit_state{provider="sandbox-a"} 0');
  expect(workerMetrics).toContain('provider_circuit_state{provider="sandbox-b"} 0');

  const docs = await fetch(`${apiUrl}/docs`);
  expect(docs.status).toBe(200);
  const ui = await fetch(uiUrl);
  expect(ui.status).toBe(200);
  expect(await ui.text()).toMatch(/<html/i);
  return payment.id;
}

