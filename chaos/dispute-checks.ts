import { disputeWorkflowId } from '../domain/ids';
import { businessEventKey } from '../shared/keys';
import type { VerdictFn } from './tally';

/**
 * The census of disputes and of the ledger as a whole, on plain data (chaos/checker.ts reads it;
 * test/chaos/checker.test.ts fabricates it): each PSP dispute against its row, its workflow, its
 * ledger transactions and its events, checked once at the end of a run, when every dispute has
 * closed; then every ledger transaction balanced and each merchant's balance equal to what the
 * PSPs hold for its payments.
 */

/** A row of our disputes table. */
export interface DisputeRecord {
  id: string;
  tenant_id: string;
  payment_id: string;
  provider: string;
  provider_dispute_id: string;
  amount_minor: number;
  currency: string;
  stage: string;
  status: string;
  fee_minor: number;
  workflow_id: string;
}

/** A dispute as its PSP holds it (sandbox.disputes), with its charge's reference: our payment id. */
export interface PspDispute {
  provider: string;
  id: string;
  charge_id: string;
  reference: string;
  amount_minor: number;
  currency: string;
  stage: string;
  status: string;
}

/**
 * A line of a PSP's balance report about a dispute: a chargeback's withdrawal (`dispute`, the
 * amount negative, with the dispute fee) or a won chargeback's reinstatement (`dispute_reversal`).
 */
export interface PspDisputeMoney {
  provider: string;
  /** The PSP's dispute id. */
  source: string;
  type: 'dispute' | 'dispute_reversal';
  /** The disputed charge's reference: our payment id. */
  reference: string;
  amount_minor: number;
  fee_minor: number;
  currency: string;
}

/** One ledger transaction with its entries (signed: debit > 0). */
export interface LedgerTransactionRecord {
  id: string;
  tenant_id: string;
  event_key: string;
  dispute_id: string | null;
  entries: { account: string; currency: string; amount_minor: number }[];
}

/** The executions of one workflow id, by their close status. */
export interface WorkflowRuns {
  runs: number;
  running: number;
  completed: number;
}

/** A command the workload sent about a dispute, and its final answer (null: none came). */
export interface DisputeAnswer {
  disputeId: string;
  command: 'winning' | 'losing' | 'accept';
  finalStatus: number | null;
}

export interface DisputeCensusInput {
  disputes: DisputeRecord[];
  /** Every dispute at every PSP. */
  pspDisputes: PspDispute[];
  pspMoney: PspDisputeMoney[];
  /** The ledger transactions that name a dispute. */
  ledger: LedgerTransactionRecord[];
  /** The outbox events whose object is a dispute. */
  events: { id: string; type: string; object_id: string }[];
  /** 2xx answers of the merchant's endpoint per event id. */
  acks: ReadonlyMap<string, number>;
  /** The dispute workflows' executions by workflow id. */
  workflows: ReadonlyMap<string, WorkflowRuns>;
  answers: DisputeAnswer[];
  /** Reminders (dispute.evidence_due_soon) per stage while a dispute waits: DISPUTE_REMINDER_SECONDS's length. */
  remindersPerStage: number;
}

/** One dispute in a payment's census record. */
export interface DisputeCensus {
  id: string;
  provider: string;
  providerDisputeId: string;
  stage: string;
  status: string;
  /** won or lost once closed. */
  outcome: string | null;
  amountMinor: number;
  feeMinor: number;
  /** What the workload answered, and the API's final status. */
  answers: { command: string; finalStatus: number | null }[];
  /** Ledger transactions by event key. */
  ledger: Record<string, number>;
  events: Record<string, number>;
  /** The PSP's view: its stage and status, and its balance lines by type. */
  psp: { stage: string; status: string; money: Record<string, number> } | null;
  workflowRuns: number;
}

const closedStatuses = new Set(['won', 'lost']);
const receivable = (t: LedgerTransactionRecord | undefined) => t?.entries.filter((e) => e.account === 'provider_receivable').reduce((n, e) => n + e.amount_minor, 0) ?? 0;
const tally = (keys: string[]) => keys.reduce<Record<string, number>>((acc, k) => ((acc[k] = (acc[k] ?? 0) + 1), acc), {});

