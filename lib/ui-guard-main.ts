/**
 * `npm run ui-guard`: the read-only guard of lib/ui-guard.ts as a process of its own, on
 * UI_GUARD_PORT in front of a Temporal Web UI at UI_GUARD_TARGET (`host:port`), for a UI
 * started by someone else: compose's `temporal-ui` (temporalio/ui), which only this guard
 * publishes. Read-only unless TEMPORAL_UI_WRITE_ACTIONS=true; the Host check, deadlines and
 * connection cap of every listener of ours (HTTP_*, lib/listener.ts). It reads only these
 * variables, HOST and LOG_LEVEL (lib/config.ts loadUiGuardConfig): it needs no secret.
 */
import type { AddressInfo } from 'node:net';
import { loadUiGuardConfig, type UiGuardConfig } from './config';
import { createLogger } from './logger';
import { listenerLimits } from './listener';
import { startUiGuard } from './ui-guard';

let config: UiGuardConfig;
try {
  config = loadUiGuardConfig(process.env);
} catch (error) {
  createLogger({ name: 'ui-guard' }).fatal((error as Error).message);
  process.exit(1);
}
const logger = createLogger({ name: 'ui-guard', level: config.LOG_LEVEL });
const target = config.UI_GUARD_TARGET;
if (!target) {
  logger.fatal('the Web UI guard needs UI_GUARD_TARGET: the Web UI it guards, as host:port (e.g. temporal-ui:8080)');
  process.exit(1);
}
const server = await startUiGuard({
  port: config.UI_GUARD_PORT,
  hostname: config.HOST,
  target,
  writeActions: config.TEMPORAL_UI_WRITE_ACTIONS,
  limits: listenerLimits(config),
});
logger.info(
  { target: `${target.host}:${target.port}`, writeActions: config.TEMPORAL_UI_WRITE_ACTIONS, allowedHosts: config.HTTP_ALLOWED_HOSTS },
  `Web UI guard listening on ${config.HOST}:${(server.address() as AddressInfo).port}${config.TEMPORAL_UI_WRITE_ACTIONS ? ' (write actions on)' : ' (read-only)'}`,
);

let stopping = false;
function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'Web UI guard shutting down');
  server.closeAllConnections();
  server.close(() => process.exit(0));
}
process.once('SIGINT', () => shutdown('SIGINT'));
process.once('SIGTERM', () => shutdown('SIGTERM'));
