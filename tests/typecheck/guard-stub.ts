// The guard contract the fixes call (docs/rules.md, "What a fix may do"), as `@retrysafe/guard` types it.
type GuardResult<T> = { status: "processed"; result: T } | { status: "duplicate" } | { status: "in-progress" };
export interface Guard {
  run<T>(key: string, fn: (tx: any) => Promise<T>): Promise<GuardResult<T>>;
}
export declare const guard: Guard;
export default guard;
