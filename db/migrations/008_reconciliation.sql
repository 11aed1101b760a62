-- Reconciliation with the PSP (activities/reconciliation.ts, docs/CONTRACT.md "Reconciliation").
-- A run is one provider's reconciliation of one time window by one workflow run; a
-- discrepancy is one difference, keyed by (provider, window, kind, subject), so running a
-- window again finds the same rows instead of making copies; a finding says which runs saw it.

CREATE TABLE reconciliation_runs (
  id                     text PRIMARY KEY,
  -- "<workflow id>/<run id>/<provider>": a retried activity continues its own row.
  run_key                text NOT NULL UNIQUE,
  workflow_id            text NOT NULL,
  provider               text NOT NULL,
  window_from            timestamptz NOT NULL,
  window_to              timestamptz NOT NULL,
  status                 text NOT NULL CHECK (status IN ('running', 'clean', 'discrepancies', 'failed')),
  started_at             timestamptz NOT NULL DEFAULT now(),
  finished_at            timestamptz,
  discrepancy_count      integer NOT NULL DEFAULT 0,
  -- The PSP's balance transactions read (the window and its margin on both sides).
  provider_transactions  integer NOT NULL DEFAULT 0,
  -- Why a failed run failed (the last attempt's error).
  error                  text,
  CHECK (window_from < window_to),
  CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX reconciliation_runs_by_window ON reconciliation_runs (provider, window_from, window_to);

CREATE TABLE reconciliation_discrepancies (
  id                  text PRIMARY KEY,
  provider            text NOT NULL,
  window_from         timestamptz NOT NULL,
  window_to           timestamptz NOT NULL,
  kind                text NOT NULL CHECK (kind IN
                        ('missing_at_provider', 'unknown_at_provider_side', 'amount_mismatch',
                         'currency_mismatch', 'status_mismatch', 'duplicate_charge')),
  -- What it is about: our payment or refund id, or the PSP's object id when we have none.
  subject             text NOT NULL,
  payment_id          text,
  refund_id           text,
  provider_reference  text,
  first_run_id        text NOT NULL REFERENCES reconciliation_runs (id),
  created_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (provider, window_from, window_to, kind, subject)
);
-- "Seen before in any window?": an overlapping window (hourly and daily runs) alerts once.
CREATE INDEX reconciliation_discrepancies_by_subject ON reconciliation_discrepancies (provider, kind, subject);

CREATE TABLE reconciliation_findings (
  run_id            text NOT NULL REFERENCES reconciliation_runs (id),
  discrepancy_id    text NOT NULL REFERENCES reconciliation_discrepancies (id),
  -- Both sides' figures as this run saw them (null: that side has no such object).
  ours              jsonb,
  provider_figures  jsonb,
  PRIMARY KEY (run_id, discrepancy_id)
);

-- Captures and refunds booked in a window (our side of the comparison).
CREATE INDEX ledger_transactions_by_time ON ledger_transactions (created_at);
