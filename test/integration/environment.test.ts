import { readdirSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { createSql } from '../../db/connect';
import { projectRoot, searchAttributeFlags } from '../../devstack/temporal-cli';
import { fileDatabaseUrl } from '../helpers/database';

describe('test environment', () => {
  it('has every migration of db/migrations applied, unedited, and nothing else', async () => {
    const dir = path.join(projectRoot, 'db', 'migrations');
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .map((version) => ({ version, checksum: createHash('sha256').update(readFileSync(path.join(dir, version), 'utf8')).digest('hex') }));
    const sql = createSql(await fileDatabaseUrl(), { max: 1 });
    try {
      const applied = await sql<{ version: string; checksum: string }[]>`SELECT version, checksum FROM schema_migrations ORDER BY version`;
      expect(applied.map((r) => ({ version: r.version, checksum: r.checksum }))).toEqual(files);
    } finally {
      await sql.end();
    }
  });

  it('has a Temporal server with every search attribute the product registers, each a Keyword', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      // INDEXED_VALUE_TYPE_KEYWORD = 2; the flags are `Name=Keyword`.
      const expected = searchAttributeFlags.map((flag) => flag.split('=')[0]!);
      for (const name of expected) expect(res.customAttributes?.[name], name).toBe(2);
    } finally {
      await connection.close();
    }
  });
});
