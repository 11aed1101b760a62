import type { Client } from '@temporalio/client';
import protos from '@temporalio/proto';
import type { Sql } from '../db/connect';
import { NEVER_RETRY_ELSEWHERE_DECLINE_CODES } from '../domain/routing';
import { providerSubKey } from '../shared/keys';
import { checkDisputes, checkLedgerBalance, type DisputeAnswer, type DisputeCensus, type DisputeCensusInput, type LedgerTransactionRecord, type PspDisputeMoney, type WorkflowRuns } from './dispute-checks';
import { checkDoubleNotifications, holdingsOfDouble, readDoubleCensus, type StoredProviderEvent } from './psp-doubles';
import type { ProviderRefundRow, PspCharge } from './psp-rows';
import { createTally, type VerdictFn } from './tally';
import type { Operation } from './workload';

export { createTally, type VerdictFn } from './tally';

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
  /** The PSP that holds the payment (payments.provider; the default PSP when none is recorded). */
  provider: string | null;
  /** A saved card charged without its customer (off_session). */
  offSession: boolean;
  /** The payment asked to save its card (setup_future_usage). */
  savesCard: boolean;
  /** Its attempts, in order: where each went and what it came to (payment_attempts). */
  attempts: { attempt: number; provider: string; outcome: string; errorCode: string | null; chargeId: string | null }[];
  /** Every charge at either PSP whose reference is this payment. */
  charges: { provider: string; id: string; status: string; capturedMinor: number; refundedMinor: number; key: string }[];
  captureTransactions: number;
  events: Record<string, number>;
  /** 2xx answers of the merchant's endpoint per event id. */
  deliveries: Record<string, number>;
  refunds: RefundCensus[];
  /** The payment's disputes: each with its stage, status, ledger transactions, events and the PSP's view. */
  disputes: DisputeCensus[];
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
  /** Each sandbox PSP's own database by the PSP's configured name, in PROVIDERS order (the first is the default). */
  pspSql: Record<string, Sql>;
  /**
   * PSP doubles without a database of ours to read (the PSP double), by name: the base URL
   * whose read-only census (`GET /_sandbox/payments`, doubles/control.ts) says what each
   * charged, captured, cancelled and refunded, and what became of its notifications.
   */
  doubles?: Record<string, string>;
  temporal: Client;
  /** The run's tenants. */
  tenantIds: string[];
  acks: Map<string, number>;
  operations: Operation[];
  /** Sends one operation's request again (same key, same body) and returns the answer. */
  replay: (op: Operation) => Promise<{ status: number; text: string } | null>;
  /** Reminders per stage of a waiting dispute (DISPUTE_REMINDER_SECONDS's length). */
  disputeReminders: number;
  /** AUTHORIZATION_WINDOW_SECONDS of the run, in ms: no authorization may be left open longer. */
  authorizationWindowMs?: number;
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
  provider: string | null;
  workflow_id: string;
  /** A saved card charged without its customer; setup_future_usage: the payment saved its card. */
  off_session: boolean;
  setup_future_usage: string | null;
  created_at: Date;
  /** A recovering payment's recovery (docs/recovery.md; the API's `recovery` object); null or absent: none. */
  recovery?: { attempts: number; window_ends_at: string; next_attempt_at: string | null; stopped_because: string | null } | null;
}
/** One row of payment_attempts. */
export interface AttemptRow {
  payment_id: string;
  attempt: number;
  provider: string;
  provider_charge_id: string | null;
  outcome: string;
  error_code: string | null;
}
interface RefundRow {
  id: string;
  payment_id: string;
  amount_minor: number;
  status: string;
  provider_refund_id: string | null;
}
export type { PspCharge, ProviderRefundRow } from './psp-rows';

const threeDSecureMethods = new Set(['pm_card_threeDSecureRequired', 'pm_card_threeDSecureRequired_declined']);
const debitMethods = new Set(['pm_sepa_debit', 'pm_sepa_debit_fails']);

/**
 * The events a payment in this final state must have sent (each exactly once), and those it
 * may have sent. A 3-D Secure payment always announced its challenge (the customer needs the
 * first answer's URL to act); a debit announced `processing` unless the bank had settled it by
 * the time the charge's answer was recorded (a lost answer, looked up after the debit settled).
 */