/** The events a dispute that ended where `row` stands must have sent exactly once, and at most how many of the others. */
function disputeEventBounds(row: DisputeRecord, answers: DisputeAnswer[], remindersPerStage: number): Record<string, [min: number, max: number]> {
  const chargeback = row.stage === 'chargeback';
  const once = (yes: boolean): [number, number] => (yes ? [1, 1] : [0, 0]);
  const evidence = answers.filter((a) => a.command !== 'accept');
  return {
    'dispute.created': once(true),
    'dispute.funds_withdrawn': once(chargeback),
    'dispute.funds_reinstated': once(chargeback && row.status === 'won'),
    'dispute.closed': once(closedStatuses.has(row.status)),
    // Once per stage it was under review, and once per evidence request the run answered.
    'dispute.updated': [evidence.some((a) => a.finalStatus === 200) ? 1 : 0, 2 + evidence.length],
    // Once per reminder and stage (an escalated inquiry waited twice).
    'dispute.evidence_due_soon': [0, remindersPerStage * (chargeback ? 2 : 1)],
  };
}

/**
 * Every dispute, once the run has gone quiet:
 * - one row per PSP dispute, under the payment whose charge it disputes, for its amount, and no
 *   row without its PSP dispute;
 * - one workflow per dispute (its id derived from the PSP's dispute id), every run of it closed
 *   and completed (a webhook that comes after the run closed starts one more run, which records
 *   nothing new);
 * - closed, at the stage and status the PSP holds it, with the PSP's fee for a chargeback;
 * - decided as the workload answered: won if winning evidence was submitted (200), lost (a
 *   chargeback) if nothing that could win was;
 * - its money posted once: a chargeback's withdrawal (amount and fee, as the PSP withdrew it),
 *   its reinstatement iff won (the amount, as the PSP reinstated it), its loss iff lost, and
 *   nothing for an inquiry that never escalated; the PSP's report has the same lines;
 * - its events: the implied ones exactly once, the others within their bounds, each acknowledged
 *   by the merchant.
 * Returns the census of each payment's disputes; `into(paymentId)` receives a payment's findings.
 */
export function checkDisputes(input: DisputeCensusInput, verdict: VerdictFn, into: (paymentId: string) => string[] | undefined = () => undefined): Map<string, DisputeCensus[]> {
  const byPayment = new Map<string, DisputeCensus[]>();
  const rowOf = (provider: string, id: string) => input.disputes.filter((d) => d.provider === provider && d.provider_dispute_id === id);
  for (const psp of input.pspDisputes) {
    const rows = rowOf(psp.provider, psp.id);
    const ok = rows.length === 1 && rows[0]!.payment_id === psp.reference && rows[0]!.amount_minor === psp.amount_minor && rows[0]!.currency === psp.currency;
    verdict('one dispute row per PSP dispute', ok, () =>
      `${psp.provider} dispute ${psp.id} of charge ${psp.charge_id} (payment ${psp.reference}, ${psp.amount_minor} ${psp.currency}, ${psp.stage} ${psp.status}) has ${rows.map((r) => `${r.id} (payment ${r.payment_id}, ${r.amount_minor} ${r.currency})`).join(', ') || 'no row'}`, into(psp.reference));
  }
  for (const row of input.disputes) {
    const psp = input.pspDisputes.find((d) => d.provider === row.provider && d.id === row.provider_dispute_id);
    const own = into(row.payment_id);
    const subject = `dispute ${row.id} (${row.provider} ${row.provider_dispute_id}) of payment ${row.payment_id}`;
    if (!psp) verdict('one dispute row per PSP dispute', false, () => `${subject} is at no PSP`, own);
    const answers = input.answers.filter((a) => a.disputeId === row.id);
    const ledger = input.ledger.filter((t) => t.dispute_id === row.id);
    const money = input.pspMoney.filter((m) => m.provider === row.provider && m.source === row.provider_dispute_id);
    const events = input.events.filter((e) => e.object_id === row.id);
    const runs = input.workflows.get(row.workflow_id) ?? { runs: 0, running: 0, completed: 0 };

    verdict('one closed workflow per dispute', row.workflow_id === disputeWorkflowId(row.provider, row.provider_dispute_id) && runs.runs >= 1 && runs.running === 0 && runs.completed === runs.runs, () =>
      `${subject}: workflow ${row.workflow_id} has ${runs.runs} runs, ${runs.running} running, ${runs.completed} completed`, own);
    const withdrawnFee = money.filter((m) => m.type === 'dispute').reduce((n, m) => n + m.fee_minor, 0);
    verdict('dispute final as the PSP holds it', closedStatuses.has(row.status) && psp !== undefined && row.status === psp.status && row.stage === psp.stage && row.fee_minor === withdrawnFee, () =>
      `${subject} is ${row.stage} ${row.status} (fee ${row.fee_minor}); at the PSP: ${psp ? `${psp.stage} ${psp.status}` : 'none'} (fee withdrawn ${withdrawnFee})`, own);
    checkDecision(row, answers, verdict, subject, own);
    checkDisputeMoney(row, ledger, money, verdict, subject, own);
    checkDisputeEvents(row, events, disputeEventBounds(row, answers, input.remindersPerStage), input.acks, verdict, subject, own);

    const census: DisputeCensus = {
      id: row.id,
      provider: row.provider,
      providerDisputeId: row.provider_dispute_id,
      stage: row.stage,
      status: row.status,
      outcome: closedStatuses.has(row.status) ? row.status : null,
      amountMinor: row.amount_minor,
      feeMinor: row.fee_minor,
      answers: answers.map((a) => ({ command: a.command, finalStatus: a.finalStatus })),
      ledger: tally(ledger.map((t) => t.event_key)),
      events: tally(events.map((e) => e.type)),
      psp: psp ? { stage: psp.stage, status: psp.status, money: tally(money.map((m) => m.type)) } : null,
      workflowRuns: runs.runs,
    };
    byPayment.set(row.payment_id, [...(byPayment.get(row.payment_id) ?? []), census]);
  }
  return byPayment;
}

