import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  headers: IncomingMessage['headers'];
  body: string;
  receivedAt: number;
}

/**
 * A merchant's webhook endpoint for tests: records every delivery and answers with the
 * status `respond()` chooses (e.g. 503 for a while, to make the relay retry), or with
 * nothing at all when it returns 'hang' (the request is held open until close(): a merchant
 * that stopped answering). `port` lets a closed endpoint come back at the same URL.
 */
export async function startWebhookReceiver(
  respond: (delivery: Delivery, index: number) => number | 'hang' = () => 200,
  options: { port?: number } = {},
) {
  const deliveries: Delivery[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const delivery = { headers: req.headers, body, receivedAt: Date.now() };
      deliveries.push(delivery);
      const status = respond(delivery, deliveries.length - 1);
      if (status === 'hang') return;
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    deliveries,
    /** Deliveries of one event (the event id is the receiver's dedupe key). */
    of: (eventId: string) => deliveries.filter((d) => d.headers['webhook-id'] === eventId),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // held-open ('hang') requests would keep close() waiting
      }),
  };
}
