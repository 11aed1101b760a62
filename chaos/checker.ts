import type { Client } from '@temporalio/client';
import protos from '@temporalio/proto';
import type { Sql } from '../db/connect';
import type { Operation } from './workload';

/** Everything one payment caused, counted where each effect lives; kept in the census file. */
export interface PaymentCensus {
  id: string;
  method: string;
  capture: string;
  currency: string;
  amountMinor: number;
  status: string;
  capturedMinor: number;
  refundedMinor: number;
  /** Every provider charge whose reference is this payment. */
  charges: { id: string; status: string; capturedMinor: number; refundedMinor: number; key: string }[];
  captureTransactions: number;
  events: Record<string, number>;
  /** 2xx answers of the merchant's endpoint per event id. */
  deliveries: Record<string, number>;
  refunds: RefundCensus[];
  /** The client operations (keys) about this payment and their final answers. */
  operations: { kind: string; key: string; copies: number; attempts: number; lostAnswers: number; finalStatus: number | null }[];
  findings: string[];
}

export interface RefundCensus {
  id: string;
  amountMinor: number;
  status: string;
  providerRefunds: { id: string; status: string; amountMinor: number }[];
  ledgerTransactions: number;
  events: Record<string, number>;
}

export interface Verdict {
  passed: number;
  failed: number;
  /** Every finding, each naming the payment, refund, key or record it is about. */
  findings: string[];
  /** Passed/failed per check. */
  checks: Record<string, { passed: number; failed: number }>;
  census: PaymentCensus[];
}

export interface CheckInput {
  sql: Sql;
  sandboxSql: Sql;
  temporal: Client;
  tenantId: string;
  acks: Map<string, number>;
  operations: Operation[];
  /** Sends one operation's request again (same key, same body) and returns the answer. */
  replay: (op: Operation) => Promise<{ status: number; text: string } | null>;
}

interface PaymentRow {
  id: string;
  status: string;
  amount_minor: number;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  currency: string;
  capture_method: string;
  payment_method: string;
  provider_charge_id: string | null;
  workflow_id: string;
}
interface RefundRow {
  id: string;
  payment_id: string;
  amount_minor: number;
  status: string;
  provider_refund_id: string | null;
}
interface ChargeRow {
  id: string;
  status: string;
  amount_captured_minor: number;
  amount_refunded_minor: number;
  reference: string;
  idempotency_key: string;
}
interface ProviderRefundRow {
  id: string;
  charge_id: string;
  amount_minor: number;
  status: string;
  reference: string;
  idempotency_key: string;
}

const threeDSecureMethods = new Set(['pm_card_threeDSecureRequired', 'pm_card_threeDSecureRequired_declined']);
const debitMethods = new Set(['pm_sepa_debit', 'pm_sepa_debit_fails']);

/**
 * The events a payment in this final state must have sent (each exactly once), and those it
 * may have sent. A 3-D Secure payment always announced its challenge (the customer needs the
 * first answer's URL to act); a debit announced `processing` unless the bank had settled it by
 * the time the charge's answer was recorded (a lost answer, looked up after the settle).
 */
function expectedEvents(payment: PaymentRow): { required: string[]; optional: string[] } {
  const manual = payment.capture_method === 'manual';
  const waited = threeDSecureMethods.has(payment.payment_method) ? ['payment.requires_action'] : [];
  const optional = debitMethods.has(payment.payment_method) ? ['payment.processing'] : [];
  const of = (...types: string[]) => ({ required: [...waited, ...types], optional });
  switch (payment.status) {
    case 'succeeded':
    case 'refunded':
      return of(...(manual ? ['payment.requires_capture', 'payment.succeeded'] : ['payment.succeeded']));
    case 'requires_capture':
      return of('payment.requires_capture');
    case 'canceled':
      // Voided while authorized, or while the customer was still at the challenge.
      return { ...of('payment.canceled'), optional: [...optional, 'payment.requires_capture'] };
    case 'declined':
      return of('payment.declined');
    case 'failed':
      return of('payment.failed');
    case 'expired':
      // A success the PSP reported after the window was given back (workflows/late-charge.ts).
      return { ...of('payment.expired'), optional: [...optional, 'payment.late_success_refunded'] };
    default:
      return of();
  }
}

/** The provider charge state each final payment state must match. */
const chargeStatusFor: Record<string, string[]> = {
  succeeded: ['succeeded'],
  refunded: ['succeeded'],
  requires_capture: ['requires_capture'],
  canceled: ['canceled'],
  declined: ['declined'],
  // Failed after the money moved: given back (voided, or refunded by compensation).
  failed: ['canceled', 'succeeded', 'declined'],
  // The window ended: the challenge voided, or a late success refunded in full.
  expired: ['canceled', 'succeeded'],
};

