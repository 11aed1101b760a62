import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { testDataConverter } from '../../testkit/payload-keys';
import type { RoutePlanner } from '../../activities';
import { ADMIN_TOKEN, apiClient, captureLogs, decidedPayment, eventually, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';
import { expectNoSecretsInSpans, startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';
import { flushTracing, startTracing, stopTracing } from '../../lib/tracing';

/**
 * One trace per payment (docs/tracing.md), received by an OTLP/HTTP receiver in this process
 * from the real stack (Temporal dev server, PostgreSQL, worker, two sandbox PSPs): the API's
 * server span, the workflow's run under it, each activity under the run, each PSP call and
 * statement under its activity. And nothing secret in any span's attributes.
 */

const SERVER = 2;
const CLIENT = 3;

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let stack: TestStack;
let tenant: Tenant;
let api: ReturnType<typeof apiClient>;
let merchant: Awaited<ReturnType<typeof startWebhookReceiver>>;
const route: RoutePlanner = async () => ({ providers: ['sandbox', 'sandbox-b'], reason: 'test route: sandbox then sandbox-b' });

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = receiver.endpoint;
  expect(startTracing('tracing-test')).toBe(true);
  stack = await startStack({ secondSandbox: {}, route });
  tenant = await stack.createTenant('tracing');
  api = apiClient(stack.apiUrl, tenant.apiKey);
  // The tenant's events are delivered (the relay's span), to an endpoint in this process.
  merchant = await startWebhookReceiver();
  const endpoint = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ webhook_url: merchant.url }),
  });
  expect(endpoint.status).toBe(200);
});
afterAll(async () => {
  await stack?.stop();
  await merchant?.close();
  await stopTracing();
  delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  await receiver?.close();
});

const body = (payment_method = 'pm_card_visa') => ({
  order_id: uniqueKey('ord'),
  amount_minor: 1500,
  currency: 'EUR',
  payment_method,
  capture_method: 'automatic',
  return_url: 'http://127.0.0.1:9/return',
});

/** A payment's trace: the spans sharing the trace id of the server span that names the payment, once `complete` says all arrived. */
async function traceOf(paymentId: string, until: (trace: Trace) => boolean): Promise<Trace> {
  // The run's span is exported when the run ends, after its steps' spans.
  const complete = (trace: Trace) => trace.named('RunWorkflow:paymentWorkflow').length > 0 && until(trace);
  return eventually(
    async () => {
      await flushTracing();
      // The request that created it: a duplicate's or a webhook's span names the payment too, and links to this one.
      const server = receiver.spans.find((s) => s.kind === SERVER && s.name === 'POST /v1/payments' && s.attributes['payment.id'] === paymentId && s.links.length === 0);
      if (!server) return null;
      const trace = new Trace(server, receiver.spans.filter((s) => s.traceId === server.traceId));
      return complete(trace) ? trace : null;
    },
    20_000,
    200,
    `the trace of ${paymentId}`,
  );
}

class Trace {
  constructor(
    readonly server: ReceivedSpan,
    readonly spans: ReceivedSpan[],
  ) {}
  named(name: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.name === name);
  }
  one(name: string): ReceivedSpan {
    const found = this.named(name);
    expect(found, `spans named ${name}`).toHaveLength(1);
    return found[0]!;
  }
  childrenOf(parent: ReceivedSpan): ReceivedSpan[] {
    return this.spans.filter((s) => s.parentSpanId === parent.spanId);
  }
  /** Each execution of the activity, a child of the workflow's run (workflows/interceptors.ts: no scheduling span between). */
  activity(run: ReceivedSpan, type: string): ReceivedSpan[] {
    return this.childrenOf(run).filter((s) => s.name === `RunActivity:${type}`);
  }
}

/** The tree every payment's trace has: server span → start → the run, with the workflow id. */
function expectWorkflowUnderServer(trace: Trace): ReceivedSpan {
  expect(trace.server.name).toBe('POST /v1/payments');
  const start = trace.childrenOf(trace.server).find((s) => s.name.endsWith('Workflow:paymentWorkflow') || s.name.startsWith('UpdateWithStartWorkflow'));
  expect(start, 'the client span starting the workflow, under the server span').toBeDefined();
  const run = trace.one('RunWorkflow:paymentWorkflow');
  expect(run.parentSpanId).toBe(start!.spanId);
  expect(run.attributes.workflowId).toBe(start!.attributes.temporalWorkflowId);
  expect(run.attributes.workflowType).toBe('paymentWorkflow');
  return run;
}

