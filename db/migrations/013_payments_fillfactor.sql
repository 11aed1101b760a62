-- Room on each heap page for a payment's next row version: the first charge attempt points
-- payments.provider at its PSP without touching an indexed column (db/attempts.ts
-- beginFirstAttempt), an update PostgreSQL can then keep on the same page (HOT) without
-- writing any of the table's indexes. Applies to pages written from now on.
ALTER TABLE payments SET (fillfactor = 85);
