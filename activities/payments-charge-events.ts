import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import { flagWaitingPaymentForOperator, paymentIntentFigures, paymentStatus, paymentWorkflowId } from '../db/payments';
import { markForwarded } from '../db/provider-events';
import { chargeDisagreements, chargeHoldsMoney, isOutcomePending, keepsNoMoney, recordsCharge, type PaymentStatus } from '../domain/payments';
import { lateChargeWorkflowId } from '../domain/ids';
import { startLateChargeWorkflow } from '../lib/late-charge';
import { capabilitiesOf, UnknownProviderError, type ProviderRegistry } from '../provider/registry';
import type { ProviderCharge } from '../provider/types';
import { FailureType } from '../shared/definitions';
import { CANCEL_FAILED, captureAskedQuery, chargeReportSignal, type CaptureAsked, type ChargeEventInput, type ChargeEventResult } from '../shared/payments';
import { providerSubKey } from '../shared/keys';
import { providerCall } from './provider-steps';
import { signalIfOpen, temporalOf } from './workflow-signals';

/**
 * What a PSP's charge event does to its payment, decided in one place (chargeEventWorkflow,
 * workflows/payments-charge-events.ts; the webhook route only verifies, stores and hands over).
 * An event whose own charge the payment already records as it is (most often the event of the
 * outcome its run has just recorded) could change nothing: it is `forward` without asking the PSP.
 * Otherwise the event is a hint, never a figure: the charge is retrieved from the PSP that holds it (at a
 * kind whose modifications are `notified`, which has no retrieval, the signed notification's
 * charge is the PSP's word) and checked against the payment (domain/payments.ts chargeDisagreements). A charge that agrees is
 * passed to the payment's run as a report, the way its own polls report (unless the run recorded
 * this very charge already, or has closed); one that disagrees, or that the PSP does not hold, is
 * held for an operator (the waiting payment flagged `needs_operator`, nothing passed on, nothing
 * booked). Money the PSP holds for a payment that ended without money, or that still waits in
 * `processing`, starts lateChargeWorkflow (once per charge), which gives it back if the payment
 * ends without it. Every part is safe to repeat: a retry after a crash does each at most once more,
 * and each is idempotent (a report applied forward-only, a flag set once, a workflow id per charge).
 */
export function createChargeEventSteps(deps: { sql: Sql; providers: ProviderRegistry; temporal?: Client }) {
  const temporal = (): Client => temporalOf(deps, 'charge events');
  return {
    async actOnChargeEvent(input: ChargeEventInput): Promise<ChargeEventResult> {
      const { sql } = deps;
      const payment = await paymentIntentFigures(sql, input.paymentId);
      if (!payment) throw ApplicationFailure.nonRetryable(`no payment ${input.paymentId} for the charge event ${input.eventId}`, 'PaymentMissing');
      const figures = { chargeId: payment.provider_charge_id, status: payment.status, amountCapturedMinor: payment.amount_captured_minor };
      if (input.charge && recordsCharge(figures, input.charge)) {
        // Most often the PSP's event for the outcome the run has just recorded: acting on it would
        // change nothing (a payment holding that charge so keeps its money), so the PSP is not asked.
        log.debug('provider webhook: the payment already records this charge as reported; nothing to act on');
        await markForwarded(sql, input.provider, input.eventId);
        return { disposition: 'forward', reason: null, lateCharge: false };
      }
      const provider = providerNamed(deps.providers, input.provider);
      let charge: ProviderCharge;
      const notified = input.charge !== undefined && input.charge !== null && capabilitiesOf(provider).modifications === 'notified';
      if (input.charge && notified) {
        // The PSP's signed notification is its word on the charge: there is nothing to retrieve.
        charge = notifiedCharge(input.charge, payment);
      } else {
        try {
          charge = await providerCall((signal) => provider.retrieveCharge(input.chargeId, { signal }));
        } catch (error) {
          if (!(error instanceof ApplicationFailure && error.type === FailureType.ProviderRejected)) throw error;
          return holdForOperator(sql, input, `the PSP does not hold charge ${input.chargeId} (${String(error.details?.[0] ?? 'refused')})`);
        }
      }
      const differences = chargeDisagreements({ amountMinor: payment.amount_minor, currency: payment.currency, captureMethod: payment.capture_method }, input.chargeId, charge);
      if (differences.length > 0) return holdForOperator(sql, input, `the PSP's charge ${input.chargeId} disagrees with the payment: ${differences.join('; ')}`);
      if (notified && payment.capture_method === 'manual' && isCaptureOutcome(charge)) {
        const asked = await captureAskedOf(sql, temporal(), input.paymentId);
        const disagrees = captureDisagreements(asked, charge, input.paymentId);
        if (disagrees.length > 0) return holdForOperator(sql, input, `the PSP's report of a capture of charge ${input.chargeId} disagrees with the capture asked for: ${disagrees.join('; ')}`);
      }
      if (charge.status !== input.reported.status || charge.amountCapturedMinor !== input.reported.amountCapturedMinor) {
        log.warn('provider webhook figures differ from the charge the PSP holds; the PSP’s charge is used', {
          event_status: input.reported.status,
          event_captured_minor: input.reported.amountCapturedMinor,
          charge_status: charge.status,
          charge_captured_minor: charge.amountCapturedMinor,
        });
      }
      const recorded = recordsCharge(figures, charge);
      await passOnToRun(sql, temporal, input, charge, recorded);
      // A notified cancel's outcome is awaited by the run that asked for it: the payment's (above), or its late charge's.
      if (notified && isCancelOutcome(charge)) await passOnToLateChargeRun(temporal(), input, charge);
      // A refused capture or cancel reports a modification a run asked for, not money that came late.
      const lateCharge = chargeHoldsMoney(charge) && charge.declineCode === null && (await giveBackLateMoney(sql, temporal(), input, notified ? charge : undefined));
      return { disposition: 'forward', reason: null, lateCharge };
    },
  };
}

