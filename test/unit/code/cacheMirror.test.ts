// A code worker's copy of service cache values (cacheMirror.ts): a get is answered from the copy
// while the cache's version is the one the copy was taken at, the cache has not expired and the
// run learned it may read; everything else goes to the main thread. The main thread here is a
// small stand-in keeping the rules of domain/serviceCaches.ts (bump after a change, notes).
import { afterAll, describe, expect, test } from "bun:test";
import { CacheMirror } from "../../../src/code/cacheMirror.ts";
import { outcomeValue, paramsJson, publishDeadlines, type RunHooks, Sandbox } from "../../../src/code/sandbox.ts";
import { BOUND_BASE, CacheVersions, ISSUED_BASE, type MirrorNote, type PostedSet } from "../../../src/domain/cacheVersions.ts";

const ok = (data: unknown) => JSON.stringify({ ok: true, data });
const args = (o: unknown) => JSON.stringify(o);

/** The main thread: one cache "c" (values id "id1"), the levels the caller holds, its expiry. */
function mainThread() {
  const versions = new CacheVersions();
  const slot = versions.slotOf("sk", "id1");
  const values = new Map<string, string>();
  const m = { versions, slot, values, levels: 15, expiresAt: Date.now() + 60_000, calls: [] as string[] };
  const note = (v?: number): MirrorNote => ({ id: "id1", s: slot, lv: m.levels, ...(v !== undefined ? { v, x: m.expiresAt } : {}) });
  const answer = (op: string, a: string): string => {
    m.calls.push(op);
    const x = JSON.parse(a);
    if (op.startsWith("user.")) return ok("signed in");
    if (x.cache !== "c") return JSON.stringify({ ok: false, error: { detail: `cache '${x.cache}' does not exist` } });
    if (op === "cache.get") {
      if (!(m.levels & 1)) return JSON.stringify({ ok: false, error: { detail: "not allowed to read" } });
      const v = versions.current(slot), j = values.get(x.key);
      return ok(j === undefined ? { found: false, _m: note(v) } : { found: true, value: JSON.parse(j), _m: note(v) });
    }
    if (op === "cache.set") {
      const before = versions.current(slot);
      values.set(x.key, JSON.stringify(x.value));
      return ok({ _m: note(versions.bump(slot, before)) });
    }
    if (op === "cache.delete") { values.delete(x.key); versions.bump(slot); return ok({ _m: note() }); }
    if (op === "cache.flush") { values.clear(); versions.bump(slot); return ok({ _m: note() }); }
    return ok(null);
  };
  const hooks: RunHooks = { host: (op, a, reply) => reply(answer(op, a)), block: (op, a) => answer(op, a), log: () => {} };
  return { m, hooks, answer };
}

/** A worker on the main thread's versions; `now` its clock. */
const worker = (main: ReturnType<typeof mainThread>, now: () => number = Date.now) => new CacheMirror(new Int32Array(main.m.versions.buffer), now);
const get = (h: RunHooks, key: string, cache = "c") => h.block!("cache.get", args({ cache, key }), Infinity);
const set = (h: RunHooks, key: string, value: unknown) => h.block!("cache.set", args({ cache: "c", key, value }), Infinity);

