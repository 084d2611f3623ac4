// One QuickJS runtime and context holding a service (its libraries first), reused across runs.
// User code never touches host objects: its only way out is the three host functions the
// prelude captures (see prelude.ts), which carry JSON text.
//
// Limits: a memory limit per runtime; a CPU slice limit (an interrupt fires when one synchronous
// stretch of user code runs longer than `sliceMs`, so an infinite loop ends that run instead of
// holding its worker); a wall-clock limit per run (the service's execution_timeout), checked by the
// same interrupt while code runs and by a timer while the run waits on promises or host calls.
// Sandboxes live in code workers (worker.ts); the deadline of the stretch of user code running now
// is published for the pool's watchdog, which ends a worker that does not come back from it.
import {
  type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSRuntime, type QuickJSWASMModule,
  RELEASE_SYNC, newQuickJSWASMModuleFromVariant, newVariant,
} from "quickjs-emscripten";
import wasmPath from "@jitl/quickjs-wasmfile-release-sync/wasm" with { type: "file" };
import { DirectCall } from "./ffi.ts";
import { PRELUDE } from "./library/index.ts";

let module: Promise<QuickJSWASMModule> | undefined;
let memory: WebAssembly.Memory | undefined;
/** The QuickJS module, loaded once (its wasm is embedded in the binary). With `maxBytes`, its heap
 *  (every sandbox of this thread together) can never grow past that: an allocation beyond it is
 *  an out-of-memory error in the sandbox that asked. `compiled` is the wasm compiled elsewhere
 *  (compiled code is shared between threads, and so is the engine's tiering up of it). */
export function quickjs(maxBytes?: number, compiled?: WebAssembly.Module): Promise<QuickJSWASMModule> {
  if (!module && maxBytes) memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: Math.max(INITIAL_PAGES, Math.floor(maxBytes / 65536)) });
  return (module ??= newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, {
    ...(compiled ? { wasmModule: compiled } : { wasmBinary: () => Bun.file(wasmPath).arrayBuffer() }), ...(memory ? { wasmMemory: memory } : {}),
  })));
}

/** The module's wasm, compiled (for threads that will load the module: see quickjs). */
export const compileQuickJS = async (): Promise<WebAssembly.Module> => WebAssembly.compile(await Bun.file(wasmPath).arrayBuffer());
/** The module's initial heap (16 MiB, what its build asks for). */
const INITIAL_PAGES = 256;

/** The size of this thread's wasm heap in bytes (it grows, never shrinks), 0 before it is loaded
 *  with a bound. */
export const heapBytes = () => memory?.buffer.byteLength ?? 0;

/** Where the deadline of the stretch of user code running now is published (epoch ms, 0 when no
 *  user code runs), for a watchdog on another thread. */
let watch: Float64Array | null = null;
export function publishDeadlines(view: Float64Array) { watch = view; }

export interface SandboxSource {
  libraries: { name: string; code: string }[];
  service: { name: string; code: string };
  /** the `cbmeta` global */
  meta: Record<string, unknown>;
}

export interface SandboxLimits { memoryBytes: number; sliceMs: number }

export interface RunHooks {
  /** a domain operation as the run's effective user: its arguments and its answer
   *  ({ok, data} or {ok, error}) as JSON text; `answer` is called once, later */
  host(op: string, argsJson: string, answer: (replyJson: string) => void): void;
  log(text: string): void;
}

/** What a run's `req` is made of (see the prelude's __run). */
export interface RunRequest {
  /** systemKey, systemSecret, userEmail, userid, userToken, isLogging, caller as JSON: the same
   *  for every run of one caller, so the sandbox sends it only when it changed */
  context: string;
  /** the parameters as JSON, null for none or {} (see paramsJson) */
  params: string | null;
  instanceId: string;
}

/** A run's answer keeps the form it left the sandbox in: "t" and a string, or "j" and JSON. It
 *  crosses threads as that text and is parsed once, where it is answered (see outcomeValue). */
