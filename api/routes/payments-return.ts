import { createHash } from 'node:crypto';
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { ApplicationFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Context } from 'hono';
import { paymentForReturn, takeChallengeReturnCall, type PaymentReturnRow } from '../../db/payments';
import { FailureType } from '../../shared/definitions';
import { challengeReturnUpdate } from '../../shared/payments';
import type { ApiDeps, AppEnv, ProviderWebhookReceiver } from '../context';
import { kindsWhere } from '../../provider/registry';

/**
 * The customer's way back from a 3-D Secure challenge at a PSP whose kind's challengeReturn is
 * `orchestrator`: the PSP sends the customer's browser here, to the returnUrl the charge
 * step gave it (`<API_PUBLIC_URL>/return/{payment_id}`), with what the PSP needs to decide the
 * payment (`redirectResult`). The route hands it to the payment's run (the
 * `challengeReturn` update, whose details call at the PSP decides the charge), then sends the
 * customer on (303) to the merchant's `return_url` stored on the payment, with `payment_id`
 * added: never to an address from the request. Unauthenticated (the customer's browser), so it
 * is bounded: a malformed result is refused before anything is asked; a return reaches the run
 * only while the payment waits for its customer's challenge at such a PSP; and a payment gets at
 * most CHALLENGE_RETURN_DETAILS_CALLS details calls, each taken in PostgreSQL before the update is
 * sent (db/payments.ts takeChallengeReturnCall). Past them the customer is sent on without
 * effect: the PSP's notification or the run's poll decides the payment.
 */

/**
 * A PSP's redirectResult: base64 or base64url text, whose parts it may join with `!` (a
 * documented return is `redirectResult=X6XtfGC3%21Y…`), at most this long. Anything else is
 * refused before the run or the PSP sees it.
 */
export const REDIRECT_RESULT_MAX_LENGTH = 8192;
const redirectResultPattern = /^[A-Za-z0-9+/=_!-]+$/;
/** The details calls one payment's returns may cause at its PSP: enough for a customer who comes back twice, and no flood. */
export const CHALLENGE_RETURN_DETAILS_CALLS = 3;

/**
 * The redirectResult as the PSP issued it, or null when it cannot be one. A `+` the PSP left
 * unescaped reads as a space in a query string: base64 has no spaces, so it is a `+` again.
 */
export function wellFormedRedirectResult(value: string | undefined): string | null {
  if (value === undefined) return null;
  const result = value.replaceAll(' ', '+');
  if (result.length === 0 || result.length > REDIRECT_RESULT_MAX_LENGTH || !redirectResultPattern.test(result)) return null;
  return result;
}
/** Our payment ids (domain/ids.ts newId): anything else is no payment of ours. */
const paymentIdPattern = /^pay_[0-9a-z]{10,64}$/;

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(title: string, text: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font-family:sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}</style></head>
<body><h1>${escape(title)}</h1><p id="message">${escape(text)}</p></body></html>`;
}

/** The merchant's return_url with the payment's id added; null when the payment has none (or it is no URL). */
export function merchantReturnLocation(row: Pick<PaymentReturnRow, 'id' | 'return_url'>): string | null {
  if (!row.return_url) return null;
  try {
    const url = new URL(row.return_url);
    url.searchParams.set('payment_id', row.id);
    return url.toString();
  } catch {
    return null;
  }
}

const returnRoute = createRoute({
  method: 'get',
  path: '/return/{payment_id}',
  tags: ['Payments'],
  summary: "The customer's return from a 3-D Secure challenge (a PSP's returnUrl)",
  description:
    'Where a PSP whose challenge comes back to the orchestrator (kinds ' + kindsWhere((c) => c.challengeReturn === 'orchestrator') + ') sends the customer after 3-D Secure. No API key: the ' +
    "customer's browser calls it. While the payment waits for its customer (`requires_action`) at such a PSP, the payment's " +
    "run completes it with the PSP's details call (with the `redirectResult` it sent), then the customer is " +
    "sent (303) to the payment's `return_url` with `payment_id` added: always the one stored on the payment, never an address " +
    'from the request. A payment no longer waiting, or at a PSP that sends its customers to the merchant, is sent on without ' +
    'effect; the same return again changes nothing more. Bounded: a malformed `redirectResult` is refused before anything is ' +
    `asked; a payment gets at most ${CHALLENGE_RETURN_DETAILS_CALLS} details calls from its returns, counted before the return ` +
    "reaches its run; past them the customer is sent on without effect and the PSP's notification or the run's poll decides. " +
    'Answers are HTML pages for the browser.',
  security: [],
  request: {
    params: z.object({ payment_id: z.string().openapi({ example: 'pay_01jd5k3x7m9q2r4t6v8w0y1z3a' }) }),
    query: z.object({
      redirectResult: z.string().optional().openapi({ description: `What the PSP appended to its returnUrl: base64 or base64url text (its parts joined by \`!\`), at most ${REDIRECT_RESULT_MAX_LENGTH} characters; a space is read as the \`+\` an unescaped query gave.` }),
    }),
  },
  responses: {
    200: { description: 'The payment has no `return_url`: a page that says nothing of the payment (no key: no status, no amount).', content: { 'text/html': { schema: z.string() } } },
    303: { description: "On to the payment's `return_url` (Location), with `payment_id` added: after the return was applied, or without effect (the payment no longer waits, its PSP sends customers to the merchant, or its details calls are used up)." },
    400: { description: 'No `redirectResult`, one too long or of other characters, or one the PSP does not know: nothing changed.', content: { 'text/html': { schema: z.string() } } },
    404: { description: 'No such payment.', content: { 'text/html': { schema: z.string() } } },
  },
});

