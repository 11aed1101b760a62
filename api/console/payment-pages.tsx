/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import type { ConsoleSignedIn } from '../context';
import type { PaymentRow } from '../../domain/resources';
import type { PaymentHistory } from '../../db/console';
import type { AuditRow } from '../../db/operators';
import { providerSubKey } from '../../shared/keys';
import { deadlineOf, paymentStatuses, paymentWindows, statusesAccepting } from '../../domain/payments';
import type { AttemptRow } from '../../db/payments-attempts';
import { Csrf, Layout, money, Table, when } from './pages';
import { ProposeButton } from './overview-pages';

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

function historyTables(operator: ConsoleSignedIn, payment: PaymentRow, history: PaymentHistory) {
  return [
    { caption: 'Attempts', head: ['#', 'PSP', 'Outcome', 'Sub-key', 'Error', 'Started', 'Finished'], rows: history.attempts.map((a) => [String(a.attempt), a.provider, a.outcome, <code>{providerSubKey.charge(payment.id, a.attempt)}</code>, a.error_code ?? '', when(a.started_at), when(a.finished_at)]) },
    { caption: "PSP's webhooks", head: ['Received', 'PSP', 'Event', 'Type', 'Charge status', 'Disposition'], rows: history.providerEvents.map((e) => [when(e.received_at), e.provider, <code>{e.event_id}</code>, e.type, e.charge_status ?? '', e.disposition]) },
    {
      caption: 'Events to the merchant',
      head: ['Event', 'Type', 'State', 'Attempts', 'Created', 'Delivered', ''],
      rows: history.events.map((e) => [<code>{e.id}</code>, e.type, e.delivery_state, String(e.attempts), when(e.created_at), when(e.delivered_at), <ProposeButton operator={operator} action={`/console/events/${e.id}/resend?payment=${payment.id}`} label="Review resend" />]),
    },
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


/** A payment's wait: for whom, which window, and until when. */
export interface WaitView {
  window: string;
  waitsFor: string;
  since: Date | null;
  until: Date | null;
}

/**
 * What the payment waits for now, as the API's payment shows it (its status; a recovering
 * payment's recovery.window_ends_at): the status's window (domain/payments.ts paymentWindows)
 * counted from its latest attempt's answer, which is when its run began to wait (the run's own
 * timer starts a moment later); a recovering payment's window as its recovery states it.
 */
export function paymentWaits(payment: PaymentRow, attempts: AttemptRow[], windowSeconds: (key: string) => number | undefined): WaitView[] {
  const deadline = deadlineOf(payment.status);
  if (deadline === null) return [];
  const window = paymentWindows[deadline];
  if (deadline === 'recovery') return payment.recovery ? [{ window: deadline, waitsFor: window.waitsFor, since: null, until: new Date(payment.recovery.window_ends_at) }] : [];
  const answered = attempts.filter((a) => a.finished_at !== null).at(-1)?.finished_at ?? payment.created_at;
  const seconds = windowSeconds(window.configKey) ?? window.defaultSeconds;
  return [{ window: deadline, waitsFor: window.waitsFor, since: answered, until: new Date(new Date(answered).getTime() + seconds * 1000) }];
}

const Routing: FC<{ payment: PaymentRow }> = ({ payment }) => {
  const routing = payment.routing;
  return (
    <section>
      <h2>Routing decision</h2>
      {routing ? (
        <>
          <dl>
            <dt>Strategy</dt>
            <dd>{routing.strategy}</dd>
            <dt>Chosen</dt>
            <dd>
              {routing.chosen}
              {routing.explored ? ' (explored: not the best estimate, tried to keep learning)' : ''}
            </dd>
            <dt>Why</dt>
            <dd>{routing.reason}</dd>
          </dl>
          <Table
            caption="Candidates"
            head={['PSP', 'Approval estimate', 'Selection probability']}
            rows={routing.candidates.map((c) => [c.provider, c.approval_estimate === null ? 'none' : `${(c.approval_estimate * 100).toFixed(1)}%`, `${(c.selection_probability * 100).toFixed(1)}%`])}
          />
        </>
      ) : (
        <p class="muted">No decision recorded: the static route (the tenant's rules, else the default PSP) sent it to {payment.provider ?? 'the default PSP'}.</p>
      )}
    </section>
  );
};

const RecoverySchedule: FC<{ payment: PaymentRow }> = ({ payment }) =>
  payment.recovery ? (
    <section>
      <h2>Recovery</h2>
      <dl>
        <dt>Attempts so far</dt>
        <dd>{String(payment.recovery.attempts)}</dd>
        <dt>Next attempt</dt>
        <dd>{payment.recovery.next_attempt_at ? when(payment.recovery.next_attempt_at) : 'none'}</dd>
        <dt>Window ends</dt>
        <dd>{when(payment.recovery.window_ends_at)}</dd>
        <dt>Last decline</dt>
        <dd>
          {payment.recovery.last_decline.code}
          {payment.recovery.last_decline.network_decline_code ? ` (network ${payment.recovery.last_decline.network_decline_code})` : ''}
          {payment.recovery.last_decline.network_advice_code ? `, advice ${payment.recovery.last_decline.network_advice_code}` : ''}
        </dd>
        <dt>Stopped</dt>
        <dd>{payment.recovery.stopped_because ?? 'no'}</dd>
      </dl>
    </section>
  ) : null;

const Commands: FC<{ operator: ConsoleSignedIn; payment: PaymentRow }> = ({ operator, payment }) => {
  const capture = statusesAccepting('capture').includes(payment.status);
  const cancel = statusesAccepting('cancel').includes(payment.status);
  if (operator.role !== 'operator' || (!capture && !cancel)) return null;
  return (
    <section>
      <h2>Capture or cancel</h2>
      {capture && (
        <form method="post" action={`/console/payments/${payment.id}/capture`} class="filters">
          <Csrf operator={operator} />
          <label>
            Amount to capture ({payment.currency}; empty: all of it)
            <input name="amount" inputmode="decimal" placeholder={money(payment.amount_minor, payment.currency)} />
          </label>
          <button type="submit">Review capture</button>
        </form>
      )}
      {cancel && <ProposeButton operator={operator} action={`/console/payments/${payment.id}/cancel`} label="Review cancel" />}
    </section>
  );
};

export const PaymentPage: FC<{ operator: ConsoleSignedIn; payment: PaymentRow; history: PaymentHistory; audit: AuditRow[]; links: PaymentLinks; waits: WaitView[] }> = ({ operator, payment, history, audit, links, waits }) => (
  <Layout title={`Payment ${payment.id}`} operator={operator}>
    <Details payment={payment} links={links} />
    <Commands operator={operator} payment={payment} />
    {operator.role === 'operator' && <RefundForm operator={operator} payment={payment} />}
    <Routing payment={payment} />
    <Table caption="Waits" head={['Window', 'Waits for', 'Since', 'Deadline']} rows={waits.map((w) => [w.window, w.waitsFor, when(w.since), when(w.until)])} />
    <RecoverySchedule payment={payment} />
    {[...historyTables(operator, payment, history), auditTable(audit)].map((table) => (
      <Table caption={table.caption} head={table.head} rows={table.rows} />
    ))}
  </Layout>
);