describe("a worker's copy", () => {
  test("a get after the run's own set is answered from the copy, as the main thread would answer it", () => {
    const main = mainThread();
    const run = worker(main).hooks(main.hooks);
    expect(set(run, "k", { n: 1, s: "x" })).toBe(ok(null));
    expect(get(run, "k")).toBe(ok({ found: true, value: { n: 1, s: "x" } }));
    expect(main.m.calls).toEqual(["cache.set"]);
    // a key the copy does not hold is asked for, and then known missing
    expect(get(run, "other")).toBe(ok({ found: false }));
    expect(get(run, "other")).toBe(ok({ found: false }));
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]);
  });

  test("the sandbox never sees the main thread's note", () => {
    const main = mainThread();
    const run = worker(main).hooks(main.hooks);
    for (const r of [set(run, "k", 1), get(run, "k"), get(run, "none"), run.block!("cache.delete", args({ cache: "c", key: "k" }), Infinity), run.block!("cache.flush", args({ cache: "c" }), Infinity)])
      expect(r as string).not.toContain("_m");
    let async = "";
    run.host("cache.set", args({ cache: "c", key: "k", value: 2 }), (r) => (async = r), false);
    expect(async).toBe(ok(null));
  });

  test("another worker's set, delete or flush is seen by the next get at once, in a run under way or a new one", () => {
    const main = mainThread();
    const w1 = worker(main), w2 = worker(main);
    const run1 = w1.hooks(main.hooks);
    set(run1, "k", "one");
    expect(get(run1, "k")).toBe(ok({ found: true, value: "one" }));
    const run2 = w2.hooks(main.hooks);
    set(run2, "k", "two");
    expect(get(run1, "k")).toBe(ok({ found: true, value: "two" }));
    expect(get(w1.hooks(main.hooks), "k")).toBe(ok({ found: true, value: "two" }));
    run2.block!("cache.delete", args({ cache: "c", key: "k" }), Infinity);
    expect(get(run1, "k")).toBe(ok({ found: false }));
    set(run1, "k", "three");
    set(run1, "j", "four");
    expect(get(run1, "j")).toBe(ok({ found: true, value: "four" }));
    run2.block!("cache.flush", args({ cache: "c" }), Infinity);
    expect(get(run1, "k")).toBe(ok({ found: false }));
    expect(get(run1, "j")).toBe(ok({ found: false }));
  });

  test("a copy is not used once the cache has expired", () => {
    const main = mainThread();
    let now = Date.now();
    const run = worker(main, () => now).hooks(main.hooks);
    set(run, "k", 1);
    get(run, "k");
    expect(main.m.calls).toEqual(["cache.set"]);
    now = main.m.expiresAt;
    main.m.values.clear(); // (what the main thread's store does at its expiry)
    expect(get(run, "k")).toBe(ok({ found: false }));
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]);
  });

  test("a value changed while its answer was on the way is not kept", () => {
    const main = mainThread();
    const w1 = worker(main), w2 = worker(main);
    const run1 = w1.hooks(main.hooks);
    set(run1, "k", "old");
    // the main thread answers run1's get, then another worker writes before run1 has the answer
    let held = "";
    const slow: RunHooks = { ...main.hooks, block: (op, a) => { const r = main.answer(op, a); if (op === "cache.get") set(w2.hooks(main.hooks), "k", "new"); held = r; return r; } };
    const run = w1.hooks(slow);
    set(run, "x", 0);
    expect(get(run, "k")).toBe(ok({ found: true, value: "old" })); // what was read, answered as read
    expect(held).toContain('"old"');
    expect(get(run, "k")).toBe(ok({ found: true, value: "new" })); // but not kept
  });
});

describe("rights", () => {
  test("learned per run: a new run asks the main thread again, and a run without read is always asked for", () => {
    const main = mainThread();
    const w = worker(main);
    const run = w.hooks(main.hooks);
    set(run, "k", 1);
    get(run, "k");
    expect(main.m.calls).toEqual(["cache.set"]);
    main.m.levels = 2; // the role changed: create only
    const next = w.hooks(main.hooks);
    expect(get(next, "k")).toContain("not allowed to read");
    set(next, "k", 2); // learns create only
    expect(get(next, "k")).toContain("not allowed to read");
    expect(main.m.calls).toEqual(["cache.set", "cache.get", "cache.set", "cache.get"]);
    // another cache's name is another grant
    expect(get(run, "k", "d")).toContain("does not exist");
  });

  test("a run that signs in as someone else asks again, and a note asked for before it is not kept", () => {
    const main = mainThread();
    const w = worker(main);
    const run = w.hooks(main.hooks);
    set(run, "k", 1);
    run.block!("user.login", args({ email: "e", password: "p" }), Infinity);
    get(run, "k");
    expect(main.m.calls).toEqual(["cache.set", "user.login", "cache.get"]);
    // a promise call answered after a sign-in that came meanwhile
    let later: (() => void) | null = null;
    const deferred: RunHooks = { ...main.hooks, host: (op, a, reply) => { const r = main.answer(op, a); if (op === "cache.get") later = () => reply(r); else reply(r); } };
    const run2 = w.hooks(deferred);
    let got = "";
    run2.host("cache.get", args({ cache: "c", key: "k" }), (r) => (got = r), false);
    run2.host("user.login", args({}), () => {}, false);
    later!();
    expect(got).toBe(ok({ found: true, value: 1 }));
    main.m.calls.length = 0;
    run2.host("cache.get", args({ cache: "c", key: "k" }), (r) => (got = r), false);
    expect(main.m.calls).toEqual(["cache.get"]);
  });
});

