-- Several PSPs and failover (docs/CONTRACT.md §3.7, §3.8).
-- payments.provider: the configured name of the PSP that holds the payment's charge (captures,
-- voids, refunds and reconciliation go there). NULL: none recorded; such a payment is at the
-- default provider (the first of PROVIDERS).
ALTER TABLE payments ADD COLUMN provider text;

-- One row per attempt to charge a payment at a PSP, in order. Attempt n charges under the
-- sub-key "<payment>:charge" (n = 1) or "<payment>:charge:<n>" (shared/keys.ts).
-- outcome: pending while the attempt's answer is awaited (its outcome may be unknown: the
-- payment then keeps asking that PSP), else the charge's status, or why nothing was charged
-- there and the payment moved on (domain/attempts.ts attemptOutcomes).
CREATE TABLE payment_attempts (
  payment_id          text NOT NULL REFERENCES payments (id),
  attempt             integer NOT NULL CHECK (attempt >= 1),
  provider            text NOT NULL,
  provider_charge_id  text,
  outcome             text NOT NULL CHECK (outcome IN
                        ('pending', 'succeeded', 'requires_capture', 'requires_action', 'processing',
                         'declined', 'canceled', 'rejected', 'not_sent', 'not_charged')),
  error_code          text,
  started_at          timestamptz NOT NULL,
  finished_at         timestamptz,
  PRIMARY KEY (payment_id, attempt),
  CHECK ((outcome = 'pending') = (finished_at IS NULL))
);
-- The reconciler and the webhook route find a payment by its charge at one provider.
CREATE INDEX payment_attempts_by_charge ON payment_attempts (provider, provider_charge_id) WHERE provider_charge_id IS NOT NULL;
