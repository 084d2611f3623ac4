// Webhooks: management on
// /admin/v/4/webhook and invocation at /api/v/4/webhook/execute with real HTTP requests, checking
// both what the service saw (it answers with its own request object) and what the caller got.
import t from "tap";
import { Client, type DevSystem, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => Promise.race([o.stop(), new Promise<void>((r) => setTimeout(r, 5000)).then(() => o.kill())]));
const s = await devWithSystem(o, "hooks-a");
const s2 = await devWithSystem(o, "hooks-b");
const SK = s.systemKey;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const hookPath = (sys: DevSystem, name?: string) => `/admin/v/4/webhook/${sys.systemKey}${name === undefined ? "" : `/${name}`}`;
const exec = (sys: DevSystem, name: string, rest = "") => `/api/v/4/webhook/execute/${sys.systemKey}/${name}${rest}`;

async function service(sys: DevSystem, name: string, code: string, extra: Record<string, unknown> = {}) {
  const r = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [], systemID: sys.systemKey, name, ...extra });
  if (r.status !== 200) throw new Error(`service create: ${r.status} ${r.text}`);
}
async function hook(sys: DevSystem, body: Record<string, unknown>, name = uniq("hook")) {
  const r = await sys.dev.post(hookPath(sys, name), body);
  if (r.status !== 200) throw new Error(`webhook create: ${r.status} ${r.text}`);
  return name;
}
async function allow(sys: DevSystem, role: string, svc: string) {
  const r = await sys.dev.put(`/admin/user/${sys.systemKey}/roles`, { id: role, changes: { services: [{ itemInfo: { name: svc }, permissions: 1 }] } });
  if (r.status !== 200) throw new Error(`role change: ${r.status} ${r.text}`);
}
/** Polls until `fn` holds (role changes reach the permission cache within its TTL). */
async function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 8000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A service that answers with the request object it received, and one that reads instructions
// from its body (status, headers, error, throw, hang) to exercise the response mapping.
const ECHO = uniq("echo");
await service(s, ECHO, `function ${ECHO}(req, resp) { resp.success(req); }`);
const ACT = uniq("act");
await service(s, ACT, `function ${ACT}(req, resp) {
  var b = req.params.body || {};
  if (b.set) resp.set(b.set);
  if (b.status) resp.status(b.status);
  if (b.throw) throw new Error("boom: " + b.throw);
  if (b.hang) return;
  if (b.error !== undefined) resp.error(b.error);
  resp.success(b.value === undefined ? { ok: true } : b.value);
}`, { execution_timeout: 1 });
const HANG = uniq("hang");
await service(s, HANG, `async function ${HANG}(req, resp) { await new Promise(function () {}); }`, { execution_timeout: 1 });
for (const svc of [ECHO, ACT, HANG]) await allow(s, "Anonymous", svc);
await allow(s, "Authenticated", ECHO);

// ---- management ------------------------------------------------------------------------------

t.test("create, read, list, update and delete; the list and record shapes clients read", async (t) => {
  const name = uniq("m");
  const c = await s.dev.post(hookPath(s, name), { name, service_name: ECHO, auth_method: "platform_auth", description: "first", path: "states/{stateCode}/devices/{deviceType}/" });
  t.equal(c.status, 200, c.text);
  t.same(c.body, { success: true }, "create answers {success:true}");

  const g = await s.dev.get(hookPath(s, name));
  t.equal(g.status, 200);
  t.match(g.body, { name, description: "first", auth_method: "platform_auth", service_name: ECHO, system_key: SK, system_secret: s.systemSecret, path: "/states/{stateCode}/devices/{deviceType}" });
  t.match(g.body.id, UUID, "id is a UUID");

  const l = await s.dev.get(hookPath(s));
  t.equal(l.status, 200);
  t.ok(Array.isArray(l.body), "the list is an array");
  const mine = l.body.find((w: any) => w.name === name);
  t.same(mine, g.body, "list entries are the full records");

  const u = await s.dev.put(hookPath(s, name), { description: "second", auth_method: "http_auth" });
  t.equal(u.status, 200, u.text);
  t.same(u.body, { success: true });
  const g2 = await s.dev.get(hookPath(s, name));
  t.equal(g2.body.description, "second");
  t.equal(g2.body.auth_method, "http_basic_auth", "http_auth is stored as http_basic_auth");
  t.equal(g2.body.service_name, ECHO, "fields not sent are kept");
  t.equal(g2.body.path, "/states/{stateCode}/devices/{deviceType}");
  t.equal(g2.body.id, g.body.id, "the id stays");

  const d = await s.dev.del(hookPath(s, name));
  t.equal(d.status, 200);
  t.same(d.body, { success: true });
  const gone = await s.dev.get(hookPath(s, name));
  t.equal(gone.status, 404);
  t.ok(isEnvelope(gone.body, 404));
  t.equal((await s.dev.del(hookPath(s, name))).status, 404, "deleting twice is a 404");
});

