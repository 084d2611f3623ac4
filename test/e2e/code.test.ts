// Code services, black-box: definitions on the three path families (/admin/code/v/1,
// /api/v/3/code/.../service, /codeadmin/v/2), the GET shape cb-cli relies on, code meta, execution
// (POST /api/v/1/code/{sk}/{name}) with resp.success / resp.error / defaults, logs, the req object,
// permissions and run_user, every runtime API family from inside a service (ClearBlade,
// ClearBladeAsync, Code, Messaging over real MQTT, Device, User, log, newUUID, cbmeta), libraries
// with versions, sandbox attacks and limits, failed runs with retry and delete, and the
// concurrency setting.
import mqtt from "mqtt";
import t, { type Test } from "tap";
import { Client, type DevSystem, type HttpResponse, devWithSystem, newUser, request, startOutpost, uniq, sleep, waitFor, qs, isErr, ok200, collectionWith } from "./harness.ts";

const o = await startOutpost();
// a server stuck in a service (see the last test) gets SIGKILL instead of hanging the teardown
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s = await devWithSystem(o, "code-a");
const s2 = await devWithSystem(o, "code-b");
const SK = s.systemKey;

// ---- helpers ----------------------------------------------------------------------------------

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Rejects when `p` takes longer than `ms` (so a hung server fails a test instead of the file). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([p, new Promise<T>((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(timer));
}

function detailHas(t: Test, r: HttpResponse, re: RegExp, what = "") {
  const d = `${r.body?.error?.detail ?? ""} ${r.body?.error?.message ?? ""}`;
  t.match(d, re, `${what}: error says ${re} (${d.slice(0, 200)})`);
}

const adminSvc = (sys: DevSystem, name: string) => `/admin/code/v/1/${sys.systemKey}/${name}`;
const execPath = (sys: DevSystem, name: string) => `/api/v/1/code/${sys.systemKey}/${name}`;

/** Creates a service as the developer; throws unless 200. */
async function service(name: string, code: string, extra: Record<string, unknown> = {}, sys: DevSystem = s) {
  const r = await sys.dev.post(adminSvc(sys, name), { code, parameters: [], ...extra });
  if (r.status !== 200) throw new Error(`create service ${name}: ${r.status} ${r.text}`);
  return r.body;
}
async function updateService(name: string, body: Record<string, unknown>, sys: DevSystem = s) {
  const r = await sys.dev.put(adminSvc(sys, name), body);
  if (r.status !== 200) throw new Error(`update service ${name}: ${r.status} ${r.text}`);
  return r.body;
}
const exec = (c: Client, name: string, params: unknown = {}, headers?: Record<string, string>, sys: DevSystem = s) =>
  c.post(execPath(sys, name), params, headers);

const collection = (columns: [string, string][], name = uniq("col"), sys: DevSystem = s) => collectionWith(sys, columns, name);
async function rows(colId: string, query?: unknown): Promise<any[]> {
  const r = await s.dev.get(`/api/v/1/data/${colId}${query === undefined ? "" : `?query=${qs(query)}`}`);
  if (r.status !== 200) throw new Error(`fetch rows: ${r.status} ${r.text}`);
  return r.body.DATA;
}

async function createRole(sys: DevSystem, body: Record<string, unknown>): Promise<string> {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, body);
  if (r.status !== 200) throw new Error(`create role: ${r.status} ${r.text}`);
  return r.body.role_id;
}
/** A user of `sys` holding a fresh role with `perms` (none when empty); a fresh token after the change. */
async function userWith(perms: Record<string, unknown>, sys: DevSystem = s) {
  const u = await newUser(sys);
  if (Object.keys(perms).length) {
    const roleId = await createRole(sys, { name: uniq("R"), ...perms });
    const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [roleId] } } });
    if (r.status !== 200) throw new Error(`user roles: ${r.status} ${r.text}`);
  }
  const a = await sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password });
  if (a.status !== 200) throw new Error(`user auth: ${a.status} ${a.text}`);
  const token = a.body.user_token as string;
  return { ...u, token, client: new Client(o.url, { "ClearBlade-UserToken": token }) };
}
const canRun = (...names: string[]) => ({ services: names.map((name) => ({ itemInfo: { name }, permissions: 1 })) });

// ---- definitions ------------------------------------------------------------------------------

t.test("service CRUD on /admin/code/v/1 and the GET shape (params, numeric current_version)", async (t) => {
  const name = uniq("crud");
  const code = `function ${name}(req, resp) { resp.success("v1"); }`;
  const c = await s.dev.post(adminSvc(s, name), { code, parameters: ["a", "b"], dependencies: "clearblade, log", run_user: "", execution_timeout: 30, systemID: SK, name });
  ok200(t, c, "create");
  t.type(c.body, "object", "create answers a JSON object");

  const g = await s.dev.get(execPath(s, name));
  ok200(t, g, "GET /api/v/1/code");
  t.equal(g.body.code, code, "code is the source");
  t.same(g.body.params, ["a", "b"], "the parameters come back under params");
  t.type(g.body.current_version, "number", "current_version is a number");
  t.equal(g.body.execution_timeout, 30);
  const v1 = g.body.current_version;

  const same = await s.dev.get(adminSvc(s, name));
  ok200(t, same, "GET /admin/code/v/1/{sk}/{name}");
  t.equal(same.body.code, code);

  const list = await s.dev.get(`/admin/code/v/1/${SK}`);
  ok200(t, list, "list");
  t.ok(Array.isArray(list.body.code), "{code:[names]}");
  t.ok(list.body.code.includes(name), "the service is listed by name");
  t.ok(list.body.code.every((x: unknown) => typeof x === "string"), "names only");

  const code2 = `function ${name}(req, resp) { resp.success("v2"); }`;
  const u = await s.dev.put(adminSvc(s, name), { code: code2, parameters: ["c"] });
  ok200(t, u, "update");
  const g2 = await s.dev.get(execPath(s, name));
  t.equal(g2.body.code, code2, "the code changed");
  t.same(g2.body.params, ["c"], "params changed");
  t.type(g2.body.current_version, "number");
  t.ok(g2.body.current_version > v1, `current_version increments (${v1} -> ${g2.body.current_version})`);
  t.equal(g2.body.execution_timeout, 30, "fields not sent are kept");
  const r = await exec(s.dev, name);
  t.same(r.body, { success: true, results: "v2" }, "the new code runs");

  // the settings-only PUT of /codeadmin/v/2 (Go SDK, long-running params)
  const cu = await s.dev.put(`/codeadmin/v/2/${SK}/${name}`, { execution_timeout: 5, concurrency: 2, auto_restart: false, auto_balance: false });
  ok200(t, cu, "PUT /codeadmin/v/2");
  const g3 = await s.dev.get(execPath(s, name));
  t.equal(g3.body.execution_timeout, 5, "execution_timeout via codeadmin");
  t.equal(g3.body.concurrency, 2, "concurrency via codeadmin");
  t.equal(g3.body.code, code2, "code kept");
  t.ok(g3.body.current_version > g2.body.current_version, "another version");

  ok200(t, await s.dev.del(adminSvc(s, name)), "delete");
  isErr(t, await s.dev.get(execPath(s, name)), 404, "GET after delete");
  t.notOk((await s.dev.get(`/admin/code/v/1/${SK}`)).body.code?.includes(name), "no longer listed");
  isErr(t, await s.dev.del(adminSvc(s, name)), 404, "delete again");
  isErr(t, await s.dev.put(adminSvc(s, name), { code }), 404, "update a missing service");
  isErr(t, await exec(s.dev, name), 404, "execute a deleted service");
});

t.test("service CRUD on /api/v/3/code/{sk}/service/{name} with a user holding allservices, and /codeadmin/v/2", async (t) => {
  const u = await userWith({ allservices: { permissions: 15 } });
  const name = uniq("usvc");
  const p = `/api/v/3/code/${SK}/service/${name}`;
  ok200(t, await u.client.post(p, { code: `function ${name}(req, resp) { resp.success(1); }`, parameters: [], systemID: SK, name, dependencies: "clearblade, log", run_user: "" }), "create as a user");
  const g = await u.client.get(p);
  ok200(t, g, "read as a user");
  t.match(g.body.code, /resp\.success\(1\)/);
  t.ok(Array.isArray(g.body.params));
  t.type(g.body.current_version, "number");
  const l = await u.client.get(`/api/v/3/code/${SK}`);
  ok200(t, l, "list as a user");
  t.ok(l.body.code.includes(name));
  const up = await u.client.put(p, { code: `function ${name}(req, resp) { resp.success(2); }` });
  ok200(t, up, "update as a user");
  t.equal(up.body.version_number, g.body.current_version + 1, "update reports the new version_number");
  t.same((await exec(u.client, name)).body, { success: true, results: 2 }, "allservices lets the user run it");
  ok200(t, await u.client.del(p), "delete as a user");
  isErr(t, await u.client.get(p), 404, "gone");

  // /codeadmin/v/2 as a full CRUD family
  const n2 = uniq("ca");
  const cp = `/codeadmin/v/2/${SK}/${n2}`;
  ok200(t, await s.dev.post(cp, { code: `function ${n2}(req, resp) { resp.success("ca"); }`, name: n2, systemID: SK, parameters: [], dependencies: "", run_user: "" }), "create via /codeadmin/v/2");
  t.equal((await s.dev.get(cp)).body.name, n2, "read via /codeadmin/v/2");
  t.same((await exec(s.dev, n2)).body, { success: true, results: "ca" });
  ok200(t, await s.dev.del(cp), "delete via /codeadmin/v/2");
  isErr(t, await s.dev.get(execPath(s, n2)), 404);
});

