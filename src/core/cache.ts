// Bounded caches: LruMap (a map of at most `max` entries, the least recently used dropped first)
// and TtlCache (an LruMap whose entries also expire after a fixed time).

interface LruEntry<K, V> { key: K; value: V; older: LruEntry<K, V> | null; newer: LruEntry<K, V> | null }

/** A map of at most `max` entries: setting a new key when full drops the least recently used
 *  (a `get` or `set` makes an entry the most recently used; `peek` does not). With `max` 0 it
 *  keeps nothing: set returns the entry it was given as the one dropped.
 *  The order is a list of its own rather than the Map's insertion order: in Bun, finding a Map's
 *  first key steps over every entry deleted before it, so a cache that drops its oldest key that
 *  way gets slower the more it has turned over (full at 20,000 entries: 40 µs an eviction). */
export class LruMap<K, V> {
  private readonly map = new Map<K, LruEntry<K, V>>();
  private oldest: LruEntry<K, V> | null = null;
  private newest: LruEntry<K, V> | null = null;
  constructor(readonly max: number) {}

  get size() { return this.map.size; }
  has(k: K) { return this.map.has(k); }

  /** The value, now the most recently used. */
  get(k: K): V | undefined {
    const e = this.map.get(k);
    if (!e) return undefined;
    if (e !== this.newest) { this.unlink(e); this.link(e); }
    return e.value;
  }

  /** The value, its place in the order unchanged. */
  peek(k: K): V | undefined { return this.map.get(k)?.value; }

  /** Sets the value, now the most recently used; returns the entry dropped to make room, if any. */
  set(k: K, v: V): { key: K; value: V } | undefined {
    const e = this.map.get(k);
    if (e) {
      e.value = v;
      if (e !== this.newest) { this.unlink(e); this.link(e); }
      return undefined;
    }
    if (this.max <= 0) return { key: k, value: v };
    let dropped: { key: K; value: V } | undefined;
    if (this.map.size >= this.max && this.oldest) {
      const o = this.oldest;
      this.unlink(o);
      this.map.delete(o.key);
      dropped = { key: o.key, value: o.value };
    }
    const n: LruEntry<K, V> = { key: k, value: v, older: null, newer: null };
    this.map.set(k, n);
    this.link(n);
    return dropped;
  }

  delete(k: K): boolean {
    const e = this.map.get(k);
    if (!e) return false;
    this.unlink(e);
    this.map.delete(k);
    return true;
  }

  clear() { this.map.clear(); this.oldest = this.newest = null; }

  /** Entries, least recently used first; the loop may delete the entry it is at. */
  *entries(): Generator<[K, V]> {
    for (let e = this.oldest; e; ) {
      const next: LruEntry<K, V> | null = e.newer;
      yield [e.key, e.value];
      e = next;
    }
  }

  /** Keys, least recently used first; the loop may delete the key it is at. */
  *keys(): Generator<K> { for (const [k] of this.entries()) yield k; }

  private unlink(e: LruEntry<K, V>) {
    if (e.older) e.older.newer = e.newer; else this.oldest = e.newer;
    if (e.newer) e.newer.older = e.older; else this.newest = e.older;
    e.older = e.newer = null;
  }

  /** Puts an unlinked entry last, as the most recently used. */
  private link(e: LruEntry<K, V>) {
    e.older = this.newest;
    if (this.newest) this.newest.newer = e; else this.oldest = e;
    this.newest = e;
  }
}

/** A small bounded cache whose entries expire after a fixed time. Used where a read is on the hot
 *  path of every request (token -> principal, system, schema); writers on this node delete the
 *  entry at once, other nodes of a multi-node platform see the change within `ttlMs`. When full,
 *  the least recently used entry goes. */
export class TtlCache<K, V> {
  private readonly map: LruMap<K, { v: V; until: number }>;
  private sweeping: ReturnType<typeof setTimeout> | null = null;
  /** `sweep`: expired entries are also dropped every `ttlMs` (see pruneExpired), for a cache
   *  whose entries are mostly set once and never read again, where they would otherwise stay
   *  until `max` pushes them out (a device's token, read once when it connects). */
  constructor(private readonly ttlMs: number, max = 10_000, private readonly sweep = false) { this.map = new LruMap(max); }

  get size() { return this.map.size; }

  /** `now` may be passed by a caller that has just read the clock. */
  get(k: K, now = Date.now()): V | undefined {
    const e = this.map.get(k);
    if (!e) return undefined;
    if (e.until <= now) { this.map.delete(k); return undefined; }
    return e.v;
  }

  set(k: K, v: V): V {
    this.map.set(k, { v, until: Date.now() + this.ttlMs });
    if (this.sweep && this.sweeping === null) this.scheduleSweep();
    return v;
  }

  /** Drops expired entries from the least recently used end, stopping at the first live one: a
   *  sweep costs what it drops, not the cache's size (an expired entry further on goes when read). */
  pruneExpired(now = Date.now()): number {
    let dropped = 0;
    for (const [k, e] of this.map.entries()) {
      if (e.until > now) break;
      this.map.delete(k);
      dropped++;
    }
    return dropped;
  }

  private scheduleSweep() {
    this.sweeping = setTimeout(() => {
      this.sweeping = null;
      this.pruneExpired();
      if (this.map.size) this.scheduleSweep();
    }, this.ttlMs);
    this.sweeping.unref?.();
  }

  /** The cached value, or the loaded one (cached unless undefined). A hit resolves without
   *  running the loader (hot paths check `get` first to skip the promise entirely). */
  getOr(k: K, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = this.get(k);
    if (hit !== undefined) return Promise.resolve(hit);
    return load().then((v) => {
      if (v !== undefined) this.set(k, v);
      else this.map.delete(k);
      return v;
    });
  }

  delete(k: K) { this.map.delete(k); }
  clear() { this.map.clear(); }
  /** Deletes every entry whose value matches. */
  deleteWhere(pred: (v: V, k: K) => boolean) { for (const [k, e] of this.map.entries()) if (pred(e.v, k)) this.map.delete(k); }
}
