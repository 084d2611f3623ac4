// The JavaScriptCore options the process runs with, set before anything else runs: the first
// module main.ts imports. They can only be given in the environment at start, so a process
// started without them replaces itself (execve: the same process id, file descriptors and
// arguments) with one that has them, before loading the rest of the program.
//
// maximumOMGCandidateCost=50000: QuickJS (the code services' engine) is WebAssembly built with
// asyncify, and JavaScriptCore's optimizing WebAssembly tier (OMG) makes its largest functions (the
// interpreter loop, grown by asyncify) 20-80 times slower than its baseline tier does: a JSON-heavy
// service body took 2,200 ms against 24 ms. Leaving functions that large to the baseline tier while
// the rest is optimized gives the best of both (OMG off entirely: 29 ms, and a warm trivial run 20
// µs against 13). Only WebAssembly uses that tier: the server's own JavaScript is optimized as
// before. docs/architecture.md has the measurements.
export const RUNTIME_ENV: Record<string, string> = { BUN_JSC_maximumOMGCandidateCost: "50000" };

const missing = Object.entries(RUNTIME_ENV).filter(([k, v]) => process.env[k] !== v);
if (missing.length && typeof process.execve === "function" && process.env.OUTPOST_NO_REEXEC !== "1") {
  // a compiled binary's argv[1] is its embedded entry point, not an argument the system gave it
  const compiled = Bun.main.startsWith("/$bunfs/");
  const args = compiled ? process.argv.slice(2) : process.argv.slice(1);
  // OUTPOST_NO_REEXEC: never twice, whatever the new process makes of its environment
  try {
    process.execve(process.execPath, [process.execPath, ...args], { ...process.env, ...RUNTIME_ENV, OUTPOST_NO_REEXEC: "1" });
  } catch (e) {
    // e.g. ENOEXEC under a user-mode emulator (qemu-user without binfmt): the options only make
    // code services faster, so go on without them
    process.stderr.write(`outpost: running without ${missing.map(([k]) => k).join(", ")} (restart refused: ${(e as Error).message}); code services run slower\n`);
  }
}
