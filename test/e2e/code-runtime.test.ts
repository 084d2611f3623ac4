// The code runtime as ClearBlade's tools and services use it, black-box: services uploaded as
// ClearBlade's CLI sends them (a numeric engine_type, execution_timeout 0, native library names,
// libraries not created yet), cbmeta.platform_url, the runs under way (listed, stopped, limited per
// system, stopped when the service changes, restarted after a crash), the runs ended, and the kept
// logs, each with its failure paths.
import t from "tap";
import mqtt from "mqtt";
import { Client, collectionWith, type DevSystem, devWithSystem, isErr, newUser, type Outpost, request, sleep, startOutpost, uniq, waitFor } from "./harness.ts";

const o: Outpost = await startOutpost({ args: ["--code-streams-max", "2"] });
t.teardown(() => Promise.race([o.stop(), sleep(5000).then(() => o.kill())]));
const s = await devWithSystem(o, "runtime-a");
const other = await devWithSystem(o, "runtime-b");

const svcPath = (sys: DevSystem, name: string) => `/admin/code/v/1/${sys.systemKey}/${name}`;
async function service(name: string, code: string, extra: Record<string, unknown> = {}, sys: DevSystem = s) {
  const r = await sys.dev.post(svcPath(sys, name), { code, parameters: [], ...extra });
  if (r.status !== 200) throw new Error(`create ${name}: ${r.status} ${r.text}`);
}
const exec = (name: string, params: unknown = {}, sys: DevSystem = s, client: Client = sys.dev) => client.post(`/api/v/1/code/${sys.systemKey}/${name}`, params);
const running = (sys: DevSystem = s, client: Client = sys.dev, name?: string) => client.get(`/codeadmin/v/3/running/${sys.systemKey}${name ? `/${name}` : ""}`);
const instancesOf = async (name: string) => Object.values((await running()).body as Record<string, any>).filter((i) => i.service_name === name);

t.test("services as ClearBlade's CLI uploads them are accepted and run", async (t) => {
  const name = uniq("cli");
  // the body cb-cli (current) sends for a service exported from ClearBlade
  const body = {
    code: `function ${name}(req, resp) { var t = Date.now(); sleep(1200); resp.success({ slept: Date.now() - t >= 1100, meta: cbmeta.platform_url }); }`,
    parameters: [""], name, systemID: s.systemKey, engine_type: 0, execution_timeout: 0, concurrency: -1, auto_balance: false, auto_restart: false,
    dependencies: "clearblade,clearblade_async,log,http,mqtt,crypto", logging_enabled: "true", run_user: "",
  };
  const r = await s.dev.post(svcPath(s, name), body);
  t.equal(r.status, 200, `accepted: ${r.text.slice(0, 200)}`);
  const run = await exec(name);
  // (the harness binds 127.0.0.1: platform_url is that host and the HTTP port)
  t.same(run.body, { success: true, results: { slept: true, meta: `127.0.0.1:${o.httpPort}` }, logs: "" }, "execution_timeout 0 is the default, not 0 s; platform_url is host:port");
  const lib = uniq("lib");
  t.equal((await s.dev.post(`/codeadmin/v/2/library/${s.systemKey}/${lib}`, { code: "function helper() { return 41 + 1; }", api: null, description: "", dependencies: "", visibility: "system" })).status, 200, "a library with api: null");
  isErr(t, await s.dev.post(svcPath(s, uniq("bad")), { code: "function f(){}", engine_type: { v: 1 } }), 400, "an engine_type that is neither string nor number");
  isErr(t, await s.dev.post(svcPath(s, uniq("bad")), { code: "function f(){}", execution_timeout: -2 }), 400, "an execution_timeout below -1");
  isErr(t, await s.dev.post(svcPath(s, uniq("bad")), { code: "function f(){}", dependencies: "a b" }), 400, "a dependency that is no library name");
});

