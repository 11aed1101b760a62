import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestStack } from '../stack';
import { effectsOf } from '../effects';
import type { Merchant } from '../../../testkit/merchant';

/** The final state a payment is expected to reach, and the effects that state implies. */
export type Outcome = 'succeeded' | 'declined' | 'requires_capture';

const implied: Record<Outcome, { ledger: number; event: string }> = {
  succeeded: { ledger: 1, event: 'payment.succeeded' },
  declined: { ledger: 0, event: 'payment.declined' },
  requires_capture: { ledger: 0, event: 'payment.requires_capture' },
};

/** What the provider charged, amount per outcome, for the test bodies. */
export const outcomeOf: Record<string, Outcome> = {
  pm_card_visa: 'succeeded',
  pm_card_slow: 'succeeded',
  pm_card_flaky: 'succeeded',
  pm_card_timeout_after_charge: 'succeeded',
  pm_card_declined: 'declined',
  pm_card_insufficient_funds: 'declined',
};

/** Everything one payment caused, each counted where it happened. */
export interface Census {
  paymentId: string;
  status: string | null;
  /** Charges at the provider sandbox under this payment's reference. */
  charges: number;
  ledgerTransactions: number;
  /** Outbox events per type, and their ids. */
  events: Record<string, number>;
  eventIds: Record<string, string>;
  /** Payment rows for the payment's order (one order = one payment in these scenarios). */
  paymentsForOrder: number;
  /** Workflow executions under the payment's workflow id (null: not counted). */
  workflowRuns: number | null;
  /** 2xx deliveries at the merchant's endpoint per event id (null: no endpoint watched). */
  deliveries: Record<string, number> | null;
}

export async function takeCensus(stack: TestStack, paymentId: string, options: { merchant?: Merchant; countRuns?: boolean } = {}): Promise<Census> {
  const effects = await effectsOf(stack.sql, stack.sandboxUrl, paymentId);
  const [row] = await stack.sql<{ status: string; workflow_id: string; for_order: number }[]>`
    SELECT p.status, p.workflow_id,
           (SELECT count(*)::int FROM payments o WHERE o.tenant_id = p.tenant_id AND o.order_id = p.order_id) AS for_order
    FROM payments p WHERE p.id = ${paymentId}`;
  const events = await stack.sql<{ id: string; type: string }[]>`
    SELECT id, type FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' = ${paymentId}`;
  let workflowRuns: number | null = null;
  if (options.countRuns && row) {
    workflowRuns = (await stack.temporal.workflow.count(`WorkflowId = '${row.workflow_id}'`)).count;
  }
  return {
    paymentId,
    status: row?.status ?? null,
    charges: effects.charges,
    ledgerTransactions: effects.ledgerTransactions,
    events: effects.events,
    eventIds: Object.fromEntries(events.map((e) => [e.id, e.type])),
    paymentsForOrder: row?.for_order ?? 0,
    workflowRuns,
    deliveries: options.merchant ? Object.fromEntries(events.map((e) => [e.id, options.merchant!.acks.get(e.id) ?? 0])) : null,
  };
}

/** A census held against the expected outcome: every count above one is a duplicate, every missing effect a loss. */
export interface Judgement {
  subject: string;
  duplicates: { effect: string; extra: number }[];
  losses: string[];
  anomalies: string[];
  /** The same event id delivered (2xx) more than once: allowed (at-least-once, the id dedupes), but counted. */
  redeliveries: number;
}

