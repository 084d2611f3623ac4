// The code workers: threads (worker.ts), each with its own QuickJS module and wasm heap, that run
// services, triggers, timers and webhooks off the event loop serving HTTP, MQTT and sync.
//
// Scheduling: a worker runs one batch at a time, and a batch holds steps of one system (runs to
// start, answers to host calls of its runs waiting there). One system holds at most `maxShare` of
// the workers at once; its further runs wait in its own bounded queue (past it: 429), and free
// workers go to the system served least recently. The share is work-conserving: a worker no system
// within its share wants may be borrowed past the share by a system whose batches end quickly (a
// blocking call ends a batch too), so one tenant alone uses every core, and another tenant that
// comes waits at most about one such batch. A system whose batches run long (busy loops) keeps to
// its share. A run's host calls come here, are answered by
// the engine (rights checked on this thread), and go back in a later batch to the worker holding
// the run.
//
// Budgets: the sandboxes of a worker (each a lane with a heap of its own, see sandbox.ts) are
// bounded by its share of --code-memory-mb; a sandbox whose heap grew goes when its run ends, so
// memory a burst took returns to the system. Warm sandboxes are bounded over all workers, least
// recently used first.
//
// A short operation's classic call blocks its worker instead: the worker posts it at once and waits
// on shared memory, where the answer is written (callBuffer.ts); the worker stays in its batch,
// counted against its system's share, and a stop reaches the run through that memory.
//
// Time: a run may take until its deadline (its execution_timeout, wall clock); each of its calls
// that suspends hands the worker back to the pool (one that blocks waits at most until then). A
// stretch of user code without such calls is stopped at the end of its slice only while code of
// other systems waits for its worker (contended). A worker still in the same stretch a grace
// period past its deadline (code the interrupt does not reach) is terminated and replaced; its run
// answers as timed out.
import { MessageChannel } from "node:worker_threads";
import { LruMap } from "../core/cache.ts";
import { fail, failFor } from "../core/errors.ts";
import { newCallBuffer, writeAnswer } from "./callBuffer.ts";
import { type AnswerStep, type BatchMessage, type BlockingCallMessage, type CacheWriteMessage, type Call, type ControlMessage, decodeOutcome, type InitMessage, type ReadyMessage, type ReportMessage, type RunStep, type Step } from "./protocol.ts";
import { type Batch, MB, MIN_SHARE_BYTES, type PoolOptions, type PoolOutcome, queueFull, type Run, type RunSpec, type Slot, type Sys } from "./poolTypes.ts";
import { type CompiledQuickJS, compileQuickJS } from "./sandbox.ts";

export { defaultWorkers, isQueueFull, type PoolOptions, type PoolOutcome, type RunSpec } from "./poolTypes.ts";

/** The worker's code: next to this file when run from source; in the binary, an entry of its own
 *  under the bundle's root, src/ (scripts/build.ts). */
const WORKER_URL = import.meta.url.startsWith("file:///$bunfs/") ? "/$bunfs/root/code/worker.ts" : new URL("./worker.ts", import.meta.url).href;
/** steps in one batch: enough to carry a burst in one post, few enough that a batch ends soon */
const BATCH_MAX = 64;
/** warm sandboxes over all workers (each also within its worker's memory share) */
const WARM_MAX = 256;
/** sources one worker keeps */
const SOURCES_MAX = 256;
/** how long past its deadline a stretch of user code may run before its worker is terminated */
export const GRACE_MS = 1_000;
const WATCH_EVERY_MS = 100;
const RESPAWN_MIN_MS = 100;
const RESPAWN_MAX_MS = 10_000;
/** a system may borrow workers past its share while its batches take less than this on average */
const BORROW_MAX_MS = 5;

