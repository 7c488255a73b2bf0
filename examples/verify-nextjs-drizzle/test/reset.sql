TRUNCATE users, processed_webhooks, processed_events;
