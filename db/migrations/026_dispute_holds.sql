-- A dispute held for an operator (docs/CONTRACT.md §3.6.1, 12): the PSP's word on it disagrees
-- with the payment (another currency, a disputed total past what was captured) or with the
-- dispute as recorded (another charge, amount or currency). It is recorded and shown, and
-- nothing of it is posted or sent until an operator releases it (released_at).
ALTER TABLE disputes ADD COLUMN held_reason text, ADD COLUMN released_at timestamptz;
