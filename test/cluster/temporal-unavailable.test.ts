import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { apiClient, captureLogs, isolatedApi, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';
import { startTemporalProxy } from '../helpers/temporal-proxy';
import { freePort } from '../../devstack/ports';
import { startTemporalDevServer, type DevServer } from '../../devstack/temporal-cli';
import { testDataConverter } from '../../testkit/payload-keys';
import type { ApiResponse } from '../../devstack/stack';

/**
 * Engine trouble is never a 500. Each way the API's Temporal client can lose the engine is
 * produced for real (a closed connection, nothing listening, a stalled or resetting TCP proxy
 * in front of the run's Temporal server, a server throttling with RESOURCE_EXHAUSTED, a server
 * SIGKILLed), and each answer must be 503 `temporal_unavailable` with Retry-After, with nothing
 * recorded for the key, so the retry under the same key runs normally once Temporal is back.
 */

let stack: TestStack;
let tenant: Tenant;
beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant('unavailable');
});
afterAll(async () => {
  await stack?.stop();
});

const request = () => ({ order_id: uniqueKey('ord'), amount_minor: 1200, currency: 'EUR', payment_method: 'pm_card_visa' });

/** The engine-trouble answer: nothing charged and no answer stored for the key. */
async function expectRefused(response: ApiResponse, key: string, orderId: string) {
  expect(response.status, response.text).toBe(503);
  expect(response.json.error.type).toBe('temporal_unavailable');
  expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
  // Nothing charged, no answer stored; a new payment's claim and intent are kept for the retry.
  const [counts] = await stack.sql<{ answered: number; charged: number }[]>`
    SELECT (SELECT count(*)::int FROM idempotency_records WHERE idempotency_key = ${key} AND state = 'completed') AS answered,
           (SELECT count(*)::int FROM payments WHERE order_id = ${orderId} AND (status <> 'processing' OR provider_charge_id IS NOT NULL)) AS charged`;
  expect(counts).toEqual({ answered: 0, charged: 0 });
}

/**
 * A client that retries by key, as the README tells clients to: until a final answer, honouring
 * Retry-After; every answer before it must be the engine-trouble one (never a 500). The final
 * one is the first execution (not a replay of anything stored).
 */
