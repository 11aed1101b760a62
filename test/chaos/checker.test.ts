import { describe, expect, it } from 'vitest';
import { checkAcrossPsps, createTally, type PaymentCensus, type PspCensusInput, type PspCharge } from '../../chaos/checker';
import { savedCardFigures } from '../../chaos/run';

/**
 * The census across two PSPs (chaos/checker.ts checkAcrossPsps) on fabricated data: a clean
 * census passes every check, and each way of charging a customer twice, or of losing track of
 * money at either PSP, is reported by name.
 */

const charge = (provider: string, id: string, reference: string, key: string, status: string, captured = 0, refunded = 0, currency = 'EUR'): PspCharge => ({
  provider,
  id,
  status,
  amount_captured_minor: captured,
  amount_refunded_minor: refunded,
  currency,
  reference,
  idempotency_key: key,
});

/**
 * Four payments: pay_a succeeded at A; pay_b failed over from A (unavailable: nothing charged)
 * to B and succeeded there; pay_c was declined at A with processing_error and succeeded at B;
 * pay_d failed after its money moved at B and was given back by compensation.
 */
function cleanCensus(): PspCensusInput {
  return {
    psps: ['sandbox-a', 'sandbox-b'],
    payments: [
      { id: 'pay_a', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-a', provider_charge_id: 'ch_a1' },
      { id: 'pay_b', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b1' },
      { id: 'pay_c', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b2' },
      { id: 'pay_d', status: 'failed', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b3' },
    ],
    attempts: [
      { payment_id: 'pay_a', attempt: 1, provider: 'sandbox-a', provider_charge_id: 'ch_a1', outcome: 'succeeded', error_code: null },
      { payment_id: 'pay_b', attempt: 1, provider: 'sandbox-a', provider_charge_id: null, outcome: 'not_charged', error_code: 'outcome_unknown_none_found' },
      { payment_id: 'pay_b', attempt: 2, provider: 'sandbox-b', provider_charge_id: 'ch_b1', outcome: 'succeeded', error_code: null },
      { payment_id: 'pay_c', attempt: 1, provider: 'sandbox-a', provider_charge_id: 'ch_a2', outcome: 'declined', error_code: 'processing_error' },
      { payment_id: 'pay_c', attempt: 2, provider: 'sandbox-b', provider_charge_id: 'ch_b2', outcome: 'succeeded', error_code: null },
      { payment_id: 'pay_d', attempt: 1, provider: 'sandbox-a', provider_charge_id: null, outcome: 'not_sent', error_code: 'connection_refused' },
      { payment_id: 'pay_d', attempt: 2, provider: 'sandbox-b', provider_charge_id: 'ch_b3', outcome: 'succeeded', error_code: null },
    ],
    charges: [
      charge('sandbox-a', 'ch_a1', 'pay_a', 'pay_a:charge', 'succeeded', 1000, 300),
      charge('sandbox-a', 'ch_a2', 'pay_c', 'pay_c:charge', 'declined'),
      charge('sandbox-b', 'ch_b1', 'pay_b', 'pay_b:charge:2', 'succeeded', 2000),
      charge('sandbox-b', 'ch_b2', 'pay_c', 'pay_c:charge:2', 'succeeded', 500),
      charge('sandbox-b', 'ch_b3', 'pay_d', 'pay_d:charge:2', 'succeeded', 700, 700),
    ],
    providerRefunds: [
      { provider: 'sandbox-a', id: 're_a1', charge_id: 'ch_a1', amount_minor: 300, status: 'succeeded', reference: 'rf_1', idempotency_key: 'rf_1:refund' },
      { provider: 'sandbox-b', id: 're_b1', charge_id: 'ch_b3', amount_minor: 700, status: 'succeeded', reference: 'pay_d', idempotency_key: 'pay_d:compensation' },
    ],
    refundIds: new Set(['rf_1']),
    ledger: [
      { provider: 'sandbox-a', currency: 'EUR', net: 700 },
      { provider: 'sandbox-b', currency: 'EUR', net: 2500 },
    ],
  };
}

function run(input: PspCensusInput) {
  const tally = createTally();
  checkAcrossPsps(input, tally.verdict);
  return tally;
}

/** The names of the checks that failed. */
const failed = (input: PspCensusInput) => Object.entries(run(input).checks).filter(([, c]) => c.failed > 0).map(([name]) => name).sort();

describe('the census across two PSPs', () => {
  it('a clean census with failovers (nothing charged at A; a decline about A) and a compensation passes every check', () => {
    const { checks, findings } = run(cleanCensus());
    expect(findings).toEqual([]);
    for (const name of ['one succeeded charge per succeeded payment', 'no money at any PSP for a payment without money', 'every charge is an attempt of its payment', 'moved on only when nothing was charged', 'held where its last attempt went', 'no orphan provider charge', 'one provider charge per key', 'no orphan provider refund', 'one provider refund per key', 'ledger equals each PSP', 'ledger equals the sum over the PSPs']) {
      expect(checks[name]?.passed ?? 0, name).toBeGreaterThan(0);
    }
  });

  it('a second succeeded charge at B for a payment held at A is reported', () => {
    const input = cleanCensus();
    input.charges.push(charge('sandbox-b', 'ch_b9', 'pay_a', 'pay_a:charge:2', 'succeeded', 1000));
    const { findings } = run(input);
    expect(findings.some((f) => f.startsWith('one succeeded charge per succeeded payment: payment pay_a') && f.includes('sandbox-b ch_b9 succeeded'))).toBe(true);
    expect(findings.some((f) => f.startsWith('every charge is an attempt of its payment: payment pay_a') && f.includes('ch_b9') && f.includes('is no attempt of it'))).toBe(true);
    // ... and B now holds 1000 the ledger never heard of.
    expect(failed(input)).toEqual(['every charge is an attempt of its payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs', 'one succeeded charge per succeeded payment']);
  });

  it('a charge at A under the key of an attempt that moved on as "nothing charged" is reported (the customer charged twice)', () => {
    const input = cleanCensus();
    input.charges.push(charge('sandbox-a', 'ch_a9', 'pay_b', 'pay_b:charge', 'succeeded', 2000));
    expect(failed(input)).toEqual(['every charge is an attempt of its payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs', 'moved on only when nothing was charged', 'one succeeded charge per succeeded payment']);
  });

  it('a move to B after a decline about the card is reported', () => {
    const input = cleanCensus();
    input.attempts.find((a) => a.payment_id === 'pay_c' && a.attempt === 1)!.error_code = 'card_declined';
    expect(failed(input)).toEqual(['moved on only when nothing was charged']);
  });

  it('money kept at either PSP for a failed payment is reported', () => {
    const input = cleanCensus();
    input.charges.find((c) => c.id === 'ch_b3')!.amount_refunded_minor = 0;
    input.providerRefunds = input.providerRefunds.filter((r) => r.id !== 're_b1');
    expect(failed(input)).toEqual(['ledger equals each PSP', 'ledger equals the sum over the PSPs', 'no money at any PSP for a payment without money']);
    // A failed payment's stray authorization at A counts too.
    const again = cleanCensus();
    again.charges.push(charge('sandbox-a', 'ch_a8', 'pay_d', 'pay_d:charge', 'requires_capture'));
    expect(failed(again)).toEqual(['every charge is an attempt of its payment', 'moved on only when nothing was charged', 'no money at any PSP for a payment without money']);
  });

  it('a payment held at a PSP other than its last attempt\'s is reported', () => {
    const input = cleanCensus();
    input.payments.find((p) => p.id === 'pay_b')!.provider = 'sandbox-a';
    expect(failed(input)).toEqual(['held where its last attempt went', 'one succeeded charge per succeeded payment']);
  });

  it('an orphan charge or refund at B, a key that charged twice at B, and a refund at the wrong PSP are reported', () => {
    const orphan = cleanCensus();
    orphan.charges.push(charge('sandbox-b', 'ch_b7', 'pay_unknown', 'pay_unknown:charge', 'succeeded', 100));
    expect(failed(orphan)).toEqual(['no orphan provider charge']);

    const twice = cleanCensus();
    twice.charges.push(charge('sandbox-b', 'ch_b6', 'pay_b', 'pay_b:charge:2', 'declined'));
    expect(failed(twice)).toEqual(['every charge is an attempt of its payment', 'one provider charge per key']);

    const refund = cleanCensus();
    refund.providerRefunds.push({ provider: 'sandbox-b', id: 're_b2', charge_id: 'ch_b1', amount_minor: 5, status: 'succeeded', reference: 'rf_unknown', idempotency_key: 'rf_unknown:refund' });
    refund.providerRefunds.push({ provider: 'sandbox-b', id: 're_b3', charge_id: 'ch_a1', amount_minor: 5, status: 'succeeded', reference: 'rf_1', idempotency_key: 'rf_1:refund' });
    expect(run(refund).checks['no orphan provider refund']).toEqual({ passed: 2, failed: 2 });
  });

  it('the same charge counted at the same PSP in the ledger but not in the sum (per PSP and over both) is reported', () => {
    const input = cleanCensus();
    input.ledger = [{ provider: 'sandbox-a', currency: 'EUR', net: 3200 }];
    // The sum over both PSPs still agrees (3200); per PSP it does not.
    expect(failed(input)).toEqual(['ledger equals each PSP']);
  });
});

describe('the census counts saved cards and off-session payments', () => {
  const census = (id: string, status: string, extra: Partial<PaymentCensus>): PaymentCensus => ({
    id, method: 'pm_card_visa', capture: 'automatic', currency: 'EUR', amountMinor: 100, status, capturedMinor: 0, refundedMinor: 0, provider: 'sandbox-a',
    offSession: false, savesCard: false, attempts: [], charges: [], captureTransactions: 0, events: {}, deliveries: {}, refunds: [], operations: [], findings: [], ...extra,
  });
  const at = (attempt: number, provider: string, outcome: string) => ({ attempt, provider, outcome, errorCode: null, chargeId: null });

  it('the payments that saved a card, the off-session ones by status, and those of them that failed over to B', () => {
    const figures = savedCardFigures([
      census('pay_save', 'succeeded', { savesCard: true, attempts: [at(1, 'sandbox-a', 'succeeded')] }),
      census('pay_plain', 'succeeded', { attempts: [at(1, 'sandbox-a', 'succeeded')] }),
      census('pay_off', 'succeeded', { method: 'pm_01', offSession: true, attempts: [at(1, 'sandbox-a', 'succeeded')] }),
      census('pay_moved', 'succeeded', { method: 'pm_01', offSession: true, provider: 'sandbox-b', attempts: [at(1, 'sandbox-a', 'not_charged'), at(2, 'sandbox-b', 'succeeded')] }),
      census('pay_auth', 'failed', { method: 'pm_02', offSession: true, attempts: [at(1, 'sandbox-a', 'declined')] }),
    ]);
    expect(figures).toEqual({ saving: { succeeded: 1 }, offSession: { succeeded: 2, failed: 1 }, offSessionFailedOver: 1 });
  });
});