describe("rights remembered across runs (by the run's rights key)", () => {
  test("a later run with the same key reads from the copy without asking; another key asks", () => {
    const main = mainThread();
    const w = worker(main);
    const first = w.hooks(main.hooks, "user/sk/r1");
    set(first, "k", 1);
    expect(main.m.calls).toEqual(["cache.set"]);
    const next = w.hooks(main.hooks, "user/sk/r1");
    expect(get(next, "k")).toBe(ok({ found: true, value: 1 }));
    expect(main.m.calls).toEqual(["cache.set"]);
    // other roles: their own decision
    expect(get(w.hooks(main.hooks, "user/sk/r2"), "k")).toBe(ok({ found: true, value: 1 }));
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]);
    // without a key (a developer's run): asked, as before
    expect(get(w.hooks(main.hooks), "k")).toBe(ok({ found: true, value: 1 }));
    expect(main.m.calls).toEqual(["cache.set", "cache.get", "cache.get"]);
  });

  test("a change of rights is seen by the next run at once", () => {
    const main = mainThread();
    const w = worker(main);
    set(w.hooks(main.hooks, "user/sk/r1"), "k", 1);
    expect(get(w.hooks(main.hooks, "user/sk/r1"), "k")).toBe(ok({ found: true, value: 1 }));
    main.m.levels = 2; // the role now may create only
    main.m.versions.rightsChanged();
    const next = w.hooks(main.hooks, "user/sk/r1");
    expect(get(next, "k")).toContain("not allowed to read");
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]);
    // what was learned after the change is remembered in turn: write, not read
    set(w.hooks(main.hooks, "user/sk/r1"), "k", 2);
    expect(get(w.hooks(main.hooks, "user/sk/r1"), "k")).toContain("not allowed to read");
    expect(main.m.calls).toEqual(["cache.set", "cache.get", "cache.set", "cache.get"]);
  });

  test("a decision answered while rights changed is not remembered", () => {
    const main = mainThread();
    const w = worker(main);
    // the main thread decides, then a role changes before the worker has the answer
    const racing: RunHooks = { ...main.hooks, block: (op, a) => { const r = main.answer(op, a); main.m.versions.rightsChanged(); return r; } };
    set(w.hooks(racing, "user/sk/r1"), "k", 1);
    expect(get(w.hooks(main.hooks, "user/sk/r1"), "k")).toBe(ok({ found: true, value: 1 }));
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]);
  });

  test("a run that signs in as someone else neither uses nor teaches its key's rights", () => {
    const main = mainThread();
    const w = worker(main);
    set(w.hooks(main.hooks, "user/sk/r1"), "k", 1);
    const run = w.hooks(main.hooks, "user/sk/r1");
    run.block!("user.login", args({ email: "e", password: "p" }), Infinity);
    get(run, "k");
    expect(main.m.calls).toEqual(["cache.set", "user.login", "cache.get"]);
    // what it learned as the other user is not its key's: a run with key r2 that signed in, then
    main.m.calls.length = 0;
    const other = w.hooks(main.hooks, "user/sk/r2");
    other.block!("user.login", args({}), Infinity);
    set(other, "k", 2);
    get(w.hooks(main.hooks, "user/sk/r2"), "k");
    expect(main.m.calls).toEqual(["user.login", "cache.set", "cache.get"]);
  });
});

