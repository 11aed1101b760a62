import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy in front of the API that forwards every request in full and, for the
 * requests `loseAnswer` picks, cuts the client's connection once the API has answered: the
 * server committed, the client never heard (a lost response, as a client experiences it).
 */
export async function startLossyProxy(target: string, loseAnswer: (request: { method: string; path: string; index: number }) => boolean) {
  let index = 0;
  const lost: { method: string; path: string; status: number }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const request = { method: req.method ?? 'GET', path: req.url ?? '/', index: index++ };
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !['host', 'connection', 'content-length'].includes(name))) as Record<string, string>;
      try {
        const answer = await fetch(target + request.path, { method: request.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined, redirect: 'manual' });
        const text = await answer.text();
        if (loseAnswer(request)) {
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
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
