/**
 * npm run histories:record [-- --only success,decline] [--label <text>]
 *
 * Records the workflow history of every scenario from a real run: a Temporal dev server of
 * its own, a fresh migrated database, the provider sandbox, a worker running the current
 * workflows/ code and the API, driven over HTTP exactly as a client would. Each history is
 * saved as test/histories/<scenario><suffix>.json (the JSON that `temporal workflow show
 * --output json` also writes) and listed in test/histories/index.json with what it shows
 * and the code version it was recorded with. Entries of files not recorded in this run stay
 * in the index untouched.
 *
 * Every payload is encrypted with the test suite's fixed key (testkit/payload-keys.ts),
 * as production encrypts with its own: the histories show what Temporal really stores.
 *
 * The replay test (test/replay/histories.test.ts) replays every listed history against the
 * current workflow code. Never edit a history by hand: record it again.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, Runtime } from '@temporalio/worker';
import { paymentWorkflowId, refundWorkflowId } from '../domain/ids';
import { ensureTemporalCli, projectRoot } from '../devstack/temporal-cli';
import {
  describeHistory,
  historiesDir,
  historyIndexPath,
  workflowInterceptorModules,
  workflowSourceHash,
  workflowsPath,
  type CodeVersion,
  type HistoryEntry,
  type HistoryIndex,
} from '../devstack/histories';
import { apiClient, startStack, type ApiResponse, type Stack } from '../devstack/stack';
import { startScratchEnvironment } from '../devstack/scratch-environment';
import { failureConverterPath } from '../lib/data-converter';
import { testDataConverter } from '../testkit/payload-keys';

/** One workflow run a scenario produced, and what its history must show to be worth keeping. */
interface Recording {
  name: string;
  workflowId: string;
  shows: string;
  /** A reason the run did not show what it should (then nothing is saved), or null. */
  check?: (facts: ReturnType<typeof describeHistory>) => string | null;
}

interface Scenario {
  name: string;
  run(ctx: Context): Promise<Recording[]>;
}

interface Context {
  stack: Stack;
  tenant: { id: string; apiKey: string };
  api: ReturnType<typeof apiClient>;
}

const key = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;
const order = () => key('ord');
const automatic = (method = 'pm_card_visa', amount = 1000, currency = 'EUR') => ({
  order_id: order(),
  amount_minor: amount,
  currency,
  payment_method: method,
  capture_method: 'automatic',
});
const manual = (method = 'pm_card_visa', amount = 1000, currency = 'EUR') => ({ ...automatic(method, amount, currency), capture_method: 'manual' });

function expectStatus(response: ApiResponse, status: number, what: string): void {
  if (response.status !== status) throw new Error(`${what}: expected HTTP ${status}, got ${response.status} ${response.text}`);
}

const oneTask = (facts: { localActivities: number; activities: string[] }) =>
  facts.localActivities === 2 && facts.activities.length === 0 ? null : `expected two local activities and no regular one, got ${facts.localActivities} and ${facts.activities.join(', ')}`;
const retried = (facts: { maxActivityAttempt: number }) =>
  facts.maxActivityAttempt >= 2 ? null : `expected a retried activity, max attempt was ${facts.maxActivityAttempt}`;
const hasActivity = (name: string) => (facts: { activities: string[] }) =>
  facts.activities.includes(name) ? null : `expected activity ${name}, got ${facts.activities.join(', ')}`;

/** A wait decided by a report: the charge's outcome recorded, then the wait's (recordSettlement; two local activities). */
const decidedLater = (facts: { localActivities: number }) => (facts.localActivities >= 2 ? null : `expected the charge's outcome and the wait's recorded, got ${facts.localActivities} local activities`);
const lacksActivity = (name: string) => (facts: { activities: string[] }) =>
  facts.activities.includes(name) ? `expected no activity ${name}, got ${facts.activities.join(', ')}` : null;

/** The merchant's page the challenge sends the customer back to (never fetched). */
const RETURN_URL = 'http://127.0.0.1:9/return';

/** The customer at the sandbox's challenge page: Approve or Deny (a form POST, answered 303 to the return_url). */
async function completeChallenge(url: string, result: 'approve' | 'deny'): Promise<void> {
  const response = await fetch(url, { method: 'POST', body: new URLSearchParams({ result }), redirect: 'manual' });
  if (response.status !== 303) throw new Error(`challenge ${result}: expected 303, got ${response.status}`);
}