describe("in a sandbox", () => {
  const opened: Sandbox[] = [];
  afterAll(() => { for (const s of opened) s.dispose(); });
  const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });

  test("ClearBladeAsync.Cache blocks for its calls and reads its own write from the copy; ClearBlade.Cache too", async () => {
    const main = mainThread();
    const promised: string[] = [];
    const hooks = worker(main).hooks({ ...main.hooks, host: (op, a, reply, b) => { promised.push(op); main.hooks.host(op, a, reply, b); } });
    const code = `async function svc(req, resp) {
      var c = ClearBladeAsync.Cache("c");
      await c.set("k", { n: 41 });
      var v = await c.get("k"), none = await c.get("none");
      var classic;
      ClearBlade.Cache("c").get("k", function (err, d) { classic = d; });
      resp.success([v, none === undefined, classic]);
    }`;
    const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: false }, { memoryBytes: 32 << 20, sliceMs: 500 });
    opened.push(sb);
    const o = await sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, hooks, 5_000);
    expect(o.kind).toBe("success");
    expect(outcomeValue((o as { raw: string }).raw)).toEqual([{ n: 41 }, true, { n: 41 }]);
    expect(promised).toEqual([]); // nothing went the promise way
    expect(main.m.calls).toEqual(["cache.set", "cache.get"]); // the missing key, once
  });
});

/** The main thread's hooks, its notes saying the cache's system and TTL (as serviceCaches.ts's do). */
function notingSystemAndTtl(main: ReturnType<typeof mainThread>): RunHooks {
  return {
    ...main.hooks,
    block: (op, a) => {
      const r = JSON.parse(main.answer(op, a));
      if (r.data?._m) Object.assign(r.data._m, { sk: "sk", ttl: 60_000 });
      return JSON.stringify(r);
    },
  };
}

