/**
 * Revenue recovery: the rules a retry of a declined off-session payment obeys, as data, and the
 * pure decisions built from them (docs/recovery.md has the figures and their sources).
 *
 * - No retry after a hard decline: a Visa category 1 response code, a Mastercard Merchant
 *   Advice Code 03 or 21, or `authentication_required` (only the customer can answer it).
 * - A wait of at least what Mastercard's advice codes 24–30 ask.
 * - Per card and tenant (every saved copy of the card, across every PSP and every payment of it): at most 10 attempts in
 *   24 hours and 15 in 30 days. A tenant may set lower limits, never higher.
 * - A schedule of at most 8 retries within 14 days of the first decline, spread: never two
 *   retries closer than the schedule's smallest gap.
 *
 * Every duration is multiplied by the time scale (RECOVERY_TIME_SCALE; tests use 0.000277 so an
 * hour is a second). Imported by workflow code: no Node, no I/O, no clock (times are given).
 */

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Visa's category 1 response codes: the issuer will never approve (lost, stolen, closed account, invalid transaction…). */
export const VISA_NEVER_RETRY_CODES: readonly string[] = ['04', '07', '12', '15', '41', '43', '46', '57', 'R0', 'R1', 'R3'];

/** Mastercard Merchant Advice Codes after which no retry is allowed: 03 (do not try again), 21 (payment cancellation). */
export const MASTERCARD_NEVER_RETRY_ADVICE: readonly string[] = ['03', '21'];

/** Mastercard Merchant Advice Codes 24–30: retry no sooner than this (hours). */
export const MASTERCARD_ADVICE_WAIT_HOURS: Readonly<Record<string, number>> = {
  '24': 1,
  '25': 24,
  '26': 2 * 24,
  '27': 4 * 24,
  '28': 6 * 24,
  '29': 8 * 24,
  '30': 10 * 24,
};

/**
 * Decline codes a PSP gives that say the card will never be approved or only its holder can help,
 * whatever the scheme's own signal: the policy's own hard list (stricter than the networks').
 */
export const HARD_DECLINE_CODES: readonly string[] = [
  'authentication_required',
  'lost_card',
  'stolen_card',
  'pickup_card',
  'invalid_account',
  'card_not_supported',
  'restricted_card',
  'fraudulent',
  'revocation_of_authorization',
  'do_not_try_again',
];

/** The network's limits per card and merchant: Mastercard's 10 in 24 hours, Visa's 15 in 30 days (the strictest of each). */
export const NETWORK_CARD_LIMITS = { perDay: 10, perMonth: 15 } as const;

/** The default schedule: retries at these hours after the first decline (8 in 14 days, spread). */
export const DEFAULT_SCHEDULE_HOURS: readonly number[] = [12, 24, 2 * 24, 4 * 24, 6 * 24, 8 * 24, 11 * 24, 14 * 24];

/** The most retries a schedule may hold, and the span they must fit in after the first decline. */
export const SCHEDULE_LIMITS = { maxRetries: 8, spanHours: 14 * 24, minGapHours: 1 } as const;

/** The recovery window a payment may ask for (`recovery.window_days`). */
export const RECOVERY_WINDOW_DAYS = { min: 1, max: 60 } as const;

/** A decline as the PSP reports it: its code, and the scheme's signal when the PSP gives one. */
export interface DeclineSignal {
  /** The PSP's decline code (insufficient_funds, stolen_card, authentication_required…). */
  code: string;
  /** The scheme's own response code (Visa `51`, `43`…), when known. */
  networkCode?: string | null;
  /** Visa's decline category (1: never; 2: not now; 3: fix the data; 4: generic), when known. */
  category?: number | null;
  /** Mastercard's Merchant Advice Code (`03`, `21`, `24`…), when known. */
  adviceCode?: string | null;
}

/** Why a recovering payment stopped retrying. */
export type RecoveryStop = 'hard_decline' | 'authentication_required' | 'window_elapsed' | 'retry_limit';

/** What a decline allows: never again (and why), or again no sooner than `waitMs` after it. */
export type DeclineClass = { kind: 'hard'; because: 'hard_decline' | 'authentication_required' } | { kind: 'soft'; waitMs: number };

