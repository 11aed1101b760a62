import type { Sql } from '../db/connect';
import {
  beginRun,
  disputesForReconciliation,
  finishRun,
  paymentIdsByCharge,
  paymentsCapturedIn,
  paymentsForReconciliation,
  refundsBookedIn,
  refundsForReconciliation,
  type Finding,
  type Figures,
  type OurDispute,
  type OurPayment,
  type OurRefund,
  type RunIdentity,
} from '../db/reconciliation';
import type { Logger } from '../lib/logger';
import type { WorkerMetrics } from '../lib/metrics';
import type { DisputeProvider, PaymentProvider, ProviderBalanceTransaction, ProviderCharge, ProviderDispute } from '../provider/types';
import { knownProviderDisputes } from '../db/disputes';
import { keepsNoMoney } from '../domain/payments';
import { paymentEventTypes, type LateChargeInput } from '../shared/payments';
import type { ReconciliationRunSummary, TimeWindow } from '../shared/reconciliation';
import { providerSubKey } from '../shared/keys';
import { capabilitiesOf } from '../provider/registry';

/**
 * How far beyond the window the PSP's report is read, on both sides. Our ledger books a
 * capture a moment after the PSP made its balance transaction, so at a window's edge one
 * side can fall just outside it: read wide, match everything read, but report only what is
 * anchored inside the window (the PSP's time if the PSP has it, else ours).
 */
export const REPORT_MARGIN_MS = 15 * 60_000;
const PAGE_SIZE = 100;

/** Statuses in which we hold the payment's money as captured at the PSP. */
const capturedStatuses = new Set(['succeeded', 'refunded']);

export interface ReconciliationDeps {
  sql: Sql;
  /** The PSP clients by configured name (PROVIDERS), the default first. */
  providers: Record<string, PaymentProvider>;
  /** Where a payment that records no provider is looked for: default, the first of `providers`. */
  defaultProvider?: string;
  metrics?: WorkerMetrics;
  logger: Logger;
}

/** Our side of a window, loaded for the comparison. */
export interface OurSide {
  payments: Map<string, OurPayment>;
  /** Payment id by the PSP charge id it recorded. */
  paymentByCharge: Map<string, string>;
  refunds: Map<string, OurRefund>;
  /** Payments whose capture we booked inside the window. */
  capturedInWindow: string[];
  /** Refunds we booked inside the window. */
  refundedInWindow: string[];
  /**
   * Our disputes at this PSP by the PSP's dispute id: those the report's dispute lines name and
   * those with a posting booked inside the window.
   */
  disputes: Map<string, OurDispute>;
}

/** The report lines of a dispute's money at the PSP, and our posting each one matches. */
const disputeMoney = {
  dispute: { posted: (d: OurDispute) => d.ledger_withdrawal_minor, at: (d: OurDispute) => d.withdrawn_at },
  dispute_reversal: { posted: (d: OurDispute) => d.ledger_reinstatement_minor, at: (d: OurDispute) => d.reinstated_at },
  dispute_second: { posted: (d: OurDispute) => d.ledger_second_withdrawal_minor, at: (d: OurDispute) => d.second_withdrawn_at },
} as const;
type DisputeLineType = keyof typeof disputeMoney;
const isDisputeLine = (txn: ProviderBalanceTransaction): txn is ProviderBalanceTransaction & { type: DisputeLineType } => txn.type in disputeMoney;

const chargeFigures = (txn: ProviderBalanceTransaction): Figures => ({
  object: 'balance_transaction',
  id: txn.id,
  type: txn.type,
  source: txn.source,
  charge_id: txn.chargeId,
  reference: txn.reference,
  amount_minor: txn.amountMinor,
  fee_minor: txn.feeMinor,
  currency: txn.currency,
  status: txn.status,
  created_at: txn.createdAt.toISOString(),
});

