import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchBrowser } from '../helpers/browser';
import { apiClient, startStack, uniqueKey, type Tenant, type TestStack } from '../helpers/stack';

/**
 * docs/CONTRACT.md §5.9: an operator finds a payment in the Temporal Web UI by tenant, order and
 * status. Checked in a real browser (headless Chromium, test/helpers/browser.ts) against the Web UI of the
 * run's dev server (test/global-setup.ts starts it with its UI).
 */

const artifacts = path.resolve('test/artifacts');

let stack: TestStack;
let tenant: Tenant;
let browser: Browser | undefined;
let uiUrl: string;

beforeAll(async () => {
  uiUrl = inject('temporalUiUrl');
  mkdirSync(artifacts, { recursive: true });
  stack = await startStack();
  tenant = await stack.createTenant('web ui');
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

async function pay(orderId: string) {
  const response = await apiClient(stack.apiUrl, tenant.apiKey).post(
    '/v1/payments',
    { order_id: orderId, amount_minor: 4200, currency: 'EUR', payment_method: 'pm_card_visa' },
    uniqueKey(),
  );
  expect(response.status).toBe(201);
  return response.json as { id: string; workflow_id: string; provider_charge_id: string };
}

/** Opens the workflow list filtered by a visibility query, reloading until `workflowId` is listed. */
async function openFilteredList(page: Page, query: string, workflowId: string): Promise<void> {
  const url = `${uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    await page.goto(url);
    try {
      await page.getByRole('link', { name: workflowId, exact: true }).waitFor({ timeout: 10_000 });
      return;
    } catch (error) {
      // Visibility is eventually consistent: the run may not be indexed yet.
      if (Date.now() > deadline) throw error;
    }
  }
}

describe('the Temporal Web UI finds a payment by its search attributes', () => {
  it('filters the workflow list by OrderId and shows TenantId, OrderId, PaymentStatus and the charge memo on the payment', async () => {
    if (!uiUrl) throw new Error('the test run has no Temporal Web UI: test/global-setup.ts must start the dev server with --ui-port');
    browser = await launchBrowser();
    const orderId = uniqueKey('ord');
    const payment = await pay(orderId);
    const other = await pay(uniqueKey('ord')); // same tenant, another order: must be filtered out

    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    try {
      await openFilteredList(page, `OrderId="${orderId}"`, payment.workflow_id);
      await expect.poll(() => page.getByRole('heading', { name: /^1 Workflow/ }).count(), { timeout: 10_000 }).toBe(1);
      expect(await page.getByRole('link', { name: other.workflow_id, exact: true }).count()).toBe(0);
      await page.screenshot({ path: path.join(artifacts, 'temporal-ui-filtered-by-order.png') });

      // The payment's own page: its search attributes, as an operator filters by them.
      await page.getByRole('link', { name: payment.workflow_id, exact: true }).click();
      await page.waitForURL((url) => url.pathname.includes(encodeURIComponent(payment.workflow_id)) || url.pathname.includes(payment.workflow_id));
      await page.getByRole('link', { name: 'Search Attributes' }).or(page.getByRole('tab', { name: 'Search Attributes' })).first().click();
      const main = page.locator('main');
      const shown = () => main.innerText();
      for (const pair of [`"TenantId": "${tenant.id}"`, `"OrderId": "${orderId}"`, '"PaymentStatus": "succeeded"']) {
        await expect.poll(shown, { timeout: 15_000, message: `${pair} on the Search Attributes tab` }).toContain(pair);
      }
      await page.screenshot({ path: path.join(artifacts, 'temporal-ui-search-attributes.png') });

      // The memo carries the provider's charge (workflows/payments/state.ts, showCharge).
      await page.getByRole('link', { name: 'Memo' }).or(page.getByRole('tab', { name: 'Memo' })).first().click();
      for (const pair of [`"provider_charge_id": "${payment.provider_charge_id}"`, '"charge_status": "succeeded"']) {
        await expect.poll(shown, { timeout: 15_000, message: `${pair} on the Memo tab` }).toContain(pair);
      }
      await page.screenshot({ path: path.join(artifacts, 'temporal-ui-memo.png') });
    } finally {
      await page.close();
    }
  });
});

describe('the Temporal Web UI shows encrypted payloads decoded, through the codec server', () => {
  it("shows a payment's input in clear, its activities' summaries in the history and its static summary", async () => {
    const browser = await launchBrowser();
    const canary = uniqueKey('canary');
    const orderId = uniqueKey('ord');
    const response = await apiClient(stack.apiUrl, tenant.apiKey).post(
      '/v1/payments',
      { order_id: orderId, amount_minor: 4999, currency: 'EUR', payment_method: 'pm_card_visa', metadata: { note: canary } },
      uniqueKey(),
    );
    expect(response.status).toBe(201);
    const payment = response.json as { workflow_id: string };

    const page = await browser.newPage({ viewport: { width: 1600, height: 1200 } });
    try {
      // (The list cannot show the static summary: ListWorkflowExecutions returns no user
      // metadata, only DescribeWorkflowExecution does; so the run's own page shows it.)
      await openFilteredList(page, `OrderId="${orderId}"`, payment.workflow_id);
      const summary = `Payment 49.99 EUR · ${orderId}`;

      // The run's page: its input, which Temporal stores encrypted, shown decoded (the metadata canary).
      await page.getByRole('link', { name: payment.workflow_id, exact: true }).click();
      await page.waitForURL((url) => url.pathname.includes(encodeURIComponent(payment.workflow_id)) || url.pathname.includes(payment.workflow_id));
      const shown = () => page.locator('main').innerText();
      await expect.poll(shown, { timeout: 20_000, message: 'the decoded input on the payment page' }).toContain(`"note": "${canary}"`);
      expect(await shown()).toContain('"paymentMethod": "pm_card_visa"');
      // The event history: each activity with its summary, decoded.
      for (const activitySummary of ['charge attempt at one PSP (attempt 1: decide the route)', 'record outcome + ledger + outbox']) {
        await expect.poll(shown, { timeout: 20_000, message: `"${activitySummary}" in the history` }).toContain(activitySummary);
      }
      await page.screenshot({ path: path.join(artifacts, 'temporal-ui-codec-decoded-input.png'), fullPage: true });

      // The static summary of the run, decoded, on its User Metadata tab.
      await page.getByRole('link', { name: 'User Metadata' }).or(page.getByRole('tab', { name: 'User Metadata' })).first().click();
      // The UI renders a summary as markdown in a sandboxed frame of its own.
      const framesText = async () => (await Promise.all(page.frames().map((frame) => frame.locator('body').innerText().catch(() => '')))).join('\n');
      await expect.poll(framesText, { timeout: 20_000, message: 'the static summary on the User Metadata tab' }).toContain(summary);
      await page.screenshot({ path: path.join(artifacts, 'temporal-ui-codec-user-metadata.png') });
    } finally {
      await page.close();
    }
  });
});
