-- The operator console (docs/console.md): its operators, their sessions, failed sign-ins counted
-- across API processes, and the audit of what operators did; and the indexes its payment search
-- reads (every filter served by an index, test/integration/console-search-plans.test.ts).

-- An operator signs in to the console with an email and a password (scrypt, api/console/passwords.ts).
-- A viewer only reads; an operator may act (refund). With a tenant_id the operator sees that
-- tenant only. password_changed_at: sessions begun before it are over (a new password ends them).
CREATE TABLE operators (
  id                   text PRIMARY KEY,
  email                text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  role                 text NOT NULL CHECK (role IN ('viewer', 'operator')),
  tenant_id            text REFERENCES tenants (id),
  password_hash        text NOT NULL,
  password_changed_at  timestamptz NOT NULL DEFAULT now(),
  disabled_at          timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  UNIQUE (email)
);

-- A console session: the cookie carries a random token, only its SHA-256 is stored. Over after
-- 30 minutes without a request (last_seen_at), at expires_at (12 hours after it began), when
-- the operator signs out (ended_at), is disabled or is given a new password.
CREATE TABLE operator_sessions (
  token_hash    text PRIMARY KEY,
  operator_id   text NOT NULL REFERENCES operators (id),
  -- Every console form carries it; a POST without it is refused.
  csrf_token    text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  ended_at      timestamptz
);
CREATE INDEX operator_sessions_live_by_operator ON operator_sessions (operator_id) WHERE ended_at IS NULL;

-- One row per sign-in attempt not (yet) known to have succeeded, per subject: 'account:<email>'
-- and 'address:<client address>'. An attempt writes its rows before the password is checked
-- and removes them once it succeeded, so concurrent guesses count, in every API process.
CREATE TABLE operator_signin_failures (
  id         bigserial PRIMARY KEY,
  subject    text NOT NULL,
  failed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operator_signin_failures_by_subject ON operator_signin_failures (subject, failed_at);

-- Every operator action (who, what, when, on which object, under which idempotency key): an
-- action the console proposes is 'proposed' with the key the server minted for it; confirmed,
-- it is 'done' or 'failed' with the operation's answer. Operator management by the admin
-- token is recorded too (actor 'admin').
CREATE TABLE operator_audit (
  id               text PRIMARY KEY,
  actor            text NOT NULL,
  actor_email      text,
  action           text NOT NULL,
  object_type      text NOT NULL,
  object_id        text NOT NULL,
  tenant_id        text,
  idempotency_key  text UNIQUE,
  amount_minor     bigint CHECK (amount_minor > 0),
  currency         char(3),
  state            text NOT NULL CHECK (state IN ('proposed', 'done', 'failed')),
  outcome          jsonb,
  created_at       timestamptz NOT NULL DEFAULT now(),
  decided_at       timestamptz
);
CREATE INDEX operator_audit_by_object ON operator_audit (object_id, created_at DESC);

-- The console's payment search across tenants, newest first (ids sort by creation time, so a
-- date range is a range of ids): by order, customer and status. By tenant and by id the
-- existing indexes serve (payments_by_tenant, the primary key). order_id and customer_id never
-- change; a status change already writes every index (status is in the predicate of
-- payments_one_live_per_order), so these cost one index entry per insert or status change.
-- By PSP the search reads the attempts (a payment attempted there), not payments.provider: an
-- index on that column would make the first attempt's update of it, kept HOT on purpose
-- (migration 013), write every index of payments.
CREATE INDEX payments_console_by_order ON payments (order_id, id DESC);
CREATE INDEX payments_console_by_customer ON payments (customer_id, id DESC) WHERE customer_id IS NOT NULL;
CREATE INDEX payments_console_by_status ON payments (status, id DESC);
CREATE INDEX payment_attempts_by_provider ON payment_attempts (provider, payment_id);
CREATE INDEX customers_by_email ON customers (lower(email)) WHERE email IS NOT NULL;
