-- Disputes (chargebacks and inquiries) the PSPs raised against our payments, each recorded by
-- its dispute workflow (workflows/dispute.ts). One row per (provider, PSP dispute id); its
-- status only moves forward (domain/disputes.ts disputeProgress, checked by the step that writes it).
CREATE TABLE disputes (
  id                     text PRIMARY KEY,
  tenant_id              text NOT NULL REFERENCES tenants (id),
  payment_id             text NOT NULL REFERENCES payments (id),
  provider               text NOT NULL,
  provider_dispute_id    text NOT NULL,
  provider_charge_id     text NOT NULL,
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
  currency               char(3) NOT NULL,
  reason                 text NOT NULL,
  stage                  text NOT NULL CHECK (stage IN ('inquiry', 'chargeback')),
  status                 text NOT NULL CHECK (status IN ('needs_response', 'under_review', 'won', 'lost')),
  -- The dispute fee the PSP withdrew with the amount (0 for an inquiry).
  fee_minor              bigint NOT NULL DEFAULT 0 CHECK (fee_minor >= 0),
  evidence               jsonb NOT NULL DEFAULT '{}',
  evidence_due_by        timestamptz NOT NULL,
  evidence_submitted_at  timestamptz,
  workflow_id            text NOT NULL,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  UNIQUE (provider, provider_dispute_id)
);
CREATE INDEX disputes_by_tenant ON disputes (tenant_id, id DESC);
CREATE INDEX disputes_by_payment ON disputes (payment_id);

-- A chargeback's amount, while the network decides, is a claim on the network (dispute_claim,
-- an asset) matched by what we would owe the merchant if it is won (dispute_reserve, a
-- liability): the withdrawal opens the pair, the win or the loss closes it.
ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_code_check;
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_code_check
  CHECK (code IN ('provider_receivable', 'merchant_balance', 'dispute_claim', 'dispute_reserve'));

ALTER TABLE ledger_transactions ADD COLUMN dispute_id text REFERENCES disputes (id);
