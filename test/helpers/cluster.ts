import { randomBytes } from 'node:crypto';
import path from 'node:path';
import postgres from 'postgres';
import { createSql } from '../../db/connect';
import { startTemporalCluster, type ClusterOptions, type TemporalCluster } from '../../devstack/temporal-cluster';
import { LOGS_DIR } from './faults/config';

const adminUrl = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A cluster of the production Temporal server for one test file, in databases of its own
 * (unique names, dropped by stop()); its logs go to the fault logs folder. Clusters on the
 * machine's PostgreSQL take turns (an advisory lock held from start to stop): two of them
 * (26 connections each) next to the other files' stacks took all 100 of its connections.
 */
export async function startTestCluster(label: string, options: Partial<ClusterOptions> = {}): Promise<TemporalCluster> {
  const turn = options.postgresUrl === undefined ? await takeClusterTurn() : null;
  try {
    const cluster = await startOwnCluster(label, options);
    return {
      ...cluster,
      async stop() {
        try {
          await cluster.stop();
        } finally {
          await turn?.end();
        }
      },
    };
  } catch (error) {
    await turn?.end();
    throw error;
  }
}

/** Waits for the turn of clusters on the machine's PostgreSQL; ending the returned session gives it up. */
async function takeClusterTurn(): Promise<postgres.Sql> {
  // Its own session, never closed for idleness: the lock lives as long as the session.
  const session = postgres(adminUrl, { max: 1, idle_timeout: 0, onnotice: () => {} });
  try {
    await session`SELECT pg_advisory_lock(hashtext('payment-orchestrator test cluster'))`;
    return session;
  } catch (error) {
    await session.end();
    throw error;
  }
}

async function startOwnCluster(label: string, options: Partial<ClusterOptions>): Promise<TemporalCluster> {
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
