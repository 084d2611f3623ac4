// The service caches' versions (cacheVersions.ts): a change's version is the one a copy may be
// kept at only when no other change came between the version read before it and its bump; the
// rights count, and the key of whose rights a run has.
import { describe, expect, test } from "bun:test";
import type { Principal } from "../../../src/auth/principal.ts";
import { BOUND_BASE, CacheVersions, cacheRightsKey, ISSUED_BASE, RIGHTS_SLOT, VERSION_SLOTS } from "../../../src/domain/cacheVersions.ts";

describe("versions", () => {
  test("a change alone gets the version it made; two that overlap, the first none and the last a version a later one replaces", () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id");
    expect(v.current(s)).toBe(0);
    const b = v.current(s);
    expect(v.bump(s, b)).toBe(1);
    expect(v.current(s)).toBe(1);
    // A reads 1, B reads 1, both write, A bumps first: A's value is not known to be the last
    const a0 = v.current(s), b0 = v.current(s);
    expect(v.bump(s, a0)).toBe(2);
    expect(v.bump(s, b0)).toBeUndefined();
    expect(v.current(s)).toBe(3); // A's 2 is not current: a copy at 2 is not used
    expect(v.bump(s)).toBeUndefined(); // a delete or flush: nothing to keep
    expect(v.current(s)).toBe(4);
  });

  test("slots come from the system and the id, in range; bumpAll moves every slot; a worker sees them through the buffer", () => {
    const v = new CacheVersions();
    const a = v.slotOf("sk", "id-1");
    expect(a).toBe(v.slotOf("sk", "id-1"));
    expect(a).toBeGreaterThanOrEqual(0);
    expect(a).toBeLessThan(VERSION_SLOTS);
    const seen = new Set(Array.from({ length: 200 }, (_, i) => v.slotOf("sk", `id-${i}`)));
    expect(seen.size).toBeGreaterThan(150); // spread, not one slot
    const before = Array.from({ length: VERSION_SLOTS }, (_, i) => v.current(i));
    v.bumpAll();
    const worker = new Int32Array(v.buffer);
    for (let i = 0; i < VERSION_SLOTS; i++) expect(Atomics.load(worker, i)).toBe(before[i]! + 1);
  });
});

describe("rights", () => {
  test("rightsChanged moves the rights count a worker reads, and no cache's version", () => {
    const v = new CacheVersions();
    const worker = new Int32Array(v.buffer);
    const s = v.slotOf("sk", "id");
    expect(Atomics.load(worker, RIGHTS_SLOT)).toBe(0);
    v.rightsChanged();
    expect(Atomics.load(worker, RIGHTS_SLOT)).toBe(1);
    expect(v.current(s)).toBe(0);
    v.bumpAll(); // values, not rights
    expect(Atomics.load(worker, RIGHTS_SLOT)).toBe(1);
  });

  test("the same roles in any order are one key; other roles, kinds or systems another; developers and edges none", () => {
    const user = (roles: string[], systemKey = "sk", id = "u1"): Principal => ({ kind: "user", systemKey, id, email: `${id}@x`, roles, tokenHash: "h" });
    const k = cacheRightsKey(user(["a", "b"]), "sk");
    expect(k).toBeDefined();
    expect(cacheRightsKey(user(["b", "a"], "sk", "u2"), "sk")).toBe(k!);
    expect(cacheRightsKey(user(["a"]), "sk")).not.toBe(k!);
    expect(cacheRightsKey(user(["a", "b"], "other"), "other")).not.toBe(k!);
    expect(cacheRightsKey({ kind: "device", systemKey: "sk", id: "d", name: "d", roles: ["a", "b"], tokenHash: "h" }, "sk")).not.toBe(k!);
    // a run in another system than the caller's: asked every time
    expect(cacheRightsKey(user(["a", "b"]), "other")).toBeUndefined();
    expect(cacheRightsKey({ kind: "developer", id: "d", email: "d@x", admin: false, tokenHash: "h" }, "sk")).toBeUndefined();
    expect(cacheRightsKey({ kind: "edge", systemKey: "sk", id: "e", name: "e", tokenHash: "h" }, "sk")).toBeUndefined();
  });
});

