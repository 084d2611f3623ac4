// A small bounded cache whose entries expire after a fixed time. Used where a read is on the hot
// path of every request (token -> principal, system, schema); writers on this node delete the
// entry at once, other nodes of a multi-node platform see the change within `ttlMs`.
export class TtlCache<K, V> {
  private readonly map = new Map<K, { v: V; until: number }>();
  constructor(private readonly ttlMs: number, private readonly max = 10_000) {}

  /** `now` may be passed by a caller that has just read the clock. */
  get(k: K, now = Date.now()): V | undefined {
    const e = this.map.get(k);
    if (!e) return undefined;
    if (e.until <= now) { this.map.delete(k); return undefined; }
    return e.v;
  }

  set(k: K, v: V): V {
    if (this.map.size >= this.max && !this.map.has(k)) this.map.delete(this.map.keys().next().value as K);
    this.map.set(k, { v, until: Date.now() + this.ttlMs });
    return v;
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
  deleteWhere(pred: (v: V, k: K) => boolean) { for (const [k, e] of this.map) if (pred(e.v, k)) this.map.delete(k); }
}
