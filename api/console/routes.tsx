/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { secureHeaders } from 'hono/secure-headers';
import { consolePayment, disputeEvidence, failingEvents, latestDiscrepancies, openDisputes, paymentHistory, PSP_BUCKETS, pspBuckets, pspSegments, recoveredRevenue, RECOVERY_PERIODS, recoveringPayments, searchPayments, type PspBucket, type RecoveryPeriod } from '../../db/console';
import { auditOf, auditTrail } from '../../db/operators';
import { listRuns } from '../../db/reconciliation';
import { listHealth, POOLED_SCOPE, routingSnapshot } from '../../db/routing';
import { ApiError, errorStatus } from '../../domain/errors';
import { looksLikeId } from '../../domain/ids';
import type { PaymentRow } from '../../domain/resources';
import type { ApiDeps, AppEnv, ConsoleSignedIn } from '../context';
import { errorHandler } from '../middleware';
import { ActionPage } from './action-pages';
import { ErrorPage, SignInPage } from './pages';
import { PaymentPage, PaymentsPage, type PaymentLinks } from './payment-pages';
import { confirmAction, proposeAccept, proposePaymentCommand, proposeRefund, proposeResend } from './actions';
import { AuditPage, DisputePage, DisputesPage, EndpointsPage, ReconciliationPage, RecoveryPage } from './overview-pages';
import { paymentWaits } from './payment-pages';
import { PspsPage } from './psp-pages';
import { consoleActionOr404, consoleDisputeOr404, consoleEventOr404, consolePaymentOr404 } from './scope';
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
    const waits = paymentWaits(payment, history.attempts, (key) => (deps.config as unknown as Record<string, number | undefined>)[key]);
    return c.html(<PaymentPage operator={operator} payment={payment} history={history} audit={audit} links={paymentLinks(deps, operator, payment)} waits={waits} />);
  });
}

/** One of a query parameter's allowed values, its default when absent; anything else is a 400 page. */
function choice<T extends string>(given: string | undefined, allowed: readonly T[], fallback: T, name: string): T {
  if (given === undefined || given === '') return fallback;
  if (!(allowed as readonly string[]).includes(given)) throw new ApiError('invalid_request', `${name} must be one of ${allowed.join(', ')}.`);
  return given as T;
}

/** The PSPs page's `segment` (a routing segment's finest key, `visa:EUR:card`), or null for every segment; 400 for anything else. */
function segmentParam(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  if (!/^[a-z0-9_]{1,32}:[A-Z]{3}:[a-z0-9_]{1,32}$/.test(value)) throw new ApiError('invalid_request', 'segment: a network, a currency and a method type, as visa:EUR:card.');
  return value;
}