t.test("auth method names of the spec and of existing clients are stored in one canonical form", async (t) => {
  const cases: [string, string][] = [
    ["platform_auth", "platform_auth"], ["http_basic_auth", "http_basic_auth"], ["payload_auth", "payload_auth"], ["no_auth", "no_auth"],
    ["cb_auth", "platform_auth"], ["clearblade_auth", "platform_auth"], ["http_auth", "http_basic_auth"], ["NO_AUTH", "no_auth"],
  ];
  for (const [sent, stored] of cases) {
    const name = await hook(s, { service_name: ECHO, auth_method: sent });
    t.equal((await s.dev.get(hookPath(s, name))).body.auth_method, stored, `${sent} → ${stored}`);
  }
  const dflt = await hook(s, { service_name: ECHO });
  t.equal((await s.dev.get(hookPath(s, dflt))).body.auth_method, "platform_auth", "no auth_method: platform_auth (a token is needed)");
});

t.test("management failure paths answer with the envelope", async (t) => {
  const existing = await hook(s, { service_name: ECHO, auth_method: "no_auth" });
  const bad: [string, string, unknown, number][] = [
    ["unknown auth method", uniq("b"), { service_name: ECHO, auth_method: "oauth" }, 400],
    ["auth method not a string", uniq("b"), { service_name: ECHO, auth_method: 3 }, 400],
    ["service missing", uniq("b"), { auth_method: "no_auth" }, 400],
    ["service unknown", uniq("b"), { service_name: "nope", auth_method: "no_auth" }, 400],
    ["path with a partial wildcard", uniq("b"), { service_name: ECHO, path: "/a/x{b}" }, 400],
    ["path naming a wildcard twice", uniq("b"), { service_name: ECHO, path: "/{a}/{a}" }, 400],
    ["path with an empty element", uniq("b"), { service_name: ECHO, path: "/a//b" }, 400],
    ["path not a string", uniq("b"), { service_name: ECHO, path: 5 }, 400],
    ["description not a string", uniq("b"), { service_name: ECHO, description: {} }, 400],
    ["unknown field", uniq("b"), { service_name: ECHO, colour: "red" }, 400],
    ["name differs from the path", uniq("b"), { service_name: ECHO, name: "other" }, 400],
    ["body not an object", uniq("b"), [1, 2], 400],
    ["invalid name", "bad name!", { service_name: ECHO }, 400],
    ["already exists", existing, { service_name: ECHO }, 400],
  ];
  for (const [what, name, body, status] of bad) {
    const r = await s.dev.post(hookPath(s, encodeURIComponent(name)), body);
    t.equal(r.status, status, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, status), `${what}: envelope`);
  }
  const badJson = await request(o.url, "POST", hookPath(s, uniq("j")), { headers: { "ClearBlade-DevToken": s.devToken }, body: "{nope" });
  t.equal(badJson.status, 400);
  t.ok(isEnvelope(badJson.body, 400));

  const up = await s.dev.put(hookPath(s, existing), { auth_method: "bogus" });
  t.equal(up.status, 400, "update with a bad auth method");
  t.equal((await s.dev.get(hookPath(s, existing))).body.auth_method, "no_auth", "a refused update changes nothing");
  t.equal((await s.dev.put(hookPath(s, uniq("none")), { description: "x" })).status, 404, "update of a missing webhook");

  // who may manage webhooks: the system's developers only
  const user = await newUser(s);
  for (const [what, c] of [["user token", user.client], ["no token", new Client(o.url)], ["another developer", s2.dev]] as const) {
    const r = await c.get(hookPath(s));
    t.equal(r.status, 401, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 401));
    const w = await c.post(hookPath(s, uniq("x")), { service_name: ECHO });
    t.equal(w.status, 401, `${what} cannot create`);
  }
  t.equal((await s.dev.get(`/admin/v/4/webhook/${"f".repeat(30)}`)).status, 404, "unknown system");
});