/** A tenant's own limits: each at most the network's (the API's schema refuses a higher one: api/schemas.ts UpdateTenantBody). */
export interface TenantRecoveryLimits {
  perDay?: number;
  perMonth?: number;
  maxRetries?: number;
}

/** The policy one payment's recovery follows: every duration already scaled. */
export interface RecoveryPolicy {
  perDay: number;
  perMonth: number;
  dayMs: number;
  monthMs: number;
  /** Each retry's offset from the first decline (ms), ascending; at most maxRetries. */
  scheduleMs: readonly number[];
  /** The smallest gap between two attempts of the payment (ms). */
  minGapMs: number;
  /** The time scale the durations were multiplied by (kept to scale advice waits). */
  scale: number;
}

/**
 * The policy for a time scale and a tenant's limits. A limit above the network's is clamped to
 * it (the API's schema refuses it first), so no input can raise a limit.
 */
export function recoveryPolicy(scale: number, tenant: TenantRecoveryLimits = {}): RecoveryPolicy {
  if (!(scale > 0) || !Number.isFinite(scale)) throw new RangeError(`the recovery time scale must be a positive number, not ${scale}`);
  const within = (asked: number | undefined, cap: number) => Math.max(1, Math.min(cap, Math.floor(asked ?? cap)));
  const maxRetries = within(tenant.maxRetries, SCHEDULE_LIMITS.maxRetries);
  return {
    perDay: within(tenant.perDay, NETWORK_CARD_LIMITS.perDay),
    perMonth: within(tenant.perMonth, NETWORK_CARD_LIMITS.perMonth),
    dayMs: scaled(DAY_MS, scale),
    monthMs: scaled(30 * DAY_MS, scale),
    scheduleMs: DEFAULT_SCHEDULE_HOURS.slice(0, maxRetries).map((hours) => scaled(hours * HOUR_MS, scale)),
    minGapMs: scaled(SCHEDULE_LIMITS.minGapHours * HOUR_MS, scale),
    scale,
  };
}

/** A duration times the scale, in whole milliseconds (at least 1): times compare exactly, on replay too. */
export function scaled(ms: number, scale: number): number {
  return Math.max(1, Math.round(ms * scale));
}

/** The span (ms) every retry of a payment must fit in after its first decline, scaled. */
export function scheduleSpanMs(policy: Pick<RecoveryPolicy, 'scale'>): number {
  return scaled(SCHEDULE_LIMITS.spanHours * HOUR_MS, policy.scale);
}

/** The recovery window (ms) a payment's `window_days` gives, scaled. */
export function recoveryWindowMs(windowDays: number, scale: number): number {
  return scaled(windowDays * DAY_MS, scale);
}

/** Hard (never retried) or soft (retried after the wait its advice asks, scaled), from the rules above. */
export function classifyDecline(decline: DeclineSignal, scale: number): DeclineClass {
  if (decline.code === 'authentication_required') return { kind: 'hard', because: 'authentication_required' };
  if (HARD_DECLINE_CODES.includes(decline.code)) return { kind: 'hard', because: 'hard_decline' };
  if (decline.category === 1) return { kind: 'hard', because: 'hard_decline' };
  if (decline.networkCode != null && VISA_NEVER_RETRY_CODES.includes(decline.networkCode)) return { kind: 'hard', because: 'hard_decline' };
  const advice = decline.adviceCode ?? null;
  if (advice !== null && MASTERCARD_NEVER_RETRY_ADVICE.includes(advice)) return { kind: 'hard', because: 'hard_decline' };
  const hours = advice !== null && Object.hasOwn(MASTERCARD_ADVICE_WAIT_HOURS, advice) ? MASTERCARD_ADVICE_WAIT_HOURS[advice]! : 0;
  return { kind: 'soft', waitMs: hours === 0 ? 0 : scaled(hours * HOUR_MS, scale) };
}

/**
 * The earliest time at or after `from` when one more attempt of the card fits both of its windows,
 * given the times of its attempts (any order, every payment and PSP). The windows are half-open:
 * an attempt at t counts in [t, t + window).
 */