export type ChargeEventSteps = ReturnType<typeof createChargeEventSteps>;

/**
 * The charge as a notified kind's signed notification says it is. A capture's names what it
 * captured (part of the authorization, perhaps), not what was authorized. An authorisation
 * (`requires_capture` timestamped `authorizedAt`, no failed capture, no modification merely
 * received) of an automatic-capture payment is its success: the PSP captures it itself and
 * confirms nothing more (a kind whose automatic capture is not notified), e.g. a 3-D Secure
 * payment decided by its authorisation's notification.
 */
function notifiedCharge(reported: ProviderCharge, payment: { amount_minor: number; capture_method: string }): ProviderCharge {
  if (reported.status === 'succeeded') return { ...reported, amountMinor: payment.amount_minor };
  const authorisation = reported.status === 'requires_capture' && reported.declineCode === null && reported.received !== true && typeof reported.authorizedAt === 'string';
  if (authorisation && payment.capture_method === 'automatic') return { ...reported, status: 'succeeded', amountCapturedMinor: reported.amountMinor, succeededAt: reported.authorizedAt ?? null };
  return reported;
}

/** A capture's outcome as the PSP reports it: captured (`succeeded`), or refused (still authorized, a decline code other than `cancel_failed`). */
function isCaptureOutcome(charge: ProviderCharge): boolean {
  return charge.status === 'succeeded' || (charge.status === 'requires_capture' && charge.declineCode !== null && charge.declineCode !== CANCEL_FAILED);
}

