// A code worker: a thread running the batches of steps the pool sends it (pool.ts). Each run
// holds a sandbox (a lane of its own, see sandbox.ts) while it lasts, so a run that blocks in a
// call, or waits, holds nothing else of the worker: the worker goes on with the next step. It
// keeps the sources it was sent and warm sandboxes of the services it ran; everything a run does
// outside its sandbox (the runtime API, answers) goes to the pool, which checks the caller's
// rights on the main thread.
//
// Steps run one at a time, each until its run suspends, waits or ends (a step is short: a slice
// at most), and batches one after the other, even when a step had to wait for a lane to be made.
// A short operation's classic call blocks the thread instead: posted at once, its answer read
// from shared memory (callBuffer.ts).
import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import type { MessagePort } from "node:worker_threads";
import { LruMap } from "../core/cache.ts";
import { awaitAnswer } from "./callBuffer.ts";
import { CacheMirror } from "./cacheMirror.ts";
import type { PostedSet } from "../domain/cacheVersions.ts";
import { type AnswerStep, type BatchMessage, type BlockingCallMessage, type Call, type CacheWriteMessage, type ControlMessage, type Done, encodeOutcome, type InitMessage, type ReportMessage, type RunStep, SETS_HELD_MS } from "./protocol.ts";
import { type CompiledQuickJS, holdBack, LANE_BASE_BYTES, publishDeadlines, type RunHooks, Sandbox, type SandboxLimits, type SandboxSource, SourceError } from "./sandbox.ts";

declare const self: Worker;

/** Warm sandboxes of one service at one version. */
interface Pool { st: string; idle: Sandbox[] }

/** At most this many warm sandboxes of one service: as many as its runs may wait in calls at once
 *  (each holds one), so a steady load does not make new ones (about 10 ms each). */
const POOL_MAX = 64;
const LOG_LINES_MAX = 1000;
const WARM_UP_RUNS = 6;
const BATCH_BUDGET_MS = 20;

let compiled: CompiledQuickJS | undefined;
let limits: SandboxLimits;
/** what this worker's sandboxes may take together (its share of --code-memory-mb) */
let budgetBytes = Infinity;
let watchRun: Int32Array;
let callBuffer: SharedArrayBuffer;
let largeAnswers: MessagePort;
/** copies of service cache values (absent when the node does not keep them itself) */
let cacheMirror: CacheMirror | null = null;
const sources = new Map<string, { st: string; src: SandboxSource }>();
const pools = new Map<string, Pool>();
/** idle sandboxes with their service, the least recently used dropped first (sized at init) */
let lru = new LruMap<Sandbox, string>(0);
/** runs under way: the sandbox they hold */
const runs = new Map<number, Sandbox>();
/** aborts that came before their run started here (its batch waits behind another, or for a
 *  lane to be made): the run ends as soon as it starts */
const abortedEarly = new Map<number, string>();
/** host calls waiting for their answer */
const answers = new Map<number, (text: string) => void>();
let nextCall = 0;

// what goes out with the end of the batch, or at once between batches
let done: Done[] = [];
let calls: Call[] = [];
let inBatch = false;

/** Cache sets made here and not posted yet: each was a message of its own, now they go with the
 *  worker's next message (a report, a blocking call), or alone once they have waited SETS_HELD_MS
 *  (a timer while the thread is free, the sandbox's interrupt while user code runs): calls on the
 *  main thread that wait for their tickets wait no longer than that. */
let sets: PostedSet[] = [];
let setsTimer: ReturnType<typeof setTimeout> | null = null;

function holdSet(m: PostedSet) {
  sets.push(m);
  if (!inBatch) { postSets(); return; }
  if (sets.length > 1) return;
  holdBack(Date.now() + SETS_HELD_MS, postSets);
  setsTimer = setTimeout(postSets, SETS_HELD_MS);
}

