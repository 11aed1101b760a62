import type { Db } from './connect';
import { newId } from '../domain/ids';

export type LedgerAccountCode = 'provider_receivable' | 'merchant_balance';

/**
 * Which way each account grows. provider_receivable (asset): money the PSP holds for us,
 * debit-normal. merchant_balance (liability): what we owe the merchant, credit-normal.
 */
export const normalBalance: Record<LedgerAccountCode, 'debit' | 'credit'> = {
  provider_receivable: 'debit',
  merchant_balance: 'credit',
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

/** True if the lines balance to zero in every currency (the database checks it again at commit). */
export function isBalanced(lines: LedgerLine[]): boolean {
  const sums = new Map<string, number>();
  for (const line of lines) sums.set(line.currency, (sums.get(line.currency) ?? 0) + line.amountMinor);
  return lines.length >= 2 && [...sums.values()].every((sum) => sum === 0);
}

/**
 * Posts a balanced transaction once per business event. Returns false when the event was
 * posted before (a replayed activity): the unique (tenant, event_key) makes it a no-op.
 * A frozen account makes the database refuse the entries (isLedgerRefusal).
 */
export async function postTransaction(db: Db, transaction: LedgerTransaction): Promise<boolean> {
  if (!isBalanced(transaction.lines)) throw new Error(`ledger transaction ${transaction.eventKey} does not balance`);
  const id = newId('ltx');
  const [inserted] = await db`
    INSERT INTO ledger_transactions (id, tenant_id, event_key, payment_id, refund_id, description)
    VALUES (${id}, ${transaction.tenantId}, ${transaction.eventKey}, ${transaction.paymentId ?? null},
            ${transaction.refundId ?? null}, ${transaction.description})
    ON CONFLICT (tenant_id, event_key) DO NOTHING
    RETURNING id`;
  if (!inserted) return false;
  for (const line of transaction.lines) {
    const accountId = await ensureAccount(db, transaction.tenantId, line.account, line.currency);
    await db`
      INSERT INTO ledger_entries (transaction_id, account_id, currency, amount_minor)
      VALUES (${id}, ${accountId}, ${line.currency}, ${line.amountMinor})`;
  }
  return true;
}

/**
 * The account's id, created on first use. Reads first and never updates the account row,
 * so concurrent postings to one merchant's account do not queue on a row lock.
 */
async function ensureAccount(db: Db, tenantId: string, code: LedgerAccountCode, currency: string): Promise<number> {
  const find = () => db<{ id: number }[]>`
    SELECT id FROM ledger_accounts WHERE tenant_id = ${tenantId} AND code = ${code} AND currency = ${currency}`;
  const [existing] = await find();
  if (existing) return existing.id;
  const [created] = await db<{ id: number }[]>`
    INSERT INTO ledger_accounts (tenant_id, code, currency) VALUES (${tenantId}, ${code}, ${currency})
    ON CONFLICT (tenant_id, code, currency) DO NOTHING
    RETURNING id`;
  if (created) return created.id;
  // A concurrent transaction created it first; a new statement sees its commit.
  const [raced] = await find();
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
