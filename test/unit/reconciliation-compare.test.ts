import { describe, expect, it } from 'vitest';
import type { OurDispute, OurPayment, OurRefund } from '../../db/reconciliation';
import type { ProviderBalanceTransaction, ProviderCharge } from '../../provider/types';
import { reconciliationWindow } from '../../shared/reconciliation';
import { compareWindow, type OurSide } from '../../activities/reconciliation';

/**
 * The comparison at the heart of reconciliation (activities/reconciliation.ts), on figures made up
 * here: which difference is which kind, what is consistent, and which window a difference
 * belongs to. test/integration/reconciliation.test.ts finds each kind end to end.
 */

const window = { from: new Date('2026-11-30T10:00:00Z'), to: new Date('2026-11-30T11:00:00Z') };
const inside = new Date('2026-11-30T10:30:00Z');
const margin = new Date('2026-11-30T11:05:00Z');

let seq = 0;
function chargeTxn(over: Partial<ProviderBalanceTransaction> = {}): ProviderBalanceTransaction {
  seq++;
  return { id: `txn_${seq}`, type: 'charge', source: `ch_${seq}`, chargeId: `ch_${seq}`, reference: null, amountMinor: 1000, feeMinor: 30, currency: 'EUR', status: 'available', createdAt: inside, ...over };
}
function payment(over: Partial<OurPayment> = {}): OurPayment {
  return {
    id: `pay_${++seq}`,
    tenant_id: 'ten_1',
    status: 'succeeded',
    amount_minor: 1000,
    amount_captured_minor: 1000,
    currency: 'EUR',
    provider_charge_id: null,
    provider: null,
    ledger_captures: 1,
    ledger_captured_minor: 1000,
    captured_at: inside,
    max_events: 1,
    ...over,
  };
}
/** A payment of ours and the PSP's charge of it, agreeing. */
function paid(over: Partial<OurPayment> = {}, txnOver: Partial<ProviderBalanceTransaction> = {}) {
  const p = payment(over);
  const txn = chargeTxn({ reference: p.id, ...txnOver });
  p.provider_charge_id = txn.chargeId;
  return { payment: p, txn };
}
function side(
  payments: OurPayment[],
  refunds: OurRefund[] = [],
  captured = payments.filter((p) => p.captured_at && p.captured_at >= window.from && p.captured_at < window.to).map((p) => p.id),
  disputes: OurDispute[] = [],
): OurSide {
  return {
    disputes: new Map(disputes.map((d) => [d.provider_dispute_id, d])),
    payments: new Map(payments.map((p) => [p.id, p])),
    paymentByCharge: new Map(payments.filter((p) => p.provider_charge_id).map((p) => [p.provider_charge_id!, p.id])),
    refunds: new Map(refunds.map((r) => [r.id, r])),
    capturedInWindow: captured,
    refundedInWindow: refunds.filter((r) => r.booked_at && r.booked_at >= window.from && r.booked_at < window.to).map((r) => r.id),
  };
}
/**
 * A won chargeback of `p` as both sides book it: the PSP's withdrawal (amount and fee) and
 * reinstatement lines, our dispute with both postings in provider_receivable.
 */
function wonChargeback(p: { payment: OurPayment; txn: ProviderBalanceTransaction }, over: Partial<OurDispute> = {}) {
  const dp = `dp_${++seq}`;
  const dispute: OurDispute = {
    id: `dsp_${seq}`,
    payment_id: p.payment.id,
    provider: 'psp-a',
    provider_dispute_id: dp,
    stage: 'chargeback',
    status: 'won',
    amount_minor: 1000,
    fee_minor: 1500,
    currency: 'EUR',
    ledger_withdrawal_minor: -2500,
    withdrawn_at: inside,
    ledger_reinstatement_minor: 1000,
    reinstated_at: inside,
    ledger_second_withdrawal_minor: null,
    second_withdrawn_at: null,
    ...over,
  };
  const line = { source: dp, chargeId: p.txn.chargeId, reference: p.payment.id };
  const withdrawal = chargeTxn({ type: 'dispute', ...line, amountMinor: -1000, feeMinor: 1500 });
  const reversal = chargeTxn({ type: 'dispute_reversal', ...line, amountMinor: 1000, feeMinor: 0 });
  return { dispute, withdrawal, reversal };
}
const noLiveCharges = async () => [] as ProviderCharge[];
const kinds = (findings: { kind: string; subject: string }[]) => findings.map((f) => `${f.kind} ${f.subject}`);

