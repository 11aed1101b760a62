-- The public edge: per-tenant rate limits, several API keys per tenant (revocable), and
-- webhook secret rotation with an overlap window.

-- NULL: the process-wide default (RATE_LIMIT_READ_PER_SECOND / _WRITE_PER_SECOND).
ALTER TABLE tenants
  ADD COLUMN rate_limit_read_per_second  integer CHECK (rate_limit_read_per_second > 0),
  ADD COLUMN rate_limit_write_per_second integer CHECK (rate_limit_write_per_second > 0),
  -- After a rotation, deliveries are signed with this secret too until the overlap ends.
  ADD COLUMN previous_webhook_secret            text,
  ADD COLUMN previous_webhook_secret_expires_at timestamptz;

-- Every API key of a tenant. Authentication looks keys up here (tenants.api_key_hash stays
-- as the record of the first key). Only SHA-256 of a key is stored; a revoked key is kept,
-- refused, for the audit trail.
CREATE TABLE api_keys (
  id            text PRIMARY KEY,
  tenant_id     text NOT NULL REFERENCES tenants (id),
  key_hash      bytea NOT NULL UNIQUE,
  prefix        text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);

-- Existing tenants keep their key: it becomes their first row here.
INSERT INTO api_keys (id, tenant_id, key_hash, prefix, created_at)
SELECT 'key_' || substr(md5(id), 1, 26), id, api_key_hash, api_key_prefix, created_at FROM tenants;
