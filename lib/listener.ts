/**
 * Every HTTP listener of the project (the API, the codec server, the provider sandbox, the
 * worker's /metrics) is made here, with the same limits, configured in one place
 * (lib/config.ts, `HTTP_*`):
 *
 * - the whole request (headers and body) must arrive within HTTP_REQUEST_TIMEOUT_MS, so a
 *   slowly sent body is cut; the headers within HTTP_HEADERS_TIMEOUT_MS, so an idle or
 *   half-sent request is cut (Node answers 408 and closes the connection);
 * - an idle keep-alive connection is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS;
 * - at most HTTP_MAX_CONNECTIONS connections at once: more are dropped as they are accepted;
 * - the `Host` header must name this service (HTTP_ALLOWED_HOSTS; the loopback names by
 *   default), else 421: a page on another site whose name was rebound to 127.0.0.1 (DNS
 *   rebinding) sends its own name, and is refused.
 *
 * Node checks the request and header deadlines every `connectionsCheckingInterval` (30 s by
 * default, so partial headers would last up to ~77 s); here it is a quarter of the shorter deadline,
 * at most a second, so each deadline holds to within a second.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { serve, type Http2Bindings, type HttpBindings } from '@hono/node-server';
import { apiErrorBody } from '../domain/errors';
import { LOOPBACK_HOST_NAMES, type Config } from './config';

export interface ListenerLimits {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  /** Host names (no port) the `Host` header may carry; `*` alone allows any. */
  allowedHosts: string[];
}

export type ListenerConfig = Pick<Config, 'HTTP_REQUEST_TIMEOUT_MS' | 'HTTP_HEADERS_TIMEOUT_MS' | 'HTTP_KEEP_ALIVE_TIMEOUT_MS' | 'HTTP_MAX_CONNECTIONS' | 'HTTP_ALLOWED_HOSTS'>;

/** The defaults of lib/config.ts, for listeners made without a parsed configuration (tests, the dev stack). */
export const defaultListenerLimits: ListenerLimits = {
  requestTimeoutMs: 30_000,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1_000,
  allowedHosts: LOOPBACK_HOST_NAMES,
};

export function listenerLimits(config: Partial<ListenerConfig>): ListenerLimits {
  return {
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS ?? defaultListenerLimits.requestTimeoutMs,
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS ?? defaultListenerLimits.headersTimeoutMs,
    keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS ?? defaultListenerLimits.keepAliveTimeoutMs,
    maxConnections: config.HTTP_MAX_CONNECTIONS ?? defaultListenerLimits.maxConnections,
    allowedHosts: config.HTTP_ALLOWED_HOSTS ?? defaultListenerLimits.allowedHosts,
  };
}

function serverOptions(limits: ListenerLimits): ServerOptions {
  // Node requires headersTimeout <= requestTimeout.
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(headersTimeout / 4))),
    requireHostHeader: true,
  };
}

/** The host part of a Host header ("[::1]:3000" → "::1", "Example.COM." → "example.com"), or null if malformed. */
export function hostName(header: string | undefined | null): string | null {
  if (!header) return null;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@]+))(?::\d{1,5})?$/.exec(header.trim());
  if (!match) return null;
  return (match[1] ?? match[2]!).toLowerCase().replace(/\.$/, '');
}

export function hostAllowed(header: string | undefined | null, allowed: string[]): boolean {
  if (allowed.includes('*')) return true;
  const name = hostName(header);
  return name !== null && allowed.includes(name);
}

const misdirected = (allowed: string[]) =>
  JSON.stringify(apiErrorBody('misdirected_request', `This server answers only for ${allowed.join(', ')} (HTTP_ALLOWED_HOSTS); check the URL.`));

/** What @hono/node-server hands a fetch handler beside the request: Node's own request and response. */
export type NodeBindings = HttpBindings | Http2Bindings;

/** Serves a fetch handler (a Hono app) on `hostname:port` with the limits; resolves once it listens. */
export function serveHttp(
  fetch: (request: Request, env: NodeBindings) => Response | Promise<Response>,
  options: { port: number; hostname: string; limits?: ListenerLimits },
): Promise<Server> {
  const limits = options.limits ?? defaultListenerLimits;
  // The bindings (Node's incoming request, hence its socket) go on to the app: without them
  // the client's address is unknown to it (hono's getConnInfo reads the socket from them), and
  // every client would share one per-address limit.
  const guarded = (request: Request, env: NodeBindings) =>
    hostAllowed(request.headers.get('host'), limits.allowedHosts)
      ? fetch(request, env)
      : new Response(misdirected(limits.allowedHosts), { status: 421, headers: { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' } });
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: guarded, port: options.port, hostname: options.hostname, serverOptions: serverOptions(limits) }, () => resolve(server as Server)) as Server;
    server.maxConnections = limits.maxConnections;
    server.once('error', reject);
  });
}

/** A plain node:http listener (the worker's /metrics) with the same limits and Host check. */
export function createLimitedServer(handler: RequestListener, limits: ListenerLimits = defaultListenerLimits): Server {
  const server = createServer(serverOptions(limits), (req: IncomingMessage, res: ServerResponse) => {
    if (!hostAllowed(req.headers.host, limits.allowedHosts)) {
      res.writeHead(421, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(misdirected(limits.allowedHosts));
      return;
    }
    handler(req, res);
  });
  server.maxConnections = limits.maxConnections;
  return server;
}
