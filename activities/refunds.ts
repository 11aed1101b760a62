import { log } from '@temporalio/activity';
import type { WorkerMetrics } from '../lib/metrics';
import type { Sql } from '../db/connect';
import { amountTakenByChargebacks } from '../db/disputes';
import { lockPayment, markRefundedIfFullyRefunded } from '../db/payments';
import { completeRecord } from '../db/idempotency-records';
import { postTransaction, refundLines, type LedgerAccounts } from '../db/ledger';
import { insertEvent } from '../db/outbox';
import { findRefund, finishRefund, reserveRefund } from '../db/refunds';
import { businessEventKey } from '../shared/keys';
import { errorResponse } from '../domain/errors';
import { refundLocation, refundResource } from '../domain/resources';
import type { ProviderRefund } from '../provider/types';
import type { FinalResponse } from '../shared/definitions';
import type { RefundWorkflowInput } from '../shared/refunds';
import { outcomeRecorder, step, workflowId } from './record-step';

/** The database steps of the refund workflow (see record-step.ts for what every step guarantees). */

export type BeginRefundResult =
  /** provider: the configured PSP holding the payment's charge (absent: the payment records none, so the default). */
  | { kind: 'reserved'; chargeId: string; currency: string; provider?: string }
  | { kind: 'rejected'; response: FinalResponse };

export function createRefundSteps(sql: Sql, metrics?: WorkerMetrics, accounts?: LedgerAccounts) {
  const recorded = outcomeRecorder(metrics);
  return {
    /**
     * Decides whether the refund may happen and reserves its amount, under the payment's row
     * lock: concurrent refunds of one payment are decided one at a time.
     */
    async beginRefund(input: RefundWorkflowInput): Promise<BeginRefundResult> {
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: input.refundId };
        const payment = await lockPayment(tx, input.paymentId);
        const reject = async (response: FinalResponse): Promise<BeginRefundResult> => ({
          kind: 'rejected',
          response: await completeRecord(tx, input.idempotency, owner, response),
        });
        const already = await findRefund(tx, input.refundId);
        if (!already) {
          if (payment.status !== 'succeeded' && payment.status !== 'refunded') {
            return reject(errorResponse('payment_not_refundable', `payment ${payment.id} is ${payment.status}; only captured payments can be refunded`));
          }
          const refundable = payment.amount_captured_minor - payment.amount_refunded_minor;
          if (input.amountMinor > refundable) {
            return reject(
              errorResponse('refund_exceeds_captured', `refund of ${input.amountMinor} exceeds the ${refundable} still refundable on ${payment.id}`, {
                amount_refundable_minor: refundable,
              }),
            );
          }
          // The card network's chargebacks took (or hold) part of the money: refunding it too would pay the cardholder twice.
          const taken = await amountTakenByChargebacks(tx, payment.id);
          const refundableBesideNetwork = Math.max(0, refundable - taken.amountMinor);
          if (input.amountMinor > refundableBesideNetwork) {
            return reject(
              errorResponse(
                'payment_disputed',
                `refund of ${input.amountMinor} refused: chargeback ${taken.disputeIds.join(', ')} of ${payment.id} took ${taken.amountMinor} through the card network, ` +
                  `so at most ${refundableBesideNetwork} can be refunded (a chargeback won back makes its amount refundable again)`,
                { amount_refundable_minor: refundableBesideNetwork },
              ),
            );
          }
        }
        await reserveRefund(tx, input, payment.currency, workflowId());
        return { kind: 'reserved', chargeId: payment.provider_charge_id!, currency: payment.currency, ...(payment.provider !== null ? { provider: payment.provider } : {}) };
      });
    },

    /**
     * A refund the PSP received but never confirmed within the confirmation window: it stays
     * `pending`, its amount reserved and nothing posted to the ledger (the money may have moved),
     * and the request's answer is the pending refund (202) for an operator to resolve.
     */
    async recordRefundUnconfirmed(input: { request: RefundWorkflowInput; refund: ProviderRefund }): Promise<FinalResponse> {
      const { request } = input;
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: request.refundId };
        const refund = await findRefund(tx, request.refundId);
        if (!refund) throw new Error(`refund ${request.refundId} not found`);
        log.warn('refund unconfirmed by the PSP within its window; left pending for an operator', { refund_id: refund.id, provider_refund_id: input.refund.id });
        const response: FinalResponse = { status: 202, body: JSON.stringify(refundResource(refund)), location: refundLocation(refund.id) };
        return recorded('refund', refund.id, refund.status, await completeRecord(tx, request.idempotency, owner, response));
      });
    },

    /** Records the provider's answer to a refund: ledger reversal and event, or release of the reservation. */
    async recordRefundOutcome(input: { request: RefundWorkflowInput; refund: ProviderRefund }): Promise<FinalResponse> {
      const { request, refund: provided } = input;
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: request.refundId };
        // Under the payment's row lock, as every refund's decision is: the check below that marks
        // the payment refunded then sees every other refund that finished before it, whatever
        // their interleaving (without it, two last refunds finishing at once each saw the
        // other's as pending, and the payment stayed succeeded though refunded in full).
        await lockPayment(tx, request.paymentId);
        if (provided.status === 'pending') throw new Error(`refund ${request.refundId}: a pending refund has no outcome to record`);
        const finished =
          provided.status === 'succeeded'
            ? await finishRefund(tx, request.refundId, { status: 'succeeded', providerRefundId: provided.id })
            : await finishRefund(tx, request.refundId, {
                status: 'failed',
                providerRefundId: provided.id,
                failure: { code: provided.failureCode ?? 'refund_failed', message: provided.failureMessage ?? 'The provider refused the refund.' },
              });
        const refund = finished ?? (await findRefund(tx, request.refundId));
        if (!refund) throw new Error(`refund ${request.refundId} not found`);
        if (refund.status === 'succeeded') {
          await postTransaction(tx, {
            tenantId: refund.tenant_id,
            eventKey: businessEventKey.refund(refund.id),
            paymentId: refund.payment_id,
            refundId: refund.id,
            description: `refund ${refund.id} of ${refund.payment_id}`,
            lines: refundLines(refund.currency, refund.amount_minor),
          }, accounts);
          await markRefundedIfFullyRefunded(tx, refund.payment_id);
        }
        const type = refund.status === 'succeeded' ? 'refund.succeeded' : 'refund.failed';
        await insertEvent(tx, { tenantId: refund.tenant_id, type, eventKey: businessEventKey.refundEvent(refund.id, type), object: refundResource(refund) });
        const response: FinalResponse =
          refund.status === 'succeeded'
            ? { status: 201, body: JSON.stringify(refundResource(refund)), location: refundLocation(refund.id) }
            : errorResponse('refund_failed', refund.failure_message ?? 'The refund failed.', { refund: refundResource(refund) });
        return recorded('refund', refund.id, refund.status, await completeRecord(tx, request.idempotency, owner, response));
      });
    },
  };
}

export type RefundSteps = ReturnType<typeof createRefundSteps>;
