import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A loopback TCP proxy in front of a real Temporal frontend, to give the API's client each
 * way of losing the engine for real:
 * - `pass`: bytes flow both ways;
 * - `stall`: connections stay open and bytes are held (a hung or partitioned node): calls
 *   run into their deadline;
 * - `reset`: every connection is reset and new ones are reset at once (a node that died,
 *   a load balancer dropping it).
 * Going back to `pass` releases what a stall held.
 */
export type ProxyMode = 'pass' | 'stall' | 'reset';

export async function startTemporalProxy(target: string) {
  const at = target.lastIndexOf(':');
  const host = target.slice(0, at);
  const port = Number(target.slice(at + 1));
  let mode: ProxyMode = 'pass';
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const server = createServer({ pauseOnConnect: true }, (client) => {
    client.on('error', () => {});
    if (mode === 'reset') return void client.resetAndDestroy();
    const upstream = connect(port, host);
    upstream.on('error', () => client.destroy());
    const pair = { client, upstream };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop);
    upstream.on('close', drop);
    upstream.once('connect', () => {
      client.pipe(upstream);
      upstream.pipe(client);
      if (mode === 'stall') pause(pair);
      else client.resume();
    });
  });
  const pause = ({ client, upstream }: { client: Socket; upstream: Socket }) => {
    client.pause();
    upstream.pause();
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    setMode(next: ProxyMode) {
      mode = next;
      for (const pair of pairs) {
        if (next === 'reset') {
          pair.client.resetAndDestroy();
          pair.upstream.destroy();
        } else if (next === 'stall') {
          pause(pair);
        } else {
          pair.client.resume();
          pair.upstream.resume();
        }
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
