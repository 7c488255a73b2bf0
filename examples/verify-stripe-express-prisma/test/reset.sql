TRUNCATE orders, seen_events, processed_events;
