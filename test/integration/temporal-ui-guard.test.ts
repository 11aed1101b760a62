import { eventually } from '../helpers/eventually';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../devstack/ports';
import { startTemporalDevServer, type DevServer } from '../../devstack/temporal-cli';
import { defaultListenerLimits } from '../../lib/listener';
import { installTestRuntime } from '../helpers/runtime';
import { uniqueKey } from '../helpers/stack';

/**
 * The dev server `npm start` runs, as it runs it (devstack/temporal-cli.ts): its embedded Web UI
 * behind our guard (lib/ui-guard.ts), read-only by default, answering only loopback Host
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

/**
 * A raw request (any Host header, any body), as a browser page or a script would send it.
 * `rawPath` is sent byte for byte as the request target, unnormalized (a URL would resolve its dots).
 */
function send(
  url: string,
  options: { method?: string; host?: string; headers?: Record<string, string>; body?: string; rawPath?: string } = {},
): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: options.rawPath ?? target.pathname + target.search,
        method: options.method ?? 'GET',
        agent: false,
        headers: { ...(options.host ? { host: options.host } : {}), ...options.headers },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8'), headers: response.headers }));
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

/** The CSRF cookie and header the UI's own page sends with every POST (echo's CSRF middleware). */
async function csrf(): Promise<Record<string, string>> {
  const page = await send(`${server.uiUrl}/`);
  const cookie = ([] as string[]).concat(page.headers['set-cookie'] ?? []).find((line) => line.startsWith('_csrf='));
  if (!cookie) throw new Error(`the UI set no CSRF cookie (status ${page.status})`);
  const token = cookie.slice('_csrf='.length).split(';')[0]!;
  return { cookie: `_csrf=${token}`, 'x-csrf-token': token };
}

describe('the read-only guard decides on the path the UI server routes', () => {
  let workerConnection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  let taskQueue: string;
  beforeAll(async () => {
    await installTestRuntime();
    taskQueue = uniqueKey('ui-guard-worker');
    workerConnection = await NativeConnection.connect({ address: server.address });
    // The project's workflows with no activities: a run waits on its first activity and answers queries.
    worker = await Worker.create({
      connection: workerConnection,
      namespace: 'default',
      taskQueue,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    running = worker.run();
  }, 60_000);
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await workerConnection?.close();
  });

  it('the UI\'s own query call (POST …/workflows/{id}/query/{type}, the id percent-encoded as the UI sends it) is answered', async () => {
    const workflowId = `${uniqueKey('ui-guard-query')}:k.1`;
    const handle = await client.workflow.start('retentionWorkflow', { taskQueue, workflowId });
    const headers = { ...(await csrf()), 'content-type': 'application/json' };
    const body = JSON.stringify({ execution: { workflowId, runId: handle.firstExecutionRunId }, query: { queryType: '__stack_trace' } });
    const rawPath = `/api/v1/namespaces/default/workflows/${encodeURIComponent(workflowId)}/query/__stack_trace`;
    expect(rawPath).toContain('%3A');
    const answer = await eventually(async () => {
      const response = await send(server.uiUrl!, { method: 'POST', rawPath, headers, body });
      expect(response.status, response.text).not.toBe(405);
      return response.status === 200 ? response : null;
    }, 30_000, 250, 'the query answered through the UI');
    expect(JSON.parse(answer.text)).toHaveProperty('queryResult');
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });

  it('a POST whose path normalizes to another route (dot segments, encoded dots, slashes and backslashes, doubled slashes, a fragment) is 405 and the run goes on', async () => {
    const headers = { ...(await csrf()), 'content-type': 'application/json' };
    const body = JSON.stringify({ reason: 'through the read-only UI' });
    const { port } = new URL(server.uiUrl!);
    const variants = (base: string): string[] => [
      `${base}/query/../terminate`,
      `${base}/query/x/../../terminate`,
      `${base}/query/./../terminate`,
      `${base}/query/%2e%2e/terminate`,
      `${base}/query/%2E%2E%2Fterminate`,
      `${base}/query/..%2fterminate`,
      `${base}/query/.%2e/terminate`,
      `${base}/query/%2e./terminate`,
      `${base}/query/%252e%252e/terminate`,
      `${base}/query/..\\terminate`,
      `${base}/query/..%5cterminate`,
      `${base}/query/%5C..%5Cterminate`,
      `${base}/query//../terminate`,
      `${base}/terminate/query/x/..`,
      `${base}/terminate/query/..`,
      `${base}/terminate#/query/x`,
      `${base}/query/x#/../../terminate`,
      `/${base}/query/../terminate`,
      `${base}//query/x`,
      `http://127.0.0.1:${port}${base}/query/../terminate`,
    ];
    const outcomes: string[] = [];
    const expected: string[] = [];
    for (const variant of variants('/api/v1/namespaces/default/workflows/WORKFLOW')) {
      const workflowId = await openRun();
      const rawPath = variant.replace('WORKFLOW', workflowId);
      const answer = await send(server.uiUrl!, { method: 'POST', rawPath, headers, body });
      const status = (await client.workflow.getHandle(workflowId).describe()).status.name;
      outcomes.push(`${variant} -> ${answer.status} ${status}`);
      expected.push(`${variant} -> 405 RUNNING`);
    }
    expect(outcomes).toEqual(expected);
  });

  it('a GET whose path resolves to terminate terminates nothing: the UI server has no write route on GET', async () => {
    const workflowId = await openRun();
    const answer = await send(server.uiUrl!, { rawPath: `/api/v1/namespaces/default/workflows/${workflowId}/query/../terminate`, headers: await csrf() });
    expect(answer.status).not.toBe(200);
    expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
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
