import { eventually } from '../helpers/eventually';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../devstack/ports';
import { startTemporalDevServer, type DevServer } from '../../devstack/temporal-cli';
import { defaultListenerLimits } from '../../lib/listener';
import { uniqueKey } from '../helpers/stack';

/**
 * The dev server `npm start` runs, as it runs it (devstack/temporal-cli.ts): its embedded Web UI
 * behind our guard (devstack/ui-guard.ts), read-only by default, answering only loopback Host
 * names; its HTTP API answering no Host a browser can send. A run no worker polls stays open,
 * so "refused" is checked on the run itself: it is still running.
 */

let server: DevServer;
let connection: Connection;
let client: Client;

beforeAll(async () => {
  server = await startTemporalDevServer({ port: await freePort(), uiPort: await freePort(), headless: false });
  connection = await Connection.connect({ address: server.address });
  client = new Client({ connection });
}, 90_000);
afterAll(async () => {
  await connection?.close();
  await server?.stop();
});

async function openRun(): Promise<string> {
  const workflowId = uniqueKey('ui-guard');
  await client.workflow.start('nobodyRunsThis', { taskQueue: uniqueKey('nobody'), workflowId });
  return workflowId;
}

/** A raw request (any Host header, any body), as a browser page or a script would send it. */
function send(url: string, options: { method?: string; host?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = httpRequest(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method: options.method ?? 'GET', agent: false, headers: { ...(options.host ? { host: options.host } : {}), ...options.headers } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}

describe('the dev server Web UI is read-only by default', () => {
  it('its settings report every write action off', async () => {
    const settings = JSON.parse((await send(`${server.uiUrl}/api/v1/settings`)).text) as Record<string, unknown>;
    expect(settings).toMatchObject({
      DisableWriteActions: true,
      WorkflowTerminateDisabled: true,
      WorkflowCancelDisabled: true,
      WorkflowSignalDisabled: true,
      WorkflowResetDisabled: true,
      BatchActionsDisabled: true,
      StartWorkflowDisabled: true,
    });
  });

  it('a terminate through the UI API is refused with 405 and the run goes on; reads still work', async () => {
    const workflowId = await openRun();
    const page = await send(`${server.uiUrl}/`);
    expect(page.status).toBe(200);
    const terminate = await send(`${server.uiUrl}/api/v1/namespaces/default/workflows/${workflowId}/terminate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'cross-site' }),
    });
    expect(terminate.status).toBe(405);
    expect(terminate.text).toMatch(/read-only/);
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
    // The UI server dials the frontend on its own connection, which may still be coming up: reads work once it is.
    const listed = await eventually(async () => {
      const answer = await send(`${server.uiUrl}/api/v1/namespaces/default/workflows/${workflowId}`);
      return answer.status === 200 ? answer : null;
    }, 20_000, 250, 'a read through the UI');
    expect(listed.text).toContain(workflowId);
  });

  it('a foreign Host (a name rebound to 127.0.0.1) is refused with 421, settings and cookies included', async () => {
    const port = new URL(server.uiUrl!).port;
    for (const path of ['/', '/api/v1/settings']) {
      const answer = await send(`${server.uiUrl}${path}`, { host: `rebound.example:${port}` });
      expect(answer.status, path).toBe(421);
    }
  });
});

describe('the UI port has the limits of our own listeners', () => {
  it('a connection that never finishes its headers is answered 408 and closed at the header deadline (HTTP_HEADERS_TIMEOUT_MS)', async () => {
    const { port } = new URL(server.uiUrl!);
    const socket = connect(Number(port), '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk) => received.push(chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `);
    await closed;
    expect(Buffer.concat(received).toString('utf8')).toMatch(/^HTTP\/1\.1 408/);
  }, defaultListenerLimits.headersTimeoutMs + 20_000);
});

describe("the dev server's HTTP API is closed to browsers", () => {
  it('a cross-site text/plain POST (terminate, a batch operation) is 403 "Host not allowed" and changes nothing', async () => {
    const workflowId = await openRun();
    const api = `http://127.0.0.1:${server.httpApiPort}/api/v1/namespaces/default`;
    const terminate = await send(`${api}/workflows/${workflowId}/terminate`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"reason":"cross-site"}' });
    expect(terminate.status, terminate.text).toBe(403);
    expect(terminate.text).toMatch(/Host not allowed/);
    const batch = await send(`${api}/batch-operations/${uniqueKey('batch')}`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ visibilityQuery: `WorkflowId = '${workflowId}'`, reason: 'cross-site', terminationOperation: {} }),
    });
    expect(batch.status, batch.text).toBe(403);
    // Named as a page on another site names it, or rebound: refused either way.
    expect((await send(`${api}/workflows/${workflowId}`, { host: `rebound.example:${server.httpApiPort}` })).status).toBe(403);
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
  });
});
