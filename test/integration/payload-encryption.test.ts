import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Client } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { startCodecServer, type RunningCodecServer } from '../../lib/codec-server';
import { AesGcmPayloadCodec } from '../../lib/payload-codec';
import { resolveTemporalCli } from '../../devstack/temporal-cli';
import { clearPayloads, leaks } from '../helpers/history-payloads';
import { testPayloadKeys } from '../../testkit/payload-keys';
import { apiClient, startStack, type TestStack } from '../helpers/stack';

/**
 * Temporal stores ciphertext only: what a client sends (card token, metadata, description,
 * idempotency key) and what the API answers are encrypted by the payload codec before they
 * reach the server, and the codec server gives them back to whoever holds its token.
 */

const execFileAsync = promisify(execFile);

let stack: TestStack;
let api: ReturnType<typeof apiClient>;
/** A Temporal client WITHOUT the codec: it sees what the server stores. */
let raw: Client;
const guarded: RunningCodecServer[] = [];

beforeAll(async () => {
  stack = await startStack();
  api = apiClient(stack.apiUrl, (await stack.createTenant('encryption')).apiKey);
  raw = new Client({ connection: stack.temporal.connection, namespace: 'default' });
});
afterAll(async () => {
  for (const server of guarded) await server.close();
  await stack?.stop();
});

/** A manual-capture payment carrying canaries, then captured: start, activities, update, memo. */
async function paymentWithCanaries() {
  const canary = `canary-${randomBytes(6).toString('hex')}`;
  // Keys with a slash are hashed into the workflow and update ids (domain/ids.ts), so they
  // must not appear anywhere at all; a plain key would be readable in those ids by design.
  const paymentKey = `pay/key/${canary}`;
  const captureKey = `capture/key/${canary}`;
  const created = await api.post(
    '/v1/payments',
    {
      order_id: `ord-${randomBytes(4).toString('hex')}`,
      amount_minor: 4999,
      currency: 'EUR',
      payment_method: 'pm_card_visa',
      capture_method: 'manual',
      description: `description ${canary}`,
      metadata: { note: `metadata ${canary}` },
    },
    paymentKey,
  );
  expect(created.status).toBe(201);
  const captured = await api.post(`/v1/payments/${created.json.id}/capture`, {}, captureKey);
  expect(captured.status).toBe(200);
  await stack.temporal.workflow.getHandle(created.json.workflow_id).result();
  return { canary, payment: created.json as { id: string; workflow_id: string; order_id: string } };
}

describe('a history from a real run holds no plaintext of what the client sent', () => {
  it('`temporal workflow show` (no codec) shows neither canary, nor card token, nor idempotency key; only search attributes in clear', async () => {
    const { canary, payment } = await paymentWithCanaries();
    const cli = resolveTemporalCli();
    expect(cli, 'the Temporal CLI').toBeTruthy();
    const { stdout } = await execFileAsync(cli!, ['workflow', 'show', '-w', payment.workflow_id, '--address', stack.temporalAddress, '--output', 'json'], {
      maxBuffer: 64 * 1024 * 1024,
    });
    // Every payload that is not ciphertext, decoded: the canary is in none of them.
    const history = historyFromJSON(JSON.parse(stdout));
    expect(leaks(history)).toEqual([]);
    const clearText = clearPayloads(history).map((p) => p.text).join('\n');
    expect(clearText).not.toContain(canary);
    expect(clearText).not.toContain('pm_card_visa');
    // What stays in clear on purpose: the search attributes the UI filters on.
    expect(clearText).toContain(payment.order_id);

    // The same history through the codec: everything is there.
    const readable = JSON.stringify(await stack.temporal.workflow.getHandle(payment.workflow_id).describe().then((d) => d.memo));
    expect(readable).toContain('fingerprint');
  });
});

