// Service caches and locks on a cluster, black-box: two platform nodes on one database and a
// private redis-server. A value a service writes on one node is read on the other; a cache defined
// through one node is usable on the other at once (its "does not exist" was not kept); the
// counter pattern with its 20 runs spread over both nodes loses no update.
import t from "tap";
import { counterCode } from "./code-run.ts";
import { Client, devWithSystem, hasCommand, must, needs, type NodeProcess, startTwoNodes, uniq, waitFor } from "./harness.ts";

const cleanups: (() => Promise<void> | void)[] = [];
t.teardown(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function main() {
  const { nodes: [A, B], redisUp } = await startTwoNodes("caches-cluster", cleanups);
  if (!redisUp) throw new Error("redis-server did not start");
  const sys = await devWithSystem({ url: A.url }, "caches-cluster");
  const on = (n: NodeProcess) => new Client(n.url, sys.dev.headers);
  const service = (name: string, code: string) => must(on(A).post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [], systemID: sys.systemKey }), `create ${name}`);
  const exec = (n: NodeProcess, name: string, params: unknown = {}) => on(n).post(`/api/v/1/code/${sys.systemKey}/${name}`, params);

  const writer = uniq("writer"), reader = uniq("reader");
  const cacheName = uniq("shared");
  await service(writer, `async function ${writer}(req) { await ClearBladeAsync.Cache("${cacheName}").set("k", req.params.v); return "ok"; }`);
  await service(reader, `async function ${reader}() { var v = await ClearBladeAsync.Cache("${cacheName}").get("k"); return v === undefined ? "undefined" : v; }`);

  t.test("a cache defined through one node is usable on the other at once", async (t) => {
    const before = await exec(B, reader);
    t.equal(before.body.success, false, "not defined yet: an error on B");
    t.match(JSON.stringify(before.body.results), /does not exist/);
    await must(on(A).post(`/admin/v/4/service_caches/${sys.systemKey}/${cacheName}`, { ttl: 60 }), "define on A");
    const t0 = Date.now();
    t.ok(await waitFor(async () => (await exec(B, reader)).body.success === true, 3_000, 20), "B uses it");
    t.ok(Date.now() - t0 < 2_000, `well before B's 5 s memory of definitions ran out (${Date.now() - t0} ms)`);
  });

  t.test("a value written on one node is read on the other", async (t) => {
    t.equal((await exec(A, writer, { v: "from A" })).body.results, "ok");
    t.equal((await exec(B, reader)).body.results, "from A");
    t.equal((await exec(B, writer, { v: { from: "B" } })).body.success, true);
    t.same((await exec(A, reader)).body.results, { from: "B" });
    // deleting the cache through B drops the values A would read
    await must(on(B).del(`/admin/v/4/service_caches/${sys.systemKey}/${cacheName}`), "delete on B");
    await must(on(B).post(`/admin/v/4/service_caches/${sys.systemKey}/${cacheName}`, { ttl: 60 }), "define again on B");
    t.ok(await waitFor(async () => (await exec(A, reader)).body.results === "undefined", 3_000, 20), "made again: empty on A");
  });

  t.test("the counter pattern over both nodes: 20 parallel runs, no lost update", async (t) => {
    const counter = uniq("counter");
    await must(on(A).post(`/admin/v/4/service_caches/${sys.systemKey}/${counter}`, { ttl: 60 }), "define the counter cache");
    const incr = uniq("incr"), read = uniq("read");
    await service(incr, counterCode(incr, counter, "counter"));
    await service(read, `async function ${read}() { return await ClearBladeAsync.Cache("${counter}").get("n"); }`);
    // B may not know the cache yet (a miss read before it was made is kept a few seconds)
    await waitFor(async () => (await exec(B, read)).body.success === true, 3_000, 20);
    const runs = await Promise.all(Array.from({ length: 20 }, (_, i) => exec(i % 2 ? B : A, incr)));
    t.ok(runs.every((r) => r.body?.success === true), `every run succeeded (${runs.filter((r) => r.body?.success !== true).map((r) => r.text.slice(0, 200)).join("; ")})`);
    t.equal((await exec(B, read)).body.results, 20, "exactly 20");
    t.same(runs.map((r) => r.body.results).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i), "each run saw a different count");
  });
}

if (!hasCommand("redis-server") && !process.env.OUTPOST_REQUIRE_SERVICES) {
  t.test("caches on a cluster", await needs("redis-server", false), async () => {});
} else {
  await main();
}