export function paymentReturnRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<AppEnv>({
    // Bad query or path: the same page as any other refusal, never the JSON error of the API.
    defaultHook: (result, c) => (result.success ? undefined : c.html(page('Bad request', 'This return link is not valid.'), 400)),
  });
  const receivers: readonly ProviderWebhookReceiver[] = deps.providerWebhooks === undefined ? [] : Array.isArray(deps.providerWebhooks) ? deps.providerWebhooks : [deps.providerWebhooks as ProviderWebhookReceiver];
  /** Whether the payment's PSP sends its customers back to us (its kind's challengeReturn). */
  const comesBackHere = (provider: string | null) => receivers.some((r) => r.name === provider && r.challengeReturn === 'orchestrator');

  app.openapi(returnRoute, async (c) => {
    const id = c.req.valid('param').payment_id;
    const notFound = () => c.html(page('No such payment', 'This return link is not valid.'), 404);
    if (!paymentIdPattern.test(id)) return notFound();
    const redirectResult = wellFormedRedirectResult(c.req.valid('query').redirectResult);
    if (redirectResult === null) {
      return c.html(page('Bad request', `The return carries no valid redirectResult (base64, at most ${REDIRECT_RESULT_MAX_LENGTH} characters); nothing changed.`), 400);
    }
    const payment = await paymentForReturn(deps.sql, id);
    if (!payment) return notFound();
    if (payment.status !== 'requires_action' || !comesBackHere(payment.provider)) return sendOn(c, payment);
    if (!(await takeChallengeReturnCall(deps.sql, id, CHALLENGE_RETURN_DETAILS_CALLS))) {
      c.get('logger').warn({ payment_id: id }, 'the payment has had all its details calls; the return is not applied (the PSP notification or the poll decides)');
      return sendOn(c, payment);
    }
    const refused = await completeChallenge(deps, c, payment, redirectResult);
    if (refused) return c.html(page('Bad request', 'The payment provider does not recognise this return; nothing changed.'), 400);
    return sendOn(c, (await paymentForReturn(deps.sql, id)) ?? payment);
  });
  return app;
}

/** On to the merchant's return_url (303), or, when it has none, a page that says nothing of the payment (no key: no status, no amount). */
function sendOn(c: Context<AppEnv>, payment: PaymentReturnRow) {
  const location = merchantReturnLocation(payment);
  if (location) return c.redirect(location, 303);
  return c.html(page('Back from your payment', 'You may close this page.'), 200);
}

/**
 * The return handed to the payment's run as the `challengeReturn` update, under an update id of
 * the payment and the result's hash (the same return again is the same update). Waits for its
 * answer up to IDEMPOTENCY_WAIT_MS. True when the PSP refused the result (nothing changed);
 * anything else (applied, no longer open, no answer in time, Temporal unreachable) sends the
 * customer on: the PSP's notification or the window's end decides a payment the return did not.
 */
async function completeChallenge(deps: ApiDeps, c: Context<AppEnv>, payment: PaymentReturnRow, redirectResult: string): Promise<boolean> {
  const hash = createHash('sha256').update(redirectResult).digest('hex').slice(0, 32);
  const log = c.get('logger');
  try {
    await deps.temporal.connection.withDeadline(Date.now() + deps.config.IDEMPOTENCY_WAIT_MS, () =>
      deps.temporal.workflow.getHandle(payment.workflow_id).executeUpdate(challengeReturnUpdate, { updateId: `challenge-return-${hash}`, args: [{ redirectResult, requestId: c.get('requestId') }] }),
    );
    return false;
  } catch (error) {
    const cause = error instanceof WorkflowUpdateFailedError ? error.cause : undefined;
    const type = cause instanceof ApplicationFailure ? cause.type : undefined;
    if (type === FailureType.ChallengeReturnRefused) return true;
    if (type !== FailureType.ChallengeNotOpen) log.warn({ err: error, payment_id: payment.id }, 'the return from the challenge was not applied; the PSP notification or the window decides');
    return false;
  }
}
