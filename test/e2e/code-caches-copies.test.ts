// Service cache reads answered by the code workers' copies of the values (src/code/cacheMirror.ts),
// black-box: a run that keeps reading a key sees another run's set, delete or flush (made on
// another worker) as soon as that run has answered, never an older value after it; the whole
// cache's expiry is seen; a run reads its own writes; sets from many runs are read at once by the
// runs after them; the right to read is decided for each run (a role changed between two runs
// holds in the second), and a run that may write but not read gets nothing from the copy.
import t from "tap";
import { Client, type DevSystem, devWithSystem, must, newUser, startOutpost, uniq } from "./harness.ts";

// (one system may hold every worker: a watcher holds one while the runs that change the cache
// take another)
const o = await startOutpost({ args: ["--code-workers", "3", "--code-max-share", "1"] });
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s: DevSystem = await devWithSystem(o, "caches-copies");

const cachePath = (name: string) => `/admin/v/4/service_caches/${s.systemKey}/${encodeURIComponent(name)}`;
const cache = async (ttl = 60) => { const name = uniq("copies"); await must(s.dev.post(cachePath(name), { ttl }), `create cache ${name}`); return name; };
async function service(name: string, code: string, timeoutS = 60) {
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${name}`, { code, parameters: [], systemID: s.systemKey, execution_timeout: timeoutS }), `create service ${name}`);
  return name;
}
const exec = (c: Client, name: string, params: unknown = {}) => c.post(`/api/v/1/code/${s.systemKey}/${name}`, params);
async function run(name: string, params: unknown = {}) {
  const r = await exec(s.dev, name, params);
  if (r.status !== 200 || r.body?.success !== true) throw new Error(`run ${name}: ${r.status} ${r.text.slice(0, 400)}`);
  return r.body.results;
}

/** Services on cache `c`: set, delete, flush, and a watcher that reads `k` in a loop (each read
 *  after the first answered from its worker's copy while nothing changes) until it holds
 *  something else than `from`, then answers what it saw and when it last saw `from`. */
async function servicesOn(c: string) {
  const names = { set: uniq("set"), del: uniq("del"), flush: uniq("flush"), watch: uniq("watch"), watchAsync: uniq("watchAsync") };
  await service(names.set, `function ${names.set}(req, resp) { ClearBlade.Cache("${c}").set(req.params.k || "k", req.params.v, function (err, d) { if (err) resp.error(d); resp.success("set"); }); }`);
  await service(names.del, `function ${names.del}(req, resp) { ClearBlade.Cache("${c}").delete("k", function (err, d) { if (err) resp.error(d); resp.success("deleted"); }); }`);
  await service(names.flush, `function ${names.flush}(req, resp) { ClearBlade.Cache("${c}").flush(function (err, d) { if (err) resp.error(d); resp.success("flushed"); }); }`);
  const loop = (read: string) => `
    var from = JSON.stringify(req.params.from), until = Date.now() + req.params.ms, reads = 0, lastFrom = 0, now;
    for (;;) {
      // (the time before the read: one that answers the old value started before the change)
      now = Date.now(); var v = ${read}; reads++;
      if (JSON.stringify(v) !== from) return resp.success({ saw: v === undefined ? "undefined" : v, lastFrom: lastFrom, reads: reads });
      lastFrom = now;
      if (now > until) return resp.success({ saw: "timed out", lastFrom: lastFrom, reads: reads });
    }`;
  await service(names.watch, `function ${names.watch}(req, resp) { var c = ClearBlade.Cache("${c}"); function get() { var out; c.get("k", function (err, d) { if (err) resp.error(d); out = d; }); return out; } ${loop("get()")} }`);
  // the promise flavour: each read awaited in turn
  await service(names.watchAsync, `async function ${names.watchAsync}(req, resp) { var c = ClearBladeAsync.Cache("${c}"); ${loop("await c.get(\"k\")")} }`);
  return names;
}

/** Starts a watcher of `from` and, once it has read a while, runs `change`; the watcher's answer
 *  and when the change's run had answered (epoch ms). */
async function watchWhile(watcher: string, from: unknown, change: () => Promise<unknown>) {
  const watching = exec(s.dev, watcher, { from, ms: 20_000 });
  await new Promise((r) => setTimeout(r, 300)); // (it reads from its copy meanwhile)
  await change();
  const changedAt = Date.now();
  const w = await watching;
  if (w.body?.success !== true) throw new Error(`watcher: ${w.text.slice(0, 300)}`);
  return { ...(w.body.results as { saw: unknown; lastFrom: number; reads: number }), changedAt };
}

t.test("a run reading in a loop sees another run's set, delete and flush once they answered, never the old value after", async (t) => {
  const c = await cache();
  const n = await servicesOn(c);
  await run(n.set, { v: "one" });
  for (const [watcher, flavour] of [[n.watch, "callbacks"], [n.watchAsync, "promises"]] as const) {
    await run(n.set, { v: "one" });
    const set = await watchWhile(watcher, "one", () => run(n.set, { v: { two: 2 } }));
    t.same(set.saw, { two: 2 }, `${flavour}: the new value`);
    t.ok(set.reads > 10, `${flavour}: it read ${set.reads} times (from its copy) before the change`);
    t.ok(set.lastFrom <= set.changedAt, `${flavour}: the old value was last read before the set had answered (${set.lastFrom} <= ${set.changedAt})`);
    const del = await watchWhile(watcher, { two: 2 }, () => run(n.del));
    t.equal(del.saw, "undefined", `${flavour}: the delete`);
    t.ok(del.lastFrom <= del.changedAt, `${flavour}: the deleted value was last read before the delete had answered`);
    await run(n.set, { v: 3 });
    const flushed = await watchWhile(watcher, 3, () => run(n.flush));
    t.equal(flushed.saw, "undefined", `${flavour}: the flush`);
    t.ok(flushed.lastFrom <= flushed.changedAt, `${flavour}: the flushed value was last read before the flush had answered`);
  }
});

t.test("writes from many runs on several workers are read by the runs after them, and a run reads its own writes", async (t) => {
  const c = await cache();
  const n = await servicesOn(c);
  const reader = uniq("reader"), own = uniq("own");
  await service(reader, `async function ${reader}(req) { var c = ClearBladeAsync.Cache("${c}"); var a = await c.get("k"); var b = await c.get("k"); return [a, b]; }`);
  await service(own, `function ${own}(req, resp) {
    var c = ClearBlade.Cache("${c}"), seen = [];
    for (var i = 0; i < 50; i++) { c.set("own", i, function () {}); c.get("own", function (err, v) { seen.push(v); }); }
    c.setMultiple({ a: 1, b: [2] }, function () {});
    c.get("a", function (err, v) { seen.push(v); }); c.get("b", function (err, v) { seen.push(v); });
    resp.success(seen);
  }`);
  for (let i = 0; i < 10; i++) {
    await run(n.set, { v: i });
    const all = await Promise.all(Array.from({ length: 6 }, () => run(reader)));
    t.ok(all.every((r) => JSON.stringify(r) === JSON.stringify([i, i])), `round ${i}: every run read ${i} (${JSON.stringify(all)})`);
  }
  const seen = await run(own);
  t.same(seen, [...Array.from({ length: 50 }, (_, i) => i), 1, [2]], "each get after the run's own set, and setMultiple's values");
});

t.test("rights: decided for each run; a run that may write but not read gets nothing from the copy", async (t) => {
  const c = await cache();
  const svc = uniq("rights");
  await service(svc, `function ${svc}(req, resp) {
    var c = ClearBlade.Cache("${c}"), out = [];
    c.set("k", req.params.v, function (err, d) { out.push(err ? "set refused" : "set"); });
    c.get("k", function (err, d) { out.push(err ? "get refused: " + JSON.stringify(d) : d); });
    c.get("k", function (err, d) { out.push(err ? "get refused" : d); });
    resp.success(out);
  }`);
  const u = await newUser(s);
  const role = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("R"), services: [{ itemInfo: { name: svc }, permissions: 1 }], servicecaches: [{ itemInfo: { name: c }, permissions: 1 | 2 | 4 }] }), "create role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "user roles");
  const a = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  const user = new Client(o.url, { "ClearBlade-UserToken": a.user_token });
  const first = await exec(user, svc, { v: "mine" });
  t.same(first.body.results, ["set", "mine", "mine"], "read and write: all three");
  // the role loses read on the cache: the next run (on whichever worker, with its copy) is refused
  await must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: role.role_id, changes: { servicecaches: [{ itemInfo: { name: c }, permissions: 2 | 4 }] } }), "role: write only");
  const second = (await exec(user, svc, { v: "again" })).body.results as unknown[];
  t.equal(second[0], "set", "it may still write");
  t.match(String(second[1]), /get refused: .*not allowed to read cache/, "its get is refused");
  t.equal(second[2], "get refused", "and the next get of the run as well (the copy holds the value: it is not used)");
  await must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: role.role_id, changes: { servicecaches: [{ itemInfo: { name: c }, permissions: 0 }] } }), "role: nothing");
  const none = (await exec(user, svc, { v: "x" })).body.results as unknown[];
  t.equal(none[0], "set refused", "no rights: the set is refused");
  t.match(String(none[1]), /get refused/, "and both gets");
  t.equal(none[2], "get refused", "the second get too");
});

t.test("the whole cache's expiry is seen by a run reading from its copy", { timeout: 60_000 }, async (t) => {
  const c = await cache(30);
  const n = await servicesOn(c);
  await run(n.set, { v: "soon gone" });
  const setAt = Date.now();
  const w = await exec(s.dev, n.watch, { from: "soon gone", ms: 40_000 });
  const r = w.body.results as { saw: unknown; lastFrom: number; reads: number };
  t.equal(r.saw, "undefined", "the value went with the cache's TTL");
  t.ok(r.lastFrom < setAt + 31_000, `not read after its TTL (${r.lastFrom - setAt} ms after the set)`);
  t.ok(r.lastFrom > setAt + 25_000, `but read until close to it (${r.lastFrom - setAt} ms after the set)`);
});
