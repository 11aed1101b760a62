import { randomBytes } from 'node:crypto';
import { newId } from '../domain/ids';
import type { Db } from './connect';
import { hashApiKey, type TenantRow } from './tenants';

export interface ApiKeyRow {
  id: string;
  tenant_id: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** A new secret API key: 256 random bits behind a recognisable prefix. */
export function generateApiKey(): string {
  return `sk_${randomBytes(32).toString('base64url')}`;
}

/** Registers a key for the tenant (only its hash is kept) and returns its row. */
export async function insertApiKey(db: Db, tenantId: string, apiKey: string): Promise<ApiKeyRow> {
  const [row] = await db<ApiKeyRow[]>`
    INSERT INTO api_keys (id, tenant_id, key_hash, prefix)
    VALUES (${newId('key')}, ${tenantId}, ${hashApiKey(apiKey)}, ${apiKey.slice(0, 7)})
    RETURNING id, tenant_id, prefix, created_at, last_used_at, revoked_at`;
  return row!;
}

export async function listApiKeys(db: Db, tenantId: string): Promise<ApiKeyRow[]> {
  return db<ApiKeyRow[]>`
    SELECT id, tenant_id, prefix, created_at, last_used_at, revoked_at
    FROM api_keys WHERE tenant_id = ${tenantId} ORDER BY created_at, id`;
}

/** Revokes the key (idempotent: the first revocation time is kept); null if the tenant has no such key. */
export async function revokeApiKey(db: Db, tenantId: string, keyId: string): Promise<ApiKeyRow | null> {
  const [row] = await db<ApiKeyRow[]>`
    UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
    WHERE id = ${keyId} AND tenant_id = ${tenantId}
    RETURNING id, tenant_id, prefix, created_at, last_used_at, revoked_at`;
  return row ?? null;
}

/**
 * The tenant a live (unrevoked) key belongs to, in one statement that also stamps the key's
 * last use. The API caches the answer for a few seconds, so the stamp is written at most
 * once per key per cache period per process, not on every request.
 */
export async function tenantOfActiveKey(db: Db, apiKey: string): Promise<TenantRow | null> {
  const [tenant] = await db<TenantRow[]>`
    WITH used AS (
      UPDATE api_keys SET last_used_at = now()
      WHERE key_hash = ${hashApiKey(apiKey)} AND revoked_at IS NULL
      RETURNING tenant_id
    )
    SELECT t.id, t.name, t.api_key_prefix, t.webhook_secret, t.webhook_url, t.created_at, t.updated_at,
           t.rate_limit_read_per_second, t.rate_limit_write_per_second
    FROM used JOIN tenants t ON t.id = used.tenant_id`;
  return tenant ?? null;
}

/** A Standard Webhooks signing secret: "whsec_" + base64 of 32 random bytes. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * Replaces the tenant's webhook secret. The one it replaces keeps signing deliveries (beside
 * the new one) until the overlap ends, so the merchant can deploy the new secret without
 * refusing a delivery. A rotation during an overlap ends the older overlap at once.
 */
export async function rotateWebhookSecret(db: Db, tenantId: string, overlapSeconds: number): Promise<{ secret: string; previousValidUntil: Date } | null> {
  const secret = generateWebhookSecret();
  const [row] = await db<{ previous_webhook_secret_expires_at: Date }[]>`
    UPDATE tenants SET
      previous_webhook_secret = webhook_secret,
      previous_webhook_secret_expires_at = now() + make_interval(secs => ${overlapSeconds}),
      webhook_secret = ${secret},
      updated_at = now()
    WHERE id = ${tenantId}
    RETURNING previous_webhook_secret_expires_at`;
  return row ? { secret, previousValidUntil: row.previous_webhook_secret_expires_at } : null;
}
