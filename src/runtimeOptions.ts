// The JavaScriptCore options the process runs with, set before anything else runs: the first
// module main.ts imports. They can only be given in the environment at start, so a process
// started without them replaces itself (execve: the same process id, file descriptors and
// arguments) with one that has them, before loading the rest of the program.
import { readFileSync } from "node:fs";

// maximumOMGCandidateCost=50000: QuickJS (the code services' engine) is WebAssembly built with
// asyncify, and JavaScriptCore's optimizing WebAssembly tier (OMG) makes its largest functions (the
// interpreter loop, grown by asyncify) 20-80 times slower than its baseline tier does: a JSON-heavy
// service body took 2,200 ms against 24 ms. Leaving functions that large to the baseline tier while
// the rest is optimized gives the best of both (OMG off entirely: 29 ms, and a warm trivial run 20
// µs against 13). Only WebAssembly uses that tier: the server's own JavaScript is optimized as
// before. docs/architecture.md has the measurements.
//
// WebAssembly memories: JavaScriptCore gives each a fast memory (a reservation of about 4 GB of
// address space, whose guard pages replace bounds checks), a few at most by default. Past them,
// every new memory costs a synchronous full garbage collection (to free a reservation) and a
// compilation of the module for bounds-checked memory: each sandbox (a lane, see code/sandbox.ts)
// past the 8th took 1-2 s to open, and a blocking service at 16 concurrent runs made 33 runs/s
// instead of 1,500. Where the address space is large (47 bits and more: x64, most arm64 kernels),
// 8,192 fast memories (about 33 TB of reservations, no resident memory) stand far above what the
// code memory budget lets run at once; on a small address space (39-bit arm64 kernels, such as
// Raspberry Pi's) every memory is bounds-checked instead: a little slower, never stalled.
export const RUNTIME_ENV: Record<string, string> = { BUN_JSC_maximumOMGCandidateCost: "50000", ...wasmMemoryOptions() };

function wasmMemoryOptions(): Record<string, string> {
  try {
    // the top of the main thread's stack shows how much address space the process has
    const stack = /^[0-9a-f]+-([0-9a-f]+) .*\[stack\]$/m.exec(readFileSync("/proc/self/maps", "utf8"));
    if (stack && BigInt(`0x${stack[1]}`) >= 1n << 46n) return { BUN_JSC_maxNumWasmFastMemories: "8192" };
  } catch { /* no /proc: the safe choice below */ }
  return { BUN_JSC_useWasmFastMemory: "false" };
}

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
