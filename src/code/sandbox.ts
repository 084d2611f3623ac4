// One service held in QuickJS, reused across runs: a lane (an instance of the QuickJS wasm module
// with a heap of its own) holding one runtime and context, with the prelude, the service's
// libraries and the service loaded. User code never touches host objects: its only ways out are
// the host functions the prelude captures (see library/core.ts), which carry JSON text.
//
// ClearBlade's execution model: a classic call such as collection.fetch(q, cb) has run its
// callback by the time it returns. Two ways to wait for the answer (docs/architecture.md has the
// measurements behind them):
// - a short host operation (data, devices, users, caches, a publish...) blocks the worker thread:
//   the worker's `block` hook posts the call at once and waits on shared memory (Atomics.wait)
//   for the main thread's answer, bounded by the run's deadline. It works on both builds.
// - an operation that waits (sleep, waitForMessage, outbound HTTP, a lock, another service, an
//   external database: SUSPENDING_OPS) suspends: the module is then QuickJS's asyncify build, a
//   host function may answer a promise, the run's stack is saved and the lane's thread goes on
//   with other lanes; the stack resumes where it left off once the answer comes. One lane holds at
//   most one suspended stack, so a lane runs one run at a time, and a run that suspends holds
//   only its own lane. A service whose code names none of those runs on the plain build.
//
// Limits: a memory limit per runtime, and the lane's heap bounded a little above it; a wall-clock
// limit per run (the service's execution_timeout), enforced by the interrupt while code runs, by
// the wait's bound while it blocks, and by a timer while the run waits. Every suspension is a
// point where the worker goes on with other runs; a stretch without one (user code, and calls
// that block the thread) runs on until its deadline, unless code of other systems waits for its
// worker: then it is stopped at the end of its slice (`sliceMs`; QuickJS cannot suspend from its
// interrupt, so it cannot be paused instead). A call is where the slice starts again: on the
// asyncify build a call past its slice suspends instead of blocking, and on the plain build, which
// cannot give the worker back, the run goes on (a ClearBlade service looping over thousands of
// short calls must not be stopped because other tenants wait; one system holds at most its share
// of the workers). The deadline of the stretch running now is published for the
// pool's watchdog, which ends a worker that does not come back from code the interrupt cannot
// reach.
import type { QuickJSAsyncContext, QuickJSAsyncRuntime, QuickJSDeferredPromise, QuickJSHandle } from "quickjs-emscripten";
import { DirectCall, type HostFunction } from "./ffi.ts";
import { type CompiledQuickJS, INITIAL_PAGES, LANE_BASE_BYTES, newLane, needsSuspending, SUSPENDING_OPS } from "./lanes.ts";
import { PRELUDE } from "./prelude/index.ts";
import { local } from "./local.ts";
import type { RunHooks, RunOutcome, RunRequest } from "./run.ts";

export { type CompiledQuickJS, compileQuickJS, LANE_BASE_BYTES, needsSuspending, newLane, SUSPENDING_OPS } from "./lanes.ts";
export { outcomeValue, paramsJson, type RunHooks, type RunOutcome, type RunRequest } from "./run.ts";

/** Where the deadline of the stretch of user code running now is published (epoch ms, 0 when no
 *  user code runs), for a watchdog on another thread. */
let watch: Float64Array | null = null;
/** Set by the pool while code of other systems waits for this worker: a stretch of user code past
 *  its slice is then stopped (fairness between tenants); otherwise it runs to its deadline. */
let contended: Int32Array | null = null;
export function publishDeadlines(view: Float64Array, contention?: Int32Array) { watch = view; contended = contention ?? null; }

/** When what the worker holds back is due (epoch ms; Infinity: nothing held), and what hands it
 *  over: the worker posts the cache sets it made with its next message, and the interrupt hands
 *  them over once due, so a long stretch of user code without calls holds them no longer. */
let heldDue = Infinity;
let handOver: () => void = () => {};
export function holdBack(due: number, hand: () => void) { heldDue = due; handOver = hand; }

export interface SandboxSource {
  libraries: { name: string; code: string }[];
  service: { name: string; code: string };
  /** it may make calls that suspend (needsSuspending): its lanes are the asyncify build's */
  suspends?: boolean;
  /** the `cbmeta` global */
  meta: Record<string, unknown>;
}

export interface SandboxLimits { memoryBytes: number; sliceMs: number }

