/**
 * The payment lifecycle as one table. Every other definition of "which statuses", "which
 * transitions", "which commands", "which statuses wait, for whom and how long" and "which
 * states a PSP reports a charge in" is derived from it: the status vocabulary (zod enums, the
 * OpenAPI document, the typed client), the transition guards of db/payments.ts, the order
 * guard's live statuses, the workflow's update validators and the API's 409 refusals, the
 * PSP's charge states (provider/types.ts) and the attempts' outcomes (domain/payments-attempts.ts), the
 * API's 202 answers, the windows' configuration and defaults (lib/config.ts), the late charge's
 * and the abandoned-run sweeper's waits. The SQL CHECKs (payments.status, payment_attempts.outcome)
 * and the partial unique index of migration 007 are tested against it
 * (test/integration/payment-lifecycle-sql.test.ts).
 *
 * Imported by workflow code: no Node, no I/O, no clock.
 */

/** How a payment is captured: at once (automatic), or after a wait in requires_capture for the merchant's capture (manual). */
export const captureMethods = ['automatic', 'manual'] as const;
export type CaptureMethod = (typeof captureMethods)[number];

/** The statuses of a payment's refunds: a refund that succeeds for the whole amount moves the payment to `refunded`. */
export const refundStatuses = ['pending', 'succeeded', 'failed'] as const;
export type RefundStatus = (typeof refundStatuses)[number];

/** A command a merchant sends to a payment (an Update to its workflow). */
export type PaymentCommand = 'capture' | 'cancel';

/** Who a waiting payment waits for: the customer (a challenge), the PSP (an asynchronous outcome), or the merchant (a capture or cancel). */
export type Waiter = 'customer' | 'psp' | 'merchant';

/**
 * The windows a status waits in: whom it waits for, and how long (the configuration key, in
 * seconds, and its default; lib/config.ts reads them, the API hands each to the workflow as input).
 */
export const paymentWindows = {
  /** The customer's 3-D Secure challenge. */
  authentication: { waitsFor: 'customer', configKey: 'AUTHENTICATION_WINDOW_SECONDS', defaultSeconds: 900 },
  /** An asynchronous method's outcome at the PSP (a bank debit). */
  settlement: { waitsFor: 'psp', configKey: 'ASYNC_SETTLEMENT_WINDOW_SECONDS', defaultSeconds: 7 * 24 * 3600 },
  /** An uncaptured authorization: the merchant's capture or cancel. */
  authorization: { waitsFor: 'merchant', configKey: 'AUTHORIZATION_WINDOW_SECONDS', defaultSeconds: 7 * 24 * 3600 },
  /**
   * A declined off-session payment's recovery: its next attempt at the PSP (the window is the
   * payment's own `recovery.window_days`; the key names the longest a payment may ask for).
   * It waits for the PSP, so a retry's charge reported early stays with the payment's run.
   */
  recovery: { waitsFor: 'psp', configKey: 'RECOVERY_MAX_WINDOW_SECONDS', defaultSeconds: 60 * 24 * 3600 },
} as const satisfies Record<string, { waitsFor: Waiter; configKey: `${string}_SECONDS`; defaultSeconds: number }>;

/** The window a status waits in. */
export type PaymentDeadline = keyof typeof paymentWindows;

export interface PaymentStatusRule {
  /** Final: the charge's outcome is decided and no PSP event, poll or command moves it again. */
  final: boolean;
  /** The commands (capture, cancel) the payment accepts in this status. */
  commands: readonly PaymentCommand[];
  /** The statuses a payment may come from into this one (none: the status a payment starts in). */
  from: readonly string[];
  /** The merchant event recorded when a payment enters this status (null: none of its own). */
  event: `payment.${string}` | null;
  /** The window a payment waits in here (paymentWindows: for whom, how long); null: it does not wait. */
  deadline: PaymentDeadline | null;
  /** A PSP reports a charge in this state (a webhook, a status poll, the charge's first answer): the PSP's charge states. */
  charge: boolean;
  /** Holds the order: a second payment for it is refused (payments_one_live_per_order). */
  holdsOrder: boolean;
  /** What the status means, for docs/CONTRACT.md and the OpenAPI description. */
  meaning: string;
}

/**
 * The table. Order matters only for display (the OpenAPI enum, the docs); `processing` first,
 * as the status a payment starts in.
 */
