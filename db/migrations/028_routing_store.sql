-- Success-rate routing's shared state, seen alike by every worker and API process
-- (db/routing.ts, domain/routing-success-rate.ts, docs/routing-and-waits.md).

-- The issuers' answers per (scope, PSP, segment level), recency-weighted as
-- domain/routing-success-rate.ts withOutcome models them: a long memory (approvals,
-- declines) and a short one (recent_*), each faded by its decay on every new outcome, so a
-- row's counts stay bounded. One row per key; the keys are bounded: scope is '' (pooled across
-- tenants) or a tenant whose routing.scope is "tenant", segment one of a bounded set of levels
-- ('visa:EUR:card', 'visa:*:card', '*:*:card', '*:*:*'). The *_total columns count outcomes
-- plainly for /metrics; fell_at is when the fall detector last reset the long memory.
CREATE TABLE routing_outcomes (
  scope text NOT NULL,
  provider text NOT NULL,
  segment text NOT NULL CHECK (segment ~ '^[^:]+:[^:]+:[^:]+$'),
  approvals double precision NOT NULL CHECK (approvals >= 0),
  declines double precision NOT NULL CHECK (declines >= 0),
  recent_approvals double precision NOT NULL CHECK (recent_approvals >= 0),
  recent_declines double precision NOT NULL CHECK (recent_declines >= 0),
  approvals_total bigint NOT NULL DEFAULT 0,
  declines_total bigint NOT NULL DEFAULT 0,
  errors_total bigint NOT NULL DEFAULT 0,
  fell_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, provider, segment)
);

-- Whether the short memory's rate lies falling_z standard errors below the long memory's
-- estimate: domain/routing-success-rate.ts hasFallen, the same arithmetic (test/integration/
-- routing-store.test.ts holds the two equal over random outcomes).
CREATE FUNCTION routing_fallen(a double precision, d double precision, ra double precision, rd double precision,
                               prior_a double precision, prior_d double precision, min_outcomes double precision, falling_z double precision)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN ra + rd < min_outcomes / 2 THEN false
    ELSE coalesce(
      (ra / (ra + rd) - (prior_a + a) / (prior_a + prior_d + a + d))
        / nullif(sqrt(((prior_a + a) / (prior_a + prior_d + a + d)) * (1 - (prior_a + a) / (prior_a + prior_d + a + d)) / (ra + rd)), 0)
        < -falling_z,
      false)
  END
$$;

-- Each PSP's health, shared by every worker (the breaker the decision reads): its first
-- attempts and the PSP's own errors among them, recency-weighted per call and forgotten after
-- an idle window. Too many errors put it out of first place until eliminated_until; then one
-- payment at a time probes it (probe_until: the probe's outcome is awaited until then).
CREATE TABLE routing_health (
  provider text PRIMARY KEY,
  calls double precision NOT NULL CHECK (calls >= 0),
  errors double precision NOT NULL CHECK (errors >= 0),
  eliminated_until timestamptz,
  eliminated_reason text,
  probe_until timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A token bucket per PSP held across the fleet (db/routing.ts takeCall): tokens refill at the
-- PSP's calls per second up to its burst; a call takes one. taken: whether the last request got one.
CREATE TABLE provider_call_tokens (
  provider text PRIMARY KEY,
  tokens double precision NOT NULL,
  refilled_at timestamptz NOT NULL,
  taken boolean NOT NULL
);
