import { pgTable, serial, text, timestamp } from "drizzle-orm/pg-core";

export const users = pgTable("users", {
  id: text("id").primaryKey(), // Clerk user id
  email: text("email").notNull(),
  firstName: text("first_name"),
  createdAt: timestamp("created_at").defaultNow().notNull(),
});

// Svix message ids we've handled, so Clerk's retries are ignored.
export const processedWebhooks = pgTable("processed_webhooks", {
  id: serial("id").primaryKey(),
  svixId: text("svix_id").notNull().unique(),
  type: text("type").notNull(),
  processedAt: timestamp("processed_at").defaultNow().notNull(),
});
