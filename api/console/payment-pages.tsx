/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import type { ConsoleSignedIn } from '../context';
import type { PaymentRow } from '../../domain/resources';
import type { PaymentHistory } from '../../db/console';
import type { AuditRow } from '../../db/operators';
import { providerSubKey } from '../../shared/keys';
import { paymentStatuses } from '../../domain/payments';
import { Csrf, Layout, money, Table, when } from './pages';

/** The payments list and a payment's page (api/console/routes.ts serves them). */

/** The search form's fields, as given (strings), to show them again. */
export type SearchForm = Partial<Record<'payment_id' | 'order_id' | 'customer' | 'provider' | 'status' | 'tenant_id' | 'from' | 'to', string>>;

const Field: FC<{ name: keyof SearchForm; label: string; form: SearchForm; type?: string; placeholder?: string }> = ({ name, label, form, type, placeholder }) => (
  <label>
    {label}
    <input name={name} type={type ?? 'text'} value={form[name] ?? ''} placeholder={placeholder ?? ''} />
  </label>
);

const SearchFields: FC<{ form: SearchForm; operator: ConsoleSignedIn }> = ({ form, operator }) => (
  <form class="filters" method="get" action="/console/payments" role="search">
    <Field name="payment_id" label="Payment id" form={form} placeholder="pay_…" />
    <Field name="order_id" label="Order id" form={form} />
    <Field name="customer" label="Customer (cus_ id or email)" form={form} />
    <Field name="provider" label="PSP (attempted at)" form={form} />
    <label>
      Status
      <select name="status">
        <option value="">any</option>
        {paymentStatuses.map((status) => (
          <option value={status} selected={form.status === status}>
            {status}
          </option>
        ))}
      </select>
    </label>
    {operator.tenantId === null && <Field name="tenant_id" label="Tenant" form={form} placeholder="ten_…" />}
    <Field name="from" label="Created from (UTC day)" form={form} type="date" />
    <Field name="to" label="Created to (UTC day, inclusive)" form={form} type="date" />
    <button type="submit">Search</button>
  </form>
);

export const PaymentsPage: FC<{ operator: ConsoleSignedIn; form: SearchForm; rows: PaymentRow[]; older: string | null; newer: string | null }> = ({ operator, form, rows, older, newer }) => {
  const query = (cursor: Record<string, string>) => `/console/payments?${new URLSearchParams({ ...(form as Record<string, string>), ...cursor }).toString()}`;
  return (
    <Layout title="Payments" operator={operator}>
      <SearchFields form={form} operator={operator} />
      <Table
        caption={`${rows.length} payment${rows.length === 1 ? '' : 's'} on this page`}
        head={['Payment', 'Order', 'Amount', 'Status', 'PSP', 'Tenant', 'Created']}
        rows={rows.map((p) => [<a href={`/console/payments/${p.id}`}>{p.id}</a>, p.order_id, money(p.amount_minor, p.currency), p.status, p.provider ?? '', p.tenant_id, when(p.created_at)])}
      />
      <nav class="pager" aria-label="Pages">
        {newer && <a href={query({ ending_before: newer })}>Newer</a>}
        {older && <a href={query({ starting_after: older })}>Older</a>}
      </nav>
    </Layout>
  );
};

export interface PaymentLinks {
  temporal: string | null;
  trace: string | null;
}

const Details: FC<{ payment: PaymentRow; links: PaymentLinks }> = ({ payment, links }) => (
  <dl>
    <dt>Order</dt>
    <dd>{payment.order_id}</dd>
    <dt>Tenant</dt>
    <dd>{payment.tenant_id}</dd>
    <dt>Amount</dt>
    <dd>
      {money(payment.amount_minor, payment.currency)} · captured {money(payment.amount_captured_minor, payment.currency)} · refunded {money(payment.amount_refunded_minor, payment.currency)}
    </dd>
    <dt>Status</dt>
    <dd>
      {payment.status}
      {payment.failure_code && ` (${payment.failure_code}: ${payment.failure_message ?? ''})`}
    </dd>
    <dt>PSP</dt>
    <dd>{payment.provider ?? 'the default PSP'}</dd>
    <dt>Customer</dt>
    <dd>{payment.customer_id ?? ''}</dd>
    <dt>Description</dt>
    <dd>{payment.description ?? ''}</dd>
    <dt>Metadata</dt>
    <dd>
      <code>{JSON.stringify(payment.metadata)}</code>
    </dd>
    <dt>Created</dt>
    <dd>{when(payment.created_at)}</dd>
    <dt>Run</dt>
    <dd>
      <code>{payment.workflow_id}</code>
      {links.temporal && (
        <>
          {' '}
          · <a href={links.temporal}>Temporal UI</a>
        </>
      )}
      {links.trace && (
        <>
          {' '}
          · <a href={links.trace}>Trace</a>
        </>
      )}
    </dd>
  </dl>
);

