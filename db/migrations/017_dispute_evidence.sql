-- A dispute's evidence requests (POST /v1/disputes/{id}/evidence), kept out of its workflow's
-- history: the API stores each request's evidence here, under the dispute and the digest of its
-- canonical JSON, before the request reaches the run, and the update carries only the digest;
-- the step that sends it to the PSP reads it back (activities/dispute-steps.ts).
CREATE TABLE dispute_evidence (
  dispute_id  text NOT NULL REFERENCES disputes (id),
  digest      text NOT NULL,
  evidence    jsonb NOT NULL,
  bytes       integer NOT NULL CHECK (bytes >= 0),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (dispute_id, digest)
);

-- What one dispute has taken: its evidence requests accepted by the API and their bytes, counted
-- under the dispute row's lock with each request's claim; past DISPUTE_EVIDENCE_MAX_REQUESTS or
-- DISPUTE_EVIDENCE_MAX_BYTES a request is refused (409 dispute_evidence_limit) and changes nothing.
ALTER TABLE disputes
  ADD COLUMN evidence_requests integer NOT NULL DEFAULT 0 CHECK (evidence_requests >= 0),
  ADD COLUMN evidence_request_bytes bigint NOT NULL DEFAULT 0 CHECK (evidence_request_bytes >= 0);
