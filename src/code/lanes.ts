// QuickJS's builds and lanes: a lane is an instance of one of the two builds with a heap of its
// own (see sandbox.ts). Which build a service's lanes are depends on the calls its code names.
import {
  type QuickJSAsyncWASMModule, RELEASE_ASYNC, RELEASE_SYNC, newQuickJSAsyncWASMModuleFromVariant, newQuickJSWASMModuleFromVariant, newVariant,
} from "quickjs-emscripten";
import blockingWasmPath from "@jitl/quickjs-wasmfile-release-asyncify/wasm" with { type: "file" };
import plainWasmPath from "@jitl/quickjs-wasmfile-release-sync/wasm" with { type: "file" };

/** QuickJS's two builds, compiled (compiled code is shared between threads and lanes): the
 *  asyncify build for services that may suspend (waitForMessage, sleep...), and the plain one,
 *  twice as fast, for the others (see needsSuspending). */
export interface CompiledQuickJS { blocking: WebAssembly.Module; plain: WebAssembly.Module }
export const compileQuickJS = async (): Promise<CompiledQuickJS> => ({
  blocking: await WebAssembly.compile(await Bun.file(blockingWasmPath).arrayBuffer()),
  plain: await WebAssembly.compile(await Bun.file(plainWasmPath).arrayBuffer()),
});
let compiledHere: Promise<CompiledQuickJS> | undefined;

/** Host operations that may wait long (a time, a message, a remote server, a lock, another
 *  service): a classic call of one suspends its run instead of blocking the worker thread, so a
 *  worker is never held by a wait, and a service calling another cannot hold the worker the callee
 *  needs. */
export const SUSPENDING_OPS: ReadonlySet<string> = new Set([
  "timer.wait", "messaging.next", "http.request", "lock.lock", "lock.rlock", "code.execute", "database.run", "database.transaction",
]);

/** Whether a service (its code and its libraries') may make a call that suspends (SUSPENDING_OPS):
 *  the names that reach them. A service that names none of them runs on the plain build, where its
 *  other classic calls block the thread; if it reaches one anyway (through a name built at run
 *  time), the call fails saying so. */
export function needsSuspending(src: { libraries: readonly { code: string }[]; service: { code: string } }): boolean {
  // (ClearBladeAsync's Lock, Database and Code answer promises: they need no suspension)
  const waits = /\bwaitForMessage\b|\bsleep\b|\bRequests\b|(?<!ClearBladeAsync\.)\b(?:Lock|Database|Code)\b/;
  return waits.test(src.service.code) || src.libraries.some((l) => waits.test(l.code));
}

/** A lane's heap starts at what the module's build asks for (16 MiB, mostly untouched). */
export const INITIAL_PAGES = 256;
/** What a lane holds besides its runtime's own allocations: the module's data, its stacks, the
 *  prelude (measured: about 1.4 MB resident for an idle lane holding a small service). */
export const LANE_BASE_BYTES = 1_400_000;
/** Room above the runtime's memory limit for the module's own data and stacks. */
const LANE_HEADROOM_PAGES = 128;

/** A new lane: an instance of a build with a heap of its own, bounded by `maxBytes`. (The plain
 *  build is typed as the asyncify one: it offers the same calls, none of which suspends.) */
export async function newLane(maxBytes: number, suspends: boolean, compiled?: CompiledQuickJS): Promise<{ qjs: QuickJSAsyncWASMModule; memory: WebAssembly.Memory }> {
  const both = compiled ?? (await (compiledHere ??= compileQuickJS()));
  const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: INITIAL_PAGES + LANE_HEADROOM_PAGES + Math.ceil(maxBytes / 65536) });
  const qjs = suspends
    ? await newQuickJSAsyncWASMModuleFromVariant(newVariant(RELEASE_ASYNC, { wasmModule: both.blocking, wasmMemory: memory }))
    : (await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmModule: both.plain, wasmMemory: memory }))) as unknown as QuickJSAsyncWASMModule;
  return { qjs, memory };
}
