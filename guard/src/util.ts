const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** Quote a table name, optionally schema-qualified ("schema.table"). Throws on anything else. */
export function quoteTable(name: string): string {
  if (typeof name !== "string" || name.length === 0) throw new Error("@retrysafe/guard: table name must be a non-empty string");
  const parts = name.split(".");
  if (parts.length > 2 || !parts.every((p) => IDENT.test(p))) {
    throw new Error(`@retrysafe/guard: invalid table name ${JSON.stringify(name)} (use letters, digits, _ and an optional schema prefix)`);
  }
  return parts.map((p) => `"${p}"`).join(".");
}

export function checkKey(key: unknown): string {
  if (typeof key !== "string" || key.length === 0 || key === "undefined" || key === "null") {
    throw new Error(`@retrysafe/guard: run() needs a non-empty string key, got ${JSON.stringify(key)}`);
  }
  return key;
}

/** A unique violation from pg (23505), Prisma (P2002) or Drizzle (wrapped in .cause). */
export function isUniqueViolation(err: unknown): boolean {
  let e: any = err;
  for (let i = 0; i < 4 && e; i++) {
    if (e.code === "23505" || e.code === "P2002") return true;
    if (e.meta && (e.meta.code === "23505" || e.meta?.driverAdapterError?.cause?.originalCode === "23505")) return true;
    e = e.cause;
  }
  return false;
}

/** Thrown inside a transaction to roll it back when the claim already exists. */
export class DuplicateClaim extends Error {
  constructor() {
    super("@retrysafe/guard: duplicate claim (internal; rolled back)");
    this.name = "DuplicateClaim";
  }
}

let sqlTag: Promise<any> | undefined;
/** Drizzle's `sql` tag from the user's drizzle-orm (an optional peer dependency), loaded on first use. */
export function loadDrizzleSql(): Promise<any> {
  sqlTag ??= import("drizzle-orm").then((m: any) => m.sql ?? m.default?.sql);
  return sqlTag;
}