/** The final statuses in which a payment keeps no money: the PSP must hold none for it either. */
const moneyless = new Set(['declined', 'failed', 'canceled', 'expired']);

const countBy = <T>(items: T[], key: (item: T) => string): Map<string, T[]> => {
  const map = new Map<string, T[]>();
  for (const item of items) map.set(key(item), [...(map.get(key(item)) ?? []), item]);
  return map;
};

/**
 * The checker, run once the load stopped and the system settled: every payment and refund
 * against the provider's charges and refunds, the ledger, the outbox and the merchant's
 * webhooks; then whole-system checks (every provider charge and refund belongs to exactly
 * one payment or refund, by any reference; the ledger sums to zero per currency; nothing
 * stuck; no workflow running without a reason) and every key's replay, byte for byte.
 */
export async function check(input: CheckInput): Promise<Verdict> {
  const { sql, sandboxSql } = input;
  const checks: Verdict['checks'] = {};
  const findings: string[] = [];
  const verdict = (name: string, ok: boolean, finding: () => string, into?: string[]) => {
    const tally = (checks[name] ??= { passed: 0, failed: 0 });
    if (ok) tally.passed++;
    else {
      tally.failed++;
      const text = `${name}: ${finding()}`;
      findings.push(text);
      into?.push(text);
    }
  };

  const payments = await sql<PaymentRow[]>`
    SELECT id, status, amount_minor::int, amount_captured_minor::int, amount_refunded_minor::int, currency, capture_method,
           payment_method, provider_charge_id, workflow_id
    FROM payments WHERE tenant_id = ${input.tenantId} ORDER BY created_at, id`;
  const refunds = await sql<RefundRow[]>`
    SELECT id, payment_id, amount_minor::int, status, provider_refund_id FROM refunds WHERE tenant_id = ${input.tenantId} ORDER BY created_at, id`;
  const transactions = await sql<{ payment_id: string | null; refund_id: string | null }[]>`
    SELECT payment_id, refund_id FROM ledger_transactions WHERE tenant_id = ${input.tenantId}`;
  const events = await sql<{ id: string; type: string; object_id: string; delivery_state: string }[]>`
    SELECT id, type, payload -> 'data' -> 'object' ->> 'id' AS object_id, delivery_state FROM outbox_events WHERE tenant_id = ${input.tenantId}`;
  // Every charge and refund the provider ever committed, not only those of known payments.
  const charges = await sandboxSql<ChargeRow[]>`
    SELECT id, status, amount_captured_minor::int, amount_refunded_minor::int, reference, idempotency_key FROM sandbox.charges ORDER BY created_at, id`;
  const providerRefunds = await sandboxSql<ProviderRefundRow[]>`
    SELECT id, charge_id, amount_minor::int, status, reference, idempotency_key FROM sandbox.refunds ORDER BY created_at, id`;

  const chargesByReference = countBy(charges, (c) => c.reference);
  const providerRefundsByReference = countBy(providerRefunds, (r) => r.reference);
  const eventsByObject = countBy(events, (e) => e.object_id);
  const refundsByPayment = countBy(refunds, (r) => r.payment_id);
  const operationsByPayment = countBy(
    input.operations.filter((op) => op.paymentId),
    (op) => op.paymentId!,
  );
  const paymentIds = new Set(payments.map((p) => p.id));
  const refundIds = new Set(refunds.map((r) => r.id));

  const eventCensus = (objectId: string, into: string[], subject: string, expected: string[], optional: string[] = []) => {
    const own = eventsByObject.get(objectId) ?? [];
    const byType: Record<string, number> = {};
    for (const e of own) byType[e.type] = (byType[e.type] ?? 0) + 1;
    const extra = Object.entries(byType).filter(([type, n]) => n > 1 || !(expected.includes(type) || optional.includes(type)));
    const missing = expected.filter((type) => !byType[type]);
    verdict('events exactly once', extra.length === 0 && missing.length === 0, () =>
      `${subject}: events ${JSON.stringify(byType)}, expected ${expected.join(', ') || 'none'}${optional.length ? ` (may also have ${optional.join(', ')})` : ''}`, into);
    const deliveries = Object.fromEntries(own.map((e) => [e.id, input.acks.get(e.id) ?? 0]));
    const undelivered = own.filter((e) => !deliveries[e.id]);
    verdict('webhooks received', undelivered.length === 0, () => `${subject}: ${undelivered.map((e) => `${e.type} ${e.id} (${e.delivery_state})`).join(', ')} never acknowledged by the merchant`, into);
    return { byType, deliveries };
  };

  const census: PaymentCensus[] = [];
  for (const payment of payments) {
    const own: string[] = [];
    const subject = `payment ${payment.id}`;
    // Every wait ends by its window at the latest (AUTHENTICATION_WINDOW_SECONDS, ASYNC_SETTLEMENT_WINDOW_SECONDS), all shorter than the settle.
    const waiting = payment.status === 'processing' || payment.status === 'requires_action';
    verdict('payment settled', !waiting, () => `${subject} (${payment.payment_method}) still ${payment.status} after the settle, beyond its window`, own);
    const charged = chargesByReference.get(payment.id) ?? [];
    verdict('one provider charge per payment', charged.length === 1, () => `${subject} (${payment.payment_method}) has ${charged.length} provider charges: ${charged.map((c) => `${c.id} ${c.status}`).join(', ')}`, own);
    const charge = charged.find((c) => c.id === payment.provider_charge_id) ?? charged[0];
    // What the PSP still holds for the payment: captured and not refunded (an open authorization counts as held too).
    const keptAtProvider = charge ? charge.amount_captured_minor - charge.amount_refunded_minor : 0;
    if (charge && !waiting) {
      const statusOk = (chargeStatusFor[payment.status] ?? []).includes(charge.status);
      // A payment that ended without money: nothing captured here and nothing kept at the PSP
      // (a failed payment's or a late success's money given back in full).
      const capturedOk = moneyless.has(payment.status)
        ? payment.amount_captured_minor === 0 && keptAtProvider === 0
        : payment.amount_captured_minor === charge.amount_captured_minor;
      verdict('payment matches its charge', statusOk && capturedOk && charge.id === payment.provider_charge_id, () =>
        `${subject} is ${payment.status} (captured ${payment.amount_captured_minor}, charge ${payment.provider_charge_id}); provider charge ${charge.id} is ${charge.status} (captured ${charge.amount_captured_minor}, refunded ${charge.amount_refunded_minor})`, own);
    }
    if (threeDSecureMethods.has(payment.payment_method) || debitMethods.has(payment.payment_method)) {
      // Issue 21's census: every payment that waited ends in one final state the PSP agrees
      // with: succeeded ⇒ exactly one charge, captured once, kept; expired, canceled, declined
      // or failed ⇒ no money kept at the PSP (a challenge voided, a late success refunded).
      const settledAs = payment.status === 'succeeded' || payment.status === 'refunded' ? 'money' : moneyless.has(payment.status) ? 'no money' : payment.status;
      const agrees =
        charged.length === 1 &&
        (settledAs === 'money'
          ? charge!.status === 'succeeded' && charge!.amount_captured_minor === payment.amount_captured_minor && payment.amount_captured_minor > 0
          : settledAs === 'no money'
            ? keptAtProvider === 0 && charge!.status !== 'requires_capture' && charge!.status !== 'requires_action' && charge!.status !== 'processing'
            : payment.status === 'requires_capture' && charge!.status === 'requires_capture');
      verdict('waiting payment agrees with the PSP', agrees, () =>
        `${subject} (${payment.payment_method}) is ${payment.status} (captured ${payment.amount_captured_minor}); at the PSP: ${charged.map((c) => `${c.id} ${c.status} captured ${c.amount_captured_minor} refunded ${c.amount_refunded_minor}`).join(', ') || 'no charge'}`, own);
    }
    const captureTransactions = transactions.filter((t) => t.payment_id === payment.id && t.refund_id === null).length;
    const capturedState = payment.status === 'succeeded' || payment.status === 'refunded';
    verdict('ledger posting exactly once', captureTransactions === (capturedState ? 1 : 0), () => `${subject} (${payment.status}) has ${captureTransactions} capture transactions`, own);
    const expected = expectedEvents(payment);
    const { byType, deliveries } = eventCensus(payment.id, own, subject, expected.required, expected.optional);

    const refundCensus: RefundCensus[] = [];
    const paymentRefunds = refundsByPayment.get(payment.id) ?? [];
    for (const refund of paymentRefunds) {
      const rsubject = `refund ${refund.id} of ${payment.id}`;
      verdict('refund settled', refund.status !== 'pending', () => `${rsubject} still pending`, own);
      const atProvider = providerRefundsByReference.get(refund.id) ?? [];
      const succeededThere = atProvider.filter((r) => r.status === 'succeeded');
      const providerOk =
        refund.status === 'succeeded'
          ? atProvider.length === 1 && succeededThere[0]?.amount_minor === refund.amount_minor && succeededThere[0]?.id === refund.provider_refund_id
          : refund.status === 'failed'
            ? atProvider.length <= 1 && succeededThere.length === 0
            : false;
      verdict('refund matches the provider', providerOk, () => `${rsubject} is ${refund.status} (${refund.amount_minor}, ${refund.provider_refund_id}); at the provider: ${atProvider.map((r) => `${r.id} ${r.status} ${r.amount_minor}`).join(', ') || 'none'}`, own);
      const ledger = transactions.filter((t) => t.refund_id === refund.id).length;
      verdict('ledger posting exactly once', ledger === (refund.status === 'succeeded' ? 1 : 0), () => `${rsubject} (${refund.status}) has ${ledger} ledger transactions`, own);
      const expected = refund.status === 'succeeded' ? ['refund.succeeded'] : refund.status === 'failed' ? ['refund.failed'] : [];
      const { byType: refundEvents } = eventCensus(refund.id, own, rsubject, expected);
      refundCensus.push({ id: refund.id, amountMinor: refund.amount_minor, status: refund.status, providerRefunds: atProvider.map((r) => ({ id: r.id, status: r.status, amountMinor: r.amount_minor })), ledgerTransactions: ledger, events: refundEvents });
    }
    const refundedHere = paymentRefunds.filter((r) => r.status === 'succeeded').reduce((n, r) => n + r.amount_minor, 0);
    if (charge) {
      verdict('refunded amounts agree', refundedHere === payment.amount_refunded_minor && (moneyless.has(payment.status) || charge.amount_refunded_minor === refundedHere), () =>
        `${subject}: refunds succeeded ${refundedHere}, payment says ${payment.amount_refunded_minor}, provider charge ${charge.id} says ${charge.amount_refunded_minor}`, own);
    }

    census.push({
      id: payment.id,
      method: payment.payment_method,
      capture: payment.capture_method,
      currency: payment.currency,
      amountMinor: payment.amount_minor,
      status: payment.status,
      capturedMinor: payment.amount_captured_minor,
      refundedMinor: payment.amount_refunded_minor,
      charges: charged.map((c) => ({ id: c.id, status: c.status, capturedMinor: c.amount_captured_minor, refundedMinor: c.amount_refunded_minor, key: c.idempotency_key })),
      captureTransactions,
      events: byType,
      deliveries,
      refunds: refundCensus,
      operations: (operationsByPayment.get(payment.id) ?? []).map((op) => ({ kind: op.kind, key: op.key, copies: op.copies, attempts: op.attempts, lostAnswers: op.lostAnswers, finalStatus: op.finalStatus })),
      findings: own,
    });
  }

  // Whole system: nothing at the provider that no payment or refund accounts for.
  for (const charge of charges) {
    verdict('no orphan provider charge', paymentIds.has(charge.reference), () => `provider charge ${charge.id} (reference ${charge.reference}, key ${charge.idempotency_key}) belongs to no payment`);
  }
  for (const [key, sameKey] of countBy(charges, (c) => c.idempotency_key)) {
    verdict('one provider charge per key', sameKey.length === 1, () => `provider key ${key} made ${sameKey.length} charges: ${sameKey.map((c) => c.id).join(', ')}`);
  }
  for (const refund of providerRefunds) {
    const compensation = refund.idempotency_key.endsWith(':compensation') && paymentIds.has(refund.reference);
    verdict('no orphan provider refund', refundIds.has(refund.reference) || compensation, () => `provider refund ${refund.id} (reference ${refund.reference}, key ${refund.idempotency_key}) belongs to no refund`);
  }
  for (const [key, sameKey] of countBy(providerRefunds, (r) => r.idempotency_key)) {
    verdict('one provider refund per key', sameKey.length === 1, () => `provider key ${key} made ${sameKey.length} refunds: ${sameKey.map((r) => r.id).join(', ')}`);
  }
  const unbalanced = await sql<{ currency: string; total: string }[]>`
    SELECT currency, sum(amount_minor)::text AS total FROM ledger_entries GROUP BY currency HAVING sum(amount_minor) <> 0`;
  verdict('ledger sums to zero per currency', unbalanced.length === 0, () => unbalanced.map((u) => `${u.currency} ${u.total}`).join(', '));
  const stuck = await sql<{ idempotency_key: string; operation: string; resource_id: string }[]>`
    SELECT idempotency_key, operation, resource_id FROM idempotency_records WHERE tenant_id = ${input.tenantId} AND state = 'running'`;
  verdict('no idempotency record stuck', stuck.length === 0, () => stuck.map((r) => `${r.operation} ${r.idempotency_key} (${r.resource_id})`).join(', '));
  const undelivered = events.filter((e) => e.delivery_state !== 'delivered');
  verdict('outbox drained', undelivered.length === 0, () => undelivered.map((e) => `${e.type} ${e.id} ${e.delivery_state}`).join(', '));

  const { open, withoutReason } = await runningWorkflows(sql, input.temporal, input.tenantId);
  const statusByWorkflow = new Map(payments.map((p) => [p.workflow_id, p.status]));
  for (const workflowId of open) {
    const ok = !withoutReason.includes(workflowId);
    const state = ok ? '' : await workflowState(input.temporal, workflowId);
    verdict('no workflow running without a reason', ok, () => `workflow ${workflowId} is still running and waits for nothing (payment ${statusByWorkflow.get(workflowId) ?? 'unknown'}; ${state})`);
  }

  const serverErrors = input.operations.filter((op) => op.serverErrors > 0);
  verdict('no 5xx other than 503', serverErrors.length === 0, () => serverErrors.map((op) => `${op.kind} ${op.key}: ${op.serverErrors}`).join(', '));

  // Every key, sent again twice: the same bytes as each other, as every copy's answer and as the first final answer.
  const replays = new Map<Operation, [Awaited<ReturnType<CheckInput['replay']>>, Awaited<ReturnType<CheckInput['replay']>>]>();
  const queue = [...input.operations];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let op = queue.shift(); op; op = queue.shift()) replays.set(op, [await input.replay(op), await input.replay(op)]);
    }),
  );
  for (const op of input.operations) {
    const [first, second] = replays.get(op)!;
    const texts = [op.finalText, ...op.copyTexts, first?.text ?? null, second?.text ?? null].filter((t): t is string => t !== null);
    // The replay retries a run still going (202 with Retry-After); a waiting payment's 202 is its recorded answer.
    const final = first !== null && second !== null;
    verdict('replay byte-identical', final && texts.every((t) => t === texts[0]), () =>
      `${op.kind} ${op.key} (${op.paymentId ?? 'no payment'}): first ${op.finalStatus} ${op.finalText?.slice(0, 120)}; replays ${first?.status} ${first?.text.slice(0, 120)} / ${second?.status}; ${new Set(texts).size} distinct bodies`);
  }

  const passed = Object.values(checks).reduce((n, c) => n + c.passed, 0);
  const failed = Object.values(checks).reduce((n, c) => n + c.failed, 0);
  return { passed, failed, findings, checks, census };
}