const paymentFigures = (p: OurPayment): Figures => ({
  object: 'payment',
  id: p.id,
  status: p.status,
  amount_minor: p.amount_minor,
  amount_captured_minor: p.amount_captured_minor,
  currency: p.currency,
  provider_charge_id: p.provider_charge_id,
  ledger_captured_minor: p.ledger_captured_minor,
  captured_at: p.captured_at?.toISOString() ?? null,
});

const refundFigures = (r: OurRefund): Figures => ({
  object: 'refund',
  id: r.id,
  payment_id: r.payment_id,
  status: r.status,
  amount_minor: r.amount_minor,
  currency: r.currency,
  provider_refund_id: r.provider_refund_id,
  booked_at: r.booked_at?.toISOString() ?? null,
});

const disputeFigures = (d: OurDispute): Figures => ({
  object: 'dispute',
  id: d.id,
  payment_id: d.payment_id,
  provider_dispute_id: d.provider_dispute_id,
  stage: d.stage,
  status: d.status,
  amount_minor: d.amount_minor,
  fee_minor: d.fee_minor,
  currency: d.currency,
  ledger_withdrawal_minor: d.ledger_withdrawal_minor,
  withdrawn_at: d.withdrawn_at?.toISOString() ?? null,
  ledger_reinstatement_minor: d.ledger_reinstatement_minor,
  reinstated_at: d.reinstated_at?.toISOString() ?? null,
  ledger_second_withdrawal_minor: d.ledger_second_withdrawal_minor,
  second_withdrawn_at: d.second_withdrawn_at?.toISOString() ?? null,
});

const liveChargeFigures = (c: ProviderCharge): Figures => ({
  object: 'charge',
  id: c.id,
  status: c.status,
  amount_minor: c.amountMinor,
  amount_captured_minor: c.amountCapturedMinor,
  amount_refunded_minor: c.amountRefundedMinor,
  currency: c.currency,
});

/**
 * Compares one window of the PSP's balance transactions with our payments, refunds, disputes and
 * ledger, and returns every difference, at most one per (kind, subject). `transactions` are
 * the PSP's for the window and its margin; `chargesOf` looks a payment's charges up at the
 * PSP when the report has none of them (a last check before calling money missing); null at a
 * kind without chargeSearch: the report is the only word, and a capture it lacks is missing.
 */
