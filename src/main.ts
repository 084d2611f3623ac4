// The binary's entry: the runtime options first (src/runtimeOptions.ts: a process started
// without them replaces itself with one that has them), then the command line. The command line
// is loaded with import(), a chunk of its own in the binary: the process that only replaces
// itself never reads or compiles the rest of the program (about 12 ms of a cold start).
import "./runtimeOptions.ts";

await import("./cli/main.ts");
