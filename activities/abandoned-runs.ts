import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Sql } from '../db/connect';
import { openDisputes } from '../db/disputes';
import { answerAbandonedRun, endWaitOfClosedRun, operationKindOfOperation, operationKindOfWorkflow, unfinishedRecords, waitingPayments, type HeldAtProvider, type WaitingPayment } from '../db/abandoned';
import { providerSubKey } from '../shared/keys';
import type { Logger } from '../lib/logger';
import type { PaymentProvider } from '../provider/types';
import { capabilitiesOf } from '../provider/registry';
import { chargeStates, statusesAccepting } from '../domain/payments';

/**
 * The charge states the sweeper voids at the PSP when no run is left: those whose payment status
 * accepts a cancel (the lifecycle table's: an open authorization, an open challenge).
 */
const voidableChargeStates: readonly string[] = chargeStates.filter((s) => statusesAccepting('cancel').includes(s));

/**
 * Finds operations whose run ended without recording an outcome (failed, terminated, timed
 * out, or never started and long since given up) and gives each one stable answer
 * (db/abandoned.ts), so no idempotency record stays `running` for good, whether or not the
 * client ever retries. The API does the same when a retry finds such a run first; the
 * first recording wins either way. Run by abandonedRunSweepWorkflow on its Temporal Schedule
 * (worker/schedules.ts), never by a timer in the process.
 */
export class AbandonedRunSweeper {
  constructor(
    private readonly deps: {
      sql: Sql;
      temporal: Client;
      /** The default provider (payments that record none are there). */
      provider: PaymentProvider;
      /** Every configured PSP by name; absent: the default one only. */
      providers?: Record<string, PaymentProvider>;
      logger: Logger;
      retentionSeconds: number;
      /** Starts a dispute's workflow again (lib/dispute.ts restartDispute, on the worker's task queue); absent: dispute runs are not looked at. */
      restartDispute?: (dispute: { provider: string; providerDisputeId: string }) => Promise<void>;
    },
    /** A run younger than this may still be starting: left alone. */
    private readonly minAgeSeconds = 60,
  ) {}

  /**
   * Deals with what it finds (at most `limit` records, `limit` waiting payments and `limit` open
   * disputes looked at): first it answers the operations that never answered, then it ends the
   * wait of the payments whose run closed while they waited, then it starts again the open
   * disputes whose run ended. Returns how many were answered, ended or started again.
   */
  async runOnce(limit = 200, minAgeSeconds = this.minAgeSeconds): Promise<number> {
    return (await this.answerUnansweredOperations(limit, minAgeSeconds)) + (await this.endWaitsOfClosedRuns(limit, minAgeSeconds)) + (await this.restartClosedDisputeRuns(limit, minAgeSeconds));
  }

  /** How the run ended, and what kind of operation it ran (from its workflow type); NOT_FOUND: no run. */
  private async runOf(workflowId: string): Promise<{ status: string; kind: 'payment' | 'refund' | null }> {
    try {
      const description = await this.deps.temporal.workflow.getHandle(workflowId).describe();
      return { status: description.status.name, kind: operationKindOfWorkflow[description.type] ?? null };
    } catch (error) {
      if (!(error instanceof WorkflowNotFoundError)) throw error;
      return { status: 'NOT_FOUND', kind: null };
    }
  }

  private async answerUnansweredOperations(limit: number, minAgeSeconds: number): Promise<number> {
    const { sql, logger, retentionSeconds } = this.deps;
    let answered = 0;
    for (const record of await unfinishedRecords(sql, minAgeSeconds, limit)) {
      const found = await this.runOf(record.workflow_id);
      // No run at all: the API claimed the key (a payment's intent with it) and died before it
      // could start the run. The operation says what the claim reserved.
      const run = found.status === 'NOT_FOUND' ? { ...found, kind: operationKindOfOperation[record.operation] ?? null } : found;
      const status = run.status;
      // Running: its outcome will come. Completed: the run recorded it, or the client's retry
      // takes it from the run's result (the update of a capture/cancel answers from its own run).
      if (status === 'RUNNING' || status === 'COMPLETED') continue;
      const moneyMoved = run.kind === 'payment' ? await this.chargeExists(record.resource_id) : null;
      const { flagged } = await answerAbandonedRun(sql, record, run, retentionSeconds, moneyMoved);
      answered++;
      logger.error(
        { workflow_id: record.workflow_id, resource_id: record.resource_id, operation: record.operation, status, flagged },
        flagged ? 'run ended without an outcome; payment flagged for an operator' : 'run ended without an outcome; operation_failed recorded',
      );
    }
    return answered;
  }

