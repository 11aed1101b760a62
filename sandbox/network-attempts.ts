import type { Sql } from '../db/connect';

/**
 * The card network's count of off-session attempts per card account, shared by every sandbox on
 * the network (the network database), and the issuer's answers of the cards whose behaviour lives
 * in the network: the same card answers the same at sandbox-a and sandbox-b, and a retry that
 * breaks a scheme rule is charged an `excessive_retry` fee by whichever sandbox made it.
 *
 * The figures are the network's own (docs/recovery.md lists their sources): the orchestrator's
 * policy (domain/recovery.ts) is checked against them, never the other way round.
 */

/** The cards whose off-session answers the network decides. */
export type NetworkScript = 'recoverAfter2' | 'alwaysInsufficientFunds' | 'stolen' | 'adviceRetryLater' | 'adviceNeverRetry';

/** A decline with the scheme's signal, as the issuer gives it. */
export interface NetworkDecline {
  code: string;
  message: string;
  /** The scheme's response code (Visa `51`, `43`…). */
  networkCode: string;
  /** Visa's decline category, when the card is a Visa. */
  category: number | null;
  /** Mastercard's Merchant Advice Code, when the issuer gives one. */
  adviceCode: string | null;
}

/** The network's answer to one attempt: the issuer's decline (null: approved), and the rule a retry broke. */
export interface NetworkAnswer {
  decline: NetworkDecline | null;
  excessive: string | null;
}

/** The fee of one excessive retry, in minor units (Mastercard's and Visa's are cents to a dollar or so). */
export const EXCESSIVE_RETRY_FEE_MINOR = 50;

const HOUR_MS = 3_600_000;
const VISA_NEVER = ['04', '07', '12', '15', '41', '43', '46', '57', 'R0', 'R1', 'R3'];
const ADVICE_NEVER = ['03', '21'];
const ADVICE_WAIT_HOURS: Record<string, number> = { '24': 1, '25': 24, '26': 48, '27': 96, '28': 144, '29': 192, '30': 240 };
const PER_DAY = 10;
const PER_MONTH = 15;

const insufficientFunds: NetworkDecline = { code: 'insufficient_funds', message: 'Your card has insufficient funds.', networkCode: '51', category: 2, adviceCode: null };

interface AttemptRow {
  attempted_at: Date;
  declined: boolean;
  decline_code: string | null;
  network_decline_code: string | null;
  decline_category: number | null;
  network_advice_code: string | null;
  excessive: string | null;
}

/** The issuer's answer for a scripted card, given the account's earlier attempts (oldest first) and the time. */
function scriptedAnswer(script: NetworkScript, earlier: readonly AttemptRow[], now: number, scale: number): NetworkDecline | null {
  switch (script) {
    case 'recoverAfter2':
      return earlier.length < 2 ? insufficientFunds : null;
    case 'alwaysInsufficientFunds':
      return insufficientFunds;
    case 'stolen':
      return { code: 'stolen_card', message: 'The card was reported stolen.', networkCode: '43', category: 1, adviceCode: null };
    case 'adviceNeverRetry':
      return { code: 'do_not_honor', message: 'The issuer declined the card and asks that it is not tried again.', networkCode: '05', category: null, adviceCode: '03' };
    case 'adviceRetryLater': {
      const last = earlier[earlier.length - 1];
      // Declines until an attempt comes at least the hour its advice asked after the last decline.
      if (last?.declined && now - last.attempted_at.getTime() >= Math.round(HOUR_MS * scale)) return null;
      return { code: 'try_again_later', message: 'The issuer cannot approve now; retry after an hour.', networkCode: '05', category: null, adviceCode: '24' };
    }
  }
}

/** The rule a retry at `now` breaks, given the account's earlier attempts (oldest first); null for a first attempt or a retry within every rule. */
function brokenRule(earlier: readonly AttemptRow[], now: number, scale: number): string | null {
  const last = earlier[earlier.length - 1];
  if (!last?.declined) return null;
  if (last.decline_category === 1 || VISA_NEVER.includes(last.network_decline_code ?? '') || ADVICE_NEVER.includes(last.network_advice_code ?? '') || last.decline_code === 'authentication_required') {
    return 'retry_after_hard_decline';
  }
  const waitHours = ADVICE_WAIT_HOURS[last.network_advice_code ?? ''];
  if (waitHours !== undefined && now - last.attempted_at.getTime() < Math.round(waitHours * HOUR_MS * scale)) return 'retry_before_advice_wait';
  const within = (ms: number) => earlier.filter((a) => a.attempted_at.getTime() > now - Math.round(ms * scale)).length;
  if (within(24 * HOUR_MS) >= PER_DAY) return 'daily_limit';
  if (within(30 * 24 * HOUR_MS) >= PER_MONTH) return 'monthly_limit';
  return null;
}

export interface NetworkAttemptInput {
  /** The sandbox that makes the attempt (its URL): with the key, one attempt however often the request comes. */
  acquirer: string;
  idempotencyKey: string;
  account: string;
  /** The card's script, or null: the sandbox's own answer (`decline`) is recorded as the issuer's. */
  script: NetworkScript | null;
  decline: NetworkDecline | null;
}

/**
 * Records one off-session attempt of a saved card and answers it. One transaction under a lock
 * of the account, so attempts of one card at two sandboxes are counted one after the other; a
 * request repeated under its key gets the answer it got the first time and counts once.
 */
export async function networkAttempt(sql: Sql, scale: number, input: NetworkAttemptInput): Promise<NetworkAnswer> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('card-network:' || ${input.account}))`;
    const [stored] = await tx<AttemptRow[]>`
      SELECT * FROM sandbox.network_attempts WHERE acquirer = ${input.acquirer} AND idempotency_key = ${input.idempotencyKey}`;
    if (stored) return answerOf(stored);
    const [clock] = await tx<{ now: Date }[]>`SELECT clock_timestamp() AS now`;
    const now = clock!.now;
    // Enough history for every rule: the 30-day window, and the last attempt however old.
    const earlier = await tx<AttemptRow[]>`
      SELECT * FROM (
        SELECT * FROM sandbox.network_attempts WHERE account = ${input.account}
        ORDER BY attempted_at DESC LIMIT ${PER_MONTH + 1}
      ) recent ORDER BY attempted_at`;
    const at = now.getTime();
    const decline = input.script ? scriptedAnswer(input.script, earlier, at, scale) : input.decline;
    const excessive = brokenRule(earlier, at, scale);
    await tx`
      INSERT INTO sandbox.network_attempts (acquirer, idempotency_key, account, attempted_at, declined, decline_code, network_decline_code, decline_category, network_advice_code, excessive)
      VALUES (${input.acquirer}, ${input.idempotencyKey}, ${input.account}, ${now}, ${decline !== null}, ${decline?.code ?? null},
              ${decline?.networkCode ?? null}, ${decline?.category ?? null}, ${decline?.adviceCode ?? null}, ${excessive})`;
    return { decline, excessive };
  });
}

function answerOf(row: AttemptRow): NetworkAnswer {
  return {
    decline: row.declined
      ? { code: row.decline_code ?? 'card_declined', message: 'Your card was declined.', networkCode: row.network_decline_code ?? '05', category: row.decline_category, adviceCode: row.network_advice_code }
      : null,
    excessive: row.excessive,
  };
}
