-- @retrysafe/guard on MySQL 8 / MariaDB 10.5+: the claim, outbox and inbox tables.
-- Keys are VARBINARY: compared byte for byte (the default collations are case- and
-- trailing-space-insensitive, which would make different keys collide). 512 bytes is the
-- guard's key limit.
-- fingerprint: SHA-256 (hex) of the payload, stored only by run(key, fn, { payload }).
-- Upgrading a 0.1 table: ALTER TABLE processed_events ADD COLUMN fingerprint CHAR(64) NULL;
CREATE TABLE IF NOT EXISTS processed_events (
  `key`        VARBINARY(512) NOT NULL PRIMARY KEY,
  processed_at TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  fingerprint  CHAR(64) CHARACTER SET ascii NULL
) ENGINE = InnoDB;
