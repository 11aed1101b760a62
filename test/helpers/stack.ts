import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { fileDatabaseUrl } from './database';
import type { Client } from '@temporalio/client';
import { startStack as startProductStack, type Stack, type StackOptions } from '../../devstack/stack';
import { installTestRuntime, testLogger } from './runtime';
import { testDataConverter } from '../../testkit/payload-keys';

export { apiClient, type Tenant } from '../../devstack/stack';
export { captureLogs } from './runtime';
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

/** Polls until `check` returns a value, or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
