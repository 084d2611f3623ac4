// Cross-cutting HTTP conventions existing ClearBlade clients rely on: header spellings in any
// case, JSON bodies whatever the Content-Type, bodies on GET and DELETE, 200 + JSON on success, the error envelope (404 code 103 for unknown
// routes, 400 code 106 for malformed JSON, never a stack trace), repeated slashes, the first of
// repeated `query` parameters, and '+' / %20 decoding.
import t, { type Test } from "tap";
import { type HttpResponse, devWithSystem, isEnvelope, isErr as isErrorAnswer, newUser, ok200, qs, request, startOutpost, uniq } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "conventions");

const rolesPath = `/admin/user/${s.systemKey}/roles`;

/** Every error response this file sees, checked once more at the end for leaks. */
const errors: HttpResponse[] = [];

/** The harness's error check, plus a JSON content type; every error answer is kept for a later test. */
function isErr(t: Test, r: HttpResponse, status: number, code?: number, what = "") {
  errors.push(r);
  isErrorAnswer(t, r, status, code, what);
  t.match(String(r.headers["content-type"]), /application\/json/, `${what}: JSON content type`);
}

const raw = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => request(o.url, method, path, { headers, body });

// ---- headers ----------------------------------------------------------------------------------

t.test("token headers are accepted in Platform-* and ClearBlade-* spellings, any case", async (t) => {
  const u = await newUser(s);
  for (const h of ["ClearBlade-UserToken", "clearblade-usertoken", "CLEARBLADE-USERTOKEN", "Clearblade-Usertoken", "Platform-UserToken", "platform-usertoken", "PLATFORM-USERTOKEN"]) {
    const r = await raw("GET", "/api/v/1/user/info", { [h]: u.token });
    ok200(t, r, h);
    t.equal(r.body.user_id, u.userId, `${h}: the user is resolved`);
  }
  for (const h of ["ClearBlade-DevToken", "clearblade-devtoken", "CLEARBLADE-DEVTOKEN", "Platform-DevToken", "platform-devtoken"]) {
    const r = await raw("GET", `/admin/user/${s.systemKey}/count`, { [h]: s.devToken });
    ok200(t, r, h);
    t.type(r.body.count, "number");
  }
  // the token alone identifies its system; any token header carries any token kind
  const viaDevHeader = await raw("GET", "/api/v/1/user/info", { "ClearBlade-DevToken": u.token });
  ok200(t, viaDevHeader, "a user token in the DevToken header");
  t.equal(viaDevHeader.body.user_id, u.userId);
  const viaDeviceHeader = await raw("GET", "/api/v/1/user/info", { "ClearBlade-DeviceToken": u.token });
  ok200(t, viaDeviceHeader, "a user token in the DeviceToken header");
  isErr(t, await raw("GET", "/api/v/1/user/info", { "platform-usertoken": "bogus" }), 400, 204, "bad token under a lower-case header");
});

t.test("system key and secret headers in any spelling", async (t) => {
  const u = await newUser(s);
  const body = { email: u.email, password: u.password };
  for (const [k, sec] of [
    ["ClearBlade-SystemKey", "ClearBlade-SystemSecret"], ["Clearblade-Systemkey", "Clearblade-Systemsecret"],
    ["CLEARBLADE-SYSTEMKEY", "CLEARBLADE-SYSTEMSECRET"], ["Platform-SystemKey", "Platform-SystemSecret"],
    ["platform-systemkey", "platform-systemsecret"], ["PLATFORM-SYSTEMKEY", "Platform-SystemSecret"],
  ] as const) {
    const r = await raw("POST", "/api/v/1/user/auth", { [k]: s.systemKey, [sec]: s.systemSecret }, body);
    ok200(t, r, `${k} + ${sec}`);
    t.equal(r.body.user_id, u.userId);
  }
  isErr(t, await raw("POST", "/api/v/1/user/auth", { "platform-systemkey": s.systemKey, "PLATFORM-SYSTEMSECRET": "WRONG" }, body), 401, undefined, "wrong secret, odd case");
});

// ---- bodies -----------------------------------------------------------------------------------

