DROP TABLE IF EXISTS users, processed_webhooks, processed_events;
CREATE TABLE users (
  id text PRIMARY KEY,
  email text NOT NULL,
  first_name text,
  created_at timestamp NOT NULL DEFAULT now()
);
CREATE TABLE processed_webhooks (id serial PRIMARY KEY, svix_id text NOT NULL, type text NOT NULL, processed_at timestamp NOT NULL DEFAULT now());
-- @retrysafe/guard's claim table (sql/processed_events.sql).
CREATE TABLE processed_events (key text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
