import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { ensureSiblingDatabase } from '../../db/migrate';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { fileDatabaseUrl } from '../helpers/database';
import { eventually } from '../helpers/eventually';

/**
 * The simulated card network the sandboxes share (docs/sandbox.md, docs/recovery.md): two
 * sandboxes on their own databases, one network (its count of attempts in the first's database).
 * Its recovery cards save on-session and answer off-session the same at either sandbox; it
 * counts a card's attempts across both; a retry that breaks a scheme rule is charged an
 * `excessive_retry` fee in the report of the sandbox that made it. An hour is a second here.
 */

const SCALE = 0.000277;
let a: RunningSandbox;
let b: RunningSandbox;
let networkSql: Sql;

beforeAll(async () => {
  const databaseUrl = await fileDatabaseUrl();
  a = await startSandbox({ databaseUrl, port: 0, networkTimeScale: SCALE });
  b = await startSandbox({ databaseUrl: await ensureSiblingDatabase(databaseUrl, 'network_b'), port: 0, networkDatabaseUrl: databaseUrl, networkTimeScale: SCALE });
  networkSql = createSql(databaseUrl, { max: 1 });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await networkSql?.end();
});

interface Charge {
  id: string;
  status: string;
  failure_code: string | null;
  saved_card: string | null;
  network_transaction_id: string | null;
  card: { brand: string; last4: string; exp_month: number; exp_year: number; fingerprint: string };
  outcome: { network_decline_code: string; decline_category: number | null; network_advice_code: string | null } | null;
}

