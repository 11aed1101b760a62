import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MASTERCARD_ADVICE_WAIT_HOURS,
  afterBudgetFull,
  afterRetryDeclined,
  beginRecovery,
  cardBudgetAllows,
  recoveryEnded,
  recoveryView,
  type RecoveryProgress,
  NETWORK_CARD_LIMITS,
  SCHEDULE_LIMITS,
  cardBudgetFreeAt,
  classifyDecline,
  recoveryPolicy,
  recoveryWindowMs,
  attemptsEndAt,
  stopAt,
  stoppedBefore,
  type DeclineSignal,
  type RecoveryPolicy,
  type TenantRecoveryLimits,
} from '../../domain/recovery';

const HOUR = 3_600_000;

describe('a decline is hard or soft by the scheme’s signal', () => {
  it('never retries Visa category 1, Mastercard advice 03 and 21, a lost or stolen card, or authentication_required', () => {
    expect(classifyDecline({ code: 'card_declined', networkCode: '43', category: 1 }, 1)).toEqual({ kind: 'hard', because: 'hard_decline' });
    expect(classifyDecline({ code: 'card_declined', networkCode: '46' }, 1)).toEqual({ kind: 'hard', because: 'hard_decline' });
    expect(classifyDecline({ code: 'do_not_honor', adviceCode: '03' }, 1)).toEqual({ kind: 'hard', because: 'hard_decline' });
    expect(classifyDecline({ code: 'do_not_honor', adviceCode: '21' }, 1)).toEqual({ kind: 'hard', because: 'hard_decline' });
    expect(classifyDecline({ code: 'stolen_card' }, 1)).toEqual({ kind: 'hard', because: 'hard_decline' });
    expect(classifyDecline({ code: 'authentication_required' }, 1)).toEqual({ kind: 'hard', because: 'authentication_required' });
  });

  it('waits what advice codes 24–30 ask (1 hour to 10 days), scaled', () => {
    expect(classifyDecline({ code: 'insufficient_funds', networkCode: '51', category: 2 }, 1)).toEqual({ kind: 'soft', waitMs: 0 });
    expect(classifyDecline({ code: 'try_again_later', adviceCode: '24' }, 1)).toEqual({ kind: 'soft', waitMs: HOUR });
    expect(classifyDecline({ code: 'try_again_later', adviceCode: '30' }, 1)).toEqual({ kind: 'soft', waitMs: 240 * HOUR });
    // An hour is a second at the tests' scale.
    expect(classifyDecline({ code: 'try_again_later', adviceCode: '24' }, 0.000277)).toEqual({ kind: 'soft', waitMs: 997 });
  });
});

describe('a tenant may lower the limits, never raise them', () => {
  it('clamps a limit above the network’s that slips past the API (which refuses it: test/integration/edge-bounds.test.ts)', () => {
    const policy = recoveryPolicy(1, { perDay: 99, perMonth: 99, maxRetries: 99 });
    expect([policy.perDay, policy.perMonth, policy.scheduleMs.length]).toEqual([NETWORK_CARD_LIMITS.perDay, NETWORK_CARD_LIMITS.perMonth, SCHEDULE_LIMITS.maxRetries]);
    expect(recoveryPolicy(1, { perDay: 3, maxRetries: 2 })).toMatchObject({ perDay: 3, perMonth: 15, scheduleMs: [12 * HOUR, 24 * HOUR] });
  });

  it('the default schedule is at most 8 retries within 14 days, no two closer than an hour', () => {
    const { scheduleMs } = recoveryPolicy(1);
    expect(scheduleMs.length).toBeLessThanOrEqual(8);
    expect(Math.max(...scheduleMs)).toBeLessThanOrEqual(14 * 24 * HOUR);
    scheduleMs.slice(1).forEach((at, i) => expect(at - scheduleMs[i]!).toBeGreaterThanOrEqual(HOUR));
  });
});

describe('the card’s budget', () => {
  it('frees a slot when the oldest attempt leaves the 24-hour window', () => {
    const policy = recoveryPolicy(1);
    const attempts = Array.from({ length: 10 }, (_, i) => i * 1000);
    expect(cardBudgetFreeAt(attempts, 10_000, policy)).toBe(24 * HOUR);
    expect(cardBudgetFreeAt(attempts.slice(1), 10_000, policy)).toBe(10_000);
  });
});

