import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSql } from '../../db/connect';
import { migrate } from '../../db/migrate';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../../devstack/embedded-postgres';
import { freePort } from '../../devstack/ports';

export interface PrivatePostgres {
  pg: EmbeddedPostgresHandle;
  /** Stops the server (started again first if a test left it stopped, so it stops cleanly) and removes its data. */
  remove(): Promise<void>;
}

/**
 * A PostgreSQL of the test file's own (the embedded one, its data in a temporary folder), with
 * the orchestrator's schema in its `payments` database: for the tests that stop and start the
 * database under a running stack, which the machine's shared server must not be.
 */
export async function startPrivatePostgres(label: string): Promise<PrivatePostgres> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `payorch-${label}-`));
  try {
    const pg = await startEmbeddedPostgres({ dataDir, port: await freePort(), database: 'payments' });
    const sql = createSql(pg.url, { max: 1 });
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
    return {
      pg,
      async remove() {
        await pg.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}
