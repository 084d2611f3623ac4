// Cache sets a code worker makes itself (src/code/cacheMirror.ts: a user's run whose rights on the
// cache its worker remembers), black-box: a value set in one run is read by the very next run on
// every worker and over REST; sets from many runs at once are all kept, in order with the REST
// API's; the counter pattern under a lock loses no update; and what the main thread refuses is
// still refused, with its error, once the rights are remembered: a value too big or too deep, no
// value, a cache that would go over its bytes, another cache, a write right taken away.
import t from "tap";
import { counterCode } from "./code-run.ts";
import { Client, type DevSystem, devWithSystem, must, newUser, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost({ args: ["--code-workers", "3", "--code-max-share", "1"] });
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s: DevSystem = await devWithSystem(o, "caches-local-sets");

const cachePath = (name: string) => `/admin/v/4/service_caches/${s.systemKey}/${encodeURIComponent(name)}`;
const valuesPath = (name: string, key?: string) => `${cachePath(name)}/values${key === undefined ? "" : `?key=${encodeURIComponent(key)}`}`;
async function service(name: string, code: string) {
  await must(s.dev.post(`/admin/code/v/1/${s.systemKey}/${name}`, { code, parameters: [], systemID: s.systemKey, execution_timeout: 60 }), `create service ${name}`);
  return name;
}
const exec = (c: Client, name: string, params: unknown = {}) => c.post(`/api/v/1/code/${s.systemKey}/${name}`, params);

/** A cache, its setter (key and value from the parameters; a missing value stays missing) and
 *  getter, and a user whose role may run both and holds `levels` on the cache. */
async function setUp(levels = 1 | 2 | 4) {
  const c = uniq("local");
  await must(s.dev.post(cachePath(c), { ttl: 600 }), "create cache");
  const setter = uniq("set"), getter = uniq("get");
  await service(setter, `function ${setter}(req, resp) {
    var a = req.params, cache = ClearBlade.Cache(a.cache || "${c}");
    cache.set(a.k || "k", a.big ? "x".repeat(a.big) : a.deep ? JSON.parse(Array(a.deep + 1).join("[") + Array(a.deep + 1).join("]")) : a.v, function (err, d) {
      if (err) resp.error("refused: " + JSON.stringify(d)); resp.success("set");
    });
  }`);
  await service(getter, `function ${getter}(req, resp) {
    ClearBlade.Cache("${c}").get(req.params.k || "k", function (err, d) { if (err) resp.error("refused: " + JSON.stringify(d)); resp.success(d === undefined ? "undefined" : d); });
  }`);
  const u = await newUser(s);
  const role = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, {
    name: uniq("R"), services: [setter, getter].map((name) => ({ itemInfo: { name }, permissions: 1 })), servicecaches: [{ itemInfo: { name: c }, permissions: levels }],
  }), "create role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "user roles");
  const a = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  const user = new Client(o.url, { "ClearBlade-UserToken": a.user_token });
  // every worker runs the setter and remembers the role's rights on the cache
  await Promise.all(Array.from({ length: 12 }, () => exec(user, setter, { v: "warm" })));
  return { c, setter, getter, user, roleId: role.role_id as string };
}
const answer = (r: { body: any; text: string }) => (r.body?.success === true ? r.body.results : `failed: ${r.text.slice(0, 300)}`);

t.test("a value set in one run is read by the next run on every worker, and over REST", async (t) => {
  const x = await setUp();
  const stale: string[] = [];
  for (let i = 0; i < 30; i++) {
    t.equal(answer(await exec(x.user, x.setter, { v: { i } })), "set", `set ${i}`);
    // at once, from several runs (on any worker) and the REST API
    const reads = await Promise.all(Array.from({ length: 6 }, () => exec(x.user, x.getter)));
    for (const r of reads) if (JSON.stringify(answer(r)) !== JSON.stringify({ i })) stale.push(`after set ${i}: ${JSON.stringify(answer(r))}`);
    const rest = await s.dev.get(valuesPath(x.c, "k"));
    if (JSON.stringify(rest.body?.value) !== JSON.stringify({ i })) stale.push(`REST after set ${i}: ${rest.text.slice(0, 100)}`);
  }
  t.same(stale, [], "every read after a set saw it");
});