t.test("code meta: GET /api/v/3/code/codemeta/{sk}", async (t) => {
  const name = uniq("meta");
  await service(name, `function ${name}(req, resp) {}`, { execution_timeout: 12, concurrency: 3, logging_enabled: true });
  const r = await s.dev.get(`/api/v/3/code/codemeta/${SK}`);
  ok200(t, r);
  t.ok(Array.isArray(r.body.code), "{code:[…]}");
  const m = r.body.code.find((x: any) => x.name === name);
  t.ok(m, "the service is there");
  t.equal(m?.system_key, SK);
  t.type(m?.version, "number");
  t.equal(m?.execution_timeout, 12);
  t.equal(m?.concurrency, 3);
  t.equal(m?.logging_enabled, true);
  for (const k of ["uuid", "version_id", "euid", "auto_balance", "auto_restart"]) t.ok(k in (m ?? {}), `codemeta has ${k}`);
  isErr(t, await s2.dev.get(`/api/v/3/code/codemeta/${SK}`), 401, "another system's developer");
  const nobody = await userWith({});
  isErr(t, await nobody.client.get(`/api/v/3/code/codemeta/${SK}`), 401, "a user without allservices");
});

t.test("service definition failures", async (t) => {
  const name = uniq("dup");
  await service(name, `function ${name}(req, resp) {}`);
  const code = "function x(req, resp) {}";
  const bad: [string, unknown, number, RegExp][] = [
    ["bad-name", { code }, 400, /name/],
    ["has space", { code }, 400, /name/],
    ["1starts", { code }, 400, /name/],
    [uniq("nocode"), { parameters: [] }, 400, /code/],
    [uniq("numcode"), { code: 42 }, 400, /code/],
    [uniq("unk"), { code, colour: "blue" }, 400, /colour/],
    [uniq("to"), { code, execution_timeout: -2 }, 400, /execution_timeout/],
    [uniq("to"), { code, execution_timeout: "60" }, 400, /execution_timeout/],
    [uniq("to"), { code, execution_timeout: 1.5 }, 400, /execution_timeout/],
    [uniq("to"), { code, execution_timeout: -5 }, 400, /execution_timeout/],
    [uniq("cc"), { code, concurrency: -2 }, 400, /concurrency/],
    [uniq("pp"), { code, parameters: "a,b" }, 400, /parameters/],
    [uniq("lib"), { code, dependencies: "clearblade,no such lib" }, 400, /no such lib/],
    [name, { code }, 400, /already exists/],
  ];
  for (const [n, body, status, re] of bad) {
    const r = await s.dev.post(adminSvc(s, encodeURIComponent(n)), body);
    isErr(t, r, status, `${n} ${JSON.stringify(body)}`);
    detailHas(t, r, re, n);
  }
  t.notOk((await s.dev.get(`/admin/code/v/1/${SK}`)).body.code.some((x: string) => x.startsWith("to") || x.startsWith("lib") || x.startsWith("unk")), "nothing failed got created");
  const bj = await s.dev.req("POST", adminSvc(s, uniq("bj")), "{not json");
  isErr(t, bj, 400, "malformed JSON");
  isErr(t, await s.dev.put(adminSvc(s, name), { execution_timeout: 86_401 }), 400, "update with a bad timeout");
  isErr(t, await s.dev.put(adminSvc(s, name), { dependencies: "ghost lib" }), 400, "update with a dependency that is no library name");
  isErr(t, await s.dev.put(adminSvc(s, name), { wat: 1 }), 400, "update with an unknown field");
  // a service's .json as ClearBlade's exports write it, posted with its code, is taken
  const exported = uniq("exported");
  const ex = await s.dev.post(adminSvc(s, exported), { code: `function ${exported}(req, resp){ resp.success(1) }`, auto_balance: false, auto_restart: false, concurrency: 0,
    current_version: 1, dependencies: "", execution_timeout: 60, logging_enabled: false, name: exported, params: [], run_user: "",
    permissions: { Administrator: 1, Anonymous: 1, Authenticated: 1 }, source: `${exported}.js` });
  ok200(t, ex, "an exported service's fields (permissions, source) are taken");
  isErr(t, await s.dev.put(adminSvc(s, exported), { permissions: ["Administrator"] }), 400, "permissions that are not role levels");
  isErr(t, await s.dev.put(adminSvc(s, exported), { source: 42 }), 400, "a source that is not a file name");

  // permissions
  const plain = await userWith({});
  isErr(t, await plain.client.post(`/api/v/3/code/${SK}/service/${uniq("p")}`, { code }), 401, "a user without allservices cannot create");
  isErr(t, await plain.client.get(`/api/v/3/code/${SK}/service/${name}`), 401, "nor read");
  isErr(t, await plain.client.put(`/api/v/3/code/${SK}/service/${name}`, { code }), 401, "nor update");
  isErr(t, await plain.client.del(`/api/v/3/code/${SK}/service/${name}`), 401, "nor delete");
  isErr(t, await plain.client.get(`/api/v/3/code/${SK}`), 401, "nor list");
  const reader = await userWith({ allservices: { permissions: 1 } });
  ok200(t, await reader.client.get(`/api/v/3/code/${SK}/service/${name}`), "allservices read may read");
  isErr(t, await reader.client.post(`/api/v/3/code/${SK}/service/${uniq("p")}`, { code }), 401, "but not create");
  isErr(t, await reader.client.del(`/api/v/3/code/${SK}/service/${name}`), 401, "nor delete");
  isErr(t, await s2.dev.post(adminSvc(s, uniq("o")), { code }), 401, "another system's developer cannot create");
  isErr(t, await s2.dev.get(adminSvc(s, name)), 401, "nor read");
  isErr(t, await s2.dev.get(execPath(s, name)), 401, "nor read via /api/v/1");
  isErr(t, await s2.dev.put(adminSvc(s, name), { code }), 401, "nor update");
  isErr(t, await s2.dev.del(adminSvc(s, name)), 401, "nor delete");
  isErr(t, await s2.dev.get(`/admin/code/v/1/${SK}`), 401, "nor list");
  isErr(t, await new Client(o.url).post(adminSvc(s, uniq("n")), { code }), 401, "no token at all");
  t.ok((await s.dev.get(execPath(s, name))).status === 200, "the service is still there");
});

// ---- execution --------------------------------------------------------------------------------

t.test("execute: resp.success, resp.error, default success, logs", async (t) => {
  const ok = uniq("ok"), err = uniq("err"), none = uniq("none"), logs = uniq("logs"), send = uniq("send");
  await service(ok, `function ${ok}(req, resp) { resp.success({ sum: req.params.a + req.params.b, list: [1, "two", null] }); }`);
  await service(err, `function ${err}(req, resp) { resp.error({ reason: "nope", got: req.params.x }); }`);
  await service(none, `function ${none}(req, resp) { var x = 1 + 1; }`);
  await service(send, `function ${send}(req, resp) { resp.send("sent"); }`);
  await service(logs, `function ${logs}(req, resp) { log("hello", { x: 1 }); console.log("from console"); console.error("err line"); resp.success("done"); }`);

  const a = await exec(s.dev, ok, { a: 2, b: 40 });
  ok200(t, a);
  t.same(a.body, { success: true, results: { sum: 42, list: [1, "two", null] } }, "resp.success");
  const b = await exec(s.dev, err, { x: "y" });
  ok200(t, b, "resp.error still answers 200");
  t.equal(b.body.success, false, "resp.error -> success:false");
  t.same(b.body.results, { reason: "nope", got: "y" }, "resp.error's value is in results");
  const c = await exec(s.dev, none);
  t.same(c.body, { success: true, results: null }, "no resp call -> success with null results");
  const c2 = await s.dev.post(execPath(s, none));
  t.same(c2.body, { success: true, results: null }, "no body at all is fine");
  t.same((await exec(s.dev, send)).body, { success: true, results: "sent" }, "resp.send");

  const quiet = await exec(s.dev, logs);
  t.same(quiet.body, { success: true, results: "done" }, "without the header there are no logs");
  const loud = await exec(s.dev, logs, {}, { "Logging-enabled": "true" });
  t.equal(loud.body.success, true);
  t.type(loud.body.logs, "string", "logs come back with Logging-enabled: true");
  t.match(loud.body.logs, /hello \{"x":1\}/, "log() joins its arguments, objects as JSON");
  t.match(loud.body.logs, /from console/, "console.log is captured");
  t.match(loud.body.logs, /err line/, "console.error is captured");
  t.ok(loud.body.logs.indexOf("hello") < loud.body.logs.indexOf("from console"), "in order");
  // logging_enabled on the service gives logs without the header
  await updateService(logs, { logging_enabled: true });
  const always = await exec(s.dev, logs);
  t.match(always.body.logs ?? "", /hello/, "logging_enabled on the service returns logs");
});

t.test("execute: the req object", async (t) => {
  const name = uniq("req");
  await service(name, `function ${name}(req, resp) { resp.success(req); }`);
  const u = await userWith(canRun(name));
  const params = { a: 1, nested: { b: [true, "x"] } };
  const r = await exec(u.client, name, params);
  ok200(t, r);
  const req = r.body.results;
  t.equal(req.systemKey, SK, "systemKey");
  t.equal(req.systemSecret, s.systemSecret, "systemSecret");
  t.equal(req.userEmail, u.email, "userEmail");
  t.equal(req.userid, u.userId, "userid");
  t.equal(req.userToken, u.token, "userToken is the caller's token");
  t.same(req.params, params, "params is the body");
  t.equal(req.isLogging, false, "isLogging false without the header");
  t.match(req.service_instance_id, UUID, "service_instance_id is a UUID");
  t.same(req.caller, { userid: u.userId, userEmail: u.email, userToken: u.token }, "caller");
  const r2 = await exec(u.client, name, {}, { "Logging-enabled": "true" });
  t.equal(r2.body.results.isLogging, true, "isLogging with the header");
  t.not(r2.body.results.service_instance_id, req.service_instance_id, "each run has its own instance id");
  t.same(r2.body.results.params, {}, "empty params");
  // the developer as caller
  const d = await exec(s.dev, name, { z: 1 });
  t.equal(d.body.results.userToken, s.devToken, "a developer's token is passed too");
  t.equal(d.body.results.userEmail, s.email, "the developer's email");
});