/** The sets held, taken to go with a message (undefined: none). */
function takeSets(): PostedSet[] | undefined {
  if (!sets.length) return undefined;
  const w = sets;
  sets = [];
  holdBack(Infinity, postSets);
  if (setsTimer) { clearTimeout(setsTimer); setsTimer = null; }
  return w;
}

function postSets() {
  const w = takeSets();
  if (w) postMessage(JSON.stringify({ t: "w", w } satisfies CacheWriteMessage));
}

/** Bytes of sandboxes let go since the last collection. A lane's heap goes back to the system only
 *  when the garbage collector frees it, and an idle worker allocates nothing that would make it
 *  run: so a collection follows soon after enough has been let go. */
let released = 0;
let collecting: ReturnType<typeof setTimeout> | null = null;
const COLLECT_AFTER_BYTES = 32 << 20;
function release(sb: Sandbox) {
  released += sb.cost + (16 << 20);
  sb.dispose();
  if (released >= COLLECT_AFTER_BYTES && !collecting) {
    collecting = setTimeout(() => { collecting = null; released = 0; Bun.gc(true); }, 50);
  }
}

/** The bytes the sandboxes of this worker take, running and idle. */
function heap(): number {
  let n = 0;
  for (const sb of runs.values()) n += sb.cost;
  for (const [sb] of lru.entries()) n += sb.cost;
  return n;
}

function report(t: "e" | "u", rest?: number) {
  const m: ReportMessage = { t, heap: heap(), warm: lru.size, d: done, c: calls };
  if (rest !== undefined) m.r = rest;
  const w = takeSets();
  if (w) m.w = w;
  done = [];
  calls = [];
  postMessage(JSON.stringify(m));
}

/** Makes room for one more sandbox: idle ones go first; throws when running ones fill the budget. */
function room() {
  let used = heap();
  for (const [sb, key] of lru.entries()) {
    if (used + LANE_BASE_BYTES <= budgetBytes) return;
    used -= sb.cost;
    lru.delete(sb);
    const p = pools.get(key);
    if (p) p.idle.splice(p.idle.indexOf(sb), 1);
    release(sb);
  }
  if (used + LANE_BASE_BYTES > budgetBytes) {
    throw new Error(`the code engine's memory is taken by the ${runs.size} runs under way on this worker (raise --code-memory-mb)`);
  }
}

/** A warm sandbox of the service at that version, if one is idle. */
function warm(key: string, st: string): Sandbox | undefined {
  const pool = pools.get(key);
  if (pool && pool.st === st) {
    const sb = pool.idle.pop();
    if (sb) lru.delete(sb);
    return sb;
  }
  if (pool) drop(key);
  return undefined;
}

/** A new sandbox of the service (about 10 ms). */
function open(key: string, st: string): Promise<Sandbox> {
  const s = sources.get(key);
  if (!s || s.st !== st) return Promise.reject(new Error(`no source for ${key}`));
  try { room(); } catch (e) { return Promise.reject(e); }
  return Sandbox.open(s.src, limits, compiled);
}

function checkin(key: string, st: string, sb: Sandbox) {
  let pool = pools.get(key);
  if (pool && pool.st !== st) { drop(key); pool = undefined; }
  if (!pool) pools.set(key, (pool = { st, idle: [] }));
  // a sandbox whose heap grew is not kept: its memory goes back with it
  if (sb.broken || pool.idle.length >= POOL_MAX || !sources.has(key) || sb.cost > 2 * LANE_BASE_BYTES) { release(sb); return; }
  pool.idle.push(sb);
  // the warm sandboxes of all services together are bounded: the least recently used go first
  const old = lru.set(sb, key);
  if (old) {
    const p = pools.get(old.value);
    if (p) p.idle.splice(p.idle.indexOf(old.key), 1);
    release(old.key);
  }
}

