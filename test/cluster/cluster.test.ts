import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import type { TemporalCluster } from '../../devstack/temporal-cluster';
import { apiClient, captureLogs, eventually, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';
import { QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { paymentsInFlight, untilQuiet } from '../helpers/faults/census';
import { startMerchant, type Merchant } from '../../testkit/merchant';
import { tenantWithMerchant } from '../helpers/faults/merchant';
import { paymentIdIn, paymentRequest, untilFinal, type Api, type PaymentRequest } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, retryAndTally } from '../helpers/faults/verify';
import { startFrontendBalancer, type FrontendBalancer } from '../../lib/frontend-balancer';
import { clusterDatabaseUrl, startTestCluster } from '../helpers/cluster';
import { createSql, type Sql } from '../../db/connect';

/**
 * The product on the production Temporal server: a cluster of two server processes on
 * PostgreSQL (devstack/temporal-cluster.ts, the config docker-compose.yml runs), with the API and
 * the worker reaching the frontends through the product's own balancer (lib/frontend-balancer.ts,
 * what `npm start` runs in cluster mode), as a deployment would through its load balancer. The
 * ordinary cases first, then the cluster's own faults: a node SIGKILLed mid-flight (its
 * shards move to the other node) and a rolling restart of both nodes under load.
 */

let cluster: TemporalCluster;
let balancer: FrontendBalancer;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;

beforeAll(async () => {
  cluster = await startTestCluster('cluster', { nodes: 2, shards: 8 });
  balancer = await startFrontendBalancer({ frontends: cluster.nodes.map((node) => node.address), namespace: cluster.namespace });
  stack = await startStack({ temporalAddress: balancer.address, sandbox: { slowMs: 5000 }, api: { TEMPORAL_RPC_TIMEOUT_MS: 3000 } });
  merchant = await startMerchant();
  tenant = await tenantWithMerchant(stack, merchant, 'cluster');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
async function withClusterDatabase<T>(query: (sql: Sql) => Promise<T>): Promise<T> {
  const sql = createSql(clusterDatabaseUrl(cluster), { max: 1 });
  try {
    return await query(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The cluster is whole again, end to end: every node serves, the balancer counts every
 * frontend healthy, and a payment goes the whole way (API, balancer, frontend, history,
 * matching, worker) and succeeds. What a trial waits for before it strikes, instead of a
 * time: right after a node's restart, its shards and task queue partitions move back to it,
 * and a trial that starts meanwhile measured the move rather than the fault.
 */
async function untilClusterWhole(): Promise<void> {
  await eventually(async () => balancer.frontends().every((frontend) => frontend.healthy), QUIET_MS, 250);
  const canary = paymentRequest('pm_card_visa');
  const { response } = await untilFinal(api, canary, QUIET_MS);
  expect(response.status, `the canary payment before the trial: ${response.text}`).toBe(201);
}

afterAll(async () => {
  await stack?.stop();
  await merchant?.close();
  await balancer?.close();
  await cluster?.stop();
});

describe('the product on a two-node Temporal cluster', () => {
  it('has two live members for each of the four services (ringpop membership in PostgreSQL)', async () => {
    const members = await withClusterDatabase(
      (sql) => sql<{ role: number; hosts: number }[]>`
        SELECT role::int, count(DISTINCT rpc_port)::int AS hosts FROM cluster_membership
        WHERE record_expiry > (now() AT TIME ZONE 'utc') GROUP BY role ORDER BY role`,
    );
    // 1 frontend, 2 history, 3 matching, 4 worker
    expect(members.map((m) => [m.role, m.hosts])).toEqual([
      [1, 2],
      [2, 2],
      [3, 2],
      [4, 2],
    ]);
  });

  it('charges a payment once, end to end, with its ledger posting and its signed webhook', async () => {
    const plan = paymentRequest('pm_card_visa');
    const logs = captureLogs();
    const { response } = await untilFinal(api, plan, 60_000);
    logs.stop();
    // On failure, the API's own account of it (its error and warning lines).
    expect(response.status, `${response.text} ${logs.lines().filter((l) => Number(l.level) >= 40).map((l) => JSON.stringify(l).slice(0, 1500))}`).toBe(201);
    expect(response.json.status).toBe('succeeded');
    const id = paymentIdIn(response)!;
    expect(await untilQuiet(stack, [id], { merchant, timeoutMs: QUIET_MS })).not.toBeNull();
    // The webhook: delivered to the merchant, signed per Standard Webhooks with the tenant's secret.
    const delivery = await eventually(async () => merchant.deliveries().find((d) => d.body.includes(id) && d.body.includes('payment.succeeded')));
    const event = new Webhook(tenant.webhookSecret).verify(delivery.body, delivery.headers as Record<string, string>) as { type: string; data: { object: { id: string } } };
    expect(event.type).toBe('payment.succeeded');
    expect(event.data.object.id).toBe(id);
    // The same key again: the same answer, replayed; the workflow ran once.
    const replay = await api.post('/v1/payments', plan.body, plan.key);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const [row] = await stack.sql<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${id}`;
    expect((await stack.temporal.workflow.count(`WorkflowId = '${row!.workflow_id}'`)).count).toBe(1);
  });

  it('authorizes, captures part, and refunds part of a payment (the lifecycle)', async () => {
    const created = await api.post('/v1/payments', { ...paymentRequest('pm_card_visa', 'manual').body, amount_minor: 1000 }, uniqueKey());
    expect(created.status, created.text).toBe(201);
    expect(created.json.status).toBe('requires_capture');
    const captured = await api.post(`/v1/payments/${created.json.id}/capture`, { amount_minor: 600 }, uniqueKey());
    expect(captured.status).toBe(200);
    expect(captured.json.status).toBe('succeeded');
    expect(captured.json.amount_captured_minor).toBe(600);
    const refund = await api.post(`/v1/payments/${created.json.id}/refunds`, { amount_minor: 250 }, uniqueKey());
    expect(refund.status).toBe(201);
    const done = await eventually(async () => {
      const r = await api.get(`/v1/refunds/${refund.json.id}`);
      return r.json.status === 'succeeded' ? r.json : null;
    }, 60_000);
    expect(done.amount_minor).toBe(250);
    const over = await api.post(`/v1/payments/${created.json.id}/refunds`, { amount_minor: 351 }, uniqueKey());
    expect(over.status).toBe(409);
    await expectLedgerConsistent(stack.sql);
  });

  it(
    'one node SIGKILLed mid-flight, each in turn: its payments finish on the other node, once; new payments keep being accepted (no 5xx for a client retrying by key); the node rejoins',
    async () => {
      const inFlight = 3;
      const tally = new ScenarioTally(
        'cluster-node-kill',
        `Temporal cluster: one of two nodes SIGKILLed mid-flight (${inFlight} payments in flight, 8 shards)`,
        'from the SIGKILL until every in-flight payment was recorded and its event delivered (the node stays down meanwhile)',
      );
      let subjects = 0;
      // Each node in turn.
      const result = await runTrials(tally, cluster.nodes.length, async (trial) => {
        const victim = cluster.nodes[trial % cluster.nodes.length]!;
        await untilClusterWhole();
        const plans = Array.from({ length: inFlight }, () => paymentRequest('pm_card_slow'));
        // Clients that retry by key (a 503 claims nothing: the key is sent again until it is taken).
        const firstAnswers = plans.map((plan) => untilFinal(api, plan, QUIET_MS).catch(() => null));
        const { ids, midCharge } = await paymentsInFlight(stack, tenant.id, plans.map((plan) => plan.key), QUIET_MS);
        tally.add('payments caught mid-charge by the fault', midCharge);
        if (midCharge === 0) tally.anomaly('no payment was mid-charge when the node was killed: the trial tested nothing');

        const killedAt = Date.now();
        await victim.stop('SIGKILL');
        // New payments keep arriving while the node is down, each from a client that retries by key.
        const arriving: PaymentRequest[] = [];
        const arrivingAnswers: ReturnType<typeof untilFinal>[] = [];
        let down = true;
        const load = (async () => {
          while (down) {
            const plan = paymentRequest('pm_card_visa');
            arriving.push(plan);
            arrivingAnswers.push(untilFinal(api, plan, QUIET_MS));
            await new Promise((r) => setTimeout(r, 300));
          }
        })();
        const quiet = await untilQuiet(stack, ids, { merchant, timeoutMs: QUIET_MS });
        if (quiet !== null) tally.recovered(Date.now() - killedAt);
        down = false;
        await load;
        const arrived = await Promise.all(arrivingAnswers.map((answer) => answer.catch(() => null)));
        tally.add('payments sent while the node was down', arrived.length);
        tally.add('of those, answered 202 or 503 first and retried by key', arrived.filter((a) => (a?.attempts ?? 0) > 1).length);
        for (const answer of arrived) {
          if (answer?.response.status !== 201) tally.anomaly(`while the node was down, a payment's final answer was ${answer?.response.status ?? 'none'} ${answer?.response.text.slice(0, 200) ?? ''}`);
        }
        for (const answer of await Promise.all(firstAnswers)) {
          // Never a 5xx for the client: 503s were retried, the final answer is the payment.
          if (answer?.response.status !== 201) tally.anomaly(`a client's final answer was ${answer?.response.status ?? 'none'} ${answer?.response.text.slice(0, 200) ?? ''}`);
        }

        const restartAt = Date.now();
        await victim.start();
        tally.sample('node restart took (ms)', Date.now() - restartAt);
        const pairs = [
          ...plans.map((plan, i) => [plan, ids[i]!] as const),
          ...arriving.map((plan, i) => [plan, arrived[i] ? paymentIdIn(arrived[i]!.response) : null] as const),
        ];
        subjects += pairs.length;
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, pairs);
      });
      console.log(`cluster node kill: recovery ${JSON.stringify({ max: result.maxRecoveryMs, median: result.medianRecoveryMs })} ms`);
      expectCleanScenario(result, subjects);
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(2, 180_000),
  );

  it(
    'a rolling restart of both nodes under load: every payment completes once',
    async () => {
      const tally = new ScenarioTally(
        'cluster-rolling-restart',
        'Temporal cluster: rolling restart (SIGTERM, start) of both nodes while payments keep arriving',
        'from the second node back up until every payment was recorded and its event delivered',
      );
      const result = await runTrials(tally, 1, async () => {
        const plans: PaymentRequest[] = [];
        const answers: Promise<string | null>[] = [];
        let sending = true;
        // A payment every 300 ms for the whole restart, each retried by its client until final.
        const load = (async () => {
          while (sending && plans.length < 200) {
            const plan = paymentRequest(plans.length % 3 === 0 ? 'pm_card_slow' : 'pm_card_visa');
            plans.push(plan);
            answers.push(untilFinal(api, plan, QUIET_MS).then(({ response }) => paymentIdIn(response), () => null));
            await new Promise((r) => setTimeout(r, 300));
          }
        })();
        for (const node of cluster.nodes) {
          const sent = plans.length;
          await eventually(() => plans.length >= Math.min(200, sent + 10), 60_000, 100, 'ten more payments sent before the node stops');
          const stoppedAt = Date.now();
          const info = await node.stop('SIGTERM');
          tally.sample(`${node.name} stop (ms, ${info.signal ?? `exit ${info.code}`})`, Date.now() - stoppedAt);
          await node.start();
        }
        const backAt = Date.now();
        const sentWhenBack = plans.length;
        await eventually(() => plans.length >= Math.min(200, sentWhenBack + 10), 60_000, 100, 'ten more payments sent after the restart');
        sending = false;
        await load;
        const ids = await Promise.all(answers);
        tally.add('payments sent during the restart', plans.length);
        const quiet = await untilQuiet(
          stack,
          ids.filter((id): id is string => id !== null),
          { merchant, timeoutMs: QUIET_MS },
        );
        if (quiet !== null) tally.recovered(Date.now() - backAt);
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, plans.map((plan, i) => [plan, ids[i] ?? null] as const));
      });
      expect(result.subjects).toBeGreaterThan(10);
      expectCleanScenario(result, result.subjects);
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(1, 300_000),
  );
});