async function charge(sandbox: RunningSandbox, body: Record<string, unknown>, key = `key_${randomBytes(8).toString('hex')}`): Promise<{ status: number; charge: Charge }> {
  const response = await fetch(`${sandbox.url}/v1/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount_minor: 1200, currency: 'EUR', capture: true, reference: `pay_${key}`, ...body }),
  });
  const json = (await response.json()) as { error?: { charge: Charge } } & Charge;
  return { status: response.status, charge: json.error?.charge ?? json };
}

/** Saves the test card at sandbox a, on-session: every recovery card is approved then. */
async function saved(card: string): Promise<Charge> {
  const made = await charge(a, { payment_method: card, setup_future_usage: 'off_session' });
  expect(made.status, JSON.stringify(made.charge)).toBe(200);
  expect(made.charge.saved_card).toMatch(/^card_/);
  return made.charge;
}

/** An off-session charge of the saved card: by its token at sandbox a, by its network transaction id at sandbox b. */
const offSession = (at: 'a' | 'b', card: Charge, key?: string) =>
  at === 'a'
    ? charge(a, { payment_method: card.saved_card, off_session: true }, key)
    : charge(b, { network_transaction_id: card.network_transaction_id, card: { brand: card.card.brand, last4: card.card.last4, exp_month: card.card.exp_month, exp_year: card.card.exp_year }, off_session: true }, key);

async function excessiveFees(sandbox: RunningSandbox, chargeIds: string[]): Promise<Array<{ source: string; fee_minor: number; amount_minor: number }>> {
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  const response = await fetch(`${sandbox.url}/v1/reports/balance_transactions?from=${from}&to=${to}&limit=1000`);
  const report = (await response.json()) as { data: Array<{ type: string; source: string; fee_minor: number; amount_minor: number }> };
  return report.data.filter((t) => t.type === 'excessive_retry' && chargeIds.includes(t.source)).map(({ source, fee_minor, amount_minor }) => ({ source, fee_minor, amount_minor }));
}

/** Until the network's clock is `ms` past the card's last attempt (a wait on a condition, not a sleep). */
const networkClockPast = (ms: number) =>
  eventually(async () => {
    const [row] = await networkSql<{ past: boolean }[]>`
      SELECT clock_timestamp() >= max(attempted_at) + ${ms}::int * interval '1 millisecond' AS past FROM sandbox.network_attempts`;
    return row!.past;
  }, 10_000, 50, `${ms} ms past the last attempt`);

describe('the recovery cards answer from the network, the same at either sandbox', () => {
  it('pm_card_recoverAfter2: two declines (insufficient funds, Visa category 2) counted across both sandboxes, then paid; a repeated key counts once', async () => {
    const card = await saved('pm_card_recoverAfter2');
    const first = await offSession('a', card);
    expect(first).toMatchObject({ status: 402, charge: { status: 'declined', failure_code: 'insufficient_funds', outcome: { network_decline_code: '51', decline_category: 2, network_advice_code: null } } });
    const second = await offSession('b', card, 'key-recover-b');
    expect(second).toMatchObject({ status: 402, charge: { failure_code: 'insufficient_funds' } });
    // The same request again at b: the same answer, and no third attempt at the network.
    expect((await offSession('b', card, 'key-recover-b')).charge.id).toBe(second.charge.id);
    const third = await offSession('a', card);
    expect(third).toMatchObject({ status: 200, charge: { status: 'succeeded', outcome: null } });
    expect([...(await excessiveFees(a, [first.charge.id, third.charge.id])), ...(await excessiveFees(b, [second.charge.id]))]).toEqual([]);
  });

  it('pm_card_stolen: hard (Visa 43, category 1); the retry at the other sandbox is charged excessive_retry, 50 minor units, in its report', async () => {
    // A variant: another card that behaves as pm_card_stolen (the test below saves pm_card_stolen itself).
    const card = await saved('pm_card_stolen__retry');
    const first = await offSession('a', card);
    expect(first).toMatchObject({ status: 402, charge: { failure_code: 'stolen_card', outcome: { network_decline_code: '43', decline_category: 1 } } });
    const retry = await offSession('b', card);
    expect(retry.status).toBe(402);
    expect(await excessiveFees(b, [retry.charge.id])).toEqual([{ source: retry.charge.id, fee_minor: 50, amount_minor: 0 }]);
    expect(await excessiveFees(a, [first.charge.id])).toEqual([]);
  });

  it('pm_card_mastercard_adviceNeverRetry: advice 03; any retry is excessive', async () => {
    const card = await saved('pm_card_mastercard_adviceNeverRetry');
    expect(card.card.brand).toBe('mastercard');
    const first = await offSession('a', card);
    expect(first).toMatchObject({ status: 402, charge: { failure_code: 'do_not_honor', outcome: { network_advice_code: '03' } } });
    const retry = await offSession('a', card);
    expect(await excessiveFees(a, [retry.charge.id])).toHaveLength(1);
  });

  it('pm_card_mastercard_adviceRetryLater: advice 24; a retry within the hour is declined again and charged, one after it is paid and not charged', async () => {
    const card = await saved('pm_card_mastercard_adviceRetryLater');
    const first = await offSession('a', card);
    expect(first).toMatchObject({ status: 402, charge: { failure_code: 'try_again_later', outcome: { network_advice_code: '24' } } });
    const early = await offSession('b', card);
    expect(early).toMatchObject({ status: 402, charge: { outcome: { network_advice_code: '24' } } });
    expect(await excessiveFees(b, [early.charge.id])).toHaveLength(1);
    await networkClockPast(Math.round(3_600_000 * SCALE));
    const later = await offSession('a', card);
    expect(later).toMatchObject({ status: 200, charge: { status: 'succeeded' } });
    expect(await excessiveFees(a, [first.charge.id, later.charge.id])).toEqual([]);
  });

  it('pm_card_alwaysInsufficientFunds: the 11th attempt in 24 hours (across both sandboxes) is charged, the ten before are not', async () => {
    const card = await saved('pm_card_alwaysInsufficientFunds');
    const ids: Record<'a' | 'b', string[]> = { a: [], b: [] };
    for (let i = 0; i < 10; i++) {
      const at = i % 2 === 0 ? 'a' : 'b';
      const made = await offSession(at, card);
      expect(made).toMatchObject({ status: 402, charge: { failure_code: 'insufficient_funds' } });
      ids[at].push(made.charge.id);
    }
    expect([...(await excessiveFees(a, ids.a)), ...(await excessiveFees(b, ids.b))]).toEqual([]);
    const eleventh = await offSession('b', card);
    expect(await excessiveFees(b, [eleventh.charge.id])).toEqual([{ source: eleventh.charge.id, fee_minor: 50, amount_minor: 0 }]);
    const [row] = await networkSql<{ excessive: string }[]>`
      SELECT excessive FROM sandbox.network_attempts WHERE excessive IS NOT NULL ORDER BY attempted_at DESC LIMIT 1`;
    expect(row!.excessive).toBe('daily_limit');
  });
});

describe('the network counts per card, not per saved copy', () => {
  it('one card saved twice (two tokens, one fingerprint) is one account: a charge of the second copy after the first copy’s hard decline is a retry, charged excessive_retry', async () => {
    const [one, two] = [await saved('pm_card_stolen'), await saved('pm_card_stolen')];
    expect(two.saved_card).not.toBe(one.saved_card);
    expect(two.card.fingerprint).toBe(one.card.fingerprint);
    expect((await saved('pm_card_stolen__another')).card.fingerprint).not.toBe(one.card.fingerprint);
    const first = await offSession('a', one);
    expect(first).toMatchObject({ status: 402, charge: { failure_code: 'stolen_card' } });
    const copy = await offSession('a', two);
    expect(copy.status).toBe(402);
    expect(await excessiveFees(a, [copy.charge.id])).toEqual([{ source: copy.charge.id, fee_minor: 50, amount_minor: 0 }]);
    // By the network transaction id at the other sandbox: the same account again.
    const elsewhere = await offSession('b', two);
    expect(await excessiveFees(b, [elsewhere.charge.id])).toHaveLength(1);
  });
});
