import { ApplicationFailure } from '@temporalio/activity';
import type { WorkerMetrics } from '../lib/metrics';
import type { Db, Sql } from '../db/connect';
import { compensatedByRefund, lockPayment, nameProcessingCharge, noteRecoveryAttempt, setPaymentRecovery, transitionPayment, type PaymentChange } from '../db/payments';
import { storedCompensationRefusal } from '../db/provider-events';
import { eventOf, isOutcomePending } from '../domain/payments';
import { completeRecord } from '../db/idempotency-records';
import { captureLines, postTransaction, type LedgerAccounts } from '../db/ledger';
import { insertEvent } from '../db/outbox';
import { finishAttempt } from '../db/payments-attempts';
import { releaseCardAttempt } from '../db/recovery';
import { businessEventKey } from '../shared/keys';
import { errorResponse, orderAlreadyPaid } from '../domain/errors';
import { paymentLocation, paymentResource, type PaymentRow } from '../domain/resources';
import { newId } from '../domain/ids';
import { declineOfCharge, isHardDecline, type OffSessionRefusal, type RecoveryView } from '../domain/recovery';
import { clearHardDecline, noteHardDecline } from '../db/recovery';
import { methodSavedFrom, paymentMethodEvent, saveCard, tenantMethodId } from '../db/customers-payment-methods';
import type { ProviderCharge } from '../provider/types';
import type { FinalResponse, ScopedKey } from '../shared/definitions';
import type { CancelRequest, CaptureRequest, PaymentEventType, PaymentStatus, PaymentWorkflowInput } from '../shared/payments';
import { outcomeRecorder, step, workflowId } from './record-step';

/** The database steps of the payment workflow (see record-step.ts for what every step guarantees). */

/** The PSP's decline of an off-session charge whose card needs the customer to authenticate. */
const AUTHENTICATION_REQUIRED = 'authentication_required';

function paymentResponse(status: number, payment: PaymentRow): FinalResponse {
  return { status, body: JSON.stringify(paymentResource(payment)), location: paymentLocation(payment.id) };
}