// ── The property: any decline sequences, on one card shared by several payments, break no rule ──

/** One payment's outcomes, attempt after attempt (a success ends it), and when it starts. */
interface PaymentScript {
  startsAt: number;
  windowDays: number;
  outcomes: Array<DeclineSignal | 'success'>;
}

interface Attempt {
  payment: number;
  at: number;
  outcome: DeclineSignal | 'success';
}

const declines: fc.Arbitrary<DeclineSignal> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<DeclineSignal>({ code: 'insufficient_funds', networkCode: '51', category: 2 }) },
  { weight: 2, arbitrary: fc.constantFrom(...Object.keys(MASTERCARD_ADVICE_WAIT_HOURS)).map<DeclineSignal>((adviceCode) => ({ code: 'try_again_later', adviceCode })) },
  { weight: 1, arbitrary: fc.constantFrom('01', '02', '03', '21', '40').map<DeclineSignal>((adviceCode) => ({ code: 'do_not_honor', adviceCode })) },
  { weight: 1, arbitrary: fc.constantFrom('04', '05', '43', '46', '51', '54', '91', 'R0').map<DeclineSignal>((networkCode) => ({ code: 'card_declined', networkCode, category: ['04', '43', '46', 'R0'].includes(networkCode) ? 1 : 2 })) },
  { weight: 1, arbitrary: fc.constantFrom<DeclineSignal>({ code: 'stolen_card' }, { code: 'authentication_required' }, { code: 'issuer_unavailable' }, { code: 'processing_error' }) },
);

const scripts: fc.Arbitrary<PaymentScript[]> = fc.array(
  fc.record({
    startsAt: fc.integer({ min: 0, max: 40 * 24 }).map((hours) => hours * HOUR),
    windowDays: fc.integer({ min: 1, max: 60 }),
    outcomes: fc.array(fc.oneof({ weight: 12, arbitrary: declines }, { weight: 1, arbitrary: fc.constant<'success'>('success') }), { minLength: 1, maxLength: 20 }),
  }),
  { minLength: 1, maxLength: 4 },
);

const tenants: fc.Arbitrary<TenantRecoveryLimits> = fc.record(
  { perDay: fc.integer({ min: 1, max: 10 }), perMonth: fc.integer({ min: 1, max: 15 }), maxRetries: fc.integer({ min: 1, max: 8 }) },
  { requiredKeys: [] },
);

/**
 * Runs the payments of one card through the policy as the payment's run will: a payment's first
 * attempt when it starts; after a soft decline a timer to the progress's next attempt time, then
 * the card's budget asked at that time (one owner, so one payment at a time: the events are in
 * time order), waiting for a free slot when it is full. The first attempt asks the budget too.
 */
function simulate(payments: PaymentScript[], policy: RecoveryPolicy): Attempt[] {
  const attempts: Attempt[] = [];
  const state = payments.map((p) => ({ due: p.startsAt as number | null, next: 0, progress: null as RecoveryProgress | null }));
  for (let steps = 0; steps < 10_000; steps++) {
    const due = state.map((s, i) => ({ s, i })).filter(({ s }) => s.due !== null).sort((a, b) => a.s.due! - b.s.due! || a.i - b.i)[0];
    if (!due) return attempts;
    const { s, i } = due;
    const at = s.due!;
    const cardAttempts = attempts.map((a) => a.at);
    if (!cardBudgetAllows(cardAttempts, at, policy)) {
      if (s.progress === null) {
        s.due = cardBudgetFreeAt(cardAttempts, at, policy); // the first attempt waits for a slot: it breaks no rule either
      } else {
        s.progress = afterBudgetFull(s.progress, cardAttempts, at, policy);
        s.due = s.progress.nextAttemptAt;
      }
      continue;
    }
    const outcome = payments[i]!.outcomes[Math.min(s.next, payments[i]!.outcomes.length - 1)]!;
    s.next++;
    attempts.push({ payment: i, at, outcome });
    if (outcome === 'success') {
      if (s.progress) s.progress = recoveryEnded(s.progress, true);
      s.due = null;
      continue;
    }
    s.progress = s.progress === null ? beginRecovery(outcome, at, recoveryWindowMs(payments[i]!.windowDays, policy.scale), policy) : afterRetryDeclined(s.progress, outcome, at, policy);
    s.due = s.progress.nextAttemptAt;
  }
  throw new Error('the simulation did not end');
}

