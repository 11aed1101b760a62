-- The reconciler reads "payments updated since its last pass, oldest first, 200 at a time"
-- every 15 s. Without this index that is a scan and sort of the whole payments table, a
-- cost that grows with history (npm run bench: 10x and 100x history); with it, a short
-- range scan at the right end of the index.
CREATE INDEX payments_by_updated_at ON payments (updated_at);