describe("sets made in the worker", () => {
  /** The main thread, its notes saying the cache's system and TTL (as serviceCaches.ts's do), and
   *  a worker posting its sets to a list; a run with rights key r1 has set once through the main
   *  thread (the rights are remembered). */
  function setUp(levels = 15) {
    const main = mainThread();
    main.m.levels = levels;
    const withCache = notingSystemAndTtl(main);
    const posted: PostedSet[] = [];
    let now = 1_000_000;
    const w = new CacheMirror(new Int32Array(main.m.versions.buffer), () => now, (m) => posted.push(m));
    const run = () => w.hooks(withCache, "user/sk/r1");
    const words = new Int32Array(main.m.versions.buffer);
    const state = () => ({ issued: words[ISSUED_BASE + main.m.slot], bound: words[BOUND_BASE + main.m.slot], version: words[main.m.slot] });
    return { main, w, run, posted, state, withCache, tick: (ms: number) => { now += ms; }, now: () => now };
  }

  test("with the right remembered, a set is made here: a ticket, its bytes reserved, the version moved, posted; a get reads it here", () => {
    const t = setUp();
    expect(set(t.run(), "k", 1)).toBe(ok(null));
    expect(t.main.m.calls).toEqual(["cache.set"]);
    expect(t.posted).toEqual([]);
    const before = t.state();
    const r = t.run();
    expect(set(r, "k", { n: 2 })).toBe(ok(null));
    expect(t.main.m.calls).toEqual(["cache.set"]); // not asked
    expect(t.posted).toEqual([{ s: t.main.m.slot, n: before.issued!, sk: "sk", id: "id1", ttl: 60_000, k: "k", j: '{"n":2}', r: 1 + 7, at: t.now() }]);
    expect(t.state()).toEqual({ issued: before.issued! + 1, bound: before.bound! + 8, version: before.version! + 1 });
    expect(get(r, "k")).toBe(ok({ found: true, value: { n: 2 } }));
    expect(get(t.run(), "k")).toBe(ok({ found: true, value: { n: 2 } }));
    expect(t.main.m.calls).toEqual(["cache.set"]);
    // another worker's copy went with the version: its next get asks the main thread
    const other = worker(t.main).hooks(t.main.hooks);
    get(other, "k");
    expect(t.main.m.calls).toEqual(["cache.set", "cache.get"]);
  });

  test("a new key, after another worker's write, starts a copy holding it alone; the copy expires the cache's TTL after the set", () => {
    const t = setUp();
    set(t.run(), "a", 1);
    t.main.m.versions.bump(t.main.m.slot); // another worker's write
    const r = t.run();
    set(r, "b", 2);
    expect(t.posted.length).toBe(1);
    expect(get(r, "b")).toBe(ok({ found: true, value: 2 }));
    get(r, "a"); // not in the copy any more: asked for
    expect(t.main.m.calls).toEqual(["cache.set", "cache.get"]);
    t.tick(60_000);
    get(r, "b");
    expect(t.main.m.calls).toEqual(["cache.set", "cache.get", "cache.get"]);
  });

  test("the main thread makes the set, and answers, when the worker cannot know: no write right, a bad key or value, over the bytes, rights changed, another user, no rights key", () => {
    const ro = setUp(1);
    get(ro.run(), "k"); // read only: remembered
    expect(set(ro.run(), "k", 1)).toBe(ok(null));
    expect(ro.main.m.calls).toEqual(["cache.get", "cache.set"]);
    const t = setUp();
    set(t.run(), "k", 1);
    const asked = () => t.main.m.calls.length - 1;
    const deep = JSON.parse("[".repeat(200) + "]".repeat(200));
    for (const bad of [
      args({ cache: "c", key: "k" }), // no value
      args({ cache: "c", key: "", value: 1 }),
      args({ cache: "c", key: "x".repeat(1025), value: 1 }),
      args({ cache: "c", key: "k", value: "x".repeat(1024 * 1024) }),
      args({ cache: "c", key: "k", value: deep }),
      args({ cache: "other", key: "k", value: 1 }), // a cache it has not learned of
    ]) t.run().block!("cache.set", bad, Infinity);
    expect(asked()).toBe(6);
    expect(t.posted).toEqual([]);
    // the slot's bound would go over a cache's limit: the ticket is given up, the main thread asked
    const words = new Int32Array(t.main.m.versions.buffer);
    Atomics.add(words, BOUND_BASE + t.main.m.slot, 1024 * 1024 - 1);
    const before = t.state();
    set(t.run(), "k", 1);
    expect(asked()).toBe(7);
    expect(t.posted).toEqual([{ s: t.main.m.slot, n: before.issued! }]);
    expect(t.state()).toEqual({ ...before, issued: before.issued! + 1, version: before.version! + 1 }); // (the main thread's set moved it)
    Atomics.sub(words, BOUND_BASE + t.main.m.slot, 1024 * 1024 - 1);
    // rights changed: asked (and learned again)
    t.main.m.versions.rightsChanged();
    set(t.run(), "k", 1);
    expect(asked()).toBe(8);
    // a run that signed in as someone else, a run without a rights key (a developer's)
    const r = t.run();
    r.block!("user.login", args({}), Infinity);
    set(r, "k", 1);
    set(t.w.hooks(t.withCache), "k", 1);
    expect(asked()).toBe(11);
    expect(t.posted.length).toBe(1);
    // and with the right remembered again, made here
    set(t.run(), "k", 3);
    expect(asked()).toBe(11);
    expect(t.posted.length).toBe(2);
  });

  test("ClearBladeAsync.Cache's set resolves at once, made here", async () => {
    const t = setUp();
    set(t.run(), "k", 1);
    const code = `async function svc(req, resp) {
      var c = ClearBladeAsync.Cache("c");
      await c.set("k", { n: 41 });
      resp.success(await c.get("k"));
    }`;
    const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: false }, { memoryBytes: 32 << 20, sliceMs: 500 });
    try {
      const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });
      const o = await sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, t.run(), 5_000);
      expect(outcomeValue((o as { raw: string }).raw)).toEqual({ n: 41 });
    } finally { sb.dispose(); }
    expect(t.main.m.calls).toEqual(["cache.set"]);
    expect(t.posted.map((p) => p.j)).toEqual(['{"n":41}']);
  });
});