export async function compareWindow(
  window: { from: Date; to: Date },
  transactions: ProviderBalanceTransaction[],
  ours: OurSide,
  chargesOf: ((paymentId: string) => Promise<ProviderCharge[]>) | null,
  /**
   * Several PSPs: the one reconciled, and the default (where payments that record
   * none are). A payment held at another PSP is not expected here: a charge of it here is a
   * duplicate_charge, its captures and refunds are that PSP's to report. Absent: one PSP.
   */
  where?: { provider: string; defaultProvider: string },
): Promise<Finding[]> {
  const atThisProvider = (payment: OurPayment) => !where || (payment.provider ?? where.defaultProvider) === where.provider;
  const inWindow = (at: Date) => at >= window.from && at < window.to;
  const findings = new Map<string, Finding>();
  const add = (finding: Finding) => {
    const key = `${finding.kind}|${finding.subject}`;
    if (!findings.has(key)) findings.set(key, finding);
  };
  const charges = transactions.filter((t) => t.type === 'charge');
  const refunds = transactions.filter((t) => t.type === 'refund');
  const disputeLines = transactions.filter(isDisputeLine);
  /** The PSP's charges per payment of ours (by our reference or by the charge id we recorded). */
  const chargesByPayment = new Map<string, Map<string, ProviderBalanceTransaction>>();
  const paymentOf = (txn: ProviderBalanceTransaction) =>
    (txn.reference !== null && ours.payments.has(txn.reference) ? txn.reference : undefined) ?? ours.paymentByCharge.get(txn.chargeId);
  for (const txn of charges) {
    const paymentId = paymentOf(txn);
    if (paymentId === undefined) continue;
    const byCharge = chargesByPayment.get(paymentId) ?? new Map<string, ProviderBalanceTransaction>();
    if (!byCharge.has(txn.chargeId)) byCharge.set(txn.chargeId, txn);
    chargesByPayment.set(paymentId, byCharge);
  }
  const refundedAtProvider = (chargeId: string) => refunds.filter((t) => t.chargeId === chargeId).reduce((sum, t) => sum - t.amountMinor, 0);

  /** Our captured payment against the PSP's charge (a report line or the live charge). */
  const compareCapture = (payment: OurPayment, provider: { currency: string; amountMinor: number; figures: Figures; chargeId: string }) => {
    const base = { subject: payment.id, paymentId: payment.id, refundId: null, providerReference: provider.chargeId, ours: paymentFigures(payment), provider: provider.figures };
    if (provider.currency !== payment.currency) add({ kind: 'currency_mismatch', ...base });
    if (provider.amountMinor !== payment.amount_captured_minor || provider.amountMinor !== payment.ledger_captured_minor) add({ kind: 'amount_mismatch', ...base });
  };

  // 1. Every charge the PSP reports in the window.
  for (const txn of charges.filter((t) => inWindow(t.createdAt))) {
    const paymentId = paymentOf(txn);
    const payment = paymentId === undefined ? undefined : ours.payments.get(paymentId);
    if (!payment) {
      add({ kind: 'unknown_at_provider_side', subject: txn.chargeId, paymentId: null, refundId: null, providerReference: txn.chargeId, ours: null, provider: chargeFigures(txn) });
      continue;
    }
    const all = [...(chargesByPayment.get(payment.id)?.values() ?? [])];
    const isOurCharge = atThisProvider(payment) && (payment.provider_charge_id === null || txn.chargeId === payment.provider_charge_id);
    if (all.length > 1 || !isOurCharge) {
      add({
        kind: 'duplicate_charge',
        subject: payment.id,
        paymentId: payment.id,
        refundId: null,
        providerReference: txn.chargeId,
        ours: paymentFigures(payment),
        provider: { object: 'list', charges: all.map(chargeFigures) },
      });
    }
    if (!isOurCharge) continue;
    if (!capturedStatuses.has(payment.status)) {
      // A payment that ended without money (failed, expired, canceled, declined) after its charge
      // was given back (compensation, or a late success refunded) holds nothing: consistent.
      const compensated = keepsNoMoney(payment.status) && refundedAtProvider(txn.chargeId) === txn.amountMinor;
      if (!compensated) {
        add({ kind: 'status_mismatch', subject: payment.id, paymentId: payment.id, refundId: null, providerReference: txn.chargeId, ours: paymentFigures(payment), provider: chargeFigures(txn) });
      }
      continue;
    }
    compareCapture(payment, { currency: txn.currency, amountMinor: txn.amountMinor, figures: chargeFigures(txn), chargeId: txn.chargeId });
  }

  // 2. Every capture we booked in the window: the PSP must hold it.
  for (const paymentId of ours.capturedInWindow) {
    const payment = ours.payments.get(paymentId);
    if (!payment || !capturedStatuses.has(payment.status) || !atThisProvider(payment)) continue;
    const reported = payment.provider_charge_id === null ? undefined : chargesByPayment.get(payment.id)?.get(payment.provider_charge_id);
    if (reported) {
      // Reported just outside the window (the margin): its figures still have to agree.
      if (!inWindow(reported.createdAt)) compareCapture(payment, { currency: reported.currency, amountMinor: reported.amountMinor, figures: chargeFigures(reported), chargeId: reported.chargeId });
      continue;
    }
    const live = chargesOf === null ? undefined : (await chargesOf(payment.id)).find((c) => c.id === payment.provider_charge_id);
    if (!live) {
      add({ kind: 'missing_at_provider', subject: payment.id, paymentId: payment.id, refundId: null, providerReference: payment.provider_charge_id, ours: paymentFigures(payment), provider: null });
    } else if (live.status !== 'succeeded') {
      add({ kind: 'status_mismatch', subject: payment.id, paymentId: payment.id, refundId: null, providerReference: live.id, ours: paymentFigures(payment), provider: liveChargeFigures(live) });
    } else {
      compareCapture(payment, { currency: live.currency, amountMinor: live.amountCapturedMinor, figures: liveChargeFigures(live), chargeId: live.id });
    }
  }

  // 3. Every refund the PSP reports in the window.
  for (const txn of refunds.filter((t) => inWindow(t.createdAt))) {
    const refund = txn.reference === null ? undefined : ours.refunds.get(txn.reference);
    const figures = chargeFigures(txn);
    if (refund) {
      const base = { subject: refund.id, paymentId: refund.payment_id, refundId: refund.id, providerReference: txn.source, ours: refundFigures(refund), provider: figures };
      if (refund.status !== 'succeeded') add({ kind: 'status_mismatch', ...base });
      if (txn.currency !== refund.currency) add({ kind: 'currency_mismatch', ...base });
      if (-txn.amountMinor !== refund.amount_minor) add({ kind: 'amount_mismatch', ...base });
      continue;
    }
    // Our compensation gives the charge of a payment that ended without money back under the
    // payment's own reference (a failed payment's, or a late success after it expired or was canceled).
    const compensated = txn.reference !== null ? ours.payments.get(txn.reference) : undefined;
    if (compensated && keepsNoMoney(compensated.status)) continue;
    // The reconciler's own refund of a duplicate charge here, for a payment another PSP holds.
    if (compensated && !atThisProvider(compensated) && txn.chargeId !== compensated.provider_charge_id) continue;
    // A refund nobody here asked for (e.g. made in the PSP's dashboard): money gone that we still book as ours.
    const paymentId = compensated?.id ?? ours.paymentByCharge.get(txn.chargeId) ?? null;
    add({ kind: 'unknown_at_provider_side', subject: txn.source, paymentId, refundId: null, providerReference: txn.source, ours: paymentId ? paymentFigures(ours.payments.get(paymentId)!) : null, provider: figures });
  }

  // 4. Every refund we booked in the window: the PSP must hold it.
  for (const refundId of ours.refundedInWindow) {
    const refund = ours.refunds.get(refundId);
    if (!refund || refund.status !== 'succeeded') continue;
    const refunded = ours.payments.get(refund.payment_id);
    if (refunded && !atThisProvider(refunded)) continue;
    const reported = refunds.find((t) => t.reference === refund.id || (refund.provider_refund_id !== null && t.source === refund.provider_refund_id));
    if (!reported) {
      add({ kind: 'missing_at_provider', subject: refund.id, paymentId: refund.payment_id, refundId: refund.id, providerReference: refund.provider_refund_id, ours: refundFigures(refund), provider: null });
    } else if (!inWindow(reported.createdAt) && -reported.amountMinor !== refund.amount_minor) {
      add({ kind: 'amount_mismatch', subject: refund.id, paymentId: refund.payment_id, refundId: refund.id, providerReference: reported.source, ours: refundFigures(refund), provider: chargeFigures(reported) });
    }
  }

  /**
   * Our dispute against one of its report lines: the dispute's amount (and, for the withdrawal,
   * its fee) and what our posting moved in provider_receivable (the line's net: amount less fee)
   * agree. No posting for the line: the PSP moved money our dispute has not (still an inquiry
   * here, or not won here).
   */
  const compareDisputeMoney = (dispute: OurDispute, txn: ProviderBalanceTransaction & { type: DisputeLineType }) => {
    const base = { subject: dispute.id, paymentId: dispute.payment_id, refundId: null, providerReference: dispute.provider_dispute_id, ours: disputeFigures(dispute), provider: chargeFigures(txn) };
    const posted = disputeMoney[txn.type].posted(dispute);
    if (posted === null) {
      add({ kind: 'status_mismatch', ...base });
      return;
    }
    if (txn.currency !== dispute.currency) add({ kind: 'currency_mismatch', ...base });
    const feeAgrees = txn.type !== 'dispute' || txn.feeMinor === dispute.fee_minor;
    if (Math.abs(txn.amountMinor) !== dispute.amount_minor || !feeAgrees || posted !== txn.amountMinor - txn.feeMinor) add({ kind: 'amount_mismatch', ...base });
  };
  const disputeHere = (dispute: OurDispute) => !where || dispute.provider === where.provider;

  // 5. Every dispute line the PSP reports in the window. One whose dispute we never saw is no
  // finding: the run starts that dispute's workflow (Reconciliation.unseenDisputes).
  for (const txn of disputeLines.filter((t) => inWindow(t.createdAt))) {
    const dispute = ours.disputes.get(txn.source);
    if (dispute && disputeHere(dispute)) compareDisputeMoney(dispute, txn);
  }

  // 6. Every dispute posting we booked in the window that moves money at the PSP: the PSP must report it.
  for (const dispute of [...ours.disputes.values()].filter(disputeHere)) {
    for (const type of Object.keys(disputeMoney) as DisputeLineType[]) {
      const bookedAt = disputeMoney[type].at(dispute);
      if (bookedAt === null || !inWindow(bookedAt)) continue;
      const reported = disputeLines.find((t) => t.type === type && t.source === dispute.provider_dispute_id);
      if (!reported) {
        add({ kind: 'missing_at_provider', subject: dispute.id, paymentId: dispute.payment_id, refundId: null, providerReference: dispute.provider_dispute_id, ours: disputeFigures(dispute), provider: null });
      } else if (!inWindow(reported.createdAt)) {
        compareDisputeMoney(dispute, reported);
      }
    }
  }

  return [...findings.values()].sort((a, b) => a.kind.localeCompare(b.kind) || a.subject.localeCompare(b.subject));
}

