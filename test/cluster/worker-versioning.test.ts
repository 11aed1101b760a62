import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import protos from '@temporalio/proto';
import { projectRoot } from '../../devstack/temporal-cli';
import { eventually, holdFor } from '../helpers/eventually';
import { deploymentRouting, versionDrainage } from '../../devstack/worker-deployment';
import { adminUrl, bannerPids, cleanUpLaunches, databasesToDrop, descendants, expectCleanExit, isAlive, launchStart, waitForBanner, type Launch } from '../helpers/launch';

/**
 * Worker Versioning across a deploy (docs/versioning.md), on `npm start` in cluster mode (the
 * production Temporal server on PostgreSQL; VERSIONING_TEST_TEMPORAL_MODE=dev runs the same on
 * the dev server): a payment authorized on version 1 and waiting for its capture stays pinned
 * to version 1 while `npm run rolling-upgrade` makes version 2 current; new payments run on
 * version 2; version 1's worker, killed while it drains, is started again as version 1; the
 * capture runs there; only then is version 1 drained and its worker stopped.
 */

afterEach(cleanUpLaunches, 120_000);

const EventType = protos.temporal.api.enums.v1.EventType;
const mode = process.env.VERSIONING_TEST_TEMPORAL_MODE ?? 'cluster';

interface UpgradeStatus {
  status: string;
  phase?: string;
  openPinnedRuns?: number;
}

async function createTenant(apiUrl: string, banner: string): Promise<string> {
  const adminToken = /ADMIN_TOKEN\s+(\S+)/.exec(banner)![1]!;
  const response = await fetch(`${apiUrl}/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'versioning' }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { api_key: string }).api_key;
}

/** A client that retries by key on 202 and 503 (the API's answers while the workflow is out of reach) until a final answer. */
async function post(apiUrl: string, apiKey: string, pathname: string, body: unknown): Promise<{ status: number; json: any }> {
  const key = `ver-${randomBytes(8).toString('hex')}`;
  const deadline = Date.now() + 180_000;
  for (;;) {
    const response = await fetch(`${apiUrl}${pathname}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = { status: response.status, json: await response.json() };
    if ((answer.status !== 202 && answer.status !== 503) || Date.now() > deadline) return answer;
    await holdFor(1000, 'the client’s pause before it retries');
  }
}

const payment = (capture: 'automatic' | 'manual') => ({
  order_id: `ord-${randomBytes(6).toString('hex')}`,
  amount_minor: 1200,
  currency: 'EUR',
  payment_method: 'pm_card_visa',
  capture_method: capture,
});