describe("a cache call without the call's JSON (RunHooks.cache, the prelude's __cache)", () => {
  /** The sets-made-here setup of above: a worker that knows the r1 run's rights on "c". */
  function learned() {
    const main = mainThread();
    const withCache = notingSystemAndTtl(main);
    const posted: PostedSet[] = [];
    const w = new CacheMirror(new Int32Array(main.m.versions.buffer), Date.now, (m) => posted.push(m));
    const run = () => w.hooks(withCache, "user/sk/r1");
    set(run(), "k", 1); // through the main thread: the rights are learned
    return { main, w, run, posted, withCache };
  }
  const sandboxOf = async (code: string) => {
    const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: false }, { memoryBytes: 32 << 20, sliceMs: 500 });
    return sb;
  };
  const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });

  test("a set is made and a get answered here with the value's JSON alone; what the copy cannot answer is undefined", () => {
    const t = learned();
    const r = t.run();
    expect(r.cache!("set", "c", "k", '{"n":2}')).toBe("");
    expect(t.posted.map((p) => p.j)).toEqual(['{"n":2}']);
    expect(r.cache!("get", "c", "k", "")).toBe('{"n":2}');
    expect(get(r, "none")).toBe(ok({ found: false })); // asked once, then known missing
    expect(r.cache!("get", "c", "none", "")).toBe("");
    expect(r.cache!("get", "c", "other", "")).toBeUndefined(); // not in the copy
    expect(r.cache!("get", "d", "k", "")).toBeUndefined(); // a cache it has not learned of
    expect(r.cache!("set", "c", "", "1")).toBeUndefined();
    expect(r.cache!("set", "c", "x".repeat(1025), "1")).toBeUndefined();
    expect(r.cache!("set", "c", "k", "")).toBeUndefined(); // no value
    expect(r.cache!("set", "c", "k", "[".repeat(200) + "]".repeat(200))).toBeUndefined();
    expect(t.posted.length).toBe(1);
    expect(t.main.m.calls).toEqual(["cache.set", "cache.get"]);
    // a run without a rights key (a developer's) learns nothing it could set with here
    expect(t.w.hooks(t.withCache).cache!("set", "c", "k", "1")).toBeUndefined();
  });

  test("in a sandbox: both flavours answered here, the promise one ending within its call, with ClearBlade's values", async () => {
    const t = learned();
    const sb = await sandboxOf(`function svc(req, resp) {
      var c = ClearBlade.Cache("c"), a = ClearBladeAsync.Cache("c"), out = {};
      c.set("k", { n: 1 }, function (err, d) { out.set = [err, d]; });
      var p = c.get("k", function (err, d) { out.get = [err, d]; });
      c.get("none", function (err, d) { out.none = d === undefined; });
      p.then(function (d) { out.awaited = d; return a.set("k2", [2]); })
        .then(function (d) { out.asyncSet = d === undefined; return a.get("k2"); })
        .then(function (v) { out.asyncGet = v; return a.get("none"); })
        .then(function (v) { out.asyncNone = v === undefined; resp.success(out); });
    }`);
    try {
      get(t.run(), "none"); // known missing from now on
      const calls = t.main.m.calls.length;
      const o = sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, t.run(), 5_000);
      // nothing waited for the main thread: the run ended within the call, its promise jobs too
      expect(o instanceof Promise).toBe(false);
      expect(outcomeValue((o as { raw: string }).raw)).toEqual({
        set: [false, "Set done"], get: [false, { n: 1 }], none: true, awaited: { found: true, value: { n: 1 } },
        asyncSet: true, asyncGet: [2], asyncNone: true,
      });
      expect(t.main.m.calls.length).toBe(calls); // none asked the main thread
      expect(t.posted.map((p) => p.j)).toEqual(['{"n":1}', "[2]"]);
    } finally { sb.dispose(); }
  });

  test("what the copy cannot take goes the JSON way, as before: a key not well-formed, a value that is no JSON, a name that is no string", async () => {
    const t = learned();
    const sb = await sandboxOf(`function svc(req, resp) {
      var c = ClearBlade.Cache("c"), out = [];
      c.set("\\ud800", 5, function (err) { out.push(err); });
      c.get("\\ud800", function (err, v) { out.push(v); });
      c.set("k", undefined, function (err, e) { out.push(err); });
      c.set("f", function () {}, function (err, e) { out.push(err); });
      ClearBlade.Cache(7).get("k", function (err, e) { out.push(err); });
      try { var o = {}; o.o = o; c.set("k", o); } catch (e) { out.push(e instanceof TypeError); }
      resp.success(out);
    }`);
    try {
      const o = sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, t.run(), 5_000);
      // (the stand-in main thread takes a set without a value: the real one's checks are its own)
      expect(outcomeValue((o as { raw: string }).raw)).toEqual([false, 5, false, false, true, true]);
      // the lone surrogate's set and get went the JSON way, which keeps the key as it is (and
      // made them here); both bad values and the bad name went to the main thread
      expect(t.posted.map((p) => [p.k, p.j])).toEqual([["\ud800", "5"]]);
      expect(t.main.m.calls.slice(1)).toEqual(["cache.set", "cache.set", "cache.get"]);
    } finally { sb.dispose(); }
  });

  test("each call of ClearBlade.Cache answers an object of its own, its methods working detached", async () => {
    const t = learned();
    const sb = await sandboxOf(`function svc(req, resp) {
      var a = ClearBlade.Cache("c"), b = ClearBlade.Cache("c");
      a.get = function () { return "mine"; };
      a.extra = 1;
      var got, get = ClearBlade.Cache("c").get, asyncGet = ClearBladeAsync.Cache("c").get;
      get("k", function (err, v) { got = v; });
      var settled = ClearBlade.Cache("c").get("k"), set = ClearBlade.Cache("c").set("k", 1);
      asyncGet("k").then(function (v) {
        // a classic call's answer, awaited or chained on, holds what the host's answer would
        return Promise.all([settled, set, settled.then(function (d) { return d.value; }), settled["finally"](function () {})]).then(function (held) {
          resp.success([a === b, b.extra === undefined, settled instanceof Promise, got, v, held]);
        });
      });
    }`);
    try {
      const o = await sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, t.run(), 5_000);
      expect(o.kind).toBe("success");
      expect(outcomeValue((o as { raw: string }).raw)).toEqual([false, true, true, 1, 1, [{ found: true, value: 1 }, null, 1, { found: true, value: 1 }]]);
    } finally { sb.dispose(); }
  });
});

