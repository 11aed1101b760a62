/**
 * The outbox relay alone, as its own process, so the chaos run can SIGKILL it mid-delivery
 * (the worker process runs another relay beside it: the two claim events under row locks).
 * Ready once GET http://127.0.0.1:$RELAY_HEALTH_PORT/ answers.
 */
import { createServer } from 'node:http';
import { createSql } from '../db/connect';
import { loadConfig } from '../lib/config';
import { createLogger } from '../lib/logger';
import { webhookTargetPolicy } from '../lib/webhook-target';
import { OutboxRelay } from '../worker/outbox-relay';

const config = loadConfig();
const logger = createLogger({ name: 'chaos-relay', level: config.LOG_LEVEL });
const sql = createSql(config.DATABASE_URL, { max: 4, applicationName: 'chaos-relay' });
const relay = new OutboxRelay(sql, logger, {
  retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
  retryMaxMs: config.WEBHOOK_RETRY_MAX_MS,
  maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  batchSize: 20,
  pollMs: 500,
  targetPolicy: webhookTargetPolicy({ allowedCidrs: config.WEBHOOK_ALLOWED_CIDRS, allowHttp: config.WEBHOOK_ALLOW_HTTP }),
});
await relay.start();
createServer((_, response) => response.end('ok')).listen(Number(process.env.RELAY_HEALTH_PORT), '127.0.0.1');
logger.info('relay running');