t.test("execute: bad bodies, unknown services, permissions", async (t) => {
  const name = uniq("perm");
  await service(name, `function ${name}(req, resp) { resp.success("ran"); }`);
  const arr = await exec(s.dev, name, [1, 2]);
  isErr(t, arr, 400, "an array body");
  for (const body of ['"text"', "42", "true"]) isErr(t, await s.dev.req("POST", execPath(s, name), body), 400, `body ${body}`);
  isErr(t, await s.dev.req("POST", execPath(s, name), "{broken"), 400, "malformed JSON");
  const unknown = await exec(s.dev, uniq("ghost"));
  isErr(t, unknown, 404, "unknown service");

  const nobody = await userWith({});
  isErr(t, await exec(nobody.client, name), 401, "a user without execute permission");
  const other = await userWith(canRun("someOtherService"));
  isErr(t, await exec(other.client, name), 401, "a grant on another service does not count");
  const runner = await userWith(canRun(name));
  t.same((await exec(runner.client, name)).body, { success: true, results: "ran" }, "the service grant (level 1) lets the user run it");
  const all = await userWith({ allservices: { permissions: 1 } });
  t.same((await exec(all.client, name)).body, { success: true, results: "ran" }, "allservices lets the user run it");
  isErr(t, await exec(s2.dev, name), 401, "another system's developer");
  const foreignUser = await userWith({ allservices: { permissions: 15 } }, s2);
  isErr(t, await exec(foreignUser.client, name), 401, "a user of another system");
  isErr(t, await exec(new Client(o.url), name), 401, "no token");
  const bogus = await exec(new Client(o.url, { "ClearBlade-UserToken": "not-a-token" }), name);
  t.ok(bogus.status === 400 || bogus.status === 401, `a bogus token is refused (${bogus.status})`);
});

t.test("run_user: the service's collection calls run with that user's permissions", async (t) => {
  const readable = await collection([["v", "string"]]);
  const hidden = await collection([["v", "string"]]);
  await s.dev.post(`/api/v/1/data/${readable.id}`, { v: "visible" });
  await s.dev.post(`/api/v/1/data/${hidden.id}`, { v: "secret" });
  const runAs = await userWith({ collections: [{ itemInfo: { id: readable.id }, permissions: 1 }] });
  const name = uniq("runas");
  const code = `async function ${name}(req, resp) {
    var out = {};
    try { var r = await ClearBladeAsync.Collection({ collectionName: "${readable.name}" }).fetch(); out.readable = r.DATA.map(function (x) { return x.v; }); }
    catch (e) { out.readable = "denied: " + e.message; }
    try { var h = await ClearBladeAsync.Collection({ collectionName: "${hidden.name}" }).fetch(); out.hidden = h.DATA.map(function (x) { return x.v; }); }
    catch (e) { out.hidden = "denied: " + e.message; }
    out.whoami = req.userid;
    resp.success(out);
  }`;
  await service(name, code);
  const caller = await userWith(canRun(name));

  const plain = await exec(caller.client, name);
  t.equal(plain.body.success, true);
  t.match(plain.body.results.readable, /^denied/, "without run_user the caller (no collection grant) is denied");
  t.match(plain.body.results.hidden, /^denied/);

  await updateService(name, { run_user: runAs.userId });
  t.equal((await s.dev.get(execPath(s, name))).body.run_user, runAs.userId, "run_user is stored");
  const asUser = await exec(caller.client, name);
  t.equal(asUser.body.success, true);
  t.same(asUser.body.results.readable, ["visible"], "with run_user the grant of that user applies (allowed)");
  t.match(asUser.body.results.hidden, /^denied/, "and its lack of a grant applies too (denied)");
  t.equal(asUser.body.results.whoami, caller.userId, "req.userid is still the caller");
  const asDev = await exec(s.dev, name);
  t.same(asDev.body.results.readable, ["visible"], "a developer caller also runs as run_user");
  t.match(asDev.body.results.hidden, /^denied/, "so even a developer's call cannot read what run_user cannot");

  // the callback API reports the denial as err=true
  const cb = uniq("runascb");
  await service(cb, `function ${cb}(req, resp) {
    ClearBlade.Collection({ collectionName: "${hidden.name}" }).fetch(function (err, data) { resp.success({ err: err, data: data }); });
  }`, { run_user: runAs.userId });
  const r = await exec(s.dev, cb);
  t.equal(r.body.results.err, true, "callback err is true on a denied call");
  t.notOk(JSON.stringify(r.body.results).includes("secret"), "no data leaked");
  isErr(t, await s.dev.put(adminSvc(s, cb), { run_user: 7 }), 400, "run_user must be a string");
});

// ---- runtime API --------------------------------------------------------------------------------

t.test("runtime: ClearBlade.Collection and Query (callback API)", async (t) => {
  const col = await collection([["name", "string"], ["n", "int"], ["tag", "string"]]);
  const name = uniq("cbcol");
  const code = `function ${name}(req, resp) {
    var col = ClearBlade.Collection({ collectionName: "${col.name}" });
    var out = {};
    col.create([{ name: "a", n: 1, tag: "x" }, { name: "b", n: 2, tag: "y" }, { name: "c", n: 3, tag: "x" }, { name: "d", n: 4, tag: "y" }, { name: "e", n: 5, tag: "x" }], function (err, created) {
      if (err) resp.error({ at: "create", e: created });
      out.created = created.length;
      out.ids = created.map(function (c) { return c.item_id; });
      var q = ClearBlade.Query({ collectionName: "${col.name}" });
      q.equalTo("tag", "x").greaterThan("n", 1).ascending("n");
      col.fetch(q, function (err, page) {
        if (err) resp.error({ at: "fetch", e: page });
        out.xAbove1 = page.DATA.map(function (r) { return r.name; });
        var paged = ClearBlade.Query({ collectionName: "${col.name}" }).descending("n").setPage(2, 2);
        paged.fetch(function (err, page2) {
          if (err) resp.error({ at: "page", e: page2 });
          out.page2 = page2.DATA.map(function (r) { return r.n; });
          var lt = ClearBlade.Query({ collectionName: "${col.name}" }).lessThanEqualTo("n", 2).notEqualTo("name", "a");
          col.count(lt, function (err, c) {
            out.countLe2NotA = c.count;
            col.update(ClearBlade.Query({ collectionName: "${col.name}" }).equalTo("name", "b"), { tag: "changed" }, function (err, u) {
              if (err) resp.error({ at: "update", e: u });
              out.updated = u;
              col.remove(ClearBlade.Query({ collectionName: "${col.name}" }).lessThan("n", 2), function (err, rm) {
                if (err) resp.error({ at: "remove", e: rm });
                out.removed = rm;
                col.count(function (err, all) { out.left = all.count; resp.success(out); });
              });
            });
          });
        });
      });
    });
  }`;
  await service(name, code);
  const r = await exec(s.dev, name);
  ok200(t, r);
  t.equal(r.body.success, true, `ran (${JSON.stringify(r.body.results).slice(0, 300)})`);
  const out = r.body.results;
  t.equal(out.created, 5, "create returns one entry per item");
  t.ok(out.ids.every((x: string) => UUID.test(x)), "with item ids");
  t.same(out.xAbove1, ["c", "e"], "equalTo + greaterThan + ascending");
  t.same(out.page2, [3, 2], "descending + setPage(2, 2) gives the second page");
  t.equal(out.countLe2NotA, 1, "count with lessThanEqualTo + notEqualTo");
  t.same(out.updated, { count: 1 }, "update by query");
  t.same(out.removed, { count: 1 }, "remove by query");
  t.equal(out.left, 4, "count without query");
  // what the service did is what the HTTP API sees
  const all = await rows(col.id);
  t.same(all.map((x) => x.name).sort(), ["b", "c", "d", "e"], "the rows over HTTP");
  t.equal(all.find((x) => x.name === "b")?.tag, "changed", "the update landed");
});

t.test("runtime: ClearBladeAsync.Collection and Query (promise API)", async (t) => {
  const col = await collection([["k", "string"], ["score", "float"]]);
  const name = uniq("acol");
  const code = `async function ${name}(req, resp) {
    var col = ClearBladeAsync.Collection({ collectionName: "${col.name}" });
    var made = await col.create([{ k: "p", score: 1.5 }, { k: "q", score: 2.5 }, { k: "r", score: 3.5 }]);
    var q = ClearBladeAsync.Query({ collectionName: "${col.name}" }).greaterThanEqualTo("score", 2.5).ascending("score");
    var page = await col.fetch(q);
    var viaQuery = await ClearBladeAsync.Query({ collectionName: "${col.name}" }).matches("k", "^[pq]$").ascending("k").fetch();
    var upd = await col.update(ClearBladeAsync.Query().equalTo("k", "r"), { score: 9 });
    var cnt = await col.count(ClearBladeAsync.Query().greaterThan("score", 5));
    var rm = await col.remove(ClearBladeAsync.Query().equalTo("k", "p"));
    var bad; try { await ClearBladeAsync.Collection({ collectionName: "no_such_collection_here" }).fetch(); bad = "no error"; } catch (e) { bad = e.message; }
    return { made: made.length, ge: page.DATA.map(function (x) { return x.k; }), total: page.TOTAL, re: viaQuery.DATA.map(function (x) { return x.k; }), upd: upd, cnt: cnt, rm: rm, bad: bad };
  }`;
  await service(name, code);
  const r = await exec(s.dev, name);
  t.equal(r.body.success, true, `ran (${JSON.stringify(r.body.results).slice(0, 300)})`);
  const out = r.body.results;
  t.equal(out.made, 3);
  t.same(out.ge, ["q", "r"], "greaterThanEqualTo + ascending");
  t.equal(out.total, 2, "TOTAL");
  t.same(out.re, ["p", "q"], "matches (regexp)");
  t.ok(Array.isArray(out.upd) && out.upd.length === 1, "update answers the updated rows, as ClearBlade does");
  t.match(out.upd[0], { k: "r", score: 9 });
  t.same(out.cnt, { count: 1 }, "count after update");
  t.same(out.rm, { count: 1 });
  t.match(out.bad, /no_such_collection_here|not exist|not found/i, "a missing collection rejects with a message");
  t.same((await rows(col.id)).map((x) => x.k).sort(), ["q", "r"]);
  t.equal((await rows(col.id)).find((x) => x.k === "r")?.score, 9);
  t.equal(out.made !== undefined && r.body.results !== null, true, "an async entry's return value is its result");
});