async function sandboxFaults(stack: Stack, faults: Record<string, number>): Promise<void> {
  const response = await fetch(`${stack.sandboxUrl}/_sandbox/webhook_faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(faults) });
  if (!response.ok) throw new Error(`sandbox webhook faults: ${response.status}`);
}

/** Repeats a request until it answers `status` (and `ready`), for up to 20 s. */
async function untilStatus(call: () => Promise<ApiResponse>, status: number, ready: (r: ApiResponse) => boolean = () => true): Promise<ApiResponse> {
  const until = Date.now() + 20_000;
  for (;;) {
    const response = await call();
    if ((response.status === status && ready(response)) || Date.now() > until) return response;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function freezeMerchantAccount(ctx: Context, currency: string): Promise<void> {
  await ctx.stack.sql`
    INSERT INTO ledger_accounts (tenant_id, code, currency, frozen) VALUES (${ctx.tenant.id}, 'merchant_balance', ${currency}, true)
    ON CONFLICT (tenant_id, code, currency) DO UPDATE SET frozen = true`;
}

async function paidPayment(ctx: Context, method = 'pm_card_visa'): Promise<{ id: string; workflow_id: string }> {
  const response = await ctx.api.post('/v1/payments', automatic(method), key('pay'));
  expectStatus(response, 201, 'payment');
  return response.json;
}

/** A payment the sandbox disputes (a chargeback, the sandbox's SANDBOX_DISPUTE_AFTER_MS after it), once its dispute workflow has recorded it. */
async function disputedPayment(ctx: Context): Promise<{ disputeId: string; workflowId: string }> {
  const payment = await paidPayment(ctx, 'pm_card_createDispute');
  for (let waited = 0; waited < 30_000; waited += 200) {
    const [row] = await ctx.stack.sql<{ id: string; workflow_id: string }[]>`SELECT id, workflow_id FROM disputes WHERE payment_id = ${payment.id}`;
    if (row) return { disputeId: row.id, workflowId: row.workflow_id };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`payment ${payment.id}: no dispute recorded within 30 s`);
}

/** Makes a difference at the sandbox PSP (POST /_sandbox/discrepancies), as its dashboard would. */
async function injectDiscrepancy(ctx: Context, body: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${ctx.stack.sandboxUrl}/_sandbox/discrepancies`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`discrepancy injection: HTTP ${response.status} ${await response.text()}`);
}

/**
 * Sets the scenario's tenant's routing as PATCH /admin/tenants stores it: every tenant is routed
 * to `sandbox` alone, the failover scenarios' over both sandboxes (`sandbox`, then `sandbox-b`),
 * the success-rate scenario's by `{"strategy":"success_rate"}` (activities/routing.ts plans them all).
 */
async function routeTenant(ctx: Context, routing: Record<string, unknown>): Promise<void> {
  await ctx.stack.sql`UPDATE tenants SET routing = ${ctx.stack.sql.json(routing as never)} WHERE id = ${ctx.tenant.id}`;
}
const overBothSandboxes = { fallback: ['sandbox', 'sandbox-b'] };

async function sandboxOutage(url: string, mode: 'none' | 'unavailable' | 'declining'): Promise<void> {
  const response = await fetch(`${url}/_sandbox/outage`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode }) });
  if (!response.ok) throw new Error(`sandbox outage ${mode}: ${response.status}`);
}

/** A failover's history: two charge attempts (the second at the next PSP), and `more`. */
const failedOver = (more: (facts: ReturnType<typeof describeHistory>) => string | null = () => null) => (facts: ReturnType<typeof describeHistory>) =>
  // Attempt 1 is local (in the first workflow task); the attempt at the next PSP is a regular activity.
  !facts.activities.includes('chargeAttempt')
      ? `expected a regular charge attempt at the next PSP, got ${facts.activities.join(', ') || 'no activity'}`
      : more(facts);

/**
 * Revenue recovery (docs/recovery.md) at a small time scale, for the API's policy and the sandboxes'
 * card network alike: an hour is 0.36 s, the schedule's first retry (12 hours) 4.3 s after the decline.
 */
const RECOVERY_SCALE = 0.0001;

/** An API whose recovering payments run at RECOVERY_SCALE, for the tenant of `ctx`. */
async function recoveryApi(ctx: Context): Promise<ReturnType<typeof apiClient>> {
  const scaled = await ctx.stack.startApi({ RECOVERY_TIME_SCALE: RECOVERY_SCALE, IDEMPOTENCY_WAIT_MS: 3000 });
  return apiClient(scaled.url, ctx.tenant.apiKey);
}

/** A customer with `card` saved by an on-session payment (where every recovery card is approved); answers the saved method's id. */
async function customerWithCard(api: ReturnType<typeof apiClient>, card: string): Promise<{ customer: string; method: string }> {
  const created = await api.post('/v1/customers', { email: 'jane@example.com' }, key('cus'));
  expectStatus(created, 201, 'customer');
  const customer = created.json.id as string;
  expectStatus(await api.post('/v1/payments', { ...automatic(card), customer, setup_future_usage: 'off_session' }, key('pay')), 201, 'payment saving the card');
  const listed = await untilStatus(() => api.get(`/v1/customers/${customer}/payment_methods`), 200, (r) => r.json.data.length > 0);
  const method = listed.json.data?.[0]?.id as string | undefined;
  if (!method) throw new Error(`customer ${customer}: no saved payment method within 20 s (${listed.text})`);
  return { customer, method };
}