export const paymentLifecycle = {
  processing: {
    final: false,
    commands: [],
    from: [],
    // Entered again (not left) when the PSP answers that the outcome is pending: the event marks that fact.
    event: 'payment.processing',
    deadline: 'settlement',
    charge: true,
    holdsOrder: true,
    meaning: 'The payment is being made; for an asynchronous method (a bank debit) the PSP has it and the outcome is pending.',
  },
  requires_action: {
    final: false,
    commands: ['cancel'],
    from: ['processing'],
    event: 'payment.requires_action',
    deadline: 'authentication',
    charge: true,
    holdsOrder: true,
    meaning: 'The customer must authenticate (3-D Secure): send them to `next_action.redirect_to_url.url`.',
  },
  requires_capture: {
    final: false,
    commands: ['capture', 'cancel'],
    from: ['processing', 'requires_action'],
    event: 'payment.requires_capture',
    deadline: 'authorization',
    charge: true,
    holdsOrder: true,
    meaning: 'Authorized (manual capture): capture or cancel it before the authorization window ends.',
  },
  recovering: {
    final: false,
    commands: ['cancel'],
    from: ['processing'],
    event: null,
    deadline: 'recovery',
    charge: false,
    holdsOrder: true,
    meaning: 'Declined off-session with a soft decline: retried within the card networks\' rules until paid, its `recovery.window_days` end, or a rule says stop (`recovery`).',
  },
  succeeded: {
    final: true,
    commands: [],
    from: ['processing', 'requires_action', 'requires_capture', 'recovering'],
    event: 'payment.succeeded',
    deadline: null,
    charge: true,
    holdsOrder: true,
    meaning: 'The money was captured.',
  },
  declined: {
    final: true,
    commands: [],
    from: ['processing', 'requires_action', 'recovering'],
    event: 'payment.declined',
    deadline: null,
    charge: true,
    holdsOrder: false,
    meaning: 'The PSP or the bank declined it (or the customer failed authentication). The order may be paid again.',
  },
  failed: {
    final: true,
    commands: [],
    from: ['processing', 'requires_action', 'requires_capture', 'recovering'],
    event: 'payment.failed',
    deadline: null,
    charge: false,
    holdsOrder: false,
    meaning: 'It could not be completed (the PSP refused the request, or money that moved was given back).',
  },
  canceled: {
    final: true,
    commands: [],
    from: ['requires_action', 'requires_capture', 'recovering'],
    event: 'payment.canceled',
    deadline: null,
    charge: true,
    holdsOrder: false,
    meaning: 'Canceled by the merchant, or an uncaptured authorization voided when its window ended.',
  },
  expired: {
    final: true,
    commands: [],
    from: ['processing', 'requires_action'],
    event: 'payment.expired',
    deadline: null,
    charge: false,
    holdsOrder: false,
    meaning: 'The customer did not authenticate in time, or the PSP gave no outcome within the settlement window; no money kept.',
  },
  refunded: {
    final: true,
    commands: [],
    // Reached by refunds only, never by a charge event.
    from: ['succeeded'],
    event: null,
    deadline: null,
    charge: false,
    holdsOrder: true,
    meaning: 'Fully refunded.',
  },
} as const satisfies Record<string, PaymentStatusRule>;

export type PaymentStatus = keyof typeof paymentLifecycle;

const rules = paymentLifecycle as Record<PaymentStatus, PaymentStatusRule>;

/** Every status, in the table's order (the zod enums and the OpenAPI document use this list). */
export const paymentStatuses = Object.keys(paymentLifecycle) as [PaymentStatus, ...PaymentStatus[]];

/** The statuses whose charge outcome is decided. */
export const finalStatuses = paymentStatuses.filter((s) => rules[s].final);
/** The statuses a payment waits in (a run is expected to be open while a payment is in one). */
export const waitingStatuses = paymentStatuses.filter((s) => !rules[s].final);
/** The statuses that hold an order (the order guard and its partial unique index). */
export const orderHoldingStatuses = paymentStatuses.filter((s) => rules[s].holdsOrder);

export function isFinal(status: PaymentStatus): boolean {
  return rules[status].final;
}

