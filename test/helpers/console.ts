import { randomBytes } from 'node:crypto';
import { ADMIN_TOKEN } from './stack';

/** The operator console from a test: operators made with the admin token, and a browser-like client (cookies, forms, no redirects followed). */

export const OPERATOR_PASSWORD = 'correct horse battery staple';

export interface TestOperator {
  id: string;
  email: string;
  password: string;
}

export async function adminRequest(apiUrl: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

export async function createOperator(apiUrl: string, options: { role: 'viewer' | 'operator'; tenantId?: string | null; label?: string }): Promise<TestOperator> {
  const email = `${options.label ?? options.role}-${randomBytes(4).toString('hex')}@example.com`;
  const created = await adminRequest(apiUrl, 'POST', '/admin/operators', { email, role: options.role, tenant_id: options.tenantId ?? null, password: OPERATOR_PASSWORD });
  if (created.status !== 201) throw new Error(`operator not created: ${created.status} ${JSON.stringify(created.json)}`);
  return { id: created.json.id, email, password: OPERATOR_PASSWORD };
}

export interface Page {
  status: number;
  headers: Headers;
  html: string;
  location: string | null;
}

/** One browser's view of the console: its cookies, kept across requests; redirects are answers, not followed. */
export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  /** `headers`: sent with every request (e.g. X-Forwarded-For, to come from another address behind a trusted proxy). */
  constructor(
    readonly apiUrl: string,
    readonly headers: Record<string, string> = {},
  ) {}

  async request(method: 'GET' | 'POST', path: string, form?: Record<string, string>): Promise<Page> {
    const headers: Record<string, string> = { ...this.headers };
    if (this.cookies.size > 0) headers.cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(`${this.apiUrl}${path}`, { method, headers, body: form ? new URLSearchParams(form).toString() : undefined, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const [name, value] = pair!.split('=') as [string, string];
      if (value === '' || /max-age=0/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: response.status, headers: response.headers, html: await response.text(), location: response.headers.get('location') };
  }

  get(path: string) {
    return this.request('GET', path);
  }

  post(path: string, form: Record<string, string>) {
    return this.request('POST', path, form);
  }

  /** The sign-in page's form, then the credentials: the answer to the POST. */
  async signIn(email: string, password: string): Promise<Page> {
    const form = await this.get('/console/sign-in');
    return this.post('/console/sign-in', { form_token: hiddenField(form.html, 'form_token'), email, password });
  }

  /** The session's CSRF token, as the pages carry it. */
  async csrf(): Promise<string> {
    const page = await this.get('/console/payments');
    if (page.status !== 200) throw new Error(`not signed in: ${page.status}`);
    return hiddenField(page.html, '_csrf');
  }
}

export function hiddenField(html: string, name: string): string {
  const value = new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1];
  if (value === undefined) throw new Error(`no hidden field ${name} in the page`);
  return value;
}

export async function signedInClient(apiUrl: string, operator: TestOperator): Promise<ConsoleClient> {
  const client = new ConsoleClient(apiUrl);
  const answer = await client.signIn(operator.email, operator.password);
  if (answer.status !== 303) throw new Error(`sign-in failed: ${answer.status}`);
  return client;
}