// ---- the request object ----------------------------------------------------

t.test("every method runs the service; the request object carries method, uri, body, query, headers, urlParams", async (t) => {
  const name = await hook(s, { service_name: ECHO, auth_method: "no_auth", path: "/states/{stateCode}/devices/{deviceType}" });
  const seen = new Set<string>();
  for (const method of ["GET", "POST", "PUT", "DELETE", "PATCH"]) {
    const r = await request(o.url, method, exec(s, name, "/states/CA/devices/thermo%20stat?a=1&b=two&a=3&empty="), {
      headers: { MyHeader1: "v1", "x-lower": "L" },
      body: method === "GET" ? undefined : { k: method },
    });
    t.equal(r.status, 200, `${method}: ${r.text}`);
    const req = r.body;
    t.equal(req.params.method, method, `${method}: params.method`);
    t.equal(req.params.uri, `/api/v/4/webhook/execute/${SK}/${name}/states/CA/devices/thermo%20stat`, "params.uri is the full request path");
    t.same(req.params.query, { a: ["1", "3"], b: ["two"], empty: [""] }, "each query name maps to an array; repeats are appended");
    t.same(req.params.headers.Myheader1, ["v1"], "MyHeader1 appears as Myheader1");
    t.same(req.params.headers["X-lower"], ["L"], "x-lower appears as X-lower");
    t.notOk("MyHeader1" in req.params.headers || "myheader1" in req.params.headers, "no other spelling");
    for (const k of Object.keys(req.params.headers)) t.equal(k, k[0]!.toUpperCase() + k.slice(1).toLowerCase(), `header name ${k} is capitalised`);
    t.same(req.params.urlParams, { stateCode: "CA", deviceType: "thermo stat" }, "placeholders filled from the path");
    if (method === "GET") t.same(req.params.body, {}, "no body: an empty object");
    else t.same(req.params.body, { k: method }, "a JSON body arrives as an object");
    t.equal(req.systemKey, SK);
    t.equal(req.userid, "anon", "no_auth: userid anon");
    t.equal(req.userEmail, "anon", "no_auth: userEmail anon");
    t.equal(req.userToken, "");
    t.same(req.caller, { userid: "anon", userEmail: "anon", userToken: "" });
    t.equal(req.isLogging, false);
    t.match(req.service_instance_id, UUID);
    seen.add(req.service_instance_id);
  }
  t.equal(seen.size, 5, "each run has its own service_instance_id");
});

t.test("bodies: text stays text, an empty body is an empty object, an array stays an array", async (t) => {
  const name = await hook(s, { service_name: ECHO, auth_method: "no_auth" });
  const text = await request(o.url, "POST", exec(s, name), { body: "temperature=21&unit=C", headers: { "content-type": "application/x-www-form-urlencoded" } });
  t.equal(text.body.params.body, "temperature=21&unit=C");
  const notJson = await request(o.url, "POST", exec(s, name), { body: "{not json" });
  t.equal(notJson.status, 200, "a body that only looks like JSON is not an error");
  t.equal(notJson.body.params.body, "{not json");
  const empty = await request(o.url, "POST", exec(s, name), { body: "" });
  t.same(empty.body.params.body, {});
  const arr = await request(o.url, "PUT", exec(s, name), { body: [1, { a: 2 }] });
  t.same(arr.body.params.body, [1, { a: 2 }]);
  const logged = await request(o.url, "POST", exec(s, name), { body: {}, headers: { "Logging-enabled": "true" } });
  t.equal(logged.body.isLogging, true, "Logging-enabled: true sets isLogging");
});

