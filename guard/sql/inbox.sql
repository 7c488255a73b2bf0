-- @retrysafe/guard: the durable inbox for createInbox().
-- States: pending -> leased -> completed | terminal_failure.
CREATE TABLE IF NOT EXISTS retrysafe_inbox (
  key          text        PRIMARY KEY,               -- the provider event key, e.g. stripe:evt_123
  kind         text,                                  -- optional routing label
  payload      jsonb,
  fingerprint  text,                                  -- sha256 of the payload: same key + other payload = mismatch
  state        text        NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure')),
  attempts     integer     NOT NULL DEFAULT 0,
  available_at timestamptz NOT NULL DEFAULT now(),    -- next attempt not before (backoff)
  lease_until  timestamptz,                           -- a leased event is claimed again after this
  lease_token  text,                                  -- fences a worker whose lease expired
  last_error   text,
  received_at  timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS retrysafe_inbox_due_idx
  ON retrysafe_inbox (available_at, received_at) WHERE state IN ('pending', 'leased');