/** Every rule breach in the attempts, checked from the rules' own figures (not the policy's functions). */
function breaches(payments: PaymentScript[], attempts: Attempt[], policy: RecoveryPolicy, tenant: TenantRecoveryLimits): string[] {
  const found: string[] = [];
  // The rules' figures at the run's time scale, in whole milliseconds.
  const hours = (n: number) => Math.max(1, Math.round(n * HOUR * policy.scale));
  const day = hours(24);
  const perDay = Math.min(10, tenant.perDay ?? 10);
  const perMonth = Math.min(15, tenant.perMonth ?? 15);
  for (const a of attempts) {
    const inDay = attempts.filter((b) => b.at > a.at - day && b.at <= a.at).length;
    const inMonth = attempts.filter((b) => b.at > a.at - hours(30 * 24) && b.at <= a.at).length;
    if (inDay > perDay) found.push(`${inDay} attempts in 24 h at ${a.at}`);
    if (inMonth > perMonth) found.push(`${inMonth} attempts in 30 days at ${a.at}`);
  }
  payments.forEach((payment, i) => {
    const own = attempts.filter((a) => a.payment === i);
    if (own.length === 0) return;
    const retries = own.slice(1);
    if (retries.length > Math.min(8, tenant.maxRetries ?? 8)) found.push(`payment ${i}: ${retries.length} retries`);
    const firstDecline = own[0]!.at;
    own.forEach((a, k) => {
      if (k === 0) return;
      const previous = own[k - 1]!;
      if (previous.outcome === 'success') found.push(`payment ${i}: an attempt after its success`);
      const decline = previous.outcome as DeclineSignal;
      const never = decline.category === 1 || ['04', '07', '12', '15', '41', '43', '46', '57', 'R0', 'R1', 'R3'].includes(decline.networkCode ?? '') || ['03', '21'].includes(decline.adviceCode ?? '') || ['authentication_required', 'stolen_card'].includes(decline.code);
      if (never) found.push(`payment ${i}: a retry after a hard decline (${JSON.stringify(decline)})`);
      const adviceHours = { '24': 1, '25': 24, '26': 48, '27': 96, '28': 144, '29': 192, '30': 240 }[decline.adviceCode ?? ''] ?? 0;
      if (adviceHours > 0 && a.at - previous.at < hours(adviceHours)) found.push(`payment ${i}: a retry ${a.at - previous.at} ms after advice ${decline.adviceCode}`);
      if (a.at - previous.at < hours(1)) found.push(`payment ${i}: two attempts ${a.at - previous.at} ms apart`);
      if (a.at - firstDecline > hours(14 * 24)) found.push(`payment ${i}: a retry ${a.at - firstDecline} ms after the first decline`);
      if (a.at - firstDecline >= hours(payment.windowDays * 24)) found.push(`payment ${i}: a retry after its ${payment.windowDays}-day window`);
    });
  });
  return found;
}

describe('the policy, over generated decline sequences on cards shared by several payments', () => {
  it('breaks no rule in 10 000 runs, at the real time scale and the tests’', () => {
    let attemptsSeen = 0;
    let retriesSeen = 0;
    fc.assert(
      fc.property(scripts, tenants, fc.constantFrom(1, 0.000277), (payments, tenant, scale) => {
        const policy = recoveryPolicy(scale, tenant);
        const attempts = simulate(payments, policy);
        attemptsSeen += attempts.length;
        retriesSeen += attempts.length - new Set(attempts.map((a) => a.payment)).size;
        expect(breaches(payments, attempts, policy, tenant)).toEqual([]);
      }),
      { numRuns: 10_000 },
    );
    // The property would hold vacuously if nothing were ever retried.
    expect(retriesSeen).toBeGreaterThan(10_000);
    expect(attemptsSeen).toBeGreaterThan(retriesSeen);
  });

  it('the checker finds breaches when the rules are ignored (a policy that retries hourly, without a budget)', () => {
    const policy = recoveryPolicy(1);
    const payments: PaymentScript[] = [{ startsAt: 0, windowDays: 30, outcomes: [{ code: 'insufficient_funds' }] }];
    const reckless: Attempt[] = Array.from({ length: 12 }, (_, k) => ({ payment: 0, at: k * HOUR, outcome: { code: 'insufficient_funds' } }));
    expect(breaches(payments, reckless, policy, {}).join('\n')).toMatch(/11 attempts in 24 h[\s\S]*11 retries/);
    const afterStolen: Attempt[] = [
      { payment: 0, at: 0, outcome: { code: 'stolen_card' } },
      { payment: 0, at: 2 * HOUR, outcome: { code: 'insufficient_funds' } },
    ];
    expect(breaches(payments, afterStolen, policy, {})).toEqual([expect.stringMatching(/after a hard decline/)]);
  });
});

