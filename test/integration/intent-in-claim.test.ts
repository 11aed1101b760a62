import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowNotFoundError } from '@temporalio/client';
import { findRecord, releaseClaim } from '../../db/idempotency-records';
import { claimPaymentIntent } from '../../db/payments';
import { newId } from '../../domain/ids';
import { requestFingerprint } from '../../domain/fingerprint';
import { CreatePaymentBody } from '../../api/schemas';
import { recordedSteps } from '../helpers/recorded-steps';
import { paymentWorkflowInput } from '../../api/routes/payments';
import { TenantIdKey, type FinalResponse, type ScopedKey } from '../../shared/definitions';
import { PaymentStatusKey, type PaymentWorkflowInput } from '../../shared/payments';
import { paymentWorkflowId } from '../../domain/ids';
import { CREATE_PAYMENT_OPERATION } from '../../shared/payments';
import { operationName } from '../../api/typed-route';
import { createPayment } from '../../api/routes/payments';
import { eventually, spawnStackApi, startStack, uniqueKey, type TestStack, type Tenant } from '../helpers/stack';

/**
 * The API persists a payment's intent in the statement that claims its key, so the run starts
 * at the charge (two steps), and the order guard's 409 is the API's answer. The run's first
 * charge attempt persists the intent again only when it finds it missing. What must hold: one
 * payment per key and per order, whatever crashes.
 */

let stack: TestStack;
let tenant: Tenant;

beforeAll(async () => {
  stack = await startStack();
  tenant = await stack.createTenant();
});
afterAll(async () => {
  await stack?.stop();
});

const body = (orderId: string) => ({ order_id: orderId, amount_minor: 1500, currency: 'EUR', payment_method: 'pm_card_visa', capture_method: 'automatic' });

async function post(url: string, key: string, payload: unknown) {
  const response = await fetch(`${url}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  return { status: response.status, headers: response.headers, json: (await response.json()) as Record<string, any> };
}

/** The steps a run took, in order (test/helpers/recorded-steps.ts), once it has ended. */
async function activitiesOf(workflowId: string): Promise<string[]> {
  const handle = stack.temporal.workflow.getHandle(workflowId);
  await handle.result(); // the answer comes from the database commit, before the run records the step
  return recordedSteps(handle);
}

describe('the intent is persisted with the claim', () => {
  it('the operation name the sweeper knows is the route\'s own', () => {
    expect(operationName(createPayment)).toBe(CREATE_PAYMENT_OPERATION);
  });

  it('a payment\'s run has no intent step: it plans the route, charges, and records the outcome', async () => {
    const key = uniqueKey('two-steps');
    const paid = await post(stack.apiUrl, key, body(uniqueKey('order')));
    expect(paid.status).toBe(201);
    expect(paid.json.status).toBe('succeeded');
    expect(await activitiesOf(paid.json.workflow_id)).toEqual(['chargeAttempt', 'recordChargeOutcome']);
  });

  it('the order guard answers 409 from the claim: recorded, replayed, and no run is started for it', async () => {
    const orderId = uniqueKey('order');
    expect((await post(stack.apiUrl, uniqueKey('first'), body(orderId))).status).toBe(201);
    const second = uniqueKey('second');
    const refused = await post(stack.apiUrl, second, body(orderId));
    expect(refused.status).toBe(409);
    expect(refused.json.error.type).toBe('order_already_paid');
    await expect(stack.temporal.workflow.getHandle(paymentWorkflowId(tenant.id, second)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    const again = await post(stack.apiUrl, second, body(orderId));
    expect(again.status).toBe(409);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.stringify(again.json)).toBe(JSON.stringify(refused.json));
    const payments = await stack.sql`SELECT id FROM payments WHERE tenant_id = ${tenant.id} AND order_id = ${orderId}`;
    expect(payments).toHaveLength(1);
  });
});

describe('a start in doubt: the claim and its intent lost, but the run had started', () => {
  /** The input the API built for a new key and order, and the key's claim with its intent, then both given back. */
  async function lostClaim(label: string, orderId = uniqueKey('order')) {
    const key = uniqueKey(label);
    const payload = CreatePaymentBody.parse(body(orderId));
    const scope: ScopedKey = { tenantId: tenant.id, operation: CREATE_PAYMENT_OPERATION, key, fingerprint: requestFingerprint({}, payload), retentionSeconds: 3600 };
    const paymentId = newId('pay');
    const input: PaymentWorkflowInput = paymentWorkflowInput(payload, { paymentId, tenantId: tenant.id, scope, requestId: `req_${label}`, windows: { AUTHORIZATION_WINDOW_SECONDS: 3600 } });
    const workflowId = paymentWorkflowId(tenant.id, key);
    expect(await claimPaymentIntent(stack.sql, { scope, workflowId }, input)).toMatchObject({ intent: true });
    await stack.sql.begin(async (tx) => {
      await releaseClaim(tx, scope);
      // Payments are never deleted (payments_kept); the lost intent is simulated past the trigger.
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`DELETE FROM payments WHERE id = ${paymentId}`;
    });
    return { key, orderId, paymentId, input, workflowId };
  }
  const startRun = (workflowId: string, input: PaymentWorkflowInput) =>
    stack.temporal.workflow.start('paymentWorkflow', {
      workflowId,
      taskQueue: stack.taskQueue,
      args: [input],
      typedSearchAttributes: [{ key: TenantIdKey, value: tenant.id }, { key: PaymentStatusKey, value: 'processing' }] as never,
    });

  it('another payment took the order meanwhile: the first attempt meets the order guard, the run answers 409 and charges nothing', async () => {
    const { orderId, paymentId, input, workflowId } = await lostClaim('doubt-taken');
    expect((await post(stack.apiUrl, uniqueKey('taker'), body(orderId))).status).toBe(201);
    const handle = await startRun(workflowId, input);
    const final = (await handle.result()) as FinalResponse;
    expect(final.status).toBe(409);
    expect(JSON.parse(final.body).error.type).toBe('order_already_paid');
    expect(await recordedSteps(handle)).toEqual(['chargeAttempt', 'recordOrderTaken']);
    expect(await stack.sql`SELECT 1 FROM payments WHERE id = ${paymentId}`).toHaveLength(0);
  });

  it('the run persists the intent again in its first step, charges once and records the answer', async () => {
    const { key, orderId, paymentId, input, workflowId } = await lostClaim('doubt');
    const handle = await startRun(workflowId, input);
    const final = (await handle.result()) as FinalResponse;
    expect(final.status).toBe(201);
    const [payment] = await stack.sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${paymentId}`;
    expect(payment?.status).toBe('succeeded');
    // The client's retry gets that answer.
    const retried = await post(stack.apiUrl, key, body(orderId));
    expect(retried.status).toBe(201);
    expect(retried.json.id).toBe(paymentId);
  });
});

