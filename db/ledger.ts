import type { Db } from './connect';
import { newId } from '../domain/ids';

export type LedgerAccountCode = 'provider_receivable' | 'merchant_balance' | 'dispute_claim' | 'dispute_reserve';

/**
 * Which way each account grows. provider_receivable (asset): money the PSP holds for us,
 * debit-normal. merchant_balance (liability): what we owe the merchant, credit-normal.
 */
export const normalBalance: Record<LedgerAccountCode, 'debit' | 'credit'> = {
  provider_receivable: 'debit',
  merchant_balance: 'credit',
  dispute_claim: 'debit',
  dispute_reserve: 'credit',
};

export interface LedgerLine {
  account: LedgerAccountCode;
  currency: string;
  /** Signed: debit > 0, credit < 0. The lines of a transaction sum to zero per currency. */
  amountMinor: number;
}

export interface LedgerTransaction {
  tenantId: string;
  /** The business event, e.g. businessEventKey.paymentCapture(id): posted once, ever. */
  eventKey: string;
  paymentId?: string;
  refundId?: string;
  disputeId?: string;
  description: string;
  lines: LedgerLine[];
}

/** Money captured: the PSP owes us, we owe the merchant. */
export function captureLines(currency: string, amountMinor: number): LedgerLine[] {
  return [
    { account: 'provider_receivable', currency, amountMinor },
    { account: 'merchant_balance', currency, amountMinor: -amountMinor },
  ];
}

/** Money refunded: the reverse of a capture, for the refunded amount. */
export function refundLines(currency: string, amountMinor: number): LedgerLine[] {
  return captureLines(currency, amountMinor).map((line) => ({ ...line, amountMinor: -line.amountMinor }));
}

/**
 * A chargeback's withdrawal: the PSP took the amount and its fee (provider_receivable down), the
 * merchant bears both (merchant_balance down), and the amount is claimed back from the network
 * while it decides (dispute_claim against dispute_reserve).
 */
export function disputeWithdrawalLines(currency: string, amountMinor: number, feeMinor: number): LedgerLine[] {
  return [
    { account: 'merchant_balance', currency, amountMinor: amountMinor + feeMinor },
    { account: 'provider_receivable', currency, amountMinor: -(amountMinor + feeMinor) },
    { account: 'dispute_claim', currency, amountMinor },
    { account: 'dispute_reserve', currency, amountMinor: -amountMinor },
  ];
}

/** A won chargeback: the amount comes back to the PSP and to the merchant (the fee stays lost); the claim is closed. */
export function disputeReinstatementLines(currency: string, amountMinor: number): LedgerLine[] {
  return [...captureLines(currency, amountMinor), ...disputeLossLines(currency, amountMinor)];
}

/** A lost chargeback: the claim on the network is written off against the reserve; the money stays gone. */
export function disputeLossLines(currency: string, amountMinor: number): LedgerLine[] {
  return [
    { account: 'dispute_reserve', currency, amountMinor },
    { account: 'dispute_claim', currency, amountMinor: -amountMinor },
  ];
}

/** True if the lines balance to zero in every currency (the database checks it again at commit). */
export function isBalanced(lines: LedgerLine[]): boolean {
  const sums = new Map<string, number>();
  for (const line of lines) sums.set(line.currency, (sums.get(line.currency) ?? 0) + line.amountMinor);
  return lines.length >= 2 && [...sums.values()].every((sum) => sum === 0);
}

/**
 * Ledger account ids by (tenant, code, currency), remembered by the worker: an account is
 * never deleted and its id never changes, so after the first posting each payment saves the
 * two lookups. Only ids read back by a SELECT are remembered, and a posting that fails
 * forgets the ids it used: an id read inside a transaction that then rolled back (the
 * account created by that same transaction) cannot stick.
 */
export class LedgerAccounts {
  private readonly ids = new Map<string, number>();
  static key(tenantId: string, code: LedgerAccountCode, currency: string): string {
    return `${tenantId}|${code}|${currency}`;
  }
  get(tenantId: string, code: LedgerAccountCode, currency: string): number | undefined {
    return this.ids.get(LedgerAccounts.key(tenantId, code, currency));
  }
  remember(tenantId: string, code: LedgerAccountCode, currency: string, id: number): void {
    if (this.ids.size >= 100_000) this.ids.clear();
    this.ids.set(LedgerAccounts.key(tenantId, code, currency), id);
  }
  forget(tenantId: string, lines: LedgerLine[]): void {
    for (const line of lines) this.ids.delete(LedgerAccounts.key(tenantId, line.account, line.currency));
  }
}

