// The calls a run makes into QuickJS, on the C API directly. quickjs-emscripten's callFunction
// wraps every value and argument array in Lifetime objects and encodes strings with a JavaScript
// loop: about 2 µs of a 12 µs run. This writes strings with TextEncoder into one reused buffer
// (through one reused view) and the arguments into one reused array, and reads a short result
// without TextDecoder. The internals it reads (ffi, module, ctx, memory) are those of the pinned
// quickjs-emscripten version; the contract test in test/unit/code/sandbox.test.ts runs through
// this path on every call.
//
// The module is the asyncify build: a call may suspend (a blocking host call, a yield), and then
// answers a promise that settles when the call has finally returned (see sandbox.ts).
import type { QuickJSContext, QuickJSHandle } from "quickjs-emscripten";

type MaybeAsync<T> = T | Promise<T>;

interface Internals {
  ffi: {
    QTS_NewString(ctx: number, chars: number): number;
    QTS_ArgvGetJSValueConstPointer(argv: number, i: number): number;
    QTS_DupValuePointer(ctx: number, value: number): number;
    QTS_Throw(ctx: number, error: number): number;
    QTS_GetString(ctx: number, value: number): number;
    QTS_FreeCString(ctx: number, chars: number): void;
    QTS_FreeValuePointer(ctx: number, value: number): void;
    QTS_ResolveException(ctx: number, value: number): number;
    QTS_GetFloat64(ctx: number, value: number): number;
    QTS_Typeof(ctx: number, value: number): number;
    QTS_FreeValuePointerRuntime(rt: number, value: number): void;
  };
  module: {
    HEAPU8: Uint8Array; _malloc(n: number): number; _free(p: number): void;
    /** what the module calls for a host function (asyncify: how the call suspends, in that build) */
    callbacks: { callFunction(asyncify: Asyncify | undefined, ctx: number, self: number, argc: number, argv: number, id: number): MaybeAsync<number> };
    cwrap(name: string, ret: string, args: string[], opts?: object): (...args: number[]) => MaybeAsync<number>;
    /** the exports themselves, by name ("_QTS_Call") */
    [exported: `_${string}`]: unknown;
  };
  ctx: { value: number };
  rt: { value: number };
  memory: { heapValueHandle(ptr: number): QuickJSHandle };
  /** the host function registered under an id (what newFunction was given) */
  getFunction(id: number): unknown;
}

/** Emscripten's asyncify: a host function answering through handleSleep suspends its caller. */
interface Asyncify { handleSleep(start: (wakeUp: (value: number) => void) => void): number }

/** What a host function defined through DirectCall answers: a string, a handle (handed to the
 *  caller), nothing (undefined), or a promise of a string (the call suspends until it settles:
 *  the asyncify build only). */
export type HostAnswer = string | QuickJSHandle | undefined | void | Promise<string>;
export type HostFunction = (args: string[]) => HostAnswer;
/** the functions given to newFunction for DirectCall's host functions, and what answers them
 *  (`suspends`: it may answer a promise) */
const hostFunctions = new WeakMap<object, { fn: HostFunction; suspends: boolean }>();

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const MAX_ARGS = 4;
/** Results up to this many ASCII characters are read with a loop: TextDecoder's call and the view
 *  it needs cost more than the loop for the short outcomes most runs answer with. */
const SHORT_TEXT = 64;

/** A string argument, or undefined (null). */
export type Arg = string | null;
export type CallResult = { text: string } | { error: QuickJSHandle };
/** Jobs run, or the error one of them threw. */
export type JobsResult = { ran: number } | { error: QuickJSHandle };

export class DirectCall {
  private readonly q: Internals;
  private readonly ctx: number;
  private readonly undefinedPtr: number;
  private readonly argv: number;
  /** where executePendingJobs writes the context of the job it ran last */
  private readonly jobContext: number;
  private readonly ptrs = [0, 0, 0, 0];
  /** the argument values a call made (freed once it has returned) */
  private readonly made = [false, false, false, false];
  /** QTS_Call and QTS_ExecutePendingJob through emscripten's ccall, which answers a promise when
   *  the call suspended (the plain export, which quickjs-emscripten's _MaybeAsync names give for
   *  number-only signatures, returns as if it had ended) */
  private readonly callExport: (ctx: number, fn: number, self: number, argc: number, argv: number) => MaybeAsync<number>;
  private readonly jobsExport: (rt: number, maxJobs: number, lastJobContext: number) => MaybeAsync<number>;
  private scratch: number;
  private scratchBytes = 4096;
  /** views of the wasm memory, made again when it grows (its buffer is then replaced) */
  private heap8!: Uint8Array;
  private heap32!: Int32Array;
  private scratchView!: Uint8Array;

