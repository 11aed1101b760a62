import { describe, expect, it } from 'vitest';
import { chargeAgrees, checkAcrossPsps, checkNoExcessiveRetries, checkRecovery, createTally, type PaymentCensus, type PspCensusInput, type PspCharge } from '../../chaos/checker';
import { checkDisputes, checkLedgerBalance, type DisputeCensusInput, type LedgerBalanceInput, type LedgerTransactionRecord } from '../../chaos/dispute-checks';
import { checkDoubleNotifications, holdingsOfDouble } from '../../chaos/psp-doubles';
import { disputeFigures, savedCardFigures } from '../../chaos/run';
import type { AdyenCensusPayment } from '../../doubles/adyen/census';
import { captureLines, disputeLossLines, disputeReinstatementLines, disputeWithdrawalLines, type LedgerLine } from '../../db/ledger';
import { disputeWorkflowId } from '../../domain/ids';

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
      { id: 'pay_a', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-a', provider_charge_id: 'ch_a1', amount_captured_minor: 1000, amount_refunded_minor: 300 },
      { id: 'pay_b', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b1', amount_captured_minor: 2000, amount_refunded_minor: 0 },
      { id: 'pay_c', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b2', amount_captured_minor: 500, amount_refunded_minor: 0 },
      { id: 'pay_d', status: 'failed', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'sandbox-b', provider_charge_id: 'ch_b3', amount_captured_minor: 0, amount_refunded_minor: 0 },
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

describe('a payment and its charge at the PSP', () => {
  it('a canceled payment stands on a voided charge, one refunded in full, or a decline (nothing taken); never on one still held', () => {
    for (const charge of ['canceled', 'succeeded', 'declined']) expect(chargeAgrees('canceled', charge), charge).toBe(true);
    for (const charge of ['requires_capture', 'requires_action']) expect(chargeAgrees('canceled', charge), charge).toBe(false);
  });

  it('a declined payment stands only on a decline, a succeeded one only on a success', () => {
    expect(chargeAgrees('declined', 'declined')).toBe(true);
    expect(chargeAgrees('declined', 'succeeded')).toBe(false);
    expect(chargeAgrees('succeeded', 'declined')).toBe(false);
    expect(chargeAgrees('processing', 'succeeded')).toBe(false);
  });
});

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
    // ... and B now holds 1000 the ledger never heard of, and the PSPs keep 1000 more than the payment.
    expect(failed(input)).toEqual(['at most one successful charge over all PSPs', 'captured less refunded at the PSPs equals the payment', 'every charge is an attempt of its payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs', 'one succeeded charge per succeeded payment']);
  });

  it('a charge at A under the key of an attempt that moved on as "nothing charged" is reported (the customer charged twice)', () => {
    const input = cleanCensus();
    input.charges.push(charge('sandbox-a', 'ch_a9', 'pay_b', 'pay_b:charge', 'succeeded', 2000));
    expect(failed(input)).toEqual(['at most one successful charge over all PSPs', 'captured less refunded at the PSPs equals the payment', 'every charge is an attempt of its payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs', 'moved on only when nothing was charged', 'one succeeded charge per succeeded payment']);
  });

  it('the route started again at the same PSP after its transient failure (a new key, nothing left under the old one) passes; a charge left under the old key is reported', () => {
    const input = cleanCensus();
    // pay_b: A found nothing, B unreachable, then B again under attempt 3's key, charged there.
    const b = input.attempts.filter((a) => a.payment_id === 'pay_b');
    b[1]!.outcome = 'not_sent';
    b[1]!.error_code = 'connection_refused';
    b[1]!.provider_charge_id = null;
    b.push({ payment_id: 'pay_b', attempt: 3, provider: 'sandbox-b', provider_charge_id: 'ch_b1', outcome: 'succeeded', error_code: null });
    input.attempts.push(b[2]!);
    input.charges.find((c) => c.id === 'ch_b1')!.idempotency_key = 'pay_b:charge:3';
    expect(failed(input)).toEqual([]);
    input.charges.push(charge('sandbox-b', 'ch_b9', 'pay_b', 'pay_b:charge:2', 'declined'));
    expect(failed(input)).toEqual(['every charge is an attempt of its payment', 'moved on only when nothing was charged']);
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
    expect(failed(input)).toEqual(['captured less refunded at the PSPs equals the payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs', 'no money at any PSP for a payment without money']);
    // A failed payment's stray authorization at A counts too: a second charge that took the card's money, left open.
    const again = cleanCensus();
    again.charges.push(charge('sandbox-a', 'ch_a8', 'pay_d', 'pay_d:charge', 'requires_capture'));
    expect(failed(again)).toEqual([
      'at most one successful charge over all PSPs',
      'every charge is an attempt of its payment',
      'moved on only when nothing was charged',
      'no authorization left unresolved past its window',
      'no money at any PSP for a payment without money',
    ]);
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

  it("a chargeback's withdrawal at a PSP counts in what it holds: the ledger that posted it agrees, one that did not is reported", () => {
    const input = cleanCensus();
    input.disputeMoney = [{ provider: 'sandbox-b', source: 'dp_1', type: 'dispute', reference: 'pay_b', amount_minor: -2000, fee_minor: 1500, currency: 'EUR' }];
    expect(failed(input)).toEqual(['ledger equals each PSP', 'ledger equals the sum over the PSPs']);
    input.ledger = [{ provider: 'sandbox-a', currency: 'EUR', net: 700 }, { provider: 'sandbox-b', currency: 'EUR', net: 2500 - 3500 }];
    expect(failed(input)).toEqual([]);
  });
});

describe('the census counts saved cards and off-session payments', () => {
  const census = (id: string, status: string, extra: Partial<PaymentCensus>): PaymentCensus => ({
    id, method: 'pm_card_visa', capture: 'automatic', currency: 'EUR', amountMinor: 100, status, capturedMinor: 0, refundedMinor: 0, provider: 'sandbox-a',
    offSession: false, savesCard: false, attempts: [], charges: [], captureTransactions: 0, events: {}, deliveries: {}, refunds: [], disputes: [], operations: [], findings: [], ...extra,
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

/**
 * The census of disputes (chaos/dispute-checks.ts) on fabricated data, one tenant, EUR: a
 * chargeback won with evidence at sandbox-a, one conceded at sandbox-b, an inquiry won, and an
 * inquiry left unanswered that escalated and was lost (a late webhook gave its workflow a second
 * run). A clean census passes every check; each way of getting a dispute's money or effects
 * wrong is reported by name.
 */
const disputed = [
  { id: 'dsp_cw', payment: 'pay_cw', provider: 'sandbox-a', psp: 'dp_1', amount: 1000, stage: 'chargeback', status: 'won' },
  { id: 'dsp_cl', payment: 'pay_cl', provider: 'sandbox-b', psp: 'dp_2', amount: 2000, stage: 'chargeback', status: 'lost' },
  { id: 'dsp_iw', payment: 'pay_iw', provider: 'sandbox-a', psp: 'dp_3', amount: 500, stage: 'inquiry', status: 'won' },
  { id: 'dsp_ie', payment: 'pay_ie', provider: 'sandbox-a', psp: 'dp_4', amount: 700, stage: 'chargeback', status: 'lost' },
];
const FEE = 1500;

const transaction = (id: string, eventKey: string, disputeId: string | null, lines: LedgerLine[]): LedgerTransactionRecord => ({
  id,
  tenant_id: 'ten_1',
  event_key: eventKey,
  dispute_id: disputeId,
  entries: lines.map((l) => ({ account: l.account, currency: l.currency, amount_minor: l.amountMinor })),
});

function cleanDisputes(): DisputeCensusInput & { captures: LedgerTransactionRecord[] } {
  const chargeback = (d: (typeof disputed)[number]) => d.stage === 'chargeback';
  const event = (d: (typeof disputed)[number], type: string, n: number) => ({ id: `evt_${d.id}_${type}_${n}`, type, object_id: d.id });
  const events = [
    ...['dispute.created', 'dispute.funds_withdrawn', 'dispute.updated', 'dispute.updated', 'dispute.evidence_due_soon', 'dispute.funds_reinstated', 'dispute.closed'].map((t, n) => event(disputed[0]!, t, n)),
    ...['dispute.created', 'dispute.funds_withdrawn', 'dispute.closed'].map((t, n) => event(disputed[1]!, t, n)),
    ...['dispute.created', 'dispute.updated', 'dispute.updated', 'dispute.closed'].map((t, n) => event(disputed[2]!, t, n)),
    ...['dispute.created', 'dispute.evidence_due_soon', 'dispute.funds_withdrawn', 'dispute.evidence_due_soon', 'dispute.closed'].map((t, n) => event(disputed[3]!, t, n)),
  ];
  return {
    disputes: disputed.map((d) => ({
      id: d.id, tenant_id: 'ten_1', payment_id: d.payment, provider: d.provider, provider_dispute_id: d.psp, amount_minor: d.amount, currency: 'EUR',
      stage: d.stage, status: d.status, fee_minor: chargeback(d) ? FEE : 0, workflow_id: disputeWorkflowId(d.provider, d.psp),
    })),
    pspDisputes: disputed.map((d, n) => ({ provider: d.provider, id: d.psp, charge_id: `ch_${n + 1}`, reference: d.payment, amount_minor: d.amount, currency: 'EUR', stage: d.stage, status: d.status })),
    pspMoney: [
      ...disputed.filter(chargeback).map((d) => ({ provider: d.provider, source: d.psp, type: 'dispute' as const, reference: d.payment, amount_minor: -d.amount, fee_minor: FEE, currency: 'EUR' })),
      { provider: 'sandbox-a', source: 'dp_1', type: 'dispute_reversal', reference: 'pay_cw', amount_minor: 1000, fee_minor: 0, currency: 'EUR' },
    ],
    ledger: [
      ...disputed.filter(chargeback).map((d) => transaction(`ltx_${d.id}_w`, `dispute:${d.id}:withdrawal`, d.id, disputeWithdrawalLines('EUR', d.amount, FEE))),
      transaction('ltx_dsp_cw_r', 'dispute:dsp_cw:reinstatement', 'dsp_cw', disputeReinstatementLines('EUR', 1000)),
      transaction('ltx_dsp_cl_l', 'dispute:dsp_cl:loss', 'dsp_cl', disputeLossLines('EUR', 2000)),
      transaction('ltx_dsp_ie_l', 'dispute:dsp_ie:loss', 'dsp_ie', disputeLossLines('EUR', 700)),
    ],
    captures: disputed.map((d) => transaction(`ltx_${d.payment}`, `payment:${d.payment}:capture`, null, captureLines('EUR', d.amount))),
    events,
    acks: new Map(events.map((e) => [e.id, 1])),
    workflows: new Map(disputed.map((d) => [disputeWorkflowId(d.provider, d.psp), d.id === 'dsp_ie' ? { runs: 2, running: 0, completed: 2 } : { runs: 1, running: 0, completed: 1 }])),
    answers: [
      { disputeId: 'dsp_cw', command: 'winning', finalStatus: 200 },
      { disputeId: 'dsp_cl', command: 'accept', finalStatus: 200 },
      { disputeId: 'dsp_iw', command: 'winning', finalStatus: 200 },
    ],
    remindersPerStage: 1,
  };
}

function balanceOf(input: ReturnType<typeof cleanDisputes>): LedgerBalanceInput {
  return {
    transactions: [...input.captures, ...input.ledger],
    payments: disputed.map((d) => ({ id: d.payment, tenant_id: 'ten_1' })),
    charges: disputed.map((d) => ({ reference: d.payment, currency: 'EUR', amount_captured_minor: d.amount, amount_refunded_minor: 0 })),
    pspMoney: input.pspMoney,
  };
}

function runDisputes(input: DisputeCensusInput) {
  const tally = createTally();
  const census = checkDisputes(input, tally.verdict);
  return { ...tally, census };
}
const failedDisputeChecks = (input: DisputeCensusInput) => Object.entries(runDisputes(input).checks).filter(([, c]) => c.failed > 0).map(([name]) => name).sort();
const failedBalanceChecks = (input: LedgerBalanceInput) => {
  const tally = createTally();
  checkLedgerBalance(input, tally.verdict);
  return Object.entries(tally.checks).filter(([, c]) => c.failed > 0).map(([name]) => name).sort();
};
const disputeCheckNames = ['one dispute row per PSP dispute', 'one closed workflow per dispute', 'dispute final as the PSP holds it', 'dispute decided as answered', 'dispute money posted once, as at the PSP', 'dispute events once', 'dispute webhooks received'];

describe('the census of disputes', () => {
  it('a clean census (chargebacks won and conceded, an inquiry won, one escalated and lost unanswered) passes every check, and the census records each dispute', () => {
    const input = cleanDisputes();
    const { checks, findings, census } = runDisputes(input);
    expect(findings).toEqual([]);
    for (const name of disputeCheckNames) expect(checks[name]?.passed ?? 0, name).toBeGreaterThan(0);
    expect(census.get('pay_cw')).toEqual([
      {
        id: 'dsp_cw', provider: 'sandbox-a', providerDisputeId: 'dp_1', stage: 'chargeback', status: 'won', outcome: 'won', amountMinor: 1000, feeMinor: FEE,
        answers: [{ command: 'winning', finalStatus: 200 }],
        ledger: { 'dispute:dsp_cw:withdrawal': 1, 'dispute:dsp_cw:reinstatement': 1 },
        events: { 'dispute.created': 1, 'dispute.funds_withdrawn': 1, 'dispute.updated': 2, 'dispute.evidence_due_soon': 1, 'dispute.funds_reinstated': 1, 'dispute.closed': 1 },
        psp: { stage: 'chargeback', status: 'won', money: { dispute: 1, dispute_reversal: 1 } },
        workflowRuns: 1,
      },
    ]);
    expect(census.get('pay_iw')![0]).toMatchObject({ ledger: {}, psp: { money: {} } });
    const tally = createTally();
    checkLedgerBalance(balanceOf(input), tally.verdict);
    expect(tally.findings).toEqual([]);
    expect(tally.checks['every ledger transaction balanced']?.passed).toBe(10);
    expect(tally.checks['merchant balance consistent']).toEqual({ passed: 1, failed: 0 });
  });

  it('a PSP dispute with no row, and a row with no PSP dispute, are reported', () => {
    const missing = cleanDisputes();
    missing.pspDisputes.push({ provider: 'sandbox-b', id: 'dp_9', charge_id: 'ch_9', reference: 'pay_cl', amount_minor: 2000, currency: 'EUR', stage: 'inquiry', status: 'won' });
    expect(failedDisputeChecks(missing)).toEqual(['one dispute row per PSP dispute']);
    const stray = cleanDisputes();
    stray.pspDisputes = stray.pspDisputes.filter((d) => d.id !== 'dp_3');
    expect(failedDisputeChecks(stray)).toEqual(['dispute final as the PSP holds it', 'one dispute row per PSP dispute']);
  });

  it('a dispute workflow still running, or a dispute row under another workflow id, is reported', () => {
    const running = cleanDisputes();
    running.workflows = new Map([...running.workflows, [disputeWorkflowId('sandbox-a', 'dp_1'), { runs: 1, running: 1, completed: 0 }]]);
    expect(failedDisputeChecks(running)).toEqual(['one closed workflow per dispute']);
    const other = cleanDisputes();
    other.disputes[1]!.workflow_id = 'dispute-elsewhere';
    expect(failedDisputeChecks(other)).toEqual(['one closed workflow per dispute']);
  });

  it('a dispute left open, or closed otherwise than its PSP holds it, is reported', () => {
    const open = cleanDisputes();
    open.disputes[3]!.status = 'needs_response';
    expect(failedDisputeChecks(open)).toContain('dispute final as the PSP holds it');
    const disagrees = cleanDisputes();
    disagrees.pspDisputes[1]!.status = 'won';
    expect(failedDisputeChecks(disagrees)).toEqual(['dispute final as the PSP holds it']);
  });

  it('a dispute decided otherwise than the workload answered is reported (losing evidence won; winning evidence lost)', () => {
    const losingWon = cleanDisputes();
    losingWon.answers[2] = { disputeId: 'dsp_iw', command: 'losing', finalStatus: 200 };
    expect(failedDisputeChecks(losingWon)).toEqual(['dispute decided as answered']);
    const winningLost = cleanDisputes();
    winningLost.answers.push({ disputeId: 'dsp_ie', command: 'winning', finalStatus: 200 });
    winningLost.events.push({ id: 'evt_extra', type: 'dispute.updated', object_id: 'dsp_ie' });
    winningLost.acks = new Map([...winningLost.acks, ['evt_extra', 1]]);
    expect(failedDisputeChecks(winningLost)).toEqual(['dispute decided as answered']);
    // Winning evidence whose answer never came may have been submitted: either outcome passes.
    const unknown = cleanDisputes();
    unknown.answers.push({ disputeId: 'dsp_ie', command: 'winning', finalStatus: null });
    expect(failedDisputeChecks(unknown)).toEqual([]);
  });

  it("a withdrawal posted twice, one posted for an inquiry that never escalated, a missing reinstatement, and a withdrawal without the PSP's fee are reported", () => {
    const twice = cleanDisputes();
    twice.ledger.push(transaction('ltx_dup', 'dispute:dsp_cw:withdrawal', 'dsp_cw', disputeWithdrawalLines('EUR', 1000, FEE)));
    expect(failedDisputeChecks(twice)).toEqual(['dispute money posted once, as at the PSP']);
    const inquiry = cleanDisputes();
    inquiry.ledger.push(transaction('ltx_inq', 'dispute:dsp_iw:withdrawal', 'dsp_iw', disputeWithdrawalLines('EUR', 500, 0)));
    expect(failedDisputeChecks(inquiry)).toEqual(['dispute money posted once, as at the PSP']);
    const unreinstated = cleanDisputes();
    unreinstated.ledger = unreinstated.ledger.filter((t) => t.id !== 'ltx_dsp_cw_r');
    expect(failedDisputeChecks(unreinstated)).toEqual(['dispute money posted once, as at the PSP']);
    const noFee = cleanDisputes();
    noFee.ledger = noFee.ledger.map((t) => (t.id === 'ltx_dsp_cl_w' ? transaction('ltx_dsp_cl_w', 'dispute:dsp_cl:withdrawal', 'dsp_cl', disputeWithdrawalLines('EUR', 2000, 0)) : t));
    expect(failedDisputeChecks(noFee)).toEqual(['dispute money posted once, as at the PSP']);
    // The PSP reinstated a chargeback that our side records as lost.
    const pspReinstated = cleanDisputes();
    pspReinstated.pspMoney.push({ provider: 'sandbox-b', source: 'dp_2', type: 'dispute_reversal', reference: 'pay_cl', amount_minor: 2000, fee_minor: 0, currency: 'EUR' });
    expect(failedDisputeChecks(pspReinstated)).toEqual(['dispute money posted once, as at the PSP']);
  });

  it('an event sent twice, an implied event missing, one of no dispute fact, and one the merchant never acknowledged are reported', () => {
    const twice = cleanDisputes();
    twice.events.push({ id: 'evt_again', type: 'dispute.funds_withdrawn', object_id: 'dsp_cl' });
    twice.acks = new Map([...twice.acks, ['evt_again', 1]]);
    expect(failedDisputeChecks(twice)).toEqual(['dispute events once']);
    const missing = cleanDisputes();
    missing.events = missing.events.filter((e) => !(e.object_id === 'dsp_cw' && e.type === 'dispute.funds_reinstated'));
    expect(failedDisputeChecks(missing)).toEqual(['dispute events once']);
    const foreign = cleanDisputes();
    foreign.events.push({ id: 'evt_foreign', type: 'dispute.funds_reinstated', object_id: 'dsp_iw' });
    foreign.acks = new Map([...foreign.acks, ['evt_foreign', 1]]);
    expect(failedDisputeChecks(foreign)).toEqual(['dispute events once']);
    const unacked = cleanDisputes();
    unacked.acks = new Map([...unacked.acks, ['evt_dsp_cl_dispute.closed_2', 0]]);
    expect(failedDisputeChecks(unacked)).toEqual(['dispute webhooks received']);
  });

  it('an unbalanced ledger transaction, and a merchant balance that differs from what the PSPs hold or leaves a claim open, are reported', () => {
    const unbalanced = balanceOf(cleanDisputes());
    unbalanced.transactions[0]!.entries.pop();
    expect(failedBalanceChecks(unbalanced)).toEqual(['every ledger transaction balanced', 'merchant balance consistent']);
    // A withdrawal posted without its fee: balanced, but the merchant keeps 1500 the PSP took.
    const noFee = cleanDisputes();
    noFee.ledger = noFee.ledger.map((t) => (t.id === 'ltx_dsp_cl_w' ? transaction('ltx_dsp_cl_w', 'dispute:dsp_cl:withdrawal', 'dsp_cl', disputeWithdrawalLines('EUR', 2000, 0)) : t));
    expect(failedBalanceChecks(balanceOf(noFee))).toEqual(['merchant balance consistent']);
    // A lost chargeback whose claim was never written off.
    const open = cleanDisputes();
    open.ledger = open.ledger.filter((t) => t.id !== 'ltx_dsp_cl_l');
    expect(failedBalanceChecks(balanceOf(open))).toEqual(['merchant balance consistent']);
  });
});

describe('the summary counts disputes', () => {
  it('disputed payments, disputes by final stage and status, the answers and the workflow runs', () => {
    const { census } = runDisputes(cleanDisputes());
    const payment = (id: string) => ({
      id, method: 'pm_card_createDispute', capture: 'automatic', currency: 'EUR', amountMinor: 100, status: 'succeeded', capturedMinor: 100, refundedMinor: 0, provider: 'sandbox-a',
      offSession: false, savesCard: false, attempts: [], charges: [], captureTransactions: 1, events: {}, deliveries: {}, refunds: [], disputes: census.get(id) ?? [], operations: [], findings: [],
    });
    expect(disputeFigures([...disputed.map((d) => payment(d.payment)), payment('pay_plain')])).toEqual({
      disputedPayments: 4,
      byOutcome: { 'chargeback won': 1, 'chargeback lost': 2, 'inquiry won': 1 },
      answers: { 'winning 200': 2, 'accept 200': 1 },
      workflowRuns: 5,
    });
  });
});

describe('the census of the card network’s fees', () => {
  it('no excessive_retry line passes; each one is reported, in its payment’s findings', () => {
    const clean = createTally();
    checkNoExcessiveRetries([], clean.verdict);
    expect(clean.checks['no excessive_retry fee']).toEqual({ passed: 1, failed: 0 });
    const charged = createTally();
    const own: string[] = [];
    checkNoExcessiveRetries([{ provider: 'sandbox-b', source: 'ch_1', reference: 'pay_1' }, { provider: 'sandbox-a', source: 'ch_2', reference: null }], charged.verdict, (id) => (id === 'pay_1' ? own : undefined));
    expect(charged.checks['no excessive_retry fee']).toEqual({ passed: 0, failed: 2 });
    expect(own).toEqual(['no excessive_retry fee: sandbox-b charged an excessive retry for charge ch_1 (payment pay_1)']);
  });
});

describe('the census of recovering payments', () => {
  const recovery = { attempts: 3, window_ends_at: new Date(Date.now() - 1000).toISOString(), next_attempt_at: null, stopped_because: null };
  /** pay_r: declined twice at A (retried there), then paid at A by its third attempt. */
  function recovered(): PspCensusInput {
    return {
      psps: ['sandbox-a', 'sandbox-b'],
      payments: [{ id: 'pay_r', status: 'succeeded', currency: 'EUR', payment_method: 'pm_1', provider: 'sandbox-a', provider_charge_id: 'ch_r3', recovery, amount_captured_minor: 1000, amount_refunded_minor: 0 }],
      attempts: [1, 2, 3].map((attempt) => ({ payment_id: 'pay_r', attempt, provider: 'sandbox-a', provider_charge_id: `ch_r${attempt}`, outcome: attempt < 3 ? 'declined' : 'succeeded', error_code: attempt < 3 ? 'insufficient_funds' : null })),
      charges: [1, 2, 3].map((attempt) => charge('sandbox-a', `ch_r${attempt}`, 'pay_r', attempt === 1 ? 'pay_r:charge' : `pay_r:charge:${attempt}`, attempt < 3 ? 'declined' : 'succeeded', attempt < 3 ? 0 : 1000)),
      providerRefunds: [],
      refundIds: new Set(),
      ledger: [{ provider: 'sandbox-a', currency: 'EUR', net: 1000 }],
    };
  }

  it('retries at the PSP of the last decline pass the census; a retry whose charge was not a decline is reported', () => {
    const clean = run(recovered());
    expect(Object.entries(clean.checks).filter(([, c]) => c.failed > 0)).toEqual([]);
    expect(clean.checks['recovery retried only after a decline']).toEqual({ passed: 2, failed: 0 });
    const input = recovered();
    input.charges[1]!.status = 'succeeded';
    expect(failed(input)).toContain('recovery retried only after a decline');
  });

  it('two successful charges of one recovering payment, or one still recovering after its window, are reported', () => {
    const tally = createTally();
    const paid = { provider: 'sandbox-a', id: 'ch_1', status: 'succeeded' };
    checkRecovery({ id: 'pay_r', status: 'succeeded', recovery }, [paid], tally.verdict);
    checkRecovery({ id: 'pay_s', status: 'recovering', recovery: { ...recovery, window_ends_at: new Date(Date.now() + 60_000).toISOString() } }, [], tally.verdict);
    expect(tally.checks['at most one successful charge per recovering payment']).toEqual({ passed: 2, failed: 0 });
    expect(tally.checks['recovering payment final by the end of its window']).toEqual({ passed: 2, failed: 0 });
    const broken = createTally();
    checkRecovery({ id: 'pay_r', status: 'succeeded', recovery }, [paid, { provider: 'sandbox-b', id: 'ch_2', status: 'succeeded' }], broken.verdict);
    checkRecovery({ id: 'pay_t', status: 'recovering', recovery }, [], broken.verdict);
    expect(broken.checks['at most one successful charge per recovering payment']).toEqual({ passed: 1, failed: 1 });
    expect(broken.checks['recovering payment final by the end of its window']).toEqual({ passed: 1, failed: 1 });
  });
});

/**
 * The census over three PSPs: the Adyen double (adyen-test), read through its census call
 * (doubles/adyen/census.ts) and put in the sandboxes' shapes (chaos/psp-doubles.ts), counted by
 * the same checks as the sandboxes; and its notifications against what we stored and did.
 */
describe('the census with the Adyen double as a third PSP', () => {
  const adyenPayment = (over: Partial<AdyenCensusPayment> = {}): AdyenCensusPayment => ({
    pspReference: 'A1B2C3D4E5F60718',
    merchantReference: 'pay_e',
    idempotencyKey: 'pay_e:charge',
    amount: { value: 1200, currency: 'EUR' },
    resultCode: 'Authorised',
    state: 'captured',
    capturedMinor: 1200,
    refundedMinor: 400,
    modifications: [{ type: 'refund', pspReference: 'R000000000000001', reference: 'rf_e', idempotencyKey: 'rf_e:refund', amount: { value: 400, currency: 'EUR' }, status: 'succeeded' }],
    notifications: [
      { id: 'A1B2C3D4E5F60718:AUTHORISATION:true', eventCode: 'AUTHORISATION', pspReference: 'A1B2C3D4E5F60718', success: true, state: 'delivered', attempts: 1 },
      { id: 'R000000000000001:REFUND:true', eventCode: 'REFUND', pspReference: 'R000000000000001', success: true, state: 'delivered', attempts: 2 },
    ],
    ...over,
  });

  /** The clean census of two PSPs, plus pay_e: paid at adyen-test (1200), 400 of it refunded there. */
  function withAdyen(double: AdyenCensusPayment[] = [adyenPayment()]): PspCensusInput {
    const input = cleanCensus();
    const holdings = holdingsOfDouble('adyen-test', double);
    input.psps = ['sandbox-a', 'sandbox-b', 'adyen-test'];
    input.payments.push({ id: 'pay_e', status: 'succeeded', currency: 'EUR', payment_method: 'pm_card_visa', provider: 'adyen-test', provider_charge_id: 'A1B2C3D4E5F60718', amount_captured_minor: 1200, amount_refunded_minor: 400 });
    input.attempts.push({ payment_id: 'pay_e', attempt: 1, provider: 'adyen-test', provider_charge_id: 'A1B2C3D4E5F60718', outcome: 'succeeded', error_code: null });
    input.charges.push(...holdings.charges);
    input.providerRefunds.push(...holdings.refunds);
    input.refundIds = new Set([...input.refundIds, 'rf_e']);
    input.ledger.push({ provider: 'adyen-test', currency: 'EUR', net: 800 });
    return input;
  }

  it("the double's payments and refunds read as a sandbox's charges and refunds: refused is declined, an open authorisation requires_capture, cancelled canceled", () => {
    const { charges, refunds } = holdingsOfDouble('adyen-test', [
      adyenPayment(),
      adyenPayment({ pspReference: 'P2', merchantReference: 'pay_f', idempotencyKey: 'pay_f:charge', state: 'refused', resultCode: 'Refused', capturedMinor: 0, refundedMinor: 0, modifications: [] }),
      adyenPayment({ pspReference: 'P3', merchantReference: 'pay_g', idempotencyKey: null, state: 'authorised', capturedMinor: 0, refundedMinor: 0, modifications: [] }),
      adyenPayment({ pspReference: 'P4', merchantReference: 'pay_h', state: 'cancelled', capturedMinor: 0, refundedMinor: 0, modifications: [{ type: 'refund', pspReference: 'R2', reference: 'rf_h', idempotencyKey: 'rf_h:refund', amount: { value: 5, currency: 'EUR' }, status: 'received' }] }),
    ]);
    expect(charges.map((c) => [c.id, c.status, c.amount_captured_minor, c.amount_refunded_minor, c.reference, c.idempotency_key])).toEqual([
      ['A1B2C3D4E5F60718', 'succeeded', 1200, 400, 'pay_e', 'pay_e:charge'],
      ['P2', 'declined', 0, 0, 'pay_f', 'pay_f:charge'],
      ['P3', 'requires_capture', 0, 0, 'pay_g', ''],
      ['P4', 'canceled', 0, 0, 'pay_h', 'pay_e:charge'],
    ]);
    expect(refunds).toEqual([
      { provider: 'adyen-test', id: 'R000000000000001', charge_id: 'A1B2C3D4E5F60718', amount_minor: 400, status: 'succeeded', reference: 'rf_e', idempotency_key: 'rf_e:refund' },
      { provider: 'adyen-test', id: 'R2', charge_id: 'P4', amount_minor: 5, status: 'pending', reference: 'rf_h', idempotency_key: 'rf_h:refund' },
    ]);
  });

  it('a clean census over sandbox-a, sandbox-b and adyen-test passes every check, the new ones included', () => {
    const { checks, findings } = run(withAdyen());
    expect(findings).toEqual([]);
    for (const name of ['at most one successful charge over all PSPs', 'captured less refunded at the PSPs equals the payment', 'one succeeded charge per succeeded payment', 'ledger equals each PSP', 'ledger equals the sum over the PSPs']) {
      expect(checks[name]?.passed ?? 0, name).toBeGreaterThan(0);
    }
  });

  it('a double charge spanning adyen-test and sandbox-b (a failover after a lost answer at Adyen that took money) is reported', () => {
    const input = withAdyen();
    // The bug: attempt 1 at adyen-test lost its answer, the payment moved on as if nothing was charged, and sandbox-b charged it again.
    input.attempts = input.attempts.filter((a) => a.payment_id !== 'pay_e');
    input.attempts.push(
      { payment_id: 'pay_e', attempt: 1, provider: 'adyen-test', provider_charge_id: null, outcome: 'not_charged', error_code: 'outcome_unknown_none_found' },
      { payment_id: 'pay_e', attempt: 2, provider: 'sandbox-b', provider_charge_id: 'ch_b5', outcome: 'succeeded', error_code: null },
    );
    input.payments.find((p) => p.id === 'pay_e')!.provider = 'sandbox-b';
    input.payments.find((p) => p.id === 'pay_e')!.provider_charge_id = 'ch_b5';
    input.payments.find((p) => p.id === 'pay_e')!.amount_refunded_minor = 0;
    input.refundIds = new Set(['rf_1']);
    input.providerRefunds = input.providerRefunds.filter((r) => r.provider !== 'adyen-test');
    input.charges.find((c) => c.provider === 'adyen-test')!.amount_refunded_minor = 0;
    input.charges.push(charge('sandbox-b', 'ch_b5', 'pay_e', 'pay_e:charge:2', 'succeeded', 1200));
    input.ledger = [{ provider: 'sandbox-a', currency: 'EUR', net: 700 }, { provider: 'sandbox-b', currency: 'EUR', net: 2500 + 1200 }];
    const { findings } = run(input);
    expect(findings.some((f) => f.startsWith('at most one successful charge over all PSPs: payment pay_e') && f.includes('adyen-test A1B2C3D4E5F60718 succeeded') && f.includes('sandbox-b ch_b5 succeeded'))).toBe(true);
    expect(findings.some((f) => f.startsWith('captured less refunded at the PSPs equals the payment: payment pay_e') && f.includes('keeps 1200') && f.includes('the PSPs keep 2400'))).toBe(true);
    expect(failed(input)).toEqual([
      'at most one successful charge over all PSPs',
      'captured less refunded at the PSPs equals the payment',
      'every charge is an attempt of its payment',
      'ledger equals each PSP',
      'ledger equals the sum over the PSPs',
      'moved on only when nothing was charged',
      'one succeeded charge per succeeded payment',
    ]);
  });

  it('a capture the PSP took but the payment does not show, and a refund at Adyen the ledger never posted, are reported', () => {
    const partial = withAdyen();
    partial.payments.find((p) => p.id === 'pay_e')!.amount_captured_minor = 1000;
    expect(failed(partial)).toEqual(['captured less refunded at the PSPs equals the payment']);
    const unposted = withAdyen();
    unposted.ledger = unposted.ledger.map((l) => (l.provider === 'adyen-test' ? { ...l, net: 1200 } : l));
    expect(failed(unposted)).toEqual(['ledger equals each PSP', 'ledger equals the sum over the PSPs']);
  });

  it('an authorization left open at adyen-test for a canceled payment, or past its window, is reported', () => {
    const canceled = withAdyen([adyenPayment({ state: 'authorised', capturedMinor: 0, refundedMinor: 0, modifications: [] })]);
    const payment = canceled.payments.find((p) => p.id === 'pay_e')!;
    Object.assign(payment, { status: 'canceled', amount_captured_minor: 0, amount_refunded_minor: 0 });
    canceled.refundIds = new Set(['rf_1']);
    canceled.ledger = canceled.ledger.filter((l) => l.provider !== 'adyen-test');
    expect(failed(canceled)).toEqual(['no authorization left unresolved past its window', 'no money at any PSP for a payment without money']);

    const awaited = withAdyen([adyenPayment({ state: 'authorised', capturedMinor: 0, refundedMinor: 0, modifications: [] })]);
    Object.assign(awaited.payments.find((p) => p.id === 'pay_e')!, { status: 'requires_capture', amount_captured_minor: 0, amount_refunded_minor: 0, created_at: new Date('2026-01-01T00:00:00Z') });
    awaited.refundIds = new Set(['rf_1']);
    awaited.ledger = awaited.ledger.filter((l) => l.provider !== 'adyen-test');
    awaited.authorizationWindowMs = 7 * 24 * 3600_000;
    awaited.now = Date.parse('2026-01-07T00:00:00Z');
    expect(failed(awaited)).toEqual([]);
    awaited.now = Date.parse('2026-01-08T00:00:01Z');
    expect(failed(awaited)).toEqual(['no authorization left unresolved past its window']);
  });

  describe("the double's notifications against what we stored and did", () => {
    const stored = [
      { provider: 'adyen-test', event_id: 'A1B2C3D4E5F60718:AUTHORISATION:true', payment_id: 'pay_e' },
      { provider: 'adyen-test', event_id: 'R000000000000001:REFUND:true', payment_id: null },
    ];
    const refunds = [{ id: 'rf_e', provider_refund_id: 'R000000000000001', status: 'succeeded' }];
    const check = (census: AdyenCensusPayment[], rows = stored, ours = refunds) => {
      const tally = createTally();
      const own: string[] = [];
      checkDoubleNotifications({ provider: 'adyen-test', census, stored: rows, refunds: ours, paymentIds: new Set(['pay_e']) }, tally.verdict, (id) => (id === 'pay_e' ? own : undefined));
      return { ...tally, own };
    };

    it('every notification delivered, stored once under its payment, and the REFUND settling our refund as it said: clean', () => {
      const { checks, findings } = check([adyenPayment()]);
      expect(findings).toEqual([]);
      expect(checks).toEqual({ 'PSP notification delivered and stored once': { passed: 2, failed: 0 }, 'refund notification acted on': { passed: 1, failed: 0 } });
    });

    it('a notification still lost, one never stored, one stored under another payment, and a refund we failed though Adyen refunded it are each reported', () => {
      const lost = adyenPayment();
      lost.notifications[1] = { ...lost.notifications[1]!, state: 'lost', attempts: 0 };
      expect(check([lost]).checks['PSP notification delivered and stored once']).toEqual({ passed: 1, failed: 1 });
      expect(check([adyenPayment()], stored.slice(0, 1)).own).toEqual([
        'PSP notification delivered and stored once: adyen-test REFUND R000000000000001:REFUND:true of payment pay_e (A1B2C3D4E5F60718) is delivered after 2 sends; stored: no',
      ]);
      expect(check([adyenPayment()], [{ ...stored[0]!, payment_id: 'pay_a' }, stored[1]!]).checks['PSP notification delivered and stored once']).toEqual({ passed: 1, failed: 1 });
      const wrong = check([adyenPayment()], stored, [{ ...refunds[0]!, status: 'failed' }]);
      expect(wrong.checks['refund notification acted on']).toEqual({ passed: 0, failed: 1 });
      expect(wrong.own).toEqual(['refund notification acted on: adyen-test refund R000000000000001 of payment pay_e is succeeded at the PSP; our refund rf_e is failed']);
    });
  });
});
