import { ApplicationFailure } from '@temporalio/activity';
import type { WorkerMetrics } from '../lib/metrics';
import type { Db, Sql } from '../db/connect';
import { insertPayment, lockPayment, transitionPayment } from '../db/payments';
import { completeRecord } from '../db/idempotency-records';
import { captureLines, postTransaction, type LedgerAccounts } from '../db/ledger';
import { insertEvent } from '../db/outbox';
import { businessEventKey } from '../shared/keys';
import { errorResponse } from '../domain/errors';
import { paymentLocation, paymentResource, type PaymentRow } from '../domain/resources';
import type { ProviderCharge } from '../provider/types';
import type { CancelRequest, CaptureRequest, FinalResponse, PaymentEventType, PaymentWorkflowInput, ScopedKey } from '../shared/definitions';
import { outcomeRecorder, step, workflowId } from './record-step';

/** The database steps of the payment workflow (see record-step.ts for what every step guarantees). */

export type BeginPaymentResult = { kind: 'created' } | { kind: 'rejected'; response: FinalResponse };

function paymentResponse(status: number, payment: PaymentRow): FinalResponse {
  return { status, body: JSON.stringify(paymentResource(payment)), location: paymentLocation(payment.id) };
}

async function paymentEvent(tx: Db, payment: PaymentRow, type: PaymentEventType): Promise<void> {
  await insertEvent(tx, { tenantId: payment.tenant_id, type, eventKey: businessEventKey.paymentEvent(payment.id, type), object: paymentResource(payment) });
}

async function postCapture(tx: Db, payment: PaymentRow, accounts?: LedgerAccounts): Promise<void> {
  await postTransaction(tx, {
    tenantId: payment.tenant_id,
    eventKey: businessEventKey.paymentCapture(payment.id),
    paymentId: payment.id,
    description: `capture of ${payment.id}`,
    lines: captureLines(payment.currency, payment.amount_captured_minor),
  }, accounts);
}

export function createPaymentSteps(sql: Sql, metrics?: WorkerMetrics, accounts?: LedgerAccounts) {
  const recorded = outcomeRecorder(metrics);
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
          effects = [postCapture(tx, payment, accounts), paymentEvent(tx, payment, 'payment.succeeded')];
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
        await postCapture(tx, payment, accounts);
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
  };
}

export type PaymentSteps = ReturnType<typeof createPaymentSteps>;