export function judge(census: Census, outcome: Outcome, subject = census.paymentId): Judgement {
  const duplicates: Judgement['duplicates'] = [];
  const losses: string[] = [];
  const anomalies: string[] = [];
  const more = (effect: string, count: number, limit: number) => count > limit && duplicates.push({ effect, extra: count - limit });
  const { ledger, event } = implied[outcome];

  if (census.status !== outcome) losses.push(`final state ${outcome} not reached (status ${census.status ?? 'no payment row'})`);
  if (census.charges < 1) losses.push('no charge at the provider');
  more('provider charge', census.charges, 1);
  if (census.ledgerTransactions < ledger) losses.push('ledger transaction missing');
  more('ledger transaction', census.ledgerTransactions, ledger);
  if (!census.events[event]) losses.push(`${event} event missing from the outbox`);
  for (const [type, count] of Object.entries(census.events)) {
    more(`${type} event`, count, 1);
    if (type !== event) anomalies.push(`unexpected ${type} event`);
  }
  more('payment for the order', census.paymentsForOrder, 1);
  if (census.workflowRuns !== null) more('workflow run', census.workflowRuns, 1);

  let redeliveries = 0;
  if (census.deliveries) {
    for (const [id, type] of Object.entries(census.eventIds)) {
      const acked = census.deliveries[id] ?? 0;
      if (acked === 0) losses.push(`${type} event ${id} never delivered to the merchant`);
      redeliveries += Math.max(0, acked - 1);
    }
  }
  return { subject, duplicates, losses, anomalies, redeliveries };
}

/**
 * Waits until the system is quiet: every payment left `processing` and (with a merchant) every
 * one of their events was delivered; returns how long that took, or null if `timeoutMs` passed first
 * (whatever is missing then is counted as lost by the census).
 */