export class WorkerPool {
  readonly workers: number;
  /** workers one system may hold at once */
  readonly maxHold: number;
  /** each worker's heap bound */
  readonly shareBytes: number;
  private readonly slots: Slot[] = [];
  private readonly systems = new Map<string, Sys>();
  /** systems with queued runs or answers */
  private readonly waiting = new Set<Sys>();
  private readonly live = new Map<number, Run>();
  private nextId = 0;
  private served = 0;
  private pumping = false;
  private pumpScheduled = false;
  private stopped = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private backoffMs = 0;
  private readonly readyWaiters: (() => void)[] = [];
  /** the QuickJS wasm, compiled once, with the first worker (compiled code is memory an idle node
   *  would hold for nothing): a worker's start then takes tens of ms, not hundreds */
  private compiled: Promise<CompiledQuickJS | undefined> | null = null;
  /** workers terminated for not coming back (for tests and metrics) */
  killed = 0;
  /** batches handed to workers (each one post) */
  private batches = 0;

  constructor(private readonly o: PoolOptions) {
    // every worker needs a heap of its own: fewer workers rather than heaps below the minimum
    this.workers = Math.max(1, Math.min(o.workers, Math.floor((o.memoryMb * MB) / MIN_SHARE_BYTES)));
    if (this.workers < o.workers) o.log.warn("fewer code workers than asked: the code memory budget does not cover more", { asked: o.workers, workers: this.workers, memoryMb: o.memoryMb });
    this.shareBytes = Math.floor((o.memoryMb * MB) / this.workers);
    this.maxHold = Math.max(1, Math.floor(this.workers * o.maxShare));
  }

  /** Workers start with the first run (or warm()): a node that runs no code holds no worker,
   *  which is most of an idle gateway's memory otherwise. */
  start() {
    this.stopped = false;
    this.timer = setInterval(() => this.watch(), WATCH_EVERY_MS);
    this.timer.unref();
  }

  /** Starts the workers now, and resolves once they can take runs. */
  warm(): Promise<void> {
    if (!this.stopped && this.slots.length === 0) while (this.slots.length < this.workers) this.spawn();
    return this.ready();
  }

  /** Queues a run; throws THROTTLED (with retryAfterS) when its system's queue is full. */
  submit(spec: RunSpec): { id: number; done: Promise<PoolOutcome> } {
    if (this.stopped) throw fail("INTERNAL", "the code engine is stopping");
    let sys = this.systems.get(spec.system);
    if (!sys) this.systems.set(spec.system, (sys = { key: spec.system, queue: [], answers: new Map(), holding: 0, served: 0, batchMs: BORROW_MAX_MS, behind: 0 }));
    // runs of this turn not handed out yet wait only if no free worker takes them; runs behind
    // another in a batch wait as much as queued ones
    if (sys.queue.length + sys.behind >= this.o.queueMax) this.pump();
    if (sys.queue.length + sys.behind >= this.o.queueMax) throw queueFull(failFor(1, "THROTTLED", `too many runs of this system's code are waiting (${this.o.queueMax})`));
    const id = ++this.nextId;
    let resolve!: (o: PoolOutcome) => void;
    const done = new Promise<PoolOutcome>((r) => (resolve = r));
    const run: Run = { id, spec, sys, deadline: spec.timeoutMs > 0 ? Date.now() + spec.timeoutMs : 0, slot: null, over: false, resolve };
    this.live.set(id, run);
    sys.queue.push(run);
    this.waiting.add(sys);
    if (this.slots.length === 0) void this.warm();
    this.pumpSoon();
    return { id, done };
  }

  /** Runs of the system submit takes now before it refuses them (its queue is full). */
  room(system: string): number { const sys = this.systems.get(system); return sys ? this.o.queueMax - sys.queue.length - sys.behind : this.o.queueMax; }

  /** Ends a run (a stream service stopped or changed). */
  abort(id: number, why: string) {
    const run = this.live.get(id);
    if (!run) return;
    if (!run.slot) {
      run.sys.queue.splice(run.sys.queue.indexOf(run), 1);
      if (!run.sys.queue.length && !run.sys.answers.size) this.waiting.delete(run.sys);
      this.finish(run, { kind: "failed", error: why });
    } else if (run.slot.blocked && run.slot.blockedRun === id) {
      // its worker waits in a blocking call of this run: the answer stops it
      const slot = run.slot;
      writeAnswer(slot.calls, slot.large, slot.blocked, why, true);
      slot.blocked = 0;
    } else {
      run.stopping = why;
      this.post(run.slot, { t: "abort", id, why });
    }
  }