t.test("sets from 20 runs at once are all kept, in order with the REST API's sets", async (t) => {
  const x = await setUp();
  const runs = await Promise.all(Array.from({ length: 20 }, (_, i) => exec(x.user, x.setter, { k: `key${i}`, v: i })));
  t.same(runs.map(answer), Array(20).fill("set"), "every run set its key");
  const all = await must(s.dev.get(valuesPath(x.c)), "read all");
  for (let i = 0; i < 20; i++) t.equal(all[`key${i}`], i, `key${i} kept`);
  // a REST set after a run's set is the value; a run's set after the REST set is, in turn
  t.equal(answer(await exec(x.user, x.setter, { v: "run" })), "set", "a run sets k");
  await must(s.dev.put(valuesPath(x.c), { key: "k", value: "rest" }), "REST set");
  t.same((await Promise.all(Array.from({ length: 6 }, () => exec(x.user, x.getter)))).map(answer), Array(6).fill("rest"), "the runs read the REST set");
  t.equal(answer(await exec(x.user, x.setter, { v: "run again" })), "set", "a run sets k again");
  t.equal((await s.dev.get(valuesPath(x.c, "k"))).body?.value, "run again", "REST reads the run's set");
});

t.test("the counter pattern as a user: 20 parallel runs under ClearBladeAsync.Lock, no lost update", async (t) => {
  const x = await setUp(1 | 2 | 4);
  const svc = uniq("incr");
  await service(svc, counterCode(svc, x.c, `counter-${x.c}`));
  await must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: x.roleId, changes: { services: [{ itemInfo: { name: svc }, permissions: 1 }] } }), "role runs the counter");
  // the role changed: the first runs learn the rights again, the later ones set on their workers
  const results = await Promise.all(Array.from({ length: 20 }, () => exec(x.user, svc)));
  t.ok(results.every((r) => r.status === 200 && r.body.success === true), `every run succeeded (${results.filter((r) => r.body?.success !== true).map((r) => r.text.slice(0, 200)).join("; ")})`);
  t.same(results.map((r) => r.body.results).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i), "each run saw a different count");
  const again = await Promise.all(Array.from({ length: 20 }, () => exec(x.user, svc)));
  t.same(again.map((r) => r.body?.results).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => 20 + i), "and 20 more, with the rights remembered");
  t.equal((await s.dev.get(valuesPath(x.c, "n"))).body?.value, 40, "exactly 40");
});

t.test("with the rights remembered, what the main thread refuses is still refused with its error, and changes nothing", async (t) => {
  const x = await setUp();
  t.equal(answer(await exec(x.user, x.setter, { v: "kept" })), "set", "a value");
  const refused = async (params: Record<string, unknown>, what: string, detail: RegExp) => {
    const rs = await Promise.all(Array.from({ length: 6 }, () => exec(x.user, x.setter, params)));
    for (const r of rs) {
      // (resp.error: the run answers, unsuccessful)
      if (r.body?.success !== false || !detail.test(r.text)) { t.fail(`${what}: refused, saying why (${r.status} ${r.text.slice(0, 200)})`); return; }
    }
    t.pass(`${what}: refused on every run, saying why`);
  };
  await refused({ big: 1024 * 1024 + 1 }, "a value over 1 MB", /over a cache's 1048576 bytes/);
  await refused({ deep: 200 }, "a value nested too deep", /nested deeper than 128/);
  await refused({}, "no value", /value of 'k' is missing/);
  await refused({ cache: uniq("none"), v: 1 }, "a cache it holds no right on (that does not exist)", /not allowed to write to cache/);
  t.equal((await s.dev.get(valuesPath(x.c, "k"))).body?.value, "kept", "the value stayed");
  // filling the cache: the set that would take it over its bytes is refused, the ones before kept
  t.equal(answer(await exec(x.user, x.setter, { k: "a", big: 600_000 })), "set", "600 kB");
  await refused({ k: "b", big: 500_000 }, "a set that would take the cache over 1 MB", /over its limit of 1048576/);
  t.equal(answer(await exec(x.user, x.setter, { k: "a", big: 900_000 })), "set", "the same key made bigger, under the limit (a worker that cannot be sure asks)");
  const keys = Object.keys(await must(s.dev.get(valuesPath(x.c)), "read all")).sort();
  t.same(keys, ["a", "k"], "no 'b'");
  // the write right taken away: refused on the very next run, on every worker
  await must(s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: x.roleId, changes: { servicecaches: [{ itemInfo: { name: x.c }, permissions: 1 }] } }), "read only");
  await refused({ v: "not allowed" }, "no right to write", /not allowed to write/);
  t.equal((await s.dev.get(valuesPath(x.c, "k"))).body?.value, "kept", "the value stayed");
});

t.test("a user who may only read: sets go to the main thread and are refused", async (t) => {
  const x = await setUp(1);
  const r = await exec(x.user, x.setter, { v: 1 });
  t.equal(r.body?.success, false, "refused");
  t.match(r.text, /not allowed to write/, "saying why");
  t.equal(answer(await exec(x.user, x.getter)), "undefined", "nothing set");
});
