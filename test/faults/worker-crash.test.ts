import { afterAll, beforeAll, describe, it } from 'vitest';
import { eventually, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider, expectLedgerConsistent } from '../helpers/effects';
import { FAULT_TRIALS, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { chargeAttempts, chargeInFlight, paymentIdOfKey, untilQuiet } from '../helpers/faults/census';
import type { Merchant } from '../../testkit/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentRequest, type Api } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario, retryAndTally } from '../helpers/faults/verify';
import { spawnWorker, type WorkerEnvironment, type WorkerProcess } from '../../testkit/processes';

/**
 * Scenario 2. The worker process is killed with SIGKILL in the middle of a charge, then a
 * new one is started. Two payments are in flight at each kill:
 * - committed: pm_card_timeout_after_charge; the provider has committed the charge and the
 *   activity is still waiting for an answer that never comes;
 * - in flight: pm_card_slow; the activity's request is still at the provider, which commits
 *   the charge after the worker died.
 * The charge is attempt 1, a local activity in the run's first workflow task: that task dies
 * with the process, its timeout hands it to the new worker, whose try finds attempt 1 recorded
 * and looks the charge up by its sub-key before charging. Exactly one charge each.
 */

let faults: FaultStack;
let stack: TestStack;
let merchant: Merchant;
let tenant: Tenant;
let api: Api;
let environment: WorkerEnvironment;
let current: WorkerProcess | null = null;

beforeAll(async () => {
  // The API, the provider sandbox and an in-process relay; the worker runs as a child process.
  faults = await startFaultStack('worker-crash', { worker: false, sandbox: { slowMs: 6000 } });
  ({ stack, merchant, tenant, api } = faults);
  faults.alsoStop(async () => current?.kill());
  environment = {
    databaseUrl: stack.databaseUrl,
    temporalAddress: stack.temporalAddress,
    taskQueue: stack.taskQueue,
    providerUrl: stack.sandboxUrl,
    // Far above the scenario's kill point: the lost answer is still awaited when the worker dies.
    env: { PROVIDER_TIMEOUT_MS: '60000', WEBHOOK_RETRY_BASE_MS: '200', WEBHOOK_RETRY_MAX_MS: '2000', WEBHOOK_TIMEOUT_MS: '5000' },
  };
  current = await spawnWorker(`worker-crash-${stack.taskQueue}-0`, environment);
});
afterAll(async () => {
  await faults?.stop();
});

describe('2. worker killed mid-charge', () => {
  it(
    'SIGKILL after the provider committed (or while it is committing), then a restart: exactly one charge, the payment completes',
    async () => {
      const tally = new ScenarioTally(
        '2-worker-sigkill',
        '2. Worker SIGKILLed mid-charge, then restarted',
        'from the SIGKILL until both payments of the trial were recorded and their events delivered (includes starting the new worker process and the workflow task timeout)',
      );
      const result = await runTrials(tally, FAULT_TRIALS, async (trial) => {
        // A trial that broke between the kill and the restart leaves no worker: start one.
        current ??= await spawnWorker(`worker-crash-${stack.taskQueue}-${trial}-again`, environment);
        const committed = paymentRequest('pm_card_timeout_after_charge');
        const inFlight = paymentRequest('pm_card_slow');
        const plans = [committed, inFlight];
        const firstAnswers = plans.map((plan) => api.post('/v1/payments', plan.body, plan.key).catch(() => null));

        const [committedId, inFlightId] = await eventually(async () => {
          const ids = await Promise.all(plans.map((plan) => paymentIdOfKey(stack, tenant.id, plan.key)));
          return ids.every(Boolean) ? (ids as string[]) : null;
        }, 60_000);
        await eventually(
          async () =>
            (await chargesAtProvider(stack.sandboxUrl, committedId!)).length > 0 &&
            ((await chargeInFlight(stack, inFlightId!)) || (await chargesAtProvider(stack.sandboxUrl, inFlightId!)).length > 0),
          60_000,
          50,
        );
        // The slow charge usually lands at the provider after the kill; note when it was already there.
        if ((await chargesAtProvider(stack.sandboxUrl, inFlightId!)).length > 0) tally.add('slow charge already committed at the kill', 1);

        const killedAt = Date.now();
        await current!.kill();
        current = null;
        current = await spawnWorker(`worker-crash-${stack.taskQueue}-${trial + 1}`, environment);
        tally.sample('new worker ready after kill (ms)', current.readyAt - killedAt);

        const quiet = await untilQuiet(stack, [committedId!, inFlightId!], { merchant, timeoutMs: QUIET_MS });
        if (quiet !== null) tally.recovered(Date.now() - killedAt);
        await Promise.all(firstAnswers);

        // The kill really interrupted the charge: it was retried, by the new worker.
        const attempts = await chargeAttempts(stack, committedId!);
        tally.sample('charge attempts of the committed payment', attempts);
        if (attempts < 2) tally.anomaly(`${committedId}: its charge was not retried after the kill (attempt ${attempts})`);

        // The client's retry with the same key gets the final answer, for the same payment.
        await retryAndTally(tally, stack, merchant, api, QUIET_MS, [
          [committed, committedId!],
          [inFlight, inFlightId!],
        ]);
      });

      expectCleanScenario(result, FAULT_TRIALS * 2);
      await expectLedgerConsistent(stack.sql);
    },
    scenarioTimeout(FAULT_TRIALS, 120_000),
  );
});