t.test("paths: multilevel wildcards, trailing slash, and paths that do not match", async (t) => {
  const deep = await hook(s, { service_name: ECHO, auth_method: "no_auth", path: "/a/{x}/b/{y}/c/{z}" });
  const r = await request(o.url, "GET", exec(s, deep, "/a/1/b/two/c/3/"));
  t.equal(r.status, 200, r.text);
  t.same(r.body.params.urlParams, { x: "1", y: "two", z: "3" });
  const plain = await hook(s, { service_name: ECHO, auth_method: "no_auth" });
  const p = await request(o.url, "GET", exec(s, plain));
  t.equal(p.status, 200);
  t.same(p.body.params.urlParams, {}, "no wildcards: empty urlParams");
  const literal = await hook(s, { service_name: ECHO, auth_method: "no_auth", path: "/fixed/path" });
  t.equal((await request(o.url, "GET", exec(s, literal, "/fixed/path"))).status, 200, "a literal path matches itself");

  const misses: [string, string][] = [
    [deep, "/a/1/b/2/c"], [deep, "/a/1/b/2/c/3/extra"], [deep, "/A/1/b/2/c/3"], [deep, ""], [deep, "/a//b/2/c/3"],
    [plain, "/extra"], [literal, "/fixed/other"], [literal, "/fixed"],
  ];
  for (const [name, rest] of misses) {
    const m = await request(o.url, "POST", exec(s, name, rest), { body: {} });
    t.equal(m.status, 404, `${rest || "(nothing)"} does not match`);
    t.ok(isEnvelope(m.body, 404), "envelope");
  }
  const unknown = await request(o.url, "GET", exec(s, "no-such-hook"));
  t.equal(unknown.status, 404);
  t.ok(isEnvelope(unknown.body, 404));
  t.equal((await request(o.url, "GET", `/api/v/4/webhook/execute/${"0".repeat(30)}/x`)).status, 404, "unknown system");
});

// ---- authentication ---------------------------------------------------------

t.test("no_auth needs the Anonymous role to be allowed to run the service", async (t) => {
  const svc = uniq("anonsvc");
  await service(s, svc, `function ${svc}(req, resp) { resp.success("ran"); }`);
  const name = await hook(s, { service_name: svc, auth_method: "no_auth" });
  const denied = await request(o.url, "POST", exec(s, name), { body: {} });
  t.equal(denied.status, 403, denied.text);
  t.ok(isEnvelope(denied.body, 403));
  await allow(s, "Anonymous", svc);
  const ok = await eventually(() => request(o.url, "POST", exec(s, name), { body: {} }), (r) => r.status === 200);
  t.equal(ok.status, 200, ok.text);
  t.equal(ok.text, "ran");
});

