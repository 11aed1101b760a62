import type { Db } from './connect';
import type { DisputeRow, PaymentRow, RefundRow } from '../domain/resources';
import type { AttemptRow } from './payments-attempts';
import type { DeliveryAttemptRow } from './deliveries';
import { newId } from '../domain/ids';
import { keysetPage, toPage, type Page, type PageQuery } from './paging';

/** What the operator console reads (api/console/, docs/console.md): payments across tenants, and everything one payment brought about. */

/** The console's payment search; every filter is served by an index (migration 027; test/integration/console-search-plans.test.ts). */
export interface PaymentSearch extends PageQuery {
  /** The operator's tenant, or the tenant filter of an operator without one. */
  tenantId?: string;
  paymentId?: string;
  orderId?: string;
  customerId?: string;
  /** The customer's email, case-insensitive. */
  customerEmail?: string;
  /** Attempted at this PSP (any of its attempts, failed over or not). */
  provider?: string;
  status?: string;
  /** Created at or after. */
  from?: Date;
  /** Created before. */
  to?: Date;
}

/** The smallest payment id made at `at` or later: ids begin with their creation time (domain/ids.ts), so a date range is an id range. */
export function paymentIdFloor(at: Date): string {
  return newId('pay', Math.max(0, at.getTime())).slice(0, 'pay_'.length + 10);
}

/**
 * The customers a search's email names (case-insensitive, `customers_by_email`), within its
 * tenant, read before the payments: a subquery in the payments' statement lets PostgreSQL walk
 * the payments newest first and test each one's customer (about 2 s at a million payments,
 * bench/results/console-search.md), where a list of ids takes the payments' own index by customer.
 */
function customersStatement(db: Db, email: string, tenantId: string | undefined) {
  return db`
    SELECT id FROM customers WHERE lower(email) = lower(${email}) AND email IS NOT NULL
      ${tenantId !== undefined ? db`AND tenant_id = ${tenantId}` : db``}`;
}

async function customerIds(db: Db, search: PaymentSearch): Promise<string[] | undefined> {
  if (search.customerEmail === undefined) return undefined;
  const rows = await db<{ id: string }[]>`${customersStatement(db, search.customerEmail, search.tenantId)}`;
  return rows.map((row) => row.id);
}

async function explain(db: Db, statement: ReturnType<typeof customersStatement>): Promise<string[]> {
  const rows = await db<{ 'QUERY PLAN': string }[]>`EXPLAIN ${statement}`;
  return rows.map((row) => row['QUERY PLAN']);
}

function searchStatement(db: Db, search: PaymentSearch, customers: string[] | undefined) {
  return db`
    SELECT * FROM payments
    WHERE true
      ${search.tenantId !== undefined ? db`AND tenant_id = ${search.tenantId}` : db``}
      ${search.paymentId !== undefined ? db`AND id = ${search.paymentId}` : db``}
      ${search.orderId !== undefined ? db`AND order_id = ${search.orderId}` : db``}
      ${search.customerId !== undefined ? db`AND customer_id = ${search.customerId}` : db``}
      ${customers !== undefined ? db`AND customer_id = ANY(${customers}::text[])` : db``}
      ${search.provider !== undefined ? db`AND id IN (SELECT payment_id FROM payment_attempts WHERE provider = ${search.provider})` : db``}
      ${search.status !== undefined ? db`AND status = ${search.status}` : db``}
      ${search.from !== undefined ? db`AND id >= ${paymentIdFloor(search.from)}` : db``}
      ${search.to !== undefined ? db`AND id < ${paymentIdFloor(search.to)}` : db``}
      ${keysetPage(db, 'id', search)}`;
}

/** Newest first, paged by id, on the filters given. */
export async function searchPayments(db: Db, search: PaymentSearch): Promise<Page<PaymentRow>> {
  const customers = await customerIds(db, search);
  if (customers?.length === 0) return { rows: [], hasMore: false };
  return toPage(await db<PaymentRow[]>`${searchStatement(db, search, customers)}`, search);
}

/**
 * The plans PostgreSQL chooses for a search (EXPLAIN), one line per node: what shows each filter
 * is served by an index. With an email, the customers' statement's plan comes first.
 */
