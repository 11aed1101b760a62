import { ApplicationFailure, Context, log } from '@temporalio/activity';
import type { WorkerMetrics } from '../lib/metrics';
import type { Sql } from '../db/connect';
import { insertPayment, lockPayment, transitionPayment } from '../db/payments';
import { completeRecord, type Db } from '../db/records';
import { captureLines, isLedgerRefusal, postTransaction, refundLines } from '../db/ledger';
import { insertEvent, type EventType } from '../db/outbox';
import { reserveRefund, settleRefund } from '../db/refunds';
import { businessEventKey } from '../shared/keys';
import { errorResponse } from '../domain/errors';
import { paymentLocation, paymentResource, refundLocation, refundResource, type PaymentRow, type RefundRow } from '../domain/resources';
import type { ProviderCharge, ProviderRefund } from '../provider/types';
import {
  FailureType,
  type CancelRequest,
  type CaptureRequest,
  type FinalResponse,
  type PaymentWorkflowInput,
  type RefundWorkflowInput,
  type ScopedKey,
} from '../shared/definitions';

/**
 * The database steps of the workflows. Each is one PostgreSQL transaction that records a
 * business fact together with everything that follows from it: the payment's new state,
 * its ledger transaction, its outbox event and the operation's final response. Replaying
 * a step is a no-op: every write is guarded by a state transition or a unique constraint,
 * and the stored response is returned unchanged.
 */

export type BeginPaymentResult = { kind: 'created' } | { kind: 'rejected'; response: FinalResponse };
export type BeginRefundResult =
  | { kind: 'reserved'; chargeId: string; currency: string }
  | { kind: 'rejected'; response: FinalResponse };

function workflowId(): string {
  return Context.current().info.workflowExecution!.workflowId;
}

/** Runs one step's transaction; a ledger refusal becomes a non-retryable LedgerRejected. */
async function step<T>(sql: Sql, work: (tx: Db) => Promise<T>): Promise<T> {
  try {
    return (await sql.begin(work)) as T;
  } catch (error) {
    if (isLedgerRefusal(error)) {
      throw ApplicationFailure.create({ type: FailureType.LedgerRejected, message: (error as Error).message, nonRetryable: true });
    }
    throw error;
  }
}

function paymentResponse(status: number, payment: PaymentRow): FinalResponse {
  return { status, body: JSON.stringify(paymentResource(payment)), location: paymentLocation(payment.id) };
}

async function paymentEvent(tx: Db, payment: PaymentRow, type: EventType): Promise<void> {
  await insertEvent(tx, { tenantId: payment.tenant_id, type, eventKey: businessEventKey.paymentEvent(payment.id, type), object: paymentResource(payment) });
}

async function postCapture(tx: Db, payment: PaymentRow): Promise<void> {
  await postTransaction(tx, {
    tenantId: payment.tenant_id,
    eventKey: businessEventKey.paymentCapture(payment.id),
    paymentId: payment.id,
    description: `capture of ${payment.id}`,
    lines: captureLines(payment.currency, payment.amount_captured_minor),
  });
}