const RefundForm: FC<{ operator: ConsoleSignedIn; payment: PaymentRow }> = ({ operator, payment }) => (
  <section>
    <h2>Refund</h2>
    <form method="post" action={`/console/payments/${payment.id}/refunds`} class="filters">
      <Csrf operator={operator} />
      <label>
        Amount ({payment.currency})
        <input name="amount" inputmode="decimal" required placeholder="e.g. 5.00" />
      </label>
      <label>
        Reason
        <input name="reason" maxlength={500} />
      </label>
      <button type="submit">Review refund</button>
    </form>
  </section>
);

function historyTables(payment: PaymentRow, history: PaymentHistory) {
  return [
    { caption: 'Attempts', head: ['#', 'PSP', 'Outcome', 'Sub-key', 'Error', 'Started', 'Finished'], rows: history.attempts.map((a) => [String(a.attempt), a.provider, a.outcome, <code>{providerSubKey.charge(payment.id, a.attempt)}</code>, a.error_code ?? '', when(a.started_at), when(a.finished_at)]) },
    { caption: "PSP's webhooks", head: ['Received', 'PSP', 'Event', 'Type', 'Charge status', 'Disposition'], rows: history.providerEvents.map((e) => [when(e.received_at), e.provider, <code>{e.event_id}</code>, e.type, e.charge_status ?? '', e.disposition]) },
    { caption: 'Events to the merchant', head: ['Event', 'Type', 'State', 'Attempts', 'Created', 'Delivered'], rows: history.events.map((e) => [<code>{e.id}</code>, e.type, e.delivery_state, String(e.attempts), when(e.created_at), when(e.delivered_at)]) },
    { caption: 'Webhook deliveries', head: ['Event', 'Attempt', 'URL', 'Status', 'Error', 'At'], rows: history.deliveries.map((d) => [<code>{d.event_id}</code>, String(d.attempt), d.url, d.response_status === null ? '' : String(d.response_status), d.error ?? '', when(d.created_at)]) },
    { caption: 'Refunds', head: ['Refund', 'Amount', 'Status', 'Reason', 'Created'], rows: history.refunds.map((r) => [<code>{r.id}</code>, money(r.amount_minor, r.currency), r.status, r.reason ?? '', when(r.created_at)]) },
    { caption: 'Disputes', head: ['Dispute', 'Amount', 'Stage', 'Status', 'Evidence due', 'Held'], rows: history.disputes.map((d) => [<code>{d.id}</code>, money(d.amount_minor, d.currency), d.stage, d.status, when(d.evidence_due_by), d.held_reason ?? '']) },
    { caption: 'Ledger entries', head: ['Transaction', 'Description', 'Account', 'Amount', 'At'], rows: history.ledger.map((l) => [<code>{l.transaction_id}</code>, l.description, l.account, money(l.amount_minor, l.currency), when(l.created_at)]) },
  ];
}

export const auditTable = (audit: AuditRow[]) => ({
  caption: 'Operator actions',
  head: ['When', 'Who', 'Action', 'Amount', 'State', 'Idempotency key'],
  rows: audit.map((a) => [when(a.created_at), a.actor_email ?? a.actor, a.action, a.amount_minor === null ? '' : money(a.amount_minor, a.currency ?? ''), a.state, <code>{a.idempotency_key ?? ''}</code>]),
});

export const PaymentPage: FC<{ operator: ConsoleSignedIn; payment: PaymentRow; history: PaymentHistory; audit: AuditRow[]; links: PaymentLinks }> = ({ operator, payment, history, audit, links }) => (
  <Layout title={`Payment ${payment.id}`} operator={operator}>
    <Details payment={payment} links={links} />
    {operator.role === 'operator' && <RefundForm operator={operator} payment={payment} />}
    {[...historyTables(payment, history), auditTable(audit)].map((table) => (
      <Table caption={table.caption} head={table.head} rows={table.rows} />
    ))}
  </Layout>
);
