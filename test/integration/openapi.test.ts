import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createApp } from '../../api/app';
import { errorStatus } from '../../domain/errors';
import { createApiMetrics } from '../../lib/metrics';
import { launchBrowser } from '../helpers/browser';
import { startStack, type TestStack } from '../helpers/stack';
import { CompletionWaiter } from '../../api/completions';
import { projectRoot } from '../../devstack/temporal-cli';

/** The API documents itself: OpenAPI 3.1 from the same zod schemas, and a reference page. */

let stack: TestStack;
let doc: any;
beforeAll(async () => {
  stack = await startStack();
  doc = await (await fetch(`${stack.apiUrl}/openapi.json`)).json();
});
afterAll(async () => stack?.stop());

/** Routes that are about the document itself, not the API. */
const meta = new Set(['/openapi.json', '/docs', '/docs/scalar.js']);

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('documents every route the app serves', () => {
    const app = createApp({
      sql: stack.sql,
      temporal: stack.temporal,
      completions: new CompletionWaiter(stack.sql, stack.logger),
      logger: stack.logger,
      metrics: createApiMetrics(),
      config: stack.apiConfig,
    });
    const served = app.routes
      // The console (/console) is HTML for people, not the API: docs/console.md describes it.
      .filter((r) => r.method !== 'ALL' && !meta.has(r.path) && r.path !== '/console' && !r.path.startsWith('/console/'))
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, '{$1}')}`);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops as object).map((method) => `${method} ${path}`));
    expect(served.length).toBeGreaterThan(15);
    expect(new Set(served)).toEqual(new Set(documented));
  });

  it('documents the idempotency headers on every mutating /v1 endpoint', () => {
    const mutating = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops as Record<string, any>).filter(([method]) => method === 'post' && path.startsWith('/v1/')).map(([, op]) => ({ path, op })),
    );
    expect(mutating.length).toBe(10);
    // Resending events, creating a customer and detaching a payment method are one database
    // transaction each: answered at once, never 202.
    const immediate = new Set(['/v1/events/{id}/resend', '/v1/webhook_endpoint/recover', '/v1/customers', '/v1/payment_methods/{id}/detach']);
    for (const { path, op } of mutating) {
      expect(op.parameters.some((p: any) => p.in === 'header' && p.name === 'Idempotency-Key' && p.required), path).toBe(true);
      const success = op.responses['201'] ?? op.responses['200'];
      expect(Object.keys(success.headers), path).toEqual(expect.arrayContaining(['Idempotent-Replayed', 'Idempotency-Retention-Seconds']));
      if (!immediate.has(path)) expect(Object.keys(op.responses['202'].headers), path).toEqual(expect.arrayContaining(['Location', 'Retry-After']));
      expect(op.responses['503'].headers, path).toHaveProperty('Retry-After');
      for (const status of ['400', '401', '422', '503']) expect(op.responses, `${path} ${status}`).toHaveProperty(status);
    }
  });

  it('names every documented route in docs/CONTRACT.md, method and path', () => {
    const contract = readFileSync(path.join(projectRoot, 'docs', 'CONTRACT.md'), 'utf8');
    const routes = Object.entries(doc.paths).flatMap(([route, ops]) => Object.keys(ops as object).map((method) => `${method.toUpperCase()} ${route}`));
    expect(routes.length).toBeGreaterThan(15);
    expect(routes.filter((route) => !contract.includes(route))).toEqual([]);
  });

  it('lists every error type of the API', () => {
    const documented = doc.components.schemas.Error.properties.error.properties.type.enum;
    expect(new Set(documented)).toEqual(new Set(Object.keys(errorStatus)));
  });
});

describe('GET /docs', () => {
  it('renders the interactive reference in headless Chromium, offline', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      const offsite: string[] = [];
      page.on('request', (request) => {
        if (!request.url().startsWith(stack.apiUrl) && !request.url().startsWith('data:')) offsite.push(request.url());
      });
      await page.goto(`${stack.apiUrl}/docs`, { waitUntil: 'load' });
      await page.getByRole('heading', { name: 'Payment orchestrator' }).waitFor({ timeout: 30_000 });
      await page.getByText('Payments', { exact: true }).first().click();
      await page.getByText('Create a payment (idempotent)').first().waitFor({ timeout: 30_000 });
      // The operation's required header is rendered, visibly, as a parameter of the operation.
      await page.getByText('Idempotency-Key').first().waitFor({ state: 'visible', timeout: 30_000 });
      mkdirSync('test/artifacts', { recursive: true });
      await page.screenshot({ path: 'test/artifacts/api-docs.png' });
      expect(offsite).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