/** Whether the tenant's ledger holds the transaction posted under this business event key. */
export async function isPosted(db: Db, tenantId: string, eventKey: string): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM ledger_transactions WHERE tenant_id = ${tenantId} AND event_key = ${eventKey}`;
  return row !== undefined;
}

/**
 * Posts a balanced transaction once per business event. Returns false when the event was
 * posted before (a replayed activity): the unique (tenant, event_key) makes it a no-op.
 * A frozen account makes the database refuse the entries (isLedgerRefusal). `accounts`
 * remembers account ids across postings (one per process).
 */
export async function postTransaction(db: Db, transaction: LedgerTransaction, accounts?: LedgerAccounts): Promise<boolean> {
  if (!isBalanced(transaction.lines)) throw new Error(`ledger transaction ${transaction.eventKey} does not balance`);
  const id = newId('ltx');
  const [inserted] = await db`
    INSERT INTO ledger_transactions (id, tenant_id, event_key, payment_id, refund_id, dispute_id, description)
    VALUES (${id}, ${transaction.tenantId}, ${transaction.eventKey}, ${transaction.paymentId ?? null},
            ${transaction.refundId ?? null}, ${transaction.disputeId ?? null}, ${transaction.description})
    ON CONFLICT (tenant_id, event_key) DO NOTHING
    RETURNING id`;
  if (!inserted) return false;
  try {
    const entries = [];
    for (const [index, line] of transaction.lines.entries()) {
      const accountId = accounts?.get(transaction.tenantId, line.account, line.currency) ?? (await ensureAccount(db, transaction.tenantId, line.account, line.currency, accounts));
      entries.push({ transaction_id: id, line: index + 1, account_id: accountId, currency: line.currency, amount_minor: line.amountMinor });
    }
    // One statement for all the lines: the database checks them together (ledger_check_lines,
    // db/migrations/016), so a transaction's lines are never split over statements.
    await db`INSERT INTO ledger_entries ${db(entries, 'transaction_id', 'line', 'account_id', 'currency', 'amount_minor')}`;
  } catch (error) {
    accounts?.forget(transaction.tenantId, transaction.lines);
    throw error;
  }
  return true;
}

/**
 * The account's id, created on first use. Reads first and never updates the account row,
 * so concurrent postings to one merchant's account do not queue on a row lock.
 */
async function ensureAccount(db: Db, tenantId: string, code: LedgerAccountCode, currency: string, accounts?: LedgerAccounts): Promise<number> {
  const find = async () => {
    const [row] = await db<{ id: number }[]>`
      SELECT id FROM ledger_accounts WHERE tenant_id = ${tenantId} AND code = ${code} AND currency = ${currency}`;
    if (row) accounts?.remember(tenantId, code, currency, row.id);
    return row;
  };
  const existing = await find();
  if (existing) return existing.id;
  const [created] = await db<{ id: number }[]>`
    INSERT INTO ledger_accounts (tenant_id, code, currency) VALUES (${tenantId}, ${code}, ${currency})
    ON CONFLICT (tenant_id, code, currency) DO NOTHING
    RETURNING id`;
  if (created) return created.id;
  // A concurrent transaction created it first; a new statement sees its commit.
  const raced = await find();
  if (!raced) throw new Error(`ledger account ${tenantId}/${code}/${currency} vanished`);
  return raced.id;
}

/** The database refused a posting for good (a frozen account): retrying cannot help. */
export function isLedgerRefusal(error: unknown): boolean {
  const e = error as { code?: string; hint?: string };
  return e?.code === 'P0001' && e.hint === 'ledger_account_frozen';
}

export interface BalanceRow {
  account: LedgerAccountCode;
  currency: string;
  /** In the account's normal direction: positive means the account holds money. */
  balance_minor: number;
}

export async function balances(db: Db, tenantId: string): Promise<BalanceRow[]> {
  const rows = await db<{ account: LedgerAccountCode; currency: string; net: number }[]>`
    SELECT a.code AS account, a.currency, coalesce(sum(e.amount_minor), 0)::bigint AS net
    FROM ledger_accounts a
    LEFT JOIN ledger_entries e ON e.account_id = a.id
    WHERE a.tenant_id = ${tenantId}
    GROUP BY a.code, a.currency
    ORDER BY a.currency, a.code`;
  return rows.map((r) => ({
    account: r.account,
    currency: r.currency,
    balance_minor: normalBalance[r.account] === 'debit' ? r.net : -r.net,
  }));
}
