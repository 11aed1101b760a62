import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createSql } from '../../db/connect';
import { startTemporalCluster, type ClusterOptions, type TemporalCluster } from '../../devstack/temporal-cluster';
import { LOGS_DIR } from '../faults/support/config';

const adminUrl = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A cluster of the production Temporal server for one test file, in databases of its own
 * (unique names, dropped by stop()); its logs go to the fault logs folder.
 */
export async function startTestCluster(label: string, options: Partial<ClusterOptions> = {}): Promise<TemporalCluster> {
  const id = `payorch_${label}_${randomBytes(3).toString('hex')}`;
  const databases = [`${id}_temporal`, `${id}_visibility`] as const;
  const dropDatabases = async () => {
    const admin = createSql(adminUrl, { max: 1 });
    try {
      for (const name of databases) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await admin.end({ timeout: 5 });
    }
  };
  try {
    const cluster = await startTemporalCluster({
      postgresUrl: adminUrl,
      databaseName: databases[0],
      visibilityDatabaseName: databases[1],
      dataDir: path.join(LOGS_DIR, id),
      ...options,
    });
    return {
      ...cluster,
      async stop() {
        await cluster.stop();
        await dropDatabases();
      },
    };
  } catch (error) {
    await dropDatabases().catch(() => {});
    throw error;
  }
}

/** The cluster's persistence database (membership, shards, histories). */
export function clusterDatabaseUrl(cluster: TemporalCluster): string {
  return adminUrl.replace(/\/[^/]*$/, `/${cluster.databaseName}`);
}
