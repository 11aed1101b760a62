/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import type { ConsoleSignedIn } from '../context';
import type { AuditRow } from '../../db/operators';
import { Csrf, Layout, money, when } from './pages';

/** What the page says of each kind of action: its button, and the object it is taken on. */
function wording(action: AuditRow): { button: string; title: string; object: { label: string; href: string } } {
  const amount = action.amount_minor === null ? '' : money(action.amount_minor, action.currency ?? '');
  const paymentId = typeof action.outcome?.payment_id === 'string' ? action.outcome.payment_id : null;
  switch (action.action) {
    case 'event.resend':
      return {
        button: `Resend ${action.object_id}`,
        title: `resend event ${action.object_id}`,
        object: paymentId ? { label: `Event ${action.object_id} of payment ${paymentId}`, href: `/console/payments/${paymentId}` } : { label: `Event ${action.object_id}`, href: '/console/endpoints' },
      };
    case 'dispute.accept':
      return { button: `Accept the dispute: lose ${amount}`, title: `accept dispute ${action.object_id} (lose ${amount})`, object: { label: `Dispute ${action.object_id}`, href: `/console/disputes/${action.object_id}` } };
    default: {
      const verb = action.action.charAt(0).toUpperCase() + action.action.slice(1);
      return { button: `${verb} ${amount}`, title: `${action.action} ${amount}`, object: { label: `Payment ${action.object_id}`, href: `/console/payments/${action.object_id}` } };
    }
  }
}

/**
 * An action's page (GET /console/actions/{id}): while proposed, what it will do (the amount it
 * moves, the object) and one button to confirm it; once decided, what happened. The
 * idempotency key was minted by the server when the action was proposed and stays with it: a
 * double click, a reload or a second tab confirms the same operation.
 */
export const ActionPage: FC<{ operator: ConsoleSignedIn; action: AuditRow }> = ({ operator, action }) => {
  const amount = action.amount_minor === null ? 'none: no money moves' : money(action.amount_minor, action.currency ?? '');
  const outcome = action.outcome ?? {};
  const words = wording(action);
  return (
    <Layout title={action.state === 'proposed' ? `Confirm: ${words.title}` : `${words.title.charAt(0).toUpperCase()}${words.title.slice(1)}: ${action.state}`} operator={operator}>
      <dl>
        <dt>On</dt>
        <dd>
          <a href={words.object.href}>{words.object.label}</a>
        </dd>
        <dt>Amount</dt>
        <dd>{amount}</dd>
        {action.action === 'refund' && (
          <>
            <dt>Reason</dt>
            <dd>{typeof outcome.reason === 'string' ? outcome.reason : ''}</dd>
          </>
        )}
        <dt>Proposed</dt>
        <dd>
          {when(action.created_at)} by {action.actor_email ?? action.actor}
        </dd>
        <dt>Idempotency key</dt>
        <dd>
          <code>{action.idempotency_key ?? ''}</code>
        </dd>
      </dl>
      {action.state === 'proposed' && typeof outcome.message === 'string' && (
        <p class="notice" role="status">
          {outcome.message} Confirm again to ask for the outcome under the same key.
        </p>
      )}
      {action.state === 'proposed' ? (
        operator.role === 'operator' && (
          <form method="post" action={`/console/actions/${action.id}/confirm`}>
            <Csrf operator={operator} />
            <button type="submit">{words.button}</button>
          </form>
        )
      ) : (
        <p class={`notice ${action.state === 'done' ? 'good' : 'bad'}`} role="status">
          {typeof outcome.message === 'string' ? outcome.message : action.state} ({when(action.decided_at)})
        </p>
      )}
    </Layout>
  );
};