/**
 * One provider's reconciliation of one window: reads the PSP's balance-transaction report,
 * compares it with our payments, refunds, disputes and ledger (compareWindow), records the run and
 * each discrepancy (db/reconciliation.ts), and raises an operator alert for each new one:
 * an error log line `reconciliation discrepancy` and reconciliation_discrepancies_total.
 *
 * It also counts each reconciled payment's effects (effects_per_payment,
 * duplicate_effects_total), which the PSP's report alone cannot show: the PSP's charges
 * for it, our ledger transactions of its capture and its events, exactly one each. This is
 * what the timer-driven reconciler of old did; it now runs over the same window, from the
 * report instead of one PSP call per payment.
 */
export class Reconciliation {
  constructor(private readonly deps: ReconciliationDeps) {}

  /**
   * `giveBackLateMoney`: starts lateChargeWorkflow for a charge the PSP captured for a payment
   * that ended without money (a late success whose webhook was lost); the job's activity passes
   * it. Without it (no Temporal client) such a finding is only reported.
   */
  async run(
    identity: RunIdentity,
    heartbeat: (details: unknown) => void = () => {},
    giveBackLateMoney?: (input: LateChargeInput) => Promise<boolean>,
    reportUnseenDispute?: (dispute: ProviderDispute) => Promise<unknown>,
  ): Promise<ReconciliationRunSummary> {
    const { sql, logger, metrics } = this.deps;
    const provider = this.deps.providers[identity.provider];
    if (!provider) throw new UnknownProviderError(identity.provider, Object.keys(this.deps.providers));
    const window = { from: new Date(identity.window.from), to: new Date(identity.window.to) };
    const run = await beginRun(sql, identity);

    const transactions = await this.readReport(provider, window, heartbeat);
    const ours = await this.loadOurSide(identity.provider, window, transactions);
    const where = { provider: identity.provider, defaultProvider: this.deps.defaultProvider ?? Object.keys(this.deps.providers)[0]! };
    const search = capabilitiesOf(provider).chargeSearch;
    const findings = await compareWindow(window, transactions, ours, search ? (paymentId) => provider.listChargesByReference(paymentId) : null, where);
    this.countEffects(ours, transactions, window, where);
    await this.giveBackDuplicates(provider, identity.provider, where.defaultProvider, findings, ours);

    const recorded = await sql.begin((tx) => finishRun(tx, run, findings, transactions.length));
    const fresh = recorded.filter((f) => f.isNew);
    for (const finding of fresh) {
      metrics?.reconciliationDiscrepancies.inc({ provider: identity.provider, kind: finding.kind });
      logger.error(
        {
          alert: 'reconciliation_discrepancy',
          provider: identity.provider,
          run_id: run.id,
          discrepancy_id: finding.discrepancyId,
          kind: finding.kind,
          payment_id: finding.paymentId,
          refund_id: finding.refundId,
          provider_reference: finding.providerReference,
          window: identity.window,
          ours: finding.ours,
          provider_figures: finding.provider,
        },
        'reconciliation discrepancy',
      );
    }
    // Money the PSP kept for a payment that ended without money: the webhook that would have had
    // it given back never came (lost). Given back now, once per charge (the workflow's id).
    for (const finding of findings) {
      const payment = finding.paymentId ? ours.payments.get(finding.paymentId) : undefined;
      if (!giveBackLateMoney || finding.kind !== 'status_mismatch' || !payment || !keepsNoMoney(payment.status) || finding.provider?.type !== 'charge') continue;
      const chargeId = String(finding.providerReference);
      const started = await giveBackLateMoney({ provider: identity.provider, chargeId, paymentId: payment.id, eventId: `reconciliation:${run.id}` });
      logger.warn({ provider: identity.provider, run_id: run.id, payment_id: payment.id, charge_id: chargeId, started }, 'money kept at the PSP for a payment that ended without money: late charge workflow started');
    }
    // A PSP whose disputes are its notifications has no list of them: nothing to find there.
    if (reportUnseenDispute && provider.disputes && capabilitiesOf(provider).disputeSource === 'retrieval') {
      for (const dispute of await this.unseenDisputes(provider.disputes, identity.provider, window, heartbeat)) {
        await reportUnseenDispute(dispute);
        logger.warn({ provider: identity.provider, run_id: run.id, provider_dispute_id: dispute.id, charge_id: dispute.chargeId }, 'a dispute the PSP reports that we never saw (its webhook was lost): dispute workflow started');
      }
    }
    const status = findings.length === 0 ? 'clean' : 'discrepancies';
    metrics?.reconciliationRuns.inc({ provider: identity.provider, status });
    logger.info({ provider: identity.provider, run_id: run.id, window: identity.window, status, discrepancies: findings.length, new: fresh.length, transactions: transactions.length }, 'reconciliation run finished');
    return { runId: run.id, provider: identity.provider, window: identity.window, status, discrepancyCount: findings.length, newDiscrepancyCount: fresh.length };
  }