  /** Drops warm sandboxes and sources of a service (systemKey/name) or a system (systemKey/). */
  forget(key: string) {
    for (const slot of this.slots) {
      for (const k of [...slot.sources.keys()]) if (k === key || (key.endsWith("/") && k.startsWith(key))) slot.sources.delete(k);
      if (slot.ready) this.post(slot, { t: "forget", key });
    }
  }

  /** Resolves once every worker started has loaded and warmed its module (runs submitted before
   *  simply wait), or the pool stopped; at once when none has started. */
  ready(): Promise<void> {
    if (this.allReady()) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  private allReady() { return this.stopped || !this.slots.some((s) => !s.ready); }

  private wakeReady() {
    if (this.allReady()) for (const resolve of this.readyWaiters.splice(0)) resolve();
  }

  /** What the pool is doing, for tests and metrics. */
  stats() {
    let queued = 0;
    for (const s of this.systems.values()) queued += s.queue.length;
    return {
      workers: this.slots.length, busy: this.slots.filter((s) => s.batch).length, running: this.live.size - queued, queued, killed: this.killed, batches: this.batches,
      heaps: this.slots.map((s) => s.heap), warm: this.slots.reduce((n, s) => n + s.warm, 0),
    };
  }

  async stop() {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const run of [...this.live.values()]) this.finish(run, { kind: "failed", error: "the server is stopping" });
    for (const s of this.systems.values()) { s.queue.length = 0; s.answers.clear(); }
    this.waiting.clear();
    for (const slot of this.slots.splice(0)) this.end(slot);
    this.wakeReady();
  }

  // ---- workers --------------------------------------------------------------------------------

  private spawn() {
    const watch = new SharedArrayBuffer(24);
    const channel = new MessageChannel();
    const slot: Slot = {
      worker: new Worker(WORKER_URL), ready: false, batch: null, ended: false, runs: new Map(), sources: new LruMap(SOURCES_MAX),
      heap: 0, warm: 0, deadline: new Float64Array(watch, 0, 1), current: new Int32Array(watch),
      contended: new Int32Array(watch, 16, 1), calls: newCallBuffer(), large: channel.port1, blocked: 0, blockedRun: 0,
    };
    this.slots.push(slot);
    slot.worker.onmessage = (e: MessageEvent) => this.message(slot, e.data as string);
    slot.worker.onerror = (e) => { this.o.log.error("a code worker failed", { err: e.message }); this.lost(slot); };
    slot.worker.addEventListener("close", () => this.lost(slot));
    const init: InitMessage = {
      t: "init", watch, calls: slot.calls, large: channel.port2, heapMaxBytes: this.shareBytes, warmMax: Math.ceil((this.o.warmMax ?? WARM_MAX) / this.workers),
      limits: { memoryBytes: Math.min(this.o.sandboxMemoryMb * MB, this.shareBytes), sliceMs: this.o.sliceMs },
    };
    if (this.o.cacheVersions) init.cacheVersions = this.o.cacheVersions;
    if (this.o.nice) init.nice = this.o.nice;
    this.compiled ??= compileQuickJS().catch((err) => { this.o.log.warn("could not compile QuickJS once for all code workers; each compiles its own", { err }); return undefined; });
    void this.compiled.then((module) => { if (!slot.ended) slot.worker.postMessage(module ? { ...init, module } : init, [channel.port2]); });
  }

  /** Ends a worker's thread (its heap goes with it). */
  private end(slot: Slot) {
    if (slot.ended) return;
    slot.ended = true;
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    for (const s of this.systems.values()) s.answers.delete(slot);
    slot.worker.terminate();
    slot.large.close();
  }

