-- Disputes (chargebacks and inquiries), as a card network raises them against a captured
-- charge. Every timer of a dispute is a column scanned by the sandbox's dispute loop
-- (sandbox/disputes.ts), so a restart of the sandbox keeps them: the dispute a charge is
-- due to receive (charges.dispute_at), the decision on submitted evidence (decide_at) and the
-- evidence deadline (evidence_due_by).
ALTER TABLE sandbox.charges
  -- pm_card_createDispute*: when the network opens its dispute (SANDBOX_DISPUTE_AFTER_MS after
  -- the capture); cleared when it is opened.
  ADD COLUMN dispute_at timestamptz;
CREATE INDEX charges_dispute_idx ON sandbox.charges (dispute_at) WHERE dispute_at IS NOT NULL;

CREATE TABLE sandbox.disputes (
  seq                    bigserial PRIMARY KEY,
  id                     text NOT NULL UNIQUE,
  charge_id              text NOT NULL REFERENCES sandbox.charges (id),
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
  currency               char(3) NOT NULL,
  reason                 text NOT NULL,
  -- 'inquiry': a question from the issuer, no money moved; 'chargeback': the funds are withdrawn.
  stage                  text NOT NULL CHECK (stage IN ('inquiry', 'chargeback')),
  status                 text NOT NULL CHECK (status IN ('needs_response', 'under_review', 'won', 'lost')),
  evidence               jsonb NOT NULL DEFAULT '{}',
  evidence_due_by        timestamptz NOT NULL,
  evidence_submitted_at  timestamptz,
  -- The network decides on submitted evidence at this time (SANDBOX_DISPUTE_DECISION_MS after it).
  decide_at              timestamptz,
  created_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at             timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- One dispute per charge, as a card network allows one open dispute per transaction.
CREATE UNIQUE INDEX disputes_charge_idx ON sandbox.disputes (charge_id);
CREATE INDEX disputes_due_idx ON sandbox.disputes (evidence_due_by) WHERE status = 'needs_response';
CREATE INDEX disputes_decide_idx ON sandbox.disputes (decide_at) WHERE status = 'under_review';

-- A chargeback's withdrawal (negative, with the dispute fee) and a won chargeback's
-- reinstatement (positive, no fee) are lines of the report too; their source is the dispute.
ALTER TABLE sandbox.balance_transactions DROP CONSTRAINT balance_transactions_type_check;
ALTER TABLE sandbox.balance_transactions ADD CONSTRAINT balance_transactions_type_check
  CHECK (type IN ('charge', 'refund', 'dispute', 'dispute_reversal'));