  /**
   * Payments that wait (for the merchant, the customer or the PSP: the lifecycle table's
   * waitingStatuses, which db/abandoned.ts reads) while their run
   * is closed: terminated from the Web UI or the CLI, or failed. Nobody would ever move them
   * again, and an authorization would stay held. Each is flagged for an operator with what the
   * PSP holds; an authorization (or a challenge) still open at the PSP is voided first, which is
   * safe because no run is left to capture it.
   */
  private async endWaitsOfClosedRuns(limit: number, minAgeSeconds: number): Promise<number> {
    let ended = 0;
    for (const payment of await waitingPayments(this.deps.sql, minAgeSeconds, limit)) {
      const run = await this.runOf(payment.workflow_id);
      if (run.status === 'RUNNING') continue;
      const held = await this.voidIfHeld(payment);
      const now = await endWaitOfClosedRun(this.deps.sql, payment, run.status, held);
      if (!now) continue;
      ended++;
      this.deps.logger.error(
        { alert: 'payment_needs_operator', payment_id: payment.id, workflow_id: payment.workflow_id, run_status: run.status, was: payment.status, now: now.status, psp_charge: held.charge ?? null, voided: held.voided },
        'payment run ended while it waited; flagged for an operator',
      );
    }
    return ended;
  }

  /**
   * Disputes the PSP has not closed whose run ended anyway (terminated from the Web UI or the
   * CLI, failed, timed out): a dispute is closed only when the PSP closes it, so its run is
   * started again (it asks the PSP first), as the next webhook or command would. A dispute with
   * a running run is left alone.
   */
  private async restartClosedDisputeRuns(limit: number, minAgeSeconds: number): Promise<number> {
    const { restartDispute, sql, logger } = this.deps;
    if (!restartDispute) return 0;
    let restarted = 0;
    for (const dispute of await openDisputes(sql, minAgeSeconds, limit)) {
      const run = await this.runOf(dispute.workflow_id);
      if (run.status === 'RUNNING') continue;
      await restartDispute({ provider: dispute.provider, providerDisputeId: dispute.provider_dispute_id });
      restarted++;
      logger.warn({ dispute_id: dispute.id, workflow_id: dispute.workflow_id, run_status: run.status }, 'dispute run ended while the PSP had not closed the dispute; started again');
    }
    return restarted;
  }

  /** What the PSP holds for the payment; an authorization or challenge still open there is voided. */
  private async voidIfHeld(payment: WaitingPayment): Promise<HeldAtProvider> {
    const { logger } = this.deps;
    // At the PSP holding the payment (payments.provider; none recorded: the default).
    const provider = (payment.provider !== null && this.deps.providers?.[payment.provider]) || this.deps.provider;
    let charge;
    if (!capabilitiesOf(provider).chargeSearch) {
      logger.warn({ payment_id: payment.id }, 'the PSP has no search by our reference; the payment is flagged without it');
      return { voided: false };
    }
    try {
      const charges = await provider.listChargesByReference(payment.id);
      charge = charges.find((c) => c.id === payment.provider_charge_id) ?? charges[0] ?? null;
    } catch (error) {
      logger.warn({ err: error, payment_id: payment.id }, 'provider lookup failed; the payment is flagged without it');
      return { voided: false };
    }
    if (!charge || !voidableChargeStates.includes(charge.status)) {
      return { charge: charge && { id: charge.id, status: charge.status }, voided: false };
    }
    try {
      // The sub-key the run's own void would have used: if it voided before it died, this is the same void.
      const voided = await provider.voidCharge({ idempotencyKey: providerSubKey.void(payment.id), chargeId: charge.id });
      return { charge: { id: voided.id, status: voided.status }, voided: voided.status === 'canceled' };
    } catch (error) {
      logger.warn({ err: error, payment_id: payment.id, charge_id: charge.id }, 'void failed; the payment is flagged with the authorization still held');
      return { charge: { id: charge.id, status: charge.status }, voided: false };
    }
  }

  /** Whether the provider holds a live charge of the payment (its reference), or null if it cannot say. */
  private async chargeExists(paymentId: string): Promise<boolean | null> {
    // Every configured PSP: a payment may have been charged at any PSP of its route.
    const providers = this.deps.providers ? Object.values(this.deps.providers) : [this.deps.provider];
    let unknown = false;
    for (const provider of providers) {
      // A PSP without search by our reference cannot say: the payment is flagged.
      if (!capabilitiesOf(provider).chargeSearch) {
        unknown = true;
        continue;
      }
      try {
        const charges = await provider.listChargesByReference(paymentId);
        if (charges.some((charge) => charge.status === 'succeeded' || charge.status === 'requires_capture')) return true;
      } catch (error) {
        this.deps.logger.warn({ err: error, payment_id: paymentId }, 'provider lookup failed; the payment will be flagged');
        unknown = true;
      }
    }
    return unknown ? null : false;
  }
}