  /** Terminates a worker stuck in user code past its deadline; its run answers as timed out. */
  private kill(slot: Slot, now: number) {
    const b = slot.batch;
    const victim = slot.current[2], at = slot.current[3]!;
    this.killed++;
    this.o.restarts?.inc({ reason: "stuck" });
    this.end(slot);
    if (b) {
      b.sys.holding--;
      b.sys.behind -= b.behind;
      b.sys.batchMs += (performance.now() - b.at - b.sys.batchMs) / 8;
      // steps after the stuck one never started: their runs go back to the front of the queue
      const again: Run[] = [];
      for (let i = at + 1; i < b.runs.length; i++) {
        const r = b.runs[i];
        if (r && !r.over) { again.push(r); slot.runs.delete(r.id); r.slot = null; }
      }
      if (again.length) { b.sys.queue.unshift(...again); this.waiting.add(b.sys); }
    }
    for (const run of [...slot.runs.values()]) {
      if (run.id === victim && b) {
        const timedOut = run.deadline > 0 && now >= run.deadline;
        this.o.log.warn("terminated a code worker stuck in a run", { service: run.spec.key, timedOut });
        this.finish(run, {
          kind: "failed", timedOut: true, killed: true,
          error: timedOut ? `execution timed out after ${run.spec.timeoutMs / 1000} s (its worker did not come back and was stopped)`
            : `ran longer than ${this.o.sliceMs} ms without yielding and could not be interrupted (its worker was stopped)`,
        });
      } else this.finish(run, { kind: "failed", error: "its worker was stopped: another run on it did not come back in time" });
    }
    if (!this.stopped) this.spawn();
    this.pump();
  }

  /** A worker that ended without being asked to. One that failed before it was ready is
   *  replaced after a pause that grows, so a worker that cannot start does not spin. */
  private lost(slot: Slot) {
    if (slot.ended) return;
    const b = slot.batch;
    this.end(slot);
    this.o.restarts?.inc({ reason: "failed" });
    if (b) { b.sys.holding--; b.sys.behind -= b.behind; }
    for (const run of [...slot.runs.values()]) this.finish(run, { kind: "failed", error: "the worker running it stopped unexpectedly" });
    if (this.stopped) return;
    if (slot.ready) { this.spawn(); this.pump(); return; }
    this.backoffMs = Math.min(RESPAWN_MAX_MS, this.backoffMs * 2 || RESPAWN_MIN_MS);
    setTimeout(() => { if (!this.stopped) this.spawn(); }, this.backoffMs).unref();
  }

  private watch() {
    const now = Date.now();
    for (const slot of [...this.slots]) {
      if (slot.batch) {
        const d = slot.deadline[0]!;
        if (d > 0 && now > d + GRACE_MS) this.kill(slot, now);
      }
    }
    // a run whose deadline passes while it waits for a worker answers at its deadline
    for (const sys of this.waiting) {
      for (let i = 0; i < sys.queue.length; i++) {
        const run = sys.queue[i]!;
        if (run.deadline && run.deadline <= now) { sys.queue.splice(i--, 1); this.finish(run, this.timedOut(run)); }
      }
      if (!sys.queue.length && !sys.answers.size) this.waiting.delete(sys);
    }
  }

  // ---- scheduling -----------------------------------------------------------------------------

