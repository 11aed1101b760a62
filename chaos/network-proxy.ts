import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** What the proxy does to the traffic between the worker and the provider while a fault lasts. */
export type NetworkFault =
  | { kind: 'pass' }
  /** Every chunk of the provider's answers waits this long (past the client's timeout, some calls time out). */
  | { kind: 'delay'; ms: number }
  /** The request reaches the provider, which acts on it; its answer is dropped (the connection closes). */
  | { kind: 'drop-responses' }
  /** New connections are reset before anything is forwarded. */
  | { kind: 'reset' }
  /** A full partition: every open connection is cut and every new one reset, none let through. */
  | { kind: 'partition' };

/**
 * A loopback TCP proxy between the worker and the provider sandbox. Faults but the partition
 * apply to about half the connections or answers they could hit (which ones is not seeded: it depends on
 * timing), so work still trickles through while a fault lasts.
 */
export async function startNetworkProxy(target: string) {
  const { hostname, port } = new URL(target);
  let fault: NetworkFault = { kind: 'pass' };
  const counts = { connections: 0, reset: 0, dropped: 0, delayed: 0, partitioned: 0 };
  const sockets = new Set<Socket>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const server = createServer((client) => {
    counts.connections++;
    track(client);
    if (fault.kind === 'partition' || (fault.kind === 'reset' && Math.random() < 0.5)) {
      counts[fault.kind === 'partition' ? 'partitioned' : 'reset']++;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(Number(port), hostname);
    track(upstream);
    client.pipe(upstream);
    // Chunks go out in order, each after the delay in force when it arrived.
    let queue = Promise.resolve();
    upstream.on('data', (chunk: Buffer) => {
      const now = fault;
      if (now.kind === 'drop-responses' && Math.random() < 0.5) {
        counts.dropped++;
        client.destroy();
        upstream.destroy();
        return;
      }
      if (now.kind === 'delay') counts.delayed++;
      const wait = now.kind === 'delay' ? now.ms : 0;
      queue = queue.then(() => new Promise<void>((resolve) => setTimeout(resolve, wait))).then(() => {
        if (!client.destroyed) client.write(chunk);
      });
    });
    upstream.on('end', () => void queue.then(() => client.end()));
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts,
    set(next: NetworkFault) {
      fault = next;
      if (next.kind === 'partition') for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export type NetworkProxy = Awaited<ReturnType<typeof startNetworkProxy>>;