t.test("runtime: Code().execute of another service", async (t) => {
  const callee = uniq("callee"), failing = uniq("failing"), caller = uniq("caller"), acaller = uniq("acaller");
  await service(callee, `function ${callee}(req, resp) { resp.success({ doubled: req.params.x * 2, by: req.userid }); }`);
  await service(failing, `function ${failing}(req, resp) { resp.error("callee said no"); }`);
  await service(caller, `function ${caller}(req, resp) {
    ClearBlade.Code().execute("${callee}", { x: req.params.x }, false, function (err, data) {
      ClearBlade.Code().execute("${failing}", {}, function (err2, data2) {
        resp.success({ err: err, data: data, err2: err2, data2: data2 });
      });
    });
  }`);
  await service(acaller, `async function ${acaller}(req, resp) {
    var r = await ClearBladeAsync.Code().execute("${callee}", { x: 5 });
    var missing; try { await ClearBladeAsync.Code().execute("nope_not_here", {}); missing = "ran"; } catch (e) { missing = e.message; }
    resp.success({ r: r, missing: missing });
  }`);
  const r = await exec(s.dev, caller, { x: 21 });
  t.equal(r.body.success, true);
  t.equal(r.body.results.err, false, "no error calling a service");
  t.same(r.body.results.data, { doubled: 42, by: s.devId }, "the callee's results, run for the same caller");
  t.equal(r.body.results.err2, true, "a callee that calls resp.error gives err=true");
  t.match(JSON.stringify(r.body.results.data2), /callee said no/, "with its message");
  const a = await exec(s.dev, acaller);
  t.same(a.body.results.r, { doubled: 10, by: s.devId }, "ClearBladeAsync.Code().execute");
  t.match(a.body.results.missing, /nope_not_here|not exist/, "a missing service rejects");
  // a user who may run the caller but not the callee
  const u = await userWith(canRun(caller));
  const denied = await exec(u.client, caller, { x: 1 });
  t.equal(denied.body.results?.err, true, "the callee needs its own execute permission");

  // getAllServices: the system's service names, with the REST list's rights
  const lister = uniq("lister");
  await service(lister, `async function ${lister}(req, resp) {
    var names; ClearBlade.Code().getAllServices(function (err, n) { names = err ? { err: n } : n; });
    var asyncNames; try { asyncNames = await ClearBladeAsync.Code().getAllServices(); } catch (e) { asyncNames = { err: e.message }; }
    resp.success({ names: names, asyncNames: asyncNames });
  }`);
  const l = await exec(s.dev, lister);
  t.ok(Array.isArray(l.body.results?.names), `getAllServices answers names (${JSON.stringify(l.body.results).slice(0, 200)})`);
  for (const n of [callee, failing, caller, lister]) t.ok(l.body.results.names.includes(n), `${n} is listed`);
  t.same([...l.body.results.asyncNames].sort(), [...l.body.results.names].sort(), "ClearBladeAsync's is the same list");
  const runner = await userWith(canRun(lister));
  const noList = await exec(runner.client, lister);
  t.match(JSON.stringify(noList.body.results), /not allowed|permission/i, "a user who may only run services may not list them (as over REST)");
});

t.test("runtime: Messaging().publish reaches an MQTT subscriber", async (t) => {
  const topic = `code/${uniq("t")}/out`;
  const sub = await new Promise<mqtt.MqttClient>((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { username: s.devToken, password: SK, clientId: uniq("sub"), reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4 });
    c.once("connect", () => res(c));
    c.once("error", (e) => { c.end(true); rej(e); });
  });
  t.teardown(() => { sub.end(true); });
  const got: { topic: string; text: string }[] = [];
  sub.on("message", (tp, payload) => got.push({ topic: tp, text: payload.toString("utf8") }));
  await new Promise<void>((res, rej) => sub.subscribe(`code/+/out`, { qos: 0 }, (e) => (e ? rej(e) : res())));
  const name = uniq("pub"), aname = uniq("apub");
  await service(name, `function ${name}(req, resp) {
    ClearBlade.Messaging().publish("${topic}", "hello " + req.params.who, function (err, data) { resp.success({ err: err }); });
  }`);
  await service(aname, `async function ${aname}(req, resp) {
    await ClearBladeAsync.Messaging().publish("${topic}", { obj: true, n: 7 });
    resp.success("published");
  }`);
  const r = await exec(s.dev, name, { who: "world" });
  t.same(r.body, { success: true, results: { err: false } });
  t.ok(await waitFor(() => got.some((g) => g.text === "hello world"), 5000), "the subscriber got the string payload");
  t.equal(got.find((g) => g.text === "hello world")?.topic, topic, "on the topic published to");
  t.same((await exec(s.dev, aname)).body, { success: true, results: "published" });
  t.ok(await waitFor(() => got.some((g) => { try { return JSON.parse(g.text).n === 7; } catch { return false; } }), 5000), "an object payload arrives as JSON");
  // a run_user without publish permission on the topic cannot publish
  const noPub = await userWith({});
  const denied = uniq("nopub");
  await service(denied, `function ${denied}(req, resp) { ClearBlade.Messaging().publish("${topic}", "forbidden", function (err) { resp.success({ err: err }); }); }`, { run_user: noPub.userId });
  t.same((await exec(s.dev, denied)).body.results, { err: true }, "publish needs the run user's topic permission");
  // a permitted publish after it arrives; the refused one, had it gone out, would be there before
  t.same((await exec(s.dev, name, { who: "after" })).body, { success: true, results: { err: false } });
  t.ok(await waitFor(() => got.some((g) => g.text === "hello after"), 5000), "a later permitted publish arrived");
  t.notOk(got.some((g) => g.text === "forbidden"), "nothing was delivered");
});

/** ClearBlade's stream pattern: subscribe to `filter`, then one waitForMessage per message in a
 *  loop, each blocking until its message; answers with the first `n` as { topic, payload }. */
const waitingService = (name: string, filter: string, n: number) => `function ${name}(req, resp) {
    var m = ClearBlade.Messaging(), filter = ${JSON.stringify(filter)}, got = [];
    m.subscribe(filter, function (err, data) { if (err) resp.error({ subscribe: data }); });
    while (got.length < ${n}) {
      m.waitForMessage([filter], function (err, payload, topic) {
        if (err) resp.error({ wait: payload });
        got.push({ topic: topic, payload: payload });
      });
    }
    resp.success(got);
  }`;

t.test("runtime: waitForMessage on a shared subscription ($share/<group>/<filter>) gets what its filter matches", async (t) => {
  // ClearBlade's trigger-to-stream template: subscribe to "$share/G/device/+" and wait on that string
  const base = `shared/${uniq("g")}`;
  const name = uniq("sharedwait");
  await service(name, waitingService(name, `$share/workers/${base}/+`, 2), { execution_timeout: 10 });
  const answer = exec(s.dev, name);
  let done = false;
  void answer.then(() => { done = true; });
  for (let i = 0; !done && i < 200; i++) {
    await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: `${base}/d${i}`, body: `m${i}` });
    await sleep(50);
  }
  const r = await within(answer, 15_000, "the shared-subscription service");
  t.equal(r.body.success, true, JSON.stringify(r.body));
  const got = r.body.results as { topic: string; payload: string }[];
  t.equal(got.length, 2, "two messages");
  t.ok(got.every((g) => g.topic === `${base}/d${g.payload.slice(1)}`), "on their own topics, not the group's filter");
});

