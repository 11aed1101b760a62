import type { ChildProcess } from 'node:child_process';
import { request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createLimitedServer, defaultListenerLimits, type ListenerLimits } from './listener';

/**
 * The Temporal Web UI behind a listener of ours: the dev server's embedded UI (`temporal server
 * start-dev`, devstack/temporal-cli.ts), which has no read-only switch, and the UI server of the
 * cluster (devstack/temporal-cluster.ts) and of compose (`temporal-ui`, guarded by the process
 * lib/ui-guard-main.ts), whose read-only rule lets writes through. Neither checks the Host
 * header: a web page whose name was rebound to 127.0.0.1 could read the UI's settings and CSRF
 * cookie and end a payment's run. The UI listens where only the guard reaches it (a private
 * loopback port; in compose, the compose network) and this guard takes its public port, with the limits of every listener of ours (lib/listener.ts: Host check, header
 * and request deadlines, connection cap), and, unless write actions are switched on
 * (TEMPORAL_UI_WRITE_ACTIONS=true):
 *
 * - admits GET and HEAD, and a POST only when its request target, as sent, is the UI's
 *   workflow query route (readOnlyAllows); every other request is 405;
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

/**
 * The UI's workflow query route, segment by segment, as the UI server registers it (grpc-gateway,
 * go.temporal.io/api: QueryWorkflow): POST /api/v1/namespaces/{namespace}/workflows/{workflow_id}/query/{query_type}.
 * `null` is a variable segment.
 */
const queryRoute = ['', 'api', 'v1', 'namespaces', null, 'workflows', null, 'query', null] as const;

/**
 * The characters a variable segment may hold as they are (RFC 3986 `pchar`, which is all
 * `encodeURIComponent` leaves unencoded and more), and the percent-encodings it may hold.
 */
const segmentPattern = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+$/;
/** Percent-encoded bytes refused in a segment: `.`, `/`, `\`, `%` (encoded twice) and control characters. */
const refusedEncoding = /%(?:2[EeFf5]|5[Cc]|[01][0-9A-Fa-f]|7[Ff])/;

/** Whether `segment` names one value however the UI server decodes and resolves the path. */
function isPlainSegment(segment: string): boolean {
  if (!segmentPattern.test(segment) || refusedEncoding.test(segment) || /^\.+$/.test(segment)) return false;
  try {
    // Refuses encodings that are not UTF-8 (overlong forms of `.` and `/` included).
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the read-only UI lets this request through. `target` is the request target as sent
 * (its query string is ignored). GET and HEAD pass: the UI server routes them to reads only.
 * A POST passes only when its path is exactly the UI's workflow query route: the literal
 * segments as written, each variable segment non-empty and free of dot-only names, of `\`,
 * `#` and other characters outside RFC 3986's, and of encoded `.`, `/`, `\` or `%`. So the
 * path the guard checks is the path the UI server routes: it resolves `..`, `.` and a
 * fragment before routing, and any of them here would name another route.
 */
export function readOnlyAllows(method: string, target: string): boolean {
  if (method === 'GET' || method === 'HEAD') return true;
  if (method !== 'POST') return false;
  const segments = target.split('?')[0]!.split('/');
  return segments.length === queryRoute.length && queryRoute.every((literal, index) => (literal === null ? isPlainSegment(segments[index]!) : segments[index] === literal));
}

export interface UiGuardOptions {
  /** The public port (TEMPORAL_UI_PORT, or UI_GUARD_PORT for the process) and address. */
  port: number;
  hostname: string;
  /** Where the UI listens (a private loopback port). */
  target: { host: string; port: number };
  writeActions: boolean;
  limits?: ListenerLimits;
}

/**
 * Starts the guard in front of the UI process `ui`; resolves once it listens. The guard lives
 * as long as the process it guards (a restart makes a new pair on the same port).
 */
export async function guardUi(ui: ChildProcess, options: UiGuardOptions): Promise<void> {
  const guard = await startUiGuard(options);
  const close = () => {
    guard.closeAllConnections();
    guard.close();
  };
  if (ui.exitCode !== null || ui.signalCode !== null) close();
  else ui.once('exit', close);
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
  const target = req.url ?? '/';
  const path = target.split('?')[0]!;
  if (!options.writeActions && !readOnlyAllows(req.method ?? 'GET', target)) {
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
