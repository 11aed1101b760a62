/**
 * `npm run codec-server`: the codec server process (lib/codec-server.ts) on CODEC_PORT, with
 * the same TEMPORAL_PAYLOAD_KEYS as the API and the worker. `npm start` runs it and points
 * the Temporal Web UI at it.
 */
import { assertSafeCodecServer, codecCorsOrigins, loadConfig } from './config';
import { createLogger } from './logger';
import { listenerLimits } from './listener';
import { AesGcmPayloadCodec } from './payload-codec';
import { startCodecServer } from './codec-server';

const config = loadConfig();
const logger = createLogger({ name: 'codec-server', level: config.LOG_LEVEL });
if (!config.TEMPORAL_PAYLOAD_KEYS) {
  logger.fatal('the codec server needs TEMPORAL_PAYLOAD_KEYS (payload encryption is off or has no keys)');
  process.exit(1);
}
try {
  assertSafeCodecServer(config);
} catch (error) {
  logger.fatal((error as Error).message);
  process.exit(1);
}
const server = await startCodecServer({
  codec: new AesGcmPayloadCodec(config.TEMPORAL_PAYLOAD_KEYS),
  token: config.CODEC_TOKEN,
  allowedOrigins: codecCorsOrigins(config),
  enableEncode: config.CODEC_ENABLE_ENCODE,
  port: config.CODEC_PORT,
  hostname: config.HOST,
  limits: listenerLimits(config),
});
logger.info(
  { keys: config.TEMPORAL_PAYLOAD_KEYS.map((k) => k.id), token: Boolean(config.CODEC_TOKEN), encode: config.CODEC_ENABLE_ENCODE, origins: codecCorsOrigins(config) },
  `codec server listening on ${server.url}`,
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'codec server shutting down');
  await server.close();
  process.exit(0);
}
process.once('SIGINT', () => void shutdown('SIGINT'));
process.once('SIGTERM', () => void shutdown('SIGTERM'));
