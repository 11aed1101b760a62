import { describe, expect, inject, it } from 'vitest';
import { Connection } from '@temporalio/client';
import { createSql } from '../../db/connect';
import { fileDatabaseUrl } from '../helpers/database';

describe('test environment', () => {
  it('has a migrated database and a Temporal server with the search attributes', async () => {
    const sql = createSql(await fileDatabaseUrl(), { max: 1 });
    const [row] = await sql`SELECT count(*) AS n FROM schema_migrations`;
    expect(row!.n).toBeGreaterThan(0);
    await sql.end();
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    const res = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    expect(Object.keys(res.customAttributes ?? {})).toEqual(expect.arrayContaining(['TenantId', 'OrderId', 'PaymentStatus']));
    await connection.close();
  });
});
