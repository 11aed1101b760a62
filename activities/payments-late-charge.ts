import { log } from '@temporalio/activity';
import type { Sql } from '../db/connect';
import { insertEvent } from '../db/outbox';
import { storedCancellation, storedRefundSettlement } from '../db/provider-events';
import { paymentChargeStanding, setFailureOfEnded } from '../db/payments';
import { chargeGivenBackByItsRun, isOutcomePending, keepsNoMoney, moneylessFinalStatuses } from '../domain/payments';
import { paymentResource, type PaymentRow } from '../domain/resources';
import type { WorkerMetrics } from '../lib/metrics';
import type { PaymentStatus } from '../shared/payments';
import { businessEventKey } from '../shared/keys';
import { step } from './record-step';

/**
 * The database steps of lateChargeWorkflow (workflows/payments-late-charge.ts): money the PSP reports for
 * a payment that ended without money is given back, and the payment records why.
 *
 * The ledger is not touched: the payment never booked the money (its amount_captured_minor is 0
 * and the merchant's balance never held it), and the PSP's capture and its refund cancel out.
 * Reconciliation accepts such a payment when its charge is refunded in full
 * (activities/reconciliation.ts).
 */

/** What was done at the PSP with the late money. */
export type LateChargeOutcome =
  | { kind: 'refunded'; refundId: string; amountMinor: number; currency: string }
  | { kind: 'voided' }
  /** The PSP refused the refund: the money is still there and an operator must act. */
  | { kind: 'refund_failed'; message: string }
  /** The PSP refused the void, or did not confirm it: the authorization may still hold the money; an operator must act. */
  | { kind: 'void_failed'; message: string };

export interface LateChargeStanding {
  /**
   * act: the payment ended without money and the charge is the payment's: give the money back.
   * wait: the payment still waits for the PSP (its run decides it, or expires it and closes): look again later.
   * skip: the money is the payment's (succeeded, or an authorization its run captures or voids),
   *       its run gave the charge back itself (domain/payments.ts chargeGivenBackByItsRun), or the
   *       charge is not its charge.
   */
  decision: 'act' | 'wait' | 'skip';
  status: PaymentStatus | null;
  reason: string;
}

export function createLateChargeSteps(sql: Sql, metrics?: WorkerMetrics) {
  return {
    /** Whether the late money is ours to give back, read from the payment as it stands now. */
    async lateChargeStanding(input: { paymentId: string; chargeId: string; provider?: string }): Promise<LateChargeStanding> {
      const payment = await paymentChargeStanding(sql, input.paymentId);
      if (!payment) return { decision: 'skip', status: null, reason: 'no such payment' };
      // A charge at another PSP than the payment's is a failover's duplicate: reconciliation's to give back.
      if (input.provider !== undefined && payment.provider !== null && payment.provider !== input.provider) {
        return { decision: 'skip', status: payment.status, reason: `the payment is at ${payment.provider}` };
      }
      if (payment.provider_charge_id !== null && payment.provider_charge_id !== input.chargeId) {
        return { decision: 'skip', status: payment.status, reason: `the payment's charge is ${payment.provider_charge_id}` };
      }
      const reason = `the payment is ${payment.status}`;
      // Its own run gave its charge (this one: the payment names no other) back, or asked to and
      // its failure tells the operator: not late money.
      if (keepsNoMoney(payment.status) && payment.failure_code !== null && chargeGivenBackByItsRun.includes(payment.failure_code)) {
        return { decision: 'skip', status: payment.status, reason: `the payment's run gave its charge back (${payment.failure_code})` };
      }
      if (keepsNoMoney(payment.status)) return { decision: 'act', status: payment.status, reason };
      // While the charge's outcome is open (the payment waits for its customer or the PSP), its run
      // decides or expires it; an authorization (waiting for the merchant) is the run's to capture
      // or void, and succeeded is the merchant's money.
      return { decision: isOutcomePending(payment.status) ? 'wait' : 'skip', status: payment.status, reason };
    },

    /**
     * At a kind whose modifications are notified: the PSP's stored report of the charge's cancel
     * (its CANCELLATION), or of a refund's confirmation (REFUND, REFUND_FAILED), which may have come
     * before this run asked: the void and the refund of late money are asked under the payment's
     * own keys, and a key the payment's run used first is answered that modification again,
     * `received`, its notification delivered already.
     */
    async storedCancellation(input: { provider: string; paymentId: string; chargeId: string }) {
      return storedCancellation(sql, input);
    },
    async storedRefundSettlement(input: { provider: string; refundId: string }) {
      return storedRefundSettlement(sql, input);
    },

    /**
     * Records what was done with the late money on the payment (its status stays: it is final)
     * and, for a refund, the merchant event payment.late_success_refunded, once.
     */
    async recordLateCharge(input: { paymentId: string; chargeId: string; eventId: string; outcome: LateChargeOutcome }): Promise<void> {
      const { outcome } = input;
      const failure =
        outcome.kind === 'refunded'
          ? {
              code: 'late_success_refunded',
              message: `The payment succeeded at the provider after it had ended; refund ${outcome.refundId} gave the ${outcome.amountMinor} ${outcome.currency} back.`,
            }
          : outcome.kind === 'voided'
            ? { code: 'late_authorization_voided', message: 'The payment was authorized at the provider after it had ended; the authorization was voided.' }
            : outcome.kind === 'void_failed'
              ? {
                  code: 'needs_operator',
                  message: `The payment was authorized at the provider after it had ended and the void of charge ${input.chargeId} failed: ${outcome.message}`,
                }
              : {
                  code: 'needs_operator',
                  message: `The payment succeeded at the provider after it had ended and the refund of charge ${input.chargeId} failed: ${outcome.message}`,
                };
      await step(sql, async (tx) => {
        const payment = await setFailureOfEnded(tx, input.paymentId, failure, moneylessFinalStatuses);
        if (!payment) return;
        if (outcome.kind === 'refunded') {
          const type = 'payment.late_success_refunded';
          await insertEvent(tx, { tenantId: payment.tenant_id, type, eventKey: businessEventKey.paymentEvent(payment.id, type), object: paymentResource(payment) });
        }
      });
      metrics?.paymentOutcomes.inc({ status: failure.code });
      log.info(`late charge ${outcome.kind}`, { payment_id: input.paymentId, charge_id: input.chargeId, event_id: input.eventId, failure_code: failure.code });
    },
  };
}

export type LateChargeSteps = ReturnType<typeof createLateChargeSteps>;