export type RunOutcome =
  | { kind: "success" | "error"; raw: string; status?: number; headers?: Record<string, string> }
  | { kind: "failed"; error: string; timedOut?: boolean };

export const outcomeValue = (raw: string): unknown => (raw[0] === "t" ? raw.slice(1) : JSON.parse(raw.slice(1)));

/** The parameters as a run takes them: no parameters, or {}, are null (the prelude makes the {}
 *  itself, cheaper than parsing it in there). */
export function paramsJson(p: unknown): string | null {
  if (p === null || p === undefined) return null;
  if (typeof p !== "object" || Object.getPrototypeOf(p) !== Object.prototype) return JSON.stringify(p);
  for (const _ in p) return JSON.stringify(p);
  return null;
}

/** Thrown when the source itself cannot be loaded (syntax errors, a library throwing). */
export class SourceError extends Error {}

export class Sandbox {
  private rt!: QuickJSRuntime;
  private vm!: QuickJSContext;
  private runFn!: QuickJSHandle;
  private direct!: DirectCall;
  private isDoneFn!: QuickJSHandle;
  /** when the stretch of user code running now must stop: the slice's end or the run's deadline */
  private sliceDeadline = Infinity;
  /** the current run's deadline (epoch ms) */
  private runDeadline = Infinity;
  private timeoutMs = 0;
  /** the request context the context holds, as sent */
  private lastContext = "";
  private disposed = false;
  /** calls into the context under way (a run may end, and be disposed, from inside one) */
  private inside = 0;
  /** set when a run left state behind (a failure, pending work): not reused */
  broken = false;

  // the current run
  private hooks: RunHooks | null = null;
  private outcome: RunOutcome | null = null;
  private status: number | undefined;
  /** the entry function returned a promise: no default success until it settles */
  private awaiting = false;
  private headers: Record<string, string> | undefined;
  private pending = new Set<QuickJSDeferredPromise>();
  private resolveRun: ((o: RunOutcome) => void) | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;

  private constructor(private readonly limits: SandboxLimits) {}

  static async create(src: SandboxSource, limits: SandboxLimits): Promise<Sandbox> {
    return Sandbox.open(await quickjs(), src, limits);
  }

  /** A sandbox holding `src`, on a module already loaded. Throws SourceError when it does not load. */
  static open(qjs: QuickJSWASMModule, src: SandboxSource, limits: SandboxLimits): Sandbox {
    const s = new Sandbox(limits);
    s.rt = qjs.newRuntime();
    s.rt.setMemoryLimit(limits.memoryBytes);
    s.rt.setMaxStackSize(512 * 1024);
    s.rt.setInterruptHandler(() => Date.now() > s.sliceDeadline);
    try {
      s.vm = s.rt.newContext();
      s.installHost();
      s.vm.unwrapResult(s.vm.evalCode(`(${JSON.stringify(src.meta)})`)).consume((meta) => s.vm.setProp(s.vm.global, "cbmeta", meta));
      s.load("prelude", PRELUDE);
      for (const lib of src.libraries) s.load(`library ${lib.name}`, lib.code);
      s.load(`service ${src.service.name}`, src.service.code);
      s.runFn = s.vm.getProp(s.vm.global, "__run");
      s.direct = new DirectCall(s.vm);
      s.isDoneFn = s.vm.getProp(s.vm.global, "__isDone");
    } catch (e) {
      s.dispose();
      throw e;
    }
    return s;
  }

  /** User code may run from now until the slice ends or the run's deadline, whichever is first. */
  private enter() {
    this.inside++;
    const d = Math.min(Date.now() + this.limits.sliceMs, this.runDeadline);
    this.sliceDeadline = d;
    if (watch) watch[0] = d;
  }

  private leave() {
    this.inside--;
    this.sliceDeadline = Infinity;
    if (watch) watch[0] = 0;
  }

