/**
 * npm run schedules [-- --list]
 *
 * Creates or updates the periodic jobs' Temporal Schedules (worker/schedules.ts) from the
 * environment, as every worker does at start, then lists them: id, when, paused or not, the
 * next runs. Idempotent. `--list` only lists. Pause, trigger and backfill them with the
 * Temporal CLI (docs/operating.md, "Periodic jobs").
 */
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../lib/config';
import { createLogger } from '../lib/logger';
import { paymentDataConverter } from '../lib/data-converter';
import { describeTemporalConnection, temporalConnectionSettings } from '../lib/temporal-connection';
import { desiredSchedules, ensureSchedules, scheduleSettings } from '../worker/schedules';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { list: { type: 'boolean', default: false } } });
  const config = loadConfig();
  const logger = createLogger({ name: 'schedules', level: config.LOG_LEVEL });
  const settings = temporalConnectionSettings(config);
  const connection = await Connection.connect(settings);
  try {
    const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter: paymentDataConverter(config.TEMPORAL_PAYLOAD_KEYS) });
    const outcomes = values.list ? {} : await ensureSchedules(client, scheduleSettings(config), logger);
    console.log(`Temporal ${describeTemporalConnection(settings)}, namespace ${config.TEMPORAL_NAMESPACE}, task queue ${config.TASK_QUEUE}`);
    for (const desired of desiredSchedules(scheduleSettings(config))) {
      const description = await client.schedule.getHandle(desired.scheduleId).describe();
      const next = description.info.nextActionTimes.slice(0, 2).map((t) => t.toISOString());
      const outcome = (outcomes as Record<string, string>)[desired.scheduleId];
      console.log(
        `${desired.scheduleId}${outcome ? ` (${outcome})` : ''}: ${desired.description} ${description.state.paused ? 'PAUSED' : 'active'}; next ${next.join(', ') || 'none'}; ` +
          `${description.info.recentActions.length} recent action(s)`,
      );
    }
  } finally {
    await connection.close();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`schedules failed: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
