// The values of service caches (ClearBlade.Cache in code services): per cache a map of keys to
// JSON text, bounded in bytes, with one TTL for the whole cache that only writes restart. Kept in
// this process's memory (one node, an edge); a cluster keeps them in Redis instead
// (cluster/cacheValues.ts), with the same rules.

/** Bytes a cache may hold: its keys and values (as JSON text, UTF-8) added up. */
export const CACHE_MAX_BYTES = 1024 * 1024;
/** A key: 1 to this many characters. */
export const CACHE_KEY_MAX = 1024;

/** One cache as its values are kept. The definition's id, not its name, says which values are
 *  its: a cache deleted and made again under the same name starts empty, whatever a node that
 *  had not heard of the change yet wrote meanwhile. */
export interface CacheRef { systemKey: string; id: string; ttlMs: number }

/** What a write did: set; not set because the key exists (setnx); refused, the cache would be
 *  over its bytes (`bytes`: what it would have held). */
export type WriteOutcome = { done: "set" | "exists"; bytes: number } | { done: "full"; bytes: number };

export interface CacheValueStore {
  /** Sets the pairs (values as JSON text) and restarts the cache's TTL, unless that would take the
   *  cache past its bytes (nothing changes then). `onlyIfAbsent` (one pair): sets nothing when the
   *  key exists, the TTL restarting all the same. */
  set(c: CacheRef, pairs: [string, string][], onlyIfAbsent: boolean): Promise<WriteOutcome>;
  /** A key's JSON text, undefined when it or the whole cache is missing (or expired). */
  get(c: CacheRef, key: string): Promise<string | undefined>;
  getAll(c: CacheRef): Promise<[string, string][]>;
  keys(c: CacheRef): Promise<string[]>;
  delete(c: CacheRef, key: string): Promise<void>;
  /** Drops every value of the cache. */
  flush(c: CacheRef): Promise<void>;
  /** Drops every value of every cache of a system (the system was deleted). */
  dropSystem(systemKey: string): Promise<void>;
}

/** What a pair counts for against the cache's bytes (the same rule in Redis' scripts: Lua's # of
 *  a string is its length in bytes). */
export const pairBytes = (key: string, json: string) => Buffer.byteLength(key) + Buffer.byteLength(json);

/** Whether `key` matches a keys() pattern: `?` one character, `*` any run of them (none
 *  included), everything else itself. Linear in the common case and at worst the product of the
 *  lengths (no backtracking regular expression a pattern could blow up). */
export function keyMatches(pattern: string, key: string): boolean {
  const p = [...pattern], k = [...key];
  let i = 0, j = 0, star = -1, mark = 0;
  while (j < k.length) {
    if (i < p.length && (p[i] === "?" || (p[i] !== "*" && p[i] === k[j]))) { i++; j++; }
    else if (i < p.length && p[i] === "*") { star = i++; mark = j; }
    else if (star >= 0) { i = star + 1; j = ++mark; }
    else return false;
  }
  while (i < p.length && p[i] === "*") i++;
  return i === p.length;
}

interface MemoryCache { values: Map<string, string>; bytes: number; expiresAt: number }

/** How often (ms) caches that expired are looked for and freed, at the next call. */
const SWEEP_EVERY_MS = 60_000;

/** Cache values in this process. `now` is a steady clock in ms (tests pass their own). */
export class MemoryCacheValues implements CacheValueStore {
  private readonly caches = new Map<string, MemoryCache>();
  private sweptAt: number;

  constructor(private readonly now: () => number = () => performance.now(), private readonly maxBytes = CACHE_MAX_BYTES) {
    this.sweptAt = now();
  }

  private static id(c: CacheRef) { return `${c.systemKey}/${c.id}`; }

  /** The cache if it holds values that have not expired. */
  private live(c: CacheRef): MemoryCache | undefined {
    const now = this.now();
    if (now - this.sweptAt >= SWEEP_EVERY_MS) {
      this.sweptAt = now;
      for (const [k, m] of this.caches) if (m.expiresAt <= now) this.caches.delete(k);
    }
    const id = MemoryCacheValues.id(c);
    const m = this.caches.get(id);
    if (m && m.expiresAt <= now) { this.caches.delete(id); return undefined; }
    return m;
  }

  async set(c: CacheRef, pairs: [string, string][], onlyIfAbsent: boolean): Promise<WriteOutcome> { return this.setNow(c, pairs, onlyIfAbsent); }

  /** set, answered at once (the sets code workers made are applied in a row without a promise each). */
  setNow(c: CacheRef, pairs: [string, string][], onlyIfAbsent: boolean): WriteOutcome {
    let m = this.live(c);
    const expiresAt = this.now() + c.ttlMs;
    if (onlyIfAbsent && m?.values.has(pairs[0]![0])) { m.expiresAt = expiresAt; return { done: "exists", bytes: m.bytes }; }
    let bytes = m?.bytes ?? 0;
    for (const [k, v] of pairs) {
      const old = m?.values.get(k);
      bytes += pairBytes(k, v) - (old === undefined ? 0 : pairBytes(k, old));
    }
    if (bytes > this.maxBytes) return { done: "full", bytes };
    if (!m) this.caches.set(MemoryCacheValues.id(c), (m = { values: new Map(), bytes: 0, expiresAt }));
    for (const [k, v] of pairs) m.values.set(k, v);
    m.bytes = bytes;
    m.expiresAt = expiresAt;
    return { done: "set", bytes };
  }

  async get(c: CacheRef, key: string) { return this.live(c)?.values.get(key); }

  async getAll(c: CacheRef): Promise<[string, string][]> { return [...(this.live(c)?.values ?? [])]; }

  async keys(c: CacheRef): Promise<string[]> { return [...(this.live(c)?.values.keys() ?? [])]; }

  async delete(c: CacheRef, key: string) {
    const m = this.live(c);
    const old = m?.values.get(key);
    if (!m || old === undefined) return;
    m.values.delete(key);
    m.bytes -= pairBytes(key, old);
  }

  async flush(c: CacheRef) { this.caches.delete(MemoryCacheValues.id(c)); }

  async dropSystem(systemKey: string) {
    for (const k of this.caches.keys()) if (k.startsWith(`${systemKey}/`)) this.caches.delete(k);
  }

  /** Caches held, expired ones not yet freed included (for tests). */
  get size() { return this.caches.size; }
}