  private load(what: string, code: string) {
    this.enter();
    const r = this.vm.evalCode(code, `${what}.js`);
    this.leave();
    if (r.error) {
      const msg = this.errorText(r.error);
      r.error.dispose();
      throw new SourceError(`${what}: ${msg}`);
    }
    r.value.dispose();
  }

  private installHost() {
    const vm = this.vm;
    vm.newFunction("__host", (opH, argsH) => {
      const op = vm.getString(opH), json = vm.getString(argsH);
      const d = vm.newPromise();
      this.pending.add(d);
      const hooks = this.hooks;
      let calling = true;
      const settle = (text: string) => {
        if (this.disposed || !this.pending.has(d)) return;
        // an answer given during the call itself waits until the call has returned
        if (calling) { queueMicrotask(() => settle(text)); return; }
        this.pending.delete(d);
        if (hooks !== this.hooks) { d.dispose(); return; } // the run it belonged to is over
        vm.newString(text).consume((h) => d.resolve(h));
        d.dispose();
        this.pump();
      };
      if (hooks) hooks.host(op, json, settle);
      else settle(JSON.stringify({ ok: false, error: { detail: "no run" } }));
      calling = false;
      return d.handle;
    }).consume((f) => vm.setProp(vm.global, "__host", f));
    vm.newFunction("__done", (kindH, jsonH) => {
      const kind = vm.getString(kindH), json = vm.getString(jsonH);
      if (kind === "success" || kind === "error") { this.finish({ kind, raw: "j" + json, status: this.status, headers: this.headers }); return; }
      let value: unknown = null;
      try { value = JSON.parse(json); } catch { value = json; }
      if (kind === "status") { if (typeof value === "number") this.status = value; return; }
      if (kind === "headers") { if (value && typeof value === "object") this.headers = { ...this.headers, ...(value as Record<string, string>) }; return; }
      if (kind === "waiting") { this.awaiting = true; return; }
      if (kind === "failed") { this.finish({ kind: "failed", error: typeof value === "string" ? value : JSON.stringify(value) }); return; }
      if (kind === "missing") this.finish({ kind: "failed", error: `the service code defines no function named '${String(value)}'` });
    }).consume((f) => vm.setProp(vm.global, "__done", f));
    vm.newFunction("__log", (textH) => {
      this.hooks?.log(vm.getString(textH));
    }).consume((f) => vm.setProp(vm.global, "__log", f));
  }

  /** Runs the entry function once. Ends when it calls success/error, when no work is left
   *  (success by default), on an uncaught error, or at the deadline (timeoutMs <= 0: none). A run
   *  that ended before the call returned (the common case) answers at once, without a promise.
   *  onFinish gets the outcome synchronously when the run ends, so the caller can hand the
   *  sandbox on and send the answer before anything else runs. */
  run(entry: string, req: RunRequest, hooks: RunHooks, timeoutMs: number, onFinish?: (o: RunOutcome) => void): RunOutcome | Promise<RunOutcome> {
    if (this.disposed || this.broken) return { kind: "failed", error: "sandbox unavailable" };
    this.hooks = hooks;
    this.outcome = null;
    this.awaiting = false;
    this.status = undefined;
    this.headers = undefined;
    this.timeoutMs = timeoutMs;
    this.runDeadline = timeoutMs > 0 ? Date.now() + timeoutMs : Infinity;
    let settle: ((o: RunOutcome) => void) | null = null;
    this.resolveRun = (o) => { onFinish?.(o); settle?.(o); };
    const same = req.context === this.lastContext;
    this.lastContext = req.context;
    this.enter();
    const r = this.direct.call(this.runFn, [entry, same ? null : req.context, req.instanceId, req.params]);
    this.leave();
    if ("error" in r) {
      // the handle goes before the run ends: ending may hand the sandbox on to be disposed
      const failure = this.failure(r.error);
      r.error.dispose();
      this.finish(failure);
    } else {
      // the service ended before returning: its outcome came back with the call ("s"/"e", then
      // "t" and text or "j" and JSON; anything else is the text of undefined)
      const early = r.text;
      if ((early[0] === "s" || early[0] === "e") && (early[1] === "t" || early[1] === "j")) {
        this.finish({ kind: early[0] === "e" ? "error" : "success", raw: early.slice(1), status: this.status, headers: this.headers });
      } else {
        if (timeoutMs > 0) this.timer = setTimeout(() => this.finish(this.timedOut()), Math.max(0, this.runDeadline - Date.now()));
        this.pump();
      }
    }
    if (this.outcome) return this.outcome;
    return new Promise<RunOutcome>((resolve) => { settle = resolve; });
  }

