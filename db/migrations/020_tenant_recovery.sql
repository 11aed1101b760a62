-- A tenant's revenue recovery settings (docs/recovery.md "Tenant settings"), set with
-- PATCH /admin/tenants/{id} {"recovery": {...}}; null: the product's default. The window a
-- recovering payment gets when its request omits `recovery`, and limits below the card
-- networks' (domain/recovery.ts NETWORK_CARD_LIMITS, SCHEDULE_LIMITS): never above them, so
-- these CHECKs repeat the API's refusal (tenantLimitsRefusal).
ALTER TABLE tenants
  ADD COLUMN recovery_window_days integer CHECK (recovery_window_days BETWEEN 1 AND 60),
  ADD COLUMN recovery_per_day integer CHECK (recovery_per_day BETWEEN 1 AND 10),
  ADD COLUMN recovery_per_30_days integer CHECK (recovery_per_30_days BETWEEN 1 AND 15),
  ADD COLUMN recovery_max_retries integer CHECK (recovery_max_retries BETWEEN 1 AND 8);