/** Where a recovering payment's recovery stands (domain/recovery.ts recoveryView), shown by the payment resource. */
async function setRecovery(tx: Db, paymentId: string, recovery: RecoveryView): Promise<void> {
  await setPaymentRecovery(tx, paymentId, recovery);
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

/**
 * Moves the payment to the status the charge reports (as the lifecycle table allows) with what
 * follows from it: the ledger posting of a capture and the merchant event. A report the payment
 * cannot move to (it is already there, or final) changes nothing and records no effect: the
 * effects are written only when the payment is in the reported status, and their unique keys
 * make a repeated step a no-op.
 */
async function applyCharge(tx: Db, paymentId: string, charge: ProviderCharge, accounts?: LedgerAccounts, provider?: string): Promise<{ payment: PaymentRow; effects: Promise<unknown>[] }> {
  const target = { ...chargeTarget(charge), ...(provider ? { provider } : {}) };
  const moved =
    target.status === 'processing'
      ? null // the intent was persisted as processing: the PSP's "pending" is the same status, an event of its own
      : await transitionPayment(tx, paymentId, target);
  const payment = moved ?? (await lockPayment(tx, paymentId));
  if (payment.status !== target.status) return { payment, effects: [] };
  if (target.status === 'processing' && payment.provider_charge_id === null) {
    await nameProcessingCharge(tx, paymentId, charge.id);
    payment.provider_charge_id = charge.id;
  }
  const effects: Promise<unknown>[] = [];
  if (payment.status === 'succeeded') effects.push(postCapture(tx, payment, accounts));
  const event = eventOf(payment.status);
  if (event) effects.push(paymentEvent(tx, payment, event));
  effects.push(noteCardAnswer(tx, payment, charge));
  return { payment, effects };
}

/**
 * What the charge's answer says of a saved card (docs/recovery.md "A card the issuer called
 * dead"): a hard decline of an off-session charge of a saved method holds its card from
 * off-session charges (every copy of it); a payment with the card that succeeds on-session (with
 * a saved method, or saving the card) lets it be charged off-session again. A payment that
 * succeeded with setup_future_usage saves its card first.
 */
async function noteCardAnswer(tx: Db, payment: PaymentRow, charge: ProviderCharge): Promise<void> {
  const paid = payment.status === 'succeeded' || payment.status === 'requires_capture';
  const saved = paid ? await saveCardFor(tx, payment, charge) : null;
  const method = saved ?? (await savedMethodOf(tx, payment));
  if (method === null) return;
  if (paid && !payment.off_session) return clearHardDecline(tx, method);
  const declined = charge.status === 'declined' && (payment.status === 'declined' || payment.status === 'failed');
  if (declined && payment.off_session && isHardDecline(declineOfCharge(charge))) {
    await noteHardDecline(tx, method, { code: charge.declineCode ?? 'card_declined', message: charge.declineMessage ?? 'The card was declined.', paymentId: payment.id });
  }
}

/** The saved method a payment charges (its payment_method is one of the tenant's saved methods), or null. */
async function savedMethodOf(tx: Db, payment: PaymentRow): Promise<string | null> {
  if (payment.customer_id === null) return null;
  return tenantMethodId(tx, payment.tenant_id, payment.payment_method);
}

/**
 * Saves the card of a payment made with setup_future_usage for its customer, once the PSP
 * authorized it (after any 3-D Secure): our own payment method, with the card as shown, the
 * card network's transaction id and the PSP's token. In the transaction that records the
 * payment's state; one method per payment (a repeated step saves nothing), with its
 * payment_method.attached event.
 */
async function saveCardFor(tx: Db, payment: PaymentRow, charge: ProviderCharge): Promise<string | null> {
  const saved = charge.savedCard;
  if (payment.setup_future_usage !== 'off_session' || payment.customer_id === null || !saved || payment.provider === null) return null;
  const method = await saveCard(tx, {
    id: newId('pm'),
    tenantId: payment.tenant_id,
    customerId: payment.customer_id,
    card: saved.card,
    fingerprint: saved.fingerprint ?? null,
    networkTransactionId: saved.networkTransactionId,
    provider: payment.provider,
    token: saved.token,
    sourcePaymentId: payment.id,
  });
  if (method) await paymentMethodEvent(tx, method, 'payment_method.attached');
  return method?.id ?? (await methodSavedFrom(tx, payment.id));
}

/** The payment change a charge status means. */
function chargeTarget(charge: ProviderCharge): PaymentChange {
  switch (charge.status) {
    case 'declined':
      // The PSP asked for authentication the customer is not there to give (off-session): no
      // charge, and no wait; the payment fails so the merchant can bring the customer back.
      if (charge.declineCode === AUTHENTICATION_REQUIRED) {
        return { status: 'failed', providerChargeId: charge.id, failure: { code: AUTHENTICATION_REQUIRED, message: charge.declineMessage ?? 'The card issuer requires the customer to authenticate this payment.' } };
      }
      return {
        status: 'declined',
        providerChargeId: charge.id,
        failure: { code: charge.declineCode ?? 'card_declined', message: charge.declineMessage ?? 'The card was declined.' },
      };
    case 'requires_capture':
      return { status: 'requires_capture', providerChargeId: charge.id };
    case 'succeeded':
      return { status: 'succeeded', providerChargeId: charge.id, amountCapturedMinor: charge.amountCapturedMinor };
    case 'canceled':
      return { status: 'canceled', providerChargeId: charge.id, failure: { code: 'canceled_at_provider', message: 'The PSP canceled the charge.' } };
    case 'requires_action':
      return {
        status: 'requires_action',
        providerChargeId: charge.id,
        nextAction: charge.nextAction
          ? { type: 'redirect_to_url', redirect_to_url: { url: charge.nextAction.url, return_url: charge.nextAction.returnUrl } }
          : null,
      };
    case 'processing':
      return { status: 'processing', providerChargeId: charge.id };
    default:
      throw ApplicationFailure.nonRetryable(`unexpected charge status ${String(charge.status)} for charge ${charge.id}`);
  }
}

/** The first answer to POST /v1/payments for the payment as the charge left it. */
function chargeResponse(payment: PaymentRow): FinalResponse {
  if (payment.status === 'failed' && payment.failure_code === AUTHENTICATION_REQUIRED) {
    return errorResponse('authentication_required', payment.failure_message ?? 'The card issuer requires authentication.', { payment: paymentResource(payment) });
  }
  if (payment.status === 'declined') {
    return errorResponse('card_declined', payment.failure_message ?? 'The card was declined.', {
      decline_code: payment.failure_code,
      payment: paymentResource(payment),
    });
  }
  // The outcome waits for the customer or the PSP (the lifecycle table's outcomePendingStatuses): 202, and this is the key's answer.
  return paymentResponse(isOutcomePending(payment.status) ? 202 : 201, payment);
}

export function createPaymentSteps(sql: Sql, metrics?: WorkerMetrics, accounts?: LedgerAccounts) {
  const recorded = outcomeRecorder(metrics);
  return {
    /**
     * Records the order guard's refusal as the operation's answer (409 order_already_paid): the
     * first charge attempt found the intent missing and could not persist it again because
     * another payment holds the order. Nothing was charged.
     */
    async recordOrderTaken(input: { payment: PaymentWorkflowInput; holderPaymentId: string }): Promise<FinalResponse> {
      const { payment } = input;
      return step(sql, async (tx) => {
        const response = orderAlreadyPaid(payment.orderId, input.holderPaymentId);
        const stored = await completeRecord(tx, payment.idempotency, { workflowId: workflowId(), resourceId: payment.paymentId }, response);
        return recorded('payment', payment.paymentId, 'order_already_paid', stored);
      });
    },

    /**
     * Records what the provider answered to the charge: succeeded, authorized, declined, or a
     * wait (requires_action: the customer's challenge; processing: an asynchronous method).
     * Its response is the operation's first answer, recorded for the idempotency key: 201, 402,
     * or 202 for a wait (replayed byte for byte like any other; GET shows where it stands now).
     */
    async recordChargeOutcome(input: {
      payment: PaymentWorkflowInput;
      charge: ProviderCharge;
      /** The attempt that made the charge, finished here with the charge's status; its PSP holds the payment. */
      attempt: { attempt: number; provider: string };
    }): Promise<FinalResponse> {
      const { payment: request, charge } = input;
      return step(sql, async (tx) => {
        const owner = { workflowId: workflowId(), resourceId: request.paymentId };
        // The attempt began (and pointed payments.provider at its PSP) before it charged; its
        // row is finished here, or written whole if its begin was lost.
        await finishAttempt(tx, request.paymentId, input.attempt.attempt, input.attempt.provider, { outcome: charge.status, providerChargeId: charge.id, errorCode: charge.declineCode });
        // The payment's row moves with its PSP named: the response and the event show it.
        const { payment, effects } = await applyCharge(tx, request.paymentId, charge, accounts, input.attempt.provider);
        const response = chargeResponse(payment);
        // Why: the ledger posting, the event and the response touch different rows and need only
        // the payment row; sent together, postgres.js pipelines them on the transaction's
        // connection (fewer round trips). A refusal still fails the whole transaction, and the
        // first error in statement order (the ledger's) is the one the step sees.
        const [stored] = await Promise.all([completeRecord(tx, request.idempotency, owner, response), ...effects]);
        return recorded('payment', request.paymentId, charge.status, stored as FinalResponse);
      });
    },

    /**
     * Records how a wait ended, as the PSP reported it (webhook or status poll): the charge
     * decided (succeeded, authorized, declined) or was canceled. The operation's answer was
     * recorded when the wait began; this records the new status, its ledger posting and event.
     * Returns the status the payment is in afterwards. The name says "settlement" for any wait's
     * outcome, a customer's challenge too: it is a recorded activity type name, kept as it is
     * (docs/ARCHITECTURE.md, Glossary).
     */
    async recordSettlement(input: { paymentId: string; charge: ProviderCharge }): Promise<PaymentStatus> {
      return step(sql, async (tx) => {
        const { payment, effects } = await applyCharge(tx, input.paymentId, input.charge, accounts);
        await Promise.all(effects);
        recorded('payment', input.paymentId, payment.status, chargeResponse(payment));
        return payment.status;
      });
    },

    /**
     * Records that a wait's window ended: the customer did not authenticate in time, or the
     * PSP gave no outcome. `failure` says why, including what was done with a late success.
     */
    async recordExpiry(input: { paymentId: string; failure: { code: string; message: string } }): Promise<PaymentStatus> {
      return step(sql, async (tx) => {
        const payment =
          (await transitionPayment(tx, input.paymentId, { status: 'expired', failure: input.failure })) ?? (await lockPayment(tx, input.paymentId));
        if (payment.status === 'expired') await paymentEvent(tx, payment, 'payment.expired');
        // The run found a late success at its last look and gave it back: the same fact, and event,
        // as when lateChargeWorkflow gives one back after the run closed (exactly one per payment).
        if (payment.status === 'expired' && input.failure.code === 'late_success_refunded') {
          const type = 'payment.late_success_refunded';
          await insertEvent(tx, { tenantId: payment.tenant_id, type, eventKey: businessEventKey.paymentEvent(payment.id, type), object: paymentResource(payment) });
        }
        recorded('payment', input.paymentId, payment.status, paymentResponse(200, payment));
        return payment.status;
      });
    },

    /** Records a manual capture: the money moved, the ledger posts it, the capture request gets its answer. */
    async recordCapture(input: { paymentId: string; charge: ProviderCharge; request: CaptureRequest }): Promise<FinalResponse> {
      return step(sql, async (tx) => {
        const payment =
          (await transitionPayment(tx, input.paymentId, {
            status: 'succeeded',
            amountCapturedMinor: input.charge.amountCapturedMinor,
          })) ?? (await lockPayment(tx, input.paymentId));
        await postCapture(tx, payment, accounts);
        await paymentEvent(tx, payment, 'payment.succeeded');
        const stored = await completeRecord(tx, input.request.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, paymentResponse(200, payment));
        return recorded('payment', input.paymentId, 'succeeded', stored);
      });
    },

    /**
     * Revenue recovery (docs/recovery.md): the first attempt's soft decline. Finishes the attempt,
     * moves the payment to `recovering` with where its recovery stands, and records the
     * operation's first answer: 202 with the payment (replayed like any other).
     */
    async recordRecovering(input: { payment: PaymentWorkflowInput; charge: ProviderCharge; attempt: { attempt: number; provider: string }; recovery: RecoveryView }): Promise<FinalResponse> {
      const { payment: request, charge } = input;
      return step(sql, async (tx) => {
        await finishAttempt(tx, request.paymentId, input.attempt.attempt, input.attempt.provider, { outcome: 'declined', providerChargeId: charge.id, errorCode: charge.declineCode });
        const moved = await transitionPayment(tx, request.paymentId, { status: 'recovering', provider: input.attempt.provider, providerChargeId: charge.id, failure: null });
        if (moved) await setRecovery(tx, request.paymentId, input.recovery);
        const payment = await lockPayment(tx, request.paymentId);
        const stored = await completeRecord(tx, request.idempotency, { workflowId: workflowId(), resourceId: request.paymentId }, paymentResponse(202, payment));
        return recorded('payment', request.paymentId, 'recovering', stored as FinalResponse);
      });
    },

    /**
     * A retry of a recovering payment failed (declined, or refused by the PSP): its attempt, where
     * the recovery stands now, and the event `payment.recovery_attempt_failed` (once per attempt).
     * The payment is held where that retry went, as its charge (null: the retry made none there),
     * so a recovery canceled or swept before its end names its latest charge, not its first.
     */
    async recordRecoveryAttempt(input: {
      paymentId: string;
      attempt: number;
      provider: string;
      outcome: 'declined' | 'rejected' | 'not_sent' | 'not_charged';
      providerChargeId: string | null;
      errorCode: string | null;
      recovery: RecoveryView;
    }): Promise<void> {
      await step(sql, async (tx) => {
        await finishAttempt(tx, input.paymentId, input.attempt, input.provider, { outcome: input.outcome, providerChargeId: input.providerChargeId, errorCode: input.errorCode });
        const payment = await noteRecoveryAttempt(tx, input);
        if (!payment) return;
        const type = 'payment.recovery_attempt_failed';
        await insertEvent(tx, { tenantId: payment.tenant_id, type, eventKey: businessEventKey.paymentEvent(payment.id, `${type}:${input.attempt}`), object: paymentResource(payment) });
      });
    },

    /**
     * A recovering payment's end as its last charge decides it: paid (ledger, event, as any
     * success), or declined (failed for authentication_required) with why the retries stopped.
     * `attempt`: the attempt that made the charge, finished here (null: finished already).
     * `unusedReservation`: an attempt reserved in the card's budget that a stop kept from being
     * made, given back. `refusedCancel`: a cancel the run took while the last attempt was under
     * way, refused now that its outcome is known (409, stored under its key).
     */
    async recordRecoveryEnd(input: {
      paymentId: string;
      charge: ProviderCharge;
      attempt: { attempt: number; provider: string } | null;
      recovery: RecoveryView;
      unusedReservation?: number;
      refusedCancel?: { idempotency: ScopedKey; message: string };
    }): Promise<PaymentStatus> {
      return step(sql, async (tx) => {
        if (input.unusedReservation !== undefined) await releaseCardAttempt(tx, input.paymentId, input.unusedReservation);
        if (input.attempt) {
          await finishAttempt(tx, input.paymentId, input.attempt.attempt, input.attempt.provider, { outcome: input.charge.status, providerChargeId: input.charge.id, errorCode: input.charge.declineCode });
        }
        await setPaymentRecovery(tx, input.paymentId, input.recovery, { whileRecovering: true });
        const { payment, effects } = await applyCharge(tx, input.paymentId, input.charge, accounts, input.attempt?.provider);
        await Promise.all(effects);
        if (input.refusedCancel) {
          const refusal = errorResponse('payment_not_cancelable', input.refusedCancel.message);
          await completeRecord(tx, input.refusedCancel.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, refusal);
        }
        recorded('payment', input.paymentId, payment.status, chargeResponse(payment));
        return payment.status;
      });
    },

    /**
     * Records a voided authorization: canceled on request, or expired uncaptured; or a recovering
     * payment canceled (`unusedReservation`: an attempt reserved that the cancel kept from being
     * made, given back).
     */
    async recordCancel(input: { paymentId: string; request: CancelRequest | null; unusedReservation?: number }): Promise<FinalResponse | null> {
      return step(sql, async (tx) => {
        if (input.unusedReservation !== undefined) await releaseCardAttempt(tx, input.paymentId, input.unusedReservation);
        const failure = input.request ? null : { code: 'authorization_expired', message: 'The authorization was not captured in time and was voided.' };
        const payment =
          (await transitionPayment(tx, input.paymentId, { status: 'canceled', failure })) ??
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
    /**
     * Records how an off-session payment of a card held by a hard decline ended, with nothing
     * charged (activities/routing.ts refuseHeldCard): `failed` or `declined` with the decline's
     * code and what the merchant can do, its event, and the first answer (402
     * `authentication_required` or `card_declined`, as that decline from the PSP would answer).
     */
    async recordOffSessionRefusal(input: { paymentId: string; refusal: OffSessionRefusal; idempotency: ScopedKey }): Promise<FinalResponse> {
      const { refusal } = input;
      return step(sql, async (tx) => {
        const payment =
          (await transitionPayment(tx, input.paymentId, { status: refusal.status, amountCapturedMinor: 0, failure: { code: refusal.code, message: refusal.message } })) ??
          (await lockPayment(tx, input.paymentId));
        await paymentEvent(tx, payment, refusal.status === 'failed' ? 'payment.failed' : 'payment.declined');
        const response = chargeResponse(payment);
        return recorded('payment', input.paymentId, refusal.status, await completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, response));
      });
    },

    async recordPaymentFailure(input: {
      paymentId: string;
      failure: { code: string; message: string };
      idempotency: ScopedKey;
    }): Promise<FinalResponse> {
      return step(sql, async (tx) => {
        // The payment's row first: a refusal of its compensation's refund stored before this (a notified
        // refund's failure, which the refund event's step acts on only once the payment has failed) is read here.
        const current = await lockPayment(tx, input.paymentId);
        const refused = compensatedByRefund.includes(input.failure.code) && current.provider !== null && (await storedCompensationRefusal(tx, current.provider, input.paymentId));
        const failure = refused
          ? { code: 'compensation_failed', message: `${input.failure.message} Compensation FAILED, needs an operator: ${current.provider} then refused that refund; the customer's money may still be at the PSP.` }
          : input.failure;
        const payment =
          (await transitionPayment(tx, input.paymentId, {
            status: 'failed',
            amountCapturedMinor: 0,
            failure,
          })) ?? current;
        await paymentEvent(tx, payment, 'payment.failed');
        const response = errorResponse('payment_failed', failure.message, { payment: paymentResource(payment) });
        return recorded('payment', input.paymentId, 'failed', await completeRecord(tx, input.idempotency, { workflowId: workflowId(), resourceId: input.paymentId }, response));
      });
    },
  };
}

export type PaymentSteps = ReturnType<typeof createPaymentSteps>;
