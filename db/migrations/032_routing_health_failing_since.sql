-- Each PSP's shared health (db/routing.ts routing_health): since when its charge attempts have met
-- only errors (no answer between, no idle gap past the window). A PSP failing that long is put out
-- of first place at its next error even when it has had too few calls for the error rate to judge,
-- so a failing PSP with little traffic is out within HEALTH_DEFAULTS.failingMs plus the time to its
-- next payment. Null: its last outcome was an answer, or it is out (the probe judges it then).
ALTER TABLE routing_health ADD COLUMN failing_since timestamptz;