describe('a window where both sides agree', () => {
  it('is clean: captures, a refund, and a compensated payment (charged, then given back) find nothing', async () => {
    const a = paid();
    const b = paid();
    const compensated = paid({ status: 'failed', amount_captured_minor: 0, ledger_captures: 0, ledger_captured_minor: 0, captured_at: null });
    const giveBack = chargeTxn({ type: 'refund', source: 're_psp_1', chargeId: compensated.txn.chargeId, reference: compensated.payment.id, amountMinor: -1000 });
    const refund: OurRefund = { id: 're_ours_1', payment_id: a.payment.id, status: 'succeeded', amount_minor: 400, currency: 'EUR', provider_refund_id: 're_psp_2', booked_at: inside };
    const refundTxn = chargeTxn({ type: 'refund', source: 're_psp_2', chargeId: a.txn.chargeId, reference: refund.id, amountMinor: -400 });
    const findings = await compareWindow(window, [a.txn, b.txn, compensated.txn, giveBack, refundTxn], side([a.payment, b.payment, compensated.payment], [refund]), noLiveCharges);
    expect(findings).toEqual([]);
  });

  it('is clean: a late success given back after the payment expired (charged, then refunded in full under its reference); kept, it is a status_mismatch', async () => {
    const none = { amount_captured_minor: 0, ledger_captures: 0, ledger_captured_minor: 0, captured_at: null };
    const late = paid({ status: 'expired', ...none });
    const giveBack = chargeTxn({ type: 'refund', source: 're_psp_late', chargeId: late.txn.chargeId, reference: late.payment.id, amountMinor: -1000 });
    expect(await compareWindow(window, [late.txn, giveBack], side([late.payment]), noLiveCharges)).toEqual([]);
    const kept = paid({ status: 'expired', ...none });
    expect(kinds(await compareWindow(window, [kept.txn], side([kept.payment]), noLiveCharges))).toEqual([`status_mismatch ${kept.payment.id}`]);
  });
});

describe('each kind of difference', () => {
  it('missing_at_provider: we booked a capture the PSP has no charge for (checked live before saying so)', async () => {
    const p = payment({ provider_charge_id: 'ch_never' });
    let looked = '';
    const findings = await compareWindow(window, [], side([p]), async (id) => ((looked = id), []));
    expect(looked).toBe(p.id);
    expect(findings).toMatchObject([{ kind: 'missing_at_provider', subject: p.id, paymentId: p.id, provider: null, ours: { amount_captured_minor: 1000, currency: 'EUR' } }]);
  });

  it('missing_at_provider at a PSP without search by our reference (Adyen): the report is the only word, nothing is looked up', async () => {
    const p = payment({ provider_charge_id: 'ch_never' });
    const agreeing = paid();
    expect(await compareWindow(window, [agreeing.txn], side([p, agreeing.payment]), null)).toMatchObject([{ kind: 'missing_at_provider', subject: p.id, provider: null }]);
  });

  it('unknown_at_provider_side: a charge under no reference of ours, and a refund nobody here made', async () => {
    const stranger = chargeTxn({ reference: 'pay_not_ours' });
    const a = paid();
    const dashboard = chargeTxn({ type: 'refund', source: 're_dashboard', chargeId: a.txn.chargeId, reference: null, amountMinor: -250 });
    const findings = await compareWindow(window, [stranger, a.txn, dashboard], side([a.payment]), noLiveCharges);
    expect(kinds(findings)).toEqual([`unknown_at_provider_side ${stranger.chargeId}`, 'unknown_at_provider_side re_dashboard']);
    expect(findings[1]).toMatchObject({ paymentId: a.payment.id, providerReference: 're_dashboard', provider: { amount_minor: -250 } });
  });

  it('amount_mismatch: the PSP captured another amount (or the ledger booked another)', async () => {
    const altered = paid({}, { amountMinor: 900 });
    const misbooked = paid({ ledger_captured_minor: 2000 });
    const findings = await compareWindow(window, [altered.txn, misbooked.txn], side([altered.payment, misbooked.payment]), noLiveCharges);
    expect(kinds(findings).sort()).toEqual([`amount_mismatch ${altered.payment.id}`, `amount_mismatch ${misbooked.payment.id}`].sort());
    expect(findings.find((f) => f.subject === altered.payment.id)).toMatchObject({ ours: { amount_captured_minor: 1000 }, provider: { amount_minor: 900 } });
  });

  it('currency_mismatch', async () => {
    const p = paid({ currency: 'USD' });
    expect(kinds(await compareWindow(window, [p.txn], side([p.payment]), noLiveCharges))).toEqual([`currency_mismatch ${p.payment.id}`]);
  });

  it('status_mismatch: captured at the PSP, declined here; refunded at the PSP, failed here', async () => {
    const declined = paid({ status: 'declined', amount_captured_minor: 0, ledger_captures: 0, ledger_captured_minor: 0, captured_at: null });
    const a = paid();
    const refund: OurRefund = { id: 're_ours_2', payment_id: a.payment.id, status: 'failed', amount_minor: 300, currency: 'EUR', provider_refund_id: null, booked_at: null };
    const refundTxn = chargeTxn({ type: 'refund', source: 're_psp_3', chargeId: a.txn.chargeId, reference: refund.id, amountMinor: -300 });
    const findings = await compareWindow(window, [declined.txn, a.txn, refundTxn], side([declined.payment, a.payment], [refund]), noLiveCharges);
    expect(kinds(findings)).toEqual([`status_mismatch ${declined.payment.id}`, 'status_mismatch re_ours_2']);
  });

  it('duplicate_charge: a second charge at the PSP under a payment of ours', async () => {
    const p = paid();
    const second = chargeTxn({ reference: p.payment.id, amountMinor: 1000 });
    const findings = await compareWindow(window, [p.txn, second], side([p.payment]), noLiveCharges);
    expect(kinds(findings)).toEqual([`duplicate_charge ${p.payment.id}`]);
    expect((findings[0]!.provider as { charges: unknown[] }).charges).toHaveLength(2);
  });
});

