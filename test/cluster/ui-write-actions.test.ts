import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { startUi } from '../../devstack/temporal-cluster';
import { freePort } from '../../devstack/ports';

/**
 * The Temporal Web UI must not be able to terminate a payment. In cluster mode the UI
 * server (temporal-ui-server, the one compose runs as temporalio/ui) is configured read-only
 * unless TEMPORAL_UI_WRITE_ACTIONS=true; its own /api/v1/settings says which. It sits behind
 * the guard of lib/ui-guard.ts, which refuses the writes the UI server's own rule misses.
 * The UI's frontend address points nowhere: a request the guard passes on fails there.
 */

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function startedUi(writeActions: boolean): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ui-write-'));
  dirs.push(dir);
  const port = await freePort();
  children.push(await startUi(port, '127.0.0.1:1', 'default', dir, undefined, writeActions));
  return `http://127.0.0.1:${port}`;
}

async function settingsOf(writeActions: boolean) {
  return (await (await fetch(`${await startedUi(writeActions)}/api/v1/settings`)).json()) as { DisableWriteActions?: boolean; BatchActionsDisabled?: boolean };
}

/** A POST with a CSRF cookie and the header that matches it, as the UI's page sends it; `path` as written. */
function post(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const headers = { cookie: '_csrf=ui-write-test', 'x-csrf-token': 'ui-write-test', 'content-type': 'application/json' };
    const body = JSON.stringify({ workflowType: { name: 'paymentWorkflow' }, taskQueue: { name: 'payments' } });
    const request = httpRequest({ host: target.hostname, port: target.port, path, method: 'POST', agent: false, headers }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    });
    request.on('error', reject);
    request.end(body);
  });
}

describe('the cluster Web UI', () => {
  it('is read-only by default: no terminate, cancel, signal, reset or batch actions', async () => {
    expect(await settingsOf(false)).toMatchObject({ DisableWriteActions: true, BatchActionsDisabled: true });
  });

  it("refuses, read-only, the writes the UI server's own rule lets through, and still passes the UI's query", async () => {
    const ui = await startedUi(false);
    const workflows = '/api/v1/namespaces/default/workflows';
    // Passed on, each would reach the frontend (here nowhere: 503); refused, 405.
    for (const write of [`${workflows}/w1/signal-with-start/query%2F`, `${workflows}/w1/signal/query%2F`, `${workflows}/query/terminate`, `${workflows}/w1/query/../terminate`]) {
      expect(await post(ui, write), write).toBe(405);
    }
    expect(await post(ui, `${workflows}/w1/query/__stack_trace`)).not.toBe(405);
  });

  it('offers them again with TEMPORAL_UI_WRITE_ACTIONS=true', async () => {
    expect(await settingsOf(true)).toMatchObject({ DisableWriteActions: false, BatchActionsDisabled: false });
  });
});