export function cardBudgetFreeAt(attempts: readonly number[], from: number, policy: Pick<RecoveryPolicy, 'perDay' | 'perMonth' | 'dayMs' | 'monthMs'>): number {
  const sorted = [...attempts].sort((a, b) => a - b);
  let at = from;
  // Each pass can only move `at` later, past one attempt's window: it ends.
  for (;;) {
    const next = Math.max(freeAt(sorted, at, policy.perDay, policy.dayMs), freeAt(sorted, at, policy.perMonth, policy.monthMs));
    if (next === at) return at;
    at = next;
  }
}

/** The earliest time ≥ at with fewer than `limit` attempts in (t − window, t]. */
function freeAt(sorted: readonly number[], at: number, limit: number, windowMs: number): number {
  const inWindow = sorted.filter((t) => t > at - windowMs && t <= at);
  if (inWindow.length < limit) return at;
  // The oldest attempts must leave the window until fewer than `limit` remain.
  return inWindow[inWindow.length - limit]! + windowMs;
}

/** Whether one more attempt of the card at `at` keeps it within its windows. */
export function cardBudgetAllows(attempts: readonly number[], at: number, policy: Pick<RecoveryPolicy, 'perDay' | 'perMonth' | 'dayMs' | 'monthMs'>): boolean {
  return cardBudgetFreeAt(attempts, at, policy) === at;
}

/** Where one payment's recovery stands: what the next decision needs. */
export interface RecoveryState {
  /** When the first attempt was declined (the schedule's origin). */
  firstDeclineAt: number;
  /** The window's end: no attempt at or after it. */
  windowEndsAt: number;
  /** Retries made so far (the first attempt is not one). */
  retries: number;
  /** When the last attempt was declined, and how. */
  lastDeclineAt: number;
  lastDecline: DeclineSignal;
}

/** The next step of a recovery: stop (and why), or retry no sooner than `at` (the card's budget asked then). */
export type RecoveryNext = { kind: 'stop'; because: RecoveryStop } | { kind: 'retry'; at: number };

/**
 * The earliest the next retry may go, by the decline, the schedule and the spread; the card's
 * budget is asked at that time (reserveAttempt in db/recovery.ts), and if it is full the retry
 * waits for cardBudgetFreeAt, still within the window.
 */
export function nextRetry(state: RecoveryState, policy: RecoveryPolicy): RecoveryNext {
  const decline = classifyDecline(state.lastDecline, policy.scale);
  if (decline.kind === 'hard') return { kind: 'stop', because: decline.because };
  if (state.retries >= policy.scheduleMs.length) return { kind: 'stop', because: 'retry_limit' };
  const at = Math.max(state.firstDeclineAt + policy.scheduleMs[state.retries]!, state.lastDeclineAt + decline.waitMs, state.lastDeclineAt + policy.minGapMs);
  if (at >= state.windowEndsAt) return { kind: 'stop', because: 'window_elapsed' };
  // An advice wait may push a late retry past the schedule's span: the schedule ends instead.
  if (at > state.firstDeclineAt + scheduleSpanMs(policy)) return { kind: 'stop', because: 'retry_limit' };
  return { kind: 'retry', at };
}

/**
 * The retry time once the card's budget is known: `at` itself, the time the budget frees a slot,
 * or a stop when that is past the window's end or past the schedule's span (a retry is never
 * pushed beyond the 14 days).
 */
export function retryWithinBudget(at: number, state: Pick<RecoveryState, 'windowEndsAt' | 'firstDeclineAt'>, cardAttempts: readonly number[], policy: RecoveryPolicy): RecoveryNext {
  return retryAt(cardBudgetFreeAt(cardAttempts, at, policy), state, policy);
}

/** A retry at the time the budget frees a slot, or the stop when that is past the window or the schedule's span. */
function retryAt(free: number, state: Pick<RecoveryState, 'windowEndsAt' | 'firstDeclineAt'>, policy: RecoveryPolicy): RecoveryNext {
  if (free >= state.windowEndsAt) return { kind: 'stop', because: 'window_elapsed' };
  if (free > state.firstDeclineAt + scheduleSpanMs(policy)) return { kind: 'stop', because: 'retry_limit' };
  return { kind: 'retry', at: free };
}