  /** Runs queued promise jobs; finishes the run when nothing is left to wait for. */
  private pump() {
    if (!this.resolveRun) return;
    for (;;) {
      if (this.disposed) return; // ended, and disposed, by the jobs run last time round
      this.enter();
      const r = this.rt.executePendingJobs();
      this.leave();
      if (r.error) {
        const isDone = this.vm.callFunction(this.isDoneFn, this.vm.undefined, r.error);
        const done = !isDone.error && this.vm.dump(isDone.value) === true;
        if (isDone.error) isDone.error.dispose(); else isDone.value.dispose();
        const failure = done ? null : this.failure(r.error);
        r.error.dispose();
        if (failure) { this.finish(failure); return; }
        continue;
      }
      if (r.value === 0) break;
    }
    if (!this.outcome && !this.awaiting && this.pending.size === 0) this.finish({ kind: "success", raw: "jnull", status: this.status, headers: this.headers });
  }

  /** Ends the current run (a stream service being stopped). */
  abort(reason: string) { this.finish({ kind: "failed", error: reason }); }

  private timedOut(): RunOutcome {
    return { kind: "failed", error: `execution timed out after ${this.timeoutMs / 1000} s`, timedOut: true };
  }

  private failure(h: QuickJSHandle): RunOutcome {
    return { kind: "failed", error: this.errorText(h) };
  }

  private finish(o: RunOutcome) {
    if (this.outcome || !this.resolveRun) return;
    if (o.kind === "failed" && !o.timedOut) {
      // past its deadline, whatever a run failed of (an interrupt surfacing as a rejection, a
      // half-run callback) is its timeout; an interrupt caught that way still says what it was
      if (Date.now() >= this.runDeadline) o = this.timedOut();
      else if (o.error === "InternalError: interrupted") o = { kind: "failed", error: `interrupted: ran longer than ${this.limits.sliceMs} ms without yielding` };
    }
    this.outcome = o;
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    // a run that failed, or left host calls or jobs behind, may have left state: never reuse it
    if (o.kind === "failed" || this.pending.size > 0 || (!this.disposed && this.rt.hasPendingJob())) this.broken = true;
    const resolve = this.resolveRun;
    this.resolveRun = null;
    this.hooks = null;
    resolve(o);
  }

  private errorText(h: QuickJSHandle): string {
    try {
      const e = this.vm.dump(h) as { name?: string; message?: string; stack?: string } | string;
      if (typeof e === "string") return e;
      if (e && typeof e === "object") {
        if (e.message === "interrupted") return `interrupted: ran longer than ${this.limits.sliceMs} ms without yielding`;
        return `${e.name ?? "Error"}: ${e.message ?? JSON.stringify(e)}`;
      }
      return String(e);
    } catch { return "error"; }
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    // ended from inside a call into the context (a callback's failure): freeing the runtime under
    // its own stack fails (QuickJS asserts its objects are gone) and leaks the runtime's memory
    // in the worker's module, so it is freed once the call has returned
    if (this.inside > 0) queueMicrotask(() => this.free());
    else this.free();
  }

  private free() {
    try {
      for (const d of this.pending) d.dispose();
      this.pending.clear();
      this.runFn?.dispose();
      this.direct?.dispose();
      this.isDoneFn?.dispose();
      this.vm?.dispose();
      this.rt?.dispose();
    } catch { /* a runtime that hit its memory limit may refuse; it is garbage either way */ }
  }
}
