/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import type { DiscrepancyView, EvidenceRequestRow, FailingEventRow, RecoveredRevenueRow, RecoveryPeriod } from '../../db/console';
import type { AuditRow } from '../../db/operators';
import type { ReconciliationRunRow } from '../../db/reconciliation';
import type { DisputeRow, PaymentRow } from '../../domain/resources';
import type { ConsoleSignedIn } from '../context';
import { Csrf, Layout, money, Table, when } from './pages';

/** The console's overviews: disputes by deadline, recovery, reconciliation, failing endpoints, the audit. */

const json = (value: unknown) => <code>{value === null || value === undefined ? '' : JSON.stringify(value)}</code>;
const paymentLink = (id: string | null) => (id ? <a href={`/console/payments/${id}`}>{id}</a> : '');

/** One POST button to propose an action (its confirmation page follows); shown to operators only. */
export const ProposeButton: FC<{ operator: ConsoleSignedIn; action: string; label: string }> = ({ operator, action, label }) =>
  operator.role === 'operator' ? (
    <form method="post" action={action} class="inline">
      <Csrf operator={operator} />
      <button type="submit" class="secondary">
        {label}
      </button>
    </form>
  ) : null;

export const DisputesPage: FC<{ operator: ConsoleSignedIn; disputes: DisputeRow[]; now: Date }> = ({ operator, disputes, now }) => (
  <Layout title="Disputes by deadline" operator={operator}>
    <Table
      caption={`${disputes.length} open dispute${disputes.length === 1 ? '' : 's'}, nearest deadline first`}
      head={['Dispute', 'Payment', 'Amount', 'Stage', 'Status', 'Evidence due', 'Left', 'Evidence', 'Tenant']}
      rows={disputes.map((d) => [
        <a href={`/console/disputes/${d.id}`}>{d.id}</a>,
        paymentLink(d.payment_id),
        money(d.amount_minor, d.currency),
        d.stage,
        d.status,
        when(d.evidence_due_by),
        left(d.evidence_due_by, now),
        Object.keys(d.evidence).length === 0 ? 'none' : Object.keys(d.evidence).join(', '),
        d.tenant_id,
      ])}
    />
  </Layout>
);

/** Time left until a deadline, in hours or days; "passed" once it has. */
function left(at: Date, now: Date): string {
  const ms = at.getTime() - now.getTime();
  if (ms <= 0) return 'passed';
  return ms < 48 * 3600_000 ? `${Math.floor(ms / 3600_000)} h` : `${Math.floor(ms / (24 * 3600_000))} days`;
}

export const DisputePage: FC<{ operator: ConsoleSignedIn; dispute: DisputeRow; evidence: EvidenceRequestRow[]; audit: AuditRow[]; now: Date }> = ({ operator, dispute, evidence, audit, now }) => (
  <Layout title={`Dispute ${dispute.id}`} operator={operator}>
    <dl>
      <dt>Payment</dt>
      <dd>{paymentLink(dispute.payment_id)}</dd>
      <dt>Amount</dt>
      <dd>
        {money(dispute.amount_minor, dispute.currency)} · fee {money(dispute.fee_minor, dispute.currency)}
      </dd>
      <dt>Stage, status</dt>
      <dd>
        {dispute.stage} · {dispute.status}
      </dd>
      <dt>Reason</dt>
      <dd>{dispute.reason}</dd>
      <dt>PSP</dt>
      <dd>
        {dispute.provider} · <code>{dispute.provider_dispute_id}</code>
      </dd>
      <dt>Evidence due</dt>
      <dd>
        {when(dispute.evidence_due_by)} ({left(dispute.evidence_due_by, now)})
      </dd>
      <dt>Evidence submitted</dt>
      <dd>{dispute.evidence_submitted_at ? when(dispute.evidence_submitted_at) : 'not yet'}</dd>
      <dt>Held</dt>
      <dd>{dispute.held_reason ? `${dispute.held_reason}${dispute.released_at ? ` (released ${when(dispute.released_at)})` : ''}` : 'no'}</dd>
      <dt>Tenant</dt>
      <dd>{dispute.tenant_id}</dd>
    </dl>
    {dispute.status === 'needs_response' && <ProposeButton operator={operator} action={`/console/disputes/${dispute.id}/accept`} label="Review accepting the dispute" />}
    <Table caption="Evidence staged" head={['Field', 'Text']} rows={Object.entries(dispute.evidence).map(([field, text]) => [field, text])} />
    <Table caption="Evidence requests" head={['Received', 'Digest', 'Bytes', 'Evidence']} rows={evidence.map((e) => [when(e.created_at), <code>{e.digest.slice(0, 16)}</code>, String(e.bytes), json(e.evidence)])} />
    <Table caption="Operator actions" head={['When', 'Who', 'Action', 'State', 'Idempotency key']} rows={audit.map((a) => [when(a.created_at), a.actor_email ?? a.actor, a.action, a.state, <code>{a.idempotency_key ?? ''}</code>])} />
  </Layout>
);

