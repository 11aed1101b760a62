-- The completion notification carries the stored answer, so the API process that waits for
-- it answers from the notification instead of reading the record back (one SELECT less per
-- new payment). Payload: "<tenant>|<operation>|<key>" alone, or followed by a newline, the
-- response status, a newline, the Location (empty if none), a newline and the body (last,
-- so it may hold anything). NOTIFY payloads must stay under 8000 bytes: a larger answer is
-- announced by its topic alone and the waiting request reads the record, as before.
-- A listener that knows only the topic form (an API process from before this migration,
-- during a rolling upgrade) sees no topic it waits for and falls back to its one-second look
-- at the record.
CREATE OR REPLACE FUNCTION idempotency_notify_completed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  topic   text := NEW.tenant_id || '|' || NEW.operation || '|' || NEW.idempotency_key;
  payload text;
BEGIN
  IF NEW.response_status IS NOT NULL AND NEW.response_body IS NOT NULL THEN
    payload := topic || E'\n' || NEW.response_status || E'\n' || coalesce(NEW.response_location, '') || E'\n' || NEW.response_body;
  END IF;
  IF payload IS NULL OR octet_length(payload) > 7900 THEN
    payload := topic;
  END IF;
  PERFORM pg_notify('idempotency_completed', payload);
  RETURN NULL;
END $$;
