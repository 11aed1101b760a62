import { randomBytes } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Context } from '@temporalio/activity';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { FinalResponse } from '../../shared/definitions';
import { disputeEvidenceUpdate, disputeReportSignal, type DisputeReport, type DisputeStanding, type DisputeWorkflowInput, type ProviderDispute } from '../../shared/disputes';
import { eventually } from '../helpers/stack';
import { installTestRuntime } from '../helpers/runtime';

/**
 * disputeWorkflow with fake activities: a PSP that stops answering the run's scheduled looks
 * holds back neither the reminder nor the report that closes the dispute; a flood of reports and
 * commands makes the run continue as new, its state carried over. End to end:
 * test/integration/disputes.test.ts.
 */

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = `dispute-unit-${randomBytes(4).toString('hex')}`;
const reminders: { disputeId: string; beforeMs: number }[] = [];
let looks = 0;
/** The runs that recorded a report, by dispute: a run that continued as new is another run id. */
const runsOf = new Map<string, Set<string>>();
/** The standings each dispute's reports were recorded at, in order. */
const recorded = new Map<string, string[]>();
const sentToPsp: { subKey: string; evidence?: Record<string, string>; evidenceOf?: { disputeId: string; digest: string } }[] = [];
const flagged: string[] = [];
/** How long recording a report of a dispute takes, by dispute id (none by default). */
const recordingTakes = new Map<string, number>();

