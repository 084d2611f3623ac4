// The one call a warm run makes into QuickJS, on the C API directly. quickjs-emscripten's
// callFunction wraps every value and argument array in Lifetime objects and encodes strings with a
// JavaScript loop: about 2 µs of a 12 µs run. This writes strings with TextEncoder into one
// reused buffer and the arguments into one reused array. The internals it reads (ffi, module,
// ctx, memory) are those of the pinned quickjs-emscripten version; the contract test in
// test/unit/code/sandbox.test.ts runs through this path on every call.
import type { QuickJSContext, QuickJSHandle } from "quickjs-emscripten";

interface Internals {
  ffi: {
    QTS_Call(ctx: number, fn: number, self: number, argc: number, argv: number): number;
    QTS_NewString(ctx: number, chars: number): number;
    QTS_GetString(ctx: number, value: number): number;
    QTS_FreeCString(ctx: number, chars: number): void;
    QTS_FreeValuePointer(ctx: number, value: number): void;
    QTS_ResolveException(ctx: number, value: number): number;
  };
  module: { HEAPU8: Uint8Array; _malloc(n: number): number; _free(p: number): void; UTF8ToString(p: number): string };
  ctx: { value: number };
  memory: { heapValueHandle(ptr: number): QuickJSHandle };
}

const encoder = new TextEncoder();
const MAX_ARGS = 4;

/** A string argument, or undefined (null). */
export type Arg = string | null;
export type CallResult = { text: string } | { error: QuickJSHandle };

export class DirectCall {
  private readonly q: Internals;
  private readonly ctx: number;
  private readonly undefinedPtr: number;
  private readonly argv: number;
  private scratch: number;
  private scratchBytes = 4096;
  private heap32: Int32Array;

  constructor(vm: QuickJSContext) {
    this.q = vm as unknown as Internals;
    this.ctx = this.q.ctx.value;
    this.undefinedPtr = (vm.undefined as unknown as { value: number }).value;
    this.argv = this.q.module._malloc(MAX_ARGS * 4);
    this.scratch = this.q.module._malloc(this.scratchBytes);
    this.heap32 = new Int32Array(this.q.module.HEAPU8.buffer);
  }

  private newString(s: string): number {
    const m = this.q.module;
    for (;;) {
      const r = encoder.encodeInto(s, m.HEAPU8.subarray(this.scratch, this.scratch + this.scratchBytes - 1));
      if (r.read === s.length) {
        m.HEAPU8[this.scratch + r.written] = 0;
        return this.q.ffi.QTS_NewString(this.ctx, this.scratch);
      }
      m._free(this.scratch);
      this.scratchBytes = s.length * 3 + 1;
      this.scratch = m._malloc(this.scratchBytes);
    }
  }

  /** Calls fn with string arguments; the result as text (String() of it), or the thrown error. */
  call(fn: QuickJSHandle, args: Arg[]): CallResult {
    const { ffi, module } = this.q;
    if (args.length > MAX_ARGS) throw new Error(`DirectCall takes at most ${MAX_ARGS} arguments`);
    const ptrs = args.map((a) => (a === null ? this.undefinedPtr : this.newString(a)));
    // the wasm memory may have grown (and its buffer been replaced) since the last call
    if (this.heap32.buffer !== module.HEAPU8.buffer) this.heap32 = new Int32Array(module.HEAPU8.buffer);
    for (let i = 0; i < ptrs.length; i++) this.heap32[(this.argv >> 2) + i] = ptrs[i]!;
    const fnPtr = (fn as unknown as { value: number }).value;
    const res = ffi.QTS_Call(this.ctx, fnPtr, this.undefinedPtr, ptrs.length, this.argv);
    for (let i = 0; i < ptrs.length; i++) if (args[i] !== null) ffi.QTS_FreeValuePointer(this.ctx, ptrs[i]!);
    const err = ffi.QTS_ResolveException(this.ctx, res);
    if (err) {
      ffi.QTS_FreeValuePointer(this.ctx, res);
      return { error: this.q.memory.heapValueHandle(err) };
    }
    const chars = ffi.QTS_GetString(this.ctx, res);
    const text = module.UTF8ToString(chars);
    ffi.QTS_FreeCString(this.ctx, chars);
    ffi.QTS_FreeValuePointer(this.ctx, res);
    return { text };
  }

  dispose() {
    this.q.module._free(this.argv);
    this.q.module._free(this.scratch);
  }
}