describe('the window a difference belongs to', () => {
  it('a PSP charge in the margin (after the window) matches our capture inside it: nothing missing, nothing unknown', async () => {
    const p = paid({}, { createdAt: margin });
    expect(await compareWindow(window, [p.txn], side([p.payment]), noLiveCharges)).toEqual([]);
  });

  it('a difference anchored outside the window is left to that window', async () => {
    const later = chargeTxn({ reference: 'pay_unknown', createdAt: margin });
    expect(await compareWindow(window, [later], side([]), noLiveCharges)).toEqual([]);
  });
});

describe('dispute money: the PSP’s dispute lines against our disputes and their postings', () => {
  it('a won chargeback, withdrawal and reinstatement agreeing on both sides, is clean; so is a lost one (a loss moves nothing at the PSP)', async () => {
    const p = paid();
    const won = wonChargeback(p);
    expect(await compareWindow(window, [p.txn, won.withdrawal, won.reversal], side([p.payment], [], undefined, [won.dispute]), noLiveCharges)).toEqual([]);
    const q = paid();
    const lost = wonChargeback(q, { status: 'lost', ledger_reinstatement_minor: null, reinstated_at: null });
    expect(await compareWindow(window, [q.txn, lost.withdrawal], side([q.payment], [], undefined, [lost.dispute]), noLiveCharges)).toEqual([]);
  });

  it('a second round after a won chargeback (Adyen\'s SecondChargeback): its line matches our second withdrawal; a line we never posted is status_mismatch, a posting the PSP never made missing_at_provider', async () => {
    const second = (p: ReturnType<typeof paid>, over: Partial<OurDispute> = {}) => {
      const taken = wonChargeback(p, { stage: 'pre_arbitration', status: 'lost', ledger_second_withdrawal_minor: -1000, second_withdrawn_at: inside, ...over });
      return { ...taken, again: chargeTxn({ type: 'dispute_second', source: taken.dispute.provider_dispute_id, chargeId: p.txn.chargeId, reference: p.payment.id, amountMinor: -1000, feeMinor: 0 }) };
    };
    const p = paid();
    const agreeing = second(p);
    const q = paid();
    const unposted = second(q, { ledger_second_withdrawal_minor: null, second_withdrawn_at: null });
    const r = paid();
    const unmade = second(r);
    const findings = await compareWindow(
      window,
      [p.txn, q.txn, r.txn, ...[agreeing, unposted, unmade].flatMap((d) => [d.withdrawal, d.reversal]), agreeing.again, unposted.again],
      side([p.payment, q.payment, r.payment], [], undefined, [agreeing, unposted, unmade].map((d) => d.dispute)),
      noLiveCharges,
    );
    expect(kinds(findings)).toEqual([`missing_at_provider ${unmade.dispute.id}`, `status_mismatch ${unposted.dispute.id}`]);
    expect(findings.find((f) => f.subject === unposted.dispute.id)).toMatchObject({ provider: { type: 'dispute_second', amount_minor: -1000 }, ours: { ledger_second_withdrawal_minor: null } });
  });

  it('amount_mismatch: the PSP withdrew another amount or fee, or our posting moved another amount; subject our dispute, both sides’ figures', async () => {
    const p = paid();
    const altered = wonChargeback(p);
    altered.withdrawal.amountMinor = -900;
    const q = paid();
    const fee = wonChargeback(q);
    fee.withdrawal.feeMinor = 1400;
    const r = paid();
    const misbooked = wonChargeback(r, { ledger_reinstatement_minor: 1100 });
    const all = [altered, fee, misbooked];
    const findings = await compareWindow(
      window,
      [p.txn, q.txn, r.txn, ...all.flatMap((d) => [d.withdrawal, d.reversal])],
      side([p.payment, q.payment, r.payment], [], undefined, all.map((d) => d.dispute)),
      noLiveCharges,
    );
    expect(kinds(findings)).toEqual(all.map((d) => `amount_mismatch ${d.dispute.id}`).sort());
    expect(findings.find((f) => f.subject === altered.dispute.id)).toMatchObject({
      paymentId: p.payment.id,
      refundId: null,
      providerReference: altered.dispute.provider_dispute_id,
      ours: { object: 'dispute', amount_minor: 1000, fee_minor: 1500, ledger_withdrawal_minor: -2500 },
      provider: { type: 'dispute', source: altered.dispute.provider_dispute_id, amount_minor: -900, fee_minor: 1500 },
    });
    expect(findings.find((f) => f.subject === misbooked.dispute.id)).toMatchObject({ ours: { ledger_reinstatement_minor: 1100 }, provider: { type: 'dispute_reversal', amount_minor: 1000 } });
  });

  it('currency_mismatch, and status_mismatch: the PSP reinstated a chargeback we hold as lost', async () => {
    const p = paid();
    const currency = wonChargeback(p, { currency: 'USD', status: 'lost', ledger_reinstatement_minor: null, reinstated_at: null });
    const findings = await compareWindow(window, [p.txn, currency.withdrawal, currency.reversal], side([p.payment], [], undefined, [currency.dispute]), noLiveCharges);
    expect(kinds(findings)).toEqual([`currency_mismatch ${currency.dispute.id}`, `status_mismatch ${currency.dispute.id}`]);
    expect(findings[1]).toMatchObject({ ours: { status: 'lost', ledger_reinstatement_minor: null }, provider: { type: 'dispute_reversal' } });
  });

  it('missing_at_provider: a withdrawal we booked in the window that the PSP does not report', async () => {
    const p = paid();
    const booked = wonChargeback(p, { status: 'needs_response', ledger_reinstatement_minor: null, reinstated_at: null });
    const findings = await compareWindow(window, [p.txn], side([p.payment], [], undefined, [booked.dispute]), noLiveCharges);
    expect(findings).toMatchObject([{ kind: 'missing_at_provider', subject: booked.dispute.id, paymentId: p.payment.id, provider: null, ours: { object: 'dispute', ledger_withdrawal_minor: -2500 } }]);
  });

  it('a dispute line whose dispute we never saw is no finding (the run starts its workflow instead)', async () => {
    const p = paid();
    const unseen = wonChargeback(p);
    expect(await compareWindow(window, [p.txn, unseen.withdrawal], side([p.payment]), noLiveCharges)).toEqual([]);
  });

  it('the window: a line in the margin matches our posting inside it (its figures still compared); a posting outside the window is left to it', async () => {
    const p = paid();
    const late = wonChargeback(p, { status: 'needs_response', ledger_reinstatement_minor: null, reinstated_at: null });
    late.withdrawal.createdAt = margin;
    const ours = side([p.payment], [], undefined, [late.dispute]);
    expect(await compareWindow(window, [p.txn, late.withdrawal], ours, noLiveCharges)).toEqual([]);
    late.withdrawal.feeMinor = 0;
    expect(kinds(await compareWindow(window, [p.txn, late.withdrawal], ours, noLiveCharges))).toEqual([`amount_mismatch ${late.dispute.id}`]);
    const outside = wonChargeback(p, { withdrawn_at: margin, status: 'needs_response', ledger_reinstatement_minor: null, reinstated_at: null });
    expect(await compareWindow(window, [p.txn], side([p.payment], [], undefined, [outside.dispute]), noLiveCharges)).toEqual([]);
  });

  it('several PSPs: a dispute at B is not compared in A’s run', async () => {
    const p = paid({ provider: 'psp-b' });
    const atB = wonChargeback(p, { provider: 'psp-b' });
    const ours = side([p.payment], [], undefined, [atB.dispute]);
    expect(await compareWindow(window, [], ours, noLiveCharges, { provider: 'psp-a', defaultProvider: 'psp-a' })).toEqual([]);
    expect(await compareWindow(window, [p.txn, atB.withdrawal, atB.reversal], ours, noLiveCharges, { provider: 'psp-b', defaultProvider: 'psp-a' })).toEqual([]);
  });
});

