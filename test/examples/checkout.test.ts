import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PaymentsClient } from '../../client';
import { startCheckout } from '../../examples/checkout/server';
import { effectsOf } from '../helpers/effects';
import { eventually, startStack, type TestStack } from '../helpers/stack';

/** The example merchant, end to end: its orders, the real stack, and the webhooks coming back to it. */

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.stop());

describe('examples/checkout', () => {
  it('pays an order once, applies its webhook once, and ignores a resent duplicate', async () => {
    const tenant = await stack.createTenant('checkout');
    const checkout = await startCheckout({ apiUrl: stack.apiUrl, apiKey: tenant.apiKey, webhookSecrets: tenant.webhookSecret });
    try {
      const configured = await fetch(`${stack.apiUrl}/admin/tenants/${tenant.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ webhook_url: checkout.webhookUrl }),
      });
      expect(configured.status).toBe(200);

      const placed = await fetch(`${checkout.url}/orders`, { method: 'POST', body: JSON.stringify({ amount_minor: 1999, currency: 'EUR', payment_method: 'pm_card_visa' }) });
      expect(placed.status).toBe(201);
      const order = (await placed.json()) as { id: string; status: string; payment_id: string };
      expect(order.status).toBe('paid');
      expect((await effectsOf(stack.sql, stack.sandboxUrl, order.payment_id)).charges).toBe(1);
      await eventually(async () => checkout.stats.eventsApplied === 1);

      const declined = (await (await fetch(`${checkout.url}/orders`, { method: 'POST', body: JSON.stringify({ amount_minor: 500, currency: 'EUR', payment_method: 'pm_card_declined' }) })).json()) as { id: string; status: string };
      expect(declined.status).toBe('payment_declined');
      await eventually(async () => checkout.stats.eventsApplied === 2);

      // The merchant asks for the payment's event again: acknowledged, not applied twice.
      const api = new PaymentsClient({ apiKey: tenant.apiKey, baseUrl: stack.apiUrl });
      const [event] = (await api.events.list({ type: 'payment.succeeded' })).data;
      await api.events.resend(event!.id);
      await eventually(async () => checkout.stats.duplicatesIgnored === 1);
      expect(checkout.stats).toMatchObject({ eventsApplied: 2, duplicatesIgnored: 1, rejectedSignatures: 0 });
      expect(((await (await fetch(`${checkout.url}/orders/${order.id}`)).json()) as { status: string }).status).toBe('paid');

      // A forged delivery is refused and changes nothing.
      const forged = await fetch(checkout.webhookUrl, {
        method: 'POST',
        headers: { 'webhook-id': event!.id, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' },
        body: JSON.stringify(event),
      });
      expect(forged.status).toBe(401);
      expect(checkout.stats.rejectedSignatures).toBe(1);
    } finally {
      await checkout.close();
    }
  });
});
