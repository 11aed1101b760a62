import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxProvider } from '../../provider/sandbox/client';
import { startSandbox, type RunningSandbox } from '../../sandbox/server';
import { startWebhookReceiver } from '../../testkit/webhook-receiver';
import { launchBrowser } from '../helpers/browser';
import { chargeRequest } from '../helpers/charge-request';
import { fileDatabaseUrl } from '../helpers/database';

/**
 * The 3-D Secure challenge as a customer meets it: headless Chromium (test/helpers/browser.ts)
 * opens the sandbox's challenge page, clicks Approve, and lands on the shop's return_url with
 * the payment id; the sandbox's charge has succeeded and its signed webhook says so.
 * Screenshots of the page before and after go to test/artifacts.
 */

const artifacts = path.resolve('test/artifacts');
const secret = 'sandbox-challenge-test-secret';

let sandbox: RunningSandbox;
let provider: SandboxProvider;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let shop: Server;
let shopUrl: string;
const shopVisits: string[] = [];
let browser: Browser | undefined;

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  hooks = await startWebhookReceiver();
  sandbox = await startSandbox({ databaseUrl: await fileDatabaseUrl(), port: 0, pollMs: 50, webhook: { url: hooks.url, secret } });
  provider = new SandboxProvider({ baseUrl: sandbox.url, timeoutMs: 5_000, webhookSecret: secret });
  // The merchant's return page, on loopback.
  shop = createServer((req, res) => {
    shopVisits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Shop</title><h1 id="thanks">Thank you for your order</h1>');
  });
  await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
  shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}`;
  browser = await launchBrowser({ timeout: 120_000 });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  provider?.close();
  await sandbox?.close();
  await hooks?.close();
  await new Promise<void>((resolve) => (shop ? shop.close(() => resolve()) : resolve()));
});

describe('the 3-D Secure challenge page in a browser', () => {
  it('Approve completes the charge and sends the customer back to the return_url with the payment id', async () => {
    const request = chargeRequest({ paymentMethod: 'pm_card_threeDSecureRequired', amountMinor: 4_200, returnUrl: `${shopUrl}/checkout/return` });
    const charge = await provider.createCharge(request);
    expect(charge.status).toBe('requires_action');

    const page = await browser!.newPage();
    try {
      await page.goto(charge.nextAction!.url);
      await expect(page.locator('#amount').textContent()).resolves.toBe('42.00 EUR');
      await expect(page.locator('#reference').textContent()).resolves.toBe(request.reference);
      await page.screenshot({ path: path.join(artifacts, 'sandbox-challenge.png'), fullPage: true });

      await Promise.all([page.waitForURL(`${shopUrl}/checkout/return**`), page.getByRole('button', { name: 'Approve' }).click()]);
      const landed = new URL(page.url());
      expect(landed.pathname).toBe('/checkout/return');
      expect(landed.searchParams.get('payment_id')).toBe(request.reference);
      expect(landed.searchParams.get('charge_id')).toBe(charge.id);
      await expect(page.locator('#thanks').textContent()).resolves.toBe('Thank you for your order');
      await page.screenshot({ path: path.join(artifacts, 'sandbox-challenge-returned.png'), fullPage: true });
    } finally {
      await page.close();
    }
    expect(shopVisits).toEqual([`/checkout/return?payment_id=${request.reference}&charge_id=${charge.id}`]);

    expect(await provider.retrieveCharge(charge.id)).toMatchObject({ status: 'succeeded', amountCapturedMinor: 4_200, nextAction: null });
    const deadline = Date.now() + 10_000;
    while (hooks.deliveries.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    const events = hooks.deliveries.map((d) => provider.verifyWebhook(d.body, d.headers as Record<string, string>));
    expect(events.map((e) => [e.type, e.charge?.id])).toEqual([
      ['charge.requires_action', charge.id],
      ['charge.succeeded', charge.id],
    ]);
  });
});