t.test("platform_auth: Platform-UserToken with a user or device token", async (t) => {
  const name = await hook(s, { service_name: ECHO, auth_method: "platform_auth" });
  const u = await newUser(s);
  const r = await request(o.url, "POST", exec(s, name), { headers: { "Platform-UserToken": u.token }, body: { a: 1 } });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.userid, u.userId, "userid is the user's");
  t.equal(r.body.userEmail, u.email);
  t.equal(r.body.userToken, u.token, "userToken is the caller's token");
  t.same(r.body.caller, { userid: u.userId, userEmail: u.email, userToken: u.token });

  const dev = uniq("dev");
  const d = await s.dev.post(`/api/v/2/devices/${SK}/${dev}`, { type: "sensor", state: "", active_key: "device-key-1", enabled: true, allow_key_auth: true });
  t.equal(d.status, 200, d.text);
  const da = await s.app.post(`/api/v/2/devices/${SK}/auth`, { deviceName: dev, activeKey: "device-key-1" });
  t.equal(da.status, 200, da.text);
  const rd = await request(o.url, "GET", exec(s, name), { headers: { "Platform-UserToken": da.body.deviceToken } });
  t.equal(rd.status, 200, rd.text);
  t.equal(rd.body.userid, dev, "a device appears by its name");

  // a service account's token (cb_service_account, read by the developer as cb_token)
  const svcUser = await newUser(s);
  const sa = await s.dev.put(`/admin/user/${SK}`, { user: svcUser.userId, changes: { cb_service_account: true } });
  t.equal(sa.status, 200, sa.text);
  const rs = await request(o.url, "POST", exec(s, name), { headers: { "Platform-UserToken": sa.body.cb_token }, body: {} });
  t.equal(rs.status, 200, rs.text);
  t.equal(rs.body.userid, svcUser.userId, "a service account runs the webhook as its user");

  const none = await request(o.url, "POST", exec(s, name), { body: {} });
  t.equal(none.status, 401, "no token");
  t.ok(isEnvelope(none.body, 401));
  const bad = await request(o.url, "POST", exec(s, name), { headers: { "Platform-UserToken": "not-a-token" }, body: {} });
  t.equal(bad.status, 401, "a bad token");
  t.ok(isEnvelope(bad.body, 401));
  const other = await newUser(s2);
  const foreign = await request(o.url, "POST", exec(s, name), { headers: { "Platform-UserToken": other.token }, body: {} });
  t.equal(foreign.status, 401, "a token of another system");
  await request(o.url, "POST", "/api/v/1/user/logout", { headers: { "ClearBlade-UserToken": u.token } });
  const out = await request(o.url, "POST", exec(s, name), { headers: { "Platform-UserToken": u.token }, body: {} });
  t.equal(out.status, 401, "a logged-out token");

  // authenticated, but the user's roles do not allow the service
  const svc = uniq("private");
  await service(s, svc, `function ${svc}(req, resp) { resp.success("secret"); }`);
  const priv = await hook(s, { service_name: svc, auth_method: "cb_auth" });
  const v = await newUser(s);
  const forbidden = await request(o.url, "POST", exec(s, priv), { headers: { "Platform-UserToken": v.token }, body: {} });
  t.equal(forbidden.status, 403, forbidden.text);
  t.ok(isEnvelope(forbidden.body, 403));
  const viaHeader = await request(o.url, "POST", exec(s, name), { headers: { "ClearBlade-UserToken": v.token }, body: {} });
  t.equal(viaHeader.status, 200, "existing clients' ClearBlade-UserToken header works too");
});

t.test("payload_auth: the token query parameter on GET, the body's token field otherwise", async (t) => {
  const name = await hook(s, { service_name: ECHO, auth_method: "payload_auth" });
  const u = await newUser(s);
  const g = await request(o.url, "GET", exec(s, name, `?token=${encodeURIComponent(u.token)}&reading=5`));
  t.equal(g.status, 200, g.text);
  t.equal(g.body.userid, u.userId);
  t.same(g.body.params.query.reading, ["5"], "the other parameters carry data");
  const p = await request(o.url, "POST", exec(s, name), { body: { token: u.token, reading: 6 } });
  t.equal(p.status, 200, p.text);
  t.equal(p.body.userid, u.userId);
  t.equal(p.body.params.body.reading, 6);

  for (const [what, method, path, body] of [
    ["GET without token", "GET", exec(s, name), undefined], ["GET with a bad token", "GET", exec(s, name, "?token=nope"), undefined],
    ["POST without token", "POST", exec(s, name), { reading: 1 }], ["POST with a bad token", "POST", exec(s, name), { token: "nope" }],
    ["POST with a token of the wrong type", "POST", exec(s, name), { token: 12 }],
  ] as const) {
    const r = await request(o.url, method, path, { body });
    t.equal(r.status, 401, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 401), `${what}: envelope`);
  }
});