t.test("runtime: Messaging().subscribe and waitForMessage receive messages while the run lasts", async (t) => {
  const base = `feed/${uniq("f")}`;
  const name = uniq("listen");
  // (answers with the first three)
  await service(name, waitingService(name, `${base}/+/temp`, 3), { execution_timeout: 10 });
  const answer = exec(s.dev, name);
  let done = false;
  void answer.then(() => { done = true; });
  // publish until the service has answered: messages before its subscription is active are not seen
  const sent: string[] = [];
  for (let i = 0; !done && i < 200; i++) {
    await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: `${base}/other/humidity`, body: `h${i}` });
    await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: `${base}/s${i}/temp`, body: `t${i}` });
    sent.push(`t${i}`);
    await sleep(50);
  }
  const r = await within(answer, 15_000, "the listening service");
  t.equal(r.body.success, true, JSON.stringify(r.body));
  const got = r.body.results as { topic: string; payload: string }[];
  t.equal(got.length, 3, "three messages");
  t.ok(got.every((g) => /^feed\/[^/]+\/s\d+\/temp$/.test(g.topic.replace(base, "feed/x"))), "only the subscribed filter, in the service's own topic form");
  t.ok(got.every((g) => sent.includes(g.payload) && g.topic === `${base}/s${g.payload.slice(1)}/temp`), "payload and topic belong together");
  const n = got.map((g) => Number(g.payload.slice(1)));
  t.same(n, [...n].sort((a, b) => a - b), "in the order published");

  // a message published after the run ended goes nowhere, and the next run starts clean
  const once = uniq("once");
  await service(once, `function ${once}(req, resp) {
    var m = ClearBlade.Messaging();
    m.subscribe("${base}/once", function () { m.waitForMessage(function (err, payload) { resp.success(payload); }); });
  }`, { execution_timeout: 10 });
  for (const round of [1, 2]) {
    const a = exec(s.dev, once);
    let answered = false;
    void a.then(() => { answered = true; });
    for (let i = 0; !answered && i < 100; i++) { await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: `${base}/once`, body: `round ${round}` }); await sleep(50); }
    t.same((await within(a, 15_000, "once")).body, { success: true, results: `round ${round}` }, `run ${round} sees its own message`);
  }

  // failure paths: no permission on the topic, a bad filter, waiting without a subscription
  const noSub = await userWith({});
  const denied = uniq("nosub");
  await service(denied, `function ${denied}(req, resp) { ClearBlade.Messaging().subscribe("${base}/+/temp", function (err, data) { resp.success({ err: err, data: data }); }); }`, { run_user: noSub.userId });
  const d = (await exec(s.dev, denied)).body.results;
  t.equal(d.err, true, "subscribe needs the run user's topic permission");
  t.match(JSON.stringify(d.data), /subscribe to topic/, "and says so");
  const badFilter = uniq("badf");
  await service(badFilter, `function ${badFilter}(req, resp) { ClearBlade.Messaging().subscribe("a/#/b", function (err, data) { resp.success({ err: err, data: data }); }); }`);
  const b = (await exec(s.dev, badFilter)).body.results;
  t.equal(b.err, true, "an invalid filter is refused");
  t.match(JSON.stringify(b.data), /topic filter/);
  const noSubscription = uniq("nowait");
  await service(noSubscription, `function ${noSubscription}(req, resp) { ClearBlade.Messaging().waitForMessage(["x"], function (err, data) { resp.success({ err: err, data: data }); }); }`);
  const w = (await exec(s.dev, noSubscription)).body.results;
  t.equal(w.err, true, "waitForMessage without a subscription is an error, not a hang");
  t.match(JSON.stringify(w.data), /subscription first/);

  // a run that waits past its execution_timeout ends as a timeout, and the server goes on
  const forever = uniq("forever");
  await service(forever, `function ${forever}(req, resp) { var m = ClearBlade.Messaging(); m.subscribe("${base}/never", function () { m.waitForMessage(function () {}); }); }`, { execution_timeout: 1 });
  const f = await within(exec(s.dev, forever), 10_000, "forever");
  t.equal(f.body.success, false, "the waiting run timed out");
  t.match(String(f.body.results), /timed out/);
  t.equal((await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: `${base}/never`, body: "late" })).status, 200, "publishing to its topic afterwards is fine");
});

t.test("runtime: Device get/create/update/delete", async (t) => {
  const dname = uniq("dev");
  const name = uniq("devsvc");
  await service(name, `function ${name}(req, resp) {
    var D = ClearBlade.Device();
    var out = {};
    D.createDevice("${dname}", { type: "thermo", state: "off", active_key: "a-long-enough-key" }, true, function (err, created) {
      out.createErr = err; out.created = created;
      D.getDeviceByName("${dname}", function (err, d) {
        out.getErr = err; out.got = d;
        ClearBlade.updateDevice("${dname}", { state: "on" }, true, function (err, u) {
          out.updErr = err; out.updated = u;
          D.deleteDevice("${dname}", true, function (err, x) {
            out.delErr = err;
            D.getDeviceByName("${dname}", function (err, gone) { out.goneErr = err; resp.success(out); });
          });
        });
      });
    });
  }`);
  const r = await exec(s.dev, name);
  t.equal(r.body.success, true, `ran (${JSON.stringify(r.body.results).slice(0, 300)})`);
  const out = r.body.results;
  t.equal(out.createErr, false, "createDevice");
  t.equal(out.created?.name, dname, "createDevice returns the device");
  t.equal(out.getErr, false);
  t.equal(out.got?.name, dname, "getDeviceByName");
  t.equal(out.got?.type, "thermo");
  t.equal(out.got?.state, "off");
  t.equal(out.updErr, false);
  t.equal(out.updated?.state, "on", "updateDevice");
  t.equal(out.delErr, false, "deleteDevice");
  t.equal(out.goneErr, true, "reading a deleted device is an error");
  isErr(t, await s.dev.get(`/admin/devices/${SK}/${dname}`), 404, "the device is gone over HTTP too");

  // a device made inside survives and is visible over HTTP
  const keep = uniq("keep");
  const mk = uniq("mk");
  await service(mk, `function ${mk}(req, resp) { ClearBlade.createDevice("${keep}", { type: "k", state: "s", active_key: "another-long-key" }, true, function (err, d) { resp.success({ err: err, d: d }); }); }`);
  const m = await exec(s.dev, mk);
  t.equal(m.body.results.err, false);
  const h = await s.dev.get(`/admin/devices/${SK}/${keep}`);
  ok200(t, h, "created inside, read over HTTP");
  t.equal(h.body.type, "k");
  const dup = await exec(s.dev, mk);
  t.equal(dup.body.results.err, true, "creating it twice is an error");

  // the collection-style forms of ClearBlade's docs: create(device), update(query, changes), delete(query)
  const coll = uniq("coll"), cname = uniq("cdev");
  await service(coll, `function ${coll}(req, resp) {
    var D = ClearBlade.Device(), out = {};
    D.create({ name: "${cname}", type: "Weight Sensor", state: "idle", enabled: true, active_key: "a-third-long-key", allow_key_auth: true }, function (err, d) {
      out.createErr = err; out.created = d && d.name;
      D.update(ClearBlade.Query().equalTo("name", "${cname}"), { state: "weighing" }, function (err, u) {
        out.updErr = err;
        D.fetch(ClearBlade.Query().equalTo("name", "${cname}"), function (err, rows) {
          out.fetched = rows;
          try { D.delete(); } catch (e) { out.noQuery = e.message; }
          D.delete(function (err, why) { out.noQueryCb = [err, why && why.detail];
            D.delete(ClearBlade.Query().equalTo("name", "${cname}"), function (err) {
              out.delErr = err;
              D.getDeviceByName("${cname}", function (err) { out.goneErr = err; resp.success(out); });
            });
          });
        });
      });
    });
  }`);
  const c = await exec(s.dev, coll);
  t.equal(c.body.success, true, `collection-style calls ran (${JSON.stringify(c.body.results).slice(0, 300)})`);
  const co = c.body.results;
  t.equal(co.createErr, false, "create(device)");
  t.equal(co.created, cname);
  t.equal(co.updErr, false, "update(query, changes)");
  const fetched = Array.isArray(co.fetched) ? co.fetched : co.fetched?.DATA ?? co.fetched?.Data ?? [];
  t.equal(fetched[0]?.state, "weighing", "the change was made");
  t.match(co.noQuery, /needs a query/, "delete without a query is refused (thrown without a callback)");
  t.same(co.noQueryCb, [true, "Device().delete needs a query (none would delete every device)"], "and through the callback");
  t.equal(co.delErr, false, "delete(query)");
  t.equal(co.goneErr, true, "the device is gone");
  ok200(t, await s.dev.get(`/admin/devices/${SK}/${keep}`), "the other devices are not touched");
});

t.test("runtime: a documented ClearBlade call this runtime lacks fails naming itself", async (t) => {
  const name = uniq("lacks");
  await service(name, `function ${name}(req, resp) {
    var out = {};
    function tryIt(label, f) { try { f(); out[label] = "ran"; } catch (e) { out[label] = e.message; } }
    tryIt("edges", function () { ClearBladeAsync.Edges(); });
    tryIt("keys", function () { ClearBladeAsync.DevicePublicKeys(); });
    tryIt("rawQuery", function () { ClearBlade.Query().rawQuery("x"); });
    tryIt("stream", function () { ClearBladeAsync.FS("set").createReadStream("a"); });
    tryIt("userConnections", function () { ClearBladeAsync.Users().userConnections("a@b.c"); });
    resp.success(out);
  }`);
  const r = await exec(s.dev, name);
  t.equal(r.body.success, true, `ran (${r.text.slice(0, 300)})`);
  const out = r.body.results;
  t.match(out.edges, /^ClearBladeAsync\.Edges\(\) .*is not provided by Outpost/);
  t.match(out.keys, /DevicePublicKeys\(\) is not provided/);
  t.match(out.rawQuery, /Query\(\)\.rawQuery .*is not provided/);
  t.match(out.stream, /FS\(\)\.createReadStream .*is not provided/);
  t.match(out.userConnections, /userConnections is not provided/);
});

t.test("runtime: ClearBlade's query helpers and small helpers", async (t) => {
  const col = await collectionWith(s, [["k", "string"], ["n", "int"]], uniq("helpers"));
  for (const [k, n] of [["a", 1], ["b", 2], ["c", 3], ["b", 4]] as const) await s.dev.post(`/api/v/1/data/${col.id}`, { k, n });
  const name = uniq("helpers");
  await service(name, `function ${name}(req, resp) {
    var q = ClearBlade.Query({ collectionName: "${col.name}" });
    ClearBlade.addFilterToQuery(q, "EQ", "k", "b");
    ClearBlade.addSortToQuery(q, "DESC", "n");
    var rows; q.fetch(function (err, d) { rows = err ? d : d.DATA.map(function (r) { return r.n; }); });
    var q2 = ClearBlade.Query({ collectionName: "${col.name}" }).andFilter("GT", "n", 1).andFilter("LT", "n", 4).ascending("n");
    var rows2; q2.fetch(function (err, d) { rows2 = err ? d : d.DATA.map(function (r) { return r.n; }); });
    var called; ClearBlade.execute(false, { x: 1 }, function (err, r) { called = [err, r]; });
    var bad; try { ClearBlade.validateEmailPassword("a@b.c", 42); } catch (e) { bad = e.message; }
    resp.success({ rows: rows, rows2: rows2, empty: [ClearBlade.isObjectEmpty({}), ClearBlade.isObjectEmpty({ a: 1 })], kv: ClearBlade.makeKVPair("k", "v"),
      called: called, bad: bad, about: typeof ClearBlade.about() });
  }`);
  const r = await exec(s.dev, name);
  t.equal(r.body.success, true, `ran (${r.text.slice(0, 300)})`);
  t.same(r.body.results, { rows: [4, 2], rows2: [2, 3], empty: [true, false], kv: { k: "v" }, called: [false, { x: 1 }], bad: "Password must be given and must be a string", about: "string" });
});