/** Thrown when the source itself cannot be loaded (syntax errors, a library throwing). */
export class SourceError extends Error {}

/** The longest a service's and its libraries' code may take to load (compile and run its top level). */
export const LOAD_MAX_MS = 10_000;

/** The reply a call that must suspend gets in a sandbox of the plain build (a service that names
 *  none of them, and reached one through a name made at run time). */
const NOT_SUSPENDING = JSON.stringify({ ok: false, error: { detail: "this service's code names no call that waits (waitForMessage, sleep, Requests, Lock, Database, Code), so it runs where calls cannot wait: name it plainly in the code, or use ClearBladeAsync" } });

/** The reply a blocking call gets when its run ended while it waited (its deadline, a stop): the
 *  code is interrupted right after. */
const STOPPED = JSON.stringify({ ok: false, error: { detail: "the run is over" } });

/** The reply a blocking call gets when there is no run to answer it (code run while loading). */
const NO_RUN = JSON.stringify({ ok: false, error: { detail: "this call needs a running service: it cannot be made while the code is being loaded" } });

export class Sandbox {
  private rt!: QuickJSAsyncRuntime;
  private vm!: QuickJSAsyncContext;
  private memory!: WebAssembly.Memory;
  private runFn!: QuickJSHandle;
  private direct!: DirectCall;
  private isDoneFn!: QuickJSHandle;
  /** when the stretch of user code running now must yield: the slice's end */
  private sliceDeadline = Infinity;
  /** the current run's deadline (epoch ms) */
  private runDeadline = Infinity;
  private timeoutMs = 0;
  /** the request context the context holds, as sent */
  private lastContext = "";
  /** the entry function's name, once sent: the prelude keeps the function it names */
  private entrySent = "";
  private disposed = false;
  /** set when a run left state behind (a failure, a suspended stack, pending work): not reused */
  broken = false;
  /** the asyncify build: its runs may suspend */
  private suspends = true;
  /** the run ended while blocked in a call: its code is interrupted at once */
  private halted = false;

  // the current run
  private hooks: RunHooks | null = null;
  private outcome: RunOutcome | null = null;
  private status: number | undefined;
  /** the entry function returned a promise: no default success until it settles */
  private awaiting = false;
  private headers: Record<string, string> | undefined;
  /** promise-style host calls not answered yet */
  private readonly pending = new Set<QuickJSDeferredPromise>();
  /** their answers, given to the context by the run's driver when its stack is free */
  private readonly arrived: [QuickJSDeferredPromise, string][] = [];
  private resolveRun: ((o: RunOutcome) => void) | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** user code of this sandbox is running (or about to resume) */
  private executing = false;
  /** the stack is suspended in a blocking call */
  private suspended = false;
  /** the run was stopped at the end of its slice because other systems waited */
  private preempted = false;
  private quietWaiters: (() => void)[] = [];
  /** wakes the run's driver when an answer arrived while it waited */
  private wakeDriver: (() => void) | null = null;

  private constructor(private readonly limits: SandboxLimits) {}

  static async create(src: SandboxSource, limits: SandboxLimits): Promise<Sandbox> {
    return Sandbox.open(src, limits);
  }

  /** A sandbox holding `src` in a lane of its own. Throws SourceError when it does not load. */
  static async open(src: SandboxSource, limits: SandboxLimits, compiled?: CompiledQuickJS): Promise<Sandbox> {
    const s = new Sandbox(limits);
    const suspends = src.suspends ?? needsSuspending(src);
    s.suspends = suspends;
    const lane = await newLane(limits.memoryBytes, suspends, compiled);
    s.memory = lane.memory;
    s.rt = lane.qjs.newRuntime();
    s.rt.setMemoryLimit(limits.memoryBytes);
    s.rt.setMaxStackSize(256 * 1024); // about 1,300 nested calls; a worker thread's own stack holds that much, not twice it
    s.rt.setInterruptHandler(() => s.interrupt());
    try {
      s.vm = s.rt.newContext();
      s.direct = new DirectCall(s.vm, suspends);
      s.installHost();
      s.vm.unwrapResult(s.vm.evalCode(`(${JSON.stringify(src.meta)})`)).consume((meta) => s.vm.setProp(s.vm.global, "cbmeta", meta));
      s.load("prelude", PRELUDE);
      for (const lib of src.libraries) s.load(`library ${lib.name}`, lib.code);
      s.load(`service ${src.service.name}`, src.service.code);
      s.runFn = s.vm.getProp(s.vm.global, "__run");
      s.isDoneFn = s.vm.getProp(s.vm.global, "__isDone");
    } catch (e) {
      s.dispose();
      throw e;
    }
    return s;
  }