  /**
   * The PSP's disputes opened in the window (and its margin) that no dispute row of ours records:
   * their webhooks were lost. The PSP's list is read page by page (only that window's, where the
   * PSP can filter by creation).
   */
  private async unseenDisputes(disputes: DisputeProvider, providerName: string, window: { from: Date; to: Date }, heartbeat: (details: unknown) => void): Promise<ProviderDispute[]> {
    const from = window.from.getTime() - REPORT_MARGIN_MS;
    const to = window.to.getTime() + REPORT_MARGIN_MS;
    const inWindow: ProviderDispute[] = [];
    let startingAfter: string | undefined;
    for (;;) {
      const page = await disputes.listDisputes({ limit: PAGE_SIZE, created: { from: new Date(from), to: new Date(to) }, ...(startingAfter !== undefined ? { startingAfter } : {}) });
      inWindow.push(...page.data.filter((d) => Date.parse(d.createdAt) >= from && Date.parse(d.createdAt) < to));
      heartbeat({ disputes: inWindow.length });
      if (!page.hasMore || page.data.length === 0) break;
      startingAfter = page.data[page.data.length - 1]!.id;
    }
    if (inWindow.length === 0) return [];
    const known = await knownProviderDisputes(this.deps.sql, providerName, inWindow.map((d) => d.id));
    return inWindow.filter((d) => !known.has(d.id));
  }

