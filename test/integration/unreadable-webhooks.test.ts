import { WorkflowNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disputeWorkflowId } from '../../domain/ids';
import { expectInvalidEvent, postSandboxEvent } from '../helpers/provider-webhooks';
import { ADMIN_TOKEN, apiClient, startStack, uniqueKey, type TestStack } from '../helpers/stack';

/**
 * A signed PSP event the orchestrator cannot read (a field it reads missing, null or of the
 * wrong type) is refused 400 `invalid_request` naming the field, as an event PostgreSQL cannot
 * store is, and changes nothing: no provider_events row, no dispute row, no workflow. The admin
 * list of a tenant's API keys takes no query parameters and refuses any.
 */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

const post = (event: Record<string, unknown>) => postSandboxEvent(stack, event);

/** A dispute as the sandbox sends it (sandbox/objects.ts disputeJson). */
const dispute = (id: string) => ({
  id,
  object: 'dispute',
  charge: uniqueKey('ch'),
  reference: uniqueKey('pay'),
  amount_minor: 10_000,
  currency: 'eur',
  reason: 'fraudulent',
  stage: 'chargeback',
  status: 'needs_response',
  evidence: {},
  evidence_due_by: new Date(Date.now() + 86_400_000).toISOString(),
  evidence_submitted_at: null,
  created_at: new Date().toISOString(),
  updated_at: new Date().toISOString(),
  fee_minor: 1500,
});

const without = (object: Record<string, unknown>, field: string) => Object.fromEntries(Object.entries(object).filter(([key]) => key !== field));

const charge = () => ({
  id: uniqueKey('ch'), object: 'charge', status: 'succeeded', amount_minor: 100, amount_captured_minor: 100, amount_refunded_minor: 0, currency: 'EUR',
  reference: 'pay_none', failure_code: null, failure_message: null, next_action: null, created_at: new Date().toISOString(),
});

async function expectNothingStored(eventId: string, disputeId: string | null) {
  expect(await stack.sql`SELECT 1 FROM provider_events WHERE event_id = ${eventId}`).toHaveLength(0);
  if (disputeId === null) return;
  expect(await stack.sql`SELECT 1 FROM disputes WHERE provider_dispute_id = ${disputeId}`).toHaveLength(0);
  const described = stack.temporal.workflow.getHandle(disputeWorkflowId('sandbox', disputeId)).describe();
  await expect(described).rejects.toBeInstanceOf(WorkflowNotFoundError);
}

describe('a signed dispute event without a field the sandbox kind reads is 400 with its path; nothing is stored', () => {
  for (const field of ['currency', 'charge']) {
    it(`charge.dispute.created without ${field}: 400 invalid_request naming data.object.${field}`, async () => {
      const eventId = uniqueKey('evt');
      const disputeId = uniqueKey('dp');
      const answer = await post({ id: eventId, type: 'charge.dispute.created', created: Math.floor(Date.now() / 1000), data: { object: without(dispute(disputeId), field) } });
      await expectInvalidEvent(answer, [`data.object.${field}`]);
      await expectNothingStored(eventId, disputeId);
    });
  }

  it('the same dispute event whole is read: 200, stored, and the PSP asked (it holds no such dispute: ignored)', async () => {
    const eventId = uniqueKey('evt');
    const answer = await post({ id: eventId, type: 'charge.dispute.created', created: Math.floor(Date.now() / 1000), data: { object: dispute(uniqueKey('dp')) } });
    expect(answer.status, await answer.clone().text()).toBe(200);
    // The disputes area asked the PSP, which holds no such dispute: nothing was reported.
    expect(await answer.json()).toMatchObject({ received: true, disposition: 'ignored', duplicate: false });
    expect(await stack.sql`SELECT 1 FROM provider_events WHERE event_id = ${eventId}`).toHaveLength(1);
  });
});

describe('charge and refund events and the envelope: missing, null or wrongly typed fields are 400 with their path', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const cases: [string, (id: string) => Record<string, unknown>, string][] = [
    ['a charge with a null status', (id) => ({ id, type: 'charge.succeeded', created: now(), data: { object: { ...charge(), status: null } } }), 'data.object.status'],
    ['a charge with its amount as a string', (id) => ({ id, type: 'charge.succeeded', created: now(), data: { object: { ...charge(), amount_captured_minor: '100' } } }), 'data.object.amount_captured_minor'],
    ['a charge whose next_action has no redirect', (id) => ({ id, type: 'charge.requires_action', created: now(), data: { object: { ...charge(), status: 'requires_action', next_action: { type: 'redirect_to_url' } } } }), 'data.object.next_action.redirect_to_url'],
    ['a refund without its charge', (id) => ({ id, type: 'refund.succeeded', created: now(), data: { object: { id: uniqueKey('re'), object: 'refund', amount_minor: 1, status: 'succeeded', failure_code: null, failure_message: null } } }), 'data.object.charge'],
    ['an event without its type', (id) => ({ id, created: now(), data: { object: charge() } }), 'type'],
    ['an event whose data.object is null', (id) => ({ id, type: 'charge.succeeded', created: now(), data: { object: null } }), 'data.object'],
  ];
  for (const [name, event, path] of cases) {
    it(`${name}: 400 invalid_request naming ${path}`, async () => {
      const id = uniqueKey('evt');
      await expectInvalidEvent(await post(event(id)), [path]);
      await expectNothingStored(id, null);
    });
  }
});

describe('GET /admin/tenants/{id}/api_keys takes no query parameters', () => {
  it('any query parameter is 400 invalid_request naming it; without one the keys are listed', async () => {
    const tenant = await stack.createTenant('keys-query');
    const admin = apiClient(stack.apiUrl, ADMIN_TOKEN);
    for (const query of ['limit=1', 'starting_after=key_01jd6w8b3m4x0c2q7yk5h9t1ve', 'foo=bar']) {
      const refused = await admin.get(`/admin/tenants/${tenant.id}/api_keys?${query}`);
      expect(refused.status, refused.text).toBe(400);
      expect(refused.json.error.type).toBe('invalid_request');
      expect(JSON.stringify(refused.json.error.issues)).toContain(query.split('=')[0]);
    }
    const listed = await admin.get(`/admin/tenants/${tenant.id}/api_keys`);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.json).toMatchObject({ object: 'list', has_more: false });
    expect(listed.json.data).toHaveLength(1);
  });
});
