import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../db/connect';
import type { EmbeddedPostgresHandle } from '../../devstack/embedded-postgres';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres';
import { startTemporalCluster, type TemporalCluster } from '../../devstack/temporal-cluster';
import { apiClient, startStack, type Tenant, type TestStack } from '../helpers/stack';
import { expectLedgerConsistent } from '../helpers/effects';
import { LOGS_DIR, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { paymentsInFlight, untilQuiet } from '../helpers/faults/census';
import { startMerchant, type Merchant } from '../../testkit/merchant';
import { tenantWithMerchant } from '../helpers/faults/merchant';
import { paymentRequest, type Api } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, retryAndTally } from '../helpers/faults/verify';
import { holdFor } from '../helpers/eventually';

/**
 * The PostgreSQL under a two-node cluster (and under the app, as in docker-compose.yml: one
 * server for both) stopped and started again while payments are in flight. The nodes ride
 * it out (persistence calls fail and are retried, shards are reacquired) and every
 * in-flight payment completes, once.
 */

let privatePostgres: PrivatePostgres;
let pg: EmbeddedPostgresHandle;
let cluster: TemporalCluster;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;

beforeAll(async () => {
  privatePostgres = await startPrivatePostgres('cluster-pg');
  pg = privatePostgres.pg;
  cluster = await startTemporalCluster({ postgresUrl: pg.adminUrl, nodes: 2, shards: 4, dataDir: path.join(LOGS_DIR, `cluster-pg-${pg.port}-${Date.now()}`) });
  stack = await startStack({ databaseUrl: pg.url, temporalAddress: cluster.address, sandboxDatabaseUrl: inject('databaseUrl'), sandbox: { slowMs: 5000 } });
  merchant = await startMerchant();
  tenant = await tenantWithMerchant(stack, merchant, 'cluster-postgres');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => {
  await pg?.start();
  await stack?.stop();
  await cluster?.stop();
  await privatePostgres?.remove();
  await merchant?.close();
});

describe('Temporal cluster: its PostgreSQL restarted mid-flight', () => {
  it(
    'the nodes survive it and every in-flight payment completes once',
    async () => {
      const inFlight = 3;
      const tally = new ScenarioTally(
        'cluster-postgres-restart',
        `Temporal cluster: the PostgreSQL under it (and the app) stopped for a few seconds and restarted mid-flight (${inFlight} payments in flight)`,
        'from the restart of PostgreSQL until every in-flight payment was recorded and its event delivered',
      );
      const result = await runTrials(tally, 1, async () => {
        const plans = Array.from({ length: inFlight }, () => paymentRequest('pm_card_slow'));
        const firstAnswers = plans.map((plan) => api.post('/v1/payments', plan.body, plan.key).catch(() => null));
        const { ids, midCharge } = await paymentsInFlight(stack, tenant.id, plans.map((plan) => plan.key));
        tally.add('payments caught mid-charge by the fault', midCharge);
        if (midCharge === 0) tally.anomaly('no payment was mid-charge when PostgreSQL stopped: the trial tested nothing');
        await pg.stop();
        let startedAt: number;
        try {
          await holdFor(3000, 'PostgreSQL stays down for a set time');
        } finally {
          startedAt = Date.now();
          await pg.start();
        }
        const quiet = await untilQuiet(stack, ids, { merchant, timeoutMs: QUIET_MS });
        if (quiet !== null) tally.recovered(Date.now() - startedAt);
        await Promise.all(firstAnswers);
        for (const node of cluster.nodes) if (node.hasExited()) tally.anomaly(`${node.name} exited while PostgreSQL was away`);
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, plans.map((plan, i) => [plan, ids[i]!] as const));
      });
      console.log(`cluster postgres restart: recovery ${result.maxRecoveryMs} ms`);
      expectCleanScenario(result, 3);
      for (const node of cluster.nodes) expect(node.hasExited(), node.name).toBe(false);
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(1, 180_000),
  );
});
