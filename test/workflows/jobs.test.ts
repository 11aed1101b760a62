import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/activity';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { JobSteps } from '../../activities';
import { JobFailureType } from '../../shared/jobs';
import type { ReconcileProviderInput, ReconciliationResult } from '../../shared/reconciliation';
import { testDataConverter } from '../../testkit/payload-keys';

/**
 * The periodic jobs' workflows (workflows/jobs.ts) on a real worker and the run's dev server,
 * with fake activities: the paths a real PSP rarely takes on cue (one provider failing for
 * good while another succeeds) and the window a run started outside a Schedule covers.
 */

const taskQueue = `jobs-${randomBytes(4).toString('hex')}`;
const calls: { step: string; input: unknown }[] = [];
let worker: Worker;
let running: Promise<void>;
let nativeConnection: NativeConnection;
let connection: Connection;
let client: Client;

const fakes: Partial<JobSteps> = {
  async reconcileProviderWindow(input: ReconcileProviderInput) {
    calls.push({ step: 'reconcileProviderWindow', input });
    if (input.provider === 'broken') throw ApplicationFailure.nonRetryable('the report could not be read', JobFailureType.Misconfigured);
    return { runId: `rcn_${input.provider}`, provider: input.provider, window: input.window, status: 'clean', discrepancyCount: 0, newDiscrepancyCount: 0 };
  },
  async recordReconciliationFailure(input) {
    calls.push({ step: 'recordReconciliationFailure', input });
    return { runId: `rcn_${input.provider}`, provider: input.provider, window: input.window, status: 'failed', discrepancyCount: 0, newDiscrepancyCount: 0 };
  },
};

beforeAll(async () => {
  nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') },
    activities: fakes,
    dataConverter: testDataConverter,
  });
  running = worker.run();
  connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection, dataConverter: testDataConverter });
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await nativeConnection?.close();
  await connection?.close();
});

describe('reconciliationWorkflow', () => {
  it('one provider failing for good does not stop the next: its run is recorded as failed, and the workflow fails naming it', async () => {
    calls.length = 0;
    const handle = await client.workflow.start('reconciliationWorkflow', {
      taskQueue,
      workflowId: `jobs-${randomBytes(4).toString('hex')}`,
      args: [{ providers: ['broken', 'sandbox'], window: { kind: 'explicit', from: '2026-11-30T10:00:00Z', to: '2026-11-30T11:00:00Z' } }],
    });
    const failure = await handle.result().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).cause).toMatchObject({ type: JobFailureType.ReconciliationFailed, message: expect.stringMatching(/reconciliation failed for broken/) });
    expect(calls.map((c) => `${c.step} ${(c.input as { provider: string }).provider}`)).toEqual([
      'reconcileProviderWindow broken',
      'recordReconciliationFailure broken',
      'reconcileProviderWindow sandbox',
    ]);
    expect(calls[1]!.input).toMatchObject({ error: 'the report could not be read', runKey: expect.stringMatching(new RegExp(`^${handle.workflowId}/.+/broken$`)) });
  });

  it('started by hand (no Schedule): the window is relative to the run’s start time', async () => {
    calls.length = 0;
    const before = Date.now();
    const result: ReconciliationResult = await client.workflow.execute('reconciliationWorkflow', {
      taskQueue,
      workflowId: `jobs-${randomBytes(4).toString('hex')}`,
      args: [{ providers: ['sandbox'], window: { kind: 'trailing_hours', hours: 2 } }],
    });
    const hour = Math.floor(before / 3_600_000) * 3_600_000;
    expect([hour, hour + 3_600_000]).toContain(Date.parse(result.window.to));
    expect(Date.parse(result.window.to) - Date.parse(result.window.from)).toBe(2 * 3_600_000);
    expect(result.runs).toEqual([expect.objectContaining({ provider: 'sandbox', status: 'clean' })]);
  });

  it('an empty explicit window fails the run at once (not a workflow task retried forever)', async () => {
    const handle = await client.workflow.start('reconciliationWorkflow', {
      taskQueue,
      workflowId: `jobs-${randomBytes(4).toString('hex')}`,
      args: [{ providers: ['sandbox'], window: { kind: 'explicit', from: '2026-11-30T11:00:00Z', to: '2026-11-30T10:00:00Z' } }],
    });
    const failure = await handle.result().then(
      () => null,
      (error: unknown) => error,
    );
    expect((failure as WorkflowFailedError).cause).toMatchObject({ type: JobFailureType.InvalidWindow });
  });
});
