// One QuickJS runtime and context holding a service (its libraries first), reused across runs.
// User code never touches host objects: its only way out is the three host functions the
// prelude captures (see prelude.ts), which carry JSON text.
//
// Limits: a memory limit per runtime; a CPU slice limit (an interrupt fires when one synchronous
// stretch of user code runs longer than `sliceMs`, so an infinite loop ends that run instead of
// holding the process); a wall-clock limit per run (the service's execution_timeout) that ends runs
// waiting forever on promises or host calls.
import {
  type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSRuntime, type QuickJSWASMModule,
  RELEASE_SYNC, newQuickJSWASMModuleFromVariant, newVariant,
} from "quickjs-emscripten";
import wasmPath from "@jitl/quickjs-wasmfile-release-sync/wasm" with { type: "file" };
import { DirectCall } from "./ffi.ts";
import { PRELUDE } from "./prelude.ts";

let module: Promise<QuickJSWASMModule> | undefined;
/** The QuickJS module, loaded once (its wasm is embedded in the binary). */
export function quickjs(): Promise<QuickJSWASMModule> {
  return (module ??= newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmBinary: () => Bun.file(wasmPath).arrayBuffer() })));
}

export interface SandboxSource {
  libraries: { name: string; code: string }[];
  service: { name: string; code: string };
  /** the `cbmeta` global */
  meta: Record<string, unknown>;
}

export interface SandboxLimits { memoryBytes: number; sliceMs: number }

export interface RunHooks {
  /** a domain operation as the run's effective user */
  host(op: string, args: unknown): Promise<unknown>;
  log(text: string): void;
}

/** What a run's `req` is made of (see the prelude's __run). */
export interface RunRequest {
  /** systemKey, systemSecret, userEmail, userid, userToken, isLogging, caller as JSON: the same
   *  for every run of one caller, so the sandbox sends it only when it changed */
  context: string;
  params: unknown;
  instanceId: string;
}

export type RunOutcome =
  | { kind: "success" | "error"; value: unknown; status?: number; headers?: Record<string, string> }
  | { kind: "failed"; error: string; timedOut?: boolean };

/** Thrown when the source itself cannot be loaded (syntax errors, a library throwing). */
export class SourceError extends Error {}

