import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCodecServer } from '../../lib/codec-server';
import type { ListenerConfig } from '../../lib/listener';
import { listenerLimits } from '../../lib/listener';
import { createLogger } from '../../lib/logger';
import { createWorkerMetrics } from '../../lib/metrics';
import { AesGcmPayloadCodec } from '../../lib/payload-codec';
import { startSandbox } from '../../sandbox/server';
import { serveWorkerMetrics } from '../../worker/observability';
import { testPayloadKeys } from '../../testkit/payload-keys';
import { fileDatabaseUrl } from '../helpers/database';
import { ADMIN_TOKEN, startStack, type TestStack } from '../helpers/stack';

/**
 * Slow and idle clients. Every listener (the API, the codec server, the
 * provider sandbox, the worker's /metrics) is made by lib/listener.ts with the HTTP_* limits;
 * here each runs with short test values and is shown to cut a slowly sent body, a half-sent
 * request, an idle connection and an idle keep-alive connection, to refuse connections past
 * its cap, and to refuse a foreign Host (DNS rebinding). Loopback only.
 */

const short: ListenerConfig = {
  HTTP_REQUEST_TIMEOUT_MS: 1500,
  HTTP_HEADERS_TIMEOUT_MS: 800,
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 500,
  HTTP_MAX_CONNECTIONS: 4,
  HTTP_ALLOWED_HOSTS: ['localhost', '127.0.0.1', '::1'],
};
const limits = listenerLimits(short);

let stack: TestStack;
/** Each listener, a path it answers, and a request whose body it reads (so a slow body holds the request open). */
const listeners: { name: string; url: string; path: string; reading: string; close: () => Promise<unknown> }[] = [];

beforeAll(async () => {
  stack = await startStack();
  const api = await stack.startApi(short);
  listeners.push({ name: 'api', url: api.url, path: '/healthz', reading: `POST /admin/tenants HTTP/1.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}`, close: api.close });
  const codec = await startCodecServer({ codec: new AesGcmPayloadCodec(testPayloadKeys), token: null, allowedOrigins: [], port: 0, limits });
  listeners.push({ name: 'codec server', url: codec.url, path: '/healthz', reading: 'POST /decode HTTP/1.1\r\nX-Namespace: default', close: codec.close });
  const sandbox = await startSandbox({ databaseUrl: await fileDatabaseUrl(), port: 0, limits });
  listeners.push({ name: 'sandbox', url: sandbox.url, path: '/healthz', reading: 'POST /v1/charges HTTP/1.1\r\nIdempotency-Key: slow-body-key-1', close: sandbox.close });
  const metrics = serveWorkerMetrics({ port: 0, metrics: createWorkerMetrics(), sdkMetricsUrl: 'http://127.0.0.1:9/metrics', logger: createLogger({ name: 'test', level: 'silent' }), limits });
  await new Promise((r) => metrics.once('listening', r));
  const port = (metrics.address() as { port: number }).port;
  listeners.push({
    name: 'worker metrics',
    url: `http://127.0.0.1:${port}`,
    path: '/metrics',
    reading: 'POST /metrics HTTP/1.1',
    close: () => new Promise((r) => {
      metrics.closeAllConnections();
      metrics.close(r);
    }),
  });
});
afterAll(async () => {
  for (const listener of listeners) await listener.close().catch(() => {});
  await stack?.stop();
});

/** A raw connection: what was written back, and after how long the server closed it. */
function open(url: string): { socket: Socket; closed: Promise<{ afterMs: number; received: string }>; ready: Promise<void> } {
  const { hostname, port } = new URL(url);
  const started = Date.now();
  const socket = connect({ host: hostname, port: Number(port) });
  let received = '';
  socket.on('data', (chunk) => (received += chunk.toString()));
  socket.on('error', () => {});
  const closed = new Promise<{ afterMs: number; received: string }>((resolve) => socket.on('close', () => resolve({ afterMs: Date.now() - started, received })));
  const ready = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, closed, ready };
}

const hostOf = (url: string) => new URL(url).host;
// Deadlines hold to within Node's check interval (a quarter of the header deadline here); the
// bound leaves room for a loaded machine while staying far below Node's defaults (60-300 s).
const cutWithin = 6_000;