/**
 * Won iff winning evidence was submitted: an answer that could not win (losing, accept, none,
 * refused) ends it lost, as a chargeback. Winning evidence without a final answer (none came,
 * or still running) may have been submitted: either outcome.
 */
function checkDecision(row: DisputeRecord, answers: DisputeAnswer[], verdict: VerdictFn, subject: string, own?: string[]): void {
  const winning = answers.filter((a) => a.command === 'winning');
  const expected = winning.some((a) => a.finalStatus === 200) ? 'won' : winning.some((a) => a.finalStatus === null || a.finalStatus === 202) ? null : 'lost';
  const ok = expected === null ? closedStatuses.has(row.status) : row.status === expected && (expected === 'won' || row.stage === 'chargeback');
  verdict('dispute decided as answered', ok, () =>
    `${subject} is ${row.stage} ${row.status}; the workload answered ${answers.map((a) => `${a.command} (${a.finalStatus ?? 'no answer'})`).join(', ') || 'nothing'}`, own);
}

/**
 * The dispute's money, once and as at the PSP: a chargeback's withdrawal takes the amount and
 * the fee from the receivable, its reinstatement gives back the amount (won), its loss writes
 * the claim off (lost); an inquiry that never escalated posts nothing.
 */
function checkDisputeMoney(row: DisputeRecord, ledger: LedgerTransactionRecord[], money: PspDisputeMoney[], verdict: VerdictFn, subject: string, own?: string[]): void {
  const chargeback = row.stage === 'chargeback';
  const expected = {
    [businessEventKey.disputeMoney(row.id, 'withdrawal')]: chargeback ? 1 : 0,
    [businessEventKey.disputeMoney(row.id, 'reinstatement')]: chargeback && row.status === 'won' ? 1 : 0,
    [businessEventKey.disputeMoney(row.id, 'loss')]: chargeback && row.status === 'lost' ? 1 : 0,
  };
  const byKey = tally(ledger.map((t) => t.event_key));
  const countsOk = Object.keys(byKey).every((key) => key in expected) && Object.entries(expected).every(([key, n]) => (byKey[key] ?? 0) === n);
  const at = (type: PspDisputeMoney['type']) => money.filter((m) => m.type === type);
  const pspOk = at('dispute').length === expected[businessEventKey.disputeMoney(row.id, 'withdrawal')] && at('dispute_reversal').length === expected[businessEventKey.disputeMoney(row.id, 'reinstatement')];
  const posted = (fact: 'withdrawal' | 'reinstatement' | 'loss') => receivable(ledger.find((t) => t.event_key === businessEventKey.disputeMoney(row.id, fact)));
  const pspNet = (type: PspDisputeMoney['type']) => at(type).reduce((n, m) => n + m.amount_minor - m.fee_minor, 0);
  const amountsOk =
    posted('withdrawal') === pspNet('dispute') &&
    (!chargeback || posted('withdrawal') === -(row.amount_minor + row.fee_minor)) &&
    posted('reinstatement') === pspNet('dispute_reversal') &&
    posted('loss') === 0;
  verdict('dispute money posted once, as at the PSP', countsOk && pspOk && amountsOk, () =>
    `${subject} (${row.stage} ${row.status}, ${row.amount_minor} + fee ${row.fee_minor}): ledger ${JSON.stringify(byKey)} (receivable: withdrawal ${posted('withdrawal')}, reinstatement ${posted('reinstatement')}, loss ${posted('loss')}); ` +
      `the PSP's report: ${money.map((m) => `${m.type} ${m.amount_minor} fee ${m.fee_minor}`).join(', ') || 'nothing'}`, own);
}