/** The statuses a payment may move into `to` from: the transition guard of db/payments.ts. */
export function fromStatuses(to: PaymentStatus): PaymentStatus[] {
  return [...rules[to].from] as PaymentStatus[];
}

/** May a payment in `from` move to `to`? (A final status is never left, except succeeded → refunded by refunds.) */
export function mayMove(from: PaymentStatus, to: PaymentStatus): boolean {
  return (rules[to].from as readonly string[]).includes(from);
}

/** Does a payment in this status accept the command? */
export function accepts(status: PaymentStatus, command: PaymentCommand): boolean {
  return (rules[status].commands as readonly PaymentCommand[]).includes(command);
}

/** The statuses that accept a command (e.g. capture: requires_capture only). */
export function statusesAccepting(command: PaymentCommand): PaymentStatus[] {
  return paymentStatuses.filter((s) => accepts(s, command));
}

/** The refusal a merchant reads when the command does not fit the status (the API's 409 message). */
export function commandRefusal(paymentId: string, status: PaymentStatus, command: PaymentCommand): string {
  const fits = statusesAccepting(command).join(' or ');
  return `payment ${paymentId} is ${status}; ${command} is accepted only while it is ${fits}`;
}

/** The merchant events, derived from the table (the outbox's payment event types). */
export const paymentEventTypes = paymentStatuses.map((s) => rules[s].event).filter((e): e is NonNullable<typeof e> => e !== null) as [
  PaymentEventType,
  ...PaymentEventType[],
];
export type PaymentEventType = NonNullable<(typeof paymentLifecycle)[PaymentStatus]['event']>;

export function eventOf(status: PaymentStatus): PaymentEventType | null {
  return rules[status].event as PaymentEventType | null;
}

export function deadlineOf(status: PaymentStatus): PaymentDeadline | null {
  return rules[status].deadline;
}

/** Whom a payment in this status waits for (null: it does not wait). */
export function waiterOf(status: PaymentStatus): Waiter | null {
  const deadline = rules[status].deadline;
  return deadline === null ? null : paymentWindows[deadline].waitsFor;
}

/** The statuses whose payment waits for any of `waiters`. */
export function statusesWaitingFor(...waiters: Waiter[]): PaymentStatus[] {
  return paymentStatuses.filter((s) => {
    const waiter = waiterOf(s);
    return waiter !== null && waiters.includes(waiter);
  });
}

/**
 * The statuses whose charge outcome is still open at the PSP: the payment waits for the
 * customer or for the PSP. The first answer in one of them is the API's 202 (the outcome must be
 * waited for); a late charge is left to the payment's own run while it is in one.
 */
export const outcomePendingStatuses: readonly PaymentStatus[] = statusesWaitingFor('customer', 'psp');

export function isOutcomePending(status: PaymentStatus): boolean {
  return outcomePendingStatuses.includes(status);
}

/**
 * The PSP's view of a charge, as a webhook or a status poll reports it: the statuses the table
 * marks `charge`, each meaning the payment status of its name. `requires_action` and
 * `processing` are waits; the others decide the charge.
 */
export type ChargeState = { [S in PaymentStatus]: (typeof paymentLifecycle)[S]['charge'] extends true ? S : never }[PaymentStatus];
/** The PSP's charge states, in the table's order (provider/types.ts, the attempts' outcomes, the workflow's check of a reported charge). */
export const chargeStates = paymentStatuses.filter((s) => rules[s].charge) as [ChargeState, ...ChargeState[]];

export function isChargeState(state: string): state is ChargeState {
  return (chargeStates as readonly string[]).includes(state);
}

export function statusForCharge(state: ChargeState): PaymentStatus {
  return state;
}

/**
 * What one report about the charge (webhook, poll, or the first answer) does to a payment in
 * `current`: the next status, or null when it changes nothing. A final status is never left
 * (a late `processing` after `succeeded` changes nothing: Hyperswitch's #9925 and #10340 are
 * that bug), and a report of the status the payment is already in is a duplicate.
 */
export function applyChargeReport(current: PaymentStatus, reported: ChargeState): PaymentStatus | null {
  if (isFinal(current)) return null;
  const next = statusForCharge(reported);
  if (next === current) return null;
  // A wait reported after a later wait began (reordered webhooks) is stale: processing after
  // requires_action, or a wait after an authorization, moves nothing back.
  if (!mayMove(current, next)) return null;
  return next;
}

