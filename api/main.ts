import type { AddressInfo } from 'node:net';
import { createSql } from '../db/connect';
import { assertSafeToListen, loadConfig } from '../lib/config';
import { createLogger } from '../lib/logger';
import { listenerLimits, serveHttp } from '../lib/listener';
import { createApiMetrics } from '../lib/metrics';
import { paymentDataConverter } from '../lib/data-converter';
import { connectTemporal } from '../lib/temporal';
import { temporalConnectionSettings } from '../lib/temporal-connection';
import { createApp } from './app';
import { providerWebhookReceiver } from './routes/provider-webhooks';
import { CompletionWaiter } from './completions';

/** The API process: parse the environment, build the app from real dependencies, serve it. */
const config = loadConfig();
assertSafeToListen(config);
const logger = createLogger({ name: 'api', level: config.LOG_LEVEL });
const sql = createSql(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'payment-api' });
const temporal = await connectTemporal(temporalConnectionSettings(config), config.TEMPORAL_NAMESPACE, paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS));
const completions = new CompletionWaiter(sql, logger);
await completions.start();

const app = createApp({ sql, temporal, completions, config, logger, metrics: createApiMetrics(), providerWebhooks: providerWebhookReceiver(config) });
const server = await serveHttp(app.fetch, { port: config.PORT, hostname: config.HOST, limits: listenerLimits(config) });
const { port } = server.address() as AddressInfo;
logger.info({ host: config.HOST, port, allowed_hosts: config.HTTP_ALLOWED_HOSTS }, `api listening on http://${config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${port}`);

let stopping = false;
async function shutdown(signal: string) {
  // SIGINT and SIGTERM may both arrive (a terminal, then a supervisor): stop once.
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'api shutting down');
  server.close();
  await completions.stop();
  await temporal.connection.close().catch(() => {});
  await sql.end({ timeout: 5 });
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