// ── One payment's recovery as a value the payment's run keeps (and GET shows) ─────────────

/** Where one payment's recovery stands: the run's state, serializable, changed only by the functions below. */
export interface RecoveryProgress extends RecoveryState {
  /** Every attempt so far, the first included (the API's `recovery.attempts`). */
  attempts: number;
  /** When the next attempt may go; null once stopped or paid. */
  nextAttemptAt: number | null;
  stoppedBecause: RecoveryStop | null;
}

/** The API's `recovery` object (snake_case, times as ISO 8601). */
export interface RecoveryView {
  attempts: number;
  next_attempt_at: string | null;
  window_ends_at: string;
  last_decline: { code: string; network_decline_code: string | null; decline_category: number | null; network_advice_code: string | null };
  stopped_because: RecoveryStop | null;
}

/** After the first attempt's decline: a recovery that stops at once (a hard decline) or waits for its first retry. */
export function beginRecovery(decline: DeclineSignal, at: number, windowMs: number, policy: RecoveryPolicy): RecoveryProgress {
  const state: RecoveryState = { firstDeclineAt: at, windowEndsAt: at + windowMs, retries: 0, lastDeclineAt: at, lastDecline: decline };
  return scheduled({ ...state, attempts: 1, nextAttemptAt: null, stoppedBecause: null }, policy);
}

/** A retry was declined: the next one, or the stop. */
export function afterRetryDeclined(progress: RecoveryProgress, decline: DeclineSignal, at: number, policy: RecoveryPolicy): RecoveryProgress {
  return scheduled({ ...progress, attempts: progress.attempts + 1, retries: progress.retries + 1, lastDeclineAt: at, lastDecline: decline }, policy);
}

/** The card's budget was full at the planned time: the retry waits for the slot it frees, or stops. */
export function afterBudgetFull(progress: RecoveryProgress, cardAttempts: readonly number[], at: number, policy: RecoveryPolicy): RecoveryProgress {
  return afterBudgetFullAt(progress, cardBudgetFreeAt(cardAttempts, at, policy), policy);
}

/** As afterBudgetFull, when the budget's owner (db/recovery.ts) said when its next slot frees. */
export function afterBudgetFullAt(progress: RecoveryProgress, freeAt: number, policy: RecoveryPolicy): RecoveryProgress {
  const next = retryAt(freeAt, progress, policy);
  return next.kind === 'stop' ? { ...progress, nextAttemptAt: null, stoppedBecause: next.because } : { ...progress, nextAttemptAt: next.at };
}

/**
 * The stop that holds at `now` for an attempt about to be made: the window has ended
 * (`window_elapsed`), or the schedule's span is past (`retry_limit`); null when it may go. A
 * retry's time is planned before its timer (nextRetry), but the attempt is made in a later
 * workflow task: one whose timer fired while no worker was up runs after it, maybe past the
 * window. So the task that makes the attempt asks this again, at its own workflow time.
 */
export function stopAt(progress: Pick<RecoveryState, 'windowEndsAt' | 'firstDeclineAt'>, now: number, policy: RecoveryPolicy): RecoveryStop | null {
  const next = retryAt(now, progress, policy);
  return next.kind === 'stop' ? next.because : null;
}

/**
 * The first instant at which stopAt stops every attempt: the window's end, or just past the
 * schedule's span. The step that makes a retry is given it: an attempt whose step starts at or
 * after it (its task scheduled in time, its worker gone before it ran) sends nothing.
 */
export function attemptsEndAt(progress: Pick<RecoveryState, 'windowEndsAt' | 'firstDeclineAt'>, policy: RecoveryPolicy): number {
  return Math.min(progress.windowEndsAt, progress.firstDeclineAt + scheduleSpanMs(policy) + 1);
}

/** The recovery stopped before an attempt it had planned (stopAt): nothing more is planned. */
export function stoppedBefore(progress: RecoveryProgress, because: RecoveryStop): RecoveryProgress {
  return { ...progress, nextAttemptAt: null, stoppedBecause: because };
}

