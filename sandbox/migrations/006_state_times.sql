-- When each charge changed state, by the PSP's own clock, as real PSPs report it: the moment
-- the money was taken (succeeded_at), the card authorized (authorized_at; an automatic capture
-- is authorized when it succeeds), the charge declined (failed_at) or voided (canceled_at).
-- A merchant decides a waiting payment's window by these, not by when a webhook arrived.
-- Stamped by one trigger on every insert and status change, whichever route makes it.
ALTER TABLE sandbox.charges
  ADD COLUMN succeeded_at timestamptz,
  ADD COLUMN authorized_at timestamptz,
  ADD COLUMN failed_at timestamptz,
  ADD COLUMN canceled_at timestamptz;

CREATE FUNCTION sandbox.stamp_charge_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.status IS NOT DISTINCT FROM OLD.status THEN
    RETURN NEW;
  END IF;
  IF NEW.status = 'succeeded' THEN
    NEW.succeeded_at := coalesce(NEW.succeeded_at, clock_timestamp());
    NEW.authorized_at := coalesce(NEW.authorized_at, NEW.succeeded_at);
  ELSIF NEW.status = 'requires_capture' THEN
    NEW.authorized_at := coalesce(NEW.authorized_at, clock_timestamp());
  ELSIF NEW.status = 'declined' THEN
    NEW.failed_at := coalesce(NEW.failed_at, clock_timestamp());
  ELSIF NEW.status = 'canceled' THEN
    NEW.canceled_at := coalesce(NEW.canceled_at, clock_timestamp());
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER charges_state_times BEFORE INSERT OR UPDATE OF status ON sandbox.charges
  FOR EACH ROW EXECUTE FUNCTION sandbox.stamp_charge_state();
