-- A dispute's third stage (domain/disputes.ts): 'pre_arbitration', the card network's second
-- round after a chargeback was defended (Adyen's SECOND_CHARGEBACK, PREARBITRATION_WON and
-- PREARBITRATION_LOST). A chargeback closed won moves on to it; its money is withdrawn again.
ALTER TABLE disputes DROP CONSTRAINT disputes_stage_check;
ALTER TABLE disputes ADD CONSTRAINT disputes_stage_check CHECK (stage IN ('inquiry', 'chargeback', 'pre_arbitration'));