export function createRecordSteps(sql: Sql, metrics?: WorkerMetrics) {
  /** One log line and one count per recorded outcome (a replayed step may count twice; the data never does). */
  const recorded = (kind: 'payment' | 'refund', id: string, status: string, response: FinalResponse) => {
    (kind === 'payment' ? metrics?.paymentOutcomes : metrics?.refundOutcomes)?.inc({ status });
    log.info(`${kind} ${status}`, { [`${kind}_id`]: id, status, http_status: response.status });
    return response;
  };
  return {
    /**
     * Persists the payment's intent before the provider is called. The order guard may
     * refuse it: 409 order_already_paid is then the operation's final response.
     */
    async beginPayment(input: PaymentWorkflowInput): Promise<BeginPaymentResult> {
      // Why: the insert is one atomic statement; run alone it saves the BEGIN and COMMIT round
      // trips of every payment. Only a refused order needs a transaction (to record the 409).
      const inserted = await insertPayment(sql, input, workflowId());
      if (inserted.kind !== 'order_taken') return { kind: 'created' };
      return step(sql, async (tx) => {
        const response = errorResponse('order_already_paid', `order ${input.orderId} already has a payment in progress or paid`, {
          payment_id: inserted.existingPaymentId,
        });
        const stored = await completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, response);
        return { kind: 'rejected', response: recorded('payment', input.paymentId, 'order_already_paid', stored) };
      });
    },

    /** Records what the provider answered to the charge: succeeded, authorized or declined. */
    async recordChargeOutcome(input: { payment: PaymentWorkflowInput; charge: ProviderCharge }): Promise<FinalResponse> {
      const { payment: request, charge } = input;
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: request.paymentId };
        let response: FinalResponse;
        let effects: Promise<unknown>[];
        if (charge.status === 'declined') {
          const payment =
            (await transitionPayment(tx, request.paymentId, ['processing'], {
              status: 'declined',
              providerChargeId: charge.id,
              failure: { code: charge.declineCode ?? 'card_declined', message: charge.declineMessage ?? 'The card was declined.' },
            })) ?? (await lockPayment(tx, request.paymentId));
          effects = [paymentEvent(tx, payment, 'payment.declined')];
          response = errorResponse('card_declined', payment.failure_message ?? 'The card was declined.', {
            decline_code: payment.failure_code,
            payment: paymentResource(payment),
          });
        } else if (charge.status === 'requires_capture') {
          const payment =
            (await transitionPayment(tx, request.paymentId, ['processing'], { status: 'requires_capture', providerChargeId: charge.id })) ??
            (await lockPayment(tx, request.paymentId));
          effects = [paymentEvent(tx, payment, 'payment.requires_capture')];
          response = paymentResponse(201, payment);
        } else if (charge.status === 'succeeded') {
          const payment =
            (await transitionPayment(tx, request.paymentId, ['processing'], {
              status: 'succeeded',
              providerChargeId: charge.id,
              amountCapturedMinor: charge.amountCapturedMinor,
            })) ?? (await lockPayment(tx, request.paymentId));
          effects = [postCapture(tx, payment), paymentEvent(tx, payment, 'payment.succeeded')];
          response = paymentResponse(201, payment);
        } else {
          throw ApplicationFailure.nonRetryable(`unexpected charge status ${charge.status} for ${request.paymentId}`);
        }
        // Why: the ledger posting, the event and the response touch different rows and need only
        // the payment row; sent together, postgres.js pipelines them on the transaction's
        // connection (fewer round trips). A refusal still fails the whole transaction, and the
        // first error in statement order (the ledger's) is the one the step sees.
        const [stored] = await Promise.all([completeRecord(tx, request.idempotency, owner, response), ...effects]);
        return recorded('payment', request.paymentId, charge.status, stored as FinalResponse);
      });
    },

    /** Records a manual capture: the money moved, the ledger posts it, the capture request gets its answer. */
    async recordCapture(input: { paymentId: string; charge: ProviderCharge; request: CaptureRequest }): Promise<FinalResponse> {
      return step(sql, async (tx) => {
        const payment =
          (await transitionPayment(tx, input.paymentId, ['requires_capture'], {
            status: 'succeeded',
            amountCapturedMinor: input.charge.amountCapturedMinor,
          })) ?? (await lockPayment(tx, input.paymentId));
        await postCapture(tx, payment);
        await paymentEvent(tx, payment, 'payment.succeeded');
        const stored = await completeRecord(tx, input.request.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, paymentResponse(200, payment));
        return recorded('payment', input.paymentId, 'succeeded', stored);
      });
    },

    /** Records a voided authorization: canceled on request, or expired uncaptured. */
    async recordCancel(input: { paymentId: string; request: CancelRequest | null }): Promise<FinalResponse | null> {
      return step(sql, async (tx) => {
        const failure = input.request ? null : { code: 'authorization_expired', message: 'The authorization was not captured in time and was voided.' };
        const payment =
          (await transitionPayment(tx, input.paymentId, ['requires_capture'], { status: 'canceled', failure })) ??
          (await lockPayment(tx, input.paymentId));
        await paymentEvent(tx, payment, 'payment.canceled');
        const response = paymentResponse(200, payment);
        recorded('payment', input.paymentId, 'canceled', response);
        if (!input.request) return null;
        return completeRecord(tx, input.request.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, response);
      });
    },

    /**
     * Records that the payment failed for good and why (the provider refused it, or the
     * ledger refused it and the money was given back). Answers the operation that was
     * running with 402 payment_failed.
     */
    async recordPaymentFailure(input: {
      paymentId: string;
      failure: { code: string; message: string };
      idempotency: ScopedKey;
    }): Promise<FinalResponse> {
      return step(sql, async (tx) => {
        const payment =
          (await transitionPayment(tx, input.paymentId, ['processing', 'requires_capture'], {
            status: 'failed',
            amountCapturedMinor: 0,
            failure: input.failure,
          })) ?? (await lockPayment(tx, input.paymentId));
        await paymentEvent(tx, payment, 'payment.failed');
        const response = errorResponse('payment_failed', input.failure.message, { payment: paymentResource(payment) });
        return recorded('payment', input.paymentId, 'failed', await completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, response));
      });
    },

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
        const [already] = await tx<{ id: string }[]>`SELECT id FROM refunds WHERE id = ${input.refundId}`;
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
        }
        await reserveRefund(tx, input, payment.currency, workflowId());
        return { kind: 'reserved', chargeId: payment.provider_charge_id!, currency: payment.currency };
      });
    },

    /** Records the provider's answer to a refund: ledger reversal and event, or release of the reservation. */
    async recordRefundOutcome(input: { request: RefundWorkflowInput; refund: ProviderRefund }): Promise<FinalResponse> {
      const { request, refund: provided } = input;
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: request.refundId };
        const settled =
          provided.status === 'succeeded'
            ? await settleRefund(tx, request.refundId, { status: 'succeeded', providerRefundId: provided.id })
            : await settleRefund(tx, request.refundId, {
                status: 'failed',
                providerRefundId: provided.id,
                failure: { code: provided.failureCode ?? 'refund_failed', message: provided.failureMessage ?? 'The provider refused the refund.' },
              });
        const [refund] = settled ? [settled] : await tx<RefundRow[]>`SELECT * FROM refunds WHERE id = ${request.refundId}`;
        if (!refund) throw new Error(`refund ${request.refundId} not found`);
        if (refund.status === 'succeeded') {
          await postTransaction(tx, {
            tenantId: refund.tenant_id,
            eventKey: businessEventKey.refund(refund.id),
            paymentId: refund.payment_id,
            refundId: refund.id,
            description: `refund ${refund.id} of ${refund.payment_id}`,
            lines: refundLines(refund.currency, refund.amount_minor),
          });
          // Fully refunded once the succeeded refunds add up to what was captured.
          await tx`
            UPDATE payments p SET status = 'refunded', updated_at = now()
            WHERE p.id = ${refund.payment_id} AND p.status = 'succeeded'
              AND p.amount_captured_minor = (SELECT coalesce(sum(amount_minor), 0) FROM refunds r
                                             WHERE r.payment_id = p.id AND r.status = 'succeeded')`;
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

export type RecordSteps = ReturnType<typeof createRecordSteps>;
