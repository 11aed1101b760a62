/**
 * A manual capture's wait: the merchant's capture or cancel, or a void when the authorization
 * window ends; and the capture itself, confirmed by the PSP's answer or its report. A phase over
 * the run's state (state.ts).
 */
import { allHandlersFinished, condition, log } from '@temporalio/workflow';
import type { ProviderCharge } from '../../provider/types';
import { FailureType } from '../../shared/definitions';
import type { CaptureRequest } from '../../shared/payments';
import { providerSteps, records } from '../activities';
import { failureOfType } from '../saga';
import { listenForCommands } from './commands';
import { compensate, giveBack, voidConfirmed } from './compensation';
import { captureReport, continueRunAsNew, continuing, setStatus, showCharge, waitForOutcome, type Command, type Continue, type Failure, type RunState } from './state';

/** A capture or cancel update, or a void when the authorization window ends (`resumedWindowEnd`: a run that continued another resumes its window). */
export async function awaitCapture(run: RunState, authorization: ProviderCharge, resumedWindowEnd?: number): Promise<void> {
  const { input } = run;
  const chargeId = authorization.id;
  listenForCommands(run);
  run.accepting = true;
  const windowEnd = resumedWindowEnd ?? Date.now() + input.authorizationWindowMs; // workflow time: deterministic on replay
  run.authorizationWindowEnd = windowEnd;
  const waited = await waitForOutcome<Command | Continue>(() => run.command ?? continuing(run), windowEnd - Date.now());
  if (waited?.kind === 'continue') return continueRunAsNew(run, { wait: 'capture', charge: authorization, deadline: windowEnd });
  const decided = waited;
  run.accepting = false; // from here on validators refuse, so no update can wait forever
  if (decided === undefined || decided.kind === 'cancel') {
    if (decided === undefined) log.info('authorization window ended uncaptured; voiding', { payment_id: input.paymentId });
    const voided = await voidConfirmed(run, chargeId, windowEnd);
    if ('failure' in voided) {
      // Refused or unconfirmed: the authorization may still hold the customer's money at the PSP.
      log.error('void not confirmed by the PSP; needs an operator', { payment_id: input.paymentId, code: voided.failure.code });
      const failed = await records.recordPaymentFailure({ paymentId: input.paymentId, failure: voided.failure, idempotency: decided?.request.idempotency ?? input.idempotency });
      setStatus(run, 'failed');
      if (decided) run.commandResponse = failed;
    } else {
      showCharge(run, voided.charge);
      const answer = await records.recordCancel({ paymentId: input.paymentId, request: decided?.request ?? null });
      if (decided) run.commandResponse = answer!;
      setStatus(run, 'canceled');
    }
  } else {
    await capture(run, chargeId, decided.request, windowEnd);
  }
  // Let the update that carried the command return its response before the run closes.
  await condition(allHandlersFinished);
}

/**
 * Captures the charge. A PSP whose captures are confirmed by notification (modifications
 * `notified`) answers the capture with the charge still `requires_capture`: the payment is not
 * shown `succeeded` until the PSP's report of the capture comes (its CAPTURE notification, a
 * `chargeReport`), within what is left of the authorization window. A report that the capture
 * failed (still `requires_capture`, with a decline code), or none by the window's end, voids
 * the authorization and fails the payment (`capture_failed`, `capture_unconfirmed`).
 */
async function capture(run: RunState, chargeId: string, request: CaptureRequest, windowEnd: number): Promise<void> {
  const { input } = run;
  const before = new Set(run.reports);
  run.captureAsked = { chargeId, amountMinor: request.amountMinor ?? input.amountMinor, currency: input.currency };
  const answered = await providerSteps.captureCharge({ paymentId: input.paymentId, ...run.captureAsked, ...run.chargingAttempt });
  const captured = answered.status === 'requires_capture' ? await waitForOutcome(() => captureReport(run, chargeId, before), Math.max(0, windowEnd - Date.now())) : answered;
  if (captured?.status !== 'succeeded') {
    const failure: Failure = captured
      ? { code: 'capture_failed', message: `The PSP refused the capture: ${captured.declineMessage ?? 'the capture failed'}.` }
      : { code: 'capture_unconfirmed', message: 'The PSP did not confirm the capture within the authorization window.' };
    log.warn('capture not confirmed by the PSP; voiding', { payment_id: input.paymentId, code: failure.code });
    run.commandResponse = (await compensate(run, failure, request.idempotency)).response;
    return;
  }
  showCharge(run, captured);
  // Once captured, giving the money back means a refund, no longer a void.
  run.compensations.replace(`refunded ${captured.amountCapturedMinor} ${input.currency} of charge ${chargeId}`, () => giveBack(run, chargeId, captured.amountCapturedMinor));
  try {
    run.commandResponse = await records.recordCapture({ paymentId: input.paymentId, charge: captured, request });
    setStatus(run, 'succeeded');
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    const failed = await compensate(run, { code: 'ledger_rejected', message: `The ledger refused the capture: ${refused.message}.` }, request.idempotency);
    run.commandResponse = failed.response;
  }
}