  /** `suspends`: the asyncify build, whose calls may suspend (the plain build's never do, and are
   *  made on its exports directly, without emscripten's ccall around each) */
  constructor(vm: QuickJSContext, suspends = true) {
    this.q = vm as unknown as Internals;
    this.ctx = this.q.ctx.value;
    this.undefinedPtr = (vm.undefined as unknown as { value: number }).value;
    this.argv = this.q.module._malloc(MAX_ARGS * 4);
    this.jobContext = this.q.module._malloc(4);
    this.scratch = this.q.module._malloc(this.scratchBytes);
    const n = (k: number) => Array<string>(k).fill("number");
    const m = this.q.module;
    this.callExport = suspends ? m.cwrap("QTS_Call", "number", n(5), {}) : (m._QTS_Call as typeof this.callExport);
    this.jobsExport = suspends ? m.cwrap("QTS_ExecutePendingJob", "number", n(3), {}) : (m._QTS_ExecutePendingJob as typeof this.jobsExport);
    this.views();
    // calls of the host functions defined below skip quickjs-emscripten's path (a scope, a
    // generator and a Lifetime per argument, and an Error made for each suspension: most of a host
    // call's cost); others keep it. One module instance holds one context (a lane, see sandbox.ts).
    const callbacks = this.q.module.callbacks, slow = callbacks.callFunction.bind(callbacks);
    callbacks.callFunction = (asyncify, ctx, self, argc, argv, id) => {
      const host = ctx === this.ctx ? hostFunctions.get(this.q.getFunction(id) as object) : undefined;
      if (!host) return slow(asyncify, ctx, self, argc, argv, id);
      // a call that may suspend goes through handleSleep, which, when the stack is rewound to
      // resume it, answers what the call settled to instead of calling it again
      if (!host.suspends || !asyncify) return this.hostCall(host.fn, argc, argv, null);
      return asyncify.handleSleep((wakeUp) => this.hostCall(host.fn, argc, argv, wakeUp));
    };
  }

  /** Defines a global function of string arguments, answered on the C API directly; one that
   *  `suspends` may answer a promise (the asyncify build). */
  define(name: string, fn: HostFunction, suspends = false) {
    const vm = this.q as unknown as QuickJSContext;
    const entry = () => { throw new Error(`${name} was called through quickjs-emscripten's path`); };
    hostFunctions.set(entry, { fn, suspends });
    vm.newFunction(name, entry).consume((f) => vm.setProp(vm.global, name, f));
  }

  /** Answers a host call: its value as a pointer, or, under handleSleep, through `wakeUp`. */
  private hostCall(fn: HostFunction, argc: number, argv: number, wakeUp: ((value: number) => void) | null): number {
    const { ffi } = this.q;
    const args: string[] = [];
    for (let i = 0; i < argc; i++) {
      const chars = ffi.QTS_GetString(this.ctx, ffi.QTS_ArgvGetJSValueConstPointer(argv, i));
      args.push(this.readString(chars));
      ffi.QTS_FreeCString(this.ctx, chars);
    }
    try {
      const answer = fn(args);
      if (answer instanceof Promise) {
        if (!wakeUp) throw new Error("this call cannot suspend here");
        void answer.then((text) => wakeUp(this.newString(text)));
        return 0;
      }
      const ptr = this.answerPtr(answer);
      wakeUp?.(ptr);
      return ptr;
    } catch (err) {
      const vm = this.q as unknown as QuickJSContext;
      const thrown = vm.newError(err instanceof Error ? err.message : String(err)).consume((e) => ffi.QTS_Throw(this.ctx, (e as unknown as { value: number }).value));
      wakeUp?.(thrown);
      return thrown;
    }
  }

  /** The value a host function answers, as the C side takes it: a pointer it frees (0: undefined). */
  private answerPtr(answer: string | QuickJSHandle | undefined | void): number {
    if (answer === undefined || answer === null) return 0;
    if (typeof answer === "string") return this.newString(answer);
    const ptr = this.q.ffi.QTS_DupValuePointer(this.ctx, (answer as unknown as { value: number }).value);
    answer.dispose();
    return ptr;
  }

  private views() {
    const heap = this.q.module.HEAPU8;
    this.heap8 = heap;
    this.heap32 = new Int32Array(heap.buffer);
    this.scratchView = heap.subarray(this.scratch, this.scratch + this.scratchBytes - 1);
  }

