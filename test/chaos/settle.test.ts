import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import protos from '@temporalio/proto';
import { projectRoot } from '../../devstack/temporal-cli';
import { runningWorkflows } from '../../chaos/checker';
import { startEnvironment, type ChaosEnvironment } from '../../chaos/environment';
import { openInDatabase, waitUntilSettled } from '../../chaos/run';

/**
 * Why the chaos run's settle waits for the workflows too, not only for the database: a
 * workflow may still run while its payment is final. The first worker dies right
 * after its first record step committed (the charge outcome: payment, ledger, event and the
 * key's final answer in one transaction), before Temporal heard of it. The client already has
 * its final answer and the database has nothing open, yet the workflow still runs: its
 * workflow task times out, runs again on the next worker (the step, replayed, is a no-op)
 * and only then does the run close. It must close by itself: a run that never did would
 * still fail here and be named by the checker.
 */

const { EventType } = protos.temporal.api.enums.v1;
let env: ChaosEnvironment;

beforeAll(async () => {
  env = await startEnvironment({
    logsDir: path.join(projectRoot, 'test', 'artifacts', 'chaos-settle-logs'),
    keyTtlSeconds: 5,
    apiCount: 1,
    temporal: 'dev',
    killPointFor: (worker) => (worker === 0 ? 'after-record-commit:1' : null),
  });
}, 300_000);

afterAll(async () => {
  await env?.teardown();
});

describe('the chaos run settles', () => {
  it(
    'a worker killed right after a record step committed: the database settles first, the workflow closes later by itself, and the settle waits for it',
    async () => {
      const key = `settle-${Date.now()}`;
      let answer: { status: number; json: { status?: string; id?: string } } | null = null;
      for (let attempt = 0; attempt < 240 && !answer; attempt++) {
        const response = await fetch(`${env.apiUrls[0]}/v1/payments`, {
          method: 'POST',
          headers: { authorization: `Bearer ${env.apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ order_id: key, amount_minor: 1234, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'automatic' }),
        }).catch(() => null);
        if (response && ![202, 429, 503].includes(response.status)) answer = { status: response.status, json: (await response.json()) as { status?: string; id?: string } };
        else await new Promise((r) => setTimeout(r, 500));
      }
      expect(answer?.status).toBe(201);
      expect(answer?.json.status).toBe('succeeded');

      // Nothing open in the database: a settle on the database alone would stop here.
      const deadline = Date.now() + 120_000;
      while ((await openInDatabase(env.sql)) !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(await openInDatabase(env.sql)).toBe(0);
      const [payment] = await env.sql<{ status: string; workflow_id: string; updated_at: Date }[]>`SELECT status, workflow_id, updated_at FROM payments WHERE tenant_id = ${env.tenantId}`;
      expect(payment!.status).toBe('succeeded');
      await waitUntilSettled(env, Date.now() + 180_000);
      expect((await runningWorkflows(env.sql, env.temporal, [env.tenantId])).withoutReason).toEqual([]);
      const history = await env.temporal.workflow.getHandle(payment!.workflow_id).fetchHistory();
      const types = (history.events ?? []).map((e) => e.eventType);
      expect(types).toContain(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT);
      const completed = history.events!.at(-1)!;
      expect(completed.eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED);
      // ... it closed after the payment's final state committed (the record step the worker died
      // after): from that commit on, the payment was final while its run was still open, so a
      // settle on the database alone could check too early. The commit's time is the row's own
      // (the same machine's clock), not when this test got round to polling: under load the
      // client's retries and the outbox can take longer than the workflow task timeout, so the
      // run may close seconds before this test's poll finds the database settled.
      const completedAt = Number(completed.eventTime!.seconds) * 1000 + Math.floor((completed.eventTime!.nanos ?? 0) / 1e6);
      expect(completedAt).toBeGreaterThan(payment!.updated_at.getTime());
      const worker = env.supervisors.find((s) => s.name === 'worker')!;
      expect(worker.unplannedExits).toBe(1);
    },
    300_000,
  );
});
