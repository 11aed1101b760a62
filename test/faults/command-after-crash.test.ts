import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { chargeAttempts } from '../helpers/faults/census';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentRequest, type Api, type ApiResponse } from '../helpers/faults/payments';
import { spawnWorker, type WorkerEnvironment, type WorkerProcess } from '../../testkit/processes';

/**
 * A capture or cancel sent at once after its payment's `201 requires_capture`, when the worker
 * died right after recording that answer (kill point `after-record-commit` at
 * recordChargeOutcome, the run's first record step on a one-PSP route) and before its first
 * workflow task completed. The command reaches the run while no worker runs; the next worker
 * runs that first task again, and the command arrives with it, before the run has registered
 * its handlers (they are registered when the wait for capture begins). That is no refusal:
 * the command is never answered a stored 409; it is carried out (200, or 202 and then 200 on
 * the retry with the same key), and the key replays the success.
 */

let faults: FaultStack;
let stack: TestStack;
let tenant: Tenant;
let api: Api;
let environment: WorkerEnvironment;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  faults = await startFaultStack('command-after-crash', {
    worker: false,
    // Longer than the first workflow task's timeout (10 s): the command's first send is still
    // waiting when the new worker runs the task again, so the run's answer to it then is what
    // the key would record.
    api: { TEMPORAL_RPC_TIMEOUT_MS: 60_000 },
  });
  ({ stack, tenant, api } = faults);
  faults.alsoStop(async () => Promise.all(workers.map((worker) => worker.kill())));
  environment = { databaseUrl: stack.databaseUrl, temporalAddress: stack.temporalAddress, taskQueue: stack.taskQueue, providerUrl: stack.sandboxUrl };
});
// Each test's kill must land in its own payment's first task: no worker of an earlier test may take it.
afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop();
});
afterAll(async () => {
  await faults?.stop();
});

async function startWorker(name: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const worker = await spawnWorker(`command-after-crash-${stack.taskQueue}-${name}`, { ...environment, env });
  workers.push(worker);
  return worker;
}

/** The command's answers under one key, sent again (as a client does) while they are 202 or 503. */
async function untilFinal(path: string, key: string, first: Promise<ApiResponse>): Promise<ApiResponse[]> {
  const answers = [await first];
  await eventually(async () => {
    const last = answers.at(-1)!;
    if (last.status !== 202 && last.status !== 503) return true;
    answers.push(await api.post(path, {}, key));
    return false;
  }, 120_000, 500);
  return answers;
}

describe.each([
  { command: 'capture' as const, status: 'succeeded', captured: true },
  { command: 'cancel' as const, status: 'canceled', captured: false },
])('$command sent right after 201 requires_capture, the worker killed before the first workflow task completed', ({ command, status, captured }) => {
  it(
    'is carried out (never a stored 409) and the key replays its success',
    async () => {
      // recordChargeOutcome is the run's first record step (attempt 1 is begun by the route's
      // plan, outside the record steps): the worker dies on its first pass, right after the commit.
      const armed = await startWorker(`${command}-armed`, { CHAOS_KILL_AT: 'after-record-commit:1' });
      const plan = paymentRequest('pm_card_visa', 'manual');
      const created = await api.post('/v1/payments', plan.body, plan.key);
      expect(created.status).toBe(201);
      expect(created.json.status).toBe('requires_capture');
      const paymentId = created.json.id as string;
      await eventually(() => armed.exited(), 30_000);

      // Sent at once, while no worker runs; the next worker starts right after.
      const path = `/v1/payments/${paymentId}/${command}`;
      const key = uniqueKey(command);
      const first = api.post(path, {}, key);
      await startWorker(`${command}-next`);
      const answers = await untilFinal(path, key, first);

      expect(answers.map((answer) => answer.status).filter((code) => code !== 202 && code !== 503)).toEqual([200]);
      const done = answers.at(-1)!;
      expect(done.json).toMatchObject({ id: paymentId, status });
      // The defect's path was taken: the first workflow task ran again, charging (looking up) a second time.
      expect(await chargeAttempts(stack, paymentId)).toBeGreaterThanOrEqual(2);

      const replay = await api.post(path, {}, key);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(done.text);

      const { json: payment } = await api.get(`/v1/payments/${paymentId}`);
      expect(payment).toMatchObject({ status, amount_captured_minor: captured ? plan.body.amount_minor : 0 });
      const [charge] = await chargesAtProvider(stack.sandboxUrl, paymentId);
      expect(charge).toMatchObject({ amount_captured_minor: captured ? plan.body.amount_minor : 0 });
      await expectLedgerConsistent(stack.sql, tenant.id);
    },
    300_000,
  );
});