export class Sandbox {
  private rt!: QuickJSRuntime;
  private vm!: QuickJSContext;
  private runFn!: QuickJSHandle;
  private direct!: DirectCall;
  private isDoneFn!: QuickJSHandle;
  private sliceDeadline = Infinity;
  /** the request context the context holds, as sent */
  private lastContext = "";
  private disposed = false;
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
    const s = new Sandbox(limits);
    const qjs = await quickjs();
    s.rt = qjs.newRuntime();
    s.rt.setMemoryLimit(limits.memoryBytes);
    s.rt.setMaxStackSize(512 * 1024);
    s.rt.setInterruptHandler(() => Date.now() > s.sliceDeadline);
    s.vm = s.rt.newContext();
    try {
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

  private load(what: string, code: string) {
    this.sliceDeadline = Date.now() + this.limits.sliceMs;
    const r = this.vm.evalCode(code, `${what}.js`);
    this.sliceDeadline = Infinity;
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
      const settle = (text: string) => {
        if (this.disposed || !this.pending.has(d)) return;
        this.pending.delete(d);
        if (hooks !== this.hooks) { d.dispose(); return; } // the run it belonged to is over
        vm.newString(text).consume((h) => d.resolve(h));
        d.dispose();
        this.pump();
      };
      let args: unknown;
      try { args = JSON.parse(json); } catch { args = null; }
      // results come back as macrotasks: a service looping over awaited calls then yields to the
      // event loop between them instead of starving the server (and its own deadline timer)
      (hooks ? hooks.host(op, args) : Promise.reject(new Error("no run"))).then(
        (data) => { const text = JSON.stringify({ ok: true, data: data === undefined ? null : data }); setImmediate(() => settle(text)); },
        (err) => { const text = JSON.stringify({ ok: false, error: errorInfo(err) }); setImmediate(() => settle(text)); },
      );
      return d.handle;
    }).consume((f) => vm.setProp(vm.global, "__host", f));
    vm.newFunction("__done", (kindH, jsonH) => {
      const kind = vm.getString(kindH), json = vm.getString(jsonH);
      let value: unknown = null;
      try { value = JSON.parse(json); } catch { value = json; }
      if (kind === "status") { if (typeof value === "number") this.status = value; return; }
      if (kind === "headers") { if (value && typeof value === "object") this.headers = { ...this.headers, ...(value as Record<string, string>) }; return; }
      if (kind === "waiting") { this.awaiting = true; return; }
      if (kind === "failed") { this.finish({ kind: "failed", error: typeof value === "string" ? value : JSON.stringify(value) }); return; }
      if (kind === "missing") { this.finish({ kind: "failed", error: `the service code defines no function named '${String(value)}'` }); return; }
      if (kind === "success" || kind === "error") this.finish({ kind, value, status: this.status, headers: this.headers });
    }).consume((f) => vm.setProp(vm.global, "__done", f));
    vm.newFunction("__log", (textH) => {
      this.hooks?.log(vm.getString(textH));
    }).consume((f) => vm.setProp(vm.global, "__log", f));
  }

  /** Runs the entry function once. Ends when it calls success/error, when no work is left
   *  (success by default), on an uncaught error, or at the deadline (timeoutMs <= 0: none). A run
   *  that ended before the call returned (the common case) answers at once, without a promise. */
  run(entry: string, req: RunRequest, hooks: RunHooks, timeoutMs: number, onFinish?: () => void): RunOutcome | Promise<RunOutcome> {
    if (this.disposed || this.broken) return { kind: "failed", error: "sandbox unavailable" };
    this.hooks = hooks;
    this.outcome = null;
    this.awaiting = false;
    this.status = undefined;
    this.headers = undefined;
    // onFinish runs synchronously when the run ends, so the caller can hand the sandbox on
    // before it sees the outcome (under load, that is what keeps the pool from running dry)
    let settle: ((o: RunOutcome) => void) | null = null;
    this.resolveRun = (o) => { onFinish?.(); settle?.(o); };
    const same = req.context === this.lastContext;
    this.lastContext = req.context;
    this.sliceDeadline = Date.now() + this.limits.sliceMs;
    const r = this.direct.call(this.runFn, [entry, same ? null : req.context, req.instanceId, isEmptyObject(req.params) ? null : JSON.stringify(req.params)]);
    this.sliceDeadline = Infinity;
    if ("error" in r) {
      const msg = this.errorText(r.error);
      r.error.dispose();
      this.finish({ kind: "failed", error: msg });
    } else {
      // the service ended before returning: its outcome came back with the call ("s"/"e", then
      // "t" and text or "j" and JSON; anything else is the text of undefined)
      const early = r.text;
      if ((early[0] === "s" || early[0] === "e") && (early[1] === "t" || early[1] === "j")) {
        const value = early[1] === "t" ? early.slice(2) : JSON.parse(early.slice(2));
        this.finish({ kind: early[0] === "e" ? "error" : "success", value, status: this.status, headers: this.headers });
      } else {
        if (timeoutMs > 0) this.timer = setTimeout(() => this.finish({ kind: "failed", error: `execution timed out after ${timeoutMs / 1000} s`, timedOut: true }), timeoutMs);
        this.pump();
      }
    }
    if (this.outcome) return this.outcome;
    return new Promise<RunOutcome>((resolve) => { settle = resolve; });
  }

  /** Runs queued promise jobs; finishes the run when nothing is left to wait for. */
  private pump() {
    if (this.disposed || !this.resolveRun) return;
    for (;;) {
      this.sliceDeadline = Date.now() + this.limits.sliceMs;
      const r = this.rt.executePendingJobs();
      this.sliceDeadline = Infinity;
      if (r.error) {
        const isDone = this.vm.callFunction(this.isDoneFn, this.vm.undefined, r.error);
        const done = !isDone.error && this.vm.dump(isDone.value) === true;
        if (isDone.error) isDone.error.dispose(); else isDone.value.dispose();
        const msg = done ? "" : this.errorText(r.error);
        r.error.dispose();
        if (!done) { this.finish({ kind: "failed", error: msg }); return; }
        continue;
      }
      if (r.value === 0) break;
    }
    if (!this.outcome && !this.awaiting && this.pending.size === 0) this.finish({ kind: "success", value: null, status: this.status, headers: this.headers });
  }

  /** Ends the current run (a stream service being stopped). */
  abort(reason: string) { this.finish({ kind: "failed", error: reason }); }

  private finish(o: RunOutcome) {
    if (this.outcome || !this.resolveRun) return;
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

/** No parameters, or {}: the prelude makes the {} itself (cheaper than parsing it in there). */
function isEmptyObject(p: unknown): boolean {
  if (p === null || p === undefined) return true;
  if (typeof p !== "object" || Object.getPrototypeOf(p) !== Object.prototype) return false;
  for (const _ in p) return false;
  return true;
}

function errorInfo(err: unknown): unknown {
  if (err && typeof err === "object" && "detail" in err && "kind" in err) {
    const e = err as { detail: string; kind: { code: number; status: number } };
    return { detail: e.detail, code: e.kind.code, status: e.kind.status };
  }
  return { detail: err instanceof Error ? err.message : String(err) };
}