t.test("runtime: User getUser / allUsers / count", async (t) => {
  const name = uniq("users");
  await service(name, `function ${name}(req, resp) {
    var U = ClearBlade.User();
    U.getUser(function (err, me) {
      U.allUsers(function (err2, all) {
        U.count(function (err3, c) { resp.success({ err: err, me: me, err2: err2, all: all, err3: err3, count: c }); });
      });
    });
  }`);
  const u = await userWith({ ...canRun(name), users: { permissions: 1 } });
  const r = await exec(u.client, name);
  t.equal(r.body.success, true);
  const out = r.body.results;
  t.equal(out.err, false);
  t.equal(out.me.email, u.email, "getUser is the caller");
  t.equal(out.me.user_id, u.userId);
  t.equal(out.err2, false);
  t.ok(Array.isArray(out.all.Data), "allUsers gives {Data, Total}");
  t.ok(out.all.Data.some((x: any) => x.email === u.email), "the caller is in the list");
  t.equal(out.all.Total, out.all.Data.length);
  t.equal(out.count.count, out.all.Total, "count agrees");
  const listed = await s.dev.get(`/admin/user/${SK}`);
  t.equal(out.all.Total, listed.body.Total ?? listed.body.Data?.length ?? out.all.Total, "same total as the admin listing");
  // without the users permission the listing is refused inside too
  const v = await userWith(canRun(name));
  const r2 = await exec(v.client, name);
  t.equal(r2.body.results.err, false, "getUser works for anyone");
  t.equal(r2.body.results.err2, true, "allUsers needs the users permission");
});

t.test("runtime: log/console, newUUID, cbmeta", async (t) => {
  const name = uniq("misc");
  await service(name, `function ${name}(req, resp) {
    var ids = []; for (var i = 0; i < 50; i++) ids.push(newUUID());
    console.info("info", 1); console.warn("warn", [1, 2]); console.debug("debug");
    resp.success({ ids: ids, meta: cbmeta, edge: ClearBlade.isEdge() });
  }`);
  const r = await exec(s.dev, name, {}, { "Logging-enabled": "true" });
  t.equal(r.body.success, true);
  const ids: string[] = r.body.results.ids;
  t.ok(ids.every((x) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(x)), "newUUID gives v4 UUIDs");
  t.equal(new Set(ids).size, ids.length, "all different");
  t.match(r.body.logs, /info 1/);
  t.match(r.body.logs, /warn \[1,2\]/);
  t.match(r.body.logs, /debug/);
  const m = r.body.results.meta;
  t.equal(m.system_key, SK, "cbmeta.system_key");
  t.equal(m.system_secret, s.systemSecret, "cbmeta.system_secret");
  t.equal(m.service_name, name, "cbmeta.service_name");
  t.equal(m.is_edge, false, "cbmeta.is_edge on the platform");
  t.equal(r.body.results.edge, false, "ClearBlade.isEdge()");
  for (const k of ["platform_url", "node_id", "service_id", "code_versions"]) t.ok(k in m, `cbmeta.${k}`);
  t.type(m.code_versions?.[name], "number", "cbmeta.code_versions has the running version");
});

// ---- libraries --------------------------------------------------------------------------------

t.test("libraries: CRUD, versions, use by services, update, delete while used", async (t) => {
  const lib = uniq("mathlib");
  const base = `/codeadmin/v/2/library/${SK}`;
  const c = await s.dev.post(`${base}/${lib}`, { code: "function libCalc(x) { return x * 2; }", dependencies: "", description: "doubles", api: "libCalc(x)", visibility: "system" });
  ok200(t, c, "create");
  t.equal(c.body.name, lib);
  t.equal(c.body.version, 1);
  t.equal(c.body.description, "doubles");
  const l = await s.dev.get(base);
  ok200(t, l, "list");
  t.ok(Array.isArray(l.body), "an array");
  const entry = l.body.find((x: any) => x.name === lib);
  t.ok(entry, "listed");
  t.equal(entry?.system_key, SK);
  const one = await s.dev.get(`${base}/${lib}`);
  t.equal(one.body.code, "function libCalc(x) { return x * 2; }", "read one");
  for (const k of ["system_key", "name", "description", "version", "code", "dependencies", "api", "visibility"]) t.ok(k in one.body, `library has ${k}`);

  const svc = uniq("useslib");
  await service(svc, `function ${svc}(req, resp) { resp.success(libCalc(req.params.x)); }`, { dependencies: `clearblade,${lib}` });
  t.same((await exec(s.dev, svc, { x: 21 })).body, { success: true, results: 42 }, "the service uses the library");

  const up = await s.dev.put(`${base}/${lib}`, { code: "function libCalc(x) { return x * 3; }" });
  ok200(t, up, "update");
  t.equal(up.body.version, 2, "the version goes up");
  t.same((await exec(s.dev, svc, { x: 21 })).body, { success: true, results: 63 }, "the next call uses the new library code");

  const hist = await s.dev.get(`/codeadmin/v/2/history/library/${SK}/${lib}`);
  ok200(t, hist, "history");
  t.ok(Array.isArray(hist.body), "an array of versions");
  t.same(hist.body.map((v: any) => v.version).sort(), [1, 2], "both versions");
  const v1 = await s.dev.get(`/codeadmin/v/2/history/library/${SK}/${lib}/1`);
  ok200(t, v1, "one version");
  t.equal(v1.body.version, 1);
  t.match(v1.body.code, /x \* 2/, "the old code is kept");
  t.match((await s.dev.get(`/codeadmin/v/2/history/library/${SK}/${lib}/2`)).body.code, /x \* 3/);
  isErr(t, await s.dev.get(`/codeadmin/v/2/history/library/${SK}/${lib}/9`), 404, "a missing version");
  isErr(t, await s.dev.get(`/codeadmin/v/2/history/library/${SK}/${uniq("nolib")}`), 404, "history of a missing library");

  // a library depending on another
  const lib2 = uniq("wraplib");
  ok200(t, await s.dev.post(`${base}/${lib2}`, { code: "function wrapped(x) { return 'w' + libCalc(x); }", dependencies: lib }), "a library depending on a library");
  const svc2 = uniq("useswrap");
  await service(svc2, `function ${svc2}(req, resp) { resp.success(wrapped(2)); }`, { dependencies: lib2 });
  t.same((await exec(s.dev, svc2)).body, { success: true, results: "w6" }, "the dependency chain loads in order");

  // failures
  isErr(t, await s.dev.post(`${base}/${lib}`, { code: "1" }), 400, "duplicate library");
  isErr(t, await s.dev.post(`${base}/${uniq("l")}`, {}), 400, "library without code");
  isErr(t, await s.dev.post(`${base}/bad-name`, { code: "1" }), 400, "bad library name");
  isErr(t, await s.dev.post(`${base}/${uniq("l")}`, { code: "1", dependencies: "ghost lib" }), 400, "a dependency that is no library name");
  isErr(t, await s.dev.post(`${base}/${uniq("l")}`, { code: "1", shape: "round" }), 400, "unknown field");
  isErr(t, await s.dev.post(`${base}/clearblade`, { code: "1" }), 400, "a native library name");
  isErr(t, await s.dev.get(`${base}/${uniq("nolib")}`), 404, "read a missing library");
  isErr(t, await s.dev.put(`${base}/${uniq("nolib")}`, { code: "1" }), 404, "update a missing library");
  isErr(t, await s2.dev.get(`${base}/${lib}`), 401, "another system's developer");
  const plain = await userWith({});
  isErr(t, await plain.client.get(base), 401, "a user without allservices");

  const used = await s.dev.del(`${base}/${lib}`);
  isErr(t, used, 400, "deleting a library still used");
  detailHas(t, used, new RegExp(`${svc}|${lib2}|used`), "names who uses it");
  t.same((await exec(s.dev, svc, { x: 1 })).body, { success: true, results: 3 }, "still works after the refused delete");
  ok200(t, await s.dev.del(adminSvc(s, svc2)));
  ok200(t, await s.dev.del(`${base}/${lib2}`), "delete the now unused wrapper");
  ok200(t, await s.dev.del(adminSvc(s, svc)));
  ok200(t, await s.dev.del(`${base}/${lib}`), "delete once unused");
  isErr(t, await s.dev.get(`${base}/${lib}`), 404, "gone");
  isErr(t, await s.dev.del(`${base}/${lib}`), 404, "delete again");
});

// ---- sandbox attacks and limits ---------------------------------------------------------------

