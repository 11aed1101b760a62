-- The details calls the return route (GET /return/{payment_id}, CONTRACT §3.5, 11) has let
-- through for a payment: counted here, before the return is handed to the payment's run, by one
-- statement that adds one only while the payment has calls left (db/payments.ts
-- takeChallengeReturnCall). The route needs no API key, so this bounds what anyone who knows a
-- payment's id can make its run and its PSP do.
CREATE TABLE challenge_return_calls (
  payment_id  text PRIMARY KEY REFERENCES payments (id),
  calls       integer NOT NULL CHECK (calls >= 1),
  last_at     timestamptz NOT NULL DEFAULT now()
);
