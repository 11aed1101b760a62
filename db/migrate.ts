import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { createSql, type Sql } from './connect';

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Serialises concurrent starts (N workers, N APIs) migrating the same database. */
const lockKey = 'payment-orchestrator:migrations';

/** An applied migration's file no longer matches what was applied: the schema and the code may disagree. */
export class EditedMigrationError extends Error {
  override readonly name = 'EditedMigrationError';
}

interface MigrationFile {
  version: string;
  text: string;
  checksum: string;
}

async function readMigrations(dir: string): Promise<MigrationFile[]> {
  const names = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  return Promise.all(
    names.map(async (version) => {
      const text = await readFile(path.join(dir, version), 'utf8');
      return { version, text, checksum: createHash('sha256').update(text).digest('hex') };
    }),
  );
}

/**
 * Applies the versioned SQL files of `dir` (db/migrations) in name order, each in its own
 * transaction: a failing file leaves the ones before it applied and itself not at all.
 * Each applied file's SHA-256 is stored; a file edited after it was applied is refused
 * before anything runs, since the database would not have what the file now says.
 */
export async function migrate(sql: Sql, log: (line: string) => void = () => {}, dir: string = migrationsDir): Promise<string[]> {
  const files = await readMigrations(dir);
  const pending = await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${lockKey}))`;
    await tx`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`;
    // Databases migrated before checksums were kept: their rows are filled in below.
    await tx`ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text`;
    const applied = new Map(
      (await tx<{ version: string; checksum: string | null }[]>`SELECT version, checksum FROM schema_migrations`).map((r) => [r.version, r.checksum]),
    );
    for (const file of files) {
      if (!applied.has(file.version)) continue;
      const recorded = applied.get(file.version);
      if (recorded === null) {
        await tx`UPDATE schema_migrations SET checksum = ${file.checksum} WHERE version = ${file.version}`;
      } else if (recorded !== file.checksum) {
        throw new EditedMigrationError(
          `migration ${path.join(dir, file.version)} was edited after it was applied (applied sha256 ${recorded}, file now ${file.checksum}): ` +
            'restore the applied text and put the change in a new migration file',
        );
      }
    }
    return files.filter((file) => !applied.has(file.version));
  });

  const done: string[] = [];
  for (const file of pending) {
    const applied = await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${lockKey}))`;
      // Another process may have applied it since we looked.
      const [already] = await tx`SELECT 1 FROM schema_migrations WHERE version = ${file.version}`;
      if (already) return false;
      await tx.unsafe(file.text);
      await tx`INSERT INTO schema_migrations (version, checksum) VALUES (${file.version}, ${file.checksum})`;
      return true;
    });
    if (applied) {
      done.push(file.version);
      log(`migrated ${file.version}`);
    }
  }
  return done;
}

/** Creates a database if it does not exist (tests and the dev stack make their own). */
export async function ensureDatabase(adminSql: Sql, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`refusing odd database name ${name}`);
  const [exists] = await adminSql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
  if (!exists) await adminSql.unsafe(`CREATE DATABASE ${name}`);
}

/**
 * The URL of a database beside this one on the same server, `<name>_<suffix>`, created when
 * missing: a second sandbox's own (its schema name is fixed, so two sandboxes never share a database).
 */
export async function ensureSiblingDatabase(databaseUrl: string, suffix: string): Promise<string> {
  const url = siblingDatabaseUrl(databaseUrl, suffix);
  const admin = createSql(siblingDatabaseUrl(databaseUrl, null), { max: 1, connectTimeoutSeconds: 5 });
  try {
    await ensureDatabase(admin, new URL(url).pathname.slice(1));
  } finally {
    await admin.end({ timeout: 5 });
  }
  return url;
}

/** `<database>_<suffix>` on the same server (null: the `postgres` maintenance database). */
export function siblingDatabaseUrl(databaseUrl: string, suffix: string | null): string {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1)) || 'postgres';
  url.pathname = `/${suffix === null ? 'postgres' : `${name}_${suffix}`}`;
  return url.toString();
}