/** The capture the payment's run asked its PSP for (null: none asked, or no run). */
async function captureAskedOf(sql: Sql, temporal: Client, paymentId: string): Promise<CaptureAsked | null> {
  const workflowId = await paymentWorkflowId(sql, paymentId);
  if (!workflowId) return null;
  try {
    return await temporal.workflow.getHandle(workflowId).query(captureAskedQuery);
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
}

/**
 * How a PSP's report of a capture (at a kind whose captures are confirmed by notification)
 * disagrees with the capture the run asked for: none asked, another charge, another amount
 * (captured, or refused: the report names the capture's amount) or currency, or a reference
 * that is neither the payment's nor the capture's (its sub-key, what the capture was sent under).
 */
function captureDisagreements(asked: CaptureAsked | null, charge: ProviderCharge, paymentId: string): string[] {
  if (!asked) return ['no capture was asked for'];
  const amount = charge.status === 'succeeded' ? charge.amountCapturedMinor : charge.amountMinor;
  const references = [paymentId, providerSubKey.capture(paymentId)];
  return [
    charge.id !== asked.chargeId ? `charge ${charge.id}, not ${asked.chargeId}` : null,
    amount !== asked.amountMinor ? `amount ${amount}, not ${asked.amountMinor}` : null,
    charge.currency.toUpperCase() !== asked.currency.toUpperCase() ? `currency ${charge.currency}, not ${asked.currency}` : null,
    charge.reference !== undefined && !references.includes(charge.reference) ? `reference ${charge.reference}, not ${paymentId}` : null,
  ].filter((d): d is string => d !== null);
}

/** A void's outcome as the PSP reports it: canceled, or refused (still authorized, `cancel_failed`). */
function isCancelOutcome(charge: ProviderCharge): boolean {
  return charge.status === 'canceled' || (charge.status === 'requires_capture' && charge.declineCode === CANCEL_FAILED);
}

/**
 * Passes a notified cancel's outcome to the late-charge run of the charge, if one runs: it voided
 * the charge and waits for it. No such run (most often: the payment's own run voided it) is nothing.
 */
async function passOnToLateChargeRun(temporal: Client, input: ChargeEventInput, charge: ProviderCharge): Promise<void> {
  await signalIfOpen(temporal, lateChargeWorkflowId(input.provider, input.chargeId), chargeReportSignal, { source: 'webhook', eventId: input.eventId, charge });
}

/** The PSP client by its configured name; a name this worker has no client for fails the step for good. */
function providerNamed(providers: ProviderRegistry, name: string) {
  try {
    return providers.get(name);
  } catch (error) {
    if (error instanceof UnknownProviderError) throw ApplicationFailure.nonRetryable(error.message, 'UnknownProvider');
    throw error;
  }
}

/**
 * A payment whose charge at the PSP disagrees with it is flagged for an operator while it waits
 * (failure.code `needs_operator`): its status stays, nothing is passed to its run, and no money is
 * booked from the disagreeing figures.
 */
async function holdForOperator(sql: Sql, input: ChargeEventInput, reason: string): Promise<ChargeEventResult> {
  const message = `A webhook from ${input.provider} (event ${input.eventId}) was not applied: ${reason}. An operator must reconcile it with the PSP.`;
  const flagged = await flagWaitingPaymentForOperator(sql, input.paymentId, message);
  log.warn('provider webhook held for an operator: the PSP’s charge disagrees with the payment', { reason, flagged, payment_id: input.paymentId });
  return { disposition: 'held_for_operator', reason, lateCharge: false };
}

/**
 * Signals the charge to the payment's run, unless its run has it already (most often the event for
 * the charge the run has just recorded: a signal would reach the run while its first workflow task
 * completes, and the server would fail that task and have it run again); a run that has closed is
 * final, and the event changes nothing. The event is then marked forwarded.
 */
async function passOnToRun(sql: Sql, temporal: () => Client, input: ChargeEventInput, charge: ProviderCharge, recorded: boolean): Promise<void> {
  const workflowId = await paymentWorkflowId(sql, input.paymentId);
  if (workflowId && !recorded && !(await signalIfOpen(temporal(), workflowId, chargeReportSignal, { source: 'webhook', eventId: input.eventId, charge, provider: input.provider }))) {
    log.info('provider webhook for a payment whose run has closed; nothing to apply', { payment_id: input.paymentId });
  }
  await markForwarded(sql, input.provider, input.eventId);
}

/**
 * Money the PSP holds for a payment that ended without money (expired, canceled, declined,
 * failed) is given back by lateChargeWorkflow: the payment's run has closed and would never see
 * it. Started for a payment still waiting (`processing`, `requires_action`) too: its run may have
 * left its wait (taken its last look at the PSP, or, at a PSP without retrieval, reached the
 * window's end and cancelled) just before the debit succeeded or the customer's authentication
 * came through, then expire and close without this event; the workflow waits for the payment to
 * be final and gives nothing back if it succeeded. One workflow id per
 * charge, so every event of it starts it once. True when it runs for this charge.
 */
async function giveBackLateMoney(sql: Sql, temporal: Client, input: ChargeEventInput, notifiedCharge: ProviderCharge | undefined): Promise<boolean> {
  const status = await paymentStatus(sql, input.paymentId);
  if (!status || !(keepsNoMoney(status) || isOutcomePending(status))) return false;
  // At a kind without retrieval the run acts on the signed notification's charge.
  const lateCharge = { provider: input.provider, chargeId: input.chargeId, paymentId: input.paymentId, eventId: input.eventId, ...(notifiedCharge ? { charge: notifiedCharge } : {}) };
  const started = await startLateChargeWorkflow(temporal, Context.current().info.taskQueue, lateCharge);
  if (started) log.info('late charge workflow started', { workflow_id: lateChargeWorkflowId(input.provider, input.chargeId), payment_status: status });
  return true;
}
