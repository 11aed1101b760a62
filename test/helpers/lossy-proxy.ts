import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What the proxy does with one request: pass it on, pass it on and cut the client's
 * connection once the API has answered (the server committed, the client never heard: a
 * lost response as a client experiences it), or answer itself without passing it on (e.g.
 * a rate limiter's 429).
 */
export type ProxyVerdict = 'forward' | 'lose_answer' | { status: number; headers?: Record<string, string>; body?: unknown };

/** An HTTP proxy in front of the API that treats each request as `verdict` says. */
export async function startLossyProxy(target: string, verdict: (request: { method: string; path: string; index: number }) => ProxyVerdict) {
  let index = 0;
  const lost: { method: string; path: string; status: number }[] = [];
  const answeredByProxy: { method: string; path: string; status: number }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const request = { method: req.method ?? 'GET', path: req.url ?? '/', index: index++ };
      const decision = verdict(request);
      if (typeof decision === 'object') {
        answeredByProxy.push({ method: request.method, path: request.path, status: decision.status });
        res.writeHead(decision.status, { 'content-type': 'application/json', ...decision.headers });
        res.end(JSON.stringify(decision.body ?? {}));
        return;
      }
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name))) as Record<string, string>;
      try {
        const answer = await fetch(target + request.path, { method: request.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined, redirect: 'manual' });
        const text = await answer.text();
        if (decision === 'lose_answer') {
          lost.push({ method: request.method, path: request.path, status: answer.status });
          req.socket.destroy();
          return;
        }
        const forwarded: Record<string, string> = {};
        answer.headers.forEach((value, name) => {
          if (!['content-length', 'connection', 'keep-alive', 'transfer-encoding', 'content-encoding'].includes(name)) forwarded[name] = value;
        });
        res.writeHead(answer.status, forwarded);
        res.end(text);
      } catch {
        req.socket.destroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The answers the client never got. */
    lost,
    /** The requests that never reached the API. */
    answeredByProxy,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