t.test("http_basic_auth: Authorization: Basic with a raw token or email:password", async (t) => {
  const name = await hook(s, { service_name: ECHO, auth_method: "http_basic_auth" });
  const u = await newUser(s);
  const raw = await request(o.url, "POST", exec(s, name), { headers: { Authorization: `Basic ${u.token}` }, body: {} });
  t.equal(raw.status, 200, raw.text);
  t.equal(raw.body.userid, u.userId, "the raw token (Go InvokeWebhook)");
  const pw = await request(o.url, "POST", exec(s, name), { headers: { Authorization: `Basic ${Buffer.from(`${u.email}:${u.password}`).toString("base64")}` }, body: {} });
  t.equal(pw.status, 200, pw.text);
  t.equal(pw.body.userEmail, u.email, "email:password (curl -u)");
  const tokenOnly = await request(o.url, "POST", exec(s, name), { headers: { Authorization: `Basic ${Buffer.from(`:${u.token}`).toString("base64")}` }, body: {} });
  t.equal(tokenOnly.status, 200, "an empty user name and the token as password");

  for (const [what, header] of [
    ["no header", undefined], ["wrong password", `Basic ${Buffer.from(`${u.email}:wrong-password`).toString("base64")}`],
    ["unknown user", `Basic ${Buffer.from(`nobody@example.com:${u.password}`).toString("base64")}`],
    ["garbage", "Basic !!!"], ["a Bearer header", `Bearer ${u.token}`],
  ] as const) {
    const r = await request(o.url, "POST", exec(s, name), { headers: header ? { Authorization: header } : {}, body: {} });
    t.equal(r.status, 401, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 401), `${what}: envelope`);
  }
});

// ---- the answer -------------------------------------------------------------------------------

t.test("the service's result becomes the HTTP answer", async (t) => {
  const name = await hook(s, { service_name: ACT, auth_method: "no_auth" });
  const call = (body: unknown) => request(o.url, "POST", exec(s, name), { body });

  const obj = await call({ value: { temp: 21 } });
  t.equal(obj.status, 200);
  t.same(obj.body, { temp: 21 }, "resp.success(object): the object as JSON");
  t.match(obj.headers["content-type"], /application\/json/);
  const str = await call({ value: "plain words" });
  t.equal(str.status, 200);
  t.equal(str.text, "plain words", "resp.success(string): the text as is");
  t.match(str.headers["content-type"], /text\/plain/);

  const err = await call({ error: "bad reading" });
  t.equal(err.status, 500, "resp.error: an error status");
  t.equal(err.text, "bad reading");
  const errObj = await call({ error: { reason: "range" } });
  t.equal(errObj.status, 500);
  t.same(errObj.body, { reason: "range" });

  const created = await call({ status: 201, value: { id: 1 } });
  t.equal(created.status, 201, "resp.status is honoured");
  t.same(created.body, { id: 1 });
  const teapot = await call({ status: 418, error: "short and stout" });
  t.equal(teapot.status, 418, "resp.status with resp.error");
  const badStatus = await call({ status: 99, value: "x" });
  t.equal(badStatus.status, 200, "an impossible status is ignored");
  const noContent = await call({ status: 204, value: "ignored" });
  t.equal(noContent.status, 204);
  t.equal(noContent.text, "", "204 has no body");

  const headed = await call({ set: { "X-Reading": "21", "Content-Type": "application/xml" }, value: "<t>21</t>" });
  t.equal(headed.headers["x-reading"], "21", "resp.set headers reach the caller");
  t.equal(headed.headers["content-type"], "application/xml", "resp.set may choose the content type");
  t.equal(headed.text, "<t>21</t>");
  const badHeader = await call({ set: { "Bad Header": "x", "X-Ok": "y" }, value: "fine" });
  t.equal(badHeader.status, 200, "an invalid header name does not break the answer");
  t.equal(badHeader.headers["x-ok"], "y");
});

