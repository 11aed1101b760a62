-- The sandbox PSP's own state. It is "another company": nothing here references the
-- orchestrator's tables, and the orchestrator never reads these tables directly.

CREATE TABLE sandbox.charges (
  id                     text PRIMARY KEY,
  status                 text NOT NULL CHECK (status IN ('succeeded', 'requires_capture', 'declined', 'canceled')),
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
  amount_captured_minor  bigint NOT NULL DEFAULT 0 CHECK (amount_captured_minor >= 0),
  amount_refunded_minor  bigint NOT NULL DEFAULT 0 CHECK (amount_refunded_minor >= 0),
  currency               char(3) NOT NULL,
  payment_method         text NOT NULL,
  reference              text NOT NULL,
  description            text,
  -- The key of the POST /v1/charges that created it; UNIQUE backs up the idempotency
  -- claim so that no code path can ever commit two charges under one key.
  idempotency_key        text NOT NULL UNIQUE,
  failure_code           text,
  failure_message        text,
  created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- Money can never be invented: capture within the authorization, refunds within the capture.
  CHECK (amount_captured_minor <= amount_minor),
  CHECK (amount_refunded_minor <= amount_captured_minor)
);

-- Tests count the charges made per payment through this index (reference = payment id).
CREATE INDEX charges_reference_idx ON sandbox.charges (reference, created_at);

CREATE TABLE sandbox.refunds (
  id               text PRIMARY KEY,
  charge_id        text NOT NULL REFERENCES sandbox.charges (id),
  amount_minor     bigint NOT NULL CHECK (amount_minor > 0),
  status           text NOT NULL CHECK (status IN ('succeeded', 'failed')),
  reference        text NOT NULL,
  idempotency_key  text NOT NULL UNIQUE,
  failure_code     text,
  failure_message  text,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX refunds_charge_idx ON sandbox.refunds (charge_id, created_at);

-- One row per (endpoint, Idempotency-Key). The row is inserted first in the transaction
-- that performs the effect, so its primary key is the lock: a concurrent request with the
-- same key blocks on it until the first commits, then replays the stored response.
CREATE TABLE sandbox.idempotency_keys (
  endpoint          text NOT NULL,
  idempotency_key   text NOT NULL,
  -- SHA-256 of the canonical JSON of the request parameters (path id included).
  fingerprint       text NOT NULL,
  -- Written in the same transaction as the claim, so never committed as NULL.
  response_status   integer,
  response_body     text,
  -- pm_card_timeout_after_charge: the effect committed but the response is "never sent",
  -- on the first attempt or on any replay.
  response_lost     boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (endpoint, idempotency_key)
);

-- pm_card_flaky: failed attempts per key survive a sandbox restart, like a real outage would.
CREATE TABLE sandbox.flaky_attempts (
  idempotency_key  text PRIMARY KEY,
  attempts         integer NOT NULL
);
