import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Sql } from '../db/connect';

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Applies sandbox/migrations/*.sql in name order into the `sandbox` schema, tracked in
 * sandbox.schema_migrations. Kept apart from db/migrate.ts on purpose: the sandbox stands
 * in for another company's PSP and shares nothing with the orchestrator but the server.
 * The advisory lock (a different one from the orchestrator's) makes concurrent starts safe.
 */
export async function migrateSandbox(sql: Sql, log: (line: string) => void = () => {}): Promise<string[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('payment-sandbox:migrations'))`;
    await tx`CREATE SCHEMA IF NOT EXISTS sandbox`;
    await tx`
      CREATE TABLE IF NOT EXISTS sandbox.schema_migrations (
        version    text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`;
    const done = new Set(
      (await tx<{ version: string }[]>`SELECT version FROM sandbox.schema_migrations`).map((r) => r.version),
    );
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await readFile(path.join(migrationsDir, file), 'utf8'));
      await tx`INSERT INTO sandbox.schema_migrations (version) VALUES (${file})`;
      applied.push(file);
      log(`sandbox migrated ${file}`);
    }
  });
  return applied;
}