  /** The PSP's balance transactions for the window and its margin, every page. */
  private async readReport(provider: PaymentProvider, window: { from: Date; to: Date }, heartbeat: (details: unknown) => void): Promise<ProviderBalanceTransaction[]> {
    const query = { from: new Date(window.from.getTime() - REPORT_MARGIN_MS), to: new Date(window.to.getTime() + REPORT_MARGIN_MS) };
    const all: ProviderBalanceTransaction[] = [];
    let startingAfter: string | undefined;
    for (;;) {
      const page = await provider.listBalanceTransactions({ ...query, limit: PAGE_SIZE, ...(startingAfter !== undefined ? { startingAfter } : {}) });
      all.push(...page.data);
      heartbeat({ transactions: all.length });
      if (!page.hasMore || page.data.length === 0) return all;
      startingAfter = page.data[page.data.length - 1]!.id;
    }
  }

  private async loadOurSide(providerName: string, window: { from: Date; to: Date }, transactions: ProviderBalanceTransaction[]): Promise<OurSide> {
    const { sql } = this.deps;
    const capturedInWindow = await paymentsCapturedIn(sql, window);
    const refundedInWindow = await refundsBookedIn(sql, window);
    const byCharge = await paymentIdsByCharge(sql, [...new Set(transactions.map((t) => t.chargeId))]);
    const references = transactions.map((t) => t.reference).filter((r): r is string => r !== null);
    const refunds = await refundsForReconciliation(sql, [...new Set([...refundedInWindow, ...references.filter((r) => r.startsWith('re_'))])]);
    const paymentIds = new Set([...capturedInWindow, ...byCharge.map((p) => p.id), ...references.filter((r) => r.startsWith('pay_')), ...refunds.map((r) => r.payment_id)]);
    const payments = await paymentsForReconciliation(sql, [...paymentIds], paymentEventTypes);
    const disputes = await disputesForReconciliation(sql, providerName, window, [...new Set(transactions.filter(isDisputeLine).map((t) => t.source))]);
    return {
      payments: new Map(payments.map((p) => [p.id, p])),
      paymentByCharge: new Map(byCharge.map((p) => [p.provider_charge_id, p.id])),
      refunds: new Map(refunds.map((r) => [r.id, r])),
      capturedInWindow,
      refundedInWindow,
      disputes: new Map(disputes.map((d) => [d.provider_dispute_id, d])),
    };
  }

