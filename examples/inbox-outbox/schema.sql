-- The app's own table plus the guard's inbox and outbox (copied from
-- node_modules/@retrysafe/guard/sql/inbox.sql and outbox.sql).
CREATE TABLE IF NOT EXISTS accounts (
  id         text PRIMARY KEY,
  plan       text NOT NULL DEFAULT 'free',
  updated_by text                          -- the event that last changed the plan
);
\i node_modules/@retrysafe/guard/sql/inbox.sql
\i node_modules/@retrysafe/guard/sql/outbox.sql