t.test("sandbox: an infinite loop ends at its execution_timeout and the server keeps serving", async (t) => {
  const loop = uniq("loop"), fine = uniq("fine");
  // the loop starts once a row it writes is there: the row shows the loop has started
  const marks = await collection([["v", "int"]]);
  await service(loop, `async function ${loop}(req, resp) { await ClearBladeAsync.Collection({ collectionName: "${marks.name}" }).create({ v: 1 }); while (true) {} }`, { execution_timeout: 2 });
  await service(fine, `function ${fine}(req, resp) { resp.success("fine"); }`);
  const t0 = Date.now();
  const pending = within(exec(s.dev, loop), 15_000, "while(true)");
  t.ok(await waitFor(async () => (await within(rows(marks.id), 5000, "marker row")).length > 0, 10_000), "the loop has started");
  const h0 = Date.now();
  const health = await within(request(o.url, "GET", "/health"), 5000, "health during the loop");
  const healthMs = Date.now() - h0;
  t.equal(health.status, 200, "/health answers during the loop");
  t.ok(healthMs < 1000, `/health answered within ~1 s (${healthMs} ms)`);
  const r = await pending;
  const ms = Date.now() - t0;
  ok200(t, r);
  t.equal(r.body.success, false, "the run fails");
  t.match(String(r.body.results), /timed out after 2 s/i, `the result says it timed out (${r.body.results})`);
  t.ok(ms < 5000, `ended promptly (${ms} ms)`);
  const after = await within(exec(s.dev, fine), 5000, "a normal service after");
  t.same(after.body, { success: true, results: "fine" }, "another request succeeds right after");
  const again = await within(exec(s.dev, loop), 15_000, "the loop again");
  t.equal(again.body.success, false, "the looping service fails the same way the second time");

  // a loop of microtasks never returns to the host either
  const micro = uniq("micro");
  await service(micro, `async function ${micro}(req, resp) { for (;;) { await null; } }`, { execution_timeout: 5 });
  const m = await within(exec(s.dev, micro), 15_000, "microtask loop");
  t.equal(m.body.success, false, "an endless await loop fails too");
  t.same((await within(exec(s.dev, fine), 5000, "fine after micro")).body, { success: true, results: "fine" });

  // unbounded recursion
  const rec = uniq("rec");
  await service(rec, `function ${rec}(req, resp) { function f(n) { return f(n + 1) + 1; } f(0); }`, { execution_timeout: 5 });
  const rr = await within(exec(s.dev, rec), 15_000, "recursion");
  t.equal(rr.body.success, false, "a stack overflow fails the run");
  t.match(String(rr.body.results), /stack|recursion/i, `and says so (${rr.body.results})`);
  t.same((await exec(s.dev, fine)).body, { success: true, results: "fine" });
});

t.test("sandbox: memory bomb, big strings, thrown errors", async (t) => {
  const bomb = uniq("bomb"), fine = uniq("fine2"), big = uniq("big"), thrower = uniq("thrower"), typeErr = uniq("typeerr"), syntax = uniq("syntax");
  await service(bomb, `function ${bomb}(req, resp) { var a = []; for (;;) a.push(new Array(100000).fill(a.length)); }`);
  await service(fine, `function ${fine}(req, resp) { var a = []; for (var i = 0; i < 1000; i++) a.push(i); resp.success(a.length); }`);
  await service(big, `function ${big}(req, resp) { var s = "x".repeat(10 * 1024 * 1024); resp.success({ len: s.length, tail: s.slice(-3) }); }`);
  await service(thrower, `function ${thrower}(req, resp) { throw new Error("kaboom " + req.params.n); }`);
  await service(typeErr, `function ${typeErr}(req, resp) { var o = null; return o.field; }`);

  const b = await within(exec(s.dev, bomb), 20_000, "memory bomb");
  ok200(t, b);
  t.equal(b.body.success, false, "the memory bomb fails");
  t.match(String(b.body.results), /out of memory/i, `with out of memory (${String(b.body.results).slice(0, 200)})`);
  t.same((await within(exec(s.dev, fine), 5000, "after the bomb")).body, { success: true, results: 1000 }, "the next run of a normal service works");
  const b2 = await within(exec(s.dev, bomb), 20_000, "memory bomb again");
  t.equal(b2.body.success, false, "a second bomb fails too");
  t.equal((await request(o.url, "GET", "/health")).status, 200, "the server is fine");

  const g = await within(exec(s.dev, big), 20_000, "10 MB string");
  ok200(t, g, "a 10 MB string answers");
  if (g.body.success) t.same(g.body.results, { len: 10 * 1024 * 1024, tail: "xxx" }, "a 10 MB string fits in the limit");
  else t.match(String(g.body.results), /memory|length/i, "or fails cleanly");
  t.same((await exec(s.dev, fine)).body, { success: true, results: 1000 }, "and the server still runs services");

  const th = await exec(s.dev, thrower, { n: 7 });
  ok200(t, th);
  t.equal(th.body.success, false, "a thrown error fails the run");
  t.match(String(th.body.results), /kaboom 7/, "with the message");
  t.notMatch(String(th.body.results), /\bat \S+:\d+/, "no host stack trace");
  const te = await exec(s.dev, typeErr);
  t.equal(te.body.success, false);
  t.match(String(te.body.results), /TypeError/, "a TypeError is reported as such");
  // a syntax error is refused at upload, with where it is (QuickJS's message, line and column)
  const se = await s.dev.post(adminSvc(s, syntax), { code: `function ${syntax}(req, resp) {\n  resp.success( }`, parameters: [] });
  isErr(t, se, 400, 111, "a service that does not compile is refused");
  t.match(se.body.error.detail, new RegExp(`service '${syntax}' does not compile: SyntaxError: .*\\(line 2, column 17\\)`), `named, with line and column (${se.body.error.detail})`);
  t.same(se.body.error.lowLevelError, { error: "SyntaxError: unexpected token in expression: '}'", line: 2, column: 17 }, "line and column as fields too");
  t.equal((await s.dev.get(adminSvc(s, syntax))).status, 404, "and nothing was stored");
  const mis = uniq("misnamed");
  await service(mis, `function somethingElse(req, resp) { resp.success(1); }`);
  const mr = await exec(s.dev, mis);
  t.equal(mr.body.success, false, "no function named like the service");
  t.match(String(mr.body.results), new RegExp(mis), "names the missing entry function");
});

t.test("sandbox: an async entry waiting forever times out at execution_timeout", async (t) => {
  const name = uniq("forever");
  await service(name, `async function ${name}(req, resp) { await new Promise(function () {}); resp.success("never"); }`, { execution_timeout: 1 });
  const t0 = Date.now();
  const r = await within(exec(s.dev, name), 15_000, "never-settling promise");
  const ms = Date.now() - t0;
  ok200(t, r);
  t.equal(r.body.success, false, "fails");
  t.match(String(r.body.results), /time/i, `mentions the timeout (${r.body.results})`);
  t.ok(ms >= 900 && ms < 4000, `after about 1 s (${ms} ms)`);
  // a non-async service that registers a callback that never fires ends by default (nothing pending)
  const cb = uniq("thenless");
  await service(cb, `function ${cb}(req, resp) { new Promise(function () {}).then(function () { resp.success("no"); }); }`, { execution_timeout: 1 });
  const c = await within(exec(s.dev, cb), 15_000, "pending then");
  t.equal(c.body.success, true, "a plain entry function with nothing to wait for succeeds by default");
  t.equal(c.body.results, null);
  // an async entry that resolves uses its value
  const ok = uniq("asyncok");
  await service(ok, `async function ${ok}(req, resp) { var n = await Promise.resolve(41); return n + 1; }`);
  t.same((await exec(s.dev, ok)).body, { success: true, results: 42 }, "an async entry's resolved value is the result");
  const rej = uniq("asyncrej");
  await service(rej, `async function ${rej}(req, resp) { await null; throw new RangeError("async boom"); }`);
  const rr = await exec(s.dev, rej);
  t.equal(rr.body.success, false, "a rejected async entry fails");
  t.match(String(rr.body.results), /RangeError: async boom/);
});

t.test("sandbox: no host objects inside", async (t) => {
  const name = uniq("escape");
  await service(name, `function ${name}(req, resp) {
    var g = Function("return this")();
    var names = Object.getOwnPropertyNames(g);
    var viaCtor; try { viaCtor = (function () {}).constructor.constructor("return typeof process + '/' + typeof Bun + '/' + typeof require")(); } catch (e) { viaCtor = "threw " + e.message; }
    resp.success({
      process: typeof process, require: typeof require, Bun: typeof Bun, fetch: typeof fetch, fetchSource: String(fetch), host: typeof globalThis.__host,
      done: typeof globalThis.__done, hlog: typeof globalThis.__log, Deno: typeof Deno, module: typeof module, exports: typeof exports,
      gProcess: typeof g.process, gBun: typeof g.Bun, gHost: typeof g.__host, same: g === globalThis, names: names, viaCtor: viaCtor,
      wasm: typeof WebAssembly, importScripts: typeof importScripts, std: typeof std, os: typeof os
    });
  }`);
  const r = await exec(s.dev, name);
  t.equal(r.body.success, true, `ran (${JSON.stringify(r.body.results).slice(0, 200)})`);
  const x = r.body.results;
  for (const k of ["process", "require", "Bun", "host", "done", "hlog", "Deno", "module", "exports", "gProcess", "gBun", "gHost", "wasm", "importScripts", "std", "os"]) {
    t.equal(x[k], "undefined", `typeof ${k} is "undefined"`);
  }
  // fetch is the library's own, written in the prelude (its requests pass the egress policy), not the host's
  t.equal(x.fetch, "function", "fetch is the library's");
  t.notMatch(x.fetchSource, /native code/, "fetch is JavaScript of the prelude, not a host function");
  t.equal(x.same, true, "Function('return this')() is the sandbox's own global");
  for (const bad of ["process", "Bun", "require", "__host", "__done", "__log", "Deno", "std", "os"]) t.notOk(x.names.includes(bad), `the global object has no ${bad}`);
  t.equal(x.viaCtor, "undefined/undefined/undefined", "the Function constructor reaches nothing either");

  // dynamic import finds no modules
  const imp = uniq("imp");
  await service(imp, `async function ${imp}(req, resp) {
    var r; try { await import("node:fs"); r = "loaded"; } catch (e) { r = "refused"; }
    resp.success(r);
  }`, { execution_timeout: 3 });
  const i = await within(exec(s.dev, imp), 15_000, "dynamic import");
  t.not(i.body.results, "loaded", `import("node:fs") does not load (${JSON.stringify(i.body)})`);
  // prototype pollution in one run does not leak into another service
  const pol = uniq("pol"), clean = uniq("clean");
  await service(pol, `function ${pol}(req, resp) { Object.prototype.polluted = "yes"; Array.prototype.push = function () { return -1; }; resp.success(1); }`);
  await service(clean, `function ${clean}(req, resp) { var a = []; a.push(1); resp.success({ polluted: typeof ({}).polluted, len: a.length }); }`);
  await exec(s.dev, pol);
  t.same((await exec(s.dev, clean)).body.results, { polluted: "undefined", len: 1 }, "another service does not see the pollution");
  // the server process is untouched by whatever the code did
  t.equal((await request(o.url, "GET", "/health")).status, 200);
});

