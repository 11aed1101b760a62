import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../devstack/ports';
import { startUi } from '../../devstack/temporal-cluster';
import { writeActionSettings } from '../../lib/ui-guard';
import { spawnService, type ServiceProcess } from '../../testkit/processes';

/**
 * The Web UI guard as compose runs it (`temporal-ui-guard`, lib/ui-guard-main.ts): a process of
 * its own in front of a UI server (temporal-ui-server, the binary of compose's temporalio/ui)
 * on the test run's Temporal. The UI server here has its write actions on, so whatever is
 * refused is refused by the guard process. The rule itself: test/unit/ui-guard.test.ts and
 * temporal-ui-guard.test.ts.
 */

const run = promisify(execFile);
let dir: string;
let ui: ChildProcess;
let uiUrl: string;
let guard: ServiceProcess;
let guardUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'ui-guard-main-'));
  const uiPort = await freePort();
  ui = await startUi(uiPort, inject('temporalAddress'), 'default', dir, undefined, true);
  uiUrl = `http://127.0.0.1:${uiPort}`;
  const port = await freePort();
  guardUrl = `http://127.0.0.1:${port}`;
  // Only 127.0.0.1 in Host: `localhost`, which the UI in front of the UI server admits, is refused by the guard process.
  guard = await spawnService({
    name: 'ui-guard',
    script: 'lib/ui-guard-main.ts',
    env: { UI_GUARD_PORT: String(port), UI_GUARD_TARGET: `127.0.0.1:${uiPort}`, HTTP_ALLOWED_HOSTS: '127.0.0.1' },
    readyUrl: `${guardUrl}/healthz`,
    logsDir: dir,
    readyTimeoutMs: 60_000,
  });
}, 90_000);
afterAll(async () => {
  await guard?.stop();
  ui?.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A raw request: `rawPath` is sent byte for byte as the request target, any Host header. */
function send(url: string, rawPath: string, options: { method?: string; host?: string } = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const request = httpRequest(
      { host: target.hostname, port: target.port, path: rawPath, method: options.method ?? 'GET', agent: false, headers: options.host ? { host: options.host } : {} },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    request.on('error', reject);
    request.end(options.method === 'POST' ? '{}' : undefined);
  });
}

describe('lib/ui-guard-main.ts in front of a Web UI whose write actions are on', () => {
  it('reports every write action off in the UI settings', async () => {
    const behind = JSON.parse((await send(uiUrl, '/api/v1/settings')).text) as Record<string, unknown>;
    expect(behind.DisableWriteActions).toBe(false);
    const settings = JSON.parse((await send(guardUrl, '/api/v1/settings')).text) as Record<string, unknown>;
    for (const name of writeActionSettings) expect(settings[name], name).toBe(true);
  });

  it('refuses with 405 the writes the UI server lets through', async () => {
    for (const rawPath of [
      '/api/v1/namespaces/default/workflows/ui-guard-main/signal-with-start/query%2F',
      '/api/v1/namespaces/default/workflows/ui-guard-main/query/../terminate',
    ]) {
      expect((await send(uiUrl, rawPath, { method: 'POST' })).status, rawPath).not.toBe(405);
      const refused = await send(guardUrl, rawPath, { method: 'POST' });
      expect(refused.status, rawPath).toBe(405);
      expect(refused.text, rawPath).toMatch(/read-only/);
    }
  });

  it('answers only the names of HTTP_ALLOWED_HOSTS (421 otherwise)', async () => {
    const port = new URL(guardUrl).port;
    expect((await send(guardUrl, '/', { host: `127.0.0.1:${port}` })).status).toBe(200);
    expect((await send(uiUrl, '/', { host: `localhost:${port}` })).status).toBe(200);
    for (const host of [`localhost:${port}`, `rebound.example:${port}`]) expect((await send(guardUrl, '/', { host })).status, host).toBe(421);
  });

  it('refuses to start without a valid UI_GUARD_TARGET, saying why', async () => {
    for (const [target, reason] of [
      [undefined, /needs UI_GUARD_TARGET/],
      ['temporal-ui', /UI_GUARD_TARGET: expected host:port/],
    ] as const) {
      const env = { PATH: process.env.PATH, UI_GUARD_PORT: '0', ...(target ? { UI_GUARD_TARGET: target } : {}) };
      const failure = await run(process.execPath, ['--import', 'tsx', 'lib/ui-guard-main.ts'], { env, timeout: 60_000 }).then(
        () => null,
        (error: { code?: number; stdout?: string }) => error,
      );
      expect(failure?.code, target).toBe(1);
      expect(failure?.stdout, target).toMatch(reason);
    }
  });
});