  /** Runs submitted in one turn of the event loop (the requests one poll of the sockets brought)
   *  go out at the turn's end, together: one batch, one post per worker for all of them. A post
   *  wakes the worker, which on a busy machine takes the main thread's core from it (profiled:
   *  posts were a quarter of the main thread's samples, a run's own work is a few µs). */
  private pumpSoon() {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => { this.pumpScheduled = false; this.pump(); });
  }

  /** Gives free workers batches: each to the waiting system served least recently that may
   *  hold another worker; a worker none of those takes, to one that may borrow it. */
  private pump() {
    if (this.pumping || this.stopped) return;
    this.pumping = true;
    try {
      for (;;) {
        let best: Sys | null = null, bestSlot: Slot | null = null;
        for (const borrow of [false, true]) {
          for (const sys of this.waiting) {
            if ((best && sys.served >= best.served) || (sys.holding >= this.maxHold && (!borrow || sys.batchMs >= BORROW_MAX_MS))) continue;
            const slot = this.slotFor(sys);
            if (slot) { best = sys; bestSlot = slot; }
          }
          if (best) break;
        }
        if (!best || !bestSlot) break;
        this.send(bestSlot, best);
      }
      this.markContention();
    } finally {
      this.pumping = false;
    }
  }

  /** Tells each busy worker whether code of another system waits for it: answers for runs it
   *  holds, or runs that find no free worker. */
  private markContention() {
    const free = this.slots.some((s) => s.ready && !s.batch && !s.ended);
    for (const slot of this.slots) {
      const b = slot.batch;
      let waited = false;
      if (b) {
        for (const sys of this.waiting) {
          if (sys === b.sys) continue;
          if (sys.answers.get(slot)?.length || (!free && sys.queue.length && sys.holding < this.maxHold)) { waited = true; break; }
        }
      }
      slot.contended[0] = waited ? 1 : 0;
    }
  }

  /** A free worker for a system: one where its runs wait for answers, else one that holds the
   *  source of its next run, else any. */
  private slotFor(sys: Sys): Slot | null {
    let pick: Slot | null = null, warm = false;
    const head = sys.queue[0];
    for (const slot of this.slots) {
      if (!slot.ready || slot.batch || slot.ended) continue;
      if (sys.answers.get(slot)?.length) return slot;
      if (!head || warm) continue;
      warm = slot.sources.peek(head.spec.key) === head.spec.version;
      pick = slot;
    }
    return pick;
  }

  private send(slot: Slot, sys: Sys) {
    const steps: Step[] = [], runs: (Run | undefined)[] = [];
    const answers = sys.answers.get(slot);
    if (answers) {
      sys.answers.delete(slot);
      for (const a of answers) if (slot.runs.has(a.id)) { steps.push(a); runs.push(undefined); }
    }
    let src: BatchMessage["src"], drop: string[] | undefined;
    const contexts: string[] = [];
    const now = Date.now();
    while (sys.queue.length && steps.length < BATCH_MAX) {
      const run = sys.queue.shift()!;
      if (run.deadline && run.deadline <= now) { this.finish(run, this.timedOut(run)); continue; }
      const sp = run.spec;
      const had = slot.sources.peek(sp.key);
      const dropped = slot.sources.set(sp.key, sp.version);
      if (dropped) (drop ??= []).push(dropped.key);
      if (had !== sp.version) (src ??= {})[sp.key] = [sp.version, sp.source];
      let cx = contexts.indexOf(sp.context);
      if (cx < 0) cx = contexts.push(sp.context) - 1;
      const step: RunStep = { k: "r", id: run.id, key: sp.key, st: sp.version, e: sp.entry, cx, p: sp.params, dl: run.deadline, lg: sp.logs ? 1 : 0, in: sp.instanceId };
      if (sp.cacheRights !== undefined) step.rk = sp.cacheRights;
      steps.push(step);
      runs.push(run);
      run.slot = slot;
      slot.runs.set(run.id, run);
    }
    if (!sys.queue.length && !sys.answers.size) this.waiting.delete(sys);
    if (!steps.length) return;
    sys.holding++;
    sys.served = ++this.served;
    this.batches++;
    const behind = Math.max(0, runs.filter(Boolean).length - 1);
    sys.behind += behind;
    slot.batch = { sys, steps, runs, at: performance.now(), behind };
    const m: BatchMessage = { t: "b", cx: contexts, s: steps };
    if (src) m.src = src;
    if (drop) m.drop = drop;
    slot.worker.postMessage(JSON.stringify(m));
  }

  private post(slot: Slot, m: ControlMessage) {
    if (!slot.ended) slot.worker.postMessage(JSON.stringify(m));
  }

  private message(slot: Slot, data: string) {
    const m = JSON.parse(data) as ReportMessage | ReadyMessage | BlockingCallMessage | CacheWriteMessage;
    // cache sets the worker made first (what came with them may wait for them), even if it ended
    if (m.t !== "ready" && m.w) for (const w of m.w) this.o.cacheWrites?.(w);
    if (m.t === "w" || slot.ended) return;
    if (m.t === "k") { this.blockingCall(slot, m); return; }
    if (m.t === "ready") {
      slot.ready = true;
      this.backoffMs = 0;
      slot.heap = m.heap;
      this.wakeReady();
      this.pump();
      return;
    }
    slot.heap = m.heap;
    slot.warm = m.warm;
    for (const c of m.c) this.call(slot, c);
    for (const d of m.d) {
      const run = slot.runs.get(d.id);
      if (!run) continue;
      const o: PoolOutcome = decodeOutcome(d, run.spec.timeoutMs);
      if (d.lg) o.logs = d.lg;
      this.finish(run, o);
    }
    if (m.t === "e" && slot.batch) {
      const b = slot.batch;
      b.sys.holding--;
      b.sys.behind -= b.behind;
      b.sys.batchMs += (performance.now() - b.at - b.sys.batchMs) / 8;
      slot.batch = null;
      if (m.r !== undefined) this.giveBack(slot, b, m.r);
    }
    this.pump();
  }

  /** Steps of a batch the worker did not start go back to the front of their system's queues:
   *  new runs for any worker, answers for this one. */
  private giveBack(slot: Slot, b: Batch, from: number) {
    const runs: Run[] = [], answers: AnswerStep[] = [];
    for (let i = from; i < b.steps.length; i++) {
      const step = b.steps[i]!, run = b.runs[i];
      if (run) { if (!run.over) { runs.push(run); slot.runs.delete(run.id); run.slot = null; } }
      else if (step.k === "a") answers.push(step);
    }
    if (runs.length) b.sys.queue.unshift(...runs);
    if (answers.length) b.sys.answers.set(slot, [...answers, ...(b.sys.answers.get(slot) ?? [])]);
    if (runs.length || answers.length) this.waiting.add(b.sys);
  }

  /** A host call of a run: answered by the engine, sent back with the next batch for its worker. */
  private call(slot: Slot, c: Call) {
    const run = slot.runs.get(c.id);
    if (!run) return;
    const answer = (x: string) => {
      if (run.over || run.slot !== slot || slot.ended) return;
      const list = run.sys.answers.get(slot);
      if (list) list.push({ k: "a", id: c.id, c: c.c, x });
      else run.sys.answers.set(slot, [{ k: "a", id: c.id, c: c.c, x }]);
      this.waiting.add(run.sys);
      this.pump();
    };
    run.spec.host(c.op, c.a).catch((err) => JSON.stringify({ ok: false, error: { detail: String(err) } })).then(answer);
  }

  /** A host call its worker blocks on: answered into the worker's call buffer as soon as the
   *  engine has answered it, unless the worker has moved on (it gave up at the run's deadline). */
  private blockingCall(slot: Slot, c: BlockingCallMessage) {
    slot.blocked = c.c;
    slot.blockedRun = c.id;
    const answer = (x: string) => {
      if (slot.ended || slot.blocked !== c.c) return;
      slot.blocked = 0;
      writeAnswer(slot.calls, slot.large, c.c, x);
    };
    const run = slot.runs.get(c.id);
    if (!run || run.over) { answer(JSON.stringify({ ok: false, error: { detail: "the run is over" } })); return; }
    if (run.stopping !== undefined) { slot.blocked = 0; writeAnswer(slot.calls, slot.large, c.c, run.stopping, true); return; }
    run.spec.host(c.op, c.a).catch((err) => JSON.stringify({ ok: false, error: { detail: String(err) } })).then(answer);
  }

  private timedOut(run: Run): PoolOutcome {
    return { kind: "failed", error: `execution timed out after ${run.spec.timeoutMs / 1000} s`, timedOut: true };
  }

  private finish(run: Run, o: PoolOutcome) {
    if (run.over) return;
    run.over = true;
    this.live.delete(run.id);
    run.slot?.runs.delete(run.id);
    run.resolve(o);
  }
}

