import { ApplicationFailure, allHandlersFinished, condition, log, patched, setHandler, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { ProviderCharge } from '../provider/types';
import {
  cancelUpdate,
  captureUpdate,
  FailureType,
  paymentStatusQuery,
  PaymentStatusKey,
  type CancelRequest,
  type CaptureRequest,
  type FinalResponse,
  type PaymentStatus,
  type PaymentWorkflowInput,
  type ScopedKey,
} from '../shared/definitions';
import { providerSubKey } from '../shared/keys';
import { providerSteps, records } from './activities';
import { Compensations, failureOfType } from './saga';

type Command = { kind: 'capture'; request: CaptureRequest } | { kind: 'cancel'; request: CancelRequest };

/**
 * patched() ids. Each guards a change that adds, removes or reorders commands, so runs begun
 * by the code before it still replay (test/histories/README.md). An id is never reused.
 */
const Patch = {
  /** The memo shows the provider's charge id and status, for an operator in the Web UI. */
  chargeMemo: 'charge-memo',
} as const;

/**
 * One payment, from intent to its final state. Its id is derived from the scoped
 * idempotency key, so every delivery of the same request lands on this one run.
 *
 * 1. Persist the intent (the order guard may refuse it: 409, recorded).
 * 2. Charge the provider under the payment's charge sub-key (lookup first on retries).
 * 3. Record the outcome in one transaction: payment state, ledger, outbox event and the
 *    first final response for the idempotency store.
 * 4. Manual capture: wait for a capture or cancel update, or void when the window ends.
 * Money that moved but cannot be booked is given back (compensation) and the reason recorded.
 */
export async function paymentWorkflow(input: PaymentWorkflowInput): Promise<FinalResponse> {
  let status: PaymentStatus = 'processing';
  const setStatus = (next: PaymentStatus | 'rejected') => {
    if (next !== 'rejected') status = next;
    upsertSearchAttributes([{ key: PaymentStatusKey, value: next }]);
  };
  setHandler(paymentStatusQuery, () => status);
  const compensations = new Compensations();
  /** Keeps the memo's view of the provider's charge current (a new command: patched). */
  const showCharge = (charge: ProviderCharge) => {
    if (patched(Patch.chargeMemo)) upsertMemo({ provider_charge_id: charge.id, charge_status: charge.status });
  };

  /**
   * A compensating refund. The provider answers a refund it cannot send with a failed refund
   * (no money moved), not an error: that must count as a failed compensation, or the payment
   * would say "Compensated" while the customer's money stayed with us.
   */
  const giveBack = async (chargeId: string, amountMinor: number) => {
    const refund = await providerSteps.refundCharge({ subKey: providerSubKey.compensation(input.paymentId), chargeId, amountMinor, reference: input.paymentId });
    if (refund.status === 'failed') {
      throw ApplicationFailure.nonRetryable(`the provider refused refund ${refund.id}: ${refund.failureMessage ?? refund.failureCode ?? 'no reason given'}`);
    }
    return refund;
  };

  /** Gives back money that moved, newest step first, then records why the payment failed. */
  async function failAfterMoneyMoved(reason: { code: string; message: string }, idempotency: ScopedKey): Promise<FinalResponse> {
    const { undone, failed } = await compensations.run();
    const message = [
      reason.message,
      undone.length ? `Compensated: ${undone.join('; ')}.` : '',
      failed.length ? `Compensation FAILED, needs an operator: ${failed.join('; ')}.` : '',
    ].filter(Boolean).join(' ');
    const response = await records.recordPaymentFailure({
      paymentId: input.paymentId,
      failure: { code: failed.length ? 'compensation_failed' : reason.code, message },
      idempotency,
    });
    setStatus('failed');
    return response;
  }

  const begun = await records.beginPayment(input);
  if (begun.kind === 'rejected') {
    setStatus('rejected');
    return begun.response;
  }

  let charge: ProviderCharge;
  try {
    charge = await providerSteps.chargePayment({
      paymentId: input.paymentId,
      amountMinor: input.amountMinor,
      currency: input.currency,
      paymentMethod: input.paymentMethod,
      capture: input.captureMethod === 'automatic',
      description: input.description,
    });
  } catch (error) {
    const refused = failureOfType(error, FailureType.ProviderRejected);
    if (!refused) throw error;
    // The provider refused the request itself: no charge exists under our key.
    const response = await records.recordPaymentFailure({
      paymentId: input.paymentId,
      failure: { code: 'provider_rejected', message: refused.message },
      idempotency: input.idempotency,
    });
    setStatus('failed');
    return response;
  }
  showCharge(charge);

  if (charge.status === 'succeeded') {
    const chargeId = charge.id;
    const amountMinor = charge.amountCapturedMinor;
    compensations.push(`refunded ${amountMinor} ${input.currency} of charge ${chargeId}`, () => giveBack(chargeId, amountMinor));
  } else if (charge.status === 'requires_capture') {
    const chargeId = charge.id;
    compensations.push(`voided authorization ${chargeId}`, () => providerSteps.voidCharge({ paymentId: input.paymentId, chargeId }));
  }

  let firstResponse: FinalResponse;
  try {
    firstResponse = await records.recordChargeOutcome({ payment: input, charge });
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    return failAfterMoneyMoved({ code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, input.idempotency);
  }
  setStatus(charge.status === 'requires_capture' ? 'requires_capture' : charge.status === 'succeeded' ? 'succeeded' : 'declined');
  if (charge.status !== 'requires_capture') return firstResponse;

  // Manual capture: the authorization waits for one command, or for its window to end.
  const chargeId = charge.id;
  let command: Command | undefined;
  let accepting = true;
  let commandResponse: FinalResponse | undefined;

  const acceptCommand = async (next: Command): Promise<FinalResponse> => {
    if (command) {
      // The validator admits one command; this only guards against two in one activation.
      throw ApplicationFailure.create({ type: refusalType(next), message: `payment ${input.paymentId} already has a ${command.kind} in progress`, nonRetryable: true });
    }
    command = next;
    await condition(() => commandResponse !== undefined);
    return commandResponse!;
  };
  const refuseUnlessAwaitingCapture = (kind: Command['kind']) => {
    if (!accepting || command || status !== 'requires_capture') {
      const what = command ? `already has a ${command.kind} in progress` : `is ${status}`;
      throw ApplicationFailure.create({ type: refusalType({ kind } as Command), message: `payment ${input.paymentId} ${what}`, nonRetryable: true });
    }
  };
  setHandler(captureUpdate, (request) => acceptCommand({ kind: 'capture', request }), {
    validator: (request) => {
      refuseUnlessAwaitingCapture('capture');
      if (request.amountMinor !== null && request.amountMinor > input.amountMinor) {
        throw ApplicationFailure.create({
          type: FailureType.CaptureExceedsAuthorized,
          message: `capture of ${request.amountMinor} exceeds the authorized ${input.amountMinor}`,
          nonRetryable: true,
        });
      }
    },
  });
  setHandler(cancelUpdate, (request) => acceptCommand({ kind: 'cancel', request }), {
    validator: (_request) => refuseUnlessAwaitingCapture('cancel'),
  });

  await condition(() => command !== undefined, input.authorizationWindowMs);
  accepting = false; // from here on validators refuse, so no update can wait forever
  const decided = command as Command | undefined;

  if (decided === undefined) {
    log.info('authorization window ended uncaptured; voiding', { paymentId: input.paymentId });
    showCharge(await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId }));
    await records.recordCancel({ paymentId: input.paymentId, request: null });
    setStatus('canceled');
  } else if (decided.kind === 'cancel') {
    showCharge(await providerSteps.voidCharge({ paymentId: input.paymentId, chargeId }));
    commandResponse = (await records.recordCancel({ paymentId: input.paymentId, request: decided.request }))!;
    setStatus('canceled');
  } else {
    const amountMinor = decided.request.amountMinor ?? input.amountMinor;
    const captured = await providerSteps.captureCharge({ paymentId: input.paymentId, chargeId, amountMinor });
    showCharge(captured);
    // Once captured, giving the money back means a refund, no longer a void.
    compensations.replace(`refunded ${captured.amountCapturedMinor} ${input.currency} of charge ${chargeId}`, () =>
      giveBack(chargeId, captured.amountCapturedMinor),
    );
    try {
      commandResponse = await records.recordCapture({ paymentId: input.paymentId, charge: captured, request: decided.request });
      setStatus('succeeded');
    } catch (error) {
      const refused = failureOfType(error, FailureType.LedgerRejected);
      if (!refused) throw error;
      commandResponse = await failAfterMoneyMoved(
        { code: 'ledger_rejected', message: `The ledger refused the capture: ${refused.message}.` },
        decided.request.idempotency,
      );
    }
  }
  // Let the update that carried the command return its response before the run closes.
  await condition(allHandlersFinished);
  return firstResponse;
}

function refusalType(command: Pick<Command, 'kind'>): string {
  return command.kind === 'capture' ? FailureType.PaymentNotCapturable : FailureType.PaymentNotCancelable;
}
