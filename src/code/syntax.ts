// The compile check of a service's or a library's code, at upload (platform) and when a service
// arrives through sync (edge): the code is compiled, never run, by the engine that will run it.
//
// Why QuickJS and not JavaScriptCore's `new Function(code)`: the sandbox loads code as a global
// script of QuickJS (Sandbox.load), and the two parsers differ at the edges (QuickJS refuses
// `return` at the top level, JavaScriptCore accepts it in a function body; early errors such as a
// redeclared `let` are reported differently; top-level `await` fails in both but for other
// reasons). Compiling with QuickJS itself (evalCode with compileOnly) refuses what a run would
// refuse and nothing else, with QuickJS's own message, line and column
// (test/unit/code/syntax.test.ts compares it with the sandbox, snippet by snippet).
//
// Where: on a thread of its own (compileWorker.ts), not the event loop. The compile is
// synchronous, and QuickJS as WebAssembly on JavaScriptCore's baseline tier (the process runs
// without its optimizing tier, see docs/architecture.md) takes about 0.5 ms per KB with the plain
// build (twice that with asyncify's): a 10 KB service 5 ms, the largest upload (5 MB) about 2.5 s,
// which on the main thread would hold every request, MQTT client and edge link of the node
// meanwhile. The thread is made on first use and ended after a minute without checks; checks wait
// for one another there.
//
// Bounds: one lane (a module instance with its own heap, see sandbox.ts) under a service's own
// memory limit (--code-memory-limit-mb); a lane whose heap grew past LANE_KEEP_BYTES is dropped
// after its check. Code nested so deeply that the thread's own stack runs out (a RangeError thrown
// through the wasm, which leaves the lane's stack pointer behind) is refused, as a code worker would
// fail to load it too, and the lane is made again. How deep that is (about a thousand levels)
// moves with the wasm's tier and build: code nested near it may pass here and still fail to load
// in a sandbox (its run then fails saying so).
import type { QuickJSAsyncContext } from "quickjs-emscripten";
import type { CompileCheck, CompileProblem } from "../domain/services.ts";
import { newLane } from "./sandbox.ts";

/** A lane whose heap grew past this after a check is not kept. */
const LANE_KEEP_BYTES = 48 << 20;
/** QuickJS's stack limit, as in the sandboxes. */
const STACK_BYTES = 256 * 1024;
/** The check thread ends after this long without checks (its lane's memory goes with it). */
const IDLE_MS = 60_000;

/** The worker's code: next to this file when run from source; in the binary, an entry of its own
 *  under the bundle's root, src/ (scripts/build.ts). */
const WORKER_URL = import.meta.url.startsWith("file:///$bunfs/") ? "/$bunfs/root/code/compileWorker.ts" : new URL("./compileWorker.ts", import.meta.url).href;

interface Lane { vm: QuickJSAsyncContext; memory: WebAssembly.Memory }

/** Where a QuickJS error's stack says it happened: "    at service x.js:2:17". */
const POSITION = /:(\d+):(\d+)\s*$/m;

/** A compile check on this thread, with its own lane made on first use (what the check thread
 *  runs; tests use it directly). */
export function compileHere(memoryBytes: number): CompileCheck {
  let lane: Promise<Lane> | null = null;
  const open = async (): Promise<Lane> => {
    // the plain build: compiling never suspends, and it parses as the asyncify one (one QuickJS)
    const { qjs, memory } = await newLane(memoryBytes, false);
    const rt = qjs.newRuntime();
    rt.setMemoryLimit(memoryBytes);
    rt.setMaxStackSize(STACK_BYTES);
    return { vm: rt.newContext(), memory };
  };
  return async (code: string, file: string): Promise<CompileProblem | null> => {
    const current = lane ??= open();
    const { vm, memory } = await current;
    let problem: CompileProblem | null = null;
    try {
      const r = vm.evalCode(code, file, { type: "global", compileOnly: true });
      if (r.error) {
        const e = vm.dump(r.error) as { name?: string; message?: string; stack?: string } | string;
        r.error.dispose();
        problem = describe(e);
      } else r.value.dispose();
    } catch (err) {
      // the thread's stack ran out inside the wasm: the lane cannot be trusted any more
      if (lane === current) lane = null;
      if (err instanceof RangeError) return { message: "the code nests too deeply to be compiled" };
      throw err;
    }
    if (memory.buffer.byteLength > LANE_KEEP_BYTES && lane === current) lane = null;
    return problem;
  };
}

/** A compile check on a thread of its own (see above). A check the thread cannot answer (it
 *  failed) passes: the code is then checked when it runs, as before this check. */
export function compileChecker(memoryBytes: number): CompileCheck {
  let worker: Worker | null = null;
  let idle: ReturnType<typeof setTimeout> | null = null;
  let next = 0;
  const waiting = new Map<number, (p: CompileProblem | null) => void>();
  const settleAll = () => { for (const done of waiting.values()) done(null); waiting.clear(); };
  const start = () => {
    const w = new Worker(WORKER_URL);
    w.unref();
    w.onmessage = (e: MessageEvent) => {
      const m = e.data as { id: number; problem: CompileProblem | null };
      waiting.get(m.id)?.(m.problem);
      waiting.delete(m.id);
      if (!waiting.size) {
        idle = setTimeout(() => { if (worker === w && !waiting.size) { worker = null; void w.terminate(); } }, IDLE_MS);
        idle.unref();
      }
    };
    w.onerror = () => { if (worker === w) worker = null; void w.terminate(); settleAll(); };
    return w;
  };
  return (code, file) => new Promise((resolve) => {
    if (idle) { clearTimeout(idle); idle = null; }
    const id = ++next;
    waiting.set(id, resolve);
    (worker ??= start()).postMessage({ id, code, file, memoryBytes });
  });
}

/** A QuickJS compile error as a problem with its position; none for running out of memory (the
 *  code may well load in a sandbox with more, and is not wrong for that; QuickJS out of memory
 *  may not even have the room for its message). */
function describe(e: { name?: string; message?: string; stack?: string } | string): CompileProblem | null {
  if (typeof e !== "object" || e === null) return { message: String(e) };
  if (e.name === "InternalError" && (!e.message || /out of memory/i.test(e.message))) return null;
  const at = POSITION.exec(e.stack ?? "");
  return { message: `${e.name ?? "Error"}: ${e.message ?? ""}`, ...(at ? { line: Number(at[1]), column: Number(at[2]) } : {}) };
}
