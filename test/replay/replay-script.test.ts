import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { apiClient, startStack, uniqueKey, type TestStack } from '../helpers/stack';
import { alteredWorkflows } from '../../testkit/altered-workflows';
import { TEST_PAYLOAD_KEYS } from '../../testkit/payload-keys';

/**
 * `npm run replay -- --workflow-id <id>` (scripts/replay.ts): fetches a live workflow's
 * history from the server and replays it against the local code, with a verdict line and
 * an exit code a deploy pipeline can act on.
 */

let stack: TestStack;
let api: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  const tenant = await stack.createTenant('replay script');
  api = apiClient(stack.apiUrl, tenant.apiKey);
});
afterAll(async () => stack?.stop());

/** Runs the npm script as an operator would, in a child process, with the worker's payload keys. */
function npmReplay(args: string[], payloadKeys: string | null = TEST_PAYLOAD_KEYS): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { TEMPORAL_PAYLOAD_KEYS: _unused, ...inherited } = process.env;
  const env = payloadKeys ? { ...inherited, TEMPORAL_PAYLOAD_KEYS: payloadKeys } : inherited;
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'replay', '--', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function livePayment(captureMethod: 'automatic' | 'manual') {
  const response = await api.post(
    '/v1/payments',
    { order_id: uniqueKey('ord'), amount_minor: 1234, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: captureMethod },
    uniqueKey(),
  );
  expect(response.status).toBe(201);
  return response.json as { id: string; workflow_id: string };
}

// Concurrent: each case is its own payment and its own child process (most of a case's time is
// that process loading and bundling the workflow code), so they need not wait for each other.
describe.concurrent('npm run replay against a live workflow', () => {
  it('PASS and exit 0 for a payment run by the current code', async () => {
    const payment = await livePayment('automatic');
    const result = await npmReplay(['--workflow-id', payment.workflow_id, '--address', stack.temporalAddress, '--namespace', 'default']);
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toMatch(
      new RegExp(`^PASS: workflow ${escape(payment.workflow_id)} \\(paymentWorkflow, \\d+ events\\) replays deterministically against the local code$`),
    );
    expect(result.code).toBe(0);
  });

  it('PASS for a run still in flight (an authorization waiting for its capture)', async () => {
    const payment = await livePayment('manual');
    const result = await npmReplay(['--workflow-id', payment.workflow_id, '--address', stack.temporalAddress]);
    expect(result.stdout.trim()).toMatch(/^PASS: workflow .* \(paymentWorkflow, \d+ events\) replays deterministically/);
    expect(result.code).toBe(0);
    const description = await stack.temporal.workflow.getHandle(payment.workflow_id).describe();
    expect(description.status.name).toBe('RUNNING');
  });

  it('FAIL with the nondeterminism and exit 1 against workflow code that added an activity', async () => {
    const payment = await livePayment('automatic');
    const result = await npmReplay([
      '--workflow-id', payment.workflow_id,
      '--address', stack.temporalAddress,
      '--workflows-path', path.relative('.', alteredWorkflows('activity-added')),
    ]);
    expect(result.stdout.trim()).toMatch(
      new RegExp(`^FAIL: workflow ${escape(payment.workflow_id)} \\(paymentWorkflow, \\d+ events\\) does not replay against the code at test/artifacts/altered-workflows/activity-added/index.ts: DeterminismViolationError: .*(screenForFraud|Nondeterminism error)`),
    );
    expect(result.code).toBe(1);
  });

  it('ERROR and exit 2 for a workflow the server does not know: nothing to judge is not a PASS', async () => {
    const result = await npmReplay(['--workflow-id', `payment-nobody-${uniqueKey()}`, '--address', stack.temporalAddress]);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^ERROR: cannot fetch the history of workflow payment-nobody-/);
    expect(result.code).toBe(2);
  });

  it('ERROR and exit 2, naming the key, when the history is encrypted under a key it was not given', async () => {
    const payment = await livePayment('automatic');
    const result = await npmReplay(['--workflow-id', payment.workflow_id, '--address', stack.temporalAddress], null);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim()).toBe(
      `ERROR: the history of workflow ${payment.workflow_id} is encrypted under payload key(s) ${TEST_PAYLOAD_KEYS.split(':')[0]}: set TEMPORAL_PAYLOAD_KEYS to the worker's keys`,
    );
    expect(result.code).toBe(2);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