/** The dispute's events within their bounds (the implied ones exactly once), and each acknowledged by the merchant. */
function checkDisputeEvents(row: DisputeRecord, events: DisputeCensusInput['events'], bounds: Record<string, [number, number]>, acks: ReadonlyMap<string, number>, verdict: VerdictFn, subject: string, own?: string[]): void {
  const byType = tally(events.map((e) => e.type));
  const outside = [...new Set([...Object.keys(bounds), ...Object.keys(byType)])].filter((type) => {
    const [min, max] = bounds[type] ?? [0, 0];
    return (byType[type] ?? 0) < min || (byType[type] ?? 0) > max;
  });
  verdict('dispute events once', outside.length === 0, () =>
    `${subject} (${row.stage} ${row.status}): events ${JSON.stringify(byType)}; out of bounds: ${outside.map((t) => `${t} (${(bounds[t] ?? [0, 0]).join('–')})`).join(', ')}`, own);
  const unacked = events.filter((e) => !acks.get(e.id));
  verdict('dispute webhooks received', unacked.length === 0, () => `${subject}: ${unacked.map((e) => `${e.type} ${e.id}`).join(', ')} never acknowledged by the merchant`, own);
}

export interface LedgerBalanceInput {
  /** Every ledger transaction of the run's tenants. */
  transactions: LedgerTransactionRecord[];
  /** The run's payments and their tenants. */
  payments: { id: string; tenant_id: string }[];
  /** Every charge at every PSP: its reference, what it captured and refunded. */
  charges: { reference: string; currency: string; amount_captured_minor: number; amount_refunded_minor: number }[];
  pspMoney: PspDisputeMoney[];
}

/**
 * The ledger as a whole: every transaction balanced (its entries sum to zero per currency); and
 * per tenant and currency, the merchant's balance equal to its receivable and to what the PSPs
 * hold for its payments (captured less refunded, less chargebacks' amounts and fees, plus
 * reinstatements), with no claim on the network left open once every dispute has closed.
 */
export function checkLedgerBalance(input: LedgerBalanceInput, verdict: VerdictFn): void {
  for (const t of input.transactions) {
    const sums = new Map<string, number>();
    for (const e of t.entries) sums.set(e.currency, (sums.get(e.currency) ?? 0) + e.amount_minor);
    verdict('every ledger transaction balanced', t.entries.length >= 2 && [...sums.values()].every((n) => n === 0), () =>
      `${t.id} (${t.event_key}): ${t.entries.map((e) => `${e.account} ${e.amount_minor} ${e.currency}`).join(', ')}`);
  }
  const tenantOf = new Map(input.payments.map((p) => [p.id, p.tenant_id]));
  const figures = new Map<string, Record<string, number>>();
  const add = (tenant: string, currency: string, what: string, n: number) => {
    const record = figures.get(`${tenant} ${currency}`) ?? { merchant_balance: 0, provider_receivable: 0, dispute_claim: 0, dispute_reserve: 0, held: 0 };
    record[what] = (record[what] ?? 0) + n;
    figures.set(`${tenant} ${currency}`, record);
  };
  for (const t of input.transactions) for (const e of t.entries) add(t.tenant_id, e.currency, e.account, e.amount_minor);
  for (const c of input.charges) {
    const tenant = tenantOf.get(c.reference);
    if (tenant) add(tenant, c.currency, 'held', c.amount_captured_minor - c.amount_refunded_minor);
  }
  for (const m of input.pspMoney) {
    const tenant = tenantOf.get(m.reference);
    if (tenant) add(tenant, m.currency, 'held', m.amount_minor - m.fee_minor);
  }
  for (const [key, f] of figures) {
    // merchant_balance and dispute_reserve are credit-normal: their balance is the entries' sum negated.
    const merchant = -f.merchant_balance!;
    const ok = merchant === f.provider_receivable && merchant === f.held && f.dispute_claim === 0 && f.dispute_reserve === 0;
    verdict('merchant balance consistent', ok, () =>
      `tenant ${key}: merchant balance ${merchant}, receivable ${f.provider_receivable}, held at the PSPs ${f.held}, dispute claim ${f.dispute_claim}, reserve ${-f.dispute_reserve!}`);
  }
}
