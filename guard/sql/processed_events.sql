-- @retrysafe/guard: the claim table for prismaGuard / postgresGuard / drizzleGuard.
-- The primary key is what makes the claim atomic: keep it.
-- (Pass { table: "..." } to a guard to use another name with the same columns.)
-- fingerprint: SHA-256 of the payload, stored only by run(key, fn, { payload }); a 0.1
-- table without it keeps working for run(key, fn). Upgrading a 0.1 table:
--   ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS fingerprint text;
CREATE TABLE IF NOT EXISTS processed_events (
  key          text        PRIMARY KEY,
  processed_at timestamptz NOT NULL DEFAULT now(),
  fingerprint  text
);
