/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { FC } from 'hono/jsx';
import type { ConsoleSignedIn } from '../context';
import type { AuditRow } from '../../db/operators';
import { Csrf, Layout, money, when } from './pages';

/**
 * An action's page (GET /console/actions/{id}): while proposed, what it will do and one button
 * to confirm it; once decided, what happened. The idempotency key was minted by the server
 * when the action was proposed and stays with it: a double click, a reload or a second tab
 * confirms the same operation.
 */
export const ActionPage: FC<{ operator: ConsoleSignedIn; action: AuditRow }> = ({ operator, action }) => {
  const amount = action.amount_minor === null ? '' : money(action.amount_minor, action.currency ?? '');
  const outcome = action.outcome ?? {};
  return (
    <Layout title={action.state === 'proposed' ? `Confirm: refund ${amount}` : `Refund ${amount}: ${action.state}`} operator={operator}>
      <dl>
        <dt>Payment</dt>
        <dd>
          <a href={`/console/payments/${action.object_id}`}>{action.object_id}</a>
        </dd>
        <dt>Amount</dt>
        <dd>{amount}</dd>
        <dt>Reason</dt>
        <dd>{typeof outcome.reason === 'string' ? outcome.reason : ''}</dd>
        <dt>Proposed</dt>
        <dd>
          {when(action.created_at)} by {action.actor_email ?? action.actor}
        </dd>
        <dt>Idempotency key</dt>
        <dd>
          <code>{action.idempotency_key ?? ''}</code>
        </dd>
      </dl>
      {action.state === 'proposed' ? (
        operator.role === 'operator' && (
          <form method="post" action={`/console/actions/${action.id}/confirm`}>
            <Csrf operator={operator} />
            <button type="submit">Refund {amount}</button>
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