export const RecoveryPage: FC<{ operator: ConsoleSignedIn; payments: PaymentRow[]; period: RecoveryPeriod; revenue: RecoveredRevenueRow[] }> = ({ operator, payments, period, revenue }) => (
  <Layout title="Recovery" operator={operator}>
    <Table
      caption={`${payments.length} recovering payment${payments.length === 1 ? '' : 's'}, next attempt first`}
      head={['Payment', 'Amount', 'Attempts', 'Next attempt', 'Window ends', 'Last decline', 'Tenant']}
      rows={payments.map((p) => [
        paymentLink(p.id),
        money(p.amount_minor, p.currency),
        String(p.recovery?.attempts ?? ''),
        p.recovery?.next_attempt_at ? when(p.recovery.next_attempt_at) : 'none',
        p.recovery ? when(p.recovery.window_ends_at) : '',
        p.recovery?.last_decline.code ?? '',
        p.tenant_id,
      ])}
    />
    <section>
      <h2>Revenue recovered</h2>
      <nav class="pager" aria-label="Period">
        {(['day', 'week', 'month'] as const).map((p) => (p === period ? <strong aria-current="page">per {p}</strong> : <a href={`/console/recovery?period=${p}`}>per {p}</a>))}
      </nav>
      <p class="muted">Payments paid on a recovery retry, by the UTC {period} they were created in: what was captured.</p>
    </section>
    <Table caption={`Per currency and ${period}`} head={[period === 'day' ? 'Day' : period === 'week' ? 'Week of' : 'Month', 'Currency', 'Payments', 'Recovered']} rows={revenue.map((r) => [when(r.period).slice(0, 10), r.currency, String(r.payments), money(r.amount_minor, r.currency)])} />
  </Layout>
);

export const ReconciliationPage: FC<{ operator: ConsoleSignedIn; runs: ReconciliationRunRow[] | null; discrepancies: DiscrepancyView[] }> = ({ operator, runs, discrepancies }) => (
  <Layout title="Reconciliation" operator={operator}>
    {runs === null ? (
      <p class="muted">A run covers every tenant at a PSP: a tenant's operator sees the discrepancies about its own payments and refunds.</p>
    ) : (
      <Table
        caption="Latest runs"
        head={['Run', 'PSP', 'Window', 'Status', 'Discrepancies', 'PSP transactions', 'Started', 'Finished', 'Error']}
        rows={runs.map((r) => [<code>{r.id}</code>, r.provider, `${when(r.window_from)} – ${when(r.window_to)}`, r.status, String(r.discrepancy_count), String(r.provider_transactions), when(r.started_at), when(r.finished_at), r.error ?? ''])}
      />
    )}
    <Table
      caption="Discrepancies, newest first"
      head={['Kind', 'Subject', 'Payment', 'Refund', 'PSP', 'Window', 'Last run', 'Ours', "PSP's"]}
      rows={discrepancies.map((d) => [d.kind, <code>{d.subject}</code>, paymentLink(d.payment_id), d.refund_id ?? '', d.provider, `${when(d.window_from)} – ${when(d.window_to)}`, `${d.run_id} (${d.run_status})`, json(d.ours), json(d.provider_figures)])}
    />
  </Layout>
);