describe('an API killed between the claim and the run\'s start', () => {
  /** An API process that dies (SIGKILL) right after its first claim with an intent committed. */
  async function dyingApi() {
    return spawnStackApi(stack, { name: 'api-dies-after-claim', logs: 'intent-in-claim-logs', env: { CHAOS_KILL_AT: 'after-claim-commit' } });
  }

  it('the client\'s retry starts the run, which finds the intent and charges once', async () => {
    const { service, url } = await dyingApi();
    const key = uniqueKey('killed');
    const orderId = uniqueKey('order');
    await expect(post(url, key, body(orderId))).rejects.toThrow(); // the connection dies with the process
    await service.whenExited;
    const record = (await findRecord(stack.sql, tenant.id, CREATE_PAYMENT_OPERATION, key))!;
    expect(record.state).toBe('running');
    const [intent] = await stack.sql<{ status: string }[]>`SELECT status FROM payments WHERE id = ${record.resource_id}`;
    expect(intent?.status).toBe('processing');
    await expect(stack.temporal.workflow.getHandle(record.workflow_id).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);

    const retried = await post(stack.apiUrl, key, body(orderId));
    expect(retried.status).toBe(201);
    expect(retried.json.id).toBe(record.resource_id);
    // The retry's run finds the intent the claim persisted: two steps, as any payment.
    expect(await activitiesOf(record.workflow_id)).toEqual(['chargeAttempt', 'recordChargeOutcome']);
    const charges = await stack.sql`SELECT 1 FROM payments WHERE tenant_id = ${tenant.id} AND order_id = ${orderId}`;
    expect(charges).toHaveLength(1);
  });

  it('without a retry, the sweeper fails the intent (no money moved) and frees its order; the key answers 500 for good', async () => {
    const { service, url } = await dyingApi();
    const key = uniqueKey('abandoned');
    const orderId = uniqueKey('order');
    await expect(post(url, key, body(orderId))).rejects.toThrow();
    await service.whenExited;
    const record = (await findRecord(stack.sql, tenant.id, CREATE_PAYMENT_OPERATION, key))!;

    expect(await stack.abandonedRuns.runOnce(500, 0)).toBeGreaterThanOrEqual(1);
    const [payment] = await stack.sql<{ status: string; failure_code: string }[]>`SELECT status, failure_code FROM payments WHERE id = ${record.resource_id}`;
    expect(payment).toEqual({ status: 'failed', failure_code: 'run_ended' });
    const answer = await post(stack.apiUrl, key, body(orderId));
    expect(answer.status).toBe(500);
    expect(answer.json.error.type).toBe('operation_failed');
    // The order is free: another key pays it.
    const next = await eventually(async () => {
      const paid = await post(stack.apiUrl, uniqueKey('next'), body(orderId));
      return paid.status === 201 ? paid : null;
    });
    expect(next.json.status).toBe('succeeded');
  });
});
