// Files embedded in the binary with `import path from "..." with { type: "file" }`.
declare module "@jitl/quickjs-wasmfile-release-asyncify/wasm" {
  const path: string;
  export default path;
}
declare module "@jitl/quickjs-wasmfile-release-sync/wasm" {
  const path: string;
  export default path;
}
