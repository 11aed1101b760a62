import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { EditedMigrationError, ensureDatabase, migrate } from '../../db/migrate';

/** The migration runner against a real PostgreSQL database of its own, on migration files of the test's own. */

const adminUrl = inject('databaseUrl').replace(/\/[^/]*$/, '/postgres');
let admin: Sql;
const made: string[] = [];

beforeAll(() => {
  admin = createSql(adminUrl, { max: 1 });
});
afterAll(async () => {
  for (const name of made) await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin?.end();
});

/** A fresh database and a folder of migration files. */
async function fresh(files: Record<string, string>) {
  const name = `payorch_migrate_${randomBytes(4).toString('hex')}`;
  made.push(name);
  await ensureDatabase(admin, name);
  const sql = createSql(adminUrl.replace(/\/[^/]*$/, `/${name}`), { max: 2 });
  const dir = mkdtempSync(path.join(tmpdir(), 'migrations-'));
  const write = (more: Record<string, string>) => {
    for (const [file, text] of Object.entries(more)) writeFileSync(path.join(dir, file), text);
  };
  write(files);
  return { sql, dir, write };
}

const tables = async (sql: Sql) =>
  (await sql<{ table_name: string }[]>`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`).map((r) => r.table_name);

describe('db/migrate.ts', () => {
  it('applies each file in its own transaction: a failing file keeps the ones before it and leaves no half of itself (rules out all-or-nothing and half-applied files)', async () => {
    const db = await fresh({
      '001_a.sql': 'CREATE TABLE a (id int);',
      '002_b.sql': 'CREATE TABLE b (id int); SELECT * FROM no_such_table;',
    });
    try {
      await expect(migrate(db.sql, () => {}, db.dir)).rejects.toThrow(/no_such_table/);
      expect(await tables(db.sql)).toEqual(['a', 'schema_migrations']);
      expect((await db.sql`SELECT version FROM schema_migrations`).map((r) => r.version)).toEqual(['001_a.sql']);

      db.write({ '002_b.sql': 'CREATE TABLE b (id int);' });
      expect(await migrate(db.sql, () => {}, db.dir)).toEqual(['002_b.sql']);
      expect(await migrate(db.sql, () => {}, db.dir)).toEqual([]);
      expect(await tables(db.sql)).toEqual(['a', 'b', 'schema_migrations']);
    } finally {
      await db.sql.end();
    }
  });

  it('refuses, before applying anything, when an applied file was edited, naming the file (rules out a schema that silently differs from its files)', async () => {
    const db = await fresh({ '001_a.sql': 'CREATE TABLE a (id int);' });
    try {
      await migrate(db.sql, () => {}, db.dir);
      db.write({ '001_a.sql': 'CREATE TABLE a (id int, extra text);', '002_b.sql': 'CREATE TABLE b (id int);' });

      const refusal = await migrate(db.sql, () => {}, db.dir).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(EditedMigrationError);
      expect((refusal as Error).message).toContain(`${path.join(db.dir, '001_a.sql')} was edited after it was applied`);
      expect((refusal as Error).message).toContain('new migration file');
      expect(await tables(db.sql)).toEqual(['a', 'schema_migrations']);

      // Restored, the same files migrate again.
      db.write({ '001_a.sql': 'CREATE TABLE a (id int);' });
      expect(await migrate(db.sql, () => {}, db.dir)).toEqual(['002_b.sql']);
    } finally {
      await db.sql.end();
    }
  });

  it('records the checksum of files applied before checksums were kept, then guards them too (rules out older databases escaping the check)', async () => {
    const db = await fresh({ '001_a.sql': 'CREATE TABLE a (id int);' });
    try {
      await db.sql`CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
      await db.sql`CREATE TABLE a (id int)`;
      await db.sql`INSERT INTO schema_migrations (version) VALUES ('001_a.sql')`;

      expect(await migrate(db.sql, () => {}, db.dir)).toEqual([]);
      const [row] = await db.sql<{ checksum: string | null }[]>`SELECT checksum FROM schema_migrations WHERE version = '001_a.sql'`;
      expect(row!.checksum).toMatch(/^[0-9a-f]{64}$/);

      db.write({ '001_a.sql': 'CREATE TABLE a (id bigint);' });
      await expect(migrate(db.sql, () => {}, db.dir)).rejects.toBeInstanceOf(EditedMigrationError);
    } finally {
      await db.sql.end();
    }
  });

  it('applies each file once when several processes migrate at the same time (rules out a double CREATE failing a start)', async () => {
    const db = await fresh({ '001_a.sql': 'CREATE TABLE a (id int);', '002_b.sql': 'CREATE TABLE b (id int);' });
    const others = [createSql(adminUrl.replace(/\/[^/]*$/, `/${made.at(-1)}`), { max: 1 }), createSql(adminUrl.replace(/\/[^/]*$/, `/${made.at(-1)}`), { max: 1 })];
    try {
      const results = await Promise.all([db.sql, ...others].map((sql) => migrate(sql, () => {}, db.dir)));
      expect(results.flat().sort()).toEqual(['001_a.sql', '002_b.sql']);
    } finally {
      await Promise.all([db.sql.end(), ...others.map((sql) => sql.end())]);
    }
  });
});
