import { connect, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP load balancer in front of the cluster's frontends, as a deployment puts one (an L4
 * balancer or DNS over the frontend pods): each new connection goes to the next frontend
 * that accepts it. When a node dies, its connections break, the SDK reconnects, and the
 * balancer sends it to a node that is still up.
 */
export async function startFrontendBalancer(frontends: string[]) {
  let next = 0;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  };
  const dial = (attempt: number, client: Socket) => {
    if (attempt >= frontends.length) return client.destroy();
    const [host, port] = frontends[next++ % frontends.length]!.split(':');
    const upstream = connect(Number(port), host!);
    track(upstream);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.pipe(upstream);
      upstream.pipe(client);
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
      client.resume();
    });
    upstream.once('error', () => {
      if (!connected) dial(attempt + 1, client);
    });
  };
  const server = createServer({ pauseOnConnect: true }, (client) => {
    track(client);
    dial(0, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