/**
 * The final statuses in which a payment keeps no money: nothing was captured, or what moved was
 * given back. A success (or an authorization) the PSP reports for such a payment afterwards is
 * money nobody may keep: it is given back (workflows/payments-late-charge.ts). `succeeded` and `refunded`
 * are excluded: their money was the merchant's, and a refund of it is the merchant's decision.
 */
export const moneylessFinalStatuses: readonly PaymentStatus[] = finalStatuses.filter((s) => s !== 'succeeded' && s !== 'refunded');

export function keepsNoMoney(status: PaymentStatus): boolean {
  return moneylessFinalStatuses.includes(status);
}

/**
 * The failure codes of a payment whose own run gave its charge back, or asked to and recorded for
 * an operator that the PSP refused or never confirmed it: a compensation (a ledger refusal, a
 * capture refused or unconfirmed, a compensation that failed) or a cancel refused or unconfirmed.
 * Money the PSP reports for such a charge afterwards is not late money: the run's refund or void
 * was asked under the payment's own keys, so asking again is that request once more (at a kind
 * whose modifications are notified, answered `received` again), and the failure already says
 * what an operator must check.
 */
export const chargeGivenBackByItsRun: readonly string[] = ['ledger_rejected', 'capture_failed', 'capture_unconfirmed', 'compensation_failed', 'cancel_failed', 'cancel_unconfirmed'];

/** A charge's figures as the PSP holds it, as far as the rules below read them. */
export interface ChargeFigures {
  /** The PSP's id of the charge; '' while the PSP has not named it (a redirect the PSP answered without the charge's id). */
  id: string;
  status: ChargeState;
  amountMinor: number;
  amountCapturedMinor: number;
  amountRefundedMinor: number;
  currency: string;
}

/** The PSP holds money for the charge: captured and not all refunded, or an open authorization. */
export function chargeHoldsMoney(charge: Pick<ChargeFigures, 'status' | 'amountCapturedMinor' | 'amountRefundedMinor'>): boolean {
  return charge.status === 'requires_capture' || (charge.status === 'succeeded' && charge.amountCapturedMinor > charge.amountRefundedMinor);
}

/**
 * How the PSP's charge disagrees with the payment it was reported for: another charge id, amount
 * or currency, more captured than the amount, or (an automatic capture that succeeded) not all
 * of it. Empty when it agrees. A report that disagrees settles nothing: an operator reconciles it.
 */
export function chargeDisagreements(
  payment: { amountMinor: number; currency: string; captureMethod: CaptureMethod },
  chargeId: string,
  charge: ChargeFigures,
): string[] {
  return [
    charge.id !== chargeId ? `charge id ${charge.id}, not ${chargeId}` : null,
    charge.amountMinor !== payment.amountMinor ? `amount ${charge.amountMinor}, not ${payment.amountMinor}` : null,
    charge.currency.toUpperCase() !== payment.currency ? `currency ${charge.currency}, not ${payment.currency}` : null,
    charge.amountCapturedMinor > payment.amountMinor ? `captured ${charge.amountCapturedMinor}, more than ${payment.amountMinor}` : null,
    payment.captureMethod === 'automatic' && charge.status === 'succeeded' && charge.amountCapturedMinor !== payment.amountMinor
      ? `captured ${charge.amountCapturedMinor} of an automatic capture of ${payment.amountMinor}`
      : null,
  ].filter((d): d is string => d !== null);
}

/**
 * The payment has recorded this charge exactly as reported: its id, the status it implies and
 * what was captured (and it is no report of a failed capture). Such a report tells the payment's
 * run nothing it does not know.
 */
export function recordsCharge(
  payment: { chargeId: string | null; status: PaymentStatus; amountCapturedMinor: number },
  charge: Pick<ChargeFigures, 'id' | 'status' | 'amountCapturedMinor'> & { declineCode?: string | null },
): boolean {
  // An authorization whose capture failed (a decline code on it) is news to a run waiting for that capture.
  const captureFailed = charge.status === 'requires_capture' && (charge.declineCode ?? null) !== null;
  return !captureFailed && payment.chargeId === charge.id && payment.status === statusForCharge(charge.status) && payment.amountCapturedMinor === charge.amountCapturedMinor;
}
