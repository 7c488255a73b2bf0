import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  // examples/inbox-outbox is tested from here: its imports resolve to this package's source and dependencies
  resolve: { alias: { "@retrysafe/guard": here("./src/index.ts"), pg: here("./node_modules/pg/lib/index.js") } },
  test: {
    include: ["test/**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default", "./test/summary-reporter.ts"],
  },
});
