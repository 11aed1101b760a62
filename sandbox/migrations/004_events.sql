-- Outbound webhooks: every charge and refund state change writes its event here in
-- the transaction that makes the change (an outbox); a delivery loop POSTs it, signed, to the
-- webhook URL it was made for, with backoff until a 2xx, across restarts.
CREATE TABLE sandbox.events (
  seq              bigserial PRIMARY KEY,
  id               text NOT NULL UNIQUE,
  type             text NOT NULL,
  -- The charge the event is about (a refund's charge for refund events): the stream that the
  -- reorder fault reorders within.
  charge_id        text NOT NULL,
  -- The exact body delivered, every time.
  body             text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The SANDBOX_WEBHOOK_URL of the sandbox that made it; NULL: none was configured, never sent.
  webhook_url      text,
  -- 'lost': the loss fault dropped it (only a redeliver sends it).
  state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'lost')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- The reorder fault: held back until a later event of the same charge was delivered, or until then.
  held_until       timestamptz,
  -- The duplicate fault: sent twice when delivered.
  duplicate        boolean NOT NULL DEFAULT false,
  delivered_at     timestamptz,
  last_status      integer,
  last_error       text
);
CREATE INDEX events_due_idx ON sandbox.events (next_attempt_at) WHERE state = 'pending';
CREATE INDEX events_charge_idx ON sandbox.events (charge_id, seq);