t.test("a service that throws or times out is a clear error, and the server keeps serving", async (t) => {
  const name = await hook(s, { service_name: ACT, auth_method: "no_auth" });
  const thrown = await request(o.url, "POST", exec(s, name), { body: { throw: "sensor offline" } });
  t.equal(thrown.status, 500, thrown.text);
  t.ok(isEnvelope(thrown.body, 500), "envelope without a stack trace");
  t.match(thrown.body.error.detail, /sensor offline/, "the error names what the service threw");
  t.equal(thrown.body.error.category, "Code");

  const hang = await hook(s, { service_name: HANG, auth_method: "no_auth" });
  const started = Date.now();
  const slow = await request(o.url, "GET", exec(s, hang));
  t.equal(slow.status, 504, slow.text);
  t.ok(isEnvelope(slow.body, 504));
  t.match(slow.body.error.detail, /timed out/);
  t.ok(Date.now() - started < 5000, "the timeout of the service (1 s) applies");

  const after = await request(o.url, "POST", exec(s, name), { body: { value: "still here" } });
  t.equal(after.status, 200);
  t.equal(after.text, "still here");
});

t.test("a deleted webhook or service stops answering; a changed webhook answers by its new rules at once", async (t) => {
  const svc = uniq("temp");
  await service(s, svc, `function ${svc}(req, resp) { resp.success("v"); }`);
  await allow(s, "Anonymous", svc);
  const name = await hook(s, { service_name: svc, auth_method: "no_auth" });
  t.equal((await eventually(() => request(o.url, "GET", exec(s, name)), (r) => r.status === 200)).status, 200);
  t.equal((await s.dev.put(hookPath(s, name), { auth_method: "platform_auth" })).status, 200);
  t.equal((await request(o.url, "GET", exec(s, name))).status, 401, "now a token is needed");
  t.equal((await s.dev.put(hookPath(s, name), { auth_method: "no_auth", path: "/v2/{id}" })).status, 200);
  const moved = await request(o.url, "GET", exec(s, name, "/v2/7"));
  t.equal(moved.status, 200, "the new path matches");
  t.equal((await request(o.url, "GET", exec(s, name))).status, 404, "the old path does not");
  t.equal((await s.dev.del(`/admin/code/v/1/${SK}/${svc}`)).status, 200);
  const noSvc = await request(o.url, "GET", exec(s, name, "/v2/7"));
  t.equal(noSvc.status, 404, "the service is gone");
  t.ok(isEnvelope(noSvc.body, 404));
  t.equal((await s.dev.del(hookPath(s, name))).status, 200);
  t.equal((await request(o.url, "GET", exec(s, name, "/v2/7"))).status, 404, "the webhook is gone");
});

t.test("webhooks are per system", async (t) => {
  const name = uniq("shared");
  await hook(s, { service_name: ECHO, auth_method: "no_auth" }, name);
  t.equal((await request(o.url, "GET", exec(s2, name))).status, 404, "another system does not see it");
  t.equal((await s2.dev.get(hookPath(s2, name))).status, 404);
  t.notOk((await s2.dev.get(hookPath(s2))).body.some((w: any) => w.name === name));
});

t.test("a webhook can run a stream service (execution_timeout -1)", async (t) => {
  const svc = uniq("stream");
  await service(s, svc, `function ${svc}(req, resp) { resp.success({ streamed: req.params.method }); }`, { execution_timeout: -1, auto_restart: false });
  await allow(s, "Anonymous", svc);
  const name = await hook(s, { service_name: svc, auth_method: "no_auth" });
  const r = await eventually(() => request(o.url, "PUT", exec(s, name), { body: {} }), (x) => x.status === 200);
  t.equal(r.status, 200, r.text);
  t.same(r.body, { streamed: "PUT" });
});
