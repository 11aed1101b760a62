import { readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { fileDatabaseUrl } from './database';
import type { Client } from '@temporalio/client';
import { apiClient, startStack as startProductStack, type Stack, type StackOptions } from '../../devstack/stack';
import { eventually } from './eventually';
import { installTestRuntime, testLogger } from './runtime';
import { TEST_PAYLOAD_KEYS, testDataConverter } from '../../testkit/payload-keys';
import { spawnService, type ServiceProcess } from '../../testkit/processes';
import { freePort } from '../../devstack/ports';
import { projectRoot } from '../../devstack/temporal-cli';

export { apiClient, type Tenant } from '../../devstack/stack';
export { captureLogs } from './runtime';
export { eventually } from './eventually';
export type TestStack = Stack;

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/**
 * The whole product (devstack/stack.ts) on the run's shared Temporal dev server and this file's database,
 * with the workflow bundle built once by the global setup and a task queue of its own.
 */
export async function startStack(options: Partial<StackOptions> = {}): Promise<TestStack> {
  await installTestRuntime();
  return startProductStack({
    databaseUrl: await fileDatabaseUrl(),
    temporalAddress: inject('temporalAddress'),
    taskQueue: `test-${randomBytes(4).toString('hex')}`,
    workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') },
    dataConverter: testDataConverter,
    logger: testLogger,
    adminToken: ADMIN_TOKEN,
    // Four files run at once on PostgreSQL's 100 connections (vitest.config.ts): 10 each is
    // plenty for a test's concurrency (postgres.js queues beyond it) and leaves room.
    databasePoolSize: 10,
    ...options,
  });
}

/** A second API process on the stack's database, with its own Temporal client (e.g. an unreachable one). */
export function isolatedApi(stack: TestStack, temporal: Client, config: Partial<TestStack['apiConfig']> = {}) {
  return stack.startApi(config, temporal);
}

export function uniqueKey(label = 'key'): string {
  return `${label}-${randomBytes(8).toString('hex')}`;
}

/** A payment once it has left `processing` and `requires_action` (decided): its GET, polled. */
export function decidedPayment(client: ReturnType<typeof apiClient>, id: string, timeoutMs = 30_000) {
  return eventually(
    async () => {
      const { json } = await client.get(`/v1/payments/${id}`);
      return ['requires_action', 'processing'].includes(json.status) ? null : json;
    },
    timeoutMs,
    100,
    `payment ${id} decided`,
  );
}

/**
 * The API as its own process (`api/main.ts`, killable) against the stack's database, Temporal
 * and task queue, with the test stacks' payload keys; `env` adds to or overrides that. Ready
 * once its /healthz answers; logs under test/artifacts/<logs>.
 */
export async function spawnStackApi(stack: TestStack, options: { name: string; logs: string; env?: Record<string, string> }): Promise<{ service: ServiceProcess; url: string }> {
  const port = await freePort();
  const service = await spawnService({
    name: `${options.name}-${port}`,
    script: 'api/main.ts',
    env: {
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TASK_QUEUE: stack.taskQueue,
      ADMIN_TOKEN,
      PORT: String(port),
      HOST: '127.0.0.1',
      TEMPORAL_PAYLOAD_KEYS: TEST_PAYLOAD_KEYS,
      ...options.env,
    },
    readyUrl: `http://127.0.0.1:${port}/healthz`,
    logsDir: path.join(projectRoot, 'test', 'artifacts', options.logs),
  });
  return { service, url: `http://127.0.0.1:${port}` };
}

/** One call to the stack's API with the admin token (or `token`): status, text and JSON body (null when not JSON). */
export async function adminCall(stack: TestStack, method: string, path: string, body?: unknown, token = stack.adminToken) {
  const response = await fetch(`${stack.apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, text, json: (response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : null) as any };
}
