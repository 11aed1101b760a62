-- The routing segment of the payment a charge attempt is for (its card network, currency and
-- payment method type, as success-rate routing keys it: `visa:EUR:card`; domain/routing-segment.ts),
-- so the console's PSPs page can show each PSP's figures over time per segment. Written with
-- attempt 1 (activities/routing.ts) and copied to the payment's later attempts; null for the
-- attempts recorded before this column. Not indexed: the page reads attempts by their start
-- (payment_attempts_by_start) and filters the segment among them.
ALTER TABLE payment_attempts ADD COLUMN segment text;
