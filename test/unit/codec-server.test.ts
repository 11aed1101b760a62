import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import { startCodecServer, type RunningCodecServer } from '../../lib/codec-server';
import { assertSafeCodecServer, loadConfig } from '../../lib/config';
import { AesGcmPayloadCodec } from '../../lib/payload-codec';
import { TEST_PAYLOAD_KEYS, testPayloadKeys } from '../../testkit/payload-keys';

/**
 * The codec server decrypts and encrypts only for whom it is meant to.
 * Production (NODE_ENV=production, or any address but loopback) refuses to start without a
 * token and the UI's origins; /encode is off unless enabled; only JSON bodies are read; an
 * unknown Host is refused. Loopback only: the servers here listen on 127.0.0.1.
 */

const run = promisify(execFile);
const codec = new AesGcmPayloadCodec(testPayloadKeys);
const token = 'c0dec-7f3a9e1b5d2c8f4a6e0b3d7c9a1f5e2b';
const origin = 'https://temporal-ui.example.com';
const strongAdmin = '3f9c1e0b7a5d4c2e8f6a1b3d5c7e9f0a';
const TEMPORAL_PAYLOAD_KEYS = TEST_PAYLOAD_KEYS;

async function encryptedPayload(text: string) {
  const [payload] = await codec.encode([defaultPayloadConverter.toPayload(text)]);
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
  return { metadata: Object.fromEntries(Object.entries(payload!.metadata ?? {}).map(([k, v]) => [k, b64(v)])), data: b64(payload!.data!) };
}

describe('the codec server refuses to run open in production', () => {
  const production = { NODE_ENV: 'production', ADMIN_TOKEN: strongAdmin, TEMPORAL_PAYLOAD_KEYS };

  it('NODE_ENV=production without CODEC_TOKEN, with a weak one, or without CODEC_CORS_ORIGINS: refused with the reason', () => {
    expect(() => assertSafeCodecServer(loadConfig(production))).toThrow(/CODEC_TOKEN/);
    expect(() => assertSafeCodecServer(loadConfig({ ...production, CODEC_TOKEN: 'a'.repeat(40) }))).toThrow(/CODEC_TOKEN/);
    expect(() => assertSafeCodecServer(loadConfig({ ...production, CODEC_TOKEN: token }))).toThrow(/CODEC_CORS_ORIGINS/);
    expect(() => assertSafeCodecServer(loadConfig({ ...production, CODEC_TOKEN: token, CODEC_CORS_ORIGINS: origin }))).not.toThrow();
  });

  it('a non-loopback HOST is production for the codec server, whatever NODE_ENV says', () => {
    expect(() => assertSafeCodecServer(loadConfig({ HOST: '0.0.0.0', TEMPORAL_PAYLOAD_KEYS }))).toThrow(/on 0\.0\.0\.0 without CODEC_TOKEN/);
    expect(() => assertSafeCodecServer(loadConfig({ HOST: '10.1.2.3', CODEC_TOKEN: token, TEMPORAL_PAYLOAD_KEYS }))).toThrow(/CODEC_CORS_ORIGINS/);
    // Development on loopback stays as it was: open, for the dev UI (which has no login to forward).
    expect(() => assertSafeCodecServer(loadConfig({ TEMPORAL_PAYLOAD_KEYS }))).not.toThrow();
  });

  it('CODEC_CORS_ORIGINS takes origins only: no wildcard, no path, no "null"', () => {
    for (const bad of ['*', 'https://ui.example.com/', 'https://ui.example.com/path', 'null', 'ui.example.com', 'https://*.example.com']) {
      expect(() => loadConfig({ CODEC_CORS_ORIGINS: bad }), bad).toThrow(/CODEC_CORS_ORIGINS/);
    }
    expect(loadConfig({ CODEC_CORS_ORIGINS: `${origin}, http://[::1]:8233` }).CODEC_CORS_ORIGINS).toEqual([origin, 'http://[::1]:8233']);
  });

  it('the process itself exits 1 with the reason (npm run codec-server, production without a token)', async () => {
    const env = { PATH: process.env.PATH, ...production, CODEC_PORT: '0', LOG_LEVEL: 'fatal' };
    const failure = await run(process.execPath, ['--import', 'tsx', 'lib/codec-server-main.ts'], { env, timeout: 60_000 }).then(
      () => null,
      (error: { code?: number; stdout?: string }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stdout).toMatch(/without CODEC_TOKEN/);
  });
});

describe('what the codec server answers', () => {
  let server: RunningCodecServer;
  let withEncode: RunningCodecServer;
  beforeAll(async () => {
    server = await startCodecServer({ codec, token, allowedOrigins: [origin], port: 0 });
    withEncode = await startCodecServer({ codec, token, allowedOrigins: [origin], enableEncode: true, port: 0 });
  });
  afterAll(async () => {
    await server?.close();
    await withEncode?.close();
  });

  const post = (url: string, path: string, body: string, headers: Record<string, string>) => fetch(`${url}${path}`, { method: 'POST', headers: { 'x-namespace': 'default', ...headers }, body });
  const json = { 'content-type': 'application/json', authorization: `Bearer ${token}` };

  it('decodes for the bearer of the token, and refuses everyone else with 401', async () => {
    const body = JSON.stringify({ payloads: [await encryptedPayload('card pm_secret')] });
    const ok = await post(server.url, '/decode', body, json);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain(Buffer.from('"card pm_secret"').toString('base64'));
    for (const authorization of [undefined, 'Bearer nope-nope-nope-nope', token]) {
      const refused = await post(server.url, '/decode', body, { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) });
      expect(refused.status).toBe(401);
    }
  });

  it('/encode is off unless enabled: 404, and nothing is encrypted under the live key', async () => {
    const body = JSON.stringify({ payloads: [defaultPayloadConverter.toPayload('forged')].map((p) => ({ metadata: { encoding: Buffer.from(p.metadata!.encoding!).toString('base64') }, data: Buffer.from(p.data!).toString('base64') })) });
    const off = await post(server.url, '/encode', body, json);
    expect(off.status).toBe(404);
    expect(((await off.json()) as any).error.message).toMatch(/CODEC_ENABLE_ENCODE/);
    expect((await post(withEncode.url, '/encode', body, json)).status).toBe(200);
  });

  it('reads JSON only: text/plain (a CORS simple request), a form, or no type at all is 415', async () => {
    const body = JSON.stringify({ payloads: [await encryptedPayload('x')] });
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', undefined]) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (type) headers['content-type'] = type;
      const response = type ? await post(server.url, '/decode', body, headers) : await fetch(`${server.url}/decode`, { method: 'POST', headers, body: new Blob([body]) });
      expect(response.status, String(type)).toBe(415);
      expect(((await response.json()) as any).error.type).toBe('unsupported_media_type');
    }
  });

  it('answers only for its own host names (DNS rebinding): another Host is 421', async () => {
    const { request } = await import('node:http');
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(`${server.url}/healthz`, { headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await status('attacker.example:8888')).toBe(421);
    expect(await status('127.0.0.1.nip.io')).toBe(421);
    expect(await status(`localhost:${new URL(server.url).port}`)).toBe(200);
    expect(await status('[::1]:8888')).toBe(200);
  });

  it('CORS admits the configured UI origin only', async () => {
    const preflight = (from: string) => fetch(`${server.url}/decode`, { method: 'OPTIONS', headers: { origin: from, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-namespace' } });
    expect((await preflight(origin)).headers.get('access-control-allow-origin')).toBe(origin);
    expect((await preflight('https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
  });
});
