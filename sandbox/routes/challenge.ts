import { Hono, type Context } from 'hono';
import { chargeChanged } from '../effects';
import type { Tx } from '../idempotency';
import type { ChargeRow } from '../objects';
import { paymentMethodBehaviour } from '../payment-methods';
import type { SandboxDeps } from '../deps';

/**
 * The 3-D Secure challenge as the issuer's page would show it: GET renders the page with
 * Approve and Deny; POST with the form field result=approve|deny completes it and sends the
 * customer back (303) to the charge's return_url with the payment reference. A challenge
 * whose charge was voided shows "expired" and changes nothing; one already completed sends
 * the customer back again, changing nothing either.
 */

const escape = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font-family:sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}
button{font-size:1.1rem;padding:.6rem 1.4rem;margin-right:1rem}.amount{font-size:1.6rem}</style></head>
<body><h1>${escape(title)}</h1>${body}</body></html>`;
}

const formatAmount = (row: ChargeRow) => `${(row.amount_minor / 100).toFixed(2)} ${row.currency}`;

/** Where the customer goes back to: the return_url with payment_id (our reference) and charge_id added. */
export function returnLocation(row: ChargeRow): string | null {
  if (!row.return_url) return null;
  const url = new URL(row.return_url);
  url.searchParams.set('payment_id', row.reference);
  url.searchParams.set('charge_id', row.id);
  return url.toString();
}

function describe(row: ChargeRow): { title: string; text: string } {
  if (row.challenge_state === 'expired') return { title: 'Authentication expired', text: 'This payment was canceled; there is nothing left to authenticate.' };
  if (row.challenge_state === 'denied') return { title: 'Authentication failed', text: 'You denied this payment.' };
  return { title: 'Authentication complete', text: `The payment is now ${row.status}.` };
}

function render(c: Context, row: ChargeRow) {
  if (row.status === 'requires_action' && row.challenge_state === 'pending') {
    return c.html(
      page(
        '3-D Secure authentication',
        `<p>Sandbox bank: confirm the payment of</p>
<p class="amount" id="amount">${escape(formatAmount(row))}</p>
<p>reference <code id="reference">${escape(row.reference)}</code></p>
<form method="post">
<button type="submit" name="result" value="approve" id="approve">Approve</button>
<button type="submit" name="result" value="deny" id="deny">Deny</button>
</form>`,
      ),
    );
  }
  const { title, text } = describe(row);
  const back = returnLocation(row);
  return c.html(
    page(title, `<p id="state" data-state="${escape(row.challenge_state ?? '')}">${escape(text)}</p>${back && row.challenge_state !== 'expired' ? `<p><a href="${escape(back)}">Back to the shop</a></p>` : ''}`),
    row.challenge_state === 'expired' ? 410 : 200,
  );
}

/** Completes a pending challenge; anything else is left as it is. */
async function complete(tx: Tx, deps: SandboxDeps, row: ChargeRow, result: 'approve' | 'deny'): Promise<ChargeRow> {
  if (row.status !== 'requires_action' || row.challenge_state !== 'pending') return row;
  const behaviour = paymentMethodBehaviour(row.payment_method);
  const declinedAfterApproval = behaviour?.kind === 'challenge' && behaviour.declineAfterApproval;
  let updated: ChargeRow | undefined;
  if (result === 'deny') {
    [updated] = await tx<ChargeRow[]>`
      UPDATE sandbox.charges
      SET status = 'declined', challenge_state = 'denied', failure_code = 'authentication_failed',
          failure_message = 'The customer failed or refused authentication.', updated_at = clock_timestamp()
      WHERE id = ${row.id} RETURNING *`;
  } else if (declinedAfterApproval) {
    [updated] = await tx<ChargeRow[]>`
      UPDATE sandbox.charges
      SET status = 'declined', challenge_state = 'approved', failure_code = 'card_declined',
          failure_message = 'Your card was declined.', updated_at = clock_timestamp()
      WHERE id = ${row.id} RETURNING *`;
  } else {
    [updated] = await tx<ChargeRow[]>`
      UPDATE sandbox.charges
      SET status = CASE WHEN capture THEN 'succeeded' ELSE 'requires_capture' END,
          amount_captured_minor = CASE WHEN capture THEN amount_minor ELSE 0 END,
          challenge_state = 'approved', updated_at = clock_timestamp()
      WHERE id = ${row.id} RETURNING *`;
  }
  await chargeChanged(tx, deps, updated!);
  return updated!;
}

export function challengeRoutes(deps: SandboxDeps) {
  const { sql } = deps;
  const notFoundPage = (c: Context) => c.html(page('No such challenge', '<p>This link is not valid.</p>'), 404);

  return new Hono()
    .get('/:id', async (c) => {
      const [row] = await sql<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${c.req.param('id')} AND challenge_url IS NOT NULL`;
      return row ? render(c, row) : notFoundPage(c);
    })
    .post('/:id', async (c) => {
      const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
      const result = form['result'];
      if (result !== 'approve' && result !== 'deny') {
        return c.html(page('Bad request', '<p>result must be approve or deny.</p>'), 400);
      }
      const id = c.req.param('id');
      const row = await sql.begin(async (tx) => {
        const [locked] = await tx<ChargeRow[]>`SELECT * FROM sandbox.charges WHERE id = ${id} AND challenge_url IS NOT NULL FOR UPDATE`;
        return locked ? complete(tx, deps, locked, result) : null;
      });
      if (!row) return notFoundPage(c);
      const back = returnLocation(row);
      if (row.challenge_state === 'expired' || !back) return render(c, row);
      return c.redirect(back, 303);
    });
}
