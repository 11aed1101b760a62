import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSql, type Sql } from '../../db/connect';
import { ensureDatabase, migrate } from '../../db/migrate';
import { reserveCardAttempt } from '../../db/recovery';
import { recoveryPolicy } from '../../domain/recovery';

/**
 * db/migrations/025_cards_per_tenant.sql on a database that holds budgets of the old shape (one
 * per saved method, migration 018): a database migrated up to 023, rows written as the old code
 * wrote them, then 025 applied. Each reservation then counts against its card, and the copies of
 * one card share one budget.
 */

const adminUrl = inject('databaseUrl').replace(/\/[^/]*$/, '/postgres');
const migrations = path.join(import.meta.dirname, '../../db/migrations');
const NEW = '025_cards_per_tenant.sql';
let admin: Sql;
let sql: Sql;
let name: string;

beforeAll(async () => {
  admin = createSql(adminUrl, { max: 1 });
  name = `payorch_cards_${randomBytes(4).toString('hex')}`;
  await ensureDatabase(admin, name);
  sql = createSql(adminUrl.replace(/\/[^/]*$/, `/${name}`), { max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await admin?.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin?.end();
});

/** A folder of the real migrations, those sorting before `upTo` only (or all). */
function migrationsDir(upTo?: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'migrations-'));
  for (const file of readdirSync(migrations).filter((f) => f.endsWith('.sql') && (upTo === undefined || f < upTo))) copyFileSync(path.join(migrations, file), path.join(dir, file));
  return dir;
}

describe('025: the budgets kept per saved method become their card’s', () => {
  it('carries the old rows: each reservation keeps its copy and gets its card; copies of one card merge into one budget that counts them all', async () => {
    const before = migrationsDir(NEW);
    expect(await migrate(sql, () => {}, before)).not.toContain(NEW);
    await sql`INSERT INTO tenants (id, name, api_key_hash, api_key_prefix, webhook_secret) VALUES ('ten_m', 'm', ${randomBytes(32)}, 'pk_test', 'whsec_test')`;
    await sql`INSERT INTO customers (id, tenant_id) VALUES ('cus_m', 'ten_m')`;
    const payments = ['pay_s1', 'pay_s2', 'pay_s3', 'pay_r1', 'pay_r2', 'pay_r3', 'pay_new'];
    for (const id of payments) {
      await sql`
        INSERT INTO payments (id, tenant_id, order_id, amount_minor, currency, status, capture_method, payment_method, workflow_id)
        VALUES (${id}, 'ten_m', ${`ord_${id}`}, 1000, 'EUR', 'processing', 'automatic', 'pm_card_visa', ${`wf-${id}`})`;
    }
    // Two copies of one card (the same brand, last4 and expiry: 018's rows had no fingerprint) and another card.
    const method = (id: string, last4: string, source: string) => sql`
      INSERT INTO payment_methods (id, tenant_id, customer_id, card_brand, card_last4, card_exp_month, card_exp_year, network_transaction_id, provider_tokens, source_payment_id)
      VALUES (${id}, 'ten_m', 'cus_m', 'visa', ${last4}, 12, 2034, 'ntx_old', ${sql.json({})}, ${source})`;
    await method('pm_a', '0341', 'pay_s1');
    await method('pm_b', '0341', 'pay_s2');
    await method('pm_c', '9995', 'pay_s3');
    await sql`INSERT INTO card_attempt_budgets (payment_method_id) VALUES ('pm_a'), ('pm_b'), ('pm_c')`;
    await sql`
      INSERT INTO card_attempts (payment_method_id, payment_id, attempt, reserved_at)
      VALUES ('pm_a', 'pay_r1', 1, now()), ('pm_b', 'pay_r2', 1, now()), ('pm_c', 'pay_r3', 1, now())`;

    // 025 and the migrations after it (none of which touch the budgets).
    expect(await migrate(sql, () => {}, migrationsDir())).toEqual(readdirSync(migrations).filter((f) => f.endsWith('.sql') && f >= NEW).sort());

    const attempts = await sql<{ payment_method_id: string; tenant_id: string; card_key: string }[]>`
      SELECT payment_method_id, tenant_id, card_key FROM card_attempts ORDER BY payment_method_id`;
    expect(attempts).toEqual([
      { payment_method_id: 'pm_a', tenant_id: 'ten_m', card_key: 'card:visa:0341:12:2034' },
      { payment_method_id: 'pm_b', tenant_id: 'ten_m', card_key: 'card:visa:0341:12:2034' },
      { payment_method_id: 'pm_c', tenant_id: 'ten_m', card_key: 'card:visa:9995:12:2034' },
    ]);
    expect(await sql`SELECT tenant_id, card_key, hard_decline_code FROM tenant_cards ORDER BY card_key`).toEqual([
      { tenant_id: 'ten_m', card_key: 'card:visa:0341:12:2034', hard_decline_code: null },
      { tenant_id: 'ten_m', card_key: 'card:visa:9995:12:2034', hard_decline_code: null },
    ]);
    expect(await sql`SELECT to_regclass('card_attempt_budgets') AS old`).toEqual([{ old: null }]);
    // The merged budget counts both copies' old reservations: under 2 a day, a third attempt of the card is refused.
    const limits = recoveryPolicy(1, { perDay: 2 });
    expect((await reserveCardAttempt(sql, { paymentMethodId: 'pm_a', paymentId: 'pay_new', attempt: 1, limits })).reserved).toBe(false);
    expect((await reserveCardAttempt(sql, { paymentMethodId: 'pm_c', paymentId: 'pay_new', attempt: 1, limits })).reserved).toBe(true);
  });
});
