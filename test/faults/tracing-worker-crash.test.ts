import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, decidedPayment, eventually, type Tenant, type TestStack } from '../helpers/stack';
import { chargesAtProvider } from '../helpers/effects';
import { chargeAttempts, paymentIdOfKey } from '../helpers/faults/census';
import { startFaultStack, type FaultStack } from '../helpers/faults/stack';
import { paymentRequest, type Api } from '../helpers/faults/payments';
import { expectNoSecretsInSpans, startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver';
import { flushTracing, startTracing, stopTracing } from '../../lib/tracing';
import { spawnWorker, type WorkerEnvironment, type WorkerProcess } from '../../testkit/processes';

/**
 * One trace per payment across a worker crash (docs/tracing.md): the worker process is killed
 * with SIGKILL right after the PSP answered the charge (kill point `after-provider-answer`),
 * before the answer was recorded; the next worker runs the charge again. The API runs in this
 * process, the workers as child processes, all exporting to an OTLP receiver here, each worker
 * under its own service name: the retried charge's span, made by the next worker, is in the
 * payment's trace, a child of the run's span, under the request's server span.
 */

const SERVER = 2;

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let faults: FaultStack;
let stack: TestStack;
let tenant: Tenant;
let api: Api;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = receiver.endpoint;
  expect(startTracing('tracing-crash-test')).toBe(true);
  faults = await startFaultStack('tracing-worker-crash', { worker: false });
  ({ stack, tenant, api } = faults);
  faults.alsoStop(async () => Promise.all(workers.map((worker) => worker.kill())));
});
afterAll(async () => {
  await faults?.stop();
  await stopTracing();
  delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  await receiver?.close();
});

async function startWorker(serviceName: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const environment: WorkerEnvironment = {
    databaseUrl: stack.databaseUrl,
    temporalAddress: stack.temporalAddress,
    taskQueue: stack.taskQueue,
    providerUrl: stack.sandboxUrl,
    env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.endpoint, OTEL_SERVICE_NAME: serviceName, ...env },
  };
  const worker = await spawnWorker(`${serviceName}-${stack.taskQueue}`, environment);
  workers.push(worker);
  return worker;
}

describe('a worker killed mid-payment', () => {
  it(
    "the retried charge's span, from the next worker, joins the payment's trace under the run's span",
    async () => {
      const armed = await startWorker('payment-worker-killed', { CHAOS_KILL_AT: 'after-provider-answer:1' });
      const plan = paymentRequest('pm_card_visa');
      const firstAnswer = api.post('/v1/payments', plan.body, plan.key).catch(() => null);
      const paymentId = await eventually(() => paymentIdOfKey(stack, tenant.id, plan.key), 30_000);
      // The PSP answered the charge and the worker died before recording it.
      await eventually(() => armed.exited(), 60_000);
      expect(await chargesAtProvider(stack.sandboxUrl, paymentId)).toHaveLength(1);

      await startWorker('payment-worker-next');
      const payment = await decidedPayment(api, paymentId, 120_000);
      expect(payment.status).toBe('succeeded');
      await firstAnswer;
      // The kill interrupted the charge: the next worker ran it again, and looked the charge up rather than charging twice.
      expect(await chargeAttempts(stack, paymentId)).toBeGreaterThanOrEqual(2);
      expect(await chargesAtProvider(stack.sandboxUrl, paymentId)).toHaveLength(1);

      const { server, spans } = await eventually(
        async () => {
          await flushTracing();
          const server = receiver.spans.find((s) => s.kind === SERVER && s.name === 'POST /v1/payments' && s.attributes['payment.id'] === paymentId);
          if (!server) return null;
          const spans = receiver.spans.filter((s) => s.traceId === server.traceId);
          const done = spans.some((s) => s.name === 'RunWorkflow:paymentWorkflow') && spans.some((s) => s.name === 'RunActivity:recordChargeOutcome');
          return done ? { server, spans } : null;
        },
        30_000,
        200,
        `the trace of ${paymentId}`,
      );
      const childrenOf = (parent: ReceivedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId);
      const start = childrenOf(server).find((s) => s.name.endsWith('Workflow:paymentWorkflow'));
      expect(start, 'the client span starting the workflow, under the server span').toBeDefined();
      const run = spans.find((s) => s.name === 'RunWorkflow:paymentWorkflow')!;
      expect(run.parentSpanId).toBe(start!.spanId);
      expect(run.service).toBe('payment-worker-next');

      // The retried charge: the next worker's span, a child of the run's, its PSP call under it.
      const retried = childrenOf(run).filter((s) => s.name === 'RunActivity:chargeAttempt' && s.service === 'payment-worker-next');
      const pspCall = (s: ReceivedSpan) => s.attributes['psp.name'] === 'sandbox' && s.attributes['psp.sub_key'] === `${paymentId}:charge`;
      expect(retried.find((s) => childrenOf(s).some(pspCall)), "the next worker's charge attempt under the run, its PSP call under the payment's sub-key").toBeDefined();
      expect(childrenOf(run).some((s) => s.name === 'RunActivity:recordChargeOutcome' && s.service === 'payment-worker-next')).toBe(true);
      // Whatever the killed worker exported before it died is in the same trace.
      const killed = receiver.spans.filter((s) => s.service === 'payment-worker-killed' && s.attributes.workflowId === run.attributes.workflowId);
      expect(killed.filter((s) => s.traceId !== server.traceId)).toEqual([]);

      await flushTracing();
      expectNoSecretsInSpans(receiver.spans, [tenant.apiKey, tenant.webhookSecret, ADMIN_TOKEN]);
    },
    300_000,
  );
});