const statementsUnder = (trace: Trace, parent: ReceivedSpan) => trace.childrenOf(parent).filter((s) => s.kind === CLIENT && s.attributes['db.system'] === 'postgresql');
const pspCallsUnder = (trace: Trace, parent: ReceivedSpan) => trace.childrenOf(parent).filter((s) => s.kind === CLIENT && typeof s.attributes['psp.name'] === 'string');

describe('one trace per payment', () => {
  it('a card payment: server span → workflow → activities → the PSP call and the statements; the delivery of its event in the same trace, under the step that wrote it', async () => {
    const created = await api.post('/v1/payments', body(), uniqueKey());
    expect(created.status).toBe(201);
    const id = created.json.id as string;
    const trace = await traceOf(id, (t) => t.named('RunActivity:recordChargeOutcome').length > 0);
    const run = expectWorkflowUnderServer(trace);

    const [charge] = trace.activity(run, 'chargeAttempt');
    expect(charge, 'the charge attempt under the run').toBeDefined();
    const calls = pspCallsUnder(trace, charge!);
    expect(calls.map((s) => s.name)).toContain('psp sandbox createCharge');
    expect(calls.find((s) => s.name === 'psp sandbox createCharge')!.attributes).toMatchObject({ 'psp.name': 'sandbox', 'psp.sub_key': `${id}:charge` });

    // One span per execution of the record step (a busy machine may time one out and retry it).
    const records = trace.activity(run, 'recordChargeOutcome');
    expect(records.length, 'the record step under the run').toBeGreaterThan(0);
    expect(records.flatMap((record) => statementsUnder(trace, record)).map((s) => s.name)).toEqual(expect.arrayContaining(['UPDATE payments', 'INSERT outbox_events']));
    // The API's own statements (the idempotency record) are under the server span.
    expect(statementsUnder(trace, trace.server).some((s) => s.attributes['db.collection.name'] === 'idempotency_records')).toBe(true);

    // The relay's delivery of the payment's event is in the payment's trace, under the step that wrote the event, its statements under it.
    const delivery = await eventually(
      async () => {
        await flushTracing();
        return receiver.spans.find((s) => s.name === 'outbox deliver payment.succeeded' && s.attributes['payment.id'] === id);
      },
      20_000,
      200,
      'the outbox delivery span',
    );
    expect(delivery.traceId).toBe(trace.server.traceId);
    expect(records.map((record) => record.spanId)).toContain(delivery.parentSpanId);
    await eventually(
      async () => {
        await flushTracing();
        return receiver.spans.some((s) => s.parentSpanId === delivery.spanId && s.name === 'UPDATE outbox_events');
      },
      20_000,
      200,
      'the delivery\'s statements under it',
    );
    // No statement of a background poll is a trace of its own: each is under a span of ours.
    const roots = receiver.spans.filter((s) => s.parentSpanId === '' && s.attributes['db.system'] === 'postgresql');
    expect(roots.map((s) => s.name)).toEqual([]);
  });

  it('a failover from sandbox to sandbox-b: both PSP calls in the payment trace, each under its attempt', async () => {
    await outage(stack.sandboxUrl, 'unavailable');
    try {
      const created = await api.post('/v1/payments', body(), uniqueKey());
      const payment = await decidedPayment(api, created.json.id);
      expect(payment).toMatchObject({ status: 'succeeded', provider: 'sandbox-b' });
      const trace = await traceOf(payment.id, (t) => t.spans.some((s) => s.attributes['psp.name'] === 'sandbox-b') && t.named('RunActivity:recordChargeOutcome').length > 0);
      const run = expectWorkflowUnderServer(trace);
      const attempts = trace.activity(run, 'chargeAttempt');
      const pspOf = (attempt: ReceivedSpan) => pspCallsUnder(trace, attempt).map((s) => s.attributes['psp.name']);
      expect(attempts.some((a) => pspOf(a).includes('sandbox'))).toBe(true);
      expect(attempts.some((a) => pspOf(a).includes('sandbox-b'))).toBe(true);
    } finally {
      await outage(stack.sandboxUrl, 'none');
    }
  });

  it('a 3-D Secure payment decided by the PSP webhook: the decision is recorded in the payment trace; the webhook\'s span and a duplicate request\'s link to it', async () => {
    const request = body('pm_card_threeDSecureRequired');
    const key = uniqueKey();
    const created = await api.post('/v1/payments', request, key);
    expect(created.status).toBe(202);
    // The client's retry while the run waits for the customer: it attaches to the run, its span linked to the creating request's.
    const duplicate = await api.post('/v1/payments', request, key);
    expect(duplicate.json.id).toBe(created.json.id);
    const approved = await fetch(created.json.next_action.redirect_to_url.url, { method: 'POST', body: new URLSearchParams({ result: 'approve' }), redirect: 'manual' });
    expect(approved.status).toBe(303);
    const payment = await decidedPayment(api, created.json.id);
    expect(payment.status).toBe('succeeded');
    const trace = await traceOf(payment.id, (t) => t.named('RunActivity:recordSettlement').length > 0);
    const run = expectWorkflowUnderServer(trace);
    expect(trace.activity(run, 'recordSettlement').length).toBeGreaterThan(0);
    const linkedServerSpans = (route: string) =>
      eventually(
        async () => {
          await flushTracing();
          const found = receiver.spans.filter((s) => s.kind === SERVER && s.attributes['http.route'] === route && s.attributes['payment.id'] === payment.id);
          return found.length > 0 ? found : null;
        },
        20_000,
        200,
        `the ${route} server spans of ${payment.id}`,
      );
    const toPaymentTrace = { traceId: trace.server.traceId, spanId: trace.server.spanId };
    // The webhook is a trace of its own (the PSP's request), linked to the span that created the payment.
    for (const webhook of await linkedServerSpans('/provider_webhooks/:provider')) {
      expect(webhook.traceId).not.toBe(trace.server.traceId);
      expect(webhook.links).toEqual([toPaymentTrace]);
    }
    // The duplicate: its own trace, linked to the creating request's span.
    const duplicates = (await linkedServerSpans('/v1/payments')).filter((s) => s.spanId !== trace.server.spanId);
    expect(duplicates).toHaveLength(1);
    expect(duplicates[0]!.traceId).not.toBe(trace.server.traceId);
    expect(duplicates[0]!.links).toEqual([toPaymentTrace]);
  });

  it('a run recorded with tracing on replays with tracing off (its headers carry the context; the workflow code is the same)', async () => {
    const created = await api.post('/v1/payments', body(), uniqueKey());
    const trace = await traceOf(created.json.id, () => true);
    const workflowId = String(trace.one('RunWorkflow:paymentWorkflow').attributes.workflowId);
    const history = await stack.temporal.workflow.getHandle(workflowId).fetchHistory();
    // Recorded on: the start carries the trace context in its headers.
    expect(Object.keys(history.events?.[0]?.workflowExecutionStartedEventAttributes?.header?.fields ?? {})).toContain('_tracer-data');
    await Worker.runReplayHistory({ workflowBundle: { code: readFileSync(inject('workflowBundlePath'), 'utf8') }, dataConverter: testDataConverter, sinks: { exporter: { export: { fn: () => {} } } } }, history, workflowId);
  });

  it('log lines written inside the payment trace carry its trace id and the id of one of its spans, the request line of the API among them', async () => {
    const logs = captureLogs();
    try {
      const created = await api.post('/v1/payments', body(), uniqueKey());
      const trace = await traceOf(created.json.id, (t) => t.named('RunActivity:recordChargeOutcome').length > 0);
      const spanIds = new Set(trace.spans.map((s) => s.spanId));
      const traced = logs.lines().filter((line) => line.trace_id === trace.server.traceId);
      expect(traced.length, 'log lines with the payment trace id').toBeGreaterThan(0);
      expect(traced.filter((line) => !spanIds.has(String(line.span_id)))).toEqual([]);
      // The API's request line is written inside its server span.
      expect(traced.some((line) => line.span_id === trace.server.spanId)).toBe(true);
    } finally {
      logs.stop();
    }
  });

  it('no span attribute holds a card number, a payment method token, an API key or a secret', async () => {
    await flushTracing();
    expect(receiver.spans.length).toBeGreaterThan(20);
    expectNoSecretsInSpans(receiver.spans, [tenant.apiKey, tenant.webhookSecret, ADMIN_TOKEN]);
  });
});

async function outage(url: string, mode: 'none' | 'unavailable') {
  const response = await fetch(`${url}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  expect(response.status).toBe(200);
}