/** Drops the idle sandboxes of a service. */
function drop(key: string) {
  const pool = pools.get(key);
  if (!pool) return;
  for (const sb of pool.idle) { lru.delete(sb); release(sb); }
  pools.delete(key);
}

/** Starts a run; a promise only while it must wait (for a sandbox to be made, or for its code to
 *  stop running): a warm sandbox and a run that ends at once take no turn of the event loop. */
function start(s: RunStep, contexts: string[]): Promise<void> | null {
  const early = abortedEarly.get(s.id);
  if (early !== undefined) { abortedEarly.delete(s.id); done.push({ id: s.id, o: "f" + early }); return null; }
  const sb = warm(s.key, s.st);
  if (sb) return begin(s, contexts, sb);
  return open(s.key, s.st).then((sb) => begin(s, contexts, sb) ?? undefined, (e) => {
    done.push({ id: s.id, o: "f" + (e instanceof SourceError ? e.message : `could not load the service (${e instanceof Error ? e.message : String(e)})`) });
  });
}

function begin(s: RunStep, contexts: string[], sb: Sandbox): Promise<void> | null {
  const logs: string[] | null = s.lg ? [] : null;
  /** its host calls: those still unanswered when it ends are forgotten */
  const own: number[] = [];
  const abortedMeanwhile = abortedEarly.get(s.id);
  if (abortedMeanwhile !== undefined) {
    abortedEarly.delete(s.id);
    checkin(s.key, s.st, sb);
    done.push({ id: s.id, o: "f" + abortedMeanwhile });
    return null;
  }
  runs.set(s.id, sb);
  const runHooks: RunHooks = {
    host: (op, a, answer) => {
      const c = (nextCall = (nextCall + 1) | 0); // (an Int32 in the call buffer)
      answers.set(c, answer);
      own.push(c);
      calls.push({ id: s.id, c, op, a });
    },
    block: (op, a, deadline) => {
      const c = (nextCall = (nextCall + 1) | 0);
      const m: BlockingCallMessage = { t: "k", id: s.id, c, op, a };
      const w = takeSets();
      if (w) m.w = w;
      postMessage(JSON.stringify(m));
      return awaitAnswer(callBuffer, largeAnswers, c, deadline);
    },
    log: (text) => { if (logs && logs.length < LOG_LINES_MAX) logs.push(text); },
  };
  const hooks = cacheMirror ? cacheMirror.hooks(runHooks, s.rk) : runHooks;
  // the pool has already answered a run whose deadline passed while it queued; one that passes
  // now still starts, and is interrupted at once
  const timeoutMs = s.dl ? Math.max(1, s.dl - Date.now()) : 0;
  sb.run(s.e, { context: contexts[s.cx]!, params: s.p, instanceId: s.in }, hooks, timeoutMs, (o) => {
    runs.delete(s.id);
    for (const c of own) answers.delete(c);
    checkin(s.key, s.st, sb);
    const d: Done = { id: s.id, o: encodeOutcome(o) };
    if (o.kind !== "failed") {
      if (o.status !== undefined) d.st = o.status;
      if (o.headers) d.h = o.headers;
    }
    if (logs) d.lg = logs;
    done.push(d);
    if (!inBatch) report("u");
  });
  return sb.settled();
}

/** The engine compiles the module's code further as it first runs (for all workers at once), so
 *  the first sandboxes take hundreds of ms: a few throwaway ones, made before the worker takes
 *  runs, pay for that (for a later worker, it is quick). */
async function warmUp() {
  const hooks: RunHooks = { host: (_op, _a, answer) => answer('{"ok":true,"data":null}'), log: () => {} };
  const src: SandboxSource = { libraries: [], service: { name: "warm", code: "function warm(req, resp){ resp.success(req.params.n) }" }, meta: {} };
  for (let i = 0; i < WARM_UP_RUNS; i++) {
    const sb = await Sandbox.open(src, limits, compiled);
    await sb.run("warm", { context: "{}", params: `{"n":${i}}`, instanceId: "" }, hooks, 1_000);
    release(sb);
  }
}

