// A code worker's copy of the service cache values its runs read and write, so that a cache get
// (ClearBlade.Cache and ClearBladeAsync.Cache alike) is answered on the worker, without a round
// trip to the main thread, while nothing has changed the cache since the copy was taken: the main
// thread adds one to the cache's version in shared memory after every change (domain/
// cacheVersions.ts), and a copy at another version, or past the cache's expiry, is not used.
// Writes always go to the main thread, and what they wrote is kept. The copy is filled from the
// answers the main thread gives (their `_m`, which the sandbox never sees).
//
// Rights: what the run's user may do with a cache comes with those answers too, and holds for that
// run only (a new run asks again; a run that signs in as someone else forgets it). Anything the
// copy cannot answer (no right learned yet, a key it does not hold, a bad argument) goes to the
// main thread, which answers as it always did.
import { LruMap } from "../core/cache.ts";
import type { MirrorNote } from "../domain/cacheVersions.ts";
import type { RunHooks } from "./sandbox.ts";

/** Caches one worker keeps copies of, and the bytes of values they hold together. */
const COPIES_MAX = 64;
const COPY_BYTES_MAX = 8 << 20;
const READ = 1;

/** A cache's values at one version: JSON text, null for a key known to be missing. */
interface Copy { v: number; x: number; values: Map<string, string | null>; bytes: number }

const OK_NULL = '{"ok":true,"data":null}';
const NOT_FOUND = '{"ok":true,"data":{"found":false}}';
const found = (json: string) => `{"ok":true,"data":{"found":true,"value":${json}}}`;

/** The operations whose answers carry a note (their data is otherwise null or {found, value}). */
const NOTED = new Set(["cache.get", "cache.set", "cache.setMultiple", "cache.delete", "cache.flush"]);

export class CacheMirror {
  private readonly copies = new LruMap<string, Copy>(COPIES_MAX);
  private bytes = 0;

  constructor(private readonly versions: Int32Array, private readonly now: () => number = Date.now) {}

  /** A run's hooks answering what they can from the copies. */
  hooks(h: RunHooks): RunHooks { return new RunCaches(this, h); }

  /** The copy of a cache, if it is current. */
  current(n: MirrorNote): Copy | undefined {
    const c = this.copies.get(n.id);
    if (!c) return undefined;
    if (c.v !== Atomics.load(this.versions, n.s) || this.now() >= c.x) { this.drop(n.id, c); return undefined; }
    return c;
  }

  /** Keeps `json` (null: missing) for a key, when the note says the answer holds at the version the
   *  cache has now. */
  keep(n: MirrorNote, key: string, json: string | null) {
    if (n.v === undefined || n.x === undefined || n.v !== Atomics.load(this.versions, n.s) || this.now() >= n.x) return;
    let c = this.copies.get(n.id);
    if (c && c.v !== n.v) { this.drop(n.id, c); c = undefined; }
    if (!c) {
      c = { v: n.v, x: n.x, values: new Map(), bytes: 0 };
      const old = this.copies.set(n.id, c);
      if (old) this.bytes -= old.value.bytes;
    }
    const size = key.length + (json?.length ?? 0);
    const was = c.values.get(key);
    if (was !== undefined) { const less = key.length + (was?.length ?? 0); c.bytes -= less; this.bytes -= less; }
    c.values.set(key, json);
    c.bytes += size;
    this.bytes += size;
    // over the bound: every copy goes (they fill again from the next answers)
    if (this.bytes > COPY_BYTES_MAX) { this.copies.clear(); this.bytes = 0; }
  }

  private drop(id: string, c: Copy) {
    this.copies.delete(id);
    this.bytes -= c.bytes;
  }
}

/** One run's hooks with its rights on caches, as learned in the run. */
class RunCaches implements RunHooks {
  /** by cache name */
  private readonly grants = new Map<string, MirrorNote>();
  /** moves on whenever the run may have changed who it acts as: a note asked for before that
   *  is not kept */
  private epoch = 0;
  readonly block?: RunHooks["block"];

  constructor(private readonly m: CacheMirror, private readonly h: RunHooks) {
    if (h.block) {
      const block = h.block.bind(h);
      this.block = (op, a, deadline) => {
        const hit = this.local(op, a);
        if (hit !== undefined) return hit;
        const at = this.sent(op);
        const r = block(op, a, deadline);
        return typeof r === "string" ? this.learn(op, a, r, at) : r;
      };
    }
  }

  host(op: string, a: string, answer: (reply: string) => void, blocking: boolean) {
    const hit = this.local(op, a);
    if (hit !== undefined) { answer(hit); return; }
    const at = this.sent(op);
    this.h.host(op, a, (r) => answer(this.learn(op, a, r, at)), blocking);
  }

  log(text: string) { this.h.log(text); }

  /** A cache call is answered from memory on this node: the promise flavour blocks for it too. */
  quick(op: string) { return op.startsWith("cache.") || (this.h.quick?.(op) ?? false); }

  /** A get's answer from the copy, when the run may read the cache and the copy holds the key. */
  private local(op: string, a: string): string | undefined {
    if (op !== "cache.get" || this.grants.size === 0) return undefined;
    let args: { cache?: unknown; key?: unknown };
    try { args = JSON.parse(a) as typeof args; } catch { return undefined; }
    if (typeof args?.cache !== "string" || typeof args.key !== "string") return undefined;
    const g = this.grants.get(args.cache);
    if (!g || !(g.lv & READ)) return undefined;
    const json = this.m.current(g)?.values.get(args.key);
    return json === undefined ? undefined : json === null ? NOT_FOUND : found(json);
  }

  private sent(op: string): number {
    // signing in, out or as another token changes whose rights the run's calls have
    if (op.startsWith("user.")) { this.epoch++; this.grants.clear(); }
    return this.epoch;
  }

  /** What the main thread's answer teaches, and the answer as the sandbox gets it (without its
   *  note). */
  private learn(op: string, a: string, reply: string, at: number): string {
    if (op.startsWith("user.")) { this.epoch++; this.grants.clear(); return reply; }
    if (!NOTED.has(op) || !reply.includes('"_m":')) return reply;
    let r: { ok?: boolean; data?: { found?: boolean; value?: unknown; _m?: MirrorNote } | null };
    let args: { cache?: unknown; key?: unknown; value?: unknown; data?: Record<string, unknown> };
    try { r = JSON.parse(reply) as typeof r; args = JSON.parse(a) as typeof args; } catch { return reply; }
    const n = r.ok ? r.data?._m : undefined;
    if (!n || typeof args?.cache !== "string") return reply;
    if (at === this.epoch) this.grants.set(args.cache, n);
    if (op === "cache.get") {
      const json = r.data!.found ? JSON.stringify(r.data!.value) : null;
      if (typeof args.key === "string") this.m.keep(n, args.key, json);
      return json === null ? NOT_FOUND : found(json);
    }
    if (op === "cache.set" && typeof args.key === "string") this.m.keep(n, args.key, JSON.stringify(args.value));
    else if (op === "cache.setMultiple" && args.data) for (const [k, v] of Object.entries(args.data)) this.m.keep(n, k, JSON.stringify(v));
    return OK_NULL;
  }
}
