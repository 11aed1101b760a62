import { createHash, randomBytes } from 'node:crypto';
import type { Db } from './connect';
import { newId } from '../domain/ids';

export interface TenantRow {
  id: string;
  name: string;
  api_key_prefix: string;
  webhook_secret: string;
  webhook_url: string | null;
  created_at: Date;
  updated_at: Date;
  /** Per-tenant rate limits; null or absent: the process default. */
  rate_limit_read_per_second?: number | null;
  rate_limit_write_per_second?: number | null;
  /** The tenant's routing (domain/routing.ts), as validated when it was set; null or absent: none. */
  routing?: unknown;
  /** The tenant's recovery settings (docs/recovery.md "Tenant settings"); null or absent: the defaults. */
  recovery_window_days?: number | null;
  recovery_per_day?: number | null;
  recovery_per_30_days?: number | null;
  recovery_max_retries?: number | null;
}

/** A tenant's recovery settings as PATCH /admin/tenants/{id} sets them; null clears one, absent leaves it. */
export interface TenantRecoverySettings {
  window_days?: number | null;
  per_day?: number | null;
  per_30_days?: number | null;
  max_retries?: number | null;
}

/** The columns the admin API reads back. */
const adminColumns = 'id, name, api_key_prefix, webhook_secret, webhook_url, created_at, updated_at, rate_limit_read_per_second, rate_limit_write_per_second, routing, recovery_window_days, recovery_per_day, recovery_per_30_days, recovery_max_retries';

/** API keys are 256 random bits behind a recognisable prefix; only their SHA-256 is stored. */
export function hashApiKey(apiKey: string): Buffer {
  return createHash('sha256').update(apiKey).digest();
}

export async function createTenant(db: Db, name: string) {
  const apiKey = `sk_${randomBytes(32).toString('base64url')}`;
  // Standard Webhooks secrets are "whsec_" + base64 of the signing key.
  const webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
  const [tenant] = await db<TenantRow[]>`
    INSERT INTO tenants (id, name, api_key_hash, api_key_prefix, webhook_secret)
    VALUES (${newId('ten')}, ${name}, ${hashApiKey(apiKey)}, ${apiKey.slice(0, 7)}, ${webhookSecret})
    RETURNING id, name, api_key_prefix, webhook_secret, webhook_url, created_at, updated_at`;
  return { tenant: tenant!, apiKey };
}

export async function findTenantByApiKey(db: Db, apiKey: string): Promise<TenantRow | null> {
  const [tenant] = await db<TenantRow[]>`
    SELECT id, name, api_key_prefix, webhook_secret, webhook_url, created_at, updated_at
    FROM tenants WHERE api_key_hash = ${hashApiKey(apiKey)}`;
  return tenant ?? null;
}

export async function updateTenant(
  db: Db,
  id: string,
  patch: {
    webhookUrl?: string | null;
    name?: string;
    rateLimits?: { read_per_second?: number | null; write_per_second?: number | null };
    /** A validated routing (domain/routing.ts), or null to clear it. */
    routing?: object | null;
    /** Within the networks' limits (the API's schema: api/schemas.ts UpdateTenantBody). */
    recovery?: TenantRecoverySettings;
  },
): Promise<TenantRow | null> {
  const read = patch.rateLimits?.read_per_second;
  const write = patch.rateLimits?.write_per_second;
  const routing = patch.routing === undefined ? db`routing` : patch.routing === null ? null : db.json(patch.routing as Parameters<typeof db.json>[0]);
  const recovery = patch.recovery ?? {};
  const keep = (value: number | null | undefined, column: string) => (value === undefined ? db(column) : value);
  const [tenant] = await db<TenantRow[]>`
    UPDATE tenants SET
      webhook_url = ${patch.webhookUrl === undefined ? db`webhook_url` : patch.webhookUrl},
      name = ${patch.name ?? db`name`},
      rate_limit_read_per_second = ${read === undefined ? db`rate_limit_read_per_second` : read},
      rate_limit_write_per_second = ${write === undefined ? db`rate_limit_write_per_second` : write},
      routing = ${routing},
      recovery_window_days = ${keep(recovery.window_days, 'recovery_window_days')},
      recovery_per_day = ${keep(recovery.per_day, 'recovery_per_day')},
      recovery_per_30_days = ${keep(recovery.per_30_days, 'recovery_per_30_days')},
      recovery_max_retries = ${keep(recovery.max_retries, 'recovery_max_retries')},
      updated_at = now()
    WHERE id = ${id}
    RETURNING ${db.unsafe(adminColumns)}`;
  return tenant ?? null;
}

/** One tenant as the admin API shows it (rate limits and routing included). */
export async function findTenant(db: Db, id: string): Promise<TenantRow | null> {
  const [tenant] = await db<TenantRow[]>`
    SELECT ${db.unsafe(adminColumns)}
    FROM tenants WHERE id = ${id}`;
  return tenant ?? null;
}

/** A tenant's routing (domain/routing.ts validates it when set); null: none. The activity that plans a payment's route reads it. */
export async function findTenantRouting(db: Db, id: string): Promise<unknown> {
  const [row] = await db<{ routing: unknown }[]>`SELECT routing FROM tenants WHERE id = ${id}`;
  return row?.routing ?? null;
}

/** A tenant's recovery settings, read by POST /v1/payments for each off-session payment (a change applies to the next one at once). */
export async function findTenantRecovery(db: Db, id: string): Promise<Required<TenantRecoverySettings>> {
  const [row] = await db<Required<TenantRecoverySettings>[]>`
    SELECT recovery_window_days AS window_days, recovery_per_day AS per_day, recovery_per_30_days AS per_30_days, recovery_max_retries AS max_retries
    FROM tenants WHERE id = ${id}`;
  return row ?? { window_days: null, per_day: null, per_30_days: null, max_retries: null };
}

export async function tenantExists(db: Db, id: string): Promise<boolean> {
  return (await db`SELECT 1 FROM tenants WHERE id = ${id}`).length > 0;
}
