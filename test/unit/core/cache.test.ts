// Bounded caches: LruMap keeps at most `max` entries and drops the least recently used first
// (get and set count as a use, peek does not); TtlCache is bounded the same way and expires.
import { describe, expect, test } from "bun:test";
import { LruMap, TtlCache } from "../../../src/core/cache.ts";

describe("LruMap", () => {
  test("holds at most max entries; a new key when full drops the oldest and returns it", () => {
    const m = new LruMap<string, number>(3);
    expect(m.set("a", 1)).toBeUndefined();
    m.set("b", 2);
    m.set("c", 3);
    expect(m.set("d", 4)).toEqual({ key: "a", value: 1 });
    expect(m.size).toBe(3);
    expect(m.has("a")).toBe(false);
    expect([...m.entries()]).toEqual([["b", 2], ["c", 3], ["d", 4]]);
  });

  test("get and set make an entry the most recently used; peek does not", () => {
    const m = new LruMap<string, number>(3);
    m.set("a", 1); m.set("b", 2); m.set("c", 3);
    expect(m.get("a")).toBe(1);
    expect(m.set("d", 4)?.key).toBe("b");
    m.set("c", 30); // an existing key: updated, nothing dropped
    expect(m.size).toBe(3);
    expect([...m.keys()]).toEqual(["a", "d", "c"]);
    expect(m.peek("a")).toBe(1);
    expect(m.set("e", 5)?.key).toBe("a");
    expect([...m.entries()]).toEqual([["d", 4], ["c", 30], ["e", 5]]);
  });

  test("a deleted entry frees its place and leaves the order of the rest", () => {
    const m = new LruMap<string, number>(3);
    m.set("a", 1); m.set("b", 2); m.set("c", 3);
    expect(m.delete("b")).toBe(true);
    expect(m.delete("b")).toBe(false);
    expect(m.set("d", 4)).toBeUndefined();
    expect(m.set("e", 5)?.key).toBe("a");
    expect(m.delete("e")).toBe(true); // the newest
    expect(m.delete("c")).toBe(true); // the oldest
    expect([...m.keys()]).toEqual(["d"]);
    m.set("f", 6);
    expect([...m.keys()]).toEqual(["d", "f"]);
    expect(m.get("missing")).toBeUndefined();
  });

  test("with max 0 it keeps nothing and returns what it was given", () => {
    const m = new LruMap<string, number>(0);
    expect(m.set("a", 1)).toEqual({ key: "a", value: 1 });
    expect(m.size).toBe(0);
    expect(m.get("a")).toBeUndefined();
  });

  test("a loop over its entries may delete the entry it is at", () => {
    const m = new LruMap<number, number>(10);
    for (let i = 0; i < 10; i++) m.set(i, i);
    for (const [k] of m.entries()) if (k % 2) m.delete(k);
    expect([...m.keys()]).toEqual([0, 2, 4, 6, 8]);
    for (const k of m.keys()) m.delete(k);
    expect(m.size).toBe(0);
    expect([...m.keys()]).toEqual([]);
  });

  test("clear empties it and it fills again in order", () => {
    const m = new LruMap<string, number>(2);
    m.set("a", 1); m.set("b", 2);
    m.clear();
    expect(m.size).toBe(0);
    expect(m.get("a")).toBeUndefined();
    m.set("c", 3); m.set("d", 4);
    expect(m.set("e", 5)?.key).toBe("c");
    expect([...m.keys()]).toEqual(["d", "e"]);
  });

  test("after long churn it still drops exactly the least recently used, within its bound", () => {
    const max = 100;
    const m = new LruMap<number, number>(max);
    const model: number[] = []; // keys, least recently used first
    let next = 0;
    for (let i = 0; i < 20_000; i++) {
      const r = (i * 7919) % 10;
      if (r < 5 || model.length === 0) {
        const dropped = m.set(next, next);
        if (model.length === max) expect(dropped?.key).toBe(model.shift()!);
        else expect(dropped).toBeUndefined();
        model.push(next++);
      } else if (r < 8) {
        const k = model[(i * 31) % model.length]!;
        expect(m.get(k)).toBe(k);
        model.splice(model.indexOf(k), 1);
        model.push(k);
      } else {
        const k = model[(i * 13) % model.length]!;
        m.delete(k);
        model.splice(model.indexOf(k), 1);
      }
      expect(m.size).toBeLessThanOrEqual(max);
    }
    expect([...m.keys()]).toEqual(model);
  });
});

describe("TtlCache", () => {
  test("holds at most max entries, dropping the least recently read or written", () => {
    const c = new TtlCache<string, number>(60_000, 2);
    c.set("a", 1); c.set("b", 2);
    expect(c.get("a")).toBe(1);
    c.set("c", 3);
    expect(c.get("b")).toBeUndefined();
    expect(c.get("a")).toBe(1);
    expect(c.get("c")).toBe(3);
  });

  test("an entry past its time is gone and frees its place", () => {
    const c = new TtlCache<string, number>(1_000, 2);
    c.set("a", 1); c.set("b", 2);
    expect(c.get("a", Date.now() + 2_000)).toBeUndefined();
    c.set("c", 3);
    expect(c.get("b")).toBe(2);
    expect(c.get("c")).toBe(3);
  });

  test("pruneExpired drops expired entries from the least recently used end, up to the first live one", () => {
    const c = new TtlCache<string, number>(1_000, 10);
    c.set("a", 1); c.set("b", 2); c.set("c", 3);
    expect(c.get("a")).toBe(1); // now the most recently used: order b, c, a
    expect(c.pruneExpired(Date.now() - 5_000)).toBe(0);
    expect(c.pruneExpired(Date.now() + 2_000)).toBe(3);
    expect(c.size).toBe(0);
  });

  test("a swept cache empties itself once its entries expire; an unswept one keeps them until read", async () => {
    const swept = new TtlCache<string, number>(50, 10, true);
    const kept = new TtlCache<string, number>(50, 10);
    for (const c of [swept, kept]) { c.set("a", 1); c.set("b", 2); }
    const until = Date.now() + 2_000;
    while (swept.size > 0 && Date.now() < until) await Bun.sleep(10);
    expect(swept.size).toBe(0);
    expect(kept.size).toBe(2);
    swept.set("c", 3); // a set after the sweep stopped starts it again
    while (swept.size > 0 && Date.now() < until + 2_000) await Bun.sleep(10);
    expect(swept.size).toBe(0);
  });

  test("deleteWhere drops every matching entry", () => {
    const c = new TtlCache<string, number>(60_000, 10);
    for (let i = 0; i < 6; i++) c.set(`k${i}`, i);
    c.deleteWhere((v) => v % 2 === 0);
    expect([0, 1, 2, 3, 4, 5].map((i) => c.get(`k${i}`))).toEqual([undefined, 1, undefined, 3, undefined, 5]);
  });

  test("getOr loads a miss once and caches it; an undefined load is not cached", async () => {
    const c = new TtlCache<string, number>(60_000, 10);
    let loads = 0;
    expect(await c.getOr("a", async () => { loads++; return 7; })).toBe(7);
    expect(await c.getOr("a", async () => { loads++; return 8; })).toBe(7);
    expect(await c.getOr("b", async () => { loads++; return undefined; })).toBeUndefined();
    expect(c.get("b")).toBeUndefined();
    expect(loads).toBe(2);
  });
});