function expectedEvents(payment: PaymentRow): { required: string[]; optional: string[]; upTo?: Record<string, number> } {
  const manual = payment.capture_method === 'manual';
  const waited = threeDSecureMethods.has(payment.payment_method) ? ['payment.requires_action'] : [];
  // A recovering payment announces each failed retry that it retried again: fewer than its attempts.
  if (payment.recovery) {
    const expected = expectedEvents({ ...payment, recovery: null });
    return { ...expected, optional: [...expected.optional, 'payment.recovery_attempt_failed'], upTo: { 'payment.recovery_attempt_failed': Math.max(1, payment.recovery.attempts - 1) } };
  }
  const optional = debitMethods.has(payment.payment_method) ? ['payment.processing'] : [];
  const of = (...types: string[]) => ({ required: [...waited, ...types], optional });
  switch (payment.status) {
    case 'succeeded':
    case 'refunded':
      return of(...(manual ? ['payment.requires_capture', 'payment.succeeded'] : ['payment.succeeded']));
    case 'requires_capture':
      return of('payment.requires_capture');
    case 'canceled':
      // Voided while authorized, or while the customer was still at the challenge; at a PSP whose
      // cancels are notified the customer may have finished first: that success is given back.
      return { ...of('payment.canceled'), optional: [...optional, 'payment.requires_capture', 'payment.late_success_refunded'] };
    case 'declined':
      return of('payment.declined');
    case 'failed':
      return of('payment.failed');
    case 'expired':
      // A success the PSP reported after the window was given back (workflows/payments-late-charge.ts).
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
  // Voided; at a PSP whose cancels are notified, a success that slipped in before the cancel, refunded in
  // full; or declined, taking no money: a recovering payment canceled between attempts (its charge is the
  // last decline), or a challenge the issuer refused while the merchant's cancel was on its way.
  canceled: ['canceled', 'succeeded', 'declined'],
  declined: ['declined'],
  // Failed after the money moved: given back (voided, or refunded by compensation).
  failed: ['canceled', 'succeeded', 'declined'],
  // The window ended: the challenge voided, or a late success refunded in full.
  expired: ['canceled', 'succeeded'],
};

/** Whether a PSP's charge in `chargeStatus` can stand behind a payment that ended `paymentStatus` (what each payment status allows: chargeStatusFor). */
export function chargeAgrees(paymentStatus: string, chargeStatus: string): boolean {
  return (chargeStatusFor[paymentStatus] ?? []).includes(chargeStatus);
}

/** The final statuses in which a payment keeps no money: the PSP must hold none for it either. */
const moneyless = new Set(['declined', 'failed', 'canceled', 'expired']);

const countBy = <T>(items: T[], key: (item: T) => string): Map<string, T[]> => {
  const map = new Map<string, T[]>();
  for (const item of items) map.set(key(item), [...(map.get(key(item)) ?? []), item]);
  return map;
};


/** What the census across the PSPs reads: our payments, their attempts, and everything each PSP holds. */
export interface PspCensusInput {
  /** The PSPs' names in PROVIDERS order: a payment that records none is at the first. */
  psps: readonly string[];
  payments: (Pick<PaymentRow, 'id' | 'status' | 'currency' | 'payment_method' | 'provider' | 'provider_charge_id' | 'recovery' | 'amount_captured_minor' | 'amount_refunded_minor'> & {
    /** When the payment was made: its authorization's window ends `authorizationWindowMs` after it at the latest. */
    created_at?: Date | string;
  })[];
  /** AUTHORIZATION_WINDOW_SECONDS in ms: an authorization still open this long after its payment was made is unresolved past its window. */
  authorizationWindowMs?: number;
  /** The census's clock (default: now). */
  now?: number;
  attempts: AttemptRow[];
  /** Every charge at every PSP, not only those of known payments. */
  charges: PspCharge[];
  /** Every refund at every PSP. */
  providerRefunds: ProviderRefundRow[];
  refundIds: ReadonlySet<string>;
  /** The ledger's provider_receivable balance (debit positive) by the PSP of the payment each posting is about, and currency. */
  ledger: { provider: string; currency: string; net: number }[];
  /** Each PSP's chargeback withdrawals and reinstatements (none: no disputes). */
  disputeMoney?: PspDisputeMoney[];
}

const heldStates = new Set(['succeeded', 'requires_capture']);
const movedOnOutcomes = new Set(['declined', 'rejected', 'not_sent', 'not_charged']);

/**
 * The census across the PSPs (the sandboxes and the PSP double alike): for every payment, its charges at every PSP against
 * its attempts, and for the whole system, every PSP's charges, refunds and balance against our
 * payments, refunds and ledger.
 * - A succeeded (or authorized) payment has exactly one charge holding money across all PSPs,
 *   at the PSP `payments.provider` names, with id `payments.provider_charge_id`.
 * - A payment that ended without money has no money at any PSP (a charge captured and then
 *   given back in full by compensation or reconciliation holds none).
 * - Every charge is one of its payment's attempts (same PSP, same derived key): the last
 *   attempt's, or a moved-on attempt's that the PSP declined with a code about the PSP (the
 *   failover rule allows that one, and only that one, to leave a charge behind).
 * - A moved-on attempt left no charge behind unless it was such a decline, and the next
 *   attempt went to another PSP (or, the route started again after a transient failure, to the
 *   same one under a new key); the payment is held where its last attempt went.
 * - No orphan at any PSP; one charge and one refund per key per PSP; every refund at the PSP
 *   of the charge it refunds; the ledger's receivable per PSP and currency equal to what that
 *   PSP holds (captured less refunded, less chargebacks' amounts and fees, plus
 *   reinstatements), and so over all the PSPs.
 * - Whatever a payment ended as, at most one charge that took the card's money (authorized or
 *   captured) over all PSPs; captured less refunded summed over every PSP equal to what the
 *   payment keeps (captured less refunded; nothing for a payment without money); every
 *   authorization still open at a PSP is one its payment awaits (requires_capture, held there)
 *   within its window.
 * `into(paymentId)` is where a payment's own findings go (its census record).
 */
export function checkAcrossPsps(input: PspCensusInput, verdict: VerdictFn, into: (paymentId: string) => string[] | undefined = () => undefined): void {
  const paymentIds = new Set(input.payments.map((p) => p.id));
  const chargesByReference = countBy(input.charges, (c) => c.reference);
  const attemptsByPayment = countBy(input.attempts, (a) => a.payment_id);
  const kept = (c: PspCharge) => c.amount_captured_minor - c.amount_refunded_minor;
  const describe = (c: PspCharge) => `${c.provider} ${c.id} ${c.status} (key ${c.idempotency_key}, captured ${c.amount_captured_minor}, refunded ${c.amount_refunded_minor})`;
  for (const payment of input.payments) {
    if (payment.status === 'processing' || payment.status === 'requires_action') continue; // 'payment decided' says so
    const own = into(payment.id);
    const subject = `payment ${payment.id} (${payment.payment_method}, ${payment.status})`;
    const at = payment.provider ?? (payment.provider_charge_id !== null ? input.psps[0]! : null);
    const charged = chargesByReference.get(payment.id) ?? [];
    const attempts = [...(attemptsByPayment.get(payment.id) ?? [])].sort((a, b) => a.attempt - b.attempt);
    const last = attempts.at(-1);
    const all = () => charged.map(describe).join('; ') || 'no charge at any PSP';
    if (heldStates.has(payment.status) || payment.status === 'refunded') {
      const holding = charged.filter((c) => heldStates.has(c.status));
      const expected = payment.status === 'requires_capture' ? 'requires_capture' : 'succeeded';
      const ok = holding.length === 1 && holding[0]!.provider === at && holding[0]!.id === payment.provider_charge_id && holding[0]!.status === expected;
      verdict('one succeeded charge per succeeded payment', ok, () => `${subject} is held at ${at} as ${payment.provider_charge_id}; at the PSPs: ${all()}`, own);
    } else if (moneyless.has(payment.status)) {
      const withMoney = charged.filter((c) => kept(c) !== 0 || ['requires_capture', 'processing', 'requires_action'].includes(c.status));
      verdict('no money at any PSP for a payment without money', withMoney.length === 0, () => `${subject}: ${withMoney.map(describe).join('; ')}`, own);
    }
    // Whatever it ended as: never two charges that took the card's money (authorized or captured), at one PSP or over several.
    const successful = charged.filter((c) => heldStates.has(c.status));
    verdict('at most one successful charge over all PSPs', successful.length <= 1, () => `${subject}: ${successful.map(describe).join('; ')}`, own);
    // What the PSPs keep for it (captured less refunded, summed over every PSP) is what our records say it keeps.
    const keptOverall = charged.reduce((n, c) => n + kept(c), 0);
    const keptHere = moneyless.has(payment.status) ? 0 : payment.amount_captured_minor - payment.amount_refunded_minor;
    verdict('captured less refunded at the PSPs equals the payment', keptOverall === keptHere, () =>
      `${subject} keeps ${keptHere} (captured ${payment.amount_captured_minor}, refunded ${payment.amount_refunded_minor}); the PSPs keep ${keptOverall}: ${all()}`, own);
    // An authorization open at a PSP is one its payment still awaits (a manual capture within its window), and none other.
    for (const open of charged.filter((c) => c.status === 'requires_capture')) {
      const awaited = payment.status === 'requires_capture' && open.provider === at && open.id === payment.provider_charge_id;
      const madeAt = payment.created_at === undefined ? null : new Date(payment.created_at).getTime();
      const inWindow = madeAt === null || input.authorizationWindowMs === undefined || (input.now ?? Date.now()) < madeAt + input.authorizationWindowMs;
      verdict('no authorization left unresolved past its window', awaited && inWindow, () =>
        `${subject}: ${describe(open)} is still authorized ${awaited ? `after its window (${input.authorizationWindowMs} ms from ${new Date(madeAt!).toISOString()})` : 'for a payment that does not await it'}`, own);
    }
    for (const charge of charged) {
      const attempt = attempts.find((a) => a.provider === charge.provider && providerSubKey.charge(payment.id, a.attempt) === charge.idempotency_key);
      const mine = attempt !== undefined && (attempt.provider_charge_id === null || attempt.provider_charge_id === charge.id);
      const allowed = attempt === last || (attempt?.outcome === 'declined' && charge.status === 'declined');
      verdict('every charge is an attempt of its payment', mine && allowed, () =>
        `${subject}: ${describe(charge)} is ${!attempt ? 'no attempt of it' : !mine ? `not attempt ${attempt.attempt}'s charge (${attempt.provider_charge_id})` : `left by attempt ${attempt.attempt} (${attempt.outcome}), which moved on`}; attempts ${attempts.map((a) => `${a.attempt} ${a.provider} ${a.outcome}`).join(', ') || 'none'}`, own);
    }
    attempts.forEach((attempt, index) => {
      const next = attempts[index + 1];
      if (!next) return;
      const left = charged.filter((c) => c.provider === attempt.provider && c.idempotency_key === providerSubKey.charge(payment.id, attempt.attempt));
      if (payment.recovery && attempt.outcome === 'declined' && next.provider === attempt.provider) {
        // A recovering payment's retry at the PSP of the last decline: that attempt's charge is a decline.
        verdict('recovery retried only after a decline', left.every((c) => c.status === 'declined'), () =>
          `${subject}: attempt ${attempt.attempt} at ${attempt.provider} was retried, but left ${left.map(describe).join('; ')}`, own);
        return;
      }
      // The next attempt is at another PSP, or (the route started again after its last PSP's
      // transient failure, docs/CONTRACT.md §3.8, 5) at the same one under a new key.
      const ok =
        movedOnOutcomes.has(attempt.outcome) &&
        (next.provider !== attempt.provider || attempt.outcome === 'not_sent' || attempt.outcome === 'not_charged') &&
        (attempt.outcome === 'declined'
          ? attempt.error_code !== null && !NEVER_RETRY_ELSEWHERE_DECLINE_CODES.includes(attempt.error_code) && left.every((c) => c.status === 'declined')
          : left.length === 0);
      verdict('moved on only when nothing was charged', ok, () =>
        `${subject}: attempt ${attempt.attempt} at ${attempt.provider} was ${attempt.outcome} (${attempt.error_code}) before attempt ${next.attempt} at ${next.provider}; there: ${left.map(describe).join('; ') || 'no charge'}`, own);
    });
    if (last && payment.provider_charge_id !== null) {
      verdict('held where its last attempt went', last.provider === at && (last.provider_charge_id === null || last.provider_charge_id === payment.provider_charge_id), () =>
        `${subject} is held at ${at} as ${payment.provider_charge_id}; its last attempt ${last.attempt} went to ${last.provider} (${last.outcome}, ${last.provider_charge_id})`, own);
    }
  }

  // Whole system: nothing at any PSP that no payment or refund accounts for.
  for (const charge of input.charges) {
    verdict('no orphan provider charge', paymentIds.has(charge.reference), () => `${describe(charge)} (reference ${charge.reference}) belongs to no payment`);
  }
  for (const [key, sameKey] of countBy(input.charges, (c) => `${c.provider} ${c.idempotency_key}`)) {
    verdict('one provider charge per key', sameKey.length === 1, () => `${key} made ${sameKey.length} charges: ${sameKey.map((c) => c.id).join(', ')}`);
  }
  const chargeAt = new Set(input.charges.map((c) => `${c.provider} ${c.id}`));
  for (const refund of input.providerRefunds) {
    // A compensation (a payment that failed after its money moved) or the reconciler's refund
    // of a charge at a PSP that does not hold the payment: about a payment, not a refund.
    const givenBack = (refund.idempotency_key.endsWith(':compensation') || refund.idempotency_key.includes(':duplicate:')) && paymentIds.has(refund.reference);
    verdict('no orphan provider refund', (input.refundIds.has(refund.reference) || givenBack) && chargeAt.has(`${refund.provider} ${refund.charge_id}`), () =>
      `${refund.provider} refund ${refund.id} (reference ${refund.reference}, key ${refund.idempotency_key}, charge ${refund.charge_id}) belongs to no refund, or refunds no charge of that PSP`);
  }
  for (const [key, sameKey] of countBy(input.providerRefunds, (r) => `${r.provider} ${r.idempotency_key}`)) {
    verdict('one provider refund per key', sameKey.length === 1, () => `${key} made ${sameKey.length} refunds: ${sameKey.map((r) => r.id).join(', ')}`);
  }
  // The ledger against the PSPs: per PSP and currency, then summed over the PSPs.
  const atPsps = new Map<string, number>();
  const inLedger = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, n: number) => map.set(key, (map.get(key) ?? 0) + n);
  for (const charge of input.charges.filter((c) => paymentIds.has(c.reference))) {
    add(atPsps, `${charge.provider} ${charge.currency}`, kept(charge));
    add(atPsps, `all ${charge.currency}`, kept(charge));
  }
  for (const line of (input.disputeMoney ?? []).filter((m) => paymentIds.has(m.reference))) {
    add(atPsps, `${line.provider} ${line.currency}`, line.amount_minor - line.fee_minor);
    add(atPsps, `all ${line.currency}`, line.amount_minor - line.fee_minor);
  }
  for (const row of input.ledger) {
    add(inLedger, `${row.provider} ${row.currency}`, row.net);
    add(inLedger, `all ${row.currency}`, row.net);
  }
  for (const key of new Set([...atPsps.keys(), ...inLedger.keys()])) {
    const [provider, currency] = key.split(' ');
    verdict(provider === 'all' ? 'ledger equals the sum over the PSPs' : 'ledger equals each PSP', (atPsps.get(key) ?? 0) === (inLedger.get(key) ?? 0), () =>
      `${currency} ${provider === 'all' ? 'over all PSPs' : `at ${provider}`}: the ledger's receivable is ${inLedger.get(key) ?? 0}, the PSP${provider === 'all' ? 's hold' : ' holds'} ${atPsps.get(key) ?? 0} (captured less refunded, less disputes withdrawn)`);
  }
}

/**
 * The checker, run once the load stopped and the system went quiet: every payment and refund
 * against the provider's charges and refunds, the ledger, the outbox and the merchant's
 * webhooks; every dispute against its PSP's, its workflow, its money and its events
 * (chaos/dispute-checks.ts); then whole-system checks (every provider charge and refund
 * belongs to exactly one payment or refund, by any reference; every ledger transaction
 * balanced, each merchant's balance what the PSPs hold for it, the ledger sums to zero per
 * currency; nothing stuck; no workflow running without a reason) and every key's replay,
 * byte for byte.
 */
/**
 * A recovering payment (docs/recovery.md), beside the checks every payment gets: at most one
 * succeeded charge over both PSPs, and final once its window has ended (the run's wait for
 * quiet outlasts every window: 1 to 3 days at RECOVERY_TIME_SCALE, chaos/environment.ts).
 */
export function checkRecovery(payment: Pick<PaymentRow, 'id' | 'status' | 'recovery'>, charged: readonly Pick<PspCharge, 'status' | 'provider' | 'id'>[], verdict: VerdictFn, into?: string[]): void {
  const recovery = payment.recovery!;
  const subject = `recovering payment ${payment.id} (${payment.status}, ${recovery.attempts} attempts, stopped ${recovery.stopped_because ?? '-'})`;
  const succeeded = charged.filter((c) => c.status === 'succeeded');
  verdict('at most one successful charge per recovering payment', succeeded.length <= 1, () => `${subject}: ${succeeded.map((c) => `${c.provider} ${c.id}`).join(', ')}`, into);
  const windowEndsAt = Date.parse(recovery.window_ends_at);
  verdict('recovering payment final by the end of its window', payment.status !== 'recovering' || Date.now() < windowEndsAt, () => `${subject} still recovering after its window ended at ${recovery.window_ends_at}`, into);
}

/** A PSP's `excessive_retry` line: the card network's fee for a retry of the charge `source` that broke a scheme rule. */
export interface ExcessiveRetryFee {
  provider: string;
  source: string;
  reference: string | null;
}

/** No retry broke the card networks' rules (docs/recovery.md): no `excessive_retry` fee at either PSP, each one a finding of its payment. */
export function checkNoExcessiveRetries(fees: readonly ExcessiveRetryFee[], verdict: VerdictFn, into: (paymentId: string) => string[] | undefined = () => undefined): void {
  if (fees.length === 0) verdict('no excessive_retry fee', true, () => '');
  for (const fee of fees) {
    verdict('no excessive_retry fee', false, () => `${fee.provider} charged an excessive retry for charge ${fee.source} (payment ${fee.reference ?? 'unknown'})`, fee.reference ? into(fee.reference) : undefined);
  }
}

export async function check(input: CheckInput): Promise<Verdict> {
  const { sql } = input;
  const { checks, findings, verdict } = createTally();
  // The sandboxes' tables are read in SQL, the doubles' through their census call; the first sandbox is the default PSP.
  const sandboxes = Object.keys(input.pspSql);
  const doubles = Object.entries(input.doubles ?? {});
  const psps = [...sandboxes, ...doubles.map(([name]) => name)];

  const payments = await sql<PaymentRow[]>`
    SELECT id, status, amount_minor::int, amount_captured_minor::int, amount_refunded_minor::int, currency, capture_method,
           payment_method, provider_charge_id, provider, workflow_id, off_session, setup_future_usage, recovery, created_at
    FROM payments WHERE tenant_id IN ${sql(input.tenantIds)} ORDER BY created_at, id`;
  const attempts = await sql<AttemptRow[]>`
    SELECT a.payment_id, a.attempt, a.provider, a.provider_charge_id, a.outcome, a.error_code
    FROM payment_attempts a JOIN payments p ON p.id = a.payment_id WHERE p.tenant_id IN ${sql(input.tenantIds)} ORDER BY a.payment_id, a.attempt`;
  const refunds = await sql<RefundRow[]>`
    SELECT id, payment_id, amount_minor::int, status, provider_refund_id FROM refunds WHERE tenant_id IN ${sql(input.tenantIds)} ORDER BY created_at, id`;
  const transactions = await sql<{ payment_id: string | null; refund_id: string | null; dispute_id: string | null }[]>`
    SELECT payment_id, refund_id, dispute_id FROM ledger_transactions WHERE tenant_id IN ${sql(input.tenantIds)}`;
  const events = await sql<{ id: string; type: string; object_id: string; delivery_state: string }[]>`
    SELECT id, type, payload -> 'data' -> 'object' ->> 'id' AS object_id, delivery_state FROM outbox_events WHERE tenant_id IN ${sql(input.tenantIds)}`;
  // The receivable (what the PSPs hold for us) by the PSP of the payment each posting is about.
  const ledger = await sql<{ provider: string; currency: string; net: number }[]>`
    SELECT coalesce(p.provider, ${psps[0]!}) AS provider, e.currency, sum(e.amount_minor)::bigint::int AS net
    FROM ledger_entries e
    JOIN ledger_accounts a ON a.id = e.account_id AND a.code = 'provider_receivable'
    JOIN ledger_transactions t ON t.id = e.transaction_id
    LEFT JOIN refunds r ON r.id = t.refund_id
    JOIN payments p ON p.id = coalesce(t.payment_id, r.payment_id)
    WHERE a.tenant_id IN ${sql(input.tenantIds)}
    GROUP BY 1, 2`;
  // Every charge and refund each PSP ever committed, not only those of known payments.
  const charges: PspCharge[] = [];
  const providerRefunds: ProviderRefundRow[] = [];
  for (const provider of sandboxes) {
    const psp = input.pspSql[provider]!;
    charges.push(...(await psp<PspCharge[]>`
      SELECT ${provider} AS provider, id, status, amount_captured_minor::int, amount_refunded_minor::int, currency, reference, idempotency_key
      FROM sandbox.charges ORDER BY created_at, id`));
    providerRefunds.push(...(await psp<ProviderRefundRow[]>`
      SELECT ${provider} AS provider, id, charge_id, amount_minor::int, status, reference, idempotency_key FROM sandbox.refunds ORDER BY created_at, id`));
  }
  const doubleCensus = new Map<string, Awaited<ReturnType<typeof readDoubleCensus>>>();
  for (const [provider, url] of doubles) {
    const census = await readDoubleCensus(url);
    doubleCensus.set(provider, census);
    const holdings = holdingsOfDouble(provider, census);
    charges.push(...holdings.charges);
    providerRefunds.push(...holdings.refunds);
  }
  const providerOf = (payment: PaymentRow) => payment.provider ?? (payment.provider_charge_id !== null ? psps[0]! : null);

  const chargesByReference = countBy(charges, (c) => c.reference);
  const attemptsByPayment = countBy(attempts, (a) => a.payment_id);
  const providerRefundsByReference = countBy(providerRefunds, (r) => r.reference);
  const eventsByObject = countBy(events, (e) => e.object_id);
  const refundsByPayment = countBy(refunds, (r) => r.payment_id);
  const operationsByPayment = countBy(
    input.operations.filter((op) => op.paymentId),
    (op) => op.paymentId!,
  );
  const paymentIds = new Set(payments.map((p) => p.id));
  const refundIds = new Set(refunds.map((r) => r.id));

  const eventCensus = (objectId: string, into: string[], subject: string, expected: string[], optional: string[] = [], upTo: Record<string, number> = {}) => {
    const own = eventsByObject.get(objectId) ?? [];
    const byType: Record<string, number> = {};
    for (const e of own) byType[e.type] = (byType[e.type] ?? 0) + 1;
    const extra = Object.entries(byType).filter(([type, n]) => n > (upTo[type] ?? 1) || !(expected.includes(type) || optional.includes(type)));
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
    // Every wait ends by its window at the latest (AUTHENTICATION_WINDOW_SECONDS, ASYNC_SETTLEMENT_WINDOW_SECONDS), all shorter than the wait for quiet.
    const waiting = payment.status === 'processing' || payment.status === 'requires_action';
    verdict('payment decided', !waiting, () => `${subject} (${payment.payment_method}) still ${payment.status} after the wait for quiet, beyond its window`, own);
    // Its charges at every PSP (how many, and why more than one, is checkAcrossPsps's census).
    const charged = chargesByReference.get(payment.id) ?? [];
    const charge = charged.find((c) => c.provider === providerOf(payment) && c.id === payment.provider_charge_id) ?? charged.at(-1);
    // What the PSP still holds for the payment: captured and not refunded (an open authorization counts as held too).
    const keptAtProvider = charge ? charge.amount_captured_minor - charge.amount_refunded_minor : 0;
    if (charge && !waiting) {
      const statusOk = chargeAgrees(payment.status, charge.status);
      // A payment that ended without money: nothing captured here and nothing kept at the PSP
      // (a failed payment's or a late success's money given back in full).
      const capturedOk = moneyless.has(payment.status)
        ? payment.amount_captured_minor === 0 && keptAtProvider === 0
        : payment.amount_captured_minor === charge.amount_captured_minor;
      // A charge its PSP never named to the run (a redirect, ended before it was decided) is recorded without an id, found by our reference.
      const named = charge.id === payment.provider_charge_id || (payment.provider_charge_id === null && moneyless.has(payment.status));
      verdict('payment matches its charge', statusOk && capturedOk && named && charge.provider === providerOf(payment), () =>
        `${subject} is ${payment.status} (captured ${payment.amount_captured_minor}, charge ${payment.provider_charge_id} at ${providerOf(payment)}); ${charge.provider} charge ${charge.id} is ${charge.status} (captured ${charge.amount_captured_minor}, refunded ${charge.amount_refunded_minor})`, own);
    }
    if (threeDSecureMethods.has(payment.payment_method) || debitMethods.has(payment.payment_method)) {
      // Every payment that waited ends in one final state the PSP agrees
      // with: succeeded ⇒ exactly one charge, captured once, kept; expired, canceled, declined
      // or failed ⇒ no money kept at the PSP (a challenge voided, a late success refunded).
      const endedWith = payment.status === 'succeeded' || payment.status === 'refunded' ? 'money' : moneyless.has(payment.status) ? 'no money' : payment.status;
      // Any other charge of it is a failover's: declined at a PSP it then moved on from.
      const agrees =
        charge !== undefined &&
        charged.every((c) => c === charge || c.status === 'declined') &&
        (endedWith === 'money'
          ? charge!.status === 'succeeded' && charge!.amount_captured_minor === payment.amount_captured_minor && payment.amount_captured_minor > 0
          : endedWith === 'no money'
            ? keptAtProvider === 0 && charge!.status !== 'requires_capture' && charge!.status !== 'requires_action' && charge!.status !== 'processing'
            : payment.status === 'requires_capture' && charge!.status === 'requires_capture');
      verdict('waiting payment agrees with the PSP', agrees, () =>
        `${subject} (${payment.payment_method}) is ${payment.status} (captured ${payment.amount_captured_minor}); at the PSP: ${charged.map((c) => `${c.id} ${c.status} captured ${c.amount_captured_minor} refunded ${c.amount_refunded_minor}`).join(', ') || 'no charge'}`, own);
    }
    const captureTransactions = transactions.filter((t) => t.payment_id === payment.id && t.refund_id === null && t.dispute_id === null).length;
    const capturedState = payment.status === 'succeeded' || payment.status === 'refunded';
    verdict('ledger posting exactly once', captureTransactions === (capturedState ? 1 : 0), () => `${subject} (${payment.status}) has ${captureTransactions} capture transactions`, own);
    const expected = expectedEvents(payment);
    const { byType, deliveries } = eventCensus(payment.id, own, subject, expected.required, expected.optional, expected.upTo);
    if (payment.recovery) checkRecovery(payment, charged, verdict, own);

    const refundCensus: RefundCensus[] = [];
    const paymentRefunds = refundsByPayment.get(payment.id) ?? [];
    for (const refund of paymentRefunds) {
      const rsubject = `refund ${refund.id} of ${payment.id}`;
      verdict('refund finished', refund.status !== 'pending', () => `${rsubject} still pending`, own);
      // At the PSP that holds the payment, and at no other.
      const atProvider = providerRefundsByReference.get(refund.id) ?? [];
      const elsewhere = atProvider.filter((r) => r.provider !== providerOf(payment));
      const succeededThere = atProvider.filter((r) => r.status === 'succeeded');
      const providerOk =
        elsewhere.length === 0 &&
        (refund.status === 'succeeded'
          ? atProvider.length === 1 && succeededThere[0]?.amount_minor === refund.amount_minor && succeededThere[0]?.id === refund.provider_refund_id
          : refund.status === 'failed'
            ? atProvider.length <= 1 && succeededThere.length === 0
            : false);
      verdict('refund matches the provider', providerOk, () => `${rsubject} is ${refund.status} (${refund.amount_minor}, ${refund.provider_refund_id}, payment at ${providerOf(payment)}); at the PSPs: ${atProvider.map((r) => `${r.provider} ${r.id} ${r.status} ${r.amount_minor}`).join(', ') || 'none'}`, own);
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
      provider: providerOf(payment),
      offSession: payment.off_session,
      savesCard: payment.setup_future_usage !== null,
      attempts: (attemptsByPayment.get(payment.id) ?? []).map((a) => ({ attempt: a.attempt, provider: a.provider, outcome: a.outcome, errorCode: a.error_code, chargeId: a.provider_charge_id })),
      charges: charged.map((c) => ({ provider: c.provider, id: c.id, status: c.status, capturedMinor: c.amount_captured_minor, refundedMinor: c.amount_refunded_minor, key: c.idempotency_key })),
      captureTransactions,
      events: byType,
      deliveries,
      refunds: refundCensus,
      disputes: [],
      operations: (operationsByPayment.get(payment.id) ?? []).map((op) => ({ kind: op.kind, key: op.key, copies: op.copies, attempts: op.attempts, lostAnswers: op.lostAnswers, finalStatus: op.finalStatus })),
      findings: own,
    });
  }

  // Across the PSPs: every charge an attempt, one held charge per payment, no orphans, the ledger.
  const ownFindings = new Map(census.map((p) => [p.id, p.findings]));
  const allTransactions = await ledgerTransactions(sql, input.tenantIds);
  const disputeInput = await readDisputeCensus(input, sandboxes, events, allTransactions);
  checkAcrossPsps({ psps, payments, attempts, charges, providerRefunds, refundIds, ledger, disputeMoney: disputeInput.pspMoney, authorizationWindowMs: input.authorizationWindowMs }, verdict, (id) => ownFindings.get(id));
  // Each double's notifications: delivered, stored once under their payment, and a refund's settling it as it said.
  if (doubles.length > 0) {
    const stored = await sql<StoredProviderEvent[]>`SELECT provider, event_id, payment_id FROM provider_events WHERE provider IN ${sql(doubles.map(([name]) => name))}`;
    for (const [provider, census] of doubleCensus) checkDoubleNotifications({ provider, census, stored, refunds, paymentIds }, verdict, (id) => ownFindings.get(id));
  }
  // Each dispute against its PSP, its workflow, its money and its events; then the ledger as a whole.
  const disputesByPayment = checkDisputes(disputeInput, verdict, (id) => ownFindings.get(id));
  for (const record of census) record.disputes = disputesByPayment.get(record.id) ?? [];
  checkLedgerBalance({ transactions: allTransactions, payments: await tenantsOfPayments(sql, input.tenantIds), charges, pspMoney: disputeInput.pspMoney }, verdict);
  const unbalanced = await sql<{ currency: string; total: string }[]>`
    SELECT currency, sum(amount_minor)::text AS total FROM ledger_entries GROUP BY currency HAVING sum(amount_minor) <> 0`;
  verdict('ledger sums to zero per currency', unbalanced.length === 0, () => unbalanced.map((u) => `${u.currency} ${u.total}`).join(', '));
  const excessiveFees: ExcessiveRetryFee[] = [];
  for (const provider of sandboxes) {
    excessiveFees.push(...(await input.pspSql[provider]!<ExcessiveRetryFee[]>`
      SELECT ${provider} AS provider, source, reference FROM sandbox.balance_transactions WHERE type = 'excessive_retry' ORDER BY created_at, id`));
  }
  checkNoExcessiveRetries(excessiveFees, verdict, (id) => ownFindings.get(id));
  const stuck = await sql<{ idempotency_key: string; operation: string; resource_id: string }[]>`
    SELECT idempotency_key, operation, resource_id FROM idempotency_records WHERE tenant_id IN ${sql(input.tenantIds)} AND state = 'running'`;
  verdict('no idempotency record stuck', stuck.length === 0, () => stuck.map((r) => `${r.operation} ${r.idempotency_key} (${r.resource_id})`).join(', '));
  const undelivered = events.filter((e) => e.delivery_state !== 'delivered');
  verdict('outbox drained', undelivered.length === 0, () => undelivered.map((e) => `${e.type} ${e.id} ${e.delivery_state}`).join(', '));

  const { open, withoutReason } = await runningWorkflows(sql, input.temporal, input.tenantIds);
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

/** What the dispute census reads: our disputes, each PSP's, their ledger transactions, events and workflows, and the workload's answers. */
async function readDisputeCensus(input: CheckInput, psps: string[], events: { id: string; type: string; object_id: string }[], transactions: LedgerTransactionRecord[]): Promise<DisputeCensusInput> {
  const { sql } = input;
  const disputes = await sql<DisputeCensusInput['disputes']>`
    SELECT id, tenant_id, payment_id, provider, provider_dispute_id, amount_minor::int, currency, stage, status, fee_minor::int, workflow_id
    FROM disputes WHERE tenant_id IN ${sql(input.tenantIds)} ORDER BY created_at, id`;
  const pspDisputes: DisputeCensusInput['pspDisputes'] = [];
  const pspMoney: PspDisputeMoney[] = [];
  for (const provider of psps) {
    const psp = input.pspSql[provider]!;
    pspDisputes.push(...(await psp<DisputeCensusInput['pspDisputes']>`
      SELECT ${provider} AS provider, d.id, d.charge_id, c.reference, d.amount_minor::int, d.currency, d.stage, d.status
      FROM sandbox.disputes d JOIN sandbox.charges c ON c.id = d.charge_id ORDER BY d.seq`));
    pspMoney.push(...(await psp<PspDisputeMoney[]>`
      SELECT ${provider} AS provider, source, type, reference, amount_minor::int, fee_minor::int, currency
      FROM sandbox.balance_transactions WHERE type IN ('dispute', 'dispute_reversal') ORDER BY created_at, id`));
  }
  const disputeIds = new Set(disputes.map((d) => d.id));
  const workflows = new Map<string, WorkflowRuns>();
  for await (const execution of input.temporal.workflow.list({ query: `WorkflowType = 'disputeWorkflow'` })) {
    const runs = workflows.get(execution.workflowId) ?? { runs: 0, running: 0, completed: 0 };
    runs.runs++;
    if (execution.status.name === 'RUNNING') runs.running++;
    if (execution.status.name === 'COMPLETED') runs.completed++;
    workflows.set(execution.workflowId, runs);
  }
  // The workload's commands, by the dispute id in their path.
  const answers: DisputeAnswer[] = input.operations.flatMap((op) => {
    const disputeId = /^\/v1\/disputes\/([^/]+)\//.exec(op.path)?.[1];
    if (!disputeId || (op.kind !== 'evidence' && op.kind !== 'accept')) return [];
    const text = String((op.body.evidence as Record<string, string> | undefined)?.uncategorized_text ?? '');
    return [{ disputeId, command: op.kind === 'accept' ? 'accept' : text.includes('winning_evidence') ? 'winning' : 'losing', finalStatus: op.finalStatus }];
  });
  return {
    disputes,
    pspDisputes,
    pspMoney,
    ledger: transactions.filter((t) => t.dispute_id !== null),
    events: events.filter((e) => disputeIds.has(e.object_id)),
    acks: input.acks,
    workflows,
    answers,
    remindersPerStage: input.disputeReminders,
  };
}

/** The run's ledger transactions with their entries. */
async function ledgerTransactions(sql: Sql, tenantIds: string[]): Promise<LedgerTransactionRecord[]> {
  const rows = await sql<{ id: string; tenant_id: string; event_key: string; dispute_id: string | null; account: string; currency: string; amount_minor: number }[]>`
    SELECT t.id, t.tenant_id, t.event_key, t.dispute_id, a.code AS account, e.currency, e.amount_minor::int
    FROM ledger_transactions t
    JOIN ledger_entries e ON e.transaction_id = t.id
    JOIN ledger_accounts a ON a.id = e.account_id
    WHERE t.tenant_id IN ${sql(tenantIds)} ORDER BY t.created_at, t.id, e.line`;
  const byId = new Map<string, LedgerTransactionRecord>();
  for (const row of rows) {
    const t = byId.get(row.id) ?? { id: row.id, tenant_id: row.tenant_id, event_key: row.event_key, dispute_id: row.dispute_id, entries: [] };
    t.entries.push({ account: row.account, currency: row.currency, amount_minor: row.amount_minor });
    byId.set(row.id, t);
  }
  return [...byId.values()];
}

const tenantsOfPayments = (sql: Sql, tenantIds: string[]) => sql<{ id: string; tenant_id: string }[]>`SELECT id, tenant_id FROM payments WHERE tenant_id IN ${sql(tenantIds)}`;

/**
 * The running workflows, and among them those without a reason to run: only a payment
 * awaiting capture (its workflow waits for a capture or cancel, or for the window to end)
 * may still be running once the system went quiet.
 */
export async function runningWorkflows(sql: Sql, temporal: Client, tenantIds: string[]): Promise<{ open: string[]; withoutReason: string[] }> {
  const open: string[] = [];
  for await (const execution of temporal.workflow.list({ query: `ExecutionStatus = 'Running'` })) open.push(execution.workflowId);
  if (open.length === 0) return { open, withoutReason: [] };
  const waiting = await sql<{ workflow_id: string }[]>`
    SELECT workflow_id FROM payments WHERE tenant_id IN ${sql(tenantIds)} AND status = 'requires_capture' AND workflow_id IN ${sql(open)}`;
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
