import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSiblingDatabase } from '../../db/migrate';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { sandboxControls, type ApprovalRateSetting } from '../../testkit/sandbox';
import { fileDatabaseUrl } from '../helpers/database';

/**
 * How the sandbox's issuers answer its plain test cards (POST /_sandbox/approval_rates,
 * docs/sandbox.md "Approval rates"). The file owns its sandboxes: `a` and `b` share a database
 * (so a's rates must not reach b), `c` has a database of its own (so a key it is sent is new to it,
 * and only the draw can make it answer as `a` did).
 */

let a: RunningSandbox;
let b: RunningSandbox;
let c: RunningSandbox;

beforeAll(async () => {
  const databaseUrl = await fileDatabaseUrl();
  a = await startSandbox({ databaseUrl, port: 0 });
  b = await startSandbox({ databaseUrl, port: 0 });
  c = await startSandbox({ databaseUrl: await ensureSiblingDatabase(databaseUrl, 'approval_c'), port: 0 });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await c?.close();
});

interface Charge {
  id: string;
  status: string;
  failure_code: string | null;
  saved_card: string | null;
  card: { brand: string } | null;
}

const newKey = () => `approval_${randomBytes(8).toString('hex')}`;

/** A charge at the sandbox: its HTTP status, the charge (a declined one from the error's body) and the error's code. */
async function charge(sandbox: RunningSandbox, body: Record<string, unknown>, key = newKey()): Promise<{ status: number; charge: Charge; code: string | null }> {
  const response = await fetch(`${sandbox.url}/v1/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount_minor: 1000, currency: 'EUR', capture: true, reference: `pay_${key}`, ...body }),
  });
  const json = (await response.json()) as { error?: { type: string; code: string; charge: Charge } } & Charge;
  return { status: response.status, charge: json.error?.charge ?? json, code: json.error?.code ?? null };
}

async function setRates(sandbox: RunningSandbox, rates: ApprovalRateSetting[]): Promise<{ status: number; body: any }> {
  const response = await sandboxControls(sandbox.url).approvalRates(rates);
  return { status: response.status, body: await response.json() };
}

async function readRates(sandbox: RunningSandbox): Promise<ApprovalRateSetting[]> {
  const response = await sandboxControls(sandbox.url).approvalRates();
  expect(response.status).toBe(200);
  return ((await response.json()) as { rates: ApprovalRateSetting[] }).rates;
}

/** Whether the plain card's charge was approved (200 succeeded) or declined do_not_honor (402); anything else fails the test. */
async function approved(sandbox: RunningSandbox, body: Record<string, unknown>, key?: string): Promise<boolean> {
  const made = await charge(sandbox, body, key);
  if (made.status === 200) {
    expect(made.charge.status).toBe('succeeded');
    return true;
  }
  expect(made).toMatchObject({ status: 402, code: 'do_not_honor', charge: { status: 'declined', failure_code: 'do_not_honor' } });
  return false;
}

describe('the rates are the sandbox\'s own and read back', () => {
  it('reads back what was set, most specific first, currencies upper case', async () => {
    const set = await setRates(a, [
      { network: '*', currency: '*', rate: 0.5 },
      { network: 'visa', currency: 'eur', rate: 0.92 },
      { network: '*', currency: 'USD', rate: 0.25 },
      { network: 'mastercard', currency: '*', rate: 0.6 },
    ]);
    expect(set.status).toBe(200);
    const expected = [
      { network: 'visa', currency: 'EUR', rate: 0.92 },
      { network: 'mastercard', currency: '*', rate: 0.6 },
      { network: '*', currency: 'USD', rate: 0.25 },
      { network: '*', currency: '*', rate: 0.5 },
    ];
    expect(set.body).toEqual({ rates: expected });
    expect(await readRates(a)).toEqual(expected);
  });

  it('never reach another sandbox on the same database: b has none, and approves what a declines', async () => {
    expect((await setRates(a, [{ network: '*', currency: '*', rate: 0 }])).status).toBe(200);
    expect(await readRates(b)).toEqual([]);
    expect(await approved(a, { payment_method: 'pm_card_visa' })).toBe(false);
    expect(await approved(b, { payment_method: 'pm_card_visa' })).toBe(true);
  });

  it('{"rates":[]} clears them: every plain card is approved again', async () => {
    expect((await setRates(a, [{ network: '*', currency: '*', rate: 0 }])).status).toBe(200);
    const cleared = await setRates(a, []);
    expect(cleared).toEqual({ status: 200, body: { rates: [] } });
    expect(await readRates(a)).toEqual([]);
    expect(await approved(a, { payment_method: 'pm_card_visa' })).toBe(true);
    expect(await approved(a, { payment_method: 'pm_card_mastercard' })).toBe(true);
  });
});

describe('a plain card is approved with the rate of the most specific rule', () => {
  it('a rate of 0.0 declines do_not_honor and 1.0 approves, for either plain card', async () => {
    for (const [visa, mastercard] of [[0, 1], [1, 0]] as const) {
      await setRates(a, [
        { network: 'visa', currency: '*', rate: visa },
        { network: 'mastercard', currency: '*', rate: mastercard },
      ]);
      for (let i = 0; i < 5; i++) {
        expect(await approved(a, { payment_method: 'pm_card_visa' })).toBe(visa === 1);
        expect(await approved(a, { payment_method: 'pm_card_mastercard' })).toBe(mastercard === 1);
      }
    }
  });

  it('network and currency beat the network alone, which beats the currency alone, which beats neither', async () => {
    await setRates(a, [
      { network: 'visa', currency: 'EUR', rate: 1 },
      { network: 'visa', currency: '*', rate: 0 },
      { network: '*', currency: 'GBP', rate: 1 },
      { network: '*', currency: '*', rate: 0 },
    ]);
    expect(await approved(a, { payment_method: 'pm_card_visa', currency: 'EUR' })).toBe(true);
    // visa/* (0) over */GBP (1): the network is the more specific.
    expect(await approved(a, { payment_method: 'pm_card_visa', currency: 'GBP' })).toBe(false);
    expect(await approved(a, { payment_method: 'pm_card_mastercard', currency: 'GBP' })).toBe(true);
    expect(await approved(a, { payment_method: 'pm_card_mastercard', currency: 'EUR' })).toBe(false);

    await setRates(a, [
      { network: 'visa', currency: 'EUR', rate: 0 },
      { network: 'visa', currency: '*', rate: 1 },
    ]);
    expect(await approved(a, { payment_method: 'pm_card_visa', currency: 'EUR' })).toBe(false);
    expect(await approved(a, { payment_method: 'pm_card_visa', currency: 'USD' })).toBe(true);
    // No rule for mastercard: approved, as without rates.
    expect(await approved(a, { payment_method: 'pm_card_mastercard', currency: 'EUR' })).toBe(true);
  });

  it('holds for a saved card of a plain card, on-session and off-session, and for a variant', async () => {
    await setRates(a, []);
    const saving = await charge(a, { payment_method: 'pm_card_mastercard', setup_future_usage: 'off_session' });
    expect(saving.status).toBe(200);
    expect(saving.charge.card?.brand).toBe('mastercard');
    const token = saving.charge.saved_card!;
    await setRates(a, [{ network: 'mastercard', currency: '*', rate: 0 }]);
    expect(await approved(a, { payment_method: token })).toBe(false);
    expect(await approved(a, { payment_method: token, off_session: true })).toBe(false);
    expect(await approved(a, { payment_method: 'pm_card_mastercard__rates1' })).toBe(false);
    expect(await approved(a, { payment_method: 'pm_card_visa' })).toBe(true);
  });

  it('leaves every other test card as it was', async () => {
    await setRates(a, [{ network: '*', currency: '*', rate: 0 }]);
    expect((await charge(a, { payment_method: 'pm_card_declined' })).code).toBe('card_declined');
    expect((await charge(a, { payment_method: 'pm_card_refund_fails' })).status).toBe(200);
    expect((await charge(a, { payment_method: 'pm_card_threeDSecureRequired' })).charge.status).toBe('requires_action');
    await setRates(a, []);
  });
});

describe('the draw is a hash of the idempotency key', () => {
  it('the same key gets the same answer: sent again, and at another sandbox (its own database) with the same rates', async () => {
    const rates: ApprovalRateSetting[] = [{ network: '*', currency: '*', rate: 0.5 }];
    await setRates(a, rates);
    await setRates(c, rates);
    const keys = Array.from({ length: 24 }, (_, i) => `approval-draw-${i}`);
    const answers: boolean[] = [];
    for (const key of keys) {
      const first = await approved(a, { payment_method: 'pm_card_visa' }, key);
      expect(await approved(a, { payment_method: 'pm_card_visa' }, key)).toBe(first);
      // c never saw the key: its answer is its own draw.
      expect(await approved(c, { payment_method: 'pm_card_visa' }, key)).toBe(first);
      answers.push(first);
    }
    // At 0.5 both answers occur among 24 fixed keys (a draw that ignored the rate would not show both).
    expect(answers).toContain(true);
    expect(answers).toContain(false);
    await setRates(a, []);
    await setRates(c, []);
  });
});

describe('a bad body is refused with 400 and changes nothing', () => {
  const bad: Array<[string, unknown]> = [
    ['an unknown network', { rates: [{ network: 'amex', currency: 'EUR', rate: 0.5 }] }],
    ['a currency that is no code', { rates: [{ network: 'visa', currency: 'EURO', rate: 0.5 }] }],
    ['a rate above 1', { rates: [{ network: 'visa', currency: 'EUR', rate: 1.5 }] }],
    ['a negative rate', { rates: [{ network: 'visa', currency: 'EUR', rate: -0.1 }] }],
    ['a rate that is no number', { rates: [{ network: 'visa', currency: 'EUR', rate: '0.5' }] }],
    ['a rule missing its rate', { rates: [{ network: 'visa', currency: 'EUR' }] }],
    ['a rule with an unknown field', { rates: [{ network: 'visa', currency: 'EUR', rate: 0.5, bin: '424242' }] }],
    ['one rule given twice', { rates: [{ network: 'visa', currency: 'EUR', rate: 0.5 }, { network: 'visa', currency: 'eur', rate: 0.1 }] }],
    ['no rates', {}],
    ['rates that are no list', { rates: { network: 'visa', currency: 'EUR', rate: 0.5 } }],
    ['a body that is no object', [1, 2]],
  ];
  for (const [what, body] of bad) {
    it(`refuses ${what}`, async () => {
      const kept = [{ network: 'visa' as const, currency: 'EUR', rate: 0.3 }];
      await setRates(a, kept);
      const response = await sandboxControls(a.url).call('/approval_rates', body);
      expect(response.status).toBe(400);
      const json = (await response.json()) as { error: { type: string; code: string; message: string } };
      expect(json.error).toMatchObject({ type: 'invalid_request_error', code: 'parameter_invalid' });
      expect(json.error.message).toMatch(/rates|request/);
      expect(await readRates(a)).toEqual(kept);
    });
  }

  it('refuses a body that is not JSON', async () => {
    await setRates(a, [{ network: '*', currency: '*', rate: 0.7 }]);
    const response = await fetch(`${a.url}/_sandbox/approval_rates`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"rates":[' });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    expect(await readRates(a)).toEqual([{ network: '*', currency: '*', rate: 0.7 }]);
    await setRates(a, []);
  });
});