  /**
   * A charge found at this PSP for a payment another PSP holds (a late success at A after the
   * payment moved to B, which the failover rule makes impossible, checked anyway): the
   * customer paid twice, so this one is given back at once, refunded (or its authorization
   * voided) under a key derived from the payment and the charge, and the finding says so
   * (`provider.compensation`). A duplicate at the PSP holding the payment stays an operator's call.
   */
  private async giveBackDuplicates(provider: PaymentProvider, providerName: string, defaultProvider: string, findings: Finding[], ours: OurSide): Promise<void> {
    const { logger } = this.deps;
    for (const finding of findings) {
      if (finding.kind !== 'duplicate_charge' || finding.paymentId === null) continue;
      const payment = ours.payments.get(finding.paymentId);
      if (!payment || (payment.provider ?? defaultProvider) === providerName) continue;
      const compensation: Figures[] = [];
      let charges: ProviderCharge[] = [];
      if (!capabilitiesOf(provider).chargeSearch) {
        compensation.push({ error: 'this PSP has no search by our reference: the duplicate is left to an operator' });
      } else {
        try {
          charges = await provider.listChargesByReference(payment.id);
        } catch (error) {
          compensation.push({ error: `the charges could not be listed: ${(error as Error).message}` });
        }
      }
      for (const charge of charges) {
        const key = providerSubKey.duplicate(payment.id, charge.id);
        try {
          if (charge.status === 'succeeded' && charge.amountCapturedMinor > charge.amountRefundedMinor) {
            const refund = await provider.createRefund({ idempotencyKey: key, chargeId: charge.id, amountMinor: charge.amountCapturedMinor - charge.amountRefundedMinor, reference: payment.id });
            compensation.push({ charge_id: charge.id, action: 'refund', refund_id: refund.id, status: refund.status, amount_minor: refund.amountMinor });
          } else if (charge.status === 'requires_capture') {
            const voided = await provider.voidCharge({ idempotencyKey: key, chargeId: charge.id });
            compensation.push({ charge_id: charge.id, action: 'void', status: voided.status });
          } else if (charge.status === 'succeeded') {
            compensation.push({ charge_id: charge.id, action: 'none', status: 'already_refunded' });
          }
        } catch (error) {
          compensation.push({ charge_id: charge.id, action: 'failed', error: (error as Error).message });
        }
      }
      finding.provider = { ...finding.provider, compensation };
      logger.error(
        { alert: 'duplicate_charge_given_back', provider: providerName, payment_id: payment.id, held_at: payment.provider ?? defaultProvider, compensation },
        'a charge at a PSP that does not hold the payment was given back',
      );
    }
  }

