import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import protos from '@temporalio/proto';
import { projectRoot } from '../../devstack/temporal-cli';
import { runningWorkflows } from '../../chaos/checker';
import { startEnvironment, type ChaosEnvironment } from '../../chaos/environment';
import { openAtPsps, openInDatabase, reconcileAfterRun, waitUntilQuiet } from '../../chaos/run';

/**
 * Why the chaos run's wait for quiet includes the workflows, not only the database: a
 * workflow may still run while its payment is final. The first worker dies right
 * after its first record step committed (the charge outcome: payment, ledger, event and the
 * key's final answer in one transaction), before Temporal heard of it. The client already has
 * its final answer and the database has nothing open, yet the workflow still runs: its
 * workflow task times out, runs again on the next worker (the step, replayed, is a no-op)
 * and only then does the run close. It must close by itself: a run that never did would
 * still fail here and be named by the checker.
 *
 * And what the wait for quiet does not wait for: a dispute whose every webhook the PSP lost. The PSP
 * decides it alone; the run's reconciliation (the hourly Schedule's workflow, run once) is what
 * records it, with its money, before the census.
 */

const { EventType } = protos.temporal.api.enums.v1;
let env: ChaosEnvironment;

beforeAll(async () => {
  env = await startEnvironment({
    logsDir: path.join(projectRoot, 'test', 'artifacts', 'chaos-quiet-logs'),
    keyTtlSeconds: 5,
    apiCount: 1,
    temporal: 'dev',
    killPointFor: (worker) => (worker === 0 ? 'after-record-commit:1' : null),
  });
}, 300_000);

afterAll(async () => {
  await env?.teardown();
});

/** One automatic-capture payment of the first tenant, its key retried (every 500 ms, `tries` times) until it has a final answer. */
async function pay(key: string, amountMinor: number, paymentMethod: string, tries: number): Promise<{ status: number; json: { status?: string; id?: string } } | null> {
  for (let attempt = 0; attempt < tries; attempt++) {
    const response = await fetch(`${env.apiUrls[0]}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ order_id: key, amount_minor: amountMinor, currency: 'EUR', payment_method: paymentMethod, capture_method: 'automatic' }),
    }).catch(() => null);
    if (response && ![202, 429, 503].includes(response.status)) return { status: response.status, json: (await response.json()) as { status?: string; id?: string } };
    await new Promise((r) => setTimeout(r, 500));
  }
  return null;
}

describe('the chaos run waits until quiet', () => {
  it(
    'a worker killed right after a record step committed: the database goes quiet first, the workflow closes later by itself, and the wait for quiet includes it',
    async () => {
      const answer = await pay(`quiet-${Date.now()}`, 1234, 'pm_card_visa', 240);
      expect(answer?.status).toBe(201);
      expect(answer?.json.status).toBe('succeeded');

      // Nothing open in the database: a wait for quiet on the database alone would stop here.
      const deadline = Date.now() + 120_000;
      while ((await openInDatabase(env.sql)) !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(await openInDatabase(env.sql)).toBe(0);
      const [payment] = await env.sql<{ status: string; workflow_id: string; updated_at: Date }[]>`SELECT status, workflow_id, updated_at FROM payments WHERE tenant_id = ${env.tenantId}`;
      expect(payment!.status).toBe('succeeded');
      await waitUntilQuiet(env, Date.now() + 180_000);
      expect((await runningWorkflows(env.sql, env.temporal, [env.tenantId])).withoutReason).toEqual([]);
      const history = await env.temporal.workflow.getHandle(payment!.workflow_id).fetchHistory();
      const types = (history.events ?? []).map((e) => e.eventType);
      expect(types).toContain(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT);
      const completed = history.events!.at(-1)!;
      expect(completed.eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED);
      // ... it closed after the payment's final state committed (the record step the worker died
      // after): from that commit on, the payment was final while its run was still open, so a
      // wait for quiet on the database alone could check too early. The commit's time is the row's own
      // (the same machine's clock), not when this test got round to polling: under load the
      // client's retries and the outbox can take longer than the workflow task timeout, so the
      // run may close seconds before this test's poll finds the database quiet.
      const completedAt = Number(completed.eventTime!.seconds) * 1000 + Math.floor((completed.eventTime!.nanos ?? 0) / 1e6);
      expect(completedAt).toBeGreaterThan(payment!.updated_at.getTime());
      const worker = env.supervisors.find((s) => s.name === 'worker')!;
      expect(worker.unplannedExits).toBe(1);
    },
    300_000,
  );

  it(
    'a chargeback whose every webhook the PSP lost: nothing of it reaches the database, the wait for quiet ends, and the reconciliation after the run records it lost, with its money',
    async () => {
      const sandboxA = env.pspUrls['sandbox-a'];
      const faults = async (body: object) => {
        const response = await fetch(`${sandboxA}/_sandbox/webhook_faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        expect(response.status).toBe(200);
      };
      const runStarted = new Date();
      await faults({ loss: 1 });
      let paymentId: string;
      try {
        const answer = await pay(`lost-dispute-${Date.now()}`, 2500, 'pm_card_createDispute', 120);
        expect(answer?.json.status).toBe('succeeded');
        paymentId = answer!.json.id!;
        // The network opens the chargeback a second after the capture and, unanswered, decides it lost at its deadline.
        const psp = env.pspSql['sandbox-a'];
        const deadline = Date.now() + 120_000;
        const disputeAtPsp = async () =>
          (await psp<{ status: string }[]>`SELECT d.status FROM sandbox.disputes d JOIN sandbox.charges c ON c.id = d.charge_id WHERE c.reference = ${paymentId}`)[0]?.status;
        while ((await disputeAtPsp()) !== 'lost' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
        expect(await disputeAtPsp()).toBe('lost');
      } finally {
        await faults({ loss: 0 });
      }
      // Every event of it lost: nothing open at the PSP, nothing in our database, the wait for quiet ends.
      expect(await openAtPsps(env.pspSql)).toBe(0);
      await waitUntilQuiet(env, Date.now() + 120_000);
      expect(await env.sql`SELECT id FROM disputes WHERE payment_id = ${paymentId}`).toHaveLength(0);

      const found = await reconcileAfterRun(env, new Date(runStarted.getTime() - 60_000), Date.now() + 120_000);
      expect(found.disputesFound).toBe(1);
      const [dispute] = await env.sql<{ id: string; stage: string; status: string; amount_minor: number; fee_minor: number }[]>`
        SELECT id, stage, status, amount_minor::int, fee_minor::int FROM disputes WHERE payment_id = ${paymentId}`;
      expect(dispute).toMatchObject({ stage: 'chargeback', status: 'lost', amount_minor: 2500 });
      expect(dispute!.fee_minor).toBeGreaterThan(0);
      // Its money: withdrawn (amount and fee) and lost, each posted once.
      const posted = await env.sql<{ event_key: string }[]>`SELECT event_key FROM ledger_transactions WHERE dispute_id = ${dispute!.id} ORDER BY event_key`;
      expect(posted.map((t) => t.event_key.split(':').at(-1))).toEqual(['loss', 'withdrawal']);
      const events = await env.sql<{ type: string }[]>`SELECT type FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' = ${dispute!.id} ORDER BY type`;
      expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['dispute.closed', 'dispute.created', 'dispute.funds_withdrawn']));
    },
    300_000,
  );
});
