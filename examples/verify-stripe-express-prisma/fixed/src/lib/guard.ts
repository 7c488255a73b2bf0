import { prismaGuard } from "@retrysafe/guard";
import { prisma } from "../clients.ts";

// The claim commits in one transaction with the writes made through `tx`.
export const guard = prismaGuard(prisma);
