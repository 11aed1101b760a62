import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  accepts,
  applyChargeReport,
  commandRefusal,
  eventOf,
  finalStatuses,
  isFinal,
  keepsNoMoney,
  mayMove,
  moneylessFinalStatuses,
  orderHoldingStatuses,
  chargeStates,
  outcomePendingStatuses,
  paymentLifecycle,
  paymentStatuses,
  statusesAccepting,
  waiterOf,
  waitingStatuses,
  type PaymentStatus,
} from '../../domain/payments';

/** The payment lifecycle as one table (domain/payments.ts), and what is derived from it. */

describe('the lifecycle table', () => {
  it('names the final statuses that keep no money: a late success for one of them is given back (workflows/payments-late-charge.ts)', () => {
    expect([...moneylessFinalStatuses].sort()).toEqual(['canceled', 'declined', 'expired', 'failed']);
    expect(keepsNoMoney('expired')).toBe(true);
    expect(keepsNoMoney('refunded')).toBe(false);
  });

  it('names only known statuses as from-states, and a final status is left only by refunds (succeeded → refunded)', () => {
    for (const [status, rule] of Object.entries(paymentLifecycle)) {
      for (const from of rule.from) {
        expect(paymentStatuses, `${status}.from`).toContain(from);
        if (isFinal(from as PaymentStatus)) expect(`${from}->${status}`).toBe('succeeded->refunded');
      }
    }
  });

  it('gives every waiting status a deadline, and no final status one', () => {
    for (const status of paymentStatuses) {
      expect(paymentLifecycle[status].deadline === null, status).toBe(isFinal(status));
    }
    expect([...waitingStatuses].sort()).toEqual(['processing', 'recovering', 'requires_action', 'requires_capture']);
    expect(finalStatuses.length + waitingStatuses.length).toBe(paymentStatuses.length);
  });

  it('waits for the customer or the PSP while the charge’s outcome is open (the API’s 202; a recovering payment’s next attempt too), for the merchant while authorized', () => {
    expect([...outcomePendingStatuses].sort()).toEqual(['processing', 'recovering', 'requires_action']);
    expect(waiterOf('recovering')).toBe('psp');
    expect(waiterOf('requires_action')).toBe('customer');
    expect(waiterOf('processing')).toBe('psp');
    expect(waiterOf('requires_capture')).toBe('merchant');
    expect(waiterOf('succeeded')).toBeNull();
  });

  it('accepts capture only in requires_capture, and cancel in requires_capture, requires_action and recovering (the API’s 409s)', () => {
    expect(statusesAccepting('capture')).toEqual(['requires_capture']);
    expect([...statusesAccepting('cancel')].sort()).toEqual(['recovering', 'requires_action', 'requires_capture']);
    expect(accepts('succeeded', 'cancel')).toBe(false);
    expect(commandRefusal('pay_1', 'succeeded', 'capture')).toBe('payment pay_1 is succeeded; capture is accepted only while it is requires_capture');
  });

  it('holds the order while a payment waits or has money, frees it otherwise', () => {
    expect([...orderHoldingStatuses].sort()).toEqual(['processing', 'recovering', 'refunded', 'requires_action', 'requires_capture', 'succeeded']);
    for (const status of ['declined', 'failed', 'canceled', 'expired'] as const) expect(orderHoldingStatuses).not.toContain(status);
  });

  it('has an event for every status a charge report can lead to', () => {
    for (const state of chargeStates) expect(eventOf(state), state).not.toBeNull();
    expect(eventOf('expired')).toBe('payment.expired');
  });
});

describe('charge reports (webhooks and polls) never move a payment out of a final status', () => {
  it('a late processing after succeeded, a requires_action after declined, changes nothing', () => {
    expect(applyChargeReport('succeeded', 'processing')).toBeNull();
    expect(applyChargeReport('declined', 'requires_action')).toBeNull();
    expect(applyChargeReport('expired', 'succeeded')).toBeNull();
    expect(applyChargeReport('requires_action', 'succeeded')).toBe('succeeded');
    expect(applyChargeReport('requires_action', 'processing')).toBeNull(); // reordered: a wait reported after a later one
    expect(applyChargeReport('requires_action', 'requires_action')).toBeNull(); // duplicate
  });

  it('property: for any start and any order of reports (duplicated, reordered), once final the status never changes, and every move is an edge of the table', () => {
    const status = fc.constantFrom(...(['processing', 'requires_action', 'requires_capture'] as PaymentStatus[]));
    const reports = fc.array(fc.constantFrom(...chargeStates), { maxLength: 30 });
    fc.assert(
      fc.property(status, reports, (start, sequence) => {
        let current: PaymentStatus = start;
        let finalReached: PaymentStatus | null = null;
        for (const report of sequence) {
          const next = applyChargeReport(current, report);
          if (next === null) continue;
          expect(mayMove(current, next)).toBe(true);
          expect(finalReached).toBeNull(); // nothing moves after a final status
          current = next;
          if (isFinal(current)) finalReached = current;
        }
        if (finalReached) expect(current).toBe(finalReached);
      }),
      { numRuns: 2000 },
    );
  });
});
