// A code worker's copy of the service cache values its runs read and write, so that a cache get
// (ClearBlade.Cache and ClearBladeAsync.Cache alike) is answered on the worker, without a round
// trip to the main thread, while nothing has changed the cache since the copy was taken: the main
// thread adds one to the cache's version in shared memory after every change (domain/
// cacheVersions.ts), and a copy at another version, or past the cache's expiry, is not used.
// The copy is filled from the answers the main thread gives (their `_m`, which the sandbox never
// sees) and from the run's own writes.
//
// A set is made here, without waiting for the main thread, when the worker already knows the
// run's right to write (remembered for its rights key, below) and the value passes the checks
// the main thread makes: it takes a ticket, reserves the pair's bytes under the cache's limit,
// bumps the version (other workers' copies go) and posts the set (with the worker's next
// message, worker.ts), which the main thread applies in ticket order before anything else it does
// with the cache (domain/cacheVersions.ts). Any other set, and every other write, goes to the
// main thread, which answers with its errors.
//
// Rights: what the run's user may do with a cache comes with those answers too. The main thread
// decides them; the worker remembers the decision for later runs with the same roles (the run's
// `rk`) only while no role, permission or cache definition has changed since it was asked (the
// rights count in shared memory), so a change holds for the next call anywhere. A run that signs
// in as someone else forgets what it learned and teaches nothing. Anything the copy cannot answer
// (no right learned yet, a key it does not hold, a bad argument) goes to the main thread, which
// answers as it always did.
import { LruMap } from "../core/cache.ts";
import { jsonTooDeep } from "../core/jsonDepth.ts";
import { BOUND_BASE, ISSUED_BASE, type MirrorNote, type PostedSet, RIGHTS_SLOT } from "../domain/cacheVersions.ts";
import { CACHE_KEY_MAX, CACHE_MAX_BYTES, pairBytes } from "../store/cacheValues.ts";
import type { RunHooks } from "./sandbox.ts";