  private newString(s: string): number {
    const m = this.q.module;
    for (;;) {
      if (this.heap8.buffer !== m.HEAPU8.buffer) this.views();
      const r = encoder.encodeInto(s, this.scratchView);
      if (r.read === s.length) {
        this.heap8[this.scratch + r.written] = 0;
        return this.q.ffi.QTS_NewString(this.ctx, this.scratch);
      }
      m._free(this.scratch);
      this.scratchBytes = s.length * 3 + 1;
      this.scratch = m._malloc(this.scratchBytes);
      this.views();
    }
  }

  /** The NUL-terminated UTF-8 string at ptr. */
  private readString(ptr: number): string {
    const heap = this.q.module.HEAPU8;
    let text = "";
    for (let i = ptr; i < ptr + SHORT_TEXT; i++) {
      const b = heap[i]!;
      if (b === 0) return text;
      if (b > 127) break;
      text += String.fromCharCode(b);
    }
    let end = ptr;
    while (heap[end] !== 0) end++;
    return decoder.decode(heap.subarray(ptr, end));
  }

  /** Calls fn with string arguments; the result as text (String() of it), or the thrown error. A
   *  call that suspends answers a promise of that, settled once it has returned. */
  call(fn: QuickJSHandle, args: Arg[]): MaybeAsync<CallResult> {
    const n = args.length;
    if (n > MAX_ARGS) throw new Error(`DirectCall takes at most ${MAX_ARGS} arguments`);
    const ptrs = this.ptrs, made = this.made;
    for (let i = 0; i < n; i++) {
      const a = args[i];
      made[i] = a !== null && a !== undefined;
      ptrs[i] = made[i] ? this.newString(a!) : this.undefinedPtr;
    }
    // creating strings may have grown the wasm memory
    if (this.heap8.buffer !== this.q.module.HEAPU8.buffer) this.views();
    for (let i = 0; i < n; i++) this.heap32[(this.argv >> 2) + i] = ptrs[i]!;
    const fnPtr = (fn as unknown as { value: number }).value;
    const res = this.callExport(this.ctx, fnPtr, this.undefinedPtr, n, this.argv);
    if (res instanceof Promise) {
      // the argument values belong to this call until it has returned (the slots listing them
      // may be reused by a call made meanwhile)
      const owned = ptrs.filter((_, i) => i < n && made[i]);
      return res.then((r) => { this.free(owned); return this.result(r); });
    }
    for (let i = 0; i < n; i++) if (made[i]) this.q.ffi.QTS_FreeValuePointer(this.ctx, ptrs[i]!);
    return this.result(res);
  }

  private free(values: number[]) {
    for (const p of values) this.q.ffi.QTS_FreeValuePointer(this.ctx, p);
  }

  private result(res: number): CallResult {
    const { ffi } = this.q;
    const err = ffi.QTS_ResolveException(this.ctx, res);
    if (err) {
      ffi.QTS_FreeValuePointer(this.ctx, res);
      return { error: this.q.memory.heapValueHandle(err) };
    }
    const chars = ffi.QTS_GetString(this.ctx, res);
    const text = this.readString(chars);
    ffi.QTS_FreeCString(this.ctx, chars);
    ffi.QTS_FreeValuePointer(this.ctx, res);
    return { text };
  }

  /** Runs the promise jobs waiting in the runtime (they may suspend too). */
  jobs(): MaybeAsync<JobsResult> {
    const res = this.jobsExport(this.q.rt.value, -1, this.jobContext);
    if (res instanceof Promise) return res.then((r) => this.jobsResult(r));
    return this.jobsResult(res);
  }

  private jobsResult(res: number): JobsResult {
    const { ffi } = this.q;
    // no job ran: the value belongs to the runtime, not to a context
    if (new Int32Array(this.q.module.HEAPU8.buffer)[this.jobContext >> 2] === 0) { ffi.QTS_FreeValuePointerRuntime(this.q.rt.value, res); return { ran: 0 }; }
    const type = ffi.QTS_Typeof(this.ctx, res);
    const isNumber = this.readString(type) === "number";
    this.q.module._free(type);
    if (isNumber) {
      const ran = ffi.QTS_GetFloat64(this.ctx, res);
      ffi.QTS_FreeValuePointer(this.ctx, res);
      return { ran };
    }
    return { error: this.q.memory.heapValueHandle(res) };
  }

  dispose() {
    this.q.module._free(this.argv);
    this.q.module._free(this.jobContext);
    this.q.module._free(this.scratch);
  }
}
