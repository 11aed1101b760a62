/**
 * `npm run frontend-balancer`: the TCP balancer of lib/frontend-balancer.ts as a process.
 * `npm start` runs it in TEMPORAL_MODE=cluster on TEMPORAL_PORT, in front of the nodes it
 * started; every process of the stack is given its address as TEMPORAL_ADDRESS.
 *
 *   TEMPORAL_FRONTENDS=127.0.0.1:7301,127.0.0.1:7302 BALANCER_PORT=7233 npm run frontend-balancer
 *
 * TEMPORAL_TLS_* / TEMPORAL_API_KEY (lib/temporal-connection.ts) are used by the health
 * checks only; the traffic is passed through as it is.
 */
import { z } from 'zod';
import { createLogger } from './logger';
import { startFrontendBalancer } from './frontend-balancer';
import { temporalConnectionSettings } from './temporal-connection';

const env = z
  .object({
    TEMPORAL_FRONTENDS: z.string().min(1).transform((list) => list.split(',').map((a) => a.trim()).filter(Boolean)),
    BALANCER_PORT: z.coerce.number().int().min(0).max(65535).default(7233),
    BALANCER_HOST: z.string().min(1).default('127.0.0.1'),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
    BALANCER_CHECK_MS: z.coerce.number().int().positive().default(1000),
    LOG_LEVEL: z.string().default('info'),
  })
  .parse(process.env);
const logger = createLogger({ name: 'frontend-balancer', level: env.LOG_LEVEL });
const { address: _unused, ...connection } = temporalConnectionSettings({
  TEMPORAL_ADDRESS: env.TEMPORAL_FRONTENDS[0]!,
  TEMPORAL_TLS_CERT: process.env.TEMPORAL_TLS_CERT,
  TEMPORAL_TLS_KEY: process.env.TEMPORAL_TLS_KEY,
  TEMPORAL_TLS_CA: process.env.TEMPORAL_TLS_CA,
  TEMPORAL_TLS_SERVER_NAME: process.env.TEMPORAL_TLS_SERVER_NAME,
  TEMPORAL_TLS: process.env.TEMPORAL_TLS === 'true',
  TEMPORAL_API_KEY: process.env.TEMPORAL_API_KEY,
});
const balancer = await startFrontendBalancer({
  frontends: env.TEMPORAL_FRONTENDS,
  host: env.BALANCER_HOST,
  port: env.BALANCER_PORT,
  connection,
  namespace: env.TEMPORAL_NAMESPACE,
  checkEveryMs: env.BALANCER_CHECK_MS,
  log: (message) => logger.warn(message),
});
logger.info({ frontends: env.TEMPORAL_FRONTENDS }, `frontend balancer listening on ${balancer.address}`);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'frontend balancer shutting down');
  await balancer.close();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
