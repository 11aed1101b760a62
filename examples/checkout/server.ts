import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CardDeclinedError, PaymentsApiError, PaymentsClient, verifyWebhook, WebhookVerificationError, type Event, type Payment } from '../../client';

/**
 * A small merchant: one payment per order through the typed client, and a webhook endpoint
 * that verifies each delivery and applies each event once, however often it arrives.
 */

export interface Order {
  id: string;
  amount_minor: number;
  currency: string;
  status: 'awaiting_payment' | 'paid' | 'payment_declined' | 'payment_failed' | 'refunded';
  payment_id: string | null;
}

export interface CheckoutOptions {
  apiUrl: string;
  apiKey: string;
  /** One or more (while rotating) Standard Webhooks secrets. */
  webhookSecrets: string | string[];
  port?: number;
}

/** What an event does to its order; events for other orders or types change nothing. */
const orderStatusAfter: Partial<Record<Event['type'], Order['status']>> = {
  'payment.succeeded': 'paid',
  'payment.declined': 'payment_declined',
  'payment.failed': 'payment_failed',
};

export async function startCheckout(options: CheckoutOptions) {
  const payments = new PaymentsClient({ apiKey: options.apiKey, baseUrl: options.apiUrl });
  const orders = new Map<string, Order>();
  // The event id is the dedupe key: a redelivered or resent event is acknowledged, not applied again.
  // (A real shop keeps this in the same database transaction as the order update.)
  const appliedEvents = new Set<string>();
  const stats = { webhooksReceived: 0, eventsApplied: 0, duplicatesIgnored: 0, rejectedSignatures: 0 };

  async function placeOrder(input: { amount_minor: number; currency: string; payment_method: string }): Promise<Order> {
    const order: Order = { id: `ord_${randomUUID()}`, amount_minor: input.amount_minor, currency: input.currency, status: 'awaiting_payment', payment_id: null };
    orders.set(order.id, order);
    let payment: Payment;
    try {
      // One key per order: however the client retries, the order is charged at most once.
      payment = await payments.payments.create({ order_id: order.id, ...input }, { idempotencyKey: `checkout-${order.id}` });
    } catch (error) {
      if (!(error instanceof CardDeclinedError)) throw error;
      order.status = 'payment_declined';
      order.payment_id = error.payment?.id ?? null;
      return order;
    }
    order.payment_id = payment.id;
    if (payment.status === 'succeeded') order.status = 'paid';
    return order;
  }

  function applyEvent(event: Event): void {
    if (appliedEvents.has(event.id)) {
      stats.duplicatesIgnored++;
      return;
    }
    appliedEvents.add(event.id);
    stats.eventsApplied++;
    const object = event.data.object;
    const status = orderStatusAfter[event.type];
    if (status && object.object === 'payment') {
      const order = orders.get(object.order_id);
      if (order) {
        order.status = status;
        order.payment_id = object.id;
      }
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const url = new URL(req.url ?? '/', 'http://checkout');
    if (req.method === 'POST' && url.pathname === '/orders') {
      try {
        return reply(res, 201, await placeOrder(JSON.parse(body) as never));
      } catch (error) {
        if (error instanceof PaymentsApiError) return reply(res, error.status >= 500 ? 502 : 400, { error: error.type, message: error.message });
        throw error;
      }
    }
    if (req.method === 'POST' && url.pathname === '/webhooks') {
      stats.webhooksReceived++;
      let event: Event;
      try {
        event = verifyWebhook(options.webhookSecrets, body, req.headers);
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) throw error;
        stats.rejectedSignatures++;
        return reply(res, 401, { error: error.message });
      }
      applyEvent(event);
      return reply(res, 200, { received: event.id });
    }
    const match = /^\/orders\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && match) {
      const order = orders.get(decodeURIComponent(match[1]!));
      return order ? reply(res, 200, order) : reply(res, 404, { error: 'no such order' });
    }
    reply(res, 404, { error: 'not found' });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => reply(res, 500, { error: String((error as Error)?.message ?? error) }));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    webhookUrl: `${url}/webhooks`,
    orders,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
