// Service caches and locks, black-box: the cache definitions on /admin/v/4/service_caches (happy
// paths, bad bodies, limits, other developers, users, other systems), and from inside services:
// ClearBladeAsync.Cache and ClearBlade.Cache (callbacks, the response ended inside them), the
// role grants servicecaches / allservicecaches, hostile arguments (wrong types, huge values,
// another system's cache names), ClearBladeAsync.Lock and ClearBlade.Lock, a lock held by a run
// released when the run ends, and the counter pattern: 20 parallel runs under one lock, no lost
// update.
import t from "tap";
import { counterCode } from "./code-run.ts";
import { Client, type DevSystem, devWithSystem, isErr, must, newUser, ok200, startOutpost, storedData, TEST_DB, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s = await devWithSystem(o, "caches-a");
const s2 = await devWithSystem(o, "caches-b");
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const cachePath = (sys: DevSystem, name?: string) => `/admin/v/4/service_caches/${sys.systemKey}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
async function cache(name: string, ttl = 60, sys: DevSystem = s) {
  await must(sys.dev.post(cachePath(sys, name), { ttl, description: `cache ${name}` }), `create cache ${name}`);
  return name;
}
async function service(name: string, code: string, sys: DevSystem = s) {
  await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [], systemID: sys.systemKey }), `create service ${name}`);
  return name;
}
const exec = (c: Client, name: string, params: unknown = {}, sys: DevSystem = s) => c.post(`/api/v/1/code/${sys.systemKey}/${name}`, params);
/** Runs a service as the developer; its results (the run must succeed). */
async function run(name: string, params: unknown = {}, sys: DevSystem = s) {
  const r = await exec(sys.dev, name, params, sys);
  if (r.status !== 200 || r.body?.success !== true) throw new Error(`run ${name}: ${r.status} ${r.text.slice(0, 400)}`);
  return r.body.results;
}
/** A user of `sys` holding a fresh role with `perms` (a fresh token after the change). */
async function userWith(perms: Record<string, unknown>, sys: DevSystem = s) {
  const u = await newUser(sys);
  const role = await must(sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name: uniq("R"), ...perms }), "create role");
  await must(sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "user roles");
  const a = await must(sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  return new Client(o.url, { "ClearBlade-UserToken": a.user_token });
}

// ---- the REST routes --------------------------------------------------------------------------

t.test("definitions: create, read, list, update, delete", async (t) => {
  const name = uniq("rest");
  t.same((await s.dev.post(cachePath(s, name), { name, ttl: 45, description: "first" })).body, { success: true }, "POST answers {success: true}");
  const one = await s.dev.get(cachePath(s, name));
  ok200(t, one, "GET one");
  t.same(Object.keys(one.body).sort(), ["description", "id", "name", "system_key", "ttl"], "the object's fields");
  t.match(one.body, { name, system_key: s.systemKey, ttl: 45, description: "first" });
  t.match(one.body.id, UUID, "id is a UUID");
  const list = await s.dev.get(cachePath(s));
  ok200(t, list, "GET all");
  t.ok(Array.isArray(list.body), "an array");
  t.same(list.body.find((c: { name: string }) => c.name === name), one.body, "the list holds the same object");
  t.same((await s.dev.put(cachePath(s, name), { ttl: 3600 })).body, { success: true }, "PUT answers {success: true}");
  t.match((await s.dev.get(cachePath(s, name))).body, { ttl: 3600, description: "first", id: one.body.id }, "ttl changed, the rest kept");
  ok200(t, await s.dev.put(cachePath(s, name), { name, description: "pushed", ttl: 30 }), "PUT with the name (as cb-cli pushes)");
  t.match((await s.dev.get(cachePath(s, name))).body, { ttl: 30, description: "pushed" });
  const spaced = `${uniq("with space")} é`;
  ok200(t, await s.dev.post(cachePath(s, spaced), { ttl: 30 }), "a name with a space, percent-encoded");
  t.equal((await s.dev.get(cachePath(s, spaced))).body.name, spaced);
  t.same((await s.dev.del(cachePath(s, spaced))).body, { success: true });
  t.same((await s.dev.del(cachePath(s, name))).body, { success: true }, "DELETE answers {success: true}");
  isErr(t, await s.dev.get(cachePath(s, name)), 404, "gone");
  t.notOk((await s.dev.get(cachePath(s))).body.some((c: { name: string }) => c.name === name), "not listed");
});

t.test("definitions: bad bodies and limits", async (t) => {
  const name = uniq("bad");
  for (const [body, what] of [[{}, "no ttl"], [{ ttl: 29 }, "ttl 29"], [{ ttl: 3601 }, "ttl 3601"], [{ ttl: "60" }, "ttl as text"], [{ ttl: 60.5 }, "fractional ttl"],
    [{ ttl: 60, color: "red" }, "unknown field"], [{ ttl: 60, name: "another" }, "another name"], [{ ttl: 60, description: { a: 1 } }, "description not a string"],
    [[{ ttl: 60 }], "an array"], ["not json", "not JSON"], [{ ttl: 60, description: "x".repeat(5000) }, "description too long"]] as [unknown, string][])
    isErr(t, await s.dev.post(cachePath(s, name), body), 400, what);
  isErr(t, await s.dev.post(cachePath(s, "x".repeat(300)), { ttl: 60 }), 400, "a name over 256 characters");
  isErr(t, await s.dev.get(cachePath(s, name)), 404, "nothing was made");
  await cache(name);
  isErr(t, await s.dev.post(cachePath(s, name), { ttl: 60 }), 400, 207, "made twice");
  isErr(t, await s.dev.put(cachePath(s, name), {}), 400, "PUT without ttl");
  isErr(t, await s.dev.put(cachePath(s, name), { ttl: 10 }), 400, "PUT with ttl 10");
  isErr(t, await s.dev.put(cachePath(s, name), { ttl: 60, name: "renamed" }), 400, "PUT renaming");
  isErr(t, await s.dev.put(cachePath(s, uniq("missing")), { ttl: 60 }), 404, "PUT of a missing cache");
  isErr(t, await s.dev.del(cachePath(s, uniq("missing"))), 404, "DELETE of a missing cache");
  // at most 10 per system
  const sys = await devWithSystem(o, "ten");
  for (let i = 0; i < 10; i++) await cache(`c${i}`, 30, sys);
  const eleventh = await sys.dev.post(cachePath(sys, "c10"), { ttl: 30 });
  isErr(t, eleventh, 400, "an 11th cache");
  t.match(eleventh.body.error.detail, /at most 10/);
  ok200(t, await sys.dev.del(cachePath(sys, "c0")));
  ok200(t, await sys.dev.post(cachePath(sys, "c10"), { ttl: 30 }), "room again after a delete");
});

t.test("definitions: only the system's developer", async (t) => {
  const name = await cache(uniq("own"));
  const admin = await userWith({});
  const adminUser = await newUser(s);
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: adminUser.userId, changes: { roles: { add: ["Administrator"] } } }), "make admin");
  const adminToken = (await must(s.app.post("/api/v/1/user/auth", { email: adminUser.email, password: adminUser.password }), "auth")).user_token;
  const asAdmin = new Client(o.url, { "ClearBlade-UserToken": adminToken });
  for (const [c, what] of [[s2.dev, "another developer"], [admin, "a user"], [asAdmin, "the system's Administrator user"], [new Client(o.url), "no token"]] as [Client, string][]) {
    isErr(t, await c.get(cachePath(s)), 401, `${what}: list`);
    isErr(t, await c.get(cachePath(s, name)), 401, `${what}: get`);
    isErr(t, await c.post(cachePath(s, uniq("x")), { ttl: 60 }), 401, `${what}: create`);
    isErr(t, await c.put(cachePath(s, name), { ttl: 60 }), 401, `${what}: update`);
    isErr(t, await c.del(cachePath(s, name)), 401, `${what}: delete`);
  }
  ok200(t, await s.dev.get(cachePath(s, name)), "still there");
  isErr(t, await s.dev.get(`/admin/v/4/service_caches/${"0".repeat(40)}`), 404, "a system that does not exist");
  isErr(t, await s2.dev.get(cachePath(s2, name)), 404, "the same name in another system is not there");
});

t.test("deleting a system deletes its caches", async (t) => {
  const sys = await devWithSystem(o, "doomed");
  const name = await cache(uniq("doomedCache"), 60, sys);
  ok200(t, await sys.dev.del(`/admin/systemmanagement?id=${sys.systemKey}`), "system deleted");
  isErr(t, await sys.dev.get(cachePath(sys)), 404, "its caches are not listed");
  // PostgreSQL's dump holds only live rows (a libSQL file may keep a deleted row's bytes in a free
  // page; the unit tests read the table there)
  if (TEST_DB === "postgres") t.notOk(storedData(o).some((f) => f.bytes.includes(name)), "no row of it is left");
});

// ---- values from services ---------------------------------------------------------------------

t.test("ClearBladeAsync.Cache: every call, JSON types kept, undefined for a missing key", async (t) => {
  const c = await cache(uniq("async"));
  const svc = uniq("asyncCache");
  await service(svc, `async function ${svc}(req, resp) {
    var cache = ClearBladeAsync.Cache("${c}");
    var out = {};
    out.setIsUndefined = (await cache.set("s", "text")) === undefined;
    await cache.set("n", 42.5); await cache.set("b", true); await cache.set("z", null);
    await cache.set("o", { a: [1, { b: "c" }] }); await cache.set("arr", [1, "two"]);
    out.get = { s: await cache.get("s"), n: await cache.get("n"), b: await cache.get("b"), z: await cache.get("z"), o: await cache.get("o"), arr: await cache.get("arr") };
    out.missingIsUndefined = (await cache.get("missing")) === undefined;
    out.nullIsNull = (await cache.get("z")) === null;
    out.nx1 = await cache.setnx("s", "other");
    out.nx2 = await cache.setnx("fresh", 1);
    out.afterNx = await cache.get("s");
    out.keysQ = await cache.keys("?");
    out.keysStar = await cache.keys("a*");
    out.all = await cache.getAll();
    out.delIsUndefined = (await cache.delete("s")) === undefined;
    out.afterDel = (await cache.get("s")) === undefined;
    out.flushIsUndefined = (await cache.flush()) === undefined;
    out.afterFlush = await cache.getAll();
    return out;
  }`);
  const r = await run(svc);
  t.same([r.setIsUndefined, r.delIsUndefined, r.flushIsUndefined], [true, true, true], "set, delete and flush resolve with nothing");
  t.same(r.get, { s: "text", n: 42.5, b: true, z: null, o: { a: [1, { b: "c" }] }, arr: [1, "two"] }, "values come back with their JSON types");
  t.equal(r.missingIsUndefined, true, "a missing key is undefined");
  t.equal(r.nullIsNull, true, "a stored null is null");
  t.equal(r.nx1, false, "setnx of an existing key: false");
  t.equal(r.nx2, true, "setnx of a new key: true");
  t.equal(r.afterNx, "text", "setnx did not overwrite");
  t.same(r.keysQ, ["b", "n", "o", "s", "z"], "keys('?'): one character");
  t.same(r.keysStar, ["arr"], "keys('a*')");
  t.same(r.all, { s: "text", n: 42.5, b: true, z: null, o: { a: [1, { b: "c" }] }, arr: [1, "two"], fresh: 1 }, "getAll");
  t.equal(r.afterDel, true, "delete");
  t.same(r.afterFlush, {}, "flush empties the cache");
});

t.test("ClearBlade.Cache with callbacks, the response ended inside the last one", async (t) => {
  const c = await cache(uniq("classic"));
  const svc = uniq("classicCache");
  await service(svc, `function ${svc}(req, resp) {
    var cache = ClearBlade.Cache("${c}");
    var out = {};
    cache.set("k", { v: 1 }, function (err, data) {
      out.set = [err, data];
      cache.setnx("k", 2, function (err, data) {
        out.setnx = [err, data];
        cache.setMultiple({ a: "x", b: [true] }, function (err, data) {
          out.setMultiple = [err, data];
          cache.get("k", function (err, data) {
            out.get = [err, data];
            cache.get("missing", function (err, data) {
              out.missing = [err, typeof data];
              cache.getAll(function (err, data) {
                out.getAll = [err, data];
                cache.delete("a", function (err, data) {
                  out.del = [err, data];
                  cache.flush(function (err, data) {
                    out.flush = [err, data];
                    ClearBlade.Cache("no_such_cache_here").get("k", function (err, data) {
                      out.unknown = [err, data];
                      resp.success(out);
                    });
                  });
                });
              });
            });
          });
        });
      });
    });
  }`);
  const r = await run(svc);
  t.same(r.set, [false, "Set done"]);
  t.same(r.setnx, [false, false], "setnx of an existing key: false");
  t.same(r.setMultiple, [false, "SetMultiple done"]);
  t.same(r.get, [false, { v: 1 }]);
  t.same(r.missing, [false, "undefined"], "a missing key: undefined, not an error");
  t.same(r.getAll, [false, { k: { v: 1 }, a: "x", b: [true] }]);
  t.same(r.del, [false, "Delete done"]);
  t.same(r.flush, [false, "Flush done"]);
  t.equal(r.unknown[0], true, "a cache with no definition is an error");
  t.match(JSON.stringify(r.unknown[1]), /no_such_cache_here/, "naming the cache");
});

t.test("values outlive the run and are shared by the system's services; deleting the cache drops them", async (t) => {
  const c = await cache(uniq("shared"));
  const writer = uniq("writer"), reader = uniq("reader");
  await service(writer, `async function ${writer}(req) { await ClearBladeAsync.Cache("${c}").set("who", req.params.v); return "ok"; }`);
  await service(reader, `async function ${reader}(req) { var v = await ClearBladeAsync.Cache("${c}").get("who"); return v === undefined ? "undefined" : v; }`);
  await run(writer, { v: "first" });
  t.equal(await run(reader), "first", "another service reads what one wrote");
  ok200(t, await s.dev.del(cachePath(s, c)));
  const gone = await exec(s.dev, reader);
  t.equal(gone.body.success, false, "a deleted cache is an error");
  t.match(JSON.stringify(gone.body.results), new RegExp(c));
  await cache(c);
  t.equal(await run(reader), "undefined", "made again under its name, it starts empty");
});

t.test("hostile arguments: wrong types, huge values, another system's cache names", async (t) => {
  const c = await cache(uniq("hostile"));
  const onlyInB = await cache(uniq("onlyInB"), 60, s2);
  const svc = uniq("hostileSvc");
  await service(svc, `async function ${svc}(req) {
    var out = {};
    async function attempt(name, fn) { try { await fn(); out[name] = "no error"; } catch (e) { out[name] = e.message; } }
    var cache = ClearBladeAsync.Cache("${c}");
    await attempt("numberKey", function () { return cache.set(5, 1); });
    await attempt("emptyKey", function () { return cache.set("", 1); });
    await attempt("objectKey", function () { return cache.get({ k: 1 }); });
    await attempt("undefinedValue", function () { return cache.set("k", undefined); });
    await attempt("functionValue", function () { return cache.set("k", function () {}); });
    await attempt("hugeValue", function () { return cache.set("k", new Array(1200001).join("x")); });
    await attempt("fill", function () { return cache.set("half", new Array(600001).join("x")); });
    await attempt("overflow", function () { return cache.set("half2", new Array(600001).join("y")); });
    await attempt("multiOverflow", function () { return cache.setMultiple({ small: 1, big: new Array(600001).join("z") }); });
    await attempt("arrayMultiple", function () { return cache.setMultiple([1, 2]); });
    await attempt("numberPattern", function () { return cache.keys(42); });
    await attempt("numberName", function () { return ClearBladeAsync.Cache(7).get("k"); });
    await attempt("longName", function () { return ClearBladeAsync.Cache(new Array(300).join("n")).get("k"); });
    await attempt("otherSystems", function () { return ClearBladeAsync.Cache("${onlyInB}").set("k", 1); });
    out.small = (await cache.get("small")) === undefined;
    out.half2 = (await cache.get("half2")) === undefined;
    out.half = (await cache.get("half")).length;
    return out;
  }`);
  const r = await run(svc);
  t.match(r.numberKey, /key must be a string/, "a number as key");
  t.match(r.emptyKey, /key must be a string of 1/, "an empty key");
  t.match(r.objectKey, /key must be a string/, "an object as key");
  t.match(r.undefinedValue, /JSON values/, "undefined is refused");
  t.match(r.functionValue, /JSON values/, "a function is refused");
  t.match(r.hugeValue, /over a cache's 1048576 bytes/, "a value over 1 MB");
  t.equal(r.fill, "no error", "600 KB fits");
  t.match(r.overflow, /would hold \d+ bytes, over its limit/, "a second 600 KB does not");
  t.match(r.multiOverflow, /over its limit/, "setMultiple past the bound");
  t.equal(r.small, true, "setMultiple is all or nothing");
  t.equal(r.half2, true, "the refused set stored nothing");
  t.equal(r.half, 600000, "the first value is intact");
  t.match(r.arrayMultiple, /object of keys and values/);
  t.match(r.numberPattern, /pattern must be a string/);
  t.match(r.numberName, /cache's name must be a string/);
  t.match(r.longName, /cache's name must be a string of 1 to 256/);
  t.match(r.otherSystems, new RegExp(`cache '${onlyInB}' does not exist`), "another system's cache is not reached");
  // and nothing reached it
  const peek = uniq("peek");
  await service(peek, `async function ${peek}() { return (await ClearBladeAsync.Cache("${onlyInB}").getAll()); }`, s2);
  t.same(await run(peek, {}, s2), {}, "the other system's cache is untouched");
});

t.test("rights: servicecaches by name, allservicecaches, none", async (t) => {
  const c = await cache(uniq("rights"));
  const svc = uniq("rightsSvc");
  await service(svc, `async function ${svc}(req) {
    var cache = ClearBladeAsync.Cache("${c}");
    var out = {};
    async function attempt(name, fn) { try { var v = await fn(); out[name] = v === undefined ? "ok" : v; } catch (e) { out[name] = "denied: " + e.message; } }
    await attempt("get", function () { return cache.get("k"); });
    await attempt("keys", function () { return cache.keys("*"); });
    await attempt("set", function () { return cache.set("k", req.params.v); });
    await attempt("setnx", function () { return cache.setnx("n", 1); });
    await attempt("delete", function () { return cache.delete("n"); });
    await attempt("flush", function () { return cache.flush(); });
    return out;
  }`);
  const run1 = { services: [{ itemInfo: { name: svc }, permissions: 1 }] };
  await run(svc, { v: "seed" });
  // seed a value the reader sees: the developer's run flushed at the end, so write again without flushing
  const seed = uniq("seed");
  await service(seed, `async function ${seed}() { await ClearBladeAsync.Cache("${c}").set("k", "seeded"); return 1; }`);
  await run(seed);

  const none = await userWith(run1);
  const r0 = (await exec(none, svc, { v: 1 })).body.results;
  for (const op of ["get", "keys", "set", "setnx", "delete", "flush"]) t.match(r0[op], /^denied: not allowed .* servicecaches or allservicecaches/, `no grant: ${op} denied`);

  const reader = await userWith({ ...run1, servicecaches: [{ itemInfo: { name: c }, permissions: 1 }] });
  const r1 = (await exec(reader, svc, { v: 1 })).body.results;
  t.equal(r1.get, "seeded", "read grant: get");
  t.same(r1.keys, ["k"], "read grant: keys");
  for (const op of ["set", "setnx", "delete", "flush"]) t.match(r1[op], /^denied/, `read grant: ${op} denied`);

  const otherCache = await userWith({ ...run1, servicecaches: [{ itemInfo: { name: `${c}-other` }, permissions: 15 }] });
  t.match((await exec(otherCache, svc, { v: 1 })).body.results.get, /^denied/, "a grant on another cache name does not reach this one");

  const all = await userWith({ ...run1, allservicecaches: { permissions: 15 } });
  const r2 = (await exec(all, svc, { v: "by user" })).body.results;
  for (const op of ["get", "keys", "set", "setnx", "delete", "flush"]) t.notMatch(String(r2[op]), /^denied/, `allservicecaches: ${op}`);

  const foreign = await userWith({ allservices: { permissions: 15 }, allservicecaches: { permissions: 15 } }, s2);
  isErr(t, await exec(foreign, svc, { v: 1 }), 401, "a user of another system cannot run it at all");
});

// ---- locks ------------------------------------------------------------------------------------

t.test("the counter pattern: 20 parallel runs under ClearBladeAsync.Lock, no lost update", async (t) => {
  const c = await cache(uniq("counter"));
  const svc = uniq("incr");
  await service(svc, counterCode(svc, c, `counter-${c}`));
  const read = uniq("readCounter");
  await service(read, `async function ${read}() { return await ClearBladeAsync.Cache("${c}").get("n"); }`);
  const results = await Promise.all(Array.from({ length: 20 }, () => exec(s.dev, svc)));
  t.ok(results.every((r) => r.status === 200 && r.body.success === true), `every run succeeded (${results.filter((r) => r.body?.success !== true).map((r) => r.text.slice(0, 200)).join("; ")})`);
  t.equal(await run(read), 20, "exactly 20");
  t.same(results.map((r) => r.body.results).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i), "each run saw a different count");
});

t.test("a lock held by a run is released when the run ends; misuse is an error", async (t) => {
  const keeper = uniq("keeper"), taker = uniq("taker"), misuse = uniq("misuse"), classicLock = uniq("classicLock");
  const lockName = uniq("L");
  await service(keeper, `async function ${keeper}() { await ClearBladeAsync.Lock("${lockName}", "keeper").lock(); throw new Error("ends holding the lock"); }`);
  await service(taker, `async function ${taker}() { var t0 = Date.now(); var l = ClearBladeAsync.Lock("${lockName}", "taker"); await l.lock(); await l.unlock(); return Date.now() - t0; }`);
  const k = await exec(s.dev, keeper);
  t.equal(k.body.success, false, "the keeper failed while holding the lock");
  const took = await run(taker);
  t.ok(took < 5_000, `the next run got the lock at once (${took} ms)`);

  await service(misuse, `async function ${misuse}() {
    var out = {};
    async function attempt(name, fn) { try { await fn(); out[name] = "no error"; } catch (e) { out[name] = e.message; } }
    var l = ClearBladeAsync.Lock("${lockName}", "me");
    await attempt("unlockUnheld", function () { return l.unlock(); });
    await attempt("runlockUnheld", function () { return l.runlock(); });
    await attempt("lock", function () { return l.lock(); });
    await attempt("lockAgain", function () { return l.lock(); });
    await attempt("rlockWhileExclusive", function () { return l.rlock(); });
    await attempt("unlock", function () { return l.unlock(); });
    await attempt("rlock", function () { return l.rlock(); });
    await attempt("rlockOther", function () { return ClearBladeAsync.Lock("${lockName}", "reader2").rlock(); });
    await attempt("runlock", function () { return l.runlock(); });
    await attempt("numberName", function () { return ClearBladeAsync.Lock(5, "me").lock(); });
    await attempt("longName", function () { return ClearBladeAsync.Lock(new Array(300).join("n"), "me").lock(); });
    await attempt("objectCaller", function () { return ClearBladeAsync.Lock("x", { me: 1 }).lock(); });
    return out;
  }`);
  const m = await run(misuse);
  t.match(m.unlockUnheld, /is not held exclusively/);
  t.match(m.runlockUnheld, /is not held shared/);
  t.equal(m.lock, "no error");
  t.match(m.lockAgain, /already held/);
  t.match(m.rlockWhileExclusive, /unlock it before/);
  t.equal(m.unlock, "no error");
  t.equal(m.rlock, "no error");
  t.equal(m.rlockOther, "no error", "two shared holders together");
  t.equal(m.runlock, "no error");
  t.match(m.numberName, /lock's name must be a string/);
  t.match(m.longName, /lock's name must be a string of 1 to 256/);
  t.match(m.objectCaller, /caller must be a string/);
  // reader2's shared hold ended with that run: an exclusive lock is granted at once
  t.ok((await run(taker)) < 5_000, "the shared hold went with its run");

  await service(classicLock, `function ${classicLock}(req, resp) {
    var l = ClearBlade.Lock("${lockName}", "classic");
    l.lock(function (err, data) {
      var locked = err;
      l.unlock(function (err2) {
        l.rlock(function (err3) {
          l.runlock(function (err4) { resp.success([locked, err2, err3, err4]); });
        });
      });
    });
  }`);
  t.same(await run(classicLock), [false, false, false, false], "ClearBlade.Lock with callbacks");
});

t.test("locks are per system: the same name in another system is another lock", async (t) => {
  const name = uniq("perSystem");
  const holder = uniq("holder");
  // holds the lock for a while, in system A
  await service(holder, `async function ${holder}() {
    await ClearBladeAsync.Lock("${name}", "a").lock();
    await new Promise(function (r) { var until = Date.now() + 1500; (function spin() { if (Date.now() >= until) r(); else ClearBladeAsync.Cache("none-${name}").get("k").then(spin, spin); })(); });
    return "held";
  }`);
  const other = uniq("other");
  await service(other, `async function ${other}() { var t0 = Date.now(); await ClearBladeAsync.Lock("${name}", "b").lock(); return Date.now() - t0; }`, s2);
  const held = exec(s.dev, holder);
  await new Promise((r) => setTimeout(r, 300));
  const waited = await run(other, {}, s2);
  t.ok(waited < 1_000, `system B got its lock at once (${waited} ms) while A held its own`);
  t.equal((await held).body.results, "held");
});
