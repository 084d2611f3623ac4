// Service cache values: the rules both stores keep (TTL of the whole cache restarted only by
// writes, setnx, the bytes bound, all-or-nothing setMultiple, scoping by system and cache id),
// run against the memory store with a clock of the test's own and against RedisCacheValues on a
// real redis-server; keys() patterns.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RedisCacheValues } from "../../../src/cluster/cacheValues.ts";
import { SharedRedis } from "../../../src/cluster/redis.ts";
import { createLogger } from "../../../src/core/log.ts";
import { type CacheRef, type CacheValueStore, keyMatches, MemoryCacheValues, pairBytes } from "../../../src/store/cacheValues.ts";
import { startRedis, type TestRedis } from "../redis.ts";
import { available, hasCommand } from "../services.ts";

const MAX = 100;
let seq = 0;
const ref = (ttlMs: number, systemKey = "s1"): CacheRef => ({ systemKey, id: `c${seq++}-${Date.now()}`, ttlMs });

/** The rules, for a store whose time moves by `pass(ms)`; `ttl` is the TTL the tests use. */
function contract(make: () => { store: CacheValueStore; pass(ms: number): Promise<void>; ttl: number }) {
  test("values round-trip as JSON text; a missing key or cache is undefined", async () => {
    const { store: s, ttl } = make();
    const c = ref(ttl);
    expect(await s.get(c, "a")).toBeUndefined();
    expect(await s.getAll(c)).toEqual([]);
    expect(await s.keys(c)).toEqual([]);
    expect(await s.set(c, [["a", '{"x":[1,null]}'], ["é", '"ü"']], false)).toEqual({ done: "set", bytes: pairBytes("a", '{"x":[1,null]}') + pairBytes("é", '"ü"') });
    expect(await s.get(c, "a")).toBe('{"x":[1,null]}');
    expect(await s.get(c, "é")).toBe('"ü"');
    expect(await s.get(c, "b")).toBeUndefined();
    expect((await s.getAll(c)).sort()).toEqual([["a", '{"x":[1,null]}'], ["é", '"ü"']]);
    expect((await s.keys(c)).sort()).toEqual(["a", "é"]);
  });

  test("setnx sets only a missing key", async () => {
    const { store: s, ttl } = make();
    const c = ref(ttl);
    expect((await s.set(c, [["k", "1"]], true)).done).toBe("set");
    expect((await s.set(c, [["k", "2"]], true)).done).toBe("exists");
    expect(await s.get(c, "k")).toBe("1");
    expect((await s.set(c, [["k", "3"]], false)).done).toBe("set");
    expect(await s.get(c, "k")).toBe("3");
  });

  test("the whole cache expires a TTL after its last write; reads and deletes do not restart it", async () => {
    const { store: s, pass, ttl } = make();
    const c = ref(ttl);
    await s.set(c, [["a", "1"], ["b", "2"]], false);
    await pass(ttl * 0.5);
    expect(await s.get(c, "a")).toBe("1"); // a read...
    await s.delete(c, "b"); // ...and a delete...
    await pass(ttl * 0.7);
    expect(await s.get(c, "a")).toBeUndefined(); // ...did not keep it
    expect(await s.getAll(c)).toEqual([]);
  });

  test("set and setnx restart the TTL (setnx even when the key exists)", async () => {
    const { store: s, pass, ttl } = make();
    const c = ref(ttl);
    await s.set(c, [["a", "1"]], false);
    await pass(ttl * 0.6);
    await s.set(c, [["b", "2"]], false);
    await pass(ttl * 0.6);
    expect(await s.get(c, "a")).toBe("1"); // 1.2 TTL after the first write, 0.6 after the last
    expect((await s.set(c, [["a", "9"]], true)).done).toBe("exists");
    await pass(ttl * 0.6);
    expect(await s.get(c, "a")).toBe("1"); // the refused setnx restarted it too
    await pass(ttl * 0.6);
    expect(await s.get(c, "a")).toBeUndefined();
    expect((await s.set(c, [["a", "new"]], true)).done).toBe("set"); // expired: a fresh, empty cache
    expect(await s.getAll(c)).toEqual([["a", "new"]]);
  });

  test("a write that would take the cache past its bytes is refused whole", async () => {
    const { store: s, ttl } = make();
    const c = ref(ttl);
    // keys and values count: 10 + 80 = 90 bytes
    expect(await s.set(c, [["k123456789", "v".repeat(80)]], false)).toEqual({ done: "set", bytes: 90 });
    expect(await s.set(c, [["a", "1234567890"]], false)).toEqual({ done: "full", bytes: 101 });
    expect(await s.get(c, "a")).toBeUndefined();
    // exactly the bound is allowed
    expect(await s.set(c, [["a", "123456789"]], false)).toEqual({ done: "set", bytes: 100 });
    // replacing a value counts the difference
    expect(await s.set(c, [["k123456789", "v".repeat(70)]], false)).toEqual({ done: "set", bytes: 90 });
    // setMultiple: all or nothing
    expect((await s.set(c, [["m1", "1234"], ["m2", "12345678"]], false)).done).toBe("full");
    expect(await s.get(c, "m1")).toBeUndefined();
    expect((await s.set(c, [["m1", "1234"], ["m2", "12"]], false)).done).toBe("set");
    // a delete frees its bytes
    await s.delete(c, "k123456789");
    expect(await s.set(c, [["big", "x".repeat(77)]], false)).toEqual({ done: "set", bytes: 100 });
    // a single value over the bound on an empty cache
    const d = ref(ttl);
    expect((await s.set(d, [["k", "x".repeat(MAX)]], false)).done).toBe("full");
    expect(await s.getAll(d)).toEqual([]);
  });

  test("flush empties one cache; caches are apart by id and system; dropSystem drops a system's", async () => {
    const { store: s, ttl } = make();
    const a = ref(ttl, "sysA"), b = ref(ttl, "sysA"), other = { ...a, systemKey: "sysB" };
    await s.set(a, [["k", "a"]], false);
    await s.set(b, [["k", "b"]], false);
    await s.set(other, [["k", "other"]], false);
    expect([await s.get(a, "k"), await s.get(b, "k"), await s.get(other, "k")]).toEqual(["a", "b", "other"]);
    await s.flush(a);
    expect([await s.get(a, "k"), await s.get(b, "k"), await s.get(other, "k")]).toEqual([undefined, "b", "other"]);
    // bytes start over after a flush
    expect((await s.set(a, [["x", "y".repeat(MAX - 1)]], false)).done).toBe("set");
    await s.dropSystem("sysA");
    expect([await s.get(a, "x"), await s.get(b, "k"), await s.get(other, "k")]).toEqual([undefined, undefined, "other"]);
  });

  test("a key named __proto__ is a key like any other", async () => {
    const { store: s, ttl } = make();
    const c = ref(ttl);
    await s.set(c, [["__proto__", '{"polluted":true}'], ["constructor", "1"]], false);
    expect(await s.get(c, "__proto__")).toBe('{"polluted":true}');
    expect((await s.keys(c)).sort()).toEqual(["__proto__", "constructor"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
}

describe("MemoryCacheValues", () => {
  let now = 1_000;
  contract(() => ({ store: new MemoryCacheValues(() => now, MAX), pass: async (ms) => { now += ms; }, ttl: 30_000 }));

  test("caches that expired are freed by the next call after the sweep interval", async () => {
    let t = 0;
    const s = new MemoryCacheValues(() => t, MAX);
    for (let i = 0; i < 5; i++) await s.set(ref(30_000), [["k", "v"]], false);
    expect(s.size).toBe(5);
    t += 31_000;
    const live = ref(30_000);
    await s.set(live, [["k", "v"]], false);
    expect(s.size).toBe(6); // not swept yet
    t += 30_000;
    expect(await s.get(live, "k")).toBeUndefined(); // 61 s: the sweep ran on this call
    expect(s.size).toBe(0);
  });
});

(available("redis-server", hasCommand("redis-server")) ? describe : describe.skip)("RedisCacheValues on redis-server", () => {
  let redis: TestRedis;
  let link: SharedRedis;
  beforeAll(async () => {
    redis = await startRedis();
    link = new SharedRedis(redis.url, createLogger("error"));
    await link.start();
  });
  afterAll(async () => { link?.stop(); await redis?.stop(); });

  contract(() => ({ store: new RedisCacheValues(link, MAX), pass: (ms) => Bun.sleep(ms), ttl: 400 }));

  test("the values of a cache live in one hash that expires with the TTL", async () => {
    const s = new RedisCacheValues(link, MAX);
    const c = ref(5_000, "sysR");
    await s.set(c, [["k", "1"]], false);
    expect(await link.send("HGET", [`outpost:cache:sysR:${c.id}`, "k"])).toBe("1");
    const pttl = Number(await link.send("PTTL", [`outpost:cache:sysR:${c.id}`]));
    expect(pttl).toBeGreaterThan(4_000);
    expect(pttl).toBeLessThanOrEqual(5_000);
  });

  test("Redis out of reach: calls fail with SHARED_STORE_UNAVAILABLE, and work again once it is back", async () => {
    const s = new RedisCacheValues(link, MAX);
    const c = ref(5_000);
    await redis.stop();
    await Bun.sleep(100);
    const err = await s.get(c, "k").then(() => null, (e) => e);
    expect(err?.kind?.code).toBe(407);
    redis = await startRedis(redis.port);
    for (let i = 0; i < 100 && !link.available; i++) await Bun.sleep(50);
    expect(link.available).toBe(true);
    await s.set(c, [["k", "back"]], false);
    expect(await s.get(c, "k")).toBe("back");
  });
});

describe("keyMatches", () => {
  test("? is one character, * any run of them, the rest literal", () => {
    const yes: [string, string][] = [["*", ""], ["*", "abc"], ["a?c", "abc"], ["a*", "a"], ["a*c", "abbbc"], ["*.json", "x.json"], ["?", "é"], ["a[b]", "a[b]"], ["**a", "a"], ["a*b*c", "axxbyyc"], ["\\d", "\\d"]];
    const no: [string, string][] = [["a?c", "ac"], ["?", ""], ["a", "ab"], ["a*c", "abd"], ["*.json", "x.jsonx"], ["a[b]", "ab"], [".", "x"], ["a*b*c", "axxbyy"]];
    for (const [p, k] of yes) expect([p, k, keyMatches(p, k)]).toEqual([p, k, true]);
    for (const [p, k] of no) expect([p, k, keyMatches(p, k)]).toEqual([p, k, false]);
  });

  test("a pattern built to backtrack still answers at once", () => {
    const t0 = performance.now();
    expect(keyMatches(`${"*a".repeat(100)}b`, "a".repeat(1000))).toBe(false);
    expect(performance.now() - t0).toBeLessThan(500);
  });
});