function answer(s: AnswerStep): Promise<void> | null {
  const a = answers.get(s.c);
  if (!a) return null; // its run is over
  answers.delete(s.c);
  a(s.x);
  return runs.get(s.id)?.settled() ?? null;
}

async function batch(m: BatchMessage) {
  if (m.drop) for (const k of m.drop) sources.delete(k);
  if (m.src) for (const k in m.src) { const [st, src] = m.src[k]!; sources.set(k, { st, src }); }
  inBatch = true;
  const t0 = Date.now();
  let i = 0;
  try {
    // a batch that has run for a while hands back what it has not started, so the worker goes
    // back to the pool and the other systems' steps wait at most about one slice
    for (; i < m.s.length && (i === 0 || Date.now() - t0 < BATCH_BUDGET_MS); i++) {
      const s = m.s[i]!;
      watchRun[2] = s.id;
      watchRun[3] = i;
      try {
        const waiting = s.k === "r" ? start(s, m.cx) : answer(s);
        if (waiting) await waiting;
      } catch (err) {
        // the engine itself failed in this step (the thread's own stack ran out in code that
        // recursed deeply, say): the run fails and its sandbox goes, the batch goes on
        const sb = runs.get(s.id);
        runs.delete(s.id);
        if (sb) { sb.broken = true; sb.abort(`the code engine failed: ${err instanceof Error ? err.message : String(err)}`); }
        else if (s.k === "r") done.push({ id: s.id, o: `fthe code engine failed: ${err instanceof Error ? err.message : String(err)}` });
      }
    }
  } finally {
    inBatch = false;
    report("e", i < m.s.length ? i : undefined);
  }
}

function control(m: ControlMessage) {
  if (m.t === "abort") {
    const sb = runs.get(m.id);
    if (sb) sb.abort(m.why);
    else if (abortedEarly.size < 10_000) abortedEarly.set(m.id, m.why);
  }
  else if (m.t === "forget") {
    for (const k of [...pools.keys()]) if (k === m.key || (m.key.endsWith("/") && k.startsWith(m.key))) drop(k);
    for (const k of [...sources.keys()]) if (k === m.key || (m.key.endsWith("/") && k.startsWith(m.key))) sources.delete(k);
  }
}

/** Lowers this thread's scheduling priority by `nice` (on Linux a thread's id is taken for a
 *  process id by setpriority, and lowering needs no privilege). Elsewhere the worker keeps the
 *  process's priority. */
function lowerPriority(nice: number) {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + nice));
  } catch { /* not Linux: the process's priority */ }
}

/** Batches one after the other: one may wait for a lane to be made while the next arrives. */
let queue: Promise<void> = Promise.resolve();

self.onmessage = (e: MessageEvent) => {
  if (typeof e.data !== "string") {
    const init = e.data as InitMessage;
    limits = init.limits;
    if (init.nice) lowerPriority(init.nice);
    budgetBytes = init.heapMaxBytes;
    compiled = init.module;
    lru = new LruMap(init.warmMax);
    publishDeadlines(new Float64Array(init.watch, 0, 1), new Int32Array(init.watch, 16, 1));
    watchRun = new Int32Array(init.watch);
    callBuffer = init.calls;
    largeAnswers = init.large;
    if (init.cacheVersions) cacheMirror = new CacheMirror(new Int32Array(init.cacheVersions), Date.now, holdSet);
    queue = queue.then(async () => {
      await warmUp();
      postMessage(JSON.stringify({ t: "ready", heap: heap() }));
    });
    return;
  }
  const m = JSON.parse(e.data) as BatchMessage | ControlMessage;
  // a control message acts at once: between events no user code runs (every step has settled)
  if (m.t === "b") queue = queue.then(() => batch(m)).catch((err) => { console.error("code worker: a batch failed", err); });
  else control(m);
};