describe('reconciliationWindow', () => {
  const at = new Date('2026-11-30T00:30:00Z');
  it('previous_day: the whole UTC day before the scheduled time (so a backfill of a day reconciles the day before it)', () => {
    expect(reconciliationWindow({ kind: 'previous_day' }, at)).toEqual({ from: '2026-11-29T00:00:00.000Z', to: '2026-11-30T00:00:00.000Z' });
  });
  it('trailing_hours: whole hours before the scheduled hour', () => {
    expect(reconciliationWindow({ kind: 'trailing_hours', hours: 3 }, new Date('2026-11-30T14:10:00Z'))).toEqual({ from: '2026-11-30T11:00:00.000Z', to: '2026-11-30T14:00:00.000Z' });
  });
  it('explicit: as given, and refused when empty', () => {
    expect(reconciliationWindow({ kind: 'explicit', from: '2026-11-30T10:00:00Z', to: '2026-11-30T10:05:00Z' }, at)).toEqual({ from: '2026-11-30T10:00:00.000Z', to: '2026-11-30T10:05:00.000Z' });
    expect(() => reconciliationWindow({ kind: 'explicit', from: '2026-11-30T10:00:00Z', to: '2026-11-30T10:00:00Z' }, at)).toThrow(/before/);
  });
});

