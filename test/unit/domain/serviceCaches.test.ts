// Service caches in-process: definitions (bounds, developer only), the value operations a run
// makes with its user's rights (servicecaches by name, allservicecaches, the Administrator role),
// values apart per system and per definition (a cache made again starts empty), a new TTL from
// the next write, the bytes bound answered with a clear error, and a deleted system's values
// dropped.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../src/app.ts";
import { Permissions } from "../../../src/auth/permissions.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { ISSUED_BASE, RIGHTS_SLOT } from "../../../src/domain/cacheVersions.ts";
import { ChangeRecorder } from "../../../src/domain/changes.ts";
import type { DomainDeps } from "../../../src/domain/deps.ts";
import { ServiceCaches } from "../../../src/domain/serviceCaches.ts";
import { Systems } from "../../../src/domain/systems.ts";
import { Signals } from "../../../src/core/signals.ts";
import { MemoryCacheValues } from "../../../src/store/cacheValues.ts";
import { serviceCachesRepo } from "../../../src/store/serviceCaches.ts";

let app: App;
let dev: Principal, other: Principal;
let sk: string, sk2: string;
let now = 0;
let caches: ServiceCaches;
let systems: Systems;
let deps: DomainDeps;
const store = new MemoryCacheValues(() => now);
/** A read's answer without the note for code workers (cacheVersions.ts; tested there). */
const plain = ({ _m, ...r }: { _m?: unknown; found: boolean; value?: unknown }) => r;