t.test("a library listed before it exists is accepted; the run names it until it exists", async (t) => {
  const name = uniq("later"), lib = uniq("Helpers");
  await service(name, `function ${name}(req, resp) { resp.success(helper()); }`, { dependencies: lib });
  const before = await exec(name);
  t.equal(before.body.success, false, "the run fails");
  t.match(before.body.results, new RegExp(`library '${lib}' \\(a dependency\\) does not exist`), "naming the library");
  t.equal((await s.dev.post(`/codeadmin/v/2/library/${s.systemKey}/${lib}`, { code: "function helper() { return 'from the library'; }" })).status, 200);
  t.same((await exec(name)).body, { success: true, results: "from the library" }, "runs once the library exists");
});

t.test("a native library Outpost does not provide fails the run that touches it, naming it", async (t) => {
  const uses = uniq("geo"), lists = uniq("listsonly");
  await service(uses, `function ${uses}(req, resp) { resp.success(geo.Point(1, 2)); }`, { dependencies: "clearblade,geo" });
  await service(lists, `function ${lists}(req, resp) { resp.success("fine"); }`, { dependencies: "geo,mailer" });
  const r = await exec(uses);
  t.equal(r.body.success, false);
  t.match(r.body.results, /native library 'geo' is not available in Outpost/);
  t.same((await exec(lists)).body, { success: true, results: "fine" }, "listing one without using it is fine");
});