t.test("JSON bodies are parsed whatever the Content-Type", async (t) => {
  const u = await newUser(s);
  const body = JSON.stringify({ email: u.email, password: u.password });
  const app = { "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret };
  for (const ct of [undefined, "text/plain", "text/plain; charset=utf-8", "application/json", "application/json; charset=utf-8", "application/octet-stream", "application/x-www-form-urlencoded"]) {
    const r = await raw("POST", "/api/v/1/user/auth", ct ? { ...app, "content-type": ct } : app, body);
    ok200(t, r, `content-type ${ct ?? "(none)"}`);
    t.equal(r.body.user_id, u.userId, `content-type ${ct ?? "(none)"}: body was read`);
  }
  const put = await raw("PUT", `/admin/user/${s.systemKey}/roles`, { "ClearBlade-DevToken": s.devToken, "content-type": "text/plain" }, JSON.stringify({ id: "Authenticated", changes: { description: "via text/plain" } }));
  ok200(t, put, "PUT with text/plain");
  const role = (await s.dev.get(`${rolesPath}?query=${qs({ FILTERS: [[{ EQ: [{ name: "Authenticated" }] }]] })}`)).body[0];
  t.equal(role.Description, "via text/plain", "the text/plain body took effect");
});

t.test("a GET with a body is tolerated", async (t) => {
  const u = await newUser(s);
  for (const body of ["{}", JSON.stringify({ anything: 1 }), "not json at all", ""]) {
    const r = await raw("GET", "/api/v/1/user/info", { "ClearBlade-UserToken": u.token }, body);
    ok200(t, r, `GET with body ${JSON.stringify(body)}`);
    t.equal(r.body.user_id, u.userId);
  }
  const withCt = await raw("GET", `${rolesPath}?query=${qs({ FILTERS: [[{ EQ: [{ name: "Anonymous" }] }]] })}`, { "ClearBlade-DevToken": s.devToken, "content-type": "application/json" }, "{}");
  ok200(t, withCt, "GET roles with {} body and a JSON content type (Node/JS SDK style)");
  t.same((withCt.body as any[]).map((r) => r.Name), ["Anonymous"], "the query parameter is still used");
});

t.test("DELETE with a JSON body works", async (t) => {
  const victim = await newUser(s);
  const victim2 = await newUser(s);
  const headers = { "ClearBlade-DevToken": s.devToken, "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret };
  const r = await raw("DELETE", "/api/v/1/user/info", headers, { user_id: victim.userId });
  ok200(t, r, "DELETE /api/v/1/user/info with {user_id}");
  isErr(t, await victim.client.get("/api/v/1/user/info"), 400, 204, "the user named in the DELETE body is gone");
  const r2 = await raw("DELETE", "/api/v/1/user/info", { ...headers, "content-type": "text/plain" }, JSON.stringify({ user_id: victim2.userId }));
  ok200(t, r2, "DELETE body with text/plain");
  isErr(t, await victim2.client.get("/api/v/1/user/info"), 400, 204, "gone too");
  const survivor = await newUser(s);
  isErr(t, await raw("DELETE", "/api/v/1/user/info", headers, "{\"user_id\": "), 400, 106, "malformed DELETE body");
  ok200(t, await survivor.client.get("/api/v/1/user/info"), "nobody deleted by the malformed request");
});

// ---- success and error shapes -----------------------------------------------------------------

t.test("success is 200 with a JSON body", async (t) => {
  const u = await newUser(s);
  const role = uniq("Shape");
  const calls: [string, () => Promise<HttpResponse>][] = [
    ["POST /api/v/1/user/reg", () => s.app.post("/api/v/1/user/reg", { email: `${uniq("shape")}@example.com`, password: "pw" })],
    ["POST /api/v/1/user/anon", () => s.app.post("/api/v/1/user/anon")],
    ["POST /api/v/1/user/checkauth", () => s.app.with({ "ClearBlade-UserToken": u.token }).post("/api/v/1/user/checkauth")],
    ["GET /api/v/1/user/info", () => u.client.get("/api/v/1/user/info")],
    ["PUT /api/v/1/user/info", () => u.client.put("/api/v/1/user/info", {})],
    ["POST /admin/user/{sk}/roles", () => s.dev.post(rolesPath, { name: role })],
    ["PUT /admin/user/{sk}/roles", () => s.dev.put(rolesPath, { id: role, changes: { users: { permissions: 1 } } })],
    ["GET /admin/user/{sk}/roles/count", () => s.dev.get(`${rolesPath}/count`)],
    ["DELETE /admin/user/{sk}/roles", () => s.dev.del(`${rolesPath}?role=${role}`)],
    ["POST /admin/user/{sk}/columns", () => s.dev.post(`/admin/user/${s.systemKey}/columns`, { column_name: "shape_col", type: "string" })],
    ["DELETE /admin/user/{sk}/columns", () => s.dev.del(`/admin/user/${s.systemKey}/columns?column=shape_col`)],
    ["PUT /admin/user/{sk}", () => s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: {} })],
    ["GET /admin/user/{sk}", () => s.dev.get(`/admin/user/${s.systemKey}`)],
    ["POST /api/v/1/user/logout", () => u.client.post("/api/v/1/user/logout")],
  ];
  for (const [what, call] of calls) {
    const r = await call();
    ok200(t, r, what);
    t.match(String(r.headers["content-type"]), /application\/json/, `${what}: JSON content type`);
    let parsed = true;
    try { JSON.parse(r.text); } catch { parsed = false; }
    t.ok(parsed && r.text.length > 0, `${what}: the body is JSON (${JSON.stringify(r.text.slice(0, 40))})`);
    t.ok(r.body !== null && typeof r.body === "object", `${what}: an object or array`);
  }
});