  /** The bytes this sandbox's lane takes: what it always holds, and what its heap grew by. */
  get cost() { return LANE_BASE_BYTES + Math.max(0, (this.memory?.buffer.byteLength ?? 0) - INITIAL_PAGES * 65536); }

  /** User code runs from now: a slice starts. The watchdog is told the run's deadline: the
   *  interrupt stops code there (a run without one has no watchdog). */
  private enter() {
    this.executing = true;
    this.sliceDeadline = Date.now() + this.limits.sliceMs;
    if (watch) watch[0] = Number.isFinite(this.runDeadline) ? this.runDeadline : 0;
  }

  /** User code stopped running (the run suspended, waits, or ended): who waited for that goes on. */
  private quiet() {
    this.executing = false;
    this.sliceDeadline = Infinity;
    if (watch) watch[0] = 0;
    if (this.quietWaiters.length) for (const w of this.quietWaiters.splice(0)) w();
  }

  /** Resolves once no user code of this sandbox runs; null when none does (the common case: a run
   *  that ended within its step needs no promise). The worker waits for this after starting a run
   *  or answering it, so one step is over before the next. */
  settled(): Promise<void> | null {
    if (!this.executing) return null;
    return new Promise((r) => this.quietWaiters.push(r));
  }

  /** QuickJS asks this every few thousand operations: stop at the run's deadline, and at the end
   *  of a slice when code of other systems waits for this worker (an error user code cannot catch
   *  either way). QuickJS cannot suspend here, so a long stretch without calls is not paused. */
  private interrupt(): boolean {
    if (this.halted) return true;
    const now = Date.now();
    if (now >= heldDue) handOver();
    if (now > this.runDeadline) return true;
    if (now <= this.sliceDeadline) return false;
    if (!this.hooks || this.outcome) return true; // loading past its slice, or a run that is over
    if (contended?.[0]) { this.preempted = true; return true; }
    return false;
  }

  private load(what: string, code: string) {
    this.enter();
    // compiling a large bundle (ClearBlade's exported libraries reach megabytes) takes longer than
    // a slice, more so on a busy machine: loading has a bound of its own
    this.sliceDeadline = Date.now() + LOAD_MAX_MS;
    const r = this.vm.evalCode(code, `${what}.js`);
    this.quiet();
    if (r.error) {
      const msg = this.errorText(r.error);
      r.error.dispose();
      throw new SourceError(`${what}: ${msg}`);
    }
    r.value.dispose();
  }

