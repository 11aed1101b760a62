import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { DisputeStanding } from '../../activities';
import { disputeReportSignal, type DisputeReport, type DisputeWorkflowInput, type ProviderDispute } from '../../shared/definitions';
import { eventually } from '../helpers/stack';
import { installTestRuntime } from '../helpers/runtime';

/**
 * disputeWorkflow's waits with fake activities: a PSP that stops answering the run's scheduled
 * looks holds back neither the reminder nor the report that closes the dispute. End to end:
 * test/integration/disputes.test.ts.
 */

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = `dispute-unit-${randomBytes(4).toString('hex')}`;
const reminders: { disputeId: string; beforeMs: number }[] = [];
let looks = 0;

const standingOf = (dispute: ProviderDispute): DisputeStanding => ({
  disputeId: `dsp_${dispute.id}`,
  paymentId: 'pay_disputed',
  stage: dispute.stage,
  status: dispute.status,
  evidenceDueBy: dispute.evidenceDueBy,
  closed: dispute.status === 'won' || dispute.status === 'lost',
  paymentRefundedInFull: false,
});

beforeAll(async () => {
  await installTestRuntime();
  env = await TestWorkflowEnvironment.createFromExistingServer({ address: inject('temporalAddress'), namespace: 'default' });
  worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    workflowBundle: { codePath: inject('workflowBundlePath') },
    activities: {
      recordDisputeReport: async ({ report }: { report: DisputeReport }) => standingOf(report.dispute),
      recordDisputeReminder: async (input: { disputeId: string; beforeMs: number }) => {
        reminders.push(input);
        return true;
      },
      retrieveDispute: async () => {
        looks += 1;
        throw new Error('the PSP is unavailable');
      },
    },
  });
  running = worker.run();
});
afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

function dispute(id: string, status: ProviderDispute['status'], dueInMs: number): ProviderDispute {
  const now = new Date();
  return {
    id, chargeId: 'ch_disputed', reference: 'pay_disputed', amountMinor: 5_000, currency: 'EUR', reason: 'fraudulent',
    stage: 'chargeback', status, evidenceDueBy: new Date(now.getTime() + dueInMs).toISOString(), evidenceSubmittedAt: null,
    createdAt: now.toISOString(), feeMinor: 1_500,
  };
}

describe('dispute workflow', () => {
  it('a PSP that fails every scheduled look holds back neither the reminder before the deadline nor the report that closes the dispute', async () => {
    const id = `dp_${randomBytes(6).toString('hex')}`;
    const input: DisputeWorkflowInput = { provider: 'sandbox', providerDisputeId: id, remindersBeforeMs: [3_000], pollEveryMs: 200 };
    const handle = await env.client.workflow.signalWithStart('disputeWorkflow', {
      taskQueue,
      workflowId: `dispute-unit-${id}`,
      args: [input],
      signal: disputeReportSignal,
      signalArgs: [{ source: 'webhook', eventId: 'evt_opened', dispute: dispute(id, 'needs_response', 6_000) }],
    });
    // The first look fails (all its tries) before the reminder is due, 3 s after the start.
    await eventually(async () => looks >= 3, 20_000, 50, 'the looks failed');
    await eventually(async () => reminders.some((r) => r.disputeId === `dsp_${id}`), 20_000, 50, 'the reminder recorded');
    expect(reminders.filter((r) => r.disputeId === `dsp_${id}`)).toEqual([{ disputeId: `dsp_${id}`, beforeMs: 3_000 }]);
    await handle.signal(disputeReportSignal, { source: 'webhook', eventId: 'evt_won', dispute: dispute(id, 'won', 6_000) });
    expect(await handle.result()).toEqual({ disputeId: `dsp_${id}`, status: 'won' });
  });
});
