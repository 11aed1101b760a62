import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Sql } from './connect';

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Applies the versioned SQL files in db/migrations in name order, each in its own
 * transaction. An advisory lock makes concurrent starts (N workers, N APIs) safe.
 */
export async function migrate(sql: Sql, log: (line: string) => void = () => {}): Promise<string[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('payment-orchestrator:migrations'))`;
    await tx`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`;
    const done = new Set((await tx<{ version: string }[]>`SELECT version FROM schema_migrations`).map((r) => r.version));
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(path.join(migrationsDir, file), 'utf8'));
      await tx`INSERT INTO schema_migrations (version) VALUES (${file})`;
      applied.push(file);
      log(`migrated ${file}`);
    }
  });
  return applied;
}

/** Creates a database if it does not exist (tests and the dev stack make their own). */
export async function ensureDatabase(adminSql: Sql, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`refusing odd database name ${name}`);
  const [exists] = await adminSql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
  if (!exists) await adminSql.unsafe(`CREATE DATABASE ${name}`);
}
