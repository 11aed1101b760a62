import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../devstack/ports';

const root = path.resolve(import.meta.dirname, '../..');

/**
 * STRIPE_MOCK_PATH, else the project's own build in .tools/bin (built now by
 * doubles/stripe/install-stripe-mock.sh if missing), else the one on PATH the script chose.
 */
function stripeMockBinary(): string {
  const given = process.env.STRIPE_MOCK_PATH;
  if (given && existsSync(given)) return given;
  const own = path.join(root, '.tools', 'bin', 'stripe-mock');
  if (!existsSync(own)) execFileSync('bash', [path.join(root, 'doubles', 'stripe', 'install-stripe-mock.sh')], { stdio: 'inherit' });
  return existsSync(own) ? own : 'stripe-mock';
}

/**
 * Stripe's own mock server on loopback: stateless, but every request is validated against
 * Stripe's OpenAPI definition (unknown or mistyped parameters are a 400, as from Stripe).
 * Both its listeners are bound to 127.0.0.1: left alone it would open HTTPS on all interfaces.
 */
export async function startStripeMock(): Promise<{ port: number; stop(): Promise<void> }> {
  const [httpPort, httpsPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(stripeMockBinary(), ['-http-addr', `127.0.0.1:${httpPort}`, '-https-addr', `127.0.0.1:${httpsPort}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`stripe-mock did not start within 30 s:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(`Listening for HTTP at address: 127.0.0.1:${httpPort}`)) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stderr!.off('data', onData);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited with ${code}:\n${output}`));
    });
  });
  // Only its start-up lines are of interest; its per-request log is drained unread.
  child.stdout!.resume();
  child.stderr!.resume();
  return {
    port: httpPort,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** One request that went through the recording hop, and how stripe-mock judged it. */
export interface StripeExchange {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  form: URLSearchParams;
  status: number;
  responseHeaders: Headers;
}

/** A recording hop on loopback in front of stripe-mock: each exchange is handed to `record` as it completes. */
export async function startRecordingHop(stripeMockPort: number, record: (exchange: StripeExchange) => void): Promise<{ port: number; close(): Promise<void> }> {
  const hop = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', 'http://stripe');
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name))) as Record<string, string>;
      const answer = await fetch(`http://127.0.0.1:${stripeMockPort}${req.url}`, { method: req.method, headers, body: body || undefined });
      const text = await answer.text();
      record({ method: req.method ?? '', path: url.pathname, query: url.searchParams, headers: req.headers, form: new URLSearchParams(body), status: answer.status, responseHeaders: answer.headers });
      res.writeHead(answer.status, { 'content-type': 'application/json', 'request-id': answer.headers.get('request-id') ?? 'req_mock' });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => hop.listen(0, '127.0.0.1', resolve));
  return { port: (hop.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => hop.close(() => resolve())) };
}