/** The payment succeeded (or was canceled): nothing more is planned. */
export function recoveryEnded(progress: RecoveryProgress, attempted: boolean): RecoveryProgress {
  return { ...progress, attempts: progress.attempts + (attempted ? 1 : 0), retries: progress.retries + (attempted ? 1 : 0), nextAttemptAt: null };
}

function scheduled(progress: RecoveryProgress, policy: RecoveryPolicy): RecoveryProgress {
  const next = nextRetry(progress, policy);
  return next.kind === 'stop' ? { ...progress, nextAttemptAt: null, stoppedBecause: next.because } : { ...progress, nextAttemptAt: next.at, stoppedBecause: null };
}

export function recoveryView(progress: RecoveryProgress): RecoveryView {
  const decline = progress.lastDecline;
  return {
    attempts: progress.attempts,
    next_attempt_at: progress.nextAttemptAt === null ? null : new Date(progress.nextAttemptAt).toISOString(),
    window_ends_at: new Date(progress.windowEndsAt).toISOString(),
    last_decline: { code: decline.code, network_decline_code: decline.networkCode ?? null, decline_category: decline.category ?? null, network_advice_code: decline.adviceCode ?? null },
    stopped_because: progress.stoppedBecause,
  };
}

// ── A saved card after a hard decline of an off-session charge ──────────────────────────

/** A declined charge's decline as the rules read it: its code and the scheme's signal, when the PSP gave one. */
export function declineOfCharge(charge: { declineCode: string | null; declineSignal?: { networkCode: string; category: number | null; adviceCode: string | null } | null }): DeclineSignal {
  const signal = charge.declineSignal;
  return { code: charge.declineCode ?? 'card_declined', networkCode: signal?.networkCode ?? null, category: signal?.category ?? null, adviceCode: signal?.adviceCode ?? null };
}

/** Whether a decline is hard (classifyDecline): the card is then not charged off-session again until it succeeds on-session. */
export function isHardDecline(decline: DeclineSignal): boolean {
  return classifyDecline(decline, 1).kind === 'hard';
}

/**
 * Why a saved card is not charged off-session, and what the merchant can do: its last
 * off-session charge got a hard decline. `authenticate_on_session`: the issuer asked for the
 * customer (`authentication_required`); `new_card`: the issuer will never approve it.
 */
export interface OffSessionUnusable {
  decline_code: string;
  action: 'authenticate_on_session' | 'new_card';
  message: string;
  since: string;
  payment: string | null;
}

/** The saved method's `off_session_unusable`, from its card's last hard decline (db/recovery.ts hardDeclineOf). */
export function offSessionUnusable(decline: { code: string; at: Date; paymentId: string | null }): OffSessionUnusable {
  const decided = classifyDecline({ code: decline.code }, 1);
  const authenticate = decided.kind === 'hard' && decided.because === 'authentication_required';
  const since = decline.at.toISOString();
  return {
    decline_code: decline.code,
    action: authenticate ? 'authenticate_on_session' : 'new_card',
    message: authenticate
      ? `The card's issuer asked for the customer's authentication on ${since} (${decline.code}): the card is not charged off-session until the customer pays with it on-session. Bring the customer back to pay on-session.`
      : `The card's issuer declined it for good on ${since} (${decline.code}): the card is not charged off-session again. Ask the customer for another card (a payment with this one on-session that succeeds makes it chargeable off-session again).`,
    since,
    payment: decline.paymentId,
  };
}

/**
 * How an off-session payment of a card held by a hard decline ends, with nothing charged: as
 * that decline would end it (`authentication_required` is `failed`, any other hard decline
 * `declined` with its code), and the message of `off_session_unusable`.
 */
export interface OffSessionRefusal {
  status: 'failed' | 'declined';
  code: string;
  message: string;
}

export function offSessionRefusal(decline: { code: string; at: Date; paymentId: string | null }): OffSessionRefusal {
  const unusable = offSessionUnusable(decline);
  return { status: unusable.action === 'authenticate_on_session' ? 'failed' : 'declined', code: decline.code, message: `No charge was made. ${unusable.message}` };
}
