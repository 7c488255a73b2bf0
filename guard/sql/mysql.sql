-- @retrysafe/guard on MySQL 8 / MariaDB: the claim table (10.5+), the inbox and the outbox (10.6+ / MySQL 8.0.1+: SKIP LOCKED).
-- Keys are VARBINARY: compared byte for byte (the default collations are case- and
-- trailing-space-insensitive, which would make different keys collide). 512 bytes is the
-- guard's key limit.
-- fingerprint: SHA-256 (hex) of the payload, stored only by run(key, fn, { payload }).
-- Upgrading a 0.1 table: ALTER TABLE processed_events ADD COLUMN fingerprint CHAR(64) CHARACTER SET ascii NULL
CREATE TABLE IF NOT EXISTS processed_events (
  `key`        VARBINARY(512) NOT NULL PRIMARY KEY,
  processed_at TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  fingerprint  CHAR(64) CHARACTER SET ascii NULL
) ENGINE = InnoDB;

-- The inbox and outbox tables are utf8mb4 whatever the server's default (MariaDB's is latin1,
-- which refuses many kinds and error messages), and utf8mb4_bin compares kinds exactly.
-- The durable inbox for createInbox() (MySQL 8 / MariaDB 10.6+: SKIP LOCKED).
-- States: pending -> leased -> completed | terminal_failure.
CREATE TABLE IF NOT EXISTS retrysafe_inbox (
  `key`        VARBINARY(512) NOT NULL PRIMARY KEY,       -- the provider event key, e.g. stripe:evt_123
  kind         VARCHAR(191) NULL,                         -- optional routing label
  payload      JSON NULL,
  fingerprint  CHAR(64) CHARACTER SET ascii NULL,         -- sha256 of the payload: same key + other payload = mismatch
  state        VARCHAR(16) NOT NULL DEFAULT 'pending',
  attempts     INT NOT NULL DEFAULT 0,
  available_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), -- next attempt not before (backoff)
  lease_until  TIMESTAMP(6) NULL,                         -- a leased event is claimed again after this
  lease_token  VARCHAR(64) CHARACTER SET ascii NULL,      -- fences a worker whose lease expired
  last_error   TEXT NULL,
  received_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  completed_at TIMESTAMP(6) NULL,
  CONSTRAINT retrysafe_inbox_state_check CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure')),
  KEY retrysafe_inbox_due_idx (state, available_at, received_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The transactional outbox for createOutbox().
-- States: pending -> leased -> completed | terminal_failure | manual_review.
CREATE TABLE IF NOT EXISTS retrysafe_outbox (
  id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  kind         VARCHAR(191) NOT NULL,
  `key`        VARBINARY(512) NOT NULL,                   -- stable idempotency key, e.g. receipt:evt_123
  payload      JSON NULL,
  state        VARCHAR(16) NOT NULL DEFAULT 'pending',
  attempts     INT NOT NULL DEFAULT 0,
  available_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), -- next attempt not before (backoff, Retry-After)
  lease_until  TIMESTAMP(6) NULL,                         -- a leased row is taken over after this
  lease_token  VARCHAR(64) CHARACTER SET ascii NULL,      -- fences a dispatcher whose lease expired
  last_error   TEXT NULL,
  created_at   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  completed_at TIMESTAMP(6) NULL,
  CONSTRAINT retrysafe_outbox_state_check CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure', 'manual_review')),
  UNIQUE KEY retrysafe_outbox_key (`key`),
  KEY retrysafe_outbox_due_idx (state, available_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