describe('the codec server decodes what the worker encoded', () => {
  const token = `codec-token-${randomBytes(12).toString('hex')}`;
  const origin = 'http://127.0.0.1:8233';
  let server: RunningCodecServer;
  beforeAll(async () => {
    server = await startCodecServer({ codec: new AesGcmPayloadCodec(testPayloadKeys), token, allowedOrigins: [origin], enableEncode: true, port: 0 });
    guarded.push(server);
  });

  /** The encrypted result of the payment's first activity, as stored by the server. */
  async function storedResult(workflowId: string): Promise<Payload> {
    const history = await raw.workflow.getHandle(workflowId).fetchHistory();
    const completed = history.events!.find((e) => e.workflowExecutionCompletedEventAttributes)!;
    return completed.workflowExecutionCompletedEventAttributes!.result!.payloads![0]! as Payload;
  }
  const asJson = (p: Payload) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    data: Buffer.from(p.data ?? []).toString('base64'),
  });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers }, body: JSON.stringify(body) });

  it('POST /decode with the token returns the workflow result in clear (the response body with the metadata canary)', async () => {
    const { canary, payment } = await paymentWithCanaries();
    const stored = await storedResult(payment.workflow_id);
    expect(Buffer.from(stored.metadata!.encoding!).toString()).toBe('binary/encrypted');
    const response = await post('/decode', { payloads: [asJson(stored)] }, { authorization: `Bearer ${token}` });
    expect(response.status).toBe(200);
    const { payloads } = (await response.json()) as { payloads: { metadata: Record<string, string>; data: string }[] };
    const decoded = defaultPayloadConverter.fromPayload<{ body: string }>({
      metadata: Object.fromEntries(Object.entries(payloads[0]!.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
      data: Buffer.from(payloads[0]!.data, 'base64'),
    });
    expect(decoded.body).toContain(`metadata ${canary}`);

    // /encode then /decode is the identity, as the UI relies on when it sends a signal or an update.
    const encoded = await post('/encode', { payloads: [payloads[0]] }, { authorization: `Bearer ${token}` });
    const again = await post('/decode', await encoded.json(), { authorization: `Bearer ${token}` });
    expect(((await again.json()) as { payloads: unknown[] }).payloads[0]).toEqual(payloads[0]);
  });

  it('refuses without the token, or with another one: 401 in the error shape', async () => {
    const { payment } = await paymentWithCanaries();
    const body = { payloads: [asJson(await storedResult(payment.workflow_id))] };
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: token }]) {
      const response = await post('/decode', body, headers);
      expect(response.status).toBe(401);
      const answer = (await response.json()) as { error: { type: string } };
      expect(answer.error.type).toBe('unauthorized');
      expect(JSON.stringify(answer)).not.toContain('canary');
    }
  });

  it('answers bad input with a 400, and the UI origin preflight with the headers the UI sends', async () => {
    const auth = { authorization: `Bearer ${token}` };
    expect((await post('/decode', { payloads: [{ data: 'not base64!' }] }, auth)).status).toBe(400);
    expect((await post('/decode', { nope: [] }, auth)).status).toBe(400);
    const huge = await post('/decode', { payloads: [{ data: 'A'.repeat(17 * 1024 * 1024) }] }, auth);
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { type: string } }).error.type).toBe('payload_too_large');
    const foreign = { metadata: { encoding: Buffer.from('binary/encrypted').toString('base64'), 'encryption-key-id': Buffer.from('gone').toString('base64') }, data: 'AAAA' };
    const unknownKey = await post('/decode', { payloads: [foreign] }, auth);
    expect(unknownKey.status).toBe(400);
    expect(((await unknownKey.json()) as { error: { message: string } }).error.message).toMatch(/key "gone"/);

    const preflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-namespace,authorization,content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(origin);
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase().split(',')).toEqual(['x-namespace', 'authorization', 'content-type']);
    const elsewhere = await fetch(`${server.url}/decode`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' } });
    expect(elsewhere.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe("Temporal's user metadata: what an operator reads without opening a payload", () => {
  it('a static summary on the payment run and a summary on each activity, stored encrypted and read back through the codec', async () => {
    const { payment, canary } = await paymentWithCanaries();
    const description = await stack.temporal.workflow.getHandle(payment.workflow_id).describe();
    expect(await description.staticSummary()).toBe(`Payment 49.99 EUR · ${payment.order_id}`);

    const history = await raw.workflow.getHandle(payment.workflow_id).fetchHistory();
    const summaries = history.events!.filter((e) => e.userMetadata?.summary).map((e) => e.userMetadata!.summary! as Payload);
    for (const summary of summaries) expect(Buffer.from(summary.metadata!.encoding!).toString()).toBe('binary/encrypted');
    const codec = new AesGcmPayloadCodec(testPayloadKeys);
    const texts = (await codec.decode(summaries)).map((p) => defaultPayloadConverter.fromPayload<string>(p));
    expect(texts).toEqual(expect.arrayContaining([`Payment 49.99 EUR · ${payment.order_id}`, 'charge attempt at one PSP (attempt 1: decide the route)', 'record outcome + ledger + outbox', 'capture at provider']));
    expect(texts.join(' ')).not.toContain(canary);
    expect(texts.join(' ')).not.toContain('pm_card');
  });

  it('the Web UI of the run is configured with the codec server (its /api/v1/settings names the endpoint)', async () => {
    const settings = (await (await fetch(`${inject('temporalUiUrl')}/api/v1/settings`)).json()) as { Codec?: { Endpoint?: string } };
    expect(settings.Codec?.Endpoint).toBe(inject('codecUrl'));
  });
});