  /** Effects per payment captured in the window (booked by us or reported by the PSP): one each. */
  private countEffects(ours: OurSide, transactions: ProviderBalanceTransaction[], window: { from: Date; to: Date }, where: { provider: string; defaultProvider: string }): void {
    const { metrics, logger } = this.deps;
    const reportedInWindow = new Set(
      transactions.filter((t) => t.type === 'charge' && t.createdAt >= window.from && t.createdAt < window.to).map((t) => (t.reference !== null && ours.payments.has(t.reference) ? t.reference : ours.paymentByCharge.get(t.chargeId))),
    );
    for (const payment of ours.payments.values()) {
      if (!capturedStatuses.has(payment.status) || !(ours.capturedInWindow.includes(payment.id) || reportedInWindow.has(payment.id))) continue;
      // Another PSP's payment: its charges are counted where it is (a charge of it here is a duplicate_charge finding).
      if ((payment.provider ?? where.defaultProvider) !== where.provider) continue;
      const providerCharges = new Set(transactions.filter((t) => t.type === 'charge' && (t.reference === payment.id || t.chargeId === payment.provider_charge_id)).map((t) => t.chargeId)).size;
      const counts = { provider_charge: providerCharges, ledger_transaction: payment.ledger_captures, event: payment.max_events };
      for (const [effect, count] of Object.entries(counts)) {
        metrics?.effectsPerPayment.observe({ effect }, count);
        if (count > 1) {
          metrics?.duplicateEffects.inc({ effect });
          logger.error({ payment_id: payment.id, effect, count }, 'duplicate effect found by reconciliation');
        }
      }
    }
  }
}

/** The workflow named a provider this worker has no client for: retrying cannot help. */
export class UnknownProviderError extends Error {
  override readonly name = 'UnknownProviderError';
  constructor(provider: string, known: string[]) {
    super(`no provider named ${provider} is configured on this worker (configured: ${known.join(', ') || 'none'})`);
  }
}