test("a cache call past its slice while other systems wait goes the usual way, which may give the worker back (the asyncify build)", async () => {
  const main = mainThread();
  const w = worker(main);
  set(w.hooks(main.hooks), "k", 1); // the copy holds k, the rights are learned by the runs below
  const contention = new Int32Array(1);
  publishDeadlines(new Float64Array(1), contention);
  const code = 'function svc(req, resp){ var n = 0, c = ClearBlade.Cache("c"); for (var i = 0; i < 20; i++) c.get("k", function (e, v) { n += v; }); resp.success(n) }';
  const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: true }, { memoryBytes: 32 << 20, sliceMs: 40 });
  const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });
  const counted = () => {
    const r = w.hooks(main.hooks);
    get(r, "k"); // (this run's rights: learned from the main thread's answer)
    const n = { direct: 0, usual: 0 };
    const hooks: RunHooks = {
      host: (op, a, answer, b) => { n.usual++; r.host(op, a, answer, b); },
      block: (op, a, d) => { n.usual++; return r.block!(op, a, d); },
      quick: (op) => r.quick!(op),
      // each takes 5 ms: 20 of them outlast the 40 ms slice
      cache: (op, c, k, j) => { n.direct++; const t0 = Date.now(); while (Date.now() - t0 < 5); return r.cache!(op, c, k, j); },
      log: () => {},
    };
    return { hooks, n };
  };
  try {
    const quiet = counted();
    let o = await sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, quiet.hooks, 5_000);
    expect(outcomeValue((o as { raw: string }).raw)).toBe(20);
    expect(quiet.n).toEqual({ direct: 20, usual: 0 });
    contention[0] = 1;
    const busy = counted();
    o = await sb.run("svc", { context, params: paramsJson({}), instanceId: "i" }, busy.hooks, 5_000);
    expect(outcomeValue((o as { raw: string }).raw)).toBe(20);
    expect(busy.n.usual).toBeGreaterThan(0);
  } finally {
    publishDeadlines(new Float64Array(1));
    sb.dispose();
  }
});