/** An off-session payment of the saved `card` with recovery over `windowDays` days. */
async function recoveringPayment(api: ReturnType<typeof apiClient>, card: string, windowDays: number): Promise<ApiResponse> {
  const { customer, method } = await customerWithCard(api, card);
  return api.post('/v1/payments', { ...automatic(method), customer, off_session: true, recovery: { window_days: windowDays } }, key('recovery'));
}

/** The payment's final state once it has left `recovering`, within 60 s. */
async function afterRecovery(api: ReturnType<typeof apiClient>, id: string): Promise<ApiResponse> {
  for (const until = Date.now() + 60_000; Date.now() < until; await new Promise((resolve) => setTimeout(resolve, 250))) {
    const response = await api.get(`/v1/payments/${id}`);
    if (response.status === 200 && response.json.status !== 'recovering') return response;
  }
  throw new Error(`payment ${id}: still recovering after 60 s`);
}

/** A recovery's history: attempt 1 local, then `retries` retries, each a regular chargeAttempt (the recovery's records are local activities). */
const retriedCharges = (retries: number) => (facts: ReturnType<typeof describeHistory>) => {
  const charges = facts.activities.filter((a) => a === 'chargeAttempt').length;
  return charges === retries ? null : `expected ${retries} retried charge(s) (regular chargeAttempt), got ${charges}: ${facts.activities.join(', ') || 'no activity'}`;
};

/** A recovering payment (202) of the saved `card`, followed until it leaves `recovering`, whose end must be `expected` after `retries` retries. */
function recoveryToItsEnd(spec: { name: string; card: string; windowDays: number; expected: (payment: any) => boolean; retries: number; shows: string }): Scenario {
  return {
    name: spec.name,
    async run(ctx) {
      const api = await recoveryApi(ctx);
      const created = await recoveringPayment(api, spec.card, spec.windowDays);
      expectStatus(created, 202, 'recovering payment');
      const ended = await afterRecovery(api, created.json.id);
      if (!spec.expected(ended.json)) throw new Error(`${spec.name}: unexpected end of the recovery: ${ended.text}`);
      return [{ name: spec.name, workflowId: created.json.workflow_id, shows: spec.shows, check: retriedCharges(spec.retries) }];
    },
  };
}