// ---- failed runs ------------------------------------------------------------------------------

t.test("failed runs: list with a query, retry after a fix, /codeadmin/failed, delete", async (t) => {
  const flaky = uniq("flaky"), other = uniq("otherfail");
  await service(flaky, `function ${flaky}(req, resp) { throw new Error("broken for " + req.params.k); }`);
  await service(other, `function ${other}(req, resp) { throw new Error("other"); }`);
  const c = await collection([["k", "string"]]);
  t.equal((await exec(s.dev, flaky, { k: "one" })).body.success, false);
  t.equal((await exec(s.dev, flaky, { k: "two" })).body.success, false);
  t.equal((await exec(s.dev, other, {})).body.success, false);
  // resp.error is not a failed run
  const polite = uniq("polite");
  await service(polite, `function ${polite}(req, resp) { resp.error("declined"); }`);
  await exec(s.dev, polite);

  const byName = (n: string) => qs({ FILTERS: [[{ EQ: [{ service_name: n }] }]] });
  let list = await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(flaky)}`);
  ok200(t, list, "GET /api/v/4/{sk}/code/failed");
  t.ok(Array.isArray(list.body), "an array");
  t.equal(list.body.length, 2, "the query limits the list to the service");
  t.ok(list.body.every((f: any) => f.service_name === flaky), "service name");
  t.same(list.body.map((f: any) => f.params.k).sort(), ["one", "two"], "params kept");
  t.ok(list.body.every((f: any) => /broken for/.test(f.error)), "error kept");
  t.ok(list.body.every((f: any) => typeof f.id === "string" && f.id.length > 0), "each has an id");
  const all = await s.dev.get(`/api/v/4/${SK}/code/failed`);
  t.ok(all.body.some((f: any) => f.service_name === other), "without a query every failure is listed");
  t.notOk(all.body.some((f: any) => f.service_name === polite), "resp.error is not a failed run");
  isErr(t, await s.dev.get(`/api/v/4/${SK}/code/failed?query=${encodeURIComponent("{bad")}`), 400, "a bad query");
  isErr(t, await s2.dev.get(`/api/v/4/${SK}/code/failed`), 401, "another system's developer");

  const ca = await s.dev.get(`/codeadmin/failed/${SK}`);
  ok200(t, ca, "GET /codeadmin/failed/{sk}");
  t.same(Object.keys(ca.body), [SK], "keyed by the system key");
  t.ok(ca.body[SK].some((f: any) => f.service_name === flaky), "with the runs");

  // retrying before the fix fails again and keeps the record
  const one = list.body.find((f: any) => f.params.k === "one");
  const early = await s.dev.post(`/api/v/4/${SK}/code/failed`, { id: [one.id] });
  ok200(t, early, "retry");
  t.ok(Array.isArray(early.body), "retry answers an array");
  const afterEarly = (await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(flaky)}`)).body;
  t.ok(afterEarly.some((f: any) => f.id === one.id), "a failing retry keeps the record");
  t.equal(afterEarly.length, 2, `a failing retry does not add a second record for the same run (${afterEarly.map((f: any) => f.params.k).join(",")})`);

  // fix the service: record the parameter instead of throwing
  await updateService(flaky, { code: `function ${flaky}(req, resp) { ClearBlade.Collection({ collectionName: "${c.name}" }).create({ k: req.params.k }, function (err) { if (err) resp.error("insert"); resp.success("fixed " + req.params.k); }); }` });
  const retry = await s.dev.post(`/api/v/4/${SK}/code/failed`, { id: [one.id] });
  ok200(t, retry, "retry after the fix");
  t.equal(retry.body.length, 1, "one entry per retried run");
  t.match(JSON.stringify(retry.body), /fixed one/, "the retry ran the fixed code with the saved params");
  t.same((await rows(c.id)).map((r) => r.k), ["one"], "the retry really ran");
  list = await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(flaky)}`);
  t.notOk(list.body.some((f: any) => f.id === one.id), "a successful retry removes the record");
  const twoId = list.body.find((f: any) => f.params.k === "two")?.id;
  t.ok(twoId, "the other record is still there");

  // retry through /codeadmin/failed too
  const r2 = await s.dev.post(`/codeadmin/failed/${SK}`, { id: [twoId] });
  ok200(t, r2, "POST /codeadmin/failed/{sk}");
  t.same((await rows(c.id)).map((r) => r.k).sort(), ["one", "two"]);
  const left = (await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(flaky)}`)).body;
  t.notOk(left.some((f: any) => f.id === one.id || f.id === twoId), "both retried records are gone");

  // delete
  const otherIds = (await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(other)}`)).body.map((f: any) => f.id);
  t.equal(otherIds.length, 1);
  const d = await s.dev.del(`/codeadmin/failed/${SK}`, { id: otherIds });
  ok200(t, d, "DELETE /codeadmin/failed/{sk}");
  t.ok(Array.isArray(d.body) && d.body.length === 1, "answers the deleted records");
  t.equal(d.body[0]?.service_name ?? d.body[0]?.Service, other);
  t.equal((await s.dev.get(`/api/v/4/${SK}/code/failed?query=${byName(other)}`)).body.length, 0, "deleted");
  isErr(t, await s.dev.del(`/codeadmin/failed/${SK}`, {}), 400, "delete needs ids");
  isErr(t, await s.dev.post(`/api/v/4/${SK}/code/failed`, { id: 5 }), 400, "retry needs ids");
  isErr(t, await s2.dev.del(`/codeadmin/failed/${SK}`, { id: otherIds }), 401, "another system's developer cannot delete");
});

// ---- concurrency ------------------------------------------------------------------------------

t.test("concurrency 1: simultaneous calls both succeed and do not overlap", async (t) => {
  const col = await collection([["tag", "string"], ["started", "float"], ["ended", "float"]]);
  const name = uniq("single");
  await service(name, `async function ${name}(req, resp) {
    var c = ClearBladeAsync.Collection({ collectionName: "${col.name}" });
    var start = Date.now(), calls = 0;
    while (Date.now() - start < 300) { await c.count(); calls++; }
    var end = Date.now();
    await c.create({ tag: req.params.tag, started: start, ended: end });
    resp.success({ start: start, end: end, calls: calls });
  }`, { concurrency: 1 });
  const [a, b] = await within(Promise.all([exec(s.dev, name, { tag: "a" }), exec(s.dev, name, { tag: "b" })]), 20_000, "two calls");
  t.equal(a.body.success, true, `first call (${JSON.stringify(a.body).slice(0, 200)})`);
  t.equal(b.body.success, true, `second call (${JSON.stringify(b.body).slice(0, 200)})`);
  const rs = (await rows(col.id)).sort((x, y) => x.started - y.started);
  t.equal(rs.length, 2, "both recorded");
  if (rs.length === 2) {
    t.ok(rs[0].ended - rs[0].started >= 300, "each run waited ~300 ms");
    t.ok(rs[1].started >= rs[0].ended, `the runs do not overlap (${rs[0].started}-${rs[0].ended} then ${rs[1].started}-${rs[1].ended})`);
  }
  // without the limit the same service does overlap (the check above is meaningful)
  await updateService(name, { concurrency: 0 });
  await s.dev.del(`/api/v/1/data/${col.id}?query=${qs({ FILTERS: [] })}`);
  const [c, d] = await within(Promise.all([exec(s.dev, name, { tag: "c" }), exec(s.dev, name, { tag: "d" })]), 20_000, "two unlimited calls");
  t.equal(c.body.success && d.body.success, true);
  const rs2 = (await rows(col.id)).sort((x, y) => x.started - y.started);
  t.equal(rs2.length, 2);
  if (rs2.length === 2) t.ok(rs2[1].started < rs2[0].ended, `with concurrency 0 the runs overlap (${JSON.stringify(rs2)} ${JSON.stringify([c.body, d.body])})`);
});

// Last, because a failure here can leave the server unable to answer at all.
t.test("sandbox: a service looping over awaited host calls does not starve the server", async (t) => {
  const col = await collection([["v", "int"]]);
  const spin = uniq("spin");
  // a row written first shows the loop has started
  await service(spin, `async function ${spin}(req, resp) { var c = ClearBladeAsync.Collection({ collectionName: "${col.name}" }); await c.create({ v: 1 }); for (;;) { await c.count(); } }`, { execution_timeout: 2 });
  const t0 = Date.now();
  const run = within(exec(s.dev, spin), 10_000, "endless host-call loop").catch((e: Error) => e);
  t.ok(await waitFor(async () => (await within(rows(col.id), 5000, "marker row")).length > 0, 10_000), "the loop has started");
  const h0 = Date.now();
  const health = await within(request(o.url, "GET", "/health"), 5000, "health during the host-call loop").catch((e: Error) => e);
  const healthMs = Date.now() - h0;
  t.ok(!(health instanceof Error) && health.status === 200, `/health answers while the service loops (${health instanceof Error ? health.message : `${healthMs} ms`})`);
  if (!(health instanceof Error)) t.ok(healthMs < 1500, `within ~1 s (${healthMs} ms)`);
  const r = await run;
  const ms = Date.now() - t0;
  t.ok(!(r instanceof Error), `the run ends (${r instanceof Error ? r.message : "answered"})`);
  if (!(r instanceof Error)) {
    t.equal(r.body.success, false, "it fails");
    t.match(String(r.body.results), /time/i, `at its execution_timeout (${r.body.results})`);
    t.ok(ms < 5000, `about 2 s after it started (${ms} ms)`);
  }
});
