import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** What the scripted server does with a request: answer it, or cut the connection without a word. */
export type ScriptedAnswer = { status: number; headers?: Record<string, string>; body?: unknown } | 'cut';

/**
 * A loopback HTTP server whose answers a test scripts request by request (a rate limiter's
 * 429 storm, a proxy's 502, a cut connection), recording what the client sent each time.
 */
export async function startScriptedServer(answer: (request: ScriptedRequest, index: number) => ScriptedAnswer) {
  const requests: ScriptedRequest[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const request = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      requests.push(request);
      const reply = answer(request, requests.length - 1);
      if (reply === 'cut') {
        req.socket.destroy();
        return;
      }
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(reply.body === undefined ? '' : JSON.stringify(reply.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
