-- @retrysafe/guard: the claim table for prismaGuard / postgresGuard / drizzleGuard.
-- The primary key is what makes the claim atomic: keep it.
-- (Pass { table: "..." } to a guard to use another name with the same columns.)
CREATE TABLE IF NOT EXISTS processed_events (
  key          text        PRIMARY KEY,
  processed_at timestamptz NOT NULL DEFAULT now()
);
