import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../devstack/temporal-cli';

/**
 * lib/temporal.ts TemporalConnection: closing a client connection while one of its calls is
 * retrying against an unreachable Temporal ends that call with a rejected promise. With the
 * SDK's Connection, the retry's timer fired after the close and grpc-js threw `Channel has been
 * shut down` inside it: an uncaught exception, exit 1 (the API at shutdown, the worker with a
 * job's call retrying, a test stack's stop).
 */

/**
 * In a fresh Node process: a "Temporal" that resets every connection (each attempt fails with
 * UNAVAILABLE and the SDK retries the call), a workflow start against it, and the connection
 * closed once the start is retrying. The process then ends when nothing is left to run: a retry
 * left behind throws first.
 */
function closeWhileRetrying(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = `
    import net from 'node:net';
    import { Client } from '@temporalio/client';
    import { TemporalConnection, isTemporalUnavailable } from ${JSON.stringify(path.join(projectRoot, 'lib/temporal.ts'))};
    let dials = 0;
    const server = net.createServer((socket) => {
      dials++;
      socket.on('error', () => {});
      socket.resetAndDestroy();
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const connection = TemporalConnection.lazy({ address: '127.0.0.1:' + server.address().port });
    const client = new Client({ connection });
    const start = client.workflow
      .start('paymentWorkflow', { taskQueue: 'payments', workflowId: 'closed-while-retrying', args: [] })
      .then(() => 'started', (error) => (isTemporalUnavailable(error) ? 'rejected as Temporal unavailable' : 'rejected: ' + error.message));
    // A second dial: the first attempt has failed and the start is retrying.
    while (dials < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    await connection.close();
    console.log('closed');
    console.log('start: ' + (await start));
    server.close();
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: projectRoot, env: { PATH: process.env.PATH, HOME: process.env.HOME } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('closing a Temporal client connection', () => {
  it('ends a call retrying against an unreachable Temporal with a rejected promise (rules out an uncaught "Channel has been shut down" ending the process)', async () => {
    const outcome = await closeWhileRetrying();
    expect(outcome.stderr).not.toMatch(/Channel has been shut down/);
    expect(outcome.stdout, outcome.stderr).toContain('closed\nstart: rejected as Temporal unavailable');
    expect(outcome.code, outcome.stderr).toBe(0);
  }, 60_000);
});