  private installHost() {
    const vm = this.vm, define = (name: string, fn: HostFunction, suspends?: boolean) => this.direct.define(name, fn, suspends);
    // the promise flavour: answered later, its reaction runs when the driver next runs jobs
    define("__host", ([op = "", json = ""]) => {
      const d = vm.newPromise();
      this.pending.add(d);
      const hooks = this.hooks;
      let calling = true;
      const settle = (text: string) => {
        if (this.disposed || !this.pending.has(d)) return;
        this.pending.delete(d);
        if (hooks !== this.hooks) { d.dispose(); return; } // the run it belonged to is over
        // (an answer given during the call itself is resolved once the call has returned: the
        // driver, or the run's own start, takes it from `arrived` then)
        this.arrived.push([d, text]);
        if (calling) return;
        this.executing = true; // the driver runs its reaction now (see settled)
        this.wakeDriver?.();
      };
      if (!hooks) settle(JSON.stringify({ ok: false, error: { detail: "no run" } }));
      else if (hooks.block && hooks.quick?.(op) && !this.lateForOthers()) {
        const r = hooks.block(op, json, this.runDeadline);
        settle(typeof r === "string" ? r : this.stoppedByCall(r));
      } else hooks.host(op, json, settle, false);
      calling = false;
      return d.handle;
    });
    // the blocking flavour: the stack waits for the answer (the reply's JSON text), blocking the
    // thread for a short operation, suspending for one that waits or, on the asyncify build, when
    // other systems' code waits for this worker past the slice (so the worker goes to them)
    // (a function answering a promise suspends its caller: newFunction is newAsyncifiedFunction in
    // this build, whose type would not allow the immediate answer given when there is no run)
    define("__hostSync", ([op = "", json = ""]) => {
      const hooks = this.hooks;
      if (!hooks || this.outcome) return NO_RUN;
      if (hooks.block && !SUSPENDING_OPS.has(op) && !(this.suspends && this.lateForOthers())) {
        const r = hooks.block(op, json, this.runDeadline);
        if (typeof r === "string") {
          // on the plain build the call is where the slice starts again (the worker was held, not
          // given back: see above); on the asyncify build blocked time counts, so that a call past
          // the slice suspends and the worker goes to the systems waiting
          if (!this.suspends) this.sliceDeadline = Date.now() + this.limits.sliceMs;
          return r;
        }
        return this.stoppedByCall(r);
      }
      if (!this.suspends) return NOT_SUSPENDING;
      return new Promise<string>((resolve) => {
        this.suspended = true;
        this.quiet();
        hooks.host(op, json, (text) => {
          if (this.disposed || hooks !== this.hooks) return; // never resumed: the lane goes
          this.suspended = false;
          this.enter();
          resolve(text);
        }, true);
      });
    }, true);
    // a cache get or set of string arguments the worker's copy answers (a value crosses as its
    // JSON alone): most of such a call's cost was making and reading the generic call's JSON
    define("__cache", ([op = "", cache = "", key = "", json = ""]) => {
      const hooks = this.hooks;
      if (!hooks?.cache || this.outcome || (op !== "get" && op !== "set")) return undefined;
      // past its slice while other systems wait: the usual way, which may give the worker back
      if (this.lateForOthers()) return undefined;
      // (a name or key that is not well-formed UTF-16 reads as U+FFFD here: the JSON way keeps it)
      if (cache.includes("\uFFFD") || key.includes("\uFFFD")) return undefined;
      const r = hooks.cache(op, cache, key, json);
      // a call is where a slice starts again on the plain build, answered here as elsewhere
      if (r !== undefined && !this.suspends) this.sliceDeadline = Date.now() + this.limits.sliceMs;
      return r;
    });
    define("__local", ([op = "", json = ""]) => local(op, json));
    define("__done", ([kind = "", json = ""]) => {
      if (kind === "success" || kind === "error") { this.finish({ kind, raw: "j" + json, status: this.status, headers: this.headers }); return; }
      let value: unknown = null;
      try { value = JSON.parse(json); } catch { value = json; }
      if (kind === "status") { if (typeof value === "number") this.status = value; return; }
      if (kind === "headers") { if (value && typeof value === "object") this.headers = { ...this.headers, ...(value as Record<string, string>) }; return; }
      if (kind === "waiting") { this.awaiting = true; return; }
      if (kind === "failed") { this.finish({ kind: "failed", error: typeof value === "string" ? value : JSON.stringify(value) }); return; }
      if (kind === "missing") this.finish({ kind: "failed", error: `the service code defines no function named '${String(value)}'` });
    });
    define("__log", ([text = ""]) => { this.hooks?.log(text); });
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
    this.preempted = false;
    this.halted = false;
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
    const r = this.direct.call(this.runFn, [entry === this.entrySent ? null : entry, same ? null : req.context, req.instanceId, req.params]);
    this.entrySent = entry;
    if (r instanceof Promise) {
      // suspended in a blocking call: the driver takes it from here
      if (timeoutMs > 0) this.armTimer();
      void this.drive(r);
    } else if ("error" in r) {
      this.quiet();
      // the handle goes before the run ends: ending may hand the sandbox on to be disposed
      const failure = this.failure(r.error);
      r.error.dispose();
      this.finish(failure);
    } else if (this.early(r.text)) {
      this.quiet();
    } else {
      // its promise jobs often end it at once: a timer only for a run that goes on waiting
      void this.drive(null);
      if (timeoutMs > 0 && !this.outcome) this.armTimer();
    }
    if (this.outcome) return this.outcome;
    return new Promise<RunOutcome>((resolve) => { settle = resolve; });
  }

  /** The service ended before returning: its outcome came back with the call ("s"/"e", then "t"
   *  and text or "j" and JSON; anything else is the text of undefined). */
  private early(text: string): boolean {
    if ((text[0] === "s" || text[0] === "e") && (text[1] === "t" || text[1] === "j")) {
      this.finish({ kind: text[0] === "e" ? "error" : "success", raw: text.slice(1), status: this.status, headers: this.headers });
      return true;
    }
    return false;
  }

  private armTimer() {
    this.timer = setTimeout(() => this.finish(this.timedOut()), Math.max(0, this.runDeadline - Date.now()));
  }

