import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceProcess } from '../../testkit/processes';
import { freePort } from '../../devstack/ports';
import { ADMIN_TOKEN, eventually, spawnStackApi, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * API_EAGER_START=on (api/eager-start.ts): an API process that runs a payment worker and starts
 * runs eagerly. The stack's own worker polls the same task queue, so a first task that is not
 * handed back in the start's answer could go to either: the history says which it was.
 */

let stack: TestStack;
let tenant: Tenant;
let eagerApi: { service: ServiceProcess; url: string };

/** What an API with eager start needs beyond the API's own settings: the worker's. */
function eagerEnv(): Record<string, string> {
  return {
    PROVIDER: 'sandbox',
    PROVIDER_URL: stack.sandboxUrl,
    // Unversioned, like the stack's in-process worker on the same task queue.
    TEMPORAL_WORKER_VERSIONING: 'off',
    API_EAGER_START: 'on',
  };
}

/** An API process with API_EAGER_START=on against the stack, once its worker runs. */
async function spawnEagerApi(env: Record<string, string> = {}): Promise<{ service: ServiceProcess; url: string }> {
  const api = await spawnStackApi(stack, {
    name: 'api-eager',
    logs: 'eager-start-logs',
    env: { ...eagerEnv(), ...env },
  });
  // The API serves before its worker runs (it starts runs plainly until then): wait for the worker.
  await eventually(async () => ((await metricsOf(api.url)).includes('payment_outcomes_total') ? true : null), 60_000);
  return api;
}

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant();
  eagerApi = await spawnEagerApi();
});
afterAll(async () => {
  await eagerApi?.service.stop();
  await stack?.stop();
});

async function metricsOf(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  return response.ok ? response.text() : '';
}