/**
 * The running workflows, and among them those without a reason to run: only a payment
 * awaiting capture (its workflow waits for a capture or cancel, or for the window to end)
 * may still be running once the system settled.
 */
export async function runningWorkflows(sql: Sql, temporal: Client, tenantId: string): Promise<{ open: string[]; withoutReason: string[] }> {
  const open: string[] = [];
  for await (const execution of temporal.workflow.list({ query: `ExecutionStatus = 'Running'` })) open.push(execution.workflowId);
  if (open.length === 0) return { open, withoutReason: [] };
  const waiting = await sql<{ workflow_id: string }[]>`
    SELECT workflow_id FROM payments WHERE tenant_id = ${tenantId} AND status = 'requires_capture' AND workflow_id IN ${sql(open)}`;
  const reasons = new Set(waiting.map((w) => w.workflow_id));
  return { open, withoutReason: open.filter((id) => !reasons.has(id)) };
}

/** Where a running workflow stands, for a finding: its pending activities and its last history events. */
async function workflowState(temporal: Client, workflowId: string): Promise<string> {
  try {
    const handle = temporal.workflow.getHandle(workflowId);
    const description = await handle.describe();
    const pending = (description.raw.pendingActivities ?? []).map((a) => `${a.activityType?.name} attempt ${a.attempt} state ${a.state}`);
    const history = await handle.fetchHistory();
    const events = history.events ?? [];
    const last = events.slice(-6).map((e) => `${e.eventId} ${protos.temporal.api.enums.v1.EventType[e.eventType ?? 0]} ${e.eventTime?.seconds ? new Date(Number(e.eventTime.seconds) * 1000).toISOString() : ''}`);
    return `pending activities: ${pending.join(', ') || 'none'}; pending workflow task: ${description.raw.pendingWorkflowTask ? `attempt ${description.raw.pendingWorkflowTask.attempt} state ${description.raw.pendingWorkflowTask.state}` : 'none'}; last events: ${last.join(' | ')}; checked at ${new Date().toISOString()}`;
  } catch (error) {
    return `could not describe it: ${(error as Error).message}`;
  }
}
