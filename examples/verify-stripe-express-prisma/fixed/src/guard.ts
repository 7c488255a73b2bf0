import { prismaGuard } from "@retrysafe/guard";
import { prisma } from "./clients.ts";

// Claims the event key and runs the handler's writes in the same transaction.
export const guard = prismaGuard(prisma);
