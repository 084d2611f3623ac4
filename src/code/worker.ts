// A code worker: a thread with its own QuickJS module and wasm heap, running the batches of steps
// the pool sends it (pool.ts). It keeps the sources it was sent and warm sandboxes of the services
// it ran; everything a run does outside its sandbox (the runtime API, answers) goes to the pool,
// which checks the caller's rights on the main thread.
import type { QuickJSWASMModule } from "quickjs-emscripten";
import { LruMap } from "../core/cache.ts";
import { type AnswerStep, type BatchMessage, type Call, type ControlMessage, type Done, encodeOutcome, type InitMessage, type ReportMessage, type RunStep } from "./protocol.ts";
import { heapBytes, publishDeadlines, quickjs, type RunHooks, Sandbox, type SandboxLimits, type SandboxSource, SourceError } from "./sandbox.ts";

declare const self: Worker;

/** Warm sandboxes of one service at one version. */
interface Pool { st: string; idle: Sandbox[] }

/** At most this many warm sandboxes of one service. */
const POOL_MAX = 16;
const LOG_LINES_MAX = 1000;
const WARM_UP_RUNS = 6;
const BATCH_BUDGET_MS = 20;

let qjs: QuickJSWASMModule;
let limits: SandboxLimits;
let watchRun: Int32Array;
const sources = new Map<string, { st: string; src: SandboxSource }>();
const pools = new Map<string, Pool>();
/** idle sandboxes with their service, the least recently used dropped first (sized at init) */
let lru = new LruMap<Sandbox, string>(0);
/** runs under way: the sandbox they hold */
const runs = new Map<number, Sandbox>();
/** host calls waiting for their answer */
const answers = new Map<number, (text: string) => void>();
let nextCall = 0;

// what goes out with the end of the batch, or at once between batches
let done: Done[] = [];
let calls: Call[] = [];
let inBatch = false;

function report(t: "e" | "u", rest?: number) {
  const m: ReportMessage = { t, heap: heapBytes(), warm: lru.size, d: done, c: calls };
  if (rest !== undefined) m.r = rest;
  done = [];
  calls = [];
  postMessage(JSON.stringify(m));
}

function checkout(key: string, st: string): Sandbox {
  const pool = pools.get(key);
  if (pool && pool.st === st) {
    const sb = pool.idle.pop();
    if (sb) { lru.delete(sb); return sb; }
  } else if (pool) drop(key);
  const s = sources.get(key);
  if (!s || s.st !== st) throw new Error(`no source for ${key}`);
  return Sandbox.open(qjs, s.src, limits);
}

function checkin(key: string, st: string, sb: Sandbox) {
  let pool = pools.get(key);
  if (pool && pool.st !== st) { drop(key); pool = undefined; }
  if (!pool) pools.set(key, (pool = { st, idle: [] }));
  if (sb.broken || pool.idle.length >= POOL_MAX || !sources.has(key)) { sb.dispose(); return; }
  pool.idle.push(sb);
  // the warm sandboxes of all services together are bounded: the least recently used go first
  const old = lru.set(sb, key);
  if (old) {
    const p = pools.get(old.value);
    if (p) p.idle.splice(p.idle.indexOf(old.key), 1);
    old.key.dispose();
  }
}

/** Drops the idle sandboxes of a service. */
function drop(key: string) {
  const pool = pools.get(key);
  if (!pool) return;
  for (const sb of pool.idle) { lru.delete(sb); sb.dispose(); }
  pools.delete(key);
}

function start(s: RunStep, contexts: string[]) {
  let sb: Sandbox;
  try { sb = checkout(s.key, s.st); }
  catch (e) {
    done.push({ id: s.id, o: "f" + (e instanceof SourceError ? e.message : `could not load the service (${e instanceof Error ? e.message : String(e)})`) });
    return;
  }
  const logs: string[] | null = s.lg ? [] : null;
  /** its host calls: those still unanswered when it ends are forgotten */
  const own: number[] = [];
  runs.set(s.id, sb);
  const hooks: RunHooks = {
    host: (op, a, answer) => {
      const c = ++nextCall;
      answers.set(c, answer);
      own.push(c);
      calls.push({ id: s.id, c, op, a });
    },
    log: (text) => { if (logs && logs.length < LOG_LINES_MAX) logs.push(text); },
  };
  // the pool has already answered a run whose deadline passed while it queued; one that passes
  // now still starts, and is interrupted at once
  const timeoutMs = s.dl ? Math.max(1, s.dl - Date.now()) : 0;
  sb.run(s.e, { context: contexts[s.cx]!, params: s.p, instanceId: crypto.randomUUID() }, hooks, timeoutMs, (o) => {
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
}

/** The engine compiles the module's code further as it first runs (for all workers at once), so
 *  the first sandboxes take hundreds of ms: a few throwaway ones, made before the worker takes
 *  runs, pay for that (for a later worker, it is quick). */
function warmUp() {
  const hooks: RunHooks = { host: (_op, _a, answer) => answer('{"ok":true,"data":null}'), log: () => {} };
  const src: SandboxSource = { libraries: [], service: { name: "warm", code: "function warm(req, resp){ resp.success(req.params.n) }" }, meta: {} };
  for (let i = 0; i < WARM_UP_RUNS; i++) {
    const sb = Sandbox.open(qjs, src, limits);
    sb.run("warm", { context: "{}", params: `{"n":${i}}`, instanceId: "" }, hooks, 1_000);
    sb.dispose();
  }
}

function answer(s: AnswerStep) {
  const a = answers.get(s.c);
  if (!a) return; // its run is over
  answers.delete(s.c);
  a(s.x);
}

function batch(m: BatchMessage) {
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
      if (s.k === "r") start(s, m.cx);
      else answer(s);
    }
  } finally {
    inBatch = false;
    report("e", i < m.s.length ? i : undefined);
  }
}

function control(m: ControlMessage) {
  if (m.t === "abort") runs.get(m.id)?.abort(m.why);
  else if (m.t === "forget") {
    for (const k of [...pools.keys()]) if (k === m.key || (m.key.endsWith("/") && k.startsWith(m.key))) drop(k);
    for (const k of [...sources.keys()]) if (k === m.key || (m.key.endsWith("/") && k.startsWith(m.key))) sources.delete(k);
  }
}

self.onmessage = async (e: MessageEvent) => {
  if (typeof e.data !== "string") {
    const init = e.data as InitMessage;
    limits = init.limits;
    lru = new LruMap(init.warmMax);
    publishDeadlines(new Float64Array(init.watch, 0, 1));
    watchRun = new Int32Array(init.watch);
    qjs = await quickjs(init.heapMaxBytes, init.module);
    warmUp();
    postMessage(JSON.stringify({ t: "ready", heap: heapBytes() }));
    return;
  }
  const m = JSON.parse(e.data) as BatchMessage | ControlMessage;
  if (m.t === "b") batch(m);
  else control(m);
};