const user = (roles: string[], systemKey = sk): Principal => ({ kind: "user", systemKey, id: `u-${roles.join("-")}`, email: "u@example.com", roles, tokenHash: "" });
const err = (p: Promise<unknown>) => p.then(() => null, (e) => ({ code: e?.kind?.code as number, status: e?.kind?.status as number, detail: String(e?.detail ?? e) }));

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "caches@example.com", password: "pw" })).dev_token))!;
  other = (await s.tokens.resolve((await s.developers.register({ email: "other@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "c1" })).system_key;
  sk2 = (await s.systems.create(dev, { name: "c2" })).system_key;
  // an instance on a clock of the test's own, on the app's database, with systems of its own that
  // tell it of a deleted system (the app's listeners are closed once it has started)
  const signals = new Signals();
  // (a system without edges: definitions' changes are not logged, as on the app)
  deps = { db: app.db, tokens: s.tokens, perms: new Permissions(app.db, signals), signals, log: app.log, changes: new ChangeRecorder("platform", "platform") } as unknown as DomainDeps;
  systems = new Systems(deps);
  caches = new ServiceCaches(deps, systems, store);
  signals.on("system.removed", ({ systemKey }) => caches.forgetSystem(systemKey));
  await s.roles.create(dev, sk, { name: "reader", servicecaches: [{ itemInfo: { name: "c" }, permissions: 1 }] });
  await s.roles.create(dev, sk, { name: "writer", servicecaches: [{ itemInfo: { name: "c" }, permissions: 4 }] });
  await s.roles.create(dev, sk, { name: "creator", servicecaches: [{ itemInfo: { name: "c" }, permissions: 2 }] });
  await s.roles.create(dev, sk, { name: "deleter", servicecaches: [{ itemInfo: { name: "c" }, permissions: 8 }] });
  await s.roles.create(dev, sk, { name: "all", allservicecaches: { permissions: 15 } });
  await s.roles.create(dev, sk, { name: "alldata", allcollections: { permissions: 15 } });
});
afterAll(() => app.stop());

const roleId = async (name: string) => ((await app.services.roles.list(dev, sk, {})) as { role_id: string; name: string }[]).find((r) => r.name === name)!.role_id;

describe("definitions", () => {
  test("created, read, listed, updated and deleted by the system's developer only", async () => {
    expect(await caches.create(dev, sk, "defs", { ttl: 60, description: "d" })).toEqual({ success: true });
    const got = await caches.get(dev, sk, "defs");
    expect(got).toMatchObject({ name: "defs", system_key: sk, ttl: 60, description: "d" });
    expect(got.id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await caches.list(dev, sk)).map((c) => c.name)).toContain("defs");
    expect(await caches.update(dev, sk, "defs", { ttl: 3600, name: "defs" })).toEqual({ success: true });
    expect(await caches.get(dev, sk, "defs")).toMatchObject({ ttl: 3600, description: "d" }); // kept
    expect((await err(caches.create(dev, sk, "defs", { ttl: 60 })))?.code).toBe(207);
    expect((await err(caches.get(other, sk, "defs")))?.code).toBe(201);
    expect((await err(caches.list(user(["Administrator"]), sk)))?.code).toBe(205);
    expect((await err(caches.remove(user(["Administrator"]), sk, "defs")))?.code).toBe(205);
    expect(await caches.remove(dev, sk, "defs")).toEqual({ success: true });
    expect((await err(caches.get(dev, sk, "defs")))?.status).toBe(404);
    expect((await err(caches.remove(dev, sk, "defs")))?.status).toBe(404);
  });

  test("bad bodies and names are 400s naming the problem", async () => {
    for (const ttl of [undefined, 29, 3601, 30.5, "60", null, -1]) expect((await err(caches.create(dev, sk, "bad", { ttl })))?.detail).toContain("ttl");
    expect((await err(caches.create(dev, sk, "bad", { ttl: 60, extra: 1 })))?.detail).toContain("extra");
    expect((await err(caches.create(dev, sk, "bad", { ttl: 60, name: "other" })))?.detail).toContain("other");
    expect((await err(caches.create(dev, sk, "bad", { ttl: 60, description: 5 })))?.detail).toContain("description");
    expect((await err(caches.create(dev, sk, "bad", { ttl: 60, description: "x".repeat(1001) })))?.detail).toContain("description");
    expect((await err(caches.create(dev, sk, "x".repeat(257), { ttl: 60 })))?.code).toBe(111);
    expect((await err(caches.create(dev, sk, "a\u0001b", { ttl: 60 })))?.code).toBe(111);
    expect((await err(caches.create(dev, sk, "bad", [1])))?.code).toBe(111);
    expect((await err(caches.update(dev, sk, "missing", { ttl: 60 })))?.status).toBe(404);
    expect((await caches.list(dev, sk)).map((c) => c.name)).not.toContain("bad");
  });

  test("at most 10 caches per system", async () => {
    for (let i = 0; i < 10; i++) await caches.create(dev, sk2, `n${i}`, { ttl: 30 });
    const e = await err(caches.create(dev, sk2, "n10", { ttl: 30 }));
    expect(e?.code).toBe(111);
    expect(e?.detail).toContain("at most 10");
    await caches.remove(dev, sk2, "n0");
    await caches.create(dev, sk2, "n10", { ttl: 30 });
    for (let i = 1; i <= 10; i++) await caches.remove(dev, sk2, `n${i}`);
  });
});

describe("values", () => {
  beforeAll(async () => { await caches.create(dev, sk, "c", { ttl: 30 }); });

  test("JSON values keep their type; a missing key is not found; getAll and keys", async () => {
    const values: [string, unknown][] = [["s", "text"], ["n", 1.5], ["b", false], ["z", null], ["o", { a: [1, { b: "c" }] }], ["arr", [1, "2"]], ["__proto__", { polluted: 1 }]];
    for (const [k, v] of values) await caches.set(dev, sk, "c", k, v);
    for (const [k, v] of values) expect(plain(await caches.getValue(dev, sk, "c", k))).toEqual({ found: true, value: v });
    expect(plain(await caches.getValue(dev, sk, "c", "nope"))).toEqual({ found: false });
    const all = await caches.getAll(dev, sk, "c");
    expect(Object.keys(all).sort()).toEqual(["__proto__", "arr", "b", "n", "o", "s", "z"]);
    expect(Object.getPrototypeOf(all)).toBe(Object.prototype);
    expect(await caches.keys(dev, sk, "c", "?")).toEqual(["b", "n", "o", "s", "z"]);
    expect(await caches.keys(dev, sk, "c", "a*")).toEqual(["arr"]);
    expect(await caches.setnx(dev, sk, "c", "s", "again")).toBe(false);
    expect(await caches.setnx(dev, sk, "c", "new", 1)).toBe(true);
    await caches.setMultiple(dev, sk, "c", { m1: 1, m2: { x: 2 } });
    expect(plain(await caches.getValue(dev, sk, "c", "m2"))).toEqual({ found: true, value: { x: 2 } });
    await caches.delete(dev, sk, "c", "m1");
    expect(plain(await caches.getValue(dev, sk, "c", "m1"))).toEqual({ found: false });
    await caches.flush(dev, sk, "c");
    expect(await caches.getAll(dev, sk, "c")).toEqual({});
  });

  test("arguments are checked: names, keys, values, patterns", async () => {
    const bad = async (p: Promise<unknown>, what: string) => { const e = await err(p); expect(e?.code).toBe(111); expect(e?.detail).toContain(what); };
    await bad(caches.set(dev, sk, "c", 5, 1), "key");
    await bad(caches.set(dev, sk, "c", "", 1), "key");
    await bad(caches.set(dev, sk, "c", "k".repeat(1025), 1), "key");
    await bad(caches.set(dev, sk, "c", "k", undefined), "JSON");
    await bad(caches.set(dev, sk, 5, "k", 1), "name");
    await bad(caches.set(dev, sk, { name: "c" }, "k", 1), "name");
    await bad(caches.setMultiple(dev, sk, "c", [1, 2]), "object");
    await bad(caches.setMultiple(dev, sk, "c", "str"), "object");
    await bad(caches.setMultiple(dev, sk, "c", { ok: 1, "": 2 }), "key");
    await bad(caches.keys(dev, sk, "c", 5), "pattern");
    await bad(caches.keys(dev, sk, "c", "*".repeat(257)), "pattern");
    let deep: unknown = 1;
    for (let i = 0; i < 200; i++) deep = [deep];
    await bad(caches.set(dev, sk, "c", "deep", deep), "nested");
    expect(plain(await caches.getValue(dev, sk, "c", "deep"))).toEqual({ found: false });
    // missing pattern: every key
    await caches.set(dev, sk, "c", "k", 1);
    expect(await caches.keys(dev, sk, "c", undefined)).toEqual(["k"]);
  });

  test("1 MB per cache: a write past it is refused with a clear error and changes nothing", async () => {
    await caches.flush(dev, sk, "c");
    const big = "x".repeat(600_000);
    await caches.set(dev, sk, "c", "a", big);
    const e = await err(caches.set(dev, sk, "c", "b", big));
    expect(e?.code).toBe(111);
    expect(e?.detail).toMatch(/cache 'c' would hold \d+ bytes, over its limit of 1048576/);
    expect(plain(await caches.getValue(dev, sk, "c", "b"))).toEqual({ found: false });
    const multi = await err(caches.setMultiple(dev, sk, "c", { small: 1, huge: big }));
    expect(multi?.detail).toContain("over its limit");
    expect(plain(await caches.getValue(dev, sk, "c", "small"))).toEqual({ found: false });
    // one value over the whole bound is refused before it is stored anywhere
    expect((await err(caches.set(dev, sk, "c", "h", "y".repeat(1_100_000))))?.detail).toContain("over a cache's");
    await caches.set(dev, sk, "c", "a", "replaced"); // a replacement frees the old value's bytes
    await caches.set(dev, sk, "c", "b", big);
    await caches.flush(dev, sk, "c");
  });

  test("the TTL: the whole cache expires when no write came within it; a new TTL counts from the next write", async () => {
    await caches.set(dev, sk, "c", "k", "v");
    now += 20_000;
    expect((await caches.getValue(dev, sk, "c", "k")).found).toBe(true);
    now += 11_000; // 31 s after the write, 11 s after the read
    expect(plain(await caches.getValue(dev, sk, "c", "k"))).toEqual({ found: false });
    expect(await caches.getAll(dev, sk, "c")).toEqual({});
    await caches.update(dev, sk, "c", { ttl: 120 });
    await caches.set(dev, sk, "c", "k", "v2");
    now += 100_000;
    expect(plain(await caches.getValue(dev, sk, "c", "k"))).toEqual({ found: true, value: "v2" });
    await caches.update(dev, sk, "c", { ttl: 30 });
  });

  test("rights: read, write (create or update), delete by name or allservicecaches; Administrator and developers everything", async () => {
    await caches.set(dev, sk, "c", "k", 1);
    const reader = user([await roleId("reader")]), writer = user([await roleId("writer")]), creator = user([await roleId("creator")]);
    const deleter = user([await roleId("deleter")]), all = user([await roleId("all")]), none = user([]), alldata = user([await roleId("alldata")]);
    const denied = async (p: Promise<unknown>) => { const e = await err(p); expect(e?.code).toBe(200); expect(e?.detail).toContain("servicecaches"); };
    expect(plain(await caches.getValue(reader, sk, "c", "k"))).toEqual({ found: true, value: 1 });
    expect(await caches.keys(reader, sk, "c", "*")).toEqual(["k"]);
    await denied(caches.set(reader, sk, "c", "k", 2));
    await denied(caches.flush(reader, sk, "c"));
    await caches.set(writer, sk, "c", "k", 2);
    await caches.setnx(creator, sk, "c", "k2", 2);
    await caches.setMultiple(creator, sk, "c", { k3: 3 });
    await denied(caches.getValue(writer, sk, "c", "k"));
    await denied(caches.delete(writer, sk, "c", "k"));
    await caches.delete(deleter, sk, "c", "k3");
    await denied(caches.getAll(deleter, sk, "c"));
    for (const p of [none, alldata]) {
      await denied(caches.getValue(p, sk, "c", "k"));
      await denied(caches.set(p, sk, "c", "k", 1));
    }
    // the grant is by name: another cache's values are not reached with it
    await caches.create(dev, sk, "c-other", { ttl: 30 });
    await denied(caches.getValue(reader, sk, "c-other", "k"));
    await caches.set(all, sk, "c-other", "k", "all");
    expect(plain(await caches.getValue(user(["Administrator"]), sk, "c-other", "k"))).toEqual({ found: true, value: "all" });
    await caches.flush(all, sk, "c-other");
    // the rights check comes before the name is looked up: a user learns nothing of other caches
    await denied(caches.getValue(none, sk, "no-such-cache", "k"));
    expect((await err(caches.getValue(dev, sk, "no-such-cache", "k")))?.detail).toContain("'no-such-cache'");
  });

  test("values are per system: another system's cache of the same name is another cache, another system's token is refused", async () => {
    await caches.create(dev, sk2, "c", { ttl: 30 });
    await caches.set(dev, sk, "c", "k", "in sk");
    expect(plain(await caches.getValue(dev, sk2, "c", "k"))).toEqual({ found: false });
    await caches.set(dev, sk2, "c", "k", "in sk2");
    expect(plain(await caches.getValue(dev, sk, "c", "k"))).toEqual({ found: true, value: "in sk" });
    // a user of one system in another: refused whatever it holds
    expect((await err(caches.getValue(user(["Administrator"], sk2), sk, "c", "k")))?.code).toBe(201);
    expect((await err(caches.getValue(other, sk, "c", "k")))?.code).toBe(201);
  });

  test("a cache deleted and made again under its name starts empty", async () => {
    await caches.set(dev, sk, "c", "k", "before");
    await caches.remove(dev, sk, "c");
    expect((await err(caches.getValue(dev, sk, "c", "k")))?.status).toBe(404);
    await caches.create(dev, sk, "c", { ttl: 30 });
    expect(plain(await caches.getValue(dev, sk, "c", "k"))).toEqual({ found: false });
  });

  test("a deleted system's values are dropped with it", async () => {
    const gone = (await app.services.systems.create(dev, { name: "gone" })).system_key;
    await caches.create(dev, gone, "x", { ttl: 30 });
    await caches.set(dev, gone, "x", "k", "v");
    const before = store.size;
    await systems.remove(dev, gone);
    expect(store.size).toBe(before - 1);
    expect((await err(caches.list(dev, gone)))?.status).toBe(404);
    expect(await serviceCachesRepo.list(app.db, gone)).toEqual([]); // the definitions went with the system's rows
  });
});

describe("notes for code workers (cacheVersions.ts)", () => {
  test("a write's and a read's answer say the version their values hold at; delete, flush and the cache's removal move it on", async () => {
    await caches.create(dev, sk, "noted", { ttl: 60 });
    const v = caches.versions!;
    const t0 = Date.now();
    const w = (await caches.set(user([await roleId("all")]), sk, "noted", "k", { a: 1 }))!._m;
    expect(w).toMatchObject({ lv: 15, s: v.slotOf(sk, w.id) });
    expect(w.v).toBe(v.current(w.s));
    expect(w.x!).toBeGreaterThanOrEqual(t0 + 60_000);
    expect(w.x!).toBeLessThanOrEqual(Date.now() + 60_000);
    const r = await caches.getValue(user([await roleId("reader")]), sk, "c", "k");
    expect(r._m?.lv).toBe(1); // the caller's levels on that cache
    const g = (await caches.getValue(dev, sk, "noted", "k"))._m!;
    expect(g).toEqual(w);
    await caches.delete(dev, sk, "noted", "none");
    expect(v.current(w.s)).toBe(w.v! + 1);
    const d = (await caches.flush(dev, sk, "noted"))!._m;
    expect(d.v).toBeUndefined(); // nothing a worker may keep
    expect(v.current(w.s)).toBe(w.v! + 2);
    expect((await caches.setMultiple(dev, sk, "noted", { a: 1, b: 2 }))!._m.v).toBe(w.v! + 3);
    expect(await caches.setnx(dev, sk, "noted", "a", 3)).toBe(false);
    expect(v.current(w.s)).toBe(w.v! + 4); // it restarted the TTL
    await caches.remove(dev, sk, "noted");
    expect(v.current(w.s)).toBe(w.v! + 5);
  });

  test("a refused write changes no version; a cache never written on this node gives no version to keep", async () => {
    await caches.create(dev, sk, "fresh", { ttl: 60 });
    const g = (await caches.getValue(dev, sk, "fresh", "k"))._m!;
    expect(g.v).toBeUndefined();
    const at = caches.versions!.current(g.s);
    await err(caches.set(dev, sk, "fresh", "big", "x".repeat(2 << 20)));
    expect(caches.versions!.current(g.s)).toBe(at);
    await caches.remove(dev, sk, "fresh");
  });

  test("the rights count moves on every change that may change a run's rights on a cache: roles, systems, definitions", async () => {
    const v = caches.versions!;
    const rights = () => Atomics.load(new Int32Array(v.buffer), RIGHTS_SLOT);
    let at = rights();
    const moved = () => { const now = rights(); const was = at; at = now; return now > was; };
    deps.signals.emit("permissions.changed", { systemKey: sk });
    expect(moved()).toBe(true);
    deps.signals.emit("system.changed", { systemKey: sk });
    expect(moved()).toBe(true);
    await caches.create(dev, sk, "counted", { ttl: 60 });
    expect(moved()).toBe(true);
    await caches.update(dev, sk, "counted", { ttl: 30 });
    expect(moved()).toBe(true);
    // values change versions, not rights
    await caches.set(dev, sk, "counted", "k", 1);
    await caches.flush(dev, sk, "counted");
    expect(moved()).toBe(false);
    await caches.remove(dev, sk, "counted");
    expect(moved()).toBe(true);
  });

  test("a set a worker made (applyPosted) is applied in ticket order; a read, write, delete or flush that comes after its ticket waits for it", async () => {
    await caches.create(dev, sk, "posted", { ttl: 60 });
    await caches.create(dev, sk, "elsewhere", { ttl: 60 });
    const v = caches.versions!, words = new Int32Array(v.buffer);
    const n = (await caches.set(dev, sk, "posted", "k", 0))!._m;
    const ticket = () => Atomics.add(words, ISSUED_BASE + n.s, 1);
    const posted = (t: number, k: string, value: unknown, at = Date.now()) => {
      const j = JSON.stringify(value), r = k.length + j.length;
      v.reserve(n.s, r);
      caches.applyPosted({ s: n.s, n: t, sk: n.sk, id: n.id, ttl: n.ttl, k, j, r, at });
    };
    // two sets made on workers, the second posted first
    const t1 = ticket(), t2 = ticket();
    let read: unknown;
    const reading = caches.getValue(dev, sk, "posted", "k").then((r) => { read = r.value; });
    const writing = caches.set(dev, sk, "posted", "k", "main");
    posted(t2, "k", "second");
    // a call on another cache (another slot) is answered meanwhile: this one would have been too
    expect((await caches.getValue(dev, sk, "elsewhere", "k")).found).toBe(false);
    expect(read).toBeUndefined();
    posted(t1, "k", "first");
    await reading;
    expect(read).toBe("second");
    await writing;
    expect((await caches.getValue(dev, sk, "posted", "k")).value).toBe("main");
    // delete and flush wait too
    const t3 = ticket();
    const deleting = caches.delete(dev, sk, "posted", "k");
    posted(t3, "k", "third");
    await deleting;
    expect((await caches.getValue(dev, sk, "posted", "k")).found).toBe(false);
    const t4 = ticket();
    const flushing = caches.flush(dev, sk, "posted");
    posted(t4, "other", 1);
    await flushing;
    expect(await caches.getAll(dev, sk, "posted")).toEqual({});
    // a ticket given up: the calls after it go on
    const t5 = ticket();
    const after = caches.getAll(dev, sk, "posted");
    caches.applyPosted({ s: n.s, n: t5 });
    expect(await after).toEqual({});
    await caches.remove(dev, sk, "posted");
    await caches.remove(dev, sk, "elsewhere");
  });

  test("a posted set's TTL counts from when it was made; the slot's bound ends at the bytes the cache holds", async () => {
    await caches.create(dev, sk, "timed", { ttl: 60 });
    const v = caches.versions!, words = new Int32Array(v.buffer);
    const n = (await caches.set(dev, sk, "timed", "a", 1))!._m;
    expect(v.bound(n.s)).toBe(2); // "a" and "1"
    const t = Atomics.add(words, ISSUED_BASE + n.s, 1);
    v.reserve(n.s, 2);
    caches.applyPosted({ s: n.s, n: t, sk: n.sk, id: n.id, ttl: n.ttl, k: "b", j: "2", r: 2, at: Date.now() - 50_000 });
    expect((await caches.getValue(dev, sk, "timed", "b")).value).toBe(2);
    expect(v.bound(n.s)).toBe(4);
    // the note's expiry is the set's time + TTL
    const x = (await caches.getValue(dev, sk, "timed", "b"))._m!.x!;
    expect(Math.abs(x - (Date.now() + 10_000))).toBeLessThan(1_000);
    const t0 = now;
    now = t0 + 9_000;
    expect((await caches.getValue(dev, sk, "timed", "a")).found).toBe(true);
    now = t0 + 11_000;
    expect((await caches.getValue(dev, sk, "timed", "a")).found).toBe(false);
    // a write here corrects the bound to what the cache holds now (the expired pairs gone)
    await caches.set(dev, sk, "timed", "c", 3);
    expect(v.bound(n.s)).toBe(2);
    await caches.flush(dev, sk, "timed");
    expect(v.bound(n.s)).toBe(0);
    await caches.remove(dev, sk, "timed");
  });

  test("values kept elsewhere (Redis, a cluster): no versions, no notes", async () => {
    const elsewhere = { ...Object.fromEntries(["set", "get", "getAll", "keys", "delete", "flush", "dropSystem"].map((k) => [k, (store as any)[k].bind(store)])) } as unknown as MemoryCacheValues;
    const clustered = new ServiceCaches(deps, systems, elsewhere);
    expect(clustered.versions).toBeNull();
    await caches.create(dev, sk, "far", { ttl: 60 });
    expect(await clustered.set(dev, sk, "far", "k", 1)).toBeNull();
    expect(await clustered.getValue(dev, sk, "far", "k")).toEqual({ found: true, value: 1 });
    await caches.remove(dev, sk, "far");
  });
});
