-- A tenant's routing across the deployment's PSPs (domain/routing.ts, docs/CONTRACT.md §3.7).
-- Set with PATCH /admin/tenants/{id}, validated there against the configured
-- providers; null: none (the first configured PSP first).

ALTER TABLE tenants ADD COLUMN routing jsonb CHECK (routing IS NULL OR jsonb_typeof(routing) = 'object');
