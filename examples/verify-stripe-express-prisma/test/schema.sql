DROP TABLE IF EXISTS orders, seen_events, processed_events;
CREATE TABLE orders (
  id text PRIMARY KEY,
  stripe_session_id text NOT NULL,
  amount_total integer NOT NULL,
  email text NOT NULL,
  created_at timestamp(3) NOT NULL DEFAULT now()
);
CREATE TABLE seen_events (id serial PRIMARY KEY, event_id text NOT NULL);
-- @retrysafe/guard's claim table (sql/processed_events.sql).
CREATE TABLE processed_events (key text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
