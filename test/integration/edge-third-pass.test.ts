import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, apiClient, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * A security probe's findings against the running API, each reproduced for real: the
 * failed-authentication limit per client address (clients on 127.0.0.2 and 127.0.0.3, a
 * socket bound to each).
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('third-pass');
});
afterAll(async () => stack?.stop());

interface Answer {
  status: number;
  json: any;
}

/** One request whose socket is bound to `localAddress` (a loopback address of its own: another client). */
function from(localAddress: string, url: string, options: { method?: string; token?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: options.method ?? 'GET', localAddress, agent: false, headers: options.token ? { authorization: `Bearer ${options.token}` } : {} }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: any = null;
        try {
          json = JSON.parse(text);
        } catch {
          // not JSON (the /metrics text)
        }
        resolve({ status: response.statusCode!, json });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end();
  });
}

describe('the failed-authentication limit counts each client address apart, and never refuses a valid credential', () => {
  it('30 bad keys from 127.0.0.2: it is limited; 127.0.0.3 is not; valid tenant key, admin token and /metrics pass from every address', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 30 });
    try {
      const bad = (address: string) => from(address, `${api.url}/v1/payments`, { token: `sk_bad_${uniqueKey()}` });
      const first30 = await Promise.all(Array.from({ length: 30 }, () => bad('127.0.0.2')));
      expect(first30.map((a) => a.status)).toEqual(Array(30).fill(401));
      const limited = await bad('127.0.0.2');
      expect(limited.status).toBe(429);
      expect(limited.json.error.type).toBe('rate_limited');

      // Another address has its own count: its bad key is a plain 401.
      const other = await bad('127.0.0.3');
      expect(other.status, JSON.stringify(other.json)).toBe(401);

      for (const address of ['127.0.0.3', '127.0.0.1', '127.0.0.2']) {
        expect((await from(address, `${api.url}/v1/payments`, { token: tenant.apiKey })).status, `tenant key from ${address}`).toBe(200);
        expect((await from(address, `${api.url}/admin/tenants/${tenant.id}`, { token: ADMIN_TOKEN })).status, `admin token from ${address}`).toBe(200);
        expect((await from(address, `${api.url}/metrics`, { token: ADMIN_TOKEN })).status, `/metrics from ${address}`).toBe(200);
      }
      // 127.0.0.2 is still limited for what fails, admin and metrics guesses included.
      expect((await bad('127.0.0.2')).status).toBe(429);
      expect((await from('127.0.0.2', `${api.url}/admin/tenants/${tenant.id}`, { token: 'admin-guess-0123456789' })).status).toBe(429);
      expect((await from('127.0.0.2', `${api.url}/metrics`, { token: 'metrics-guess-0123456789' })).status).toBe(429);
    } finally {
      await api.close();
    }
  });

  it('with TRUSTED_PROXIES, the forwarded address counts: two clients behind one proxy are limited apart, and a client cannot forge its way out', async () => {
    const api = await stack.startApi({ AUTH_FAILURES_PER_MINUTE: 3, TRUSTED_PROXIES: '127.0.0.5' });
    try {
      const viaProxy = (forwardedFor: string, token: string) =>
        fetch(`${api.url}/v1/payments`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': forwardedFor } }).then((r) => r.status);
      // The test's sockets come from 127.0.0.1, not a trusted proxy: the header is ignored, whatever it says.
      const direct = [];
      for (let i = 0; i < 4; i++) direct.push(await viaProxy(`198.51.100.${i}`, `sk_bad_${uniqueKey()}`));
      expect(direct).toEqual([401, 401, 401, 429]);
      // Through the trusted proxy (a socket on 127.0.0.5), each forwarded client has its own count.
      const proxied = (client: string, token: string) =>
        new Promise<number>((resolve, reject) => {
          const request = httpRequest(`${api.url}/v1/payments`, { localAddress: '127.0.0.5', agent: false, headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': `forged, ${client}` } }, (response) => {
            response.resume();
            response.on('end', () => resolve(response.statusCode!));
          });
          request.on('error', reject);
          request.end();
        });
      const clientA = [];
      for (let i = 0; i < 4; i++) clientA.push(await proxied('203.0.113.10', `sk_bad_${uniqueKey()}`));
      expect(clientA).toEqual([401, 401, 401, 429]);
      expect(await proxied('203.0.113.11', `sk_bad_${uniqueKey()}`)).toBe(401);
      expect(await proxied('203.0.113.10', tenant.apiKey)).toBe(200);
    } finally {
      await api.close();
    }
  });
});