t.test("unknown routes are a 404 envelope with code 103", async (t) => {
  for (const [m, p] of [["GET", "/api/v/1/nope"], ["POST", "/admin/nothing/here"], ["GET", "/totally/unknown"], ["DELETE", "/api/v/9/user/info"], ["GET", "/api/v/1/user/info/extra/segments"]]) {
    isErr(t, await raw(m!, p!, { "ClearBlade-DevToken": s.devToken }), 404, 103, `${m} ${p}`);
  }
  isErr(t, await raw("GET", "/no/such/route"), 404, 103, "without any header");
  const wrongMethod = await raw("PATCH", "/api/v/1/user/info", { "ClearBlade-DevToken": s.devToken });
  errors.push(wrongMethod);
  t.ok(wrongMethod.status === 404 || wrongMethod.status === 405, `a known path with an unknown method -> 404/405 (${wrongMethod.status})`);
  t.ok(isEnvelope(wrongMethod.body, wrongMethod.status), "envelope");
});

t.test("repeated slashes are normalised", async (t) => {
  const u = await newUser(s);
  for (const p of ["//api/v/1//user/info", "/api/v/1//user/info", "/api//v/1/user///info", "///api/v/1/user/info"]) {
    const r = await raw("GET", p, { "ClearBlade-UserToken": u.token });
    ok200(t, r, p);
    t.equal(r.body.user_id, u.userId, `${p}: routed to user/info`);
  }
  const a = await raw("POST", "/api/v/1//user/auth", { "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret }, { email: u.email, password: u.password });
  ok200(t, a, "POST with a body through a // path");
  t.equal(a.body.user_id, u.userId, "the body survived normalisation");
  const q = await raw("GET", `/admin//user/${s.systemKey}//roles?query=${qs({ FILTERS: [[{ EQ: [{ name: "Anonymous" }] }]] })}`, { "ClearBlade-DevToken": s.devToken });
  ok200(t, q, "with a query string");
  t.same((q.body as any[]).map((r) => r.Name), ["Anonymous"], "the query string survived normalisation");
  const nf = await raw("GET", "//api/v/1//nope", { "ClearBlade-UserToken": u.token });
  isErr(t, nf, 404, 103, "an unknown route with repeated slashes is still a 404");
});

t.test("malformed JSON bodies are 400 with code 106", async (t) => {
  const u = await newUser(s);
  const app = { "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret };
  const dev = { "ClearBlade-DevToken": s.devToken };
  const cases: [string, string, Record<string, string>, string][] = [
    ["POST", "/api/v/1/user/auth", app, "{bad"],
    ["POST", "/api/v/1/user/reg", app, "{\"email\": \"x@example.com\", "],
    ["PUT", "/api/v/1/user/info", { "ClearBlade-UserToken": u.token }, "{"],
    ["PUT", "/api/v/1/user/pass", { "ClearBlade-UserToken": u.token }, "old_password=x"],
    ["POST", rolesPath, dev, "[1,"],
    ["PUT", rolesPath, dev, "{'id': 'Authenticated'}"],
    ["POST", `/admin/user/${s.systemKey}`, dev, "{\"email\":}"],
    ["POST", `/admin/user/${s.systemKey}/columns`, dev, "nope"],
    ["POST", "/api/v/1/user/auth", { ...app, "content-type": "application/json" }, "{bad"],
  ];
  for (const [m, p, h, body] of cases) isErr(t, await raw(m, p, h, body), 400, 106, `${m} ${p} ${JSON.stringify(body)}`);
  ok200(t, await u.client.get("/api/v/1/user/info"), "the server is fine afterwards");
});

t.test("odd but well-formed input is a 4xx, never a 500", async (t) => {
  const u = await newUser(s);
  const app = { "ClearBlade-SystemKey": s.systemKey, "ClearBlade-SystemSecret": s.systemSecret };
  const dev = { "ClearBlade-DevToken": s.devToken };
  const cases: [string, string, Record<string, string>, unknown][] = [
    ["POST", "/api/v/1/user/reg", app, "[]"], ["POST", "/api/v/1/user/reg", app, "\"str\""], ["POST", "/api/v/1/user/reg", app, "123"],
    ["POST", "/api/v/1/user/auth", app, "null"], ["POST", "/api/v/1/user/auth", app, { email: { $ne: "" }, password: { $ne: "" } }],
    ["PUT", "/api/v/1/user/info", { "ClearBlade-UserToken": u.token }, [1, 2]],
    ["PUT", rolesPath, dev, { id: "Authenticated", changes: "x" }], ["PUT", rolesPath, dev, { id: ["Authenticated"], changes: {} }],
    ["POST", rolesPath, dev, { name: { nested: true } }], ["PUT", `/admin/user/${s.systemKey}`, dev, { user: { $gt: "" }, changes: {} }],
    ["GET", `${rolesPath}?query=123`, dev, undefined], ["GET", `${rolesPath}?query=%22str%22`, dev, undefined],
    ["GET", `${rolesPath}?query=${qs({ FILTERS: "x" })}`, dev, undefined], ["GET", `${rolesPath}?query=${qs({ SORT: [{ DESC: 5 }] })}`, dev, undefined],
    ["GET", `${rolesPath}?query=${qs({ PAGESIZE: -1 })}`, dev, undefined], ["GET", `${rolesPath}?query=${qs({ PAGESIZE: "many" })}`, dev, undefined],
    ["GET", `${rolesPath}?query=${qs({ FILTERS: [[{ EQ: [{ name: { $gt: "" } }] }]] })}`, dev, undefined],
    ["GET", `${rolesPath}?query=${qs({ FILTERS: [[{ RE: [{ name: "(" }] }]] })}`, dev, undefined],
    ["GET", `/admin/user/${s.systemKey}?query=${qs({ FILTERS: [[{ EQ: [{ email: [1, 2] }] }]] })}`, dev, undefined],
    ["GET", `/admin/user/${s.systemKey}?query=%7B%7D%7D`, dev, undefined],
  ];
  for (const [m, p, h, body] of cases) {
    const r = await raw(m, p, h, body);
    errors.push(r);
    t.ok(r.status >= 400 && r.status < 500, `${m} ${decodeURIComponent(p).slice(0, 90)} ${body === undefined ? "" : JSON.stringify(body)} -> 4xx (got ${r.status})`);
    t.ok(isEnvelope(r.body, r.status), "envelope");
  }
});

t.test("duplicate `query` parameters: the first one wins", async (t) => {
  const first = qs({ FILTERS: [[{ EQ: [{ name: "Administrator" }] }]] });
  const second = qs({ FILTERS: [[{ EQ: [{ name: "Anonymous" }] }]] });
  const r = await s.dev.get(`${rolesPath}?query=${first}&query=${second}`);
  ok200(t, r);
  t.same((r.body as any[]).map((x) => x.Name), ["Administrator"], "roles: the first query was used");
  const r2 = await s.dev.get(`${rolesPath}?query=${second}&query=${first}`);
  t.same((r2.body as any[]).map((x) => x.Name), ["Anonymous"], "roles: order matters");
  const u1 = await newUser(s), u2 = await newUser(s);
  const q1 = qs({ FILTERS: [[{ EQ: [{ email: u1.email }] }]] });
  const q2 = qs({ FILTERS: [[{ EQ: [{ email: u2.email }] }]] });
  const users = await s.dev.get(`/admin/user/${s.systemKey}?query=${q1}&query=${q2}`);
  ok200(t, users);
  t.same((users.body as any[]).map((x) => x.user_id), [u1.userId], "users: the first query was used");
  const bad = await s.dev.get(`/admin/user/${s.systemKey}?query=${q1}&query=%7Bbroken`);
  ok200(t, bad, "a broken second query is ignored");
  t.same((bad.body as any[]).map((x) => x.user_id), [u1.userId]);
  const pyStyle = await s.dev.get(`/admin/user/${s.systemKey}/count?query=${qs([[{ EQ: [{ email: u2.email }] }]])}&query=${qs([])}`);
  t.same(pyStyle.body, { count: 1 }, "count: the first query was used");
});

t.test("'+' and %20 both decode to a space in query parameters", async (t) => {
  const name = `Field Tech ${uniq("crew")}`;
  const plusName = `C++ ${uniq("devs")}`;
  for (const n of [name, plusName]) ok200(t, await s.dev.post(rolesPath, { name: n }), `create '${n}'`);
  const q = JSON.stringify({ FILTERS: [[{ EQ: [{ name }] }]] });
  const pct = encodeURIComponent(q);
  t.match(pct, /%20/, "encodeURIComponent uses %20");
  const plus = new URLSearchParams({ query: q }).toString();
  t.match(plus, /\+/, "form encoding uses +");
  const viaPct = await s.dev.get(`${rolesPath}?query=${pct}`);
  ok200(t, viaPct, "%20");
  t.same((viaPct.body as any[]).map((r) => r.Name), [name], "%20 decoded to a space");
  const viaPlus = await s.dev.get(`${rolesPath}?${plus}`);
  ok200(t, viaPlus, "+");
  t.same((viaPlus.body as any[]).map((r) => r.Name), [name], "+ decoded to a space (Go url.Values.Encode)");
  const spacedJson = `{"FILTERS": [[{"EQ": [{"name": "${name}"}]}]], "PAGESIZE": 0, "PAGENUM": 0}`;
  const viaPlusEverywhere = await s.dev.get(`${rolesPath}?query=${encodeURIComponent(spacedJson).replace(/%20/g, "+")}`);
  t.same((viaPlusEverywhere.body as any[]).map((r) => r.Name), [name], "+ between JSON tokens too");
  const literalPlus = await s.dev.get(`${rolesPath}?query=${qs({ FILTERS: [[{ EQ: [{ name: plusName }] }]] })}`);
  t.same((literalPlus.body as any[]).map((r) => r.Name), [plusName], "%2B stays a literal +");
  const role = await s.dev.del(`${rolesPath}?role=${encodeURIComponent(name).replace(/%20/g, "+")}`);
  ok200(t, role, "DELETE ?role=Field+Tech+... finds the role by name");
  const gone = await s.dev.get(`${rolesPath}?query=${pct}`);
  t.same(gone.body, [], "deleted");
});

t.test("no error response carries a stack trace or source location", async (t) => {
  t.ok(errors.length > 40, `checked ${errors.length} error responses from this file`);
  for (const r of errors) {
    const text = r.text;
    const where = `${r.status} ${text.slice(0, 80)}`;
    t.notMatch(text, /\bat \S+ \(?\S+:\d+:\d+\)?/, `no stack frame: ${where}`);
    t.notMatch(text, /\.(ts|js|mjs):\d+/, `no source file location: ${where}`);
    t.notMatch(text, /node_modules|\/src\/|bun:|\/\$bunfs\//i, `no internal paths: ${where}`);
    t.notMatch(text, /SQLITE|SqliteError|LibsqlError|syntax error/i, `no database internals: ${where}`);
  }
});
