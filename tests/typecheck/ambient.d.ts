// Ambient declarations for the SDK and framework modules the fixtures import: every package
// import is `any`, so the compiler checks what codemods can break (names in scope, syntax,
// async/await, the guard's call shape) without the packages installed.
declare module "*";
