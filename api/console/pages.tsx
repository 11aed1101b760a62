/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import type { Child, FC, PropsWithChildren } from 'hono/jsx';
import { raw } from 'hono/html';
import type { ConsoleSignedIn } from '../context';
import { decimalAmount } from '../../domain/money';
import { CSRF_FIELD } from './session';

/**
 * The console's pages, rendered on the server with Hono's JSX: every value is escaped by the
 * renderer (a client's order id or metadata is text, never markup), no inline script or style
 * (the Content-Security-Policy forbids both), one style sheet of ours.
 */

export const money = (amountMinor: number | bigint | string, currency: string) => `${decimalAmount(Number(amountMinor), currency)} ${currency}`;
export const when = (at: Date | string | null) => (at === null ? '' : new Date(at).toISOString().replace('T', ' ').slice(0, 19));

/** A hidden field with the session's CSRF token: in every POST form. */
export const Csrf: FC<{ operator: ConsoleSignedIn }> = ({ operator }) => <input type="hidden" name={CSRF_FIELD} value={operator.csrfToken} />;

export const Layout: FC<PropsWithChildren<{ title: string; operator?: ConsoleSignedIn | undefined }>> = ({ title, operator, children }) => (
  <>
    {raw('<!doctype html>')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · Payments console`}</title>
        <link rel="stylesheet" href="/console/assets/console.css" />
      </head>
      <body>
        <header>
          <strong>Payments console</strong>
          {operator && (
            <>
              <nav aria-label="Console">
                <a href="/console/payments">Payments</a>
                <a href="/console/psps">PSPs</a>
                <a href="/console/disputes">Disputes</a>
                <a href="/console/recovery">Recovery</a>
                <a href="/console/reconciliation">Reconciliation</a>
                <a href="/console/endpoints">Endpoints</a>
                <a href="/console/audit">Audit</a>
              </nav>
              <span class="who">
                {operator.email} · {operator.role}
                {operator.tenantId ? ` · ${operator.tenantId}` : ' · every tenant'}
              </span>
              <form method="post" action="/console/sign-out">
                <Csrf operator={operator} />
                <button type="submit" class="secondary">
                  Sign out
                </button>
              </form>
            </>
          )}
        </header>
        <main>
          <h1>{title}</h1>
          {children}
        </main>
      </body>
    </html>
  </>
);

export const SignInPage: FC<{ formToken: string; message?: string | undefined; email?: string | undefined }> = ({ formToken, message, email }) => (
  <Layout title="Sign in">
    <form class="signin" method="post" action="/console/sign-in">
      {message && (
        <p class="notice bad" role="alert">
          {message}
        </p>
      )}
      <input type="hidden" name="form_token" value={formToken} />
      <label>
        Email
        <input type="email" name="email" autocomplete="username" required autofocus value={email ?? ''} />
      </label>
      <label>
        Password
        <input type="password" name="password" autocomplete="current-password" required minlength={1} />
      </label>
      <button type="submit">Sign in</button>
    </form>
  </Layout>
);

export const ErrorPage: FC<{ status: number; message: string; operator?: ConsoleSignedIn | undefined }> = ({ status, message, operator }) => (
  <Layout title={status === 404 ? 'Not found' : status === 403 ? 'Not allowed' : 'Refused'} operator={operator}>
    <p class="notice bad" role="alert">
      {message}
    </p>
    <p>
      <a href="/console/payments">Back to payments</a>
    </p>
  </Layout>
);

/** A table with a caption; `rows` empty: a line saying there is none. */
export const Table: FC<{ caption: string; head: string[]; rows: Child[][] }> = ({ caption, head, rows }) => (
  <section>
    <h2>{caption}</h2>
    {rows.length === 0 ? (
      <p class="muted">None.</p>
    ) : (
      <table>
        <thead>
          <tr>
            {head.map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((cells) => (
            <tr>
              {cells.map((cell) => (
                <td>{cell}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    )}
  </section>
);