describe('several PSPs: each run looks only at the payments its PSP holds', () => {
  const where = { provider: 'psp-a', defaultProvider: 'psp-a' };
  it('a charge at A for a payment B holds is a duplicate_charge; B’s captures and refunds are not missing at A', async () => {
    const atB = payment({ provider: 'psp-b', provider_charge_id: 'ch_b1' });
    const late = chargeTxn({ reference: atB.id });
    const findings = await compareWindow(window, [late], side([atB]), async () => [], where);
    expect(findings).toMatchObject([{ kind: 'duplicate_charge', subject: atB.id, paymentId: atB.id, providerReference: late.chargeId }]);
    // Reconciled at B instead, the same payment is clean (its charge there agrees).
    const atBTxn = chargeTxn({ reference: atB.id, chargeId: 'ch_b1', source: 'ch_b1' });
    expect(await compareWindow(window, [atBTxn], side([atB]), async () => [], { provider: 'psp-b', defaultProvider: 'psp-a' })).toEqual([]);
  });

  it('a payment that records no provider is at the default one', async () => {
    const old = payment({ provider: null, provider_charge_id: 'ch_old' });
    const txn = chargeTxn({ reference: old.id, chargeId: 'ch_old', source: 'ch_old' });
    expect(await compareWindow(window, [txn], side([old]), async () => [], where)).toEqual([]);
    // Reconciled at another PSP, it is not expected there.
    expect(await compareWindow(window, [], side([old]), async () => [], { provider: 'psp-b', defaultProvider: 'psp-a' })).toEqual([]);
  });
});