export async function searchPaymentsPlan(db: Db, search: PaymentSearch): Promise<string> {
  const customers = await customerIds(db, search);
  const first = search.customerEmail !== undefined ? await explain(db, customersStatement(db, search.customerEmail, search.tenantId)) : [];
  return [...first, ...(await explain(db, searchStatement(db, search, customers)))].join('\n');
}

/** One payment, within the tenant when one is given. */
export async function consolePayment(db: Db, id: string, tenantId: string | null): Promise<PaymentRow | null> {
  const [row] = await db<PaymentRow[]>`
    SELECT * FROM payments WHERE id = ${id} ${tenantId !== null ? db`AND tenant_id = ${tenantId}` : db``}`;
  return row ?? null;
}

export interface ProviderEventRow {
  provider: string;
  event_id: string;
  type: string;
  charge_status: string | null;
  disposition: string;
  forwarded_at: Date | null;
  received_at: Date;
}

export interface MerchantEventRow {
  id: string;
  type: string;
  delivery_state: string;
  attempts: number;
  created_at: Date;
  delivered_at: Date | null;
}

export interface LedgerEntryView {
  transaction_id: string;
  description: string;
  account: string;
  currency: string;
  amount_minor: number;
  created_at: Date;
}

/** Everything a payment's page shows besides the payment: read in one round of queries. */
export interface PaymentHistory {
  attempts: AttemptRow[];
  refunds: RefundRow[];
  disputes: DisputeRow[];
  providerEvents: ProviderEventRow[];
  events: MerchantEventRow[];
  deliveries: DeliveryAttemptRow[];
  ledger: LedgerEntryView[];
}

/** LIKE patterns of the outbox event keys of these objects (shared/keys.ts businessEventKey: `<kind>:<id>:<type>`). */
function eventKeyPatterns(kinds: [string, string[]][]): string[] {
  return kinds.flatMap(([kind, ids]) => ids.map((id) => `${kind}:${id.replace(/[\\%_]/g, '\\$&')}:%`));
}

export async function paymentHistory(db: Db, payment: PaymentRow): Promise<PaymentHistory> {
  const [attempts, refunds, disputes, providerEvents, ledger] = await Promise.all([
    db<AttemptRow[]>`SELECT * FROM payment_attempts WHERE payment_id = ${payment.id} ORDER BY attempt`,
    db<RefundRow[]>`SELECT * FROM refunds WHERE payment_id = ${payment.id} ORDER BY id`,
    db<DisputeRow[]>`SELECT * FROM disputes WHERE payment_id = ${payment.id} ORDER BY id`,
    db<ProviderEventRow[]>`
      SELECT provider, event_id, type, charge_status, disposition, forwarded_at, received_at
      FROM provider_events WHERE payment_id = ${payment.id} ORDER BY received_at`,
    db<LedgerEntryView[]>`
      SELECT t.id AS transaction_id, t.description, a.code AS account, e.currency, e.amount_minor, t.created_at
      FROM ledger_transactions t
      JOIN ledger_entries e ON e.transaction_id = t.id
      JOIN ledger_accounts a ON a.id = e.account_id
      WHERE t.payment_id = ${payment.id}
      ORDER BY t.created_at, t.id, e.line`,
  ]);
  const patterns = eventKeyPatterns([
    ['payment', [payment.id]],
    ['refund', refunds.map((r) => r.id)],
    ['dispute', disputes.map((d) => d.id)],
  ]);
  const events = await db<MerchantEventRow[]>`
    SELECT id, type, delivery_state, attempts, created_at, delivered_at FROM outbox_events
    WHERE tenant_id = ${payment.tenant_id} AND event_key LIKE ANY(${patterns}) ORDER BY seq`;
  const deliveries = events.length === 0 ? [] : await db<DeliveryAttemptRow[]>`SELECT * FROM webhook_deliveries WHERE event_id = ANY(${events.map((e) => e.id)}) ORDER BY event_id, attempt`;
  return { attempts, refunds, disputes, providerEvents, events, deliveries, ledger };
}
