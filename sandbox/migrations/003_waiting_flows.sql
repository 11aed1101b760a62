-- Payments that wait: 3-D Secure challenges (requires_action) and asynchronous
-- bank debits (processing, settled by the sandbox's settlement loop at settle_at, so a
-- restart of the sandbox settles what was due while it was down).
ALTER TABLE sandbox.charges DROP CONSTRAINT charges_status_check;
ALTER TABLE sandbox.charges ADD CONSTRAINT charges_status_check
  CHECK (status IN ('succeeded', 'requires_capture', 'declined', 'canceled', 'requires_action', 'processing'));
ALTER TABLE sandbox.charges
  -- What the create asked for: decides where an approved challenge or a settlement lands.
  ADD COLUMN capture boolean NOT NULL DEFAULT true,
  -- Where the challenge page sends the customer back (303, with the payment reference).
  ADD COLUMN return_url text,
  -- The challenge page, served by the sandbox itself; set for requires_action charges.
  ADD COLUMN challenge_url text,
  ADD COLUMN challenge_state text CHECK (challenge_state IN ('pending', 'approved', 'denied', 'expired')),
  -- A processing charge settles at this time (SANDBOX_ASYNC_SETTLE_MS after its create).
  ADD COLUMN settle_at timestamptz,
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX charges_settle_idx ON sandbox.charges (settle_at) WHERE status = 'processing';
