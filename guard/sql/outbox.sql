-- @retrysafe/guard: the transactional outbox table for createOutbox().
-- States: pending -> leased -> completed | terminal_failure | manual_review.
-- Upgrading from 0.1: ALTER TABLE retrysafe_outbox DROP CONSTRAINT retrysafe_outbox_state_check,
--   ADD CONSTRAINT retrysafe_outbox_state_check CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure', 'manual_review'));
CREATE TABLE IF NOT EXISTS retrysafe_outbox (
  id           bigserial   PRIMARY KEY,
  kind         text        NOT NULL,
  key          text        NOT NULL UNIQUE,           -- stable idempotency key, e.g. receipt:evt_123
  payload      jsonb,
  state        text        NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure', 'manual_review')),
  attempts     integer     NOT NULL DEFAULT 0,
  available_at timestamptz NOT NULL DEFAULT now(),    -- next attempt not before (backoff, Retry-After)
  lease_until  timestamptz,                           -- a leased row is taken over after this
  lease_token  text,                                  -- fences a dispatcher whose lease expired
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS retrysafe_outbox_due_idx
  ON retrysafe_outbox (available_at, id) WHERE state IN ('pending', 'leased');