const standingOf = (dispute: ProviderDispute): DisputeStanding => ({
  disputeId: `dsp_${dispute.id}`,
  paymentId: 'pay_disputed',
  stage: dispute.stage,
  status: dispute.status,
  evidenceDueBy: dispute.evidenceDueBy,
  closed: dispute.status === 'won' || dispute.status === 'lost',
  paymentRefundedInFull: false,
  // A dispute id `dpr_…`: its payment was refunded in part before the dispute came.
  ...(dispute.id.startsWith('dpr_') ? { paymentRefund: { refundedMinor: 800, capturedMinor: 3_000, currency: 'EUR' } } : {}),
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
      recordDisputeReport: async ({ report }: { report: DisputeReport }) => {
        const runs = runsOf.get(report.dispute.id) ?? new Set<string>();
        runs.add(Context.current().info.workflowExecution?.runId ?? 'unknown');
        runsOf.set(report.dispute.id, runs);
        // A dispute id `dps_…`: each report takes a while to record (a busy database).
        const recordingMs = report.dispute.id.startsWith('dps_') ? 500 : (recordingTakes.get(report.dispute.id) ?? 0);
        if (recordingMs > 0) await new Promise((resolve) => setTimeout(resolve, recordingMs));
        recorded.set(report.dispute.id, [...(recorded.get(report.dispute.id) ?? []), `${report.dispute.stage} ${report.dispute.status}`]);
        return standingOf(report.dispute);
      },
      updateDispute: async (input: { providerDisputeId: string; subKey: string; evidence?: Record<string, string>; evidenceOf?: { disputeId: string; digest: string } }) => {
        sentToPsp.push({ subKey: input.subKey, ...(input.evidence ? { evidence: input.evidence } : {}), ...(input.evidenceOf ? { evidenceOf: input.evidenceOf } : {}) });
        return dispute(input.providerDisputeId, 'needs_response', 60_000);
      },
      recordDisputeCommand: async (): Promise<FinalResponse> => ({ status: 200, body: '{}', location: null }),
      flagDisputedRefundedPayment: async ({ disputeId }: { disputeId: string }) => {
        flagged.push(disputeId);
      },
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

  it('a flood of reports and commands: the run continues as new, each run’s history bounded, the reports still waiting, the reminders, the refund evidence and the next poll carried over', async () => {
    const id = `dpr_${randomBytes(6).toString('hex')}`;
    const workflowId = `dispute-unit-${id}`;
    const startedAt = Date.now();
    // A reminder 1 s after the start; the first poll an hour away; a new run past 60 events.
    const input: DisputeWorkflowInput = { provider: 'sandbox', providerDisputeId: id, remindersBeforeMs: [59_000], pollEveryMs: 3_600_000, continueAfterEvents: 60 };
    await env.client.workflow.signalWithStart('disputeWorkflow', {
      taskQueue,
      workflowId,
      args: [input],
      signal: disputeReportSignal,
      signalArgs: [{ source: 'webhook', eventId: 'evt_opened', dispute: dispute(id, 'needs_response', 60_000) }],
    });
    await eventually(async () => reminders.some((r) => r.disputeId === `dsp_${id}`), 20_000, 50, 'the reminder recorded');
    await eventually(async () => flagged.includes(`dsp_${id}`), 20_000, 50, 'the refund submitted as evidence');

    // Forty reports arrive at once, faster than they are recorded: they wait in the run that received them. Then four commands.
    recordingTakes.set(id, 100);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        env.client.workflow.getHandle(workflowId).signal(disputeReportSignal, { source: 'webhook', eventId: `evt_${i}`, dispute: dispute(id, 'needs_response', 60_000) }),
      ),
    );
    for (const i of [9, 19, 29, 39]) {
      const idempotency = { tenantId: 'ten_unit', operation: 'POST /v1/disputes/{id}/evidence', key: `key-${i}`, fingerprint: `fp${i}`.padEnd(64, '0'), retentionSeconds: 3600 };
      const answer = await env.client.workflow.getHandle(workflowId).executeUpdate(disputeEvidenceUpdate, { args: [{ evidenceDigest: `digest-${i}`, submit: false, idempotency, requestId: `req-${i}` }] });
      expect(answer).toEqual({ status: 200, body: '{}', location: null });
    }
    // The waiting reports went on to the new runs, each recording its share until its history reached the bound.
    await eventually(async () => (recorded.get(id)?.length ?? 0) >= 1 + 40 + 4, 120_000, 50, 'every report recorded');
    expect(runsOf.get(id)!.size).toBeGreaterThanOrEqual(3);

    // Every run's history stays near its bound, whatever arrived.
    const runIds = [...runsOf.get(id)!];
    for (const runId of runIds) {
      const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
      expect(history.events!.length).toBeLessThan(130);
    }
    // What each new run started from: the standing, the reminder sent, the refund sent, the same next poll.
    const carried = [];
    for (const runId of runIds.slice(1)) {
      const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
      const payload = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
      carried.push((JSON.parse(Buffer.from(payload.data!).toString()) as DisputeWorkflowInput).continued!);
    }
    for (const state of carried) {
      expect(state).toMatchObject({ standing: { disputeId: `dsp_${id}`, status: 'needs_response' }, reminded: ['chargeback:59000'], refundEvidenceSent: true });
      expect(state.nextPollAt).toBe(carried[0]!.nextPollAt);
    }
    expect(Math.abs(carried[0]!.nextPollAt - (startedAt + 3_600_000))).toBeLessThan(10_000);

    // Once each, across the runs: the reminder and the refund as evidence. The merchant's evidence went by its digest only.
    expect(reminders.filter((r) => r.disputeId === `dsp_${id}`)).toHaveLength(1);
    const mine = sentToPsp.filter((c) => c.subKey.startsWith(`dsp_${id}:`));
    expect(mine.filter((c) => c.subKey.endsWith('refund-evidence'))).toHaveLength(1);
    expect(mine.filter((c) => c.subKey.endsWith('refund-evidence'))[0]!.evidence!.uncategorized_text).toContain('800 of');
    const commands = mine.filter((c) => !c.subKey.endsWith('refund-evidence'));
    expect(commands.map((c) => c.evidenceOf)).toEqual([9, 19, 29, 39].map((i) => ({ disputeId: `dsp_${id}`, digest: `digest-${i}` })));
    expect(commands.every((c) => c.evidence === undefined)).toBe(true);

    await env.client.workflow.getHandle(workflowId).signal(disputeReportSignal, { source: 'webhook', eventId: 'evt_won', dispute: dispute(id, 'won', 60_000) });
    expect(await env.client.workflow.getHandle(workflowId).result()).toEqual({ disputeId: `dsp_${id}`, status: 'won' });
  }, 240_000);

  it('a report that arrives while the closing one is recorded is recorded too: a chargeback won, then its second round lost in the same batch, ends lost in one run', async () => {
    const id = `dps_${randomBytes(6).toString('hex')}`;
    const input: DisputeWorkflowInput = { provider: 'adyen-test', providerDisputeId: id, remindersBeforeMs: [], pollEveryMs: 3_600_000 };
    const handle = await env.client.workflow.signalWithStart('disputeWorkflow', {
      taskQueue,
      workflowId: `dispute-unit-${id}`,
      args: [input],
      signal: disputeReportSignal,
      signalArgs: [{ source: 'webhook', eventId: 'evt_reversed', dispute: dispute(id, 'won', 60_000) }],
    });
    // While the reversal is being recorded (500 ms), the issuer's second chargeback comes.
    await handle.signal(disputeReportSignal, { source: 'webhook', eventId: 'evt_second', dispute: { ...dispute(id, 'lost', 60_000), stage: 'pre_arbitration' } });
    expect(await handle.result()).toEqual({ disputeId: `dsp_${id}`, status: 'lost' });
    // (A local step the signal's task met while it ran may run again: recording is forward-only.)
    expect([...new Set(recorded.get(id))]).toEqual(['chargeback won', 'pre_arbitration lost']);
    expect(runsOf.get(id)?.size).toBe(1);
    // New code records its choice: a history without the marker (recorded before) replays the old path.
    const history = await handle.fetchHistory();
    const patches = (history.events ?? []).flatMap((e) => {
      const marker = e.markerRecordedEventAttributes;
      return marker?.markerName === 'core_patch' ? [Buffer.from(marker.details!['patch-data']!.payloads![0]!.data!).toString()] : [];
    });
    expect(patches.join()).toContain('dispute-reports-after-close');
  });
});