/** The version's drainage status; a look answered NOT_FOUND for a moment (the server's version record between two runs of its workflow) is repeated. */
async function drainageStatus(connection: Connection, deploymentName: string, buildId: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await versionDrainage(connection, 'default', { deploymentName, buildId })).status;
    } catch (error) {
      if (attempt >= 20) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** The supervisor's progress file (DATA_DIR/rolling-upgrade.json), once it shows what `until` wants. */
async function upgradeStatus(launch: Launch, until: (status: UpgradeStatus) => boolean, timeoutMs: number): Promise<UpgradeStatus> {
  const file = path.join(launch.dataDir, 'rolling-upgrade.json');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as UpgradeStatus) : null;
    if (status && until(status)) return status;
    if (status?.status === 'failed' || Date.now() > deadline) throw new Error(`rolling upgrade: ${JSON.stringify(status)}\n${launch.output().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe('Worker Versioning: npm run rolling-upgrade to a new version', () => {
  it(`${mode}: a payment waiting for its capture on version 1 is captured by version 1's worker (started again after a kill -9) while version 2 takes new payments; version 1 then drains and its worker stops`, async () => {
    const id = randomBytes(4).toString('hex');
    const dbName = `payorch_ver_${id}`;
    const temporalDatabases = [`payorch_ver_${id}_temporal`, `payorch_ver_${id}_visibility`];
    databasesToDrop.push(dbName, ...(mode === 'cluster' ? temporalDatabases : []));
    const launch = await launchStart({
      DATABASE_URL: adminUrl().replace(/\/[^/]*$/, `/${dbName}`),
      TEMPORAL_MODE: mode,
      ...(mode === 'cluster' ? { TEMPORAL_DB_NAME: temporalDatabases[0], TEMPORAL_VISIBILITY_DB_NAME: temporalDatabases[1] } : {}),
    });
    const banner = await waitForBanner(launch, 300_000);
    const v1 = /Worker version (\S+):(\S+) \(current/.exec(banner);
    expect(v1, banner).not.toBeNull();
    const [deploymentName, v1BuildId] = [v1![1]!, v1![2]!];
    const oldWorker = bannerPids(banner).worker!;
    const apiUrl = `http://127.0.0.1:${launch.ports.api}`;
    const apiKey = await createTenant(apiUrl, banner);
    const connection = await Connection.connect({ address: `127.0.0.1:${launch.ports.temporal}` });
    const client = new Client({ connection });
    try {
      // Version 1 authorizes a payment that then waits for its capture (days, in production).
      const waiting = await post(apiUrl, apiKey, '/v1/payments', payment('manual'));
      expect(waiting.status, JSON.stringify(waiting.json)).toBe(201);
      expect(waiting.json.status).toBe('requires_capture');

      // Version 2: the same code under another build id, as a changed workflow bundle would get.
      const v2BuildId = `2.0.0-test-${id}`;
      const upgrade = spawn('npm', ['run', 'rolling-upgrade'], {
        cwd: projectRoot,
        env: { ...process.env, DATA_DIR: launch.dataDir, TEMPORAL_WORKER_BUILD_ID: v2BuildId, ROLLING_UPGRADE_RAMP_PERCENT: '50', ROLLING_UPGRADE_RAMP_SECONDS: '2' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let upgradeOutput = '';
      upgrade.stdout.on('data', (chunk: Buffer) => (upgradeOutput += chunk.toString()));
      upgrade.stderr.on('data', (chunk: Buffer) => (upgradeOutput += chunk.toString()));
      const upgraded = new Promise<number | null>((resolve) => upgrade.once('exit', resolve));

      // Version 2 is current; version 1 drains but cannot finish: the waiting payment is pinned to it.
      await upgradeStatus(launch, (s) => s.phase === 'draining' && (s.openPinnedRuns ?? 0) >= 1, 300_000);
      expect(await deploymentRouting(connection, 'default', deploymentName)).toEqual({ current: v2BuildId, ramping: null, rampPercentage: 0 });
      expect(await drainageStatus(connection, deploymentName, v1BuildId)).toBe('draining');
      expect(isAlive(oldWorker)).toBe(true);
      await holdFor(3000, 'the drain is shown to last while the pinned payment waits');
      expect(await upgradeStatus(launch, () => true, 1000)).toMatchObject({ status: 'running', phase: 'draining' });

      // A new payment runs on version 2.
      const fresh = await post(apiUrl, apiKey, '/v1/payments', payment('automatic'));
      expect(fresh.status, JSON.stringify(fresh.json)).toBe(201);
      expect(fresh.json.status).toBe('succeeded');
      // Raw: the memo is encrypted with the stack's payload key. The API answers at the outcome's
      // commit, inside the payment's one workflow task: the run's close is awaited first.
      const freshInfo = await eventually(async () => {
        const described = await connection.workflowService.describeWorkflowExecution({ namespace: 'default', execution: { workflowId: fresh.json.workflow_id } });
        const closed = described.workflowExecutionInfo?.status !== protos.temporal.api.enums.v1.WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING;
        return closed ? (described.workflowExecutionInfo?.versioningInfo ?? {}) : null;
      }, 30_000);
      expect(freshInfo.deploymentVersion).toMatchObject({ deploymentName, buildId: v2BuildId });
      expect(freshInfo.behavior).toBe(protos.temporal.api.enums.v1.VersioningBehavior.VERSIONING_BEHAVIOR_PINNED);

      // Version 1's worker dies while it drains: the supervisor starts it again, with version 1's
      // build id (no other worker may take the run pinned to it).
      process.kill(oldWorker, 'SIGKILL');
      const restartedAt = Date.now() + 180_000;
      let restarted: number | null = null;
      while (restarted === null && Date.now() < restartedAt) {
        restarted = Number(/worker of the draining version started again \(pid (\d+)\)/.exec(launch.output())?.[1] ?? '') || null;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(restarted, launch.output().slice(-3000)).not.toBeNull();
      const versionOneWorkers = new RegExp(`^(${oldWorker}|${restarted})@`);

      // The capture of the waiting payment: still version 1, on version 1's worker started again
      // (until it polls, the capture is answered 503 and retried by key, as any client does).
      const captured = await post(apiUrl, apiKey, `/v1/payments/${waiting.json.id}/capture`, {});
      expect(captured.status, JSON.stringify(captured.json)).toBe(200);
      expect(captured.json).toMatchObject({ status: 'succeeded', amount_captured_minor: 1200 });
      const history = await client.workflow.getHandle(waiting.json.workflow_id).fetchHistory();
      const events = history.events ?? [];
      const accepted = events.findIndex((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED);
      expect(accepted).toBeGreaterThan(0);
      const activitiesAfterCapture = events.slice(accepted).filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED);
      expect(activitiesAfterCapture.length).toBeGreaterThan(0);
      for (const event of activitiesAfterCapture) expect(event.activityTaskStartedEventAttributes?.identity).toMatch(new RegExp(`^${restarted}@`));
      for (const event of events.filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED)) {
        expect(event.activityTaskStartedEventAttributes?.identity).toMatch(versionOneWorkers);
      }
      const completedTasks = events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED);
      for (const event of completedTasks) {
        expect(event.workflowTaskCompletedEventAttributes?.deploymentVersion).toMatchObject({ deploymentName, buildId: v1BuildId });
        expect(event.workflowTaskCompletedEventAttributes?.identity).toMatch(versionOneWorkers);
      }
      expect(events.at(-1)?.eventType).toBe(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED);

      // With its last pinned run closed, version 1 drains; the upgrade stops its worker and ends.
      const code = await upgraded;
      expect(code, `${upgradeOutput}\n${launch.output().slice(-3000)}`).toBe(0);
      expect(upgradeOutput).toMatch(new RegExp(`replaced worker ${restarted} -> \\d+`));
      expect(upgradeOutput).toContain(`rolling upgrade done (current version ${deploymentName}:${v2BuildId})`);
      expect(await drainageStatus(connection, deploymentName, v1BuildId)).toBe('drained');
      expect(launch.output()).toMatch(new RegExp(`version ${deploymentName}:${v1BuildId.replace(/\./g, '\\.')} drained, 0 open run\\(s\\) pinned to it`));
      const deadline = Date.now() + 20_000;
      while (isAlive(restarted!) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(isAlive(restarted!), `version 1's worker ${restarted}`).toBe(false);
    } finally {
      await connection.close();
    }

    const tree = descendants(launch.npm.pid!);
    launch.tree.push(...tree);
    process.kill(-launch.npm.pid!, 'SIGINT');
    await expectCleanExit(launch, tree);
  }, 900_000);
});
