/**
 * A throw-away environment for a script: a fresh, migrated PostgreSQL database and a
 * Temporal dev server of its own (in memory, headless, on a free port). Both are removed
 * by stop().
 */
import { randomBytes } from 'node:crypto';
import { createSql } from '../db/connect';
import { ensureDatabase, migrate } from '../db/migrate';
import { startTemporalDevServer } from './temporal-cli';
import { freePort } from './ports';

export interface ScratchEnvironment {
  databaseUrl: string;
  temporalAddress: string;
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
    const temporal = await startTemporalDevServer({ port: await freePort(), headless: true });
    return {
      databaseUrl,
      temporalAddress: temporal.address,
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
