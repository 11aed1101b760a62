import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  headers: IncomingMessage['headers'];
  body: string;
  receivedAt: number;
}

/**
 * A merchant's webhook endpoint for tests: records every delivery and answers with the
 * status `respond()` chooses (e.g. 503 for a while, to make the relay retry).
 */
export async function startWebhookReceiver(respond: (delivery: Delivery, index: number) => number = () => 200) {
  const deliveries: Delivery[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const delivery = { headers: req.headers, body, receivedAt: Date.now() };
      deliveries.push(delivery);
      res.statusCode = respond(delivery, deliveries.length - 1);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    deliveries,
    /** Deliveries of one event (the event id is the receiver's dedupe key). */
    of: (eventId: string) => deliveries.filter((d) => d.headers['webhook-id'] === eventId),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
