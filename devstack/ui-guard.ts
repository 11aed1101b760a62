import { request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createLimitedServer, defaultListenerLimits, type ListenerLimits } from '../lib/listener';

/**
 * The dev server's embedded Web UI, behind a listener of ours. The embedded UI (`temporal server
 * start-dev`) has no read-only switch and checks no Host header: a web page whose name was
 * rebound to 127.0.0.1 could read its settings and CSRF cookie and terminate a payment's run.
 * The UI listens on a private loopback port and this guard takes its public port, with the
 * limits of every listener of ours (lib/listener.ts: Host check, header and request deadlines,
 * connection cap), and, unless write actions are switched on (TEMPORAL_UI_WRITE_ACTIONS=true):
 *
 * - refuses every request that is not GET or HEAD with 405, except the UI's workflow queries
 *   (POST /api/v1/namespaces/…/workflows/…/query/…): the rule the separate UI server applies
 *   with `disableWriteActions` (its DisableWriteMiddleware), so dev and cluster modes agree;
 * - answers /api/v1/settings with every write action reported off, so the UI hides terminate,
 *   cancel, signal, update, reset, start and batch actions instead of offering refused buttons.
 */

/** The settings the UI reads to offer (or hide) its write actions; all true when they are off. */
export const writeActionSettings = [
  'DisableWriteActions',
  'WorkflowTerminateDisabled',
  'WorkflowCancelDisabled',
  'WorkflowSignalDisabled',
  'WorkflowUpdateDisabled',
  'WorkflowResetDisabled',
  'BatchActionsDisabled',
  'StartWorkflowDisabled',
  'ActivityCommandsDisabled',
] as const;

/** Whether the read-only UI lets this request through (the UI server's own rule). */
export function readOnlyAllows(method: string, path: string): boolean {
  if (method === 'GET' || method === 'HEAD') return true;
  return method === 'POST' && path.startsWith('/api/v1/namespaces/') && path.includes('/workflows/') && path.includes('/query/');
}

export interface UiGuardOptions {
  /** The public port (TEMPORAL_UI_PORT) and address. */
  port: number;
  hostname: string;
  /** Where the embedded UI listens (a private loopback port). */
  target: { host: string; port: number };
  writeActions: boolean;
  limits?: ListenerLimits;
}

/** Starts the guard; resolves once it listens. */
export function startUiGuard(options: UiGuardOptions): Promise<Server> {
  const server = createLimitedServer((req, res) => forward(req, res, options), options.limits ?? defaultListenerLimits);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.hostname, () => resolve(server));
  });
}

function forward(req: IncomingMessage, res: ServerResponse, options: UiGuardOptions): void {
  const path = (req.url ?? '/').split('?')[0]!;
  if (!options.writeActions && !readOnlyAllows(req.method ?? 'GET', path)) {
    req.resume();
    res.writeHead(405, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(
      JSON.stringify({ message: 'The Web UI is read-only: write actions are off (TEMPORAL_UI_WRITE_ACTIONS=true turns them on).' }),
    );
    return;
  }
  const settings = !options.writeActions && path === '/api/v1/settings';
  const headers = { ...req.headers };
  // The settings are rewritten: asked for in plain bytes.
  if (settings) headers['accept-encoding'] = 'identity';
  const upstream = httpRequest({ host: options.target.host, port: options.target.port, method: req.method, path: req.url, headers }, (answer) => {
    if (!settings || answer.statusCode !== 200) {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      return;
    }
    const chunks: Buffer[] = [];
    answer.on('data', (chunk: Buffer) => chunks.push(chunk));
    answer.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'The Web UI answered settings that are not JSON.' }));
        return;
      }
      for (const name of writeActionSettings) body[name] = true;
      const bytes = Buffer.from(JSON.stringify(body));
      const { 'content-length': _length, 'transfer-encoding': _encoding, ...rest } = answer.headers;
      res.writeHead(200, { ...rest, 'content-length': String(bytes.length) }).end(bytes);
    });
    answer.on('error', () => res.destroy());
  });
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'The Web UI is not answering.' }));
    else res.destroy();
  });
  req.pipe(upstream);
}
