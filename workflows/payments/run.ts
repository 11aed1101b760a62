/**
 * The payment run composed of its phases (docs/ARCHITECTURE.md, "The payment workflow"): its
 * start (the handlers, or the state a run that continued another carried), authorize, the waits
 * in turn, and the end. The top of workflows/payments/: it imports every phase, none imports it.
 */
import { allHandlersFinished, condition, log, setHandler } from '@temporalio/workflow';
import { isOutcomePending, statusForCharge } from '../../domain/payments';
import type { ProviderCharge } from '../../provider/types';
import { FailureType, type FinalResponse } from '../../shared/definitions';
import { captureAskedQuery, challengeReturnUpdate, chargeReportSignal, firstAnswerUpdate, paymentStatusQuery, type PaymentCarried, type PaymentWorkflowInput } from '../../shared/payments';
import { records } from '../activities';
import { failureOfType } from '../saga';
import { awaitCapture } from './capture';
import { chargeAlongTheRoute } from './charge';
import { listenForCommands } from './commands';
import { compensate, pushCompensation } from './compensation';
import { recover, recovers, reserveFirstAttempt } from './recovery';
import { answered, newRunState, noteReport, setStatus, showCharge, type PhaseResult, type RunState } from './state';
import { awaitPsp, completeChallenge, refuseUnlessChallengeOpen } from './wait';

/**
 * One payment, from intent to its final state. Its id is derived from the scoped idempotency
 * key, so every delivery of the same request lands on this one run: its state in one object
 * (RunState, state.ts), its phases functions over it.
 */
export async function paymentWorkflow(input: PaymentWorkflowInput): Promise<FinalResponse> {
  const run = startRun(input);
  const response = await runPhases(run);
  // The first answer of a run that ended before it recorded a charge's outcome (compensated,
  // refused everywhere, order taken) is its result; a waiting firstAnswer update gets it.
  answered(run, response);
  await condition(allHandlersFinished);
  return response;
}

/** The run's state, and its handlers set: the queries, the first answer, the challenge's return, the PSP's reports. */
function startRun(input: PaymentWorkflowInput): RunState {
  const run = newRunState(input);
  // A run that continued another takes up its state before any handler is set: an update that
  // Temporal handed on to this run is judged (validator) as soon as its handler is set, by the
  // wait it resumes.
  if (input.continued) restore(run, input.continued);
  setHandler(paymentStatusQuery, () => run.status);
  setHandler(captureAskedQuery, () => run.captureAsked);
  setHandler(firstAnswerUpdate, async () => {
    run.updatesTaken++;
    await condition(() => run.firstAnswer !== undefined);
    return run.firstAnswer!;
  });
  setHandler(challengeReturnUpdate, (request) => completeChallenge(run, request), { validator: (_request) => refuseUnlessChallengeOpen(run) });
  setHandler(chargeReportSignal, (report) => {
    log.info('charge report', { payment_id: input.paymentId, source: report.source, event_id: report.eventId, charge_status: report.charge.status });
    // A webhook's report names the PSP it came from; one that does not names no charge.
    noteReport(run, report.charge, report.provider ?? null);
  });
  if (input.continued) listenForCommands(run);
  return run;
}

/** The state a run that continued as new carried: the wait it resumes is open from the start. */
function restore(run: RunState, carried: PaymentCarried): void {
  run.status = carried.status;
  run.firstAnswer = carried.firstAnswer;
  run.chargingAttempt = carried.chargingAttempt;
  run.routeMemo = carried.routeMemo;
  run.routePlan = carried.routePlan;
  run.reports.push(...carried.reports);
  // The compensation of an authorization (its void), as authorize or the wait's outcome pushed it.
  pushCompensation(run, carried.charge);
  run.accepting = true;
  if (carried.wait === 'psp') run.waitingChargeId = carried.charge.id;
}

/**
 * The phases of a payment, each over the one wait (state.ts waitForOutcome):
 * 1. authorize: charge along the route (charge.ts; the first attempt decides it) and record the
 *    outcome; a soft decline of a payment that asked for recovery is retried (recovery.ts);
 * 2. awaitPsp (wait.ts): the customer's 3-D Secure (requires_action) or the bank (processing),
 *    decided at the window's end by the PSP's own record of when the charge changed state
 *    (decideAtDeadline), and the waiting charge's outcome recorded (recordWaitOutcome);
 * 3. awaitCapture (capture.ts): a manual capture's capture or cancel, or a void when its window ends;
 * 4. compensate (compensation.ts): money that moved but cannot be booked is given back, and the reason recorded.
 * The lifecycle (statuses, commands, windows) is domain/payments.ts.
 */
async function runPhases(run: RunState): Promise<FinalResponse> {
  // A run that continued another resumes its wait, to the same deadline.
  const carried = run.input.continued;
  let charge: ProviderCharge;
  if (carried) {
    charge = carried.charge;
  } else {
    const authorized = await authorize(run);
    if (authorized.kind === 'final') return authorized.response;
    charge = authorized.charge;
    setStatus(run, statusForCharge(charge.status));
  }
  if (carried?.wait !== 'capture' && isOutcomePending(run.status)) {
    const waited = await awaitPsp(run, charge, carried);
    if (waited.kind === 'final') return waited.response;
    charge = waited.charge;
  }
  if (charge.status === 'requires_capture') await awaitCapture(run, charge, carried?.wait === 'capture' ? carried.deadline : undefined);
  return run.firstAnswer!;
}

/**
 * Charges along the route and records the outcome in one transaction: payment state, ledger,
 * outbox event and the operation's first answer (202 when the outcome must be waited for).
 */
async function authorize(run: RunState): Promise<PhaseResult> {
  const budgetFull = run.input.recovery ? await reserveFirstAttempt(run) : null;
  if (budgetFull) return budgetFull;
  const charged = await chargeAlongTheRoute(run);
  if (charged.kind === 'final') return charged;
  const charge = charged.charge;
  if (recovers(run, charge)) return recover(run, charge);
  showCharge(run, charge);
  pushCompensation(run, charge);
  try {
    answered(
      run,
      await records.recordChargeOutcome({
        payment: run.input,
        charge,
        attempt: { attempt: run.chargingAttempt.attempt!, provider: run.chargingAttempt.provider! },
      }),
    );
  } catch (error) {
    const refused = failureOfType(error, FailureType.LedgerRejected);
    if (!refused) throw error;
    return compensate(run, { code: 'ledger_rejected', message: `The ledger refused the payment: ${refused.message}.` }, run.input.idempotency);
  }
  return { kind: 'charge', charge };
}