t.test("runs under way are listed with their instance ids, and stopped by id", async (t) => {
  const name = uniq("stream"), topic = `in/${uniq("t")}`;
  await service(name, `function ${name}(req, resp) {
    var m = ClearBlade.Messaging();
    m.subscribe("${topic}", function () {});
    while (true) { m.waitForMessage(["${topic}"], function (err, msg) { log("got " + msg); }); }
  }`, { execution_timeout: -1 });
  const run = exec(name);
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 1, 10_000), "listed while it runs");
  const [inst] = await instancesOf(name);
  t.match(inst, { service_name: name, system_key: s.systemKey, stream: true, user_id: s.devId });
  t.match(inst.instance_id, /^[0-9a-f-]{36}$/);
  t.same(Object.keys((await running(s, s.dev, name)).body), [inst.instance_id], "listed for its service");
  t.same((await running(s, s.dev, uniq("none"))).body, {}, "no runs of another service");
  // failure paths: another system, a user without rights, no id, an unknown id
  isErr(t, await running(s, other.dev), 401, "another developer cannot list them");
  isErr(t, await other.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, { id: inst.instance_id }), 401, "nor stop them");
  isErr(t, await other.dev.del(`/codeadmin/v/3/running/${other.systemKey}`, { id: inst.instance_id }), 404, "another system's id is not found in one's own");
  const u = await newUser(s);
  t.ok([401, 403].includes((await running(s, u.client)).status), "a user without the all-services right cannot list them");
  isErr(t, await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, {}), 400, "no id");
  isErr(t, await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, { id: "nope" }), 404, "an unknown id");
  t.equal((await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}?id=${inst.instance_id}`)).status, 200, "stopped");
  const ended = await run;
  t.same(ended.body, { success: false, results: "stopped by request" }, "the run answers that it was stopped");
  t.same(await instancesOf(name), [], "no longer listed");
  const done = (await s.dev.get(`/api/v/3/code/${s.systemKey}/completed`)).body as any[];
  t.match(done.find((r) => r.Id === inst.instance_id), { Service: name, Response: { success: false, results: "stopped by request" }, Error: { error: "stopped by request" } }, "among the completed runs");
});

t.test("a system runs at most --code-streams-max stream services at once; stopping one makes room", async (t) => {
  const name = uniq("holder");
  await service(name, `function ${name}(req, resp) { ClearBlade.Messaging().subscribe("hold/x", function () {}); while (true) { ClearBlade.Messaging().waitForMessage(["hold/x"], function () {}); } }`, { execution_timeout: -1 });
  const first = [exec(name), exec(name)];
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 2, 10_000), "two run");
  const third = await exec(name);
  isErr(t, third, 429, "the third is refused");
  t.match(third.body.error.detail, /runs 2 stream services already/);
  t.ok(Number(third.headers["retry-after"]) > 0, "with Retry-After");
  t.same((await exec(uniq("none"), {}, other)).status, 404, "(another system is not counted)");
  for (const i of await instancesOf(name)) await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, { id: i.instance_id });
  await Promise.all(first);
  const again = exec(name);
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 1, 10_000), "room again");
  for (const i of await instancesOf(name)) await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, { id: i.instance_id });
  await again;
});

t.test("a stream service is stopped when it changes; with auto_restart it starts again, after a crash too", async (t) => {
  const name = uniq("auto"), col = await collectionWith(s, [["n", "int"]]);
  // writes a row each time it starts, then waits; a message 'crash' makes it throw
  await service(name, `function ${name}(req, resp) {
    var m = ClearBlade.Messaging();
    ClearBlade.Collection({ collectionName: "${col.name}" }).create({ n: 1 }, function () {});
    m.subscribe("auto/${name}", function () {});
    while (true) { m.waitForMessage(["auto/${name}"], function (err, msg) { if (msg === "crash") throw new Error("crashed on purpose"); }); }
  }`, { execution_timeout: -1, auto_restart: true });
  const rowsNow = async () => ((await s.dev.get(`/api/v/1/data/${col.id}`)).body.DATA as unknown[]).length;
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 1 && (await rowsNow()) === 1, 10_000), "auto_restart starts it when it is saved");
  const [first] = await instancesOf(name);
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: s.devToken, password: s.systemKey, reconnectPeriod: 0 });
  await c.publishAsync(`auto/${name}`, "crash", { qos: 1 });
  t.ok(await waitFor(async () => (await rowsNow()) === 2 && (await instancesOf(name)).some((i) => i.instance_id !== first.instance_id), 15_000), "restarted after the crash");
  const failed = (await s.dev.get(`/api/v/3/code/${s.systemKey}/failed`)).body as any[];
  t.ok(failed.some((f) => f.service_name === name && /crashed on purpose/.test(f.error)), "the crash is a failed run");
  const [second] = await instancesOf(name);
  t.equal((await s.dev.put(svcPath(s, name), { description_ignored: undefined, logging_enabled: true })).status, 200, "saved again");
  t.ok(await waitFor(async () => !(await instancesOf(name)).some((i) => i.instance_id === second.instance_id), 10_000), "the running instance is stopped");
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 1, 10_000), "and a new one started");
  // stopped by request: not restarted until it is saved again
  const [third] = await instancesOf(name);
  await s.dev.del(`/codeadmin/v/3/running/${s.systemKey}`, { id: third.instance_id });
  t.ok(await waitFor(async () => (await instancesOf(name)).length === 0, 10_000), "stopped by request");
  await c.publishAsync("auto/none", "marker", { qos: 1 });
  await sleep(1_500); // the restart delay is 1 s: a restart would be listed by now
  t.same(await instancesOf(name), [], "and held");
  t.equal((await s.dev.del(svcPath(s, name))).status, 200);
  c.end(true);
});

t.test("kept logs: a service with logging_enabled keeps its runs' output, listed and read by instance", async (t) => {
  const name = uniq("logged");
  await service(name, `function ${name}(req, resp) { log("hello " + req.params.n); console.log({ n: req.params.n }); if (req.params.fail) throw new Error("boom"); resp.success(req.params.n); }`, { logging_enabled: true });
  await exec(name, { n: 1 });
  await exec(name, { n: 2, fail: true });
  const base = `/codeadmin/v/2/logs/${s.systemKey}/${name}`;
  t.ok(await waitFor(async () => ((await s.dev.get(base)).body as unknown[]).length === 2, 5_000), "two runs kept");
  const logs = (await s.dev.get(base)).body as any[];
  t.match(logs[0], { log: 'hello 2\n{"n":2}\nrun failed: Error: boom', success: false });
  t.match(logs[1], { log: 'hello 1\n{"n":1}', success: true });
  t.ok(logs.every((l) => typeof l.service_execution_time === "string" && typeof l.duration_ms === "number"), "each with its start and duration");
  t.same((await s.dev.get(`${base}/${logs[1].id}`)).body, logs[1], "one run by its instance id");
  t.same((await s.dev.get(`/api/v/3/code/${s.systemKey}/logs/${name}`)).body, logs, "the same on /api/v/3");
  t.same((await s.dev.get(`${base}/active`)).body, { logging_enabled: "true" });
  t.same((await s.dev.post(base, { logging: "false" })).body, { logging_enabled: "false" });
  t.same((await s.dev.get(`${base}/active`)).body, { logging_enabled: "false" });
  t.equal((await s.dev.put(base, { log_level: "debug" })).status, 200, "a log level is accepted");
  // failure paths
  isErr(t, await s.dev.get(`${base}/nope`), 404, "an unknown instance");
  isErr(t, await s.dev.get(`/codeadmin/v/2/logs/${s.systemKey}/${uniq("none")}`), 404, "an unknown service");
  isErr(t, await s.dev.post(base, { logging: "sometimes" }), 400, "logging neither true nor false");
  isErr(t, await s.dev.put(base, { log_level: { x: 1 } }), 400, "a log level that is an object");
  isErr(t, await other.dev.get(base), 401, "another developer");
  const u = await newUser(s);
  t.ok([401, 403].includes((await u.client.get(base)).status), "a user without the all-services right");
  t.equal((await s.dev.del(svcPath(s, name))).status, 200);
  isErr(t, await s.dev.get(base), 404, "gone with the service");
});

t.test("a promise library loaded as a system library, used with classic and async calls together", async (t) => {
  // a small deferred-style library, as services use one (a global Q with defer, all and when)
  const lib = uniq("PromiseKit"), name = uniq("usesPromises"), col = await collectionWith(s, [["v", "int"]]);
  t.equal((await s.dev.post(`/codeadmin/v/2/library/${s.systemKey}/${lib}`, { code: `
    var Q = (function () {
      function defer() { var d = {}; d.promise = new Promise(function (res, rej) { d.resolve = res; d.reject = rej; }); return d; }
      return { defer: defer, all: function (ps) { return Promise.all(ps); }, when: function (v) { return Promise.resolve(v); } };
    })();
    function fetchCount(name) {
      var d = Q.defer();
      ClearBlade.Collection({ collectionName: name }).count(null, function (err, data) { if (err) d.reject(data); else d.resolve(data.count); });
      return d.promise;
    }` })).status, 200, "the library");
  await service(name, `function ${name}(req, resp) {
    var rows = ClearBladeAsync.Collection({ collectionName: "${col.name}" });
    Q.all([rows.create([{ v: 1 }, { v: 2 }]), Q.when(3)])
      .then(function () { return fetchCount("${col.name}"); })
      .then(function (n) { resp.success({ count: n }); })
      .catch(function (e) { resp.error(String(e && e.message || e)); });
  }`, { dependencies: lib });
  t.same((await exec(name)).body, { success: true, results: { count: 2 } }, "the deferreds settle through classic and async calls");
  // its failure path: a rejection reaches the service's catch
  const bad = uniq("badPromises");
  await service(bad, `function ${bad}(req, resp) { fetchCount("${uniq("nocollection")}").then(function () { resp.success("no"); }, function (e) { resp.error({ rejected: true }); }); }`, { dependencies: lib });
  t.same((await exec(bad)).body, { success: false, results: { rejected: true } }, "a failed call rejects the deferred");
});

t.test("ClearBladeAsync's update answers the updated rows, as ClearBlade's does; the classic one its count", async (t) => {
  const col = await collectionWith(s, [["v", "int"], ["tag", "string"]]);
  t.equal((await s.dev.post(`/api/v/1/data/${col.id}`, [{ v: 1, tag: "a" }, { v: 2, tag: "a" }, { v: 3, tag: "b" }])).status, 200);
  const name = uniq("upd");
  await service(name, `async function ${name}(req, resp) {
    var c = ClearBladeAsync.Collection({ collectionName: "${col.name}" });
    var rows = await c.update(ClearBladeAsync.Query({ collectionName: "${col.name}" }).equalTo("tag", "a"), { tag: "z" });
    var none = await c.update(ClearBladeAsync.Query({ collectionName: "${col.name}" }).equalTo("tag", "nope"), { tag: "y" });
    var classic;
    ClearBlade.Collection({ collectionName: "${col.name}" }).update(ClearBlade.Query({ collectionName: "${col.name}" }).equalTo("tag", "b"), { v: 30 }, function (e, d) { classic = d; });
    resp.success({ rows: rows.map(function (r) { return [r.v, r.tag]; }).sort(), none: none, classic: classic });
  }`);
  t.same((await exec(name)).body, { success: true, results: { rows: [[1, "z"], [2, "z"]], none: [], classic: { count: 1 } } });
  // its failure path: an unknown column is the promise's rejection
  const bad = uniq("badupd");
  await service(bad, `function ${bad}(req, resp) { ClearBladeAsync.Collection({ collectionName: "${col.name}" }).update(ClearBladeAsync.Query({ collectionName: "${col.name}" }), { nope: 1 }).then(function () { resp.success("no") }, function (e) { resp.error(e.message) }); }`);
  const r = await exec(bad);
  t.equal(r.body.success, false);
  t.match(r.body.results, /unknown column 'nope'/);
});

t.test("hostile arguments to sleep, timers and crypto are errors the code can catch; the server carries on", async (t) => {
  const name = uniq("hostile");
  await service(name, `function ${name}(req, resp) {
    var out = [];
    function tryIt(f) { try { f(); out.push("no error"); } catch (e) { out.push(String(e.message || e)); } }
    tryIt(function () { sleep(-5); });
    tryIt(function () { setTimeout("not a function", 10); });
    tryIt(function () { for (var i = 0; i < 1001; i++) setTimeout(function () {}, 60000); });
    tryIt(function () { crypto.createHash("sha256").update(new Array(2.5e6).join("xxxx")).digest("hex"); });
    tryIt(function () { crypto.create_jwt("claims", "HS256", "k"); });
    tryIt(function () { crypto.randomBytes(-1); });
    resp.success(out);
  }`, { execution_timeout: 20 });
  const r = await exec(name);
  t.equal(r.body.success, true, JSON.stringify(r.body).slice(0, 300));
  const out = r.body.results as string[];
  t.match(out[0], /0 or more/, "a negative sleep");
  t.match(out[1], /must be a function/, "a timer without a function");
  t.match(out[2], /at most 1000 timers/, "more than 1,000 timers at once");
  t.match(out[3], /longer than 8388608 bytes/, "a 10 MB hash input");
  t.match(out[4], /claims must be an object/, "JWT claims that are not an object");
  t.match(out[5], /up to 1 MiB/, "a negative byte count");
  t.equal((await request(o.url, "GET", "/health")).status, 200, "the server is fine");
});

t.test("loading takes as long as large code needs, beyond a slice; a stream service set not to run here is not started here", async (t) => {
  // a library whose top level runs 800 ms (a large bundle compiling on a busy machine takes that)
  const lib = uniq("Heavy"), name = uniq("usesHeavy");
  t.equal((await s.dev.post(`/codeadmin/v/2/library/${s.systemKey}/${lib}`, { code: "var t0 = Date.now(); while (Date.now() - t0 < 800) {} var HEAVY_READY = true;" })).status, 200);
  await service(name, `function ${name}(req, resp) { resp.success(HEAVY_READY); }`, { dependencies: lib });
  t.same((await exec(name)).body, { success: true, results: true }, "loads and runs (it was interrupted at the 500 ms slice)");
  // an edge-only stream service with auto_restart: saving it starts nothing on the platform
  const edgeOnly = uniq("edgeOnly"), probe = uniq("probeStream");
  await service(edgeOnly, `function ${edgeOnly}(req, resp) { ClearBlade.Messaging().subscribe("e/x", function () {}); while (true) { ClearBlade.Messaging().waitForMessage(["e/x"], function () {}); } }`,
    { execution_timeout: -1, auto_restart: true, run_on_platform: false, run_on_edge: true });
  // a witness saved after it: once the witness runs, the edge-only one would have been started too
  await service(probe, `function ${probe}(req, resp) { ClearBlade.Messaging().subscribe("p/x", function () {}); while (true) { ClearBlade.Messaging().waitForMessage(["p/x"], function () {}); } }`,
    { execution_timeout: -1, auto_restart: true });
  t.ok(await waitFor(async () => (await instancesOf(probe)).length === 1, 10_000), "the witness runs");
  t.same(await instancesOf(edgeOnly), [], "the edge-only service is not started on the platform");
  const failed = (await s.dev.get(`/api/v/3/code/${s.systemKey}/failed`)).body as any[];
  t.notOk(failed.some((f) => f.service_name === edgeOnly), "and nothing failed for it");
  await s.dev.del(svcPath(s, probe));
});