async function pay(url: string) {
  const response = await fetch(`${url}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'idempotency-key': uniqueKey('eager'), 'content-type': 'application/json' },
    body: JSON.stringify({ order_id: uniqueKey('order'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'automatic' }),
  });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

/** Whether the server handed the run's first task back in the start's answer, and which worker ran that task. */
async function firstTask(workflowId: string): Promise<{ eager: boolean; identity: string; workflowTasks: number }> {
  const history = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const started = events[0]?.workflowExecutionStartedEventAttributes;
  const firstTaskStarted = events.find((event) => event.workflowTaskStartedEventAttributes)?.workflowTaskStartedEventAttributes;
  return {
    eager: started?.eagerExecutionAccepted === true,
    identity: firstTaskStarted?.identity ?? '',
    workflowTasks: events.filter((event) => event.workflowTaskCompletedEventAttributes).length,
  };
}

/** Whether the run's start accepted eager execution (its first event), without waiting for a task. */
async function firstTaskOrStart(workflowId: string): Promise<{ eager: boolean }> {
  const history = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
  return { eager: history.events?.[0]?.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted === true };
}

describe('eager start (API_EAGER_START=on)', () => {
  it('each payment is started eagerly and completes in one workflow task run by the API process\'s worker', async () => {
    for (let i = 0; i < 4; i++) {
      const paid = await pay(eagerApi.url);
      expect(paid.status).toBe(201);
      expect(paid.json.status).toBe('succeeded');
      const task = await eventually(async () => {
        const found = await firstTask(paid.json.workflow_id);
        return found.workflowTasks > 0 ? found : null;
      });
      expect(task).toEqual({ eager: true, identity: `${eagerApi.service.pid}@${hostname()}/api`, workflowTasks: 1 });
    }
    // The hosted worker recorded those outcomes: its registry is on the API's /metrics.
    expect(await metricsOf(eagerApi.url)).toMatch(/^payment_outcomes_total\{status="succeeded"\} [1-9]/m);
  });

  it('an API without it starts runs plainly: the first task comes through the task queue', async () => {
    const paid = await pay(stack.apiUrl);
    expect(paid.status).toBe(201);
    const task = await eventually(async () => {
      const found = await firstTask(paid.json.workflow_id);
      return found.workflowTasks > 0 ? found : null;
    });
    // Through matching, to whichever worker polled first (the eager API's worker polls this queue too).
    expect(task.eager).toBe(false);
  });

  it('a retry of an eagerly started payment attaches to its run and gets the same answer', async () => {
    const key = uniqueKey('eager-retry');
    const body = JSON.stringify({ order_id: uniqueKey('order'), amount_minor: 900, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'automatic' });
    const send = (url: string) => fetch(`${url}/v1/payments`, { method: 'POST', headers: { authorization: `Bearer ${tenant.apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' }, body });
    const [first, second] = await Promise.all([send(eagerApi.url), send(eagerApi.url)]);
    const answers = [await first.json(), await second.json()] as Record<string, any>[];
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(answers[0]!.id).toBe(answers[1]!.id);
    const charges = await stack.sql`SELECT 1 FROM payment_attempts WHERE payment_id = ${answers[0]!.id}`;
    expect(charges).toHaveLength(1);
  });

  it('versioned, it starts eagerly only while its version is the deployment\'s current one', async () => {
    const deploymentName = uniqueKey('eager-deployment').replace(/[^A-Za-z0-9-]/g, '-');
    const buildId = 'eager-v1';
    // Its own task queue: once its version is current, that queue's runs go to versioned workers only.
    const versioned = await spawnEagerApi({
      TASK_QUEUE: `${stack.taskQueue}-versioned`,
      TEMPORAL_WORKER_VERSIONING: 'on',
      TEMPORAL_DEPLOYMENT_NAME: deploymentName,
      TEMPORAL_WORKER_BUILD_ID: buildId,
      IDEMPOTENCY_WAIT_MS: '500',
    });
    try {
      // No current version: the run is started plainly and waits for a worker routing sends it to (202).
      const before = await pay(versioned.url);
      expect(before.status).toBe(202);
      expect((await firstTaskOrStart(before.json.workflow_id)).eager).toBe(false);
      // The deploy makes the version current (once the server has seen its worker poll).
      await eventually(async () => {
        try {
          await stack.temporal.workflowService.setWorkerDeploymentCurrentVersion({ namespace: 'default', deploymentName, buildId, identity: 'eager-start.test' });
          return true;
        } catch {
          return null;
        }
      }, 30_000);
      // Within a routing check the API starts eagerly, and the run waiting since before completes on that version.
      const after = await eventually(async () => {
        const paid = await pay(versioned.url);
        return (await firstTaskOrStart(paid.json.workflow_id)).eager ? paid : null;
      }, 30_000, 500);
      // Both succeed (each answered at once, or 202 first: the wait here is 500 ms).
      for (const id of [after.json.id, before.json.id]) {
        await eventually(async () => {
          const response = await fetch(`${versioned.url}/v1/payments/${id}`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
          const payment = (await response.json()) as { status: string };
          return payment.status === 'succeeded' ? payment : null;
        }, 30_000);
      }
    } finally {
      await versioned.service.stop();
    }
  });

  it('with Temporal unreachable it answers 503, keeps trying to start its worker, and a SIGTERM ends it without waiting for one', async () => {
    const nobody = await freePort();
    const api = await spawnStackApi(stack, {
      name: 'api-eager-no-temporal',
      logs: 'eager-start-logs',
      env: { ...eagerEnv(), TEMPORAL_ADDRESS: `127.0.0.1:${nobody}`, TEMPORAL_RPC_TIMEOUT_MS: '1000' },
    });
    try {
      const refused = await pay(api.url);
      expect(refused.status).toBe(503);
      expect(refused.json.error.type).toBe('temporal_unavailable');
      await eventually(() => readFileSync(api.service.logFile, 'utf8').includes('could not start; runs start plainly until it does'), 30_000);
      process.kill(api.service.pid, 'SIGTERM');
      const exitedByItself = await Promise.race([api.service.whenExited.then(() => true), sleep(30_000).then(() => false)]);
      expect(exitedByItself).toBe(true);
    } finally {
      await api.service.kill();
    }
  });

  it('SIGTERM stops the API and its worker cleanly', async () => {
    await eagerApi.service.stop(60_000);
    expect(eagerApi.service.exited()).toBe(true);
    expect(readFileSync(eagerApi.service.logFile, 'utf8')).not.toMatch(/did not stop cleanly|"level":50/);
  });
});
