/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { secureHeaders } from 'hono/secure-headers';
import { paymentHistory, searchPayments } from '../../db/console';
import { auditOf } from '../../db/operators';
import { ApiError, errorStatus } from '../../domain/errors';
import type { PaymentRow } from '../../domain/resources';
import type { ApiDeps, AppEnv, ConsoleSignedIn } from '../context';
import { errorHandler } from '../middleware';
import { ActionPage } from './action-pages';
import { ErrorPage, SignInPage } from './pages';
import { PaymentPage, PaymentsPage, type PaymentLinks } from './payment-pages';
import { confirmRefund, proposeRefund } from './refund';
import { consoleActionOr404, consolePaymentOr404 } from './scope';
import { parseSearch } from './search';
import { checkAction, checkCsrf, requireSession, signedIn, signIn, signinFormToken, signOut } from './session';
import { CONSOLE_CSS } from './style';

/**
 * The operator console (docs/console.md): server-rendered pages under /console, served by the
 * API process. Reads need a session; every POST needs the session's CSRF token, and an action
 * needs the operator role. Routes stay thin: the work is in the modules beside this one.
 */

/** default-src 'self' and nothing inline: no script at all, styles from our own sheet, forms only to us, never framed. */
const consoleHeaders = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'"],
    objectSrc: ["'none'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
  xFrameOptions: 'DENY',
});

/** Console forms are small. */
const formLimit = bodyLimit({
  maxSize: 16 * 1024,
  onError: () => {
    throw new ApiError('payload_too_large', 'Console forms are limited to 16 KiB.');
  },
});

async function formOf(c: Context<AppEnv>): Promise<Record<string, string>> {
  const body = await c.req.parseBody();
  return Object.fromEntries(Object.entries(body).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

/** Errors as pages: a refusal is its status with a message; anything else is the API's one error handler. */
function consoleErrors(): (error: Error, c: Context<AppEnv>) => Response | Promise<Response> {
  const fallback = errorHandler();
  return (error, c) => {
    if (!(error instanceof ApiError)) return fallback(error, c);
    for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
    return c.html(<ErrorPage status={errorStatus[error.type]} message={error.message} operator={c.var.consoleOperator} />, errorStatus[error.type]);
  };
}

function paymentLinks(deps: ApiDeps, operator: ConsoleSignedIn, payment: PaymentRow & { traceparent?: string | null }): PaymentLinks {
  // The Temporal UI and the trace viewer show every tenant and ask for no sign-in: operators of one tenant get no link.
  if (operator.tenantId !== null) return { temporal: null, trace: null };
  const ui = deps.config.CONSOLE_TEMPORAL_UI_URL ?? null;
  const traces = deps.config.CONSOLE_TRACE_URL ?? null;
  const traceId = /^[0-9a-f]{2}-([0-9a-f]{32})-/.exec(payment.traceparent ?? '')?.[1] ?? null;
  return {
    temporal: ui ? `${ui}/namespaces/${encodeURIComponent(deps.config.TEMPORAL_NAMESPACE ?? 'default')}/workflows/${encodeURIComponent(payment.workflow_id)}` : null,
    trace: traces && traceId ? `${traces}/${traceId}` : null,
  };
}

function signInRoutes(app: Hono<AppEnv>, deps: ApiDeps): void {
  app.get('/console', (c) => c.redirect('/console/payments', 303));
  app.get('/console/assets/console.css', (c) => {
    c.header('Cache-Control', 'public, max-age=3600');
    return c.body(CONSOLE_CSS, 200, { 'Content-Type': 'text/css; charset=utf-8' });
  });
  app.get('/console/sign-in', (c) => c.html(<SignInPage formToken={signinFormToken(c, deps)} />));
  app.post('/console/sign-in', formLimit, async (c) => {
    const form = await formOf(c);
    const email = form.email ?? '';
    const outcome = await signIn(c, deps, { email, password: form.password ?? '', formToken: form.form_token ?? '' });
    if (outcome === 'signed_in') return c.redirect('/console/payments', 303);
    const message = outcome === 'limited' ? 'Too many failed sign-ins for this account or address; try again in 15 minutes.' : 'Wrong email or password.';
    return c.html(<SignInPage formToken={signinFormToken(c, deps)} message={message} email={email} />, outcome === 'limited' ? 429 : 401);
  });
}

function paymentRoutes(app: Hono<AppEnv>, deps: ApiDeps): void {
  const session = requireSession(deps);
  app.post('/console/sign-out', session, formLimit, async (c) => {
    checkCsrf(c, await formOf(c));
    await signOut(c, deps);
    return c.redirect('/console/sign-in', 303);
  });
  app.get('/console/payments', session, async (c) => {
    const operator = signedIn(c);
    const { form, search } = parseSearch(c.req.query(), operator);
    const page = await searchPayments(deps.sql, search);
    const first = page.rows[0]?.id ?? null;
    const last = page.rows.at(-1)?.id ?? null;
    const paging = search.endingBefore !== undefined ? { older: last, newer: page.hasMore ? first : null } : { older: page.hasMore ? last : null, newer: search.startingAfter !== undefined ? first : null };
    return c.html(<PaymentsPage operator={operator} form={form} rows={page.rows} {...paging} />);
  });
  app.get('/console/payments/:id', session, async (c) => {
    const operator = signedIn(c);
    const payment = await consolePaymentOr404(deps, c, c.req.param('id'));
    const [history, audit] = await Promise.all([paymentHistory(deps.sql, payment), auditOf(deps.sql, payment.id)]);
    return c.html(<PaymentPage operator={operator} payment={payment} history={history} audit={audit} links={paymentLinks(deps, operator, payment)} />);
  });
}

function actionRoutes(app: Hono<AppEnv>, deps: ApiDeps): void {
  const session = requireSession(deps);
  // Propose: nothing runs yet; the confirmation page carries the key the server minted (POST, redirect, GET).
  app.post('/console/payments/:id/refunds', session, formLimit, async (c) => {
    const form = await formOf(c);
    const operator = checkAction(c, form);
    const payment = await consolePaymentOr404(deps, c, c.req.param('id'));
    const action = await proposeRefund(deps, operator, payment, { amount: form.amount ?? '', reason: form.reason ?? '' });
    return c.redirect(`/console/actions/${action.id}`, 303);
  });
  app.get('/console/actions/:id', session, async (c) => c.html(<ActionPage operator={signedIn(c)} action={await consoleActionOr404(deps, c, c.req.param('id'))} />));
  app.post('/console/actions/:id/confirm', session, formLimit, async (c) => {
    checkAction(c, await formOf(c));
    const action = await consoleActionOr404(deps, c, c.req.param('id'));
    // Decided already (a reload of the result, a second tab): the answer stands.
    if (action.state === 'proposed') await confirmRefund(c, deps, action);
    return c.redirect(`/console/actions/${action.id}`, 303);
  });
}

export function consoleRoutes(deps: ApiDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use('/console', consoleHeaders);
  app.use('/console/*', consoleHeaders);
  app.onError(consoleErrors());
  signInRoutes(app, deps);
  paymentRoutes(app, deps);
  actionRoutes(app, deps);
  return app;
}