export const EndpointsPage: FC<{ operator: ConsoleSignedIn; events: FailingEventRow[] }> = ({ operator, events }) => {
  const endpoints = new Map<string, { url: string | null; failed: number; retrying: number; last: FailingEventRow }>();
  for (const e of events) {
    const seen = endpoints.get(e.tenant_id) ?? { url: e.webhook_url, failed: 0, retrying: 0, last: e };
    if (e.delivery_state === 'failed') seen.failed++;
    else seen.retrying++;
    if ((e.last_at?.getTime() ?? 0) > (seen.last.last_at?.getTime() ?? 0)) seen.last = e;
    endpoints.set(e.tenant_id, seen);
  }
  return (
    <Layout title="Failing endpoints" operator={operator}>
      <Table
        caption="Merchant endpoints with undelivered events"
        head={['Tenant', 'Endpoint', 'Failed', 'Retrying', 'Last attempt', 'Last answer']}
        rows={[...endpoints].map(([tenant, s]) => [tenant, s.url ?? '(none set)', String(s.failed), String(s.retrying), when(s.last.last_at), s.last.last_status === null ? (s.last.last_error ?? '') : `HTTP ${s.last.last_status}`])}
      />
      <Table
        caption="Their events, newest first"
        head={['Event', 'Type', 'State', 'Attempts', 'Last answer', 'Next attempt', 'Tenant', '']}
        rows={events.map((e) => [
          <code>{e.id}</code>,
          e.type,
          e.delivery_state,
          String(e.attempts),
          e.last_status === null ? (e.last_error ?? '') : `HTTP ${e.last_status}`,
          e.delivery_state === 'pending' ? when(e.next_attempt_at) : '',
          e.tenant_id,
          <ProposeButton operator={operator} action={`/console/events/${e.id}/resend`} label="Review resend" />,
        ])}
      />
    </Layout>
  );
};

/** Where an action was taken: a link to its object when the console has a page for it. */
function objectLink(a: AuditRow) {
  if (a.object_type === 'payment') return paymentLink(a.object_id);
  if (a.object_type === 'dispute') return <a href={`/console/disputes/${a.object_id}`}>{a.object_id}</a>;
  return `${a.object_type} ${a.object_id}`;
}

export const AuditPage: FC<{ operator: ConsoleSignedIn; rows: AuditRow[]; older: string | null; newer: string | null }> = ({ operator, rows, older, newer }) => (
  <Layout title="Audit" operator={operator}>
    <Table
      caption="Every operator action, newest first"
      head={['When', 'Who', 'Action', 'On', 'Amount', 'State', 'Idempotency key', 'Outcome']}
      rows={rows.map((a) => [
        when(a.created_at),
        a.actor_email ?? a.actor,
        a.idempotency_key ? <a href={`/console/actions/${a.id}`}>{a.action}</a> : a.action,
        objectLink(a),
        a.amount_minor === null ? '' : money(a.amount_minor, a.currency ?? ''),
        a.state,
        <code>{a.idempotency_key ?? ''}</code>,
        typeof a.outcome?.message === 'string' ? a.outcome.message : '',
      ])}
    />
    <nav class="pager" aria-label="Pages">
      {newer && <a href={`/console/audit?ending_before=${newer}`}>Newer</a>}
      {older && <a href={`/console/audit?starting_after=${older}`}>Older</a>}
    </nav>
  </Layout>
);
