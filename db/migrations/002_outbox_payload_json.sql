-- Events are kept as the exact JSON text they were written with (json, not jsonb): webhook
-- bodies and GET /v1/events then show fields in their documented order (id, object, type,
-- created_at, data) instead of jsonb's storage order. Nothing queries inside the payload on
-- a hot path; the reconciler's and tests' lookups work on json too.
ALTER TABLE outbox_events ALTER COLUMN payload TYPE json USING payload::json;