const scenarios: Scenario[] = [
  {
    name: 'success',
    async run({ api }) {
      const response = await api.post('/v1/payments', automatic(), key('success'));
      expectStatus(response, 201, 'payment');
      return [{ name: 'success', workflowId: response.json.workflow_id, shows: 'Automatic capture that succeeds, in one workflow task: the charge (attempt 1, which decides the route) and the outcome recorded (ledger + outbox + first response) as local activities, status search attribute kept current.', check: oneTask }];
    },
  },
  {
    name: 'decline',
    async run({ api }) {
      const response = await api.post('/v1/payments', automatic('pm_card_declined'), key('decline'));
      expectStatus(response, 402, 'declined payment');
      return [{ name: 'decline', workflowId: response.json.error.payment.workflow_id, shows: 'The provider declines the card (a result, not an error): payment recorded as declined, 402 card_declined.' }];
    },
  },
  {
    name: 'lost-response',
    async run({ api }) {
      const response = await api.post('/v1/payments', automatic('pm_card_timeout_after_charge'), key('lost'));
      expectStatus(response, 201, 'payment with a lost response');
      return [{
        name: 'lost-response',
        workflowId: response.json.workflow_id,
        shows: 'The provider commits the charge but its response is lost: the local try in the first workflow task times out, and the regular chargeAttempt activity looks the charge up by its sub-key before charging and finds it (one charge).',
        check: (facts) => (facts.activities.join() === 'chargeAttempt' ? null : `expected the regular chargeAttempt after the local try, got ${facts.activities.join(', ') || 'no activity'}`),
      }];
    },
  },
  {
    name: 'flaky-provider',
    async run({ api }) {
      const response = await api.post('/v1/payments', automatic('pm_card_flaky'), key('flaky'));
      expectStatus(response, 201, 'payment on a flaky provider');
      return [{ name: 'flaky-provider', workflowId: response.json.workflow_id, shows: 'The provider answers 503 on the first attempts: the local try fails, the regular charge activity retries with backoff under the same sub-key, lookup first, then succeeds.', check: retried }];
    },
  },
  {
    name: 'manual-capture',
    async run({ api }) {
      const created = await api.post('/v1/payments', manual(), key('auth'));
      expectStatus(created, 201, 'authorization');
      expectStatus(await api.post(`/v1/payments/${created.json.id}/capture`, {}, key('capture')), 200, 'capture');
      return [{
        name: 'manual-capture',
        workflowId: created.json.workflow_id,
        shows: 'Manual capture: authorize, wait for the capture update (validator admits it), capture at the provider, record; the update returns the recorded response.',
        check: (facts) => (facts.updates.includes('capture') ? hasActivity('captureCharge')(facts) : 'expected an accepted capture update'),
      }];
    },
  },
  {
    name: 'cancel',
    async run({ api }) {
      const created = await api.post('/v1/payments', manual(), key('auth'));
      expectStatus(created, 201, 'authorization');
      expectStatus(await api.post(`/v1/payments/${created.json.id}/cancel`, {}, key('cancel')), 200, 'cancel');
      return [{ name: 'cancel', workflowId: created.json.workflow_id, shows: 'Manual capture canceled by the cancel update: the authorization is voided at the provider.', check: hasActivity('voidCharge') }];
    },
  },
  {
    name: 'authorization-expired',
    async run({ stack, tenant }) {
      // A 2 s window instead of the configured hour: the durable timer fires during the run.
      const shortWindow = await stack.startApi({ AUTHORIZATION_WINDOW_SECONDS: 2 });
      const api = apiClient(shortWindow.url, tenant.apiKey);
      const created = await api.post('/v1/payments', manual(), key('expire'));
      expectStatus(created, 201, 'authorization');
      return [{ name: 'authorization-expired', workflowId: created.json.workflow_id, shows: 'An authorization left uncaptured: the timer ends the window (2 s here) and the authorization is voided.', check: hasActivity('voidCharge') }];
    },
  },
  {
    name: 'three-ds-approved',
    async run({ api }) {
      const created = await api.post('/v1/payments', { ...automatic('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
      expectStatus(created, 202, '3-D Secure payment');
      await completeChallenge(created.json.next_action.redirect_to_url.url, 'approve');
      return [{ name: 'three-ds-approved', workflowId: created.json.workflow_id, shows: '3-D Secure: 202 requires_action, the customer approves the challenge, the PSP\'s webhook (chargeReport signal) decides it succeeded.', check: decidedLater }];
    },
  },
  {
    name: 'three-ds-denied',
    async run({ api }) {
      const created = await api.post('/v1/payments', { ...automatic('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
      expectStatus(created, 202, '3-D Secure payment');
      await completeChallenge(created.json.next_action.redirect_to_url.url, 'deny');
      return [{ name: 'three-ds-denied', workflowId: created.json.workflow_id, shows: '3-D Secure denied by the customer: declined authentication_failed.', check: decidedLater }];
    },
  },
  {
    name: 'three-ds-manual-capture',
    async run({ api }) {
      const created = await api.post('/v1/payments', { ...manual('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
      expectStatus(created, 202, '3-D Secure authorization');
      await completeChallenge(created.json.next_action.redirect_to_url.url, 'approve');
      const captured = await untilStatus(() => api.post(`/v1/payments/${created.json.id}/capture`, {}, key('capture')), 200);
      expectStatus(captured, 200, 'capture after the challenge');
      return [{ name: 'three-ds-manual-capture', workflowId: created.json.workflow_id, shows: 'Manual capture after a challenge: requires_action, then requires_capture, then the capture update.', check: hasActivity('captureCharge') }];
    },
  },
  {
    name: 'three-ds-expired',
    async run({ stack, tenant }) {
      // A 2 s window instead of 15 min, polled every 0.5 s: the customer never comes back.
      const shortWindow = await stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 2, PROVIDER_POLL_FIRST_MS: 500, PROVIDER_POLL_MAX_MS: 500 });
      const api = apiClient(shortWindow.url, tenant.apiKey);
      const created = await api.post('/v1/payments', { ...automatic('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
      expectStatus(created, 202, '3-D Secure payment');
      return [{ name: 'three-ds-expired', workflowId: created.json.workflow_id, shows: 'An abandoned challenge: polled on a backoff, the window (2 s here) ends, the challenge is voided and the payment expired.', check: hasActivity('voidCharge') }];
    },
  },
  {
    name: 'three-ds-webhook-lost',
    async run({ stack, tenant }) {
      const polling = await stack.startApi({ PROVIDER_POLL_FIRST_MS: 500, PROVIDER_POLL_MAX_MS: 1000 });
      const api = apiClient(polling.url, tenant.apiKey);
      await sandboxFaults(stack, { loss: 1 });
      try {
        const created = await api.post('/v1/payments', { ...automatic('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
        expectStatus(created, 202, '3-D Secure payment');
        await completeChallenge(created.json.next_action.redirect_to_url.url, 'approve');
        await untilStatus(() => api.get(`/v1/payments/${created.json.id}`), 200, (r) => r.json.status === 'succeeded');
        return [{ name: 'three-ds-webhook-lost', workflowId: created.json.workflow_id, shows: 'Every webhook lost: the workflow\'s own status poll (retrieveCharge) finds the approved charge and records it.', check: hasActivity('retrieveCharge') }];
      } finally {
        await sandboxFaults(stack, { loss: 0 });
      }
    },
  },
  {
    name: 'three-ds-decided-at-deadline',
    async run({ stack, tenant }) {
      // Approved at once, every webhook lost, and no poll inside the 2 s window: the run's look
      // at the window's end finds the success the PSP timestamped inside it.
      const late = await stack.startApi({ AUTHENTICATION_WINDOW_SECONDS: 2, PROVIDER_POLL_FIRST_MS: 60_000, PROVIDER_POLL_MAX_MS: 60_000 });
      const api = apiClient(late.url, tenant.apiKey);
      await sandboxFaults(stack, { loss: 1 });
      try {
        const created = await api.post('/v1/payments', { ...automatic('pm_card_threeDSecureRequired'), return_url: RETURN_URL }, key('3ds'));
        expectStatus(created, 202, '3-D Secure payment');
        await completeChallenge(created.json.next_action.redirect_to_url.url, 'approve');
        return [{
          name: 'three-ds-decided-at-deadline',
          workflowId: created.json.workflow_id,
          shows: 'Approved at once, every webhook lost, no poll inside the window: at the window\'s end the run asks the PSP (retrieveCharge), whose succeeded_at is inside the window: succeeded, nothing refunded.',
          check: (facts) => hasActivity('retrieveCharge')(facts) ?? lacksActivity('refundCharge')(facts) ?? lacksActivity('voidCharge')(facts),
        }];
      } finally {
        await sandboxFaults(stack, { loss: 0 });
      }
    },
  },
  {
    name: 'sepa-succeeded',
    async run({ api }) {
      const created = await api.post('/v1/payments', automatic('pm_sepa_debit'), key('sepa'));
      expectStatus(created, 202, 'SEPA payment');
      return [{ name: 'sepa-succeeded', workflowId: created.json.workflow_id, shows: 'An asynchronous method: 202 processing, then the PSP settles it succeeded (webhook).', check: decidedLater }];
    },
  },
  {
    name: 'sepa-failed',
    async run({ api }) {
      const created = await api.post('/v1/payments', automatic('pm_sepa_debit_fails'), key('sepa'));
      expectStatus(created, 202, 'SEPA payment');
      return [{ name: 'sepa-failed', workflowId: created.json.workflow_id, shows: 'An asynchronous method that fails: 202 processing, then declined debit_failed.', check: decidedLater }];
    },
  },
  {
    name: 'refunds',
    async run(ctx) {
      const payment = await paidPayment(ctx);
      const recordings: Recording[] = [];
      for (const [name, amount, status, shows] of [
        ['refund-partial-first', 300, 201, 'First partial refund (300 of 1000): reserve under the payment lock, refund at the provider, reversing ledger transaction.'],
        ['refund-partial-second', 700, 201, 'Second partial refund (700): the rest of the captured amount, which makes the payment refunded.'],
        ['refund-exceeds-captured', 1, 409, 'A refund above what is left: refused when reserving (409 refund_exceeds_captured), the provider is never called.'],
      ] as const) {
        const refundKey = key('refund');
        expectStatus(await ctx.api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: amount, reason: 'requested_by_customer' }, refundKey), status, name);
        recordings.push({ name, workflowId: refundWorkflowId(ctx.tenant.id, refundKey), shows, ...(status === 201 ? { check: hasActivity('refundCharge') } : {}) });
      }
      return recordings;
    },
  },
  {
    name: 'refund-provider-failed',
    async run(ctx) {
      const payment = await paidPayment(ctx, 'pm_card_refund_fails');
      const refundKey = key('refund');
      expectStatus(await ctx.api.post(`/v1/payments/${payment.id}/refunds`, { amount_minor: 400 }, refundKey), 402, 'refused refund');
      return [{ name: 'refund-provider-failed', workflowId: refundWorkflowId(ctx.tenant.id, refundKey), shows: 'The provider refuses the refund: recorded as failed, the reserved amount released, 402 refund_failed.' }];
    },
  },
  {
    name: 'dispute-won',
    async run(ctx) {
      const { disputeId, workflowId } = await disputedPayment(ctx);
      expectStatus(await ctx.api.post(`/v1/disputes/${disputeId}/evidence`, { evidence: { uncategorized_text: 'winning_evidence' }, submit: true }, key('evidence')), 200, 'evidence');
      return [{ name: 'dispute-won', workflowId, shows: 'A chargeback started by the verified webhook (signal-with-start): recorded with its withdrawal, evidence submitted by the evidence update, won: the amount reinstated.', check: hasActivity('updateDispute') }];
    },
  },
  {
    name: 'dispute-lost',
    async run(ctx) {
      const { disputeId, workflowId } = await disputedPayment(ctx);
      expectStatus(await ctx.api.post(`/v1/disputes/${disputeId}/accept`, undefined, key('accept')), 200, 'accept');
      return [{ name: 'dispute-lost', workflowId, shows: 'A chargeback conceded by the accept update: closed at the PSP, recorded lost, the claim written off.', check: hasActivity('closeDispute') }];
    },
  },
  {
    name: 'compensation',
    async run(ctx) {
      await freezeMerchantAccount(ctx, 'CHF');
      const response = await ctx.api.post('/v1/payments', automatic('pm_card_visa', 700, 'CHF'), key('frozen'));
      expectStatus(response, 402, 'payment on a frozen ledger account');
      return [{ name: 'compensation', workflowId: response.json.error.payment.workflow_id, shows: 'Money moved but the ledger refuses the posting for good (frozen account): the saga refunds the charge and records why (402 payment_failed).', check: hasActivity('refundCharge') }];
    },
  },
  {
    name: 'capture-compensation',
    async run(ctx) {
      const created = await ctx.api.post('/v1/payments', manual('pm_card_visa', 900, 'SEK'), key('auth'));
      expectStatus(created, 201, 'authorization');
      await freezeMerchantAccount(ctx, 'SEK');
      expectStatus(await ctx.api.post(`/v1/payments/${created.json.id}/capture`, {}, key('capture')), 402, 'capture on a frozen ledger account');
      return [{ name: 'capture-compensation', workflowId: created.json.workflow_id, shows: 'The ledger refuses a manual capture: the compensation swapped from void to refund runs, and the capture update answers with why.', check: hasActivity('refundCharge') }];
    },
  },
  {
    name: 'reconciliation',
    async run(ctx) {
      const from = new Date();
      const payment = await paidPayment(ctx);
      const [charge] = await ctx.stack.sql<{ provider_charge_id: string }[]>`SELECT provider_charge_id FROM payments WHERE id = ${payment.id}`;
      await injectDiscrepancy(ctx, { kind: 'direct_charge', reference: payment.id, amount_minor: 1000, currency: 'EUR' });
      await injectDiscrepancy(ctx, { kind: 'dashboard_refund', charge_id: charge!.provider_charge_id, amount_minor: 100 });
      const workflowId = key('reconciliation');
      // An explicit window around the scenario; a Schedule's run computes its window from its scheduled time instead.
      await ctx.stack.temporal.workflow.start('reconciliationWorkflow', {
        taskQueue: ctx.stack.taskQueue,
        workflowId,
        args: [{ providers: ['sandbox'], window: { kind: 'explicit', from: from.toISOString(), to: new Date(Date.now() + 1).toISOString() } }],
      });
      return [{
        name: 'reconciliation',
        workflowId,
        shows: "The reconciliation workflow over one window: the sandbox PSP's report compared with payments, refunds and ledger, a duplicate charge and a dashboard refund found and recorded.",
        check: hasActivity('reconcileProviderWindow'),
      }];
    },
  },
  {
    name: 'failover-unavailable',
    async run(ctx) {
      const { stack, api } = ctx;
      await routeTenant(ctx, overBothSandboxes);
      await sandboxOutage(stack.sandboxUrl, 'unavailable');
      try {
        const response = await api.post('/v1/payments', automatic(), key('failover'));
        if (response.status !== 201 && response.status !== 202) throw new Error(`payment: expected HTTP 201 or 202, got ${response.status} ${response.text}`);
        const paid = await untilStatus(() => api.get(`/v1/payments/${response.json.id}`), 200, (r) => r.json.status === 'succeeded');
        if (paid.json.provider !== 'sandbox-b') throw new Error(`expected the payment at sandbox-b, got ${paid.text}`);
        return [{
          name: 'failover-unavailable',
          workflowId: response.json.workflow_id,
          shows: "Failover: attempt 1 decides the route; sandbox answers 503 to creates, tried there 3 times under the same key (PROVIDER_TRANSIENT_TRIES), lookup first; once lookups by the attempt's key found no charge after its tries, attempt 1 ends not_charged (recordAttempt) and attempt 2 charges at sandbox-b under <payment>:charge:2.",
          check: failedOver(retried),
        }];
      } finally {
        await sandboxOutage(stack.sandboxUrl, 'none');
      }
    },
  },
  {
    name: 'routing-success-rate',
    async run(ctx) {
      await routeTenant(ctx, { strategy: 'success_rate', ...overBothSandboxes });
      const response = await ctx.api.post('/v1/payments', automatic(), key('routed'));
      expectStatus(response, 201, 'success-rate payment');
      if (response.json.routing?.strategy !== 'success_rate') throw new Error(`expected the routing decision with the payment, got ${response.text}`);
      return [{
        name: 'routing-success-rate',
        workflowId: response.json.workflow_id,
        shows: 'A tenant routed by {"strategy":"success_rate"}: the first charge step (a local activity) decides the route by decideRoute, and its recorded result carries the decision (strategy, candidates with their selection probabilities, chosen): a replay reads it and never decides again.',
        check: oneTask,
      }];
    },
  },
  {
    name: 'failover-declined-manual-capture',
    async run(ctx) {
      const { stack, api } = ctx;
      await routeTenant(ctx, overBothSandboxes);
      await sandboxOutage(stack.sandboxUrl, 'declining');
      let created: ApiResponse;
      try {
        created = await api.post('/v1/payments', manual(), key('failover'));
        expectStatus(created, 201, 'manual payment');
      } finally {
        await sandboxOutage(stack.sandboxUrl, 'none');
      }
      if (created.json.provider !== 'sandbox-b') throw new Error(`expected the authorization at sandbox-b, got ${created.text}`);
      expectStatus(await api.post(`/v1/payments/${created.json.id}/capture`, {}, key('capture')), 200, 'capture');
      return [{
        name: 'failover-declined-manual-capture',
        workflowId: created.json.workflow_id,
        shows: "Failover on a decline retryable elsewhere: sandbox declines processing_error, attempt 2 authorizes at sandbox-b, and the capture update captures at sandbox-b (the PSP holding the charge).",
        check: failedOver(hasActivity('captureCharge')),
      }];
    },
  },
  {
    name: 'intent-in-claim',
    async run({ api }) {
      const response = await api.post('/v1/payments', automatic(), key('intent-in-claim'));
      expectStatus(response, 201, 'payment');
      return [{
        name: 'intent-in-claim',
        workflowId: response.json.workflow_id,
        shows: 'The API persisted the intent with the key\'s claim: the run starts at the charge, and the first attempt decides the route: two local activities (chargeAttempt, recordChargeOutcome) in one workflow task.',
        check: (facts) =>
          facts.localActivities === 2 && facts.activities.length === 0
            ? null
            : `expected two local activities and no regular one, got ${facts.localActivities} and ${facts.activities.join(', ')}`,
      }];
    },
  },
  recoveryToItsEnd({
    name: 'recovery-succeeded',
    card: 'pm_card_recoverAfter2',
    windowDays: 14,
    expected: (p) => p.status === 'succeeded' && p.recovery?.attempts === 3,
    retries: 2,
    shows: 'Revenue recovery (time scale 0.0001): an off-session payment of a saved card (pm_card_recoverAfter2) soft-declined insufficient_funds, 202 recovering; two timers on the schedule, each retry reserved in the card\'s budget and charged under its own sub-key; the first retry declined (recordRecoveryAttempt), the second paid (recordRecoveryEnd); the records are local activities, the retries regular chargeAttempt: succeeded after 3 attempts.',
  }),
  {
    name: 'recovery-hard-decline',
    async run(ctx) {
      const api = await recoveryApi(ctx);
      const created = await recoveringPayment(api, 'pm_card_stolen', 14);
      expectStatus(created, 402, 'hard-declined payment with recovery');
      if (created.json.error.payment.recovery !== undefined) throw new Error(`expected no recovery after a hard decline, got ${created.text}`);
      return [{
        name: 'recovery-hard-decline',
        workflowId: created.json.error.payment.workflow_id,
        shows: 'Revenue recovery asked for, but the first attempt (its reservation in the card\'s budget first) meets a hard decline (pm_card_stolen: stolen_card, Visa category 1): never retried, declined at once, 402 card_declined, no recovering status.',
        check: retriedCharges(0),
      }];
    },
  },
  recoveryToItsEnd({
    name: 'recovery-window-elapsed',
    card: 'pm_card_alwaysInsufficientFunds',
    windowDays: 1,
    expected: (p) => p.status === 'declined' && p.recovery?.stopped_because === 'window_elapsed',
    retries: 1,
    shows: 'Revenue recovery that stops (time scale 0.0001): pm_card_alwaysInsufficientFunds with a 1-day window; the 12-hour retry is declined too, the next one on the schedule falls outside the window: declined with stopped_because window_elapsed (recordRecoveryEnd) after 2 attempts.',
  }),
  {
    name: 'recovery-canceled',
    async run(ctx) {
      const api = await recoveryApi(ctx);
      const created = await recoveringPayment(api, 'pm_card_alwaysInsufficientFunds', 30);
      expectStatus(created, 202, 'recovering payment');
      const canceled = await api.post(`/v1/payments/${created.json.id}/cancel`, {}, key('cancel'));
      expectStatus(canceled, 200, 'cancel of a recovering payment');
      return [{
        name: 'recovery-canceled',
        workflowId: created.json.workflow_id,
        shows: 'A recovering payment canceled by the cancel update while it waits for its first retry: canceled, no attempt after the first.',
        check: (facts) => (facts.updates.includes('cancel') ? retriedCharges(0)(facts) : 'expected an accepted cancel update'),
      }];
    },
  },
];

function codeVersion(label: string): CodeVersion {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8' }).trim();
  let commit = 'unknown';
  let uncommittedChanges = false;
  try {
    commit = git('rev-parse', 'HEAD');
    uncommittedChanges = git('status', '--porcelain', '--', 'workflows', 'shared') !== '';
  } catch {
    // not a git checkout: the source hash still pins the code
  }
  return { commit, uncommittedChanges, workflowSourceSha256: workflowSourceHash({}), label };
}

function versions(): HistoryEntry['temporal'] {
  const sdk = (JSON.parse(readFileSync(path.join(projectRoot, 'node_modules/@temporalio/workflow/package.json'), 'utf8')) as { version: string }).version;
  let server = 'unknown';
  try {
    server = execFileSync(ensureTemporalCli(), ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // cosmetic
  }
  return { sdk, server };
}

const ABOUT =
  'Workflow histories recorded from real runs by `npm run histories:record` (scripts/record-histories.ts). ' +
  'test/replay/histories.test.ts replays every one of them against the current workflow code on each test run. ' +
  'Never edit a history by hand; see README.md in this folder.';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string' },
      label: { type: 'string' },
    },
  });
  const only = values.only ? new Set(values.only.split(',').map((s) => s.trim())) : null;
  const selected = scenarios.filter((s) => !only || only.has(s.name));
  if (only && selected.length !== only.size) {
    throw new Error(`unknown scenario in --only; known: ${scenarios.map((s) => s.name).join(', ')}`);
  }
  const label = values.label ?? 'current workflow code';

  Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } } });
  const version = codeVersion(label);
  const temporalVersions = versions();
  console.log(`recording ${selected.length} scenario(s) with workflow code ${version.workflowSourceSha256.slice(0, 12)} (${version.label})`);

  const { code } = await bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules,
    failureConverterPath,
    logger: new DefaultLogger('WARN'),
  });
  const environment = await startScratchEnvironment({ label: 'histories' });
  const recorded: HistoryEntry[] = [];
  try {
    const stack = await startStack({
      databaseUrl: environment.databaseUrl,
      temporalAddress: environment.temporalAddress,
      temporalConnection: environment.temporalConnection,
      namespace: environment.namespace,
      workflowBundle: { code },
      dataConverter: testDataConverter,
      // Two PSPs: only the failover and success-rate scenarios' tenants are routed over both (routeTenant).
      secondSandbox: {},
      // The card network's durations at the recovery scenarios' scale (only saved cards charged off-session meet them).
      networkTimeScale: RECOVERY_SCALE,
    });
    try {
      for (const scenario of selected) {
        // A tenant per scenario, so a frozen ledger account or an order id never leaks into the next.
        const tenant = await stack.createTenant(`histories ${scenario.name}`);
        const ctx: Context = { stack, tenant, api: apiClient(stack.apiUrl, tenant.apiKey) };
        await routeTenant(ctx, { fallback: ['sandbox'] });
        for (const recording of await scenario.run(ctx)) {
          const handle = stack.temporal.workflow.getHandle(recording.workflowId);
          // Only closed runs are recorded: a history that ends mid-way shows less than its name says.
          await withTimeout(handle.result(), 60_000, `${recording.name}: workflow ${recording.workflowId} did not close`);
          const history = await handle.fetchHistory();
          const facts = describeHistory(history);
          const problem = recording.check?.(facts);
          if (problem) throw new Error(`${recording.name}: ${problem}`);
          const file = `${recording.name}.json`;
          writeFileSync(path.join(historiesDir, file), historyToJSON(history) + '\n');
          recorded.push({
            file,
            scenario: recording.name,
            workflowId: recording.workflowId,
            shows: recording.shows,
            ...facts,
            recordedAt: new Date().toISOString(),
            recordedWith: version,
            temporal: temporalVersions,
          });
          console.log(`  ${file}: ${facts.workflowType}, ${facts.events} events${facts.patches.length ? `, patches ${facts.patches.join(', ')}` : ''}`);
        }
      }
    } finally {
      await stack.stop();
    }
  } finally {
    await environment.stop();
  }

  const previous: HistoryIndex = existsSync(historyIndexPath) ? JSON.parse(readFileSync(historyIndexPath, 'utf8')) : { about: ABOUT, histories: [] };
  const fresh = new Set(recorded.map((e) => e.file));
  const histories = [...previous.histories.filter((e) => !fresh.has(e.file)), ...recorded].sort((a, b) => a.file.localeCompare(b.file));
  writeFileSync(historyIndexPath, JSON.stringify({ about: ABOUT, histories }, null, 2) + '\n');
  console.log(`recorded ${recorded.length} histories; ${historiesDir}/index.json lists ${histories.length}`);
}

async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`histories:record failed: ${error instanceof Error ? error.stack : String(error)}`);
    process.exit(1);
  },
);
