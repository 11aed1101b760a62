/**
 * A TCP (layer 4) balancer in front of a Temporal cluster's frontends: what `npm start`
 * runs in TEMPORAL_MODE=cluster so that the API, the worker, the codec server's clients and
 * the scripts reach every frontend through one address (lib/frontend-balancer-main.ts).
 * In production an L4 load balancer or a Kubernetes Service does the same (docs/cluster.md,
 * "In production").
 *
 * Each new client connection goes to the next healthy frontend (round robin); a frontend
 * that refuses the connection is marked down and the next one is tried, so a client never
 * sees a dead node's refusal while another node is up. gRPC multiplexes every call of a
 * client over one long-lived HTTP/2 connection: when a frontend dies its connections break,
 * the client redials, and the balancer sends it to a live node. A frontend that stops
 * answering without closing its sockets (hung, partitioned) is found by the health check,
 * and its connections are cut so that their clients redial elsewhere rather than wait.
 * The stream is passed through untouched (TLS included: mTLS ends at the frontend).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Connection } from '@temporalio/client';
import type { TemporalConnectionSettings } from './temporal-connection';

export interface FrontendBalancerOptions {
  /** host:port of each frontend. */
  frontends: string[];
  /** Where to listen (default 127.0.0.1, any free port). */
  host?: string;
  port?: number;
  /** TLS and API key for the health checks (the traffic itself is passed through). */
  connection?: Omit<TemporalConnectionSettings, 'address'>;
  /** The namespace the health check asks each frontend about (it must be served, not just listening). */
  namespace?: string;
  /** Health check period (default 1000 ms) and each check's deadline (default 2000 ms). */
  checkEveryMs?: number;
  checkTimeoutMs?: number;
  /** Consecutive results that flip a frontend's state (default 2 to come back up, 2 to go down). */
  riseAfter?: number;
  fallAfter?: number;
  log?: (message: string) => void;
}

export interface FrontendState {
  address: string;
  healthy: boolean;
  connections: number;
  /** Connections sent to it since the start. */
  served: number;
}

export interface FrontendBalancer {
  address: string;
  frontends(): FrontendState[];
  close(): Promise<void>;
}

const HEALTH_SERVICE = 'temporal.api.workflowservice.v1.WorkflowService';
const SERVING = 1; // grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING

interface Frontend extends FrontendState {
  host: string;
  portNumber: number;
  sockets: Set<Socket>;
  rises: number;
  falls: number;
  probe: Connection | null;
}

export async function startFrontendBalancer(options: FrontendBalancerOptions): Promise<FrontendBalancer> {
  if (options.frontends.length === 0) throw new Error('the balancer needs at least one frontend');
  const log = options.log ?? (() => {});
  const riseAfter = options.riseAfter ?? 2;
  const fallAfter = options.fallAfter ?? 2;
  const checkTimeoutMs = options.checkTimeoutMs ?? 2000;
  const frontends: Frontend[] = options.frontends.map((address) => {
    const at = address.lastIndexOf(':');
    // Healthy until shown otherwise: clients can connect before the first check has run.
    return { address, host: address.slice(0, at).replace(/^\[|\]$/g, ''), portNumber: Number(address.slice(at + 1)), healthy: true, connections: 0, served: 0, sockets: new Set(), rises: 0, falls: 0, probe: null };
  });
  const clients = new Set<Socket>();
  let next = 0;
  let closed = false;

  const markDown = (frontend: Frontend, why: string) => {
    frontend.rises = 0;
    if (!frontend.healthy) return;
    frontend.healthy = false;
    log(`frontend ${frontend.address} down (${why}); ${frontend.sockets.size} connection(s) cut, new ones go to ${frontends.filter((f) => f.healthy).map((f) => f.address).join(', ') || 'none (all down: every frontend is tried)'}`);
    // Its clients redial through the balancer and land on a live frontend.
    for (const socket of frontend.sockets) socket.destroy();
  };
  const markUp = (frontend: Frontend) => {
    frontend.falls = 0;
    if (frontend.healthy) return;
    frontend.healthy = true;
    log(`frontend ${frontend.address} up again`);
  };

  /** Healthy frontends first, round robin; then the others (all down: try them anyway, one may be back). */
  const candidates = (): Frontend[] => {
    const start = next++;
    const rotated = frontends.map((_, i) => frontends[(start + i) % frontends.length]!);
    return [...rotated.filter((f) => f.healthy), ...rotated.filter((f) => !f.healthy)];
  };

  const dial = (client: Socket, order: Frontend[], index: number) => {
    const frontend = order[index];
    if (!frontend || client.destroyed) {
      client.destroy();
      return;
    }
    const upstream = connect(frontend.portNumber, frontend.host);
    upstream.setNoDelay(true);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      if (client.destroyed) return upstream.destroy();
      frontend.sockets.add(upstream);
      frontend.connections = frontend.sockets.size;
      frontend.served++;
      upstream.on('close', () => {
        frontend.sockets.delete(upstream);
        frontend.connections = frontend.sockets.size;
        client.destroy();
      });
      client.on('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on('error', (error) => {
      if (connected) return; // 'close' follows and takes the client down with it
      // Refused or unreachable: this frontend is down for now; the client tries the next.
      frontend.falls = fallAfter;
      markDown(frontend, (error as NodeJS.ErrnoException).code ?? error.message);
      dial(client, order, index + 1);
    });
  };

  const server: Server = createServer({ pauseOnConnect: true, noDelay: true }, (client) => {
    clients.add(client);
    client.on('error', () => {});
    client.on('close', () => clients.delete(client));
    dial(client, candidates(), 0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

  const check = async (frontend: Frontend) => {
    try {
      frontend.probe ??= Connection.lazy({ ...options.connection, address: frontend.address });
      const probe = frontend.probe;
      await probe.withDeadline(Date.now() + checkTimeoutMs, async () => {
        const health = await probe.healthService.check({ service: HEALTH_SERVICE });
        if (health.status !== SERVING) throw new Error(`health status ${health.status}`);
        // Listening is not serving: the node must reach its persistence and know the namespace.
        if (options.namespace) await probe.workflowService.describeNamespace({ namespace: options.namespace });
      });
      frontend.falls = 0;
      if (++frontend.rises >= riseAfter) markUp(frontend);
    } catch (error) {
      frontend.rises = 0;
      if (++frontend.falls >= fallAfter) markDown(frontend, `health check: ${(error as Error).message.split('\n')[0]}`);
    }
  };
  let checking: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    checking = checking.then(() => (closed ? undefined : Promise.all(frontends.map(check))));
  }, options.checkEveryMs ?? 1000);
  timer.unref();

  const { address, port } = server.address() as AddressInfo;
  return {
    address: `${address.includes(':') ? `[${address}]` : address}:${port}`,
    frontends: () => frontends.map(({ address: a, healthy, connections, served }) => ({ address: a, healthy, connections, served })),
    async close() {
      closed = true;
      clearInterval(timer);
      await checking.catch(() => {});
      for (const client of clients) client.destroy();
      for (const frontend of frontends) {
        for (const socket of frontend.sockets) socket.destroy();
        await frontend.probe?.close().catch(() => {});
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