describe('one payment’s recovery as the API shows it', () => {
  it('a soft decline plans the first retry 12 hours on; a hard one stops at once; the view names both', () => {
    const policy = recoveryPolicy(1);
    const soft = beginRecovery({ code: 'insufficient_funds', networkCode: '51', category: 2 }, 0, 7 * 24 * HOUR, policy);
    expect(recoveryView(soft)).toEqual({
      attempts: 1,
      next_attempt_at: new Date(12 * HOUR).toISOString(),
      window_ends_at: new Date(7 * 24 * HOUR).toISOString(),
      last_decline: { code: 'insufficient_funds', network_decline_code: '51', decline_category: 2, network_advice_code: null },
      stopped_because: null,
    });
    const retried = afterRetryDeclined(soft, { code: 'try_again_later', adviceCode: '26' }, 12 * HOUR, policy);
    // Advice 26 asks for 2 days: more than the schedule's next step (24 h).
    expect(retried).toMatchObject({ attempts: 2, retries: 1, nextAttemptAt: 60 * HOUR });
    expect(beginRecovery({ code: 'stolen_card' }, 0, 7 * 24 * HOUR, policy)).toMatchObject({ nextAttemptAt: null, stoppedBecause: 'hard_decline' });
    expect(beginRecovery({ code: 'authentication_required' }, 0, 7 * 24 * HOUR, policy)).toMatchObject({ stoppedBecause: 'authentication_required' });
    expect(beginRecovery({ code: 'insufficient_funds' }, 0, 6 * HOUR, policy)).toMatchObject({ stoppedBecause: 'window_elapsed' });
  });

  it('an attempt acted on late is stopped by the time it is made: at or after the window’s end, or past the 14 days', () => {
    const policy = recoveryPolicy(1);
    const progress = beginRecovery({ code: 'insufficient_funds' }, 0, 30 * 24 * HOUR, policy);
    expect(stopAt(progress, 12 * HOUR, policy)).toBeNull();
    // The schedule's span (14 days) ends before this 30-day window: an attempt after it is not made.
    expect(stopAt(progress, 14 * 24 * HOUR, policy)).toBeNull();
    expect(stopAt(progress, 14 * 24 * HOUR + 1, policy)).toBe('retry_limit');
    const short = beginRecovery({ code: 'insufficient_funds' }, 0, 24 * HOUR, policy);
    expect(stopAt(short, 24 * HOUR - 1, policy)).toBeNull();
    expect(stopAt(short, 24 * HOUR, policy)).toBe('window_elapsed');
    expect(recoveryView(stoppedBefore(short, 'window_elapsed'))).toMatchObject({ attempts: 1, next_attempt_at: null, stopped_because: 'window_elapsed' });
  });

  it('attemptsEndAt is the first instant stopAt stops: the window’s end, or just past the span, whichever is first', () => {
    const policy = recoveryPolicy(1);
    for (const windowMs of [24 * HOUR, 30 * 24 * HOUR]) {
      const progress = beginRecovery({ code: 'insufficient_funds' }, 0, windowMs, policy);
      const end = attemptsEndAt(progress, policy);
      expect(stopAt(progress, end - 1, policy)).toBeNull();
      expect(stopAt(progress, end, policy)).not.toBeNull();
    }
  });
});