/** Caches one worker keeps copies of, and the bytes of values they hold together. */
const COPIES_MAX = 64;
const COPY_BYTES_MAX = 8 << 20;
/** Rights remembered: for this many roles' keys, on this many caches each. */
const RIGHTS_KEYS_MAX = 256;
const RIGHTS_CACHES_MAX = 64;
const READ = 1;
/** create or update: either lets a run set a key */
const WRITE = 2 | 4;

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
  /** by rights key: the rights count they were decided at, and the notes (rights) by cache name */
  private readonly rights = new LruMap<string, { at: number; grants: Map<string, MirrorNote> }>(RIGHTS_KEYS_MAX);

  /** `post`: sends a set made here to the main thread (none: every set goes there). */
  constructor(private readonly versions: Int32Array, private readonly now: () => number = Date.now, private readonly post?: (m: PostedSet) => void) {}

  /** A run's hooks answering what they can from the copies; `rk`: whose rights the run has. */
  hooks(h: RunHooks, rk?: string): RunHooks { return new RunCaches(this, h, rk); }

  /** The rights count now (read before a call is sent: an answer is remembered only if it still is). */
  rightsCount(): number { return Atomics.load(this.versions, RIGHTS_SLOT); }

  /** What runs with these rights were told, while nothing has changed since. */
  recall(rk: string): Map<string, MirrorNote> | undefined {
    const r = this.rights.get(rk);
    if (!r) return undefined;
    if (r.at !== this.rightsCount()) { this.rights.delete(rk); return undefined; }
    return r.grants;
  }

  /** Remembers a decision asked for at rights count `at`, unless rights have changed since. */
  remember(rk: string, at: number, cache: string, n: MirrorNote) {
    if (at !== this.rightsCount()) return;
    let r = this.rights.get(rk);
    if (!r || r.at !== at) this.rights.set(rk, (r = { at, grants: new Map() }));
    if (r.grants.size >= RIGHTS_CACHES_MAX && !r.grants.has(cache)) r.grants.clear();
    r.grants.set(cache, { id: n.id, s: n.s, lv: n.lv, sk: n.sk, ttl: n.ttl });
  }

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

  /** Makes a set of a JSON value the run may write (`n`: the remembered grant) here: whether it
   *  did (false: the main thread is to make it, and answer). */
  set(n: MirrorNote, key: string, json: string): boolean {
    if (!this.post || n.sk === undefined || n.ttl === undefined) return false;
    const s = n.s, bytes = pairBytes(key, json);
    // the ticket first: a call the main thread gets after this waits for it (taken, it is
    // always posted, given up when the set goes to the main thread after all)
    const ticket = Atomics.add(this.versions, ISSUED_BASE + s, 1);
    // counted as if the key were new: the bound stays an upper bound of the slot's bytes
    if (Atomics.add(this.versions, BOUND_BASE + s, bytes) + bytes > CACHE_MAX_BYTES) {
      Atomics.sub(this.versions, BOUND_BASE + s, bytes);
      this.post({ s, n: ticket });
      return false;
    }
    const at = this.now(), v = (Atomics.add(this.versions, s, 1) + 1) | 0;
    this.post({ s, n: ticket, sk: n.sk, id: n.id, ttl: n.ttl, k: key, j: json, r: bytes, at });
    // the copy goes on at the new version when it held the one before (nothing else came
    // between); otherwise a new one holds this key alone
    const c = this.copies.get(n.id);
    if (c && ((c.v + 1) | 0) === v && at < c.x) { c.v = v; c.x = at + n.ttl; }
    this.keep({ ...n, v, x: at + n.ttl }, key, json);
    return true;
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
  /** whose rights the run has while it has not signed in as someone else (undefined after) */
  private rk: string | undefined;
  readonly block?: RunHooks["block"];

  constructor(private readonly m: CacheMirror, private readonly h: RunHooks, rk?: string) {
    this.rk = rk;
    const known = rk === undefined ? undefined : m.recall(rk);
    if (known) for (const [name, n] of known) this.grants.set(name, n);
    if (h.block) {
      const block = h.block.bind(h);
      this.block = (op, a, deadline) => {
        const hit = this.local(op, a);
        if (hit !== undefined) return hit;
        const rights = this.m.rightsCount(), at = this.sent(op);
        const r = block(op, a, deadline);
        return typeof r === "string" ? this.learn(op, a, r, at, rights) : r;
      };
    }
  }

  host(op: string, a: string, answer: (reply: string) => void, blocking: boolean) {
    const hit = this.local(op, a);
    if (hit !== undefined) { answer(hit); return; }
    const rights = this.m.rightsCount(), at = this.sent(op);
    this.h.host(op, a, (r) => answer(this.learn(op, a, r, at, rights)), blocking);
  }

  log(text: string) { this.h.log(text); }

  /** A cache call is answered from memory on this node: the promise flavour blocks for it too. */
  quick(op: string) { return op.startsWith("cache.") || (this.h.quick?.(op) ?? false); }

  /** A get's answer from the copy, when the run may read the cache and the copy holds the key;
   *  a set's, when it was made here. */
  private local(op: string, a: string): string | undefined {
    if (op === "cache.set" ? this.rk === undefined : op !== "cache.get" || this.grants.size === 0) return undefined;
    let args: { cache?: unknown; key?: unknown; value?: unknown };
    try { args = JSON.parse(a) as typeof args; } catch { return undefined; }
    if (typeof args?.cache !== "string" || typeof args.key !== "string") return undefined;
    if (op === "cache.get") {
      const json = this.get(args.cache, args.key);
      return json === undefined ? undefined : json === "" ? NOT_FOUND : found(json);
    }
    if (args.value === undefined) return undefined;
    return this.set(args.cache, args.key, JSON.stringify(args.value)) ? OK_NULL : undefined;
  }

  /** A cache get or set the sandbox makes without the generic call's JSON (see RunHooks.cache). */
  cache(op: "get" | "set", cache: string, key: string, json: string): string | undefined {
    if (op === "get") return this.get(cache, key);
    return json !== "" && this.set(cache, key, json) ? "" : undefined;
  }

  /** A key's value in the copy as JSON ("" when it is known missing), when the run may read it. */
  private get(cache: string, key: string): string | undefined {
    const g = this.grants.get(cache);
    if (!g || !(g.lv & READ)) return undefined;
    const json = this.m.current(g)?.values.get(key);
    return json === null ? "" : json;
  }

  /** A set made here: only with the right remembered for the run's rights key (so decided at
   *  the rights count now), and a key and value the main thread would take. */
  private set(cache: string, key: string, json: string): boolean {
    if (this.rk === undefined || !key.length || key.length > CACHE_KEY_MAX) return false;
    const g = this.m.recall(this.rk)?.get(cache);
    if (!g || !(g.lv & WRITE)) return false;
    if (json.length > CACHE_MAX_BYTES || jsonTooDeep(json) || !this.m.set(g, key, json)) return false;
    // (what the run learns of its rights stays: the grant is the one it would be told)
    this.grants.set(cache, g);
    return true;
  }

  private sent(op: string): number {
    // signing in, out or as another token changes whose rights the run's calls have
    if (op.startsWith("user.")) this.forget();
    return this.epoch;
  }

  /** What the main thread's answer teaches, and the answer as the sandbox gets it (without its
   *  note). */
  private learn(op: string, a: string, reply: string, at: number, rights: number): string {
    if (op.startsWith("user.")) { this.forget(); return reply; }
    if (!NOTED.has(op) || !reply.includes('"_m":')) return reply;
    let r: { ok?: boolean; data?: { found?: boolean; value?: unknown; _m?: MirrorNote } | null };
    let args: { cache?: unknown; key?: unknown; value?: unknown; data?: Record<string, unknown> };
    try { r = JSON.parse(reply) as typeof r; args = JSON.parse(a) as typeof args; } catch { return reply; }
    const n = r.ok ? r.data?._m : undefined;
    if (!n || typeof args?.cache !== "string") return reply;
    if (at === this.epoch) {
      this.grants.set(args.cache, n);
      if (this.rk !== undefined) this.m.remember(this.rk, rights, args.cache, n);
    }
    if (op === "cache.get") {
      const json = r.data!.found ? JSON.stringify(r.data!.value) : null;
      if (typeof args.key === "string") this.m.keep(n, args.key, json);
      return json === null ? NOT_FOUND : found(json);
    }
    if (op === "cache.set" && typeof args.key === "string") this.m.keep(n, args.key, JSON.stringify(args.value));
    else if (op === "cache.setMultiple" && args.data) for (const [k, v] of Object.entries(args.data)) this.m.keep(n, k, JSON.stringify(v));
    return OK_NULL;
  }

  /** The run may act as someone else from now on: what it knew of its rights goes, and what it
   *  learns is its own. */
  private forget() {
    this.epoch++;
    this.grants.clear();
    this.rk = undefined;
  }
}