describe('every listener bounds slow and idle clients', () => {
  it.each(['api', 'codec server', 'sandbox', 'worker metrics'])('%s: a slowly sent body is cut at HTTP_REQUEST_TIMEOUT_MS', async (name) => {
    const listener = listeners.find((l) => l.name === name)!;
    const { socket, closed, ready } = open(listener.url);
    await ready;
    socket.write(`${listener.reading}\r\nHost: ${hostOf(listener.url)}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`);
    const drip = setInterval(() => socket.writable && socket.write(' '), 100);
    const { afterMs, received } = await closed;
    clearInterval(drip);
    console.log(`${name}: slow body cut after ${afterMs} ms (${received.split('\r\n')[0] || 'no answer'})`);
    expect(afterMs).toBeGreaterThanOrEqual(short.HTTP_REQUEST_TIMEOUT_MS! - 100);
    expect(afterMs).toBeLessThan(cutWithin);
  });

  it.each(['api', 'codec server', 'sandbox', 'worker metrics'])('%s: half-sent headers and a silent connection are cut at HTTP_HEADERS_TIMEOUT_MS', async (name) => {
    const listener = listeners.find((l) => l.name === name)!;
    const partial = open(listener.url);
    const silent = open(listener.url);
    await Promise.all([partial.ready, silent.ready]);
    partial.socket.write(`GET ${listener.path} HTTP/1.1\r\nHost: ${hostOf(listener.url)}\r\nX-Slow: `);
    const [cutPartial, cutSilent] = await Promise.all([partial.closed, silent.closed]);
    console.log(`${name}: partial headers cut after ${cutPartial.afterMs} ms, a silent connection after ${cutSilent.afterMs} ms`);
    for (const cut of [cutPartial, cutSilent]) {
      expect(cut.afterMs).toBeGreaterThanOrEqual(short.HTTP_HEADERS_TIMEOUT_MS! - 100);
      expect(cut.afterMs).toBeLessThan(cutWithin);
    }
  });

  it.each(['api', 'codec server', 'sandbox', 'worker metrics'])('%s: an idle keep-alive connection is closed at HTTP_KEEP_ALIVE_TIMEOUT_MS', async (name) => {
    const listener = listeners.find((l) => l.name === name)!;
    const { socket, closed, ready } = open(listener.url);
    await ready;
    socket.write(`GET ${listener.path} HTTP/1.1\r\nHost: ${hostOf(listener.url)}\r\nConnection: keep-alive\r\n\r\n`);
    const { afterMs, received } = await closed;
    console.log(`${name}: idle keep-alive connection closed ${afterMs} ms after the request`);
    expect(received).toMatch(/^HTTP\/1\.1 \d{3}/);
    expect(afterMs).toBeGreaterThanOrEqual(short.HTTP_KEEP_ALIVE_TIMEOUT_MS! - 100);
    expect(afterMs).toBeLessThan(cutWithin);
  });

  it.each(['api', 'codec server', 'sandbox', 'worker metrics'])('%s: connections past HTTP_MAX_CONNECTIONS are dropped at once', async (name) => {
    const listener = listeners.find((l) => l.name === name)!;
    const held = Array.from({ length: short.HTTP_MAX_CONNECTIONS! }, () => open(listener.url));
    await Promise.all(held.map((h) => h.ready));
    await new Promise((r) => setTimeout(r, 100)); // the server has accepted them
    const extra = open(listener.url);
    const { afterMs } = await extra.closed;
    console.log(`${name}: connection ${short.HTTP_MAX_CONNECTIONS! + 1} dropped after ${afterMs} ms`);
    expect(afterMs).toBeLessThan(short.HTTP_HEADERS_TIMEOUT_MS!);
    for (const h of held) h.socket.destroy();
  });

  it.each(['api', 'codec server', 'sandbox', 'worker metrics'])('%s: a Host it does not answer for is 421 (DNS rebinding); its own names are served', async (name) => {
    const listener = listeners.find((l) => l.name === name)!;
    const ask = async (host: string) => {
      const { socket, closed, ready } = open(listener.url);
      await ready;
      socket.write(`GET ${listener.path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      return Number(/^HTTP\/1\.1 (\d{3})/.exec((await closed).received)?.[1]);
    };
    expect(await ask('rebind.attacker.example')).toBe(421);
    expect(await ask(`attacker.example:${new URL(listener.url).port}`)).toBe(421);
    expect(await ask(hostOf(listener.url))).not.toBe(421);
    expect(await ask(`localhost:${new URL(listener.url).port}`)).not.toBe(421);
  });
});