  /** Carries a run that did not end at once: the rest of its entry call (when that suspended),
   *  then its promise jobs as their answers come, until it ends. The only code that enters the
   *  context once the run started (a suspended stack resumes inside its own call). */
  private async drive(entry: Promise<{ text: string } | { error: QuickJSHandle }> | null) {
    try {
      if (entry) {
        const r = await entry;
        if (this.disposed) return;
        if ("error" in r) { const f = this.failure(r.error); r.error.dispose(); this.finish(f); return; }
        if (this.early(r.text)) return;
      }
      while (!this.outcome && !this.disposed) {
        for (const [d, text] of this.arrived.splice(0)) {
          this.vm.newString(text).consume((h) => d.resolve(h));
          d.dispose();
        }
        let j = this.direct.jobs();
        if (j instanceof Promise) j = await j;
        if (this.disposed) return;
        if ("error" in j) {
          const isDone = this.vm.callFunction(this.isDoneFn, this.vm.undefined, j.error);
          const done = !isDone.error && this.vm.dump(isDone.value) === true;
          if (isDone.error) isDone.error.dispose(); else isDone.value.dispose();
          const failure = done ? null : this.failure(j.error);
          j.error.dispose();
          if (failure) { this.finish(failure); return; }
          continue;
        }
        if (this.outcome || this.arrived.length || j.ran > 0) continue;
        if (!this.awaiting && this.pending.size === 0) { this.finish({ kind: "success", raw: "jnull", status: this.status, headers: this.headers }); return; }
        // nothing to run until an answer comes
        this.quiet();
        await new Promise<void>((r) => { this.wakeDriver = r; });
        this.wakeDriver = null;
        if (this.outcome || this.disposed) return;
        this.enter();
      }
    } catch (err) {
      this.finish({ kind: "failed", error: `the code engine failed: ${err instanceof Error ? err.message : String(err)}` });
    } finally {
      if (!this.suspended) this.quiet();
    }
  }

  /** Ends the current run (a stream service being stopped). */
  abort(reason: string) { this.finish({ kind: "failed", error: reason }); }

  /** Why a run was stopped at the end of its slice. */
  /** Past its slice while other systems' code waits for a worker. */
  private lateForOthers() { return contended?.[0] === 1 && Date.now() > this.sliceDeadline; }

  /** A blocking call's answer that ended the run (null: its time ran out). */
  private stoppedByCall(r: null | { stopped: string }): string {
    this.halted = true;
    this.finish(r === null ? this.timedOut() : { kind: "failed", error: r.stopped });
    return STOPPED;
  }

  private stoppedForOthers(): string {
    return `stopped: it ran longer than ${this.limits.sliceMs} ms without a call while other systems' code waited for its worker (--code-slice-ms)`;
  }

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
      // half-run callback) is its timeout
      if (Date.now() >= this.runDeadline) o = this.timedOut();
      else if (this.preempted && /interrupted/.test(o.error)) o = { kind: "failed", error: this.stoppedForOthers() };
    }
    this.outcome = o;
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    // a run that failed, is suspended, or left host calls or jobs behind may have left state:
    // never reuse it (its lane goes whole, with whatever it held)
    if (o.kind === "failed" || this.suspended || this.pending.size > 0 || this.arrived.length > 0 || (!this.disposed && this.rt.hasPendingJob())) this.broken = true;
    const resolve = this.resolveRun;
    this.resolveRun = null;
    this.hooks = null;
    this.wakeDriver?.();
    if (this.suspended) this.quiet(); // nothing will resume it
    resolve(o);
  }

  private errorText(h: QuickJSHandle): string {
    try {
      const e = this.vm.dump(h) as { name?: string; message?: string; stack?: string } | string;
      if (typeof e === "string") return e;
      if (e && typeof e === "object") return `${e.name ?? "Error"}: ${e.message ?? JSON.stringify(e)}`;
      return String(e);
    } catch { return "error"; }
  }

  /** Lets the sandbox go. A lane that is suspended, broken or mid-call is never freed piece by
   *  piece (QuickJS asserts its objects are gone, and a suspended stack still holds some): the
   *  whole instance, heap and all, is left to the garbage collector. */
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.hooks = null;
    this.pending.clear();
    this.arrived.length = 0;
    this.quietWaiters.splice(0).forEach((w) => w());
    this.wakeDriver?.();
  }
}
