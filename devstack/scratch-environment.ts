/**
 * A throw-away environment for a script: a fresh, migrated PostgreSQL database and a
 * Temporal dev server of its own (in memory, headless, on a free port). Both are removed
 * by stop(). With TEMPORAL_MODE=external no server is started: the Temporal of
 * TEMPORAL_ADDRESS is used, with its TLS / API key settings (lib/temporal-connection.ts).
 */
import { randomBytes } from 'node:crypto';
import { createSql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { startTemporalDevServer } from './temporal-cli';
import { freePort } from './ports';
import { loadConfig } from '../lib/config';
import { temporalConnectionSettings, type TemporalConnectionSettings } from '../lib/temporal-connection';

export interface ScratchEnvironment {
  databaseUrl: string;
  temporalAddress: string;
  temporalConnection: Omit<TemporalConnectionSettings, 'address'>;
  namespace: string;
  stop(): Promise<void>;
}

/** Where a scratch database is created; DATABASE_ADMIN_URL overrides it. */
export const defaultAdminUrl = process.env.DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function startScratchEnvironment(options: { label: string; adminUrl?: string }): Promise<ScratchEnvironment> {
  const adminUrl = options.adminUrl ?? defaultAdminUrl;
  const dbName = `payorch_${options.label}_${randomBytes(4).toString('hex')}`;
  const admin = createSql(adminUrl, { max: 1, connectTimeoutSeconds: 5 });
  await ensureDatabase(admin, dbName);
  const databaseUrl = adminUrl.replace(/\/[^/]*$/, `/${dbName}`);
  const dropDatabase = async () => {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end({ timeout: 5 });
  };
  try {
    const sql = createSql(databaseUrl, { max: 1 });
    await migrate(sql).finally(() => sql.end());
    if (process.env.TEMPORAL_MODE === 'external') {
      const config = loadConfig();
      const { address, ...temporalConnection } = temporalConnectionSettings(config);
      return { databaseUrl, temporalAddress: address, temporalConnection, namespace: config.TEMPORAL_NAMESPACE, stop: dropDatabase };
    }
    const temporal = await startTemporalDevServer({ port: await freePort(), headless: true });
    return {
      databaseUrl,
      temporalAddress: temporal.address,
      temporalConnection: {},
      namespace: 'default',
      async stop() {
        await temporal.stop();
        await dropDatabase();
      },
    };
  } catch (error) {
    await dropDatabase().catch(() => {});
    throw error;
  }
}

/** A TCP port that was free a moment ago (the OS picks it). */
