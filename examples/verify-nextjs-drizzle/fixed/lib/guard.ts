import { drizzleGuard } from "@retrysafe/guard";
import { db } from "@/db";

// Claims the Svix message id and runs the handler's writes in one transaction.
export const guard = drizzleGuard(db);
