import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { createSql, type Sql } from '../../db/connect';

let own: Promise<string> | undefined;

/**
 * This test file's own database: a copy of the run's migrated template (test/global-setup.ts
 * makes it and drops the copies at the end), made on first use. Files then cannot see each
 * other's rows: a stack's outbox relay delivers only its own file's events, and counts over
 * a table are this file's.
 */
export function fileDatabaseUrl(): Promise<string> {
  own ??= (async () => {
    const template = inject('templateDatabaseUrl');
    const templateName = template.slice(template.lastIndexOf('/') + 1);
    const name = `${templateName.replace(/_template$/, '')}_f${randomBytes(4).toString('hex')}`;
    const admin = createSql(template.replace(/\/[^/]*$/, '/postgres'), { max: 1 });
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${templateName}`);
          break;
        } catch (error) {
          // A copy needs the template to itself: another file's copy may be under way.
          if (attempt >= 20 || !/being accessed by other users/.test(String(error))) throw error;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    } finally {
      await admin.end();
    }
    return template.replace(/\/[^/]*$/, `/${name}`);
  })();
  return own;
}

/** A tenant row of its own for a test that writes tables directly (no API key that works). */
export async function insertTenant(sql: Sql, label: string): Promise<string> {
  const id = `ten_${label}_${randomBytes(4).toString('hex')}`;
  await sql`INSERT INTO tenants (id, name, api_key_hash, api_key_prefix, webhook_secret) VALUES (${id}, ${label}, ${randomBytes(32)}, 'pk_test', 'whsec_test')`;
  return id;
}