function overviewRoutes(app: Hono<AppEnv>, deps: ApiDeps): void {
  const session = requireSession(deps);
  app.get('/console/psps', session, async (c) => {
    const operator = signedIn(c);
    const bucket = choice(c.req.query('bucket'), Object.keys(PSP_BUCKETS) as PspBucket[], '1h', 'bucket');
    const to = Date.now();
    const from = to - PSP_BUCKETS[bucket].spanMs;
    const segment = segmentParam(c.req.query('segment'));
    const [rows, health, segments, attemptSegments] = await Promise.all([
      pspBuckets(deps.sql, { bucket, since: new Date(from), tenantId: operator.tenantId, segment }),
      listHealth(deps.sql),
      // A tenant's operator sees its own scope's estimates only (there are none unless its routing keeps its own).
      routingSnapshot(deps.sql, operator.tenantId ?? POOLED_SCOPE),
      pspSegments(deps.sql, { since: new Date(from), tenantId: operator.tenantId }),
    ]);
    const providers = [...new Set([...(deps.config.PROVIDERS ?? []).map((p) => p.name), ...health.map((h) => h.provider), ...rows.map((r) => r.provider)])];
    return c.html(<PspsPage operator={operator} data={{ bucket, from, to, rows, providers, health, segments, segment, attemptSegments }} />);
  });
  app.get('/console/disputes', session, async (c) => c.html(<DisputesPage operator={signedIn(c)} disputes={await openDisputes(deps.sql, signedIn(c).tenantId)} now={new Date()} />));
  app.get('/console/disputes/:id', session, async (c) => {
    const dispute = await consoleDisputeOr404(deps, c, c.req.param('id'));
    const [evidence, audit] = await Promise.all([disputeEvidence(deps.sql, dispute.id), auditOf(deps.sql, dispute.id)]);
    return c.html(<DisputePage operator={signedIn(c)} dispute={dispute} evidence={evidence} audit={audit} now={new Date()} />);
  });
  app.get('/console/recovery', session, async (c) => {
    const operator = signedIn(c);
    const period = choice(c.req.query('period'), Object.keys(RECOVERY_PERIODS) as RecoveryPeriod[], 'day', 'period');
    const [payments, revenue] = await Promise.all([recoveringPayments(deps.sql, operator.tenantId), recoveredRevenue(deps.sql, { period, tenantId: operator.tenantId, now: new Date() })]);
    return c.html(<RecoveryPage operator={operator} payments={payments} period={period} revenue={revenue} />);
  });
  app.get('/console/reconciliation', session, async (c) => {
    const operator = signedIn(c);
    // A run covers every tenant at its PSP: its counts are for operators without a tenant.
    const [runs, discrepancies] = await Promise.all([operator.tenantId === null ? listRuns(deps.sql, { limit: 50 }) : null, latestDiscrepancies(deps.sql, operator.tenantId)]);
    return c.html(<ReconciliationPage operator={operator} runs={runs?.rows ?? null} discrepancies={discrepancies} />);
  });
  app.get('/console/endpoints', session, async (c) => c.html(<EndpointsPage operator={signedIn(c)} events={await failingEvents(deps.sql, signedIn(c).tenantId)} />));
  app.get('/console/audit', session, async (c) => {
    const operator = signedIn(c);
    const cursor = (name: string) => {
      const value = c.req.query(name);
      if (value === undefined) return {};
      if (!looksLikeId('act', value)) throw new ApiError('invalid_request', `${name} must be an action id.`);
      return { [name === 'starting_after' ? 'startingAfter' : 'endingBefore']: value };
    };
    const query = { limit: 100, tenantId: operator.tenantId, ...cursor('starting_after'), ...cursor('ending_before') };
    const page = await auditTrail(deps.sql, query);
    const first = page.rows[0]?.id ?? null;
    const last = page.rows.at(-1)?.id ?? null;
    const paging = 'endingBefore' in query ? { older: last, newer: page.hasMore ? first : null } : { older: page.hasMore ? last : null, newer: 'startingAfter' in query ? first : null };
    return c.html(<AuditPage operator={operator} rows={page.rows} {...paging} />);
  });
}

function actionRoutes(app: Hono<AppEnv>, deps: ApiDeps): void {
  const session = requireSession(deps);
  // Propose: nothing runs yet; the confirmation page carries the key the server minted (POST, redirect, GET).
  // The role and the CSRF token are checked first: a viewer's POST reads nothing and records nothing.
  const toAction = (c: Context<AppEnv>, action: { id: string }) => c.redirect(`/console/actions/${action.id}`, 303);
  app.post('/console/payments/:id/refunds', session, formLimit, async (c) => {
    const form = await formOf(c);
    const operator = checkAction(c, form);
    const payment = await consolePaymentOr404(deps, c, c.req.param('id'));
    return toAction(c, await proposeRefund(deps, operator, payment, { amount: form.amount ?? '', reason: form.reason ?? '' }));
  });
  for (const kind of ['capture', 'cancel'] as const) {
    app.post(`/console/payments/:id/${kind}`, session, formLimit, async (c) => {
      const form = await formOf(c);
      const operator = checkAction(c, form);
      const payment = await consolePaymentOr404(deps, c, c.req.param('id'));
      return toAction(c, await proposePaymentCommand(deps, operator, payment, kind, { ...(form.amount !== undefined ? { amount: form.amount } : {}) }));
    });
  }
  app.post('/console/events/:id/resend', session, formLimit, async (c) => {
    const operator = checkAction(c, await formOf(c));
    const event = await consoleEventOr404(deps, c, c.req.param('id'));
    // The payment the event is about, to link back to: only when it is the event's tenant's.
    const given = c.req.query('payment');
    const payment = given && looksLikeId('pay', given) ? await consolePayment(deps.sql, given, event.tenant_id) : null;
    return toAction(c, await proposeResend(deps, operator, event, payment?.id ?? null));
  });
  app.post('/console/disputes/:id/accept', session, formLimit, async (c) => {
    const operator = checkAction(c, await formOf(c));
    return toAction(c, await proposeAccept(deps, operator, await consoleDisputeOr404(deps, c, c.req.param('id'))));
  });
  app.get('/console/actions/:id', session, async (c) => c.html(<ActionPage operator={signedIn(c)} action={await consoleActionOr404(deps, c, c.req.param('id'))} />));
  app.post('/console/actions/:id/confirm', session, formLimit, async (c) => {
    checkAction(c, await formOf(c));
    const action = await consoleActionOr404(deps, c, c.req.param('id'));
    // Decided already (a reload of the result, a second tab): the answer stands.
    if (action.state === 'proposed') await confirmAction(c, deps, action);
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
  overviewRoutes(app, deps);
  actionRoutes(app, deps);
  return app;
}
