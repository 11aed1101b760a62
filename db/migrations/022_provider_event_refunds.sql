-- A refund's settlement as its PSP notified it (Adyen's REFUND, REFUND_FAILED), findable by the
-- PSP's refund id: a run that asked for a refund under a key another run used first is answered
-- that refund again, still `pending`, and its settlement may have been stored before the run asked
-- (db/provider-events.ts storedRefundSettlement). Null for every other event; existing rows need
-- no value (the index is partial, over the rows that have one).

ALTER TABLE provider_events ADD COLUMN refund_id text;
CREATE INDEX provider_events_by_refund ON provider_events (provider, refund_id) WHERE refund_id IS NOT NULL;