describe("sets a worker made (tickets)", () => {
  /** What a worker does: takes the slot's next ticket. */
  const ticket = (v: CacheVersions, slot: number) => Atomics.add(new Int32Array(v.buffer), ISSUED_BASE + slot, 1);
  const flush = () => new Promise((r) => setTimeout(r, 0));

  test("nothing issued: nothing to wait for; posted sets are applied in ticket order whatever order they come in", async () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id");
    expect(v.settled(s)).toBeUndefined();
    const t0 = ticket(v, s), t1 = ticket(v, s), t2 = ticket(v, s);
    const order: number[] = [];
    v.posted(s, t2, async () => { order.push(2); });
    v.posted(s, t1, async () => { order.push(1); });
    await flush();
    expect(order).toEqual([]); // ticket 0 has not come
    v.posted(s, t0, async () => { order.push(0); });
    await flush();
    expect(order).toEqual([0, 1, 2]);
    expect(v.settled(s)).toBeUndefined();
  });

  test("sets applied at once (their apply answers no promise) go in a row, within the call that posted the last of them", () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id");
    const t0 = ticket(v, s), t1 = ticket(v, s), t2 = ticket(v, s);
    const order: number[] = [];
    v.posted(s, t1, () => { order.push(1); return undefined; });
    v.posted(s, t0, () => { order.push(0); return undefined; });
    expect(order).toEqual([0, 1]);
    expect(v.settled(s)).toBeInstanceOf(Promise); // ticket 2 has not come
    v.posted(s, t2, () => { order.push(2); return undefined; });
    expect(order).toEqual([0, 1, 2]);
    expect(v.settled(s)).toBeUndefined();
  });

  test("the next ticket is applied within its post; one whose apply answers a promise holds the tickets after it until that settles", async () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id");
    const order: string[] = [];
    v.posted(s, ticket(v, s), () => { order.push("0"); return undefined; });
    expect(order).toEqual(["0"]);
    expect(v.settled(s)).toBeUndefined();
    let finish!: () => void;
    v.posted(s, ticket(v, s), () => { order.push("1 starts"); return new Promise<void>((r) => { finish = () => { order.push("1 ends"); r(); }; }); });
    v.posted(s, ticket(v, s), () => { order.push("2"); return undefined; });
    const waited = v.settled(s);
    await flush();
    expect(order).toEqual(["0", "1 starts"]);
    expect(waited).toBeInstanceOf(Promise);
    finish();
    await waited;
    expect(order).toEqual(["0", "1 starts", "1 ends", "2"]);
    // a failed one, next in line, does not stop the ticket after it
    v.posted(s, ticket(v, s), () => Promise.reject(new Error("boom")));
    v.posted(s, ticket(v, s), () => { order.push("4"); return undefined; });
    await v.settled(s);
    expect(order.at(-1)).toBe("4");
    expect(v.settled(s)).toBeUndefined();
  });

  test("a call waits for the tickets issued before it, not for later ones; a ticket given up counts as applied; a failed apply does not stop the next", async () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id"), other = v.slotOf("sk", "other");
    const t0 = ticket(v, s);
    const waited = v.settled(s);
    expect(waited).toBeInstanceOf(Promise);
    expect(v.settled(other)).toBeUndefined(); // another slot: no wait
    let through = false;
    void waited!.then(() => { through = true; });
    const t1 = ticket(v, s); // after the call came: not waited for
    v.posted(s, t1, async () => {});
    await flush();
    expect(through).toBe(false);
    v.posted(s, t0, null); // given up (its set went to the main thread instead)
    await flush();
    expect(through).toBe(true);
    const t2 = ticket(v, s), t3 = ticket(v, s);
    let applied3 = false;
    v.posted(s, t2, async () => { throw new Error("boom"); });
    v.posted(s, t3, async () => { applied3 = true; });
    await v.settled(s);
    expect(applied3).toBe(true);
  });

  test("a ticket that never comes (its worker ended) is given up after a while, and said so", async () => {
    const lost: [number, number][] = [];
    const v = new CacheVersions((slot, t) => lost.push([slot, t]), 30);
    const s = v.slotOf("sk", "id");
    const t0 = ticket(v, s), t1 = ticket(v, s);
    let applied = false;
    v.posted(s, t1, async () => { applied = true; });
    const t = Date.now();
    await v.settled(s);
    expect(Date.now() - t).toBeGreaterThanOrEqual(25);
    expect(lost).toEqual([[s, t0]]);
    expect(applied).toBe(true);
  });

  test("the bound counts what is reserved, back and forth, and workers see it", () => {
    const v = new CacheVersions();
    const s = v.slotOf("sk", "id");
    v.reserve(s, 100);
    v.reserve(s, -40);
    expect(v.bound(s)).toBe(60);
    expect(Atomics.load(new Int32Array(v.buffer), BOUND_BASE + s)).toBe(60);
  });
});