async function retryUntilFinal(url: string, body: ReturnType<typeof request>, key: string, timeoutMs = 60_000): Promise<ApiResponse> {
  const api = apiClient(url, tenant.apiKey);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await api.post('/v1/payments', body, key);
    if (response.status !== 503) {
      expect(response.status, response.text).toBe(201);
      expect(response.headers.get('idempotent-replayed')).toBeNull();
      return response;
    }
    expect(response.json.error.type, response.text).toBe('temporal_unavailable');
    if (Date.now() > deadline) throw new Error(`still 503 after ${timeoutMs} ms: ${response.text}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The reasons the API logged for failing closed (what the client saw as 503). */
function loggedReasons(logs: ReturnType<typeof captureLogs>): string[] {
  return logs
    .lines()
    .filter((line) => typeof line.msg === 'string' && line.msg.startsWith('Temporal unavailable'))
    .map((line) => String(line.reason));
}

describe('the API fails closed with 503 temporal_unavailable for every way of losing Temporal', () => {
  it('a closed connection ("Channel has been shut down"), and the retry runs through a live one', async () => {
    const connection = await Connection.connect({ address: stack.temporalAddress });
    await connection.close();
    const dead = await isolatedApi(stack, new Client({ connection, dataConverter: testDataConverter }), { TEMPORAL_RPC_TIMEOUT_MS: 1500 });
    try {
      const logs = captureLogs();
      const body = request();
      const key = uniqueKey();
      await expectRefused(await apiClient(dead.url, tenant.apiKey).post('/v1/payments', body, key), key, body.order_id);
      logs.stop();
      expect(loggedReasons(logs).join(' ')).toMatch(/Channel has been shut down/);
      await retryUntilFinal(stack.apiUrl, body, key);
    } finally {
      await dead.close();
    }
  });

  it('nothing listening at the address (connection refused: UNAVAILABLE)', async () => {
    const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}` });
    const dead = await isolatedApi(stack, new Client({ connection, dataConverter: testDataConverter }), { TEMPORAL_RPC_TIMEOUT_MS: 1500 });
    try {
      const body = request();
      const key = uniqueKey();
      await expectRefused(await apiClient(dead.url, tenant.apiKey).post('/v1/payments', body, key), key, body.order_id);
      await retryUntilFinal(stack.apiUrl, body, key);
    } finally {
      await dead.close();
    }
  });

  /**
   * An API process whose Temporal client reaches the run's server through the proxy: a first
   * payment goes through (the connection is up), then `fault` strikes, then it lifts.
   */
  async function throughProxy(fault: 'stall' | 'reset', expectedReason: RegExp) {
    const proxy = await startTemporalProxy(stack.temporalAddress);
    const connection = await Connection.connect({ address: proxy.address });
    const api = await isolatedApi(stack, new Client({ connection, dataConverter: testDataConverter }), { TEMPORAL_RPC_TIMEOUT_MS: 1500 });
    try {
      const client = apiClient(api.url, tenant.apiKey);
      expect((await client.post('/v1/payments', request(), uniqueKey())).status).toBe(201);

      proxy.setMode(fault);
      const logs = captureLogs();
      const body = request();
      const key = uniqueKey();
      await expectRefused(await client.post('/v1/payments', body, key), key, body.order_id);
      logs.stop();
      expect(loggedReasons(logs).join(' ')).toMatch(expectedReason);

      // The same process, the same connection object: it recovers on its own.
      proxy.setMode('pass');
      await retryUntilFinal(api.url, body, key);
    } finally {
      await api.close();
      await connection.close();
      await proxy.close();
    }
  }

  it('a frontend that stops answering on an open connection (stalled proxy: DEADLINE_EXCEEDED), then answers again', async () => {
    await throughProxy('stall', /gRPC 4/);
  });

  it('connections reset under the client (a node killed behind a balancer: UNAVAILABLE), then the same process reconnects (UNAVAILABLE retried by the SDK up to the deadline)', async () => {
    await throughProxy('reset', /gRPC (14|4|1|13)/); // UNAVAILABLE, retried by the SDK until the deadline
  });

  describe('a server of its own', () => {
    let server: DevServer;
    beforeAll(async () => {
      // Throttled to one request a second for the namespace: a burst is refused with RESOURCE_EXHAUSTED.
      server = await startTemporalDevServer({ port: await freePort(), dynamicConfig: { 'frontend.namespaceRPS': 1, 'frontend.namespaceBurstRatio': 1 } });
    });
    afterAll(async () => {
      await server?.stop('SIGKILL');
    });

    it('throttling (RESOURCE_EXHAUSTED, retried by the SDK until the deadline): 503 for what did not get through', async () => {
      // The server really refuses with RESOURCE_EXHAUSTED (a client without the SDK's retries sees it).
      const raw = await Connection.connect({ address: server.address, interceptors: [] });
      try {
        const codes = await Promise.all(
          Array.from({ length: 6 }, () => raw.workflowService.describeNamespace({ namespace: 'default' }).then(() => 0, (error: { code?: number }) => error.code ?? -1)),
        );
        expect(codes).toContain(8);
      } finally {
        await raw.close();
      }

      const connection = await Connection.connect({ address: server.address });
      // No worker polls this server: what gets through is started and answered 202.
      const api = await isolatedApi(stack, new Client({ connection, dataConverter: testDataConverter }), { TEMPORAL_RPC_TIMEOUT_MS: 1500, IDEMPOTENCY_WAIT_MS: 300 });
      try {
        const client = apiClient(api.url, tenant.apiKey);
        const burst = Array.from({ length: 8 }, () => ({ body: request(), key: uniqueKey() }));
        const answers = await Promise.all(burst.map(({ body, key }) => client.post('/v1/payments', body, key)));
        expect(answers.map((a) => a.status).filter((s) => s !== 202 && s !== 503)).toEqual([]);
        const refused = burst.filter((_, i) => answers[i]!.status === 503);
        expect(refused.length).toBeGreaterThan(0);
        for (const { body, key } of refused) {
          await expectRefused(answers[burst.findIndex((b) => b.key === key)]!, key, body.order_id);
        }
        // Once Temporal takes them, the refused keys run normally.
        for (const { body, key } of refused) await retryUntilFinal(stack.apiUrl, body, key);
      } finally {
        await api.close();
        await connection.close();
      }
    });

    it('the server SIGKILLed under a connected client (UNAVAILABLE)', async () => {
      const connection = await Connection.connect({ address: server.address });
      const api = await isolatedApi(stack, new Client({ connection, dataConverter: testDataConverter }), { TEMPORAL_RPC_TIMEOUT_MS: 1500 });
      try {
        await server.stop('SIGKILL');
        const body = request();
        const key = uniqueKey();
        await expectRefused(await apiClient(api.url, tenant.apiKey).post('/v1/payments', body, key), key, body.order_id);
        await retryUntilFinal(stack.apiUrl, body, key);
      } finally {
        await api.close();
        await connection.close();
      }
    });
  });
});
