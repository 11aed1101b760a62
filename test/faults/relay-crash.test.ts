import { afterAll, beforeAll, describe, it } from 'vitest';
import { apiClient, eventually, type TestStack } from '../helpers/stack';
import { FAULT_TRIALS, QUIET_MS, scenarioTimeout } from '../helpers/faults/config';
import { judge, takeCensus, untilQuiet } from '../helpers/faults/census';
import { startMerchant, type Merchant } from '../../testkit/merchant';
import { tenantWithMerchant } from '../helpers/faults/merchant';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentIdIn, paymentRequest, untilFinal } from '../helpers/faults/payments';
import { runTrials, ScenarioTally } from '../helpers/faults/results';
import { expectCleanScenario } from '../helpers/faults/verify';
import { spawnWorker, type WorkerEnvironment, type WorkerProcess } from '../../testkit/processes';

/**
 * Scenario 6. The outbox relay dies mid-delivery: the worker process that runs it is
 * SIGKILLed while the merchant's endpoint hangs on a delivery, then the endpoint goes down
 * for a while (connection refused). Every event must reach the merchant later, under its
 * one event id, with each failed attempt and its backoff recorded in webhook_deliveries.
 *
 * The killed relay's claim holds until its lease ends (WEBHOOK_TIMEOUT_MS + 30 s), so the
 * trials overlap: each kill is followed by a restart and the next trial, while a monitor
 * waits for the previous trial's events to be retried, brings its endpoint back and counts.
 */

const paymentsPerTrial = 3;
const retryBaseMs = 1000;
const retryMaxMs = 4000;
let faults: FaultStack;
let stack: TestStack;
let environment: WorkerEnvironment;
let current: WorkerProcess | null = null;
const merchants: Merchant[] = [];

beforeAll(async () => {
  // Each trial has a merchant and tenant of its own, beside the fault stack's.
  faults = await startFaultStack('relay-crash', { worker: false });
  stack = faults.stack;
  faults.alsoStop(async () => {
    for (const merchant of merchants) await merchant.close();
  });
  faults.alsoStop(async () => current?.kill());
  // The worker process's relay is the one that dies; no in-process relay covers for it.
  await stack.relay.stop();
  environment = {
    databaseUrl: stack.databaseUrl,
    temporalAddress: stack.temporalAddress,
    taskQueue: stack.taskQueue,
    providerUrl: stack.sandboxUrl,
    env: {
      PROVIDER_TIMEOUT_MS: '5000',
      // One attempt may hang 5 s; the lease of a claimed event is that plus 30 s.
      WEBHOOK_TIMEOUT_MS: '5000',
      WEBHOOK_RETRY_BASE_MS: String(retryBaseMs),
      WEBHOOK_RETRY_MAX_MS: String(retryMaxMs),
      WEBHOOK_MAX_ATTEMPTS: '60',
    },
  };
  current = await spawnWorker(`relay-crash-${stack.taskQueue}-0`, environment);
});
afterAll(async () => {
  await faults?.stop();
});

interface Attempt {
  attempt: number;
  response_status: number | null;
  error: string | null;
  at: Date;
}