export async function untilQuiet(stack: TestStack, paymentIds: string[], options: { merchant?: Merchant; timeoutMs: number }): Promise<number | null> {
  const started = Date.now();
  for (;;) {
    const [state] = await stack.sql<{ open: number; known: number }[]>`
      SELECT count(*) FILTER (WHERE status = 'processing')::int AS open, count(*)::int AS known
      FROM payments WHERE id IN ${stack.sql(paymentIds)}`.catch(() => [{ open: -1, known: -1 }]);
    let done = state!.open === 0 && state!.known === paymentIds.length;
    if (done && options.merchant) {
      const events = await stack.sql<{ id: string }[]>`
        SELECT id FROM outbox_events WHERE payload -> 'data' -> 'object' ->> 'id' IN ${stack.sql(paymentIds)}`;
      done = events.length >= paymentIds.length && events.every((e) => (options.merchant!.acks.get(e.id) ?? 0) > 0);
    }
    if (done) return Date.now() - started;
    if (Date.now() - started > options.timeoutMs) return null;
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** The payment a scoped key claimed (null until the API has claimed it). */
export async function paymentIdOfKey(stack: TestStack, tenantId: string, key: string): Promise<string | null> {
  const [row] = await stack.sql<{ resource_id: string }[]>`
    SELECT resource_id FROM idempotency_records
    WHERE tenant_id = ${tenantId} AND operation = 'POST /v1/payments' AND idempotency_key = ${key}`;
  return row?.resource_id ?? null;
}

/** The activity that charges the PSP. */
const chargeActivities = new Set(['chargeAttempt']);

/**
 * True once the payment's charge has been sent to the PSP and not yet answered. Attempt 1 is a
 * local activity in the run's first workflow task: it records its attempt row (deciding the
 * route) just before it calls the PSP, and the run shows no pending activity for it, so an
 * attempt row still pending on a payment still processing is a charge in flight; until that row
 * exists, nothing was sent. A later try of the charge (a regular activity) shows as one started.
 */
export async function chargeInFlight(stack: TestStack, paymentId: string): Promise<boolean> {
  const [row] = await stack.sql<{ workflow_id: string; status: string; pending: number; attempts: number }[]>`
    SELECT workflow_id, status,
      (SELECT count(*)::int FROM payment_attempts WHERE payment_id = ${paymentId} AND outcome = 'pending') AS pending,
      (SELECT count(*)::int FROM payment_attempts WHERE payment_id = ${paymentId}) AS attempts
    FROM payments WHERE id = ${paymentId}`;
  if (!row || row.attempts === 0) return false;
  // The API persists the intent before it starts the run: a row may have no run yet.
  const description = await stack.temporal.workflow.getHandle(row.workflow_id).describe().catch((error: unknown) => {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  });
  if (!description) return false;
  // PENDING_ACTIVITY_STATE_STARTED = 2
  const started = (description.raw.pendingActivities ?? []).some((a) => chargeActivities.has(a.activityType?.name ?? '') && a.state === 2);
  const scheduled = (description.raw.pendingActivities ?? []).some((a) => chargeActivities.has(a.activityType?.name ?? ''));
  return started || (!scheduled && row.status === 'processing' && row.pending > 0);
}

/**
 * Waits until each of the keys' payments is in flight (its charge sent to the provider and
 * not yet answered) or already past it, so the fault lands mid-charge. Returns the payment
 * ids and how many of them were caught mid-charge.
 */
export async function paymentsInFlight(stack: TestStack, tenantId: string, keys: string[], timeoutMs = 60_000): Promise<{ ids: string[]; midCharge: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ids = await Promise.all(keys.map((key) => paymentIdOfKey(stack, tenantId, key)));
    if (ids.every(Boolean)) {
      const rows = await stack.sql<{ id: string; status: string }[]>`SELECT id, status FROM payments WHERE id IN ${stack.sql(ids as string[])}`;
      if (rows.length === ids.length) {
        let midCharge = 0;
        let pending = 0;
        for (const row of rows) {
          if (row.status !== 'processing') continue;
          if (await chargeInFlight(stack, row.id)) midCharge++;
          else pending++;
        }
        if (pending === 0) return { ids: ids as string[], midCharge };
      }
    }
    if (Date.now() > deadline) throw new Error(`payments of ${keys.join(', ')} not in flight within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * How many times the payment's charge was tried (from its workflow history): the local tries in
 * the first workflow task (one, plus one for each workflow task that timed out or failed before
 * its marker: a worker that died mid-charge, whose successor tried again, asking the PSP first),
 * plus the highest attempt of the regular charge activity (which takes over an unknown outcome).
 *
 * The payment's row can show its outcome a moment before its history shows the charge: the
 * outcome is recorded by a local activity of the same workflow task, whose marker reaches the
 * history only when that task completes. So this waits up to `waitMs` for the history to hold
 * the charge, and answers 0 only when it never does.
 */
export async function chargeAttempts(stack: TestStack, paymentId: string, waitMs = 30_000): Promise<number> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const attempts = await chargeAttemptsInHistory(stack, paymentId);
    if (attempts > 0 || Date.now() > deadline) return attempts;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function chargeAttemptsInHistory(stack: TestStack, paymentId: string): Promise<number> {
  const [row] = await stack.sql<{ workflow_id: string }[]>`SELECT workflow_id FROM payments WHERE id = ${paymentId}`;
  if (!row) return 0;
  const history = await stack.temporal.workflow.getHandle(row.workflow_id).fetchHistory();
  const charges = new Set<string>();
  let regular = 0;
  let local = 0;
  let lostTasks = 0;
  let localCharged = false;
  for (const event of history.events ?? []) {
    if (chargeActivities.has(event.activityTaskScheduledEventAttributes?.activityType?.name ?? '')) charges.add(String(event.eventId));
    const started = event.activityTaskStartedEventAttributes;
    if (started && charges.has(String(started.scheduledEventId))) regular = Math.max(regular, started.attempt ?? 1);
    if (!localCharged && (event.workflowTaskTimedOutEventAttributes || event.workflowTaskFailedEventAttributes)) lostTasks++;
    const marker = event.markerRecordedEventAttributes;
    if (!localCharged && marker?.markerName === 'core_local_activity') {
      const data = marker.details?.data?.payloads?.[0]?.data;
      const type = data ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type : undefined;
      if (type && chargeActivities.has(type)) {
        localCharged = true;
        local = lostTasks + 1;
      }
    }
  }
  return local + regular;
}
