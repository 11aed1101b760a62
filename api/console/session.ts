import { createHash, randomBytes } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { CookieOptions } from 'hono/utils/cookie';
import { countSigninAttempt, endSession, forgiveAttempt, insertAudit, insertSession, operatorByEmail, SESSION_MAX_SECONDS, touchSession } from '../../db/operators';
import { ApiError } from '../../domain/errors';
import { cidrBlockList } from '../../lib/webhook-target';
import type { ApiDeps, AppEnv, ConsoleSignedIn } from '../context';
import { clientAddress, sameSecret } from '../edge';
import { verifyNothing, verifyPassword } from './passwords';

/**
 * Console sign-in and sessions (docs/console.md). The session lives in PostgreSQL (the API
 * stays stateless); the browser holds a random token in an HttpOnly, SameSite=Strict cookie,
 * Secure behind https. Every POST form carries the session's CSRF token.
 */

export const SESSION_COOKIE = 'console_session';
/** The sign-in form's own CSRF token (there is no session yet): a cookie and a hidden field that must agree. */
export const SIGNIN_COOKIE = 'console_signin';
export const CSRF_FIELD = '_csrf';

/**
 * Failed sign-ins allowed in SIGNIN_WINDOW_SECONDS: per account (guessing one operator's password)
 * and per client address (trying many accounts), counted in PostgreSQL so every API process
 * shares the count. Past either, sign-in is refused for that account or address, even with the
 * right password, until the window has passed.
 */
export const SIGNIN_LIMITS = { perAccount: 5, perAddress: 30 } as const;
export const SIGNIN_WINDOW_SECONDS = 15 * 60;

const tokenHash = (token: string) => createHash('sha256').update(token).digest('hex');
const randomToken = () => randomBytes(32).toString('base64url');

/** Secure cookies when the browser reached us over https (directly, or API_PUBLIC_URL says so behind a proxy). */
function cookieOptions(c: Context<AppEnv>, deps: ApiDeps): CookieOptions {
  const secure = new URL(c.req.url).protocol === 'https:' || (deps.config.API_PUBLIC_URL ?? '').startsWith('https:');
  return { path: '/console', httpOnly: true, sameSite: 'Strict', secure };
}

/** A new sign-in form token, set as its cookie; the form carries it back. */
export function signinFormToken(c: Context<AppEnv>, deps: ApiDeps): string {
  const token = randomToken();
  setCookie(c, SIGNIN_COOKIE, token, { ...cookieOptions(c, deps), maxAge: 60 * 60 });
  return token;
}

export type SigninOutcome = 'signed_in' | 'invalid' | 'limited';

/**
 * Checks an email and password. The attempt is counted against the account and the address
 * before the password is checked (so concurrent guesses all count) and forgiven once it succeeded.
 * An unknown email and a disabled operator cost as much time as a wrong password.
 */
export async function signIn(c: Context<AppEnv>, deps: ApiDeps, form: { email: string; password: string; formToken: string }): Promise<SigninOutcome> {
  const expected = getCookie(c, SIGNIN_COOKIE) ?? '';
  if (expected === '' || !sameSecret(form.formToken, expected)) throw new ApiError('forbidden', 'The sign-in form has expired; load it again.');
  const email = form.email.trim().toLowerCase();
  const address = clientAddress(c, cidrBlockList(deps.config.TRUSTED_PROXIES ?? '', 'TRUSTED_PROXIES'));
  const attempt = await countSigninAttempt(
    deps.sql,
    [
      { subject: `account:${email}`, limit: SIGNIN_LIMITS.perAccount },
      { subject: `address:${address}`, limit: SIGNIN_LIMITS.perAddress },
    ],
    SIGNIN_WINDOW_SECONDS,
  );
  if (attempt.limited) {
    c.var.logger.warn({ email, address }, 'console sign-in refused: too many failures');
    return 'limited';
  }
  const operator = await operatorByEmail(deps.sql, email);
  const valid = operator && operator.disabled_at === null ? await verifyPassword(form.password, operator.password_hash) : await verifyNothing(form.password);
  if (!valid || !operator) return 'invalid';
  await forgiveAttempt(deps.sql, attempt.ids);
  const token = randomToken();
  await insertSession(deps.sql, { tokenHash: tokenHash(token), operatorId: operator.id, csrfToken: randomToken() });
  await insertAudit(deps.sql, { actor: operator.id, actorEmail: operator.email, action: 'signin', objectType: 'operator', objectId: operator.id, tenantId: operator.tenant_id, state: 'done', outcome: { address } });
  setCookie(c, SESSION_COOKIE, token, { ...cookieOptions(c, deps), maxAge: SESSION_MAX_SECONDS });
  deleteCookie(c, SIGNIN_COOKIE, cookieOptions(c, deps));
  return 'signed_in';
}

export async function signOut(c: Context<AppEnv>, deps: ApiDeps): Promise<void> {
  await endSession(deps.sql, signedIn(c).tokenHash);
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c, deps));
}

/** The signed-in operator, or a redirect to the sign-in page. Every request checks the session in PostgreSQL. */
export function requireSession(deps: ApiDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const token = getCookie(c, SESSION_COOKIE);
    const live = token ? await touchSession(deps.sql, tokenHash(token)) : null;
    if (!live) {
      if (token) deleteCookie(c, SESSION_COOKIE, cookieOptions(c, deps));
      return c.redirect('/console/sign-in', 303);
    }
    const { operator } = live;
    c.set('consoleOperator', { operatorId: operator.id, email: operator.email, role: operator.role, tenantId: operator.tenant_id, csrfToken: live.csrf_token, tokenHash: tokenHash(token!) });
    c.set('logger', c.var.logger.child({ operator_id: operator.id }));
    await next();
  };
}

export function signedIn(c: Context<AppEnv>): ConsoleSignedIn {
  const operator = c.var.consoleOperator;
  if (!operator) throw new Error('console route outside requireSession');
  return operator;
}

/** A POST form of a signed-in operator: its CSRF token must be the session's (403 otherwise). */
export function checkCsrf(c: Context<AppEnv>, form: Record<string, unknown>): ConsoleSignedIn {
  const operator = signedIn(c);
  const given = typeof form[CSRF_FIELD] === 'string' ? form[CSRF_FIELD] : '';
  if (!sameSecret(given, operator.csrfToken)) throw new ApiError('forbidden', 'The form is missing its CSRF token or carries another session\'s; reload the page.');
  return operator;
}

/** An action: its CSRF token checked, and only an operator (not a viewer) may act. Nothing has changed when this refuses. */
export function checkAction(c: Context<AppEnv>, form: Record<string, unknown>): ConsoleSignedIn {
  const operator = checkCsrf(c, form);
  if (operator.role !== 'operator') throw new ApiError('forbidden', 'A viewer cannot act; ask an operator.');
  return operator;
}