describe('6. outbox relay killed mid-delivery, merchant endpoint down for a while', () => {
  it(
    'delivers every event later, under the same event id, with the failed attempts and their backoff recorded',
    async () => {
      const tally = new ScenarioTally(
        '6-relay-sigkill',
        `6. Outbox relay SIGKILLed mid-delivery, webhook endpoint then down (${paymentsPerTrial} events per kill)`,
        'from the endpoint coming back until every event of the trial was acknowledged by it (the killed relay\'s lease, 35 s, passes before; see "kill to delivered")',
        'events',
      );
      const monitors: Promise<void>[] = [];

      await runTrials(tally, FAULT_TRIALS, async (trial) => {
        current ??= await spawnWorker(`relay-crash-${stack.taskQueue}-${trial}-again`, environment);
        const merchant = await startMerchant('hang');
        merchants.push(merchant);
        const tenant = await tenantWithMerchant(stack, merchant, `relay-crash-${trial}`);
        const api = apiClient(stack.apiUrl, tenant.apiKey);
        const plans = Array.from({ length: paymentsPerTrial }, () => paymentRequest('pm_card_visa'));
        const answers = await Promise.all(plans.map((plan) => untilFinal(api, plan, QUIET_MS)));
        const paymentIds = answers.map(({ response }) => paymentIdIn(response)!);
        if (answers.some(({ response }) => response.status !== 201)) tally.anomaly(`trial ${trial + 1}: payments answered ${answers.map((a) => a.response.status)}`);

        // Mid-delivery: the relay is waiting on the hanging endpoint, every event is in the outbox.
        const eventIds = await eventually(async () => {
          const rows = await stack.sql<{ id: string }[]>`
            SELECT id FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' IN ${stack.sql(paymentIds)}`;
          return rows.length === paymentsPerTrial && merchant.hung.size > 0 ? rows.map((r) => r.id) : null;
        }, 60_000, 20);
        const killedAt = Date.now();
        await current!.kill();
        current = null;
        await merchant.down();
        tally.add('events mid-delivery at the kill', merchant.hung.size);
        tally.add('events still pending at the kill', eventIds.filter((id) => !merchant.hung.has(id)).length);
        current = await spawnWorker(`relay-crash-${stack.taskQueue}-${trial + 1}`, environment);

        monitors.push(
          (async () => {
            // The endpoint stays down until every event has failed at least twice (backoff on record).
            await eventually(async () => {
              const [row] = await stack.sql<{ ready: number }[]>`
                SELECT count(*)::int AS ready FROM (
                  SELECT event_id FROM webhook_deliveries WHERE event_id IN ${stack.sql(eventIds)} AND error IS NOT NULL
                  GROUP BY event_id HAVING count(*) >= 2) failed`;
              return row!.ready === eventIds.length;
            }, QUIET_MS, 200);
            const upAt = Date.now();
            await merchant.up();
            const quiet = await untilQuiet(stack, paymentIds, { merchant, timeoutMs: QUIET_MS });
            if (quiet !== null) {
              tally.recovered(Date.now() - upAt);
              tally.sample('kill to delivered (ms)', Date.now() - killedAt);
            }
            // A later trial's kill may strike a relay after the merchant acknowledged but before
            // the relay recorded it: the event stays pending and is delivered again, same id,
            // once that relay's lease ends. Wait for the outbox to agree before reading its log.
            await eventually(async () => {
              const [row] = await stack.sql<{ open: number }[]>`
                SELECT count(*)::int AS open FROM outbox_events WHERE id IN ${stack.sql(eventIds)} AND delivery_state <> 'delivered'`;
              return row!.open === 0;
            }, QUIET_MS, 200).catch(() => tally.anomaly(`trial ${trial + 1}: the outbox never recorded every delivery`));
            for (const [i, paymentId] of paymentIds.entries()) {
              const judgement = judge(await takeCensus(stack, paymentId, { merchant, countRuns: true }), plans[i]!.outcome);
              tally.judged(judgement);
              tally.add('redeliveries (same event id, deduped by the merchant)', judgement.redeliveries);
            }
            for (const eventId of eventIds) checkAttempts(tally, eventId, await attemptsOf(eventId));
          })().catch((error) => tally.anomaly(`trial ${trial + 1} monitor broke: ${(error as Error)?.stack ?? error}`)),
        );
      });
      await Promise.all(monitors);
      const result = tally.write();

      expectCleanScenario(result, FAULT_TRIALS * paymentsPerTrial);
    },
    scenarioTimeout(FAULT_TRIALS, 60_000, 300_000),
  );
});

async function attemptsOf(eventId: string): Promise<{ attempts: Attempt[]; state: string; counted: number }> {
  const attempts = await stack.sql<Attempt[]>`
    SELECT attempt, response_status, error, created_at AS at FROM webhook_deliveries WHERE event_id = ${eventId} ORDER BY attempt`;
  const [event] = await stack.sql<{ delivery_state: string; attempts: number }[]>`SELECT delivery_state, attempts FROM outbox_events WHERE id = ${eventId}`;
  return { attempts, state: event!.delivery_state, counted: event!.attempts };
}

/**
 * The delivery log of one event: attempts numbered 1..n without gaps, failures while the
 * endpoint was down, one final 2xx, and between two attempts at least the smallest delay
 * the backoff allows (base x 2^(n-1), capped, -20% jitter): the retries really backed off.
 */
function checkAttempts(tally: ScenarioTally, eventId: string, log: { attempts: Attempt[]; state: string; counted: number }): void {
  const { attempts } = log;
  const problems: string[] = [];
  if (attempts.some((a, i) => a.attempt !== i + 1)) problems.push(`attempts not numbered 1..n: ${attempts.map((a) => a.attempt)}`);
  const last = attempts[attempts.length - 1];
  if (!last || last.response_status === null || last.response_status < 200 || last.response_status >= 300) problems.push('last attempt is not a 2xx');
  const failures = attempts.slice(0, -1);
  if (failures.length < 2 || failures.some((a) => a.error === null)) problems.push(`expected >= 2 recorded failures before the delivery, got ${failures.length}`);
  if (log.state !== 'delivered' || log.counted !== attempts.length) problems.push(`outbox says ${log.state} after ${log.counted} attempts, log has ${attempts.length}`);
  const gaps: number[] = [];
  for (let i = 1; i < attempts.length; i++) {
    const gap = attempts[i]!.at.getTime() - attempts[i - 1]!.at.getTime();
    const floor = 0.8 * Math.min(retryMaxMs, retryBaseMs * 2 ** (attempts[i - 1]!.attempt - 1));
    gaps.push(gap);
    if (gap < floor - 5) problems.push(`attempt ${attempts[i]!.attempt} came ${gap} ms after the previous one, below the ${floor} ms backoff floor`);
  }
  tally.sample('retry gaps (ms)', gaps);
  tally.add('failed attempts recorded', failures.length);
  for (const problem of problems) tally.anomaly(`event ${eventId}: ${problem}`);
}
