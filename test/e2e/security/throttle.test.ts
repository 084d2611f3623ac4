// Throttling against password and key guessing, and who may change the throttling cases, against
// the real binary: every spelling of a sign-in counts in the one bucket its handler's lookup
// implies; every way to try a password or key is limited by a built-in case; only a platform admin
// changes cases that reach beyond the developer's own systems.
import t from "tap";
import { Client, type DevSystem, devWithSystem, isEnvelope, isErr, newUser, type Outpost, request, startOutpost, sleep, uniq, waitFor } from "../harness.ts";

const enc = encodeURIComponent;
const HTTP = "HTTP Requests", CONN = "MQTT Connections";
const casesPath = (th: string) => `/admin/throttlers/${enc(th)}/cases`;
const casePath = (th: string, c: string) => `/admin/throttlers/${enc(th)}/cases/${enc(c)}`;
const ADMIN_EMAIL = "root@outpost.example", ADMIN_PASSWORD = "admin-password-1";
const BUILT_INS = [
  "Block brute force auth", "Block brute force password reset core api", "Block brute force device auth",
  "Block brute force developer auth", "Block brute force webhook basic auth",
];

const servers: Outpost[] = [];
t.teardown(() => Promise.all(servers.map((x) => Promise.race([x.stop(), sleep(5000).then(() => x.kill())]))));
async function server(opts: Parameters<typeof startOutpost>[0] = {}) {
  const x = await startOutpost(opts);
  servers.push(x);
  return x;
}

const o = await server({ defaultThrottlers: true, args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });
const signInAdmin = await request(o.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
if (signInAdmin.status !== 200) throw new Error(`admin sign-in: ${signInAdmin.text}`);
const admin = new Client(o.url, { "ClearBlade-DevToken": signInAdmin.body.dev_token });

const kase = (fields: Record<string, unknown>) => ({ case_name: uniq("case"), consumer: "*", limiter_type: "frequency", max_num: 1, duration: 60, priority: 10, ...fields });
const statuses = async (n: number, call: () => Promise<{ status: number }>) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await call()).status);
  return out;
};
const userAuth = (sys: DevSystem, body: unknown, path = "/api/v/1/user/auth", headers: Record<string, string> = {}) =>
  request(sys.app.base, "POST", path, { headers: { ...sys.app.headers, ...headers }, body });
/** Three wrong passwords: the built-in sign-in bucket of this system and email is empty after. */
async function exhaust(sys: DevSystem, email: string) {
  return statuses(3, () => userAuth(sys, { email, password: "wrong-password" }));
}

// ---- 1. the consumer is who sign-in finds ------------------------------------------------------

t.test("sign-in counts every spelling of an email in one bucket (lookup is case-insensitive)", async (t) => {
  const sys = await devWithSystem(o, "spelling");
  const v = await newUser(sys);
  t.same(await exhaust(sys, v.email), [401, 401, 401]);
  for (const [what, body] of [
    ["upper case", { email: v.email.toUpperCase(), password: v.password }],
    ["mixed case", { email: v.email[0]!.toUpperCase() + v.email.slice(1), password: v.password }],
    ["username field, upper case", { username: v.email.toUpperCase(), password: v.password }],
    ["surrounding blanks", { email: ` ${v.email} `, password: v.password }],
  ] as const) {
    const r = await userAuth(sys, body);
    isErr(t, r, 429, `${what}: the victim's bucket is empty`);
  }
  const other = await newUser(sys);
  t.equal((await userAuth(sys, { email: other.email.toUpperCase(), password: other.password })).status, 200, "another user still signs in");
});

t.test("sign-in: the name is read from the whole body, whatever its size or encoding", async (t) => {
  const sys = await devWithSystem(o, "bodies");
  const v = await newUser(sys);
  t.same(await exhaust(sys, v.email), [401, 401, 401]);
  // beyond a peek limit the name would not be found, and the request would count for its address
  const padded = `{"email": ${JSON.stringify(v.email)},${" ".repeat(80 * 1024)}"password": ${JSON.stringify(v.password)}}`;
  isErr(t, await userAuth(sys, padded), 429, "a padded body");
  const chunked = await request(o.url, "POST", "/api/v/1/user/auth", { headers: sys.app.headers, body: { email: v.email, password: v.password }, chunked: true });
  isErr(t, chunked, 429, "a chunked body (no Content-Length)");
});

t.test("sign-in ignores token headers: they neither choose the bucket nor skip the limit", async (t) => {
  const sys = await devWithSystem(o, "tokens");
  const v = await newUser(sys);
  const mine = await newUser(sys);
  t.same(await exhaust(sys, v.email), [401, 401, 401]);
  isErr(t, await userAuth(sys, { email: v.email, password: v.password }, undefined, { "ClearBlade-DevToken": sys.devToken }), 429, "a developer token");
  isErr(t, await userAuth(sys, { email: v.email, password: v.password }, undefined, { "ClearBlade-UserToken": mine.token }), 429, "another user's token");
});

// ---- 2. every path the router answers -----------------------------------------------------------

t.test("path spellings the router answers count in the sign-in bucket", async (t) => {
  const sys = await devWithSystem(o, "paths");
  const variants = ["/api/v/1/user/auth/", "/api/v/1//user/auth", "//api/v/1/user/auth", "/api/v/1/user/auth//", "/api/v/1/user//auth/"];
  for (const path of variants) {
    const v = await newUser(sys);
    const got = await statuses(4, () => userAuth(sys, { email: v.email, password: "wrong-password" }, path));
    t.same(got, [401, 401, 401, 429], `${path} alone`);
  }
  const v = await newUser(sys);
  const mixed = [];
  for (const path of ["/api/v/1/user/auth", ...variants]) mixed.push((await userAuth(sys, { email: v.email, password: "wrong-password" }, path)).status);
  t.same(mixed, [401, 401, 401, 429, 429, 429], "spellings share one bucket");
  const last = await userAuth(sys, { email: v.email, password: v.password }, "//api/v/1/user/auth/");
  isErr(t, last, 429, "a refusal on a re-routed spelling is the envelope");
  t.match(last.body.error.detail, /Block brute force auth/);
});

// ---- 3. every way to try a password or key -------------------------------------------------------

t.test("built-in cases for device keys, developer passwords and webhook basic auth are listed and protected", async (t) => {
  const dev = await devWithSystem(o, "listing");
  const cases = (await dev.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.filter((c: any) => c.built_in);
  t.same(cases.map((c: any) => c.case_name).sort(), [...BUILT_INS].sort(), "all built-in cases, to any developer");
  for (const c of cases) t.match(c, { limiter_type: "frequency", max_num: 3, duration: 600, priority: 200 });
  t.match(cases.find((c: any) => c.case_name === "Block brute force device auth"), { resource: "/api/v/2/devices/{systemKey}/auth", system_key: "?", consumer: "email=?" });
  t.match(cases.find((c: any) => c.case_name === "Block brute force developer auth"), { resource: "/admin/auth", system_key: "*", consumer: "email=?" });
  t.match(cases.find((c: any) => c.case_name === "Block brute force webhook basic auth"), { system_key: "?", consumer: "email=?" });
  for (const name of BUILT_INS.slice(2)) {
    isErr(t, await admin.put(casePath(HTTP, name), { max_num: -1 }), 403, `admin cannot modify ${name}`);
    isErr(t, await admin.del(casePath(HTTP, name)), 403, `admin cannot delete ${name}`);
  }
});

t.test("device auth: good sign-ins never count; three wrong keys lock the device out; other devices unaffected", async (t) => {
  const sys = await devWithSystem(o, "devices");
  // (at the developer path: POST on the user path of a device named "auth" is the sign-in)
  const mk = async (name: string) => {
    const r = await sys.dev.post(`/admin/devices/${sys.systemKey}/${name}`, { type: "x", state: "", active_key: "device-key-1", enabled: true, allow_key_auth: true });
    if (r.status !== 200) throw new Error(r.text);
  };
  const [victim, other] = [uniq("dev"), uniq("dev")];
  await mk(victim); await mk(other);
  const auth = (name: string, key: string, path = `/api/v/2/devices/${sys.systemKey}/auth`, headers: Record<string, string> = {}) =>
    request(o.url, "POST", path, { headers, body: { deviceName: name, activeKey: key } });
  // a gateway that reboots or loses its link signs in again and again with its right key
  t.same(await statuses(20, () => auth(victim, "device-key-1")), Array(20).fill(200), "20 good sign-ins in a row");
  t.same(await statuses(2, () => auth(victim, "wrong-key-1")), [401, 401], "two wrong keys");
  t.equal((await auth(victim, "device-key-1")).status, 200, "a good sign-in clears them");
  t.same(await statuses(3, () => auth(victim, "wrong-key-1")), [401, 401, 401], "three wrong keys in a row");
  const locked = await auth(victim, "device-key-1");
  isErr(t, locked, 429, "the fourth attempt, right key or not");
  t.equal(locked.headers["retry-after"], "60", "the first lockout lasts a minute");
  isErr(t, await auth(victim, "device-key-1", `/api/v/2/devices/${sys.systemKey}/auth/`), 429, "another path spelling");
  isErr(t, await auth(victim, "device-key-1", undefined, { "ClearBlade-DevToken": sys.devToken }), 429, "with a developer token");
  const ok = await auth(other, "device-key-1");
  t.equal(ok.status, 200, "another device signs in");
  // a device named "auth" is read at the same path: those calls are no sign-ins
  await mk("auth");
  const self = await auth("auth", "device-key-1");
  t.equal(self.status, 200);
  const device = new Client(o.url, { "ClearBlade-DeviceToken": self.body.deviceToken });
  t.same(await statuses(5, () => device.get(`/api/v/2/devices/${sys.systemKey}/auth`)), [200, 200, 200, 200, 200], "reading the device named auth is not limited");
});

t.test("developer auth: good sign-ins never count; three wrong passwords lock the developer out; other developers unaffected", async (t) => {
  const victim = await devWithSystem(o, "dev-victim");
  const other = await devWithSystem(o, "dev-other");
  const auth = (email: string, password: string, headers: Record<string, string> = {}) => request(o.url, "POST", "/admin/auth", { headers, body: { email, password } });
  // a console, a script and a status command, each signing in
  t.same(await statuses(10, () => auth(victim.email, victim.password)), Array(10).fill(200), "10 good sign-ins in a row");
  t.equal((await auth(victim.email, "wrong-password")).status, 401, "a typo");
  t.equal((await auth(victim.email, victim.password)).status, 200, "then the right password");
  t.same(await statuses(3, () => auth(victim.email, "wrong-password")), [401, 401, 401], "three wrong passwords");
  isErr(t, await auth(victim.email, victim.password), 429, "the fourth attempt");
  isErr(t, await auth(victim.email.toUpperCase(), victim.password), 429, "the email in capitals");
  isErr(t, await auth(victim.email, victim.password, { "ClearBlade-DevToken": other.devToken, "ClearBlade-SystemKey": other.systemKey }), 429, "with another developer's token and a system key");
  const r = await request(o.url, "POST", "/admin//auth/", { body: { username: victim.email, password: victim.password } });
  isErr(t, r, 429, "another path spelling and the username field");
  t.equal((await auth(other.email, other.password)).status, 200, "another developer signs in");
  // a refresh-token grant names nobody and guesses nothing: not limited
  let session = (await request(o.url, "POST", "/admin/reg", { body: { email: `${uniq("dev")}@example.com`, password: "dev-password-1", fname: "D", lname: "V", org: "O" } })).body;
  const refreshed: number[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await request(o.url, "POST", "/admin/auth", { body: { grant_type: "refresh_token", refresh_token: session.refresh_token, access_token: session.dev_token } });
    refreshed.push(r.status);
    if (r.status === 200) session = r.body;
  }
  t.same(refreshed, [200, 200, 200, 200, 200], "refresh grants");
});

t.test("webhook http_basic_auth: wrong passwords are limited per user name; right ones never use up the budget", async (t) => {
  const sys = await devWithSystem(o, "hooks");
  const svc = uniq("echo");
  t.equal((await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${svc}`, { code: `function ${svc}(req, resp) { resp.success(req.userEmail); }`, parameters: [], systemID: sys.systemKey })).status, 200);
  t.equal((await sys.dev.put(`/admin/user/${sys.systemKey}/roles`, { id: "Authenticated", changes: { services: [{ itemInfo: { name: svc }, permissions: 1 }] } })).status, 200);
  const hook = uniq("hook");
  t.equal((await sys.dev.post(`/admin/v/4/webhook/${sys.systemKey}/${hook}`, { service_name: svc, auth_method: "http_basic_auth" })).status, 200);
  const [victim, other] = [await newUser(sys), await newUser(sys)];
  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
  const call = (authz: string, path = `/api/v/4/webhook/execute/${sys.systemKey}/${hook}`, headers: Record<string, string> = {}) =>
    request(o.url, "POST", path, { headers: { Authorization: authz, ...headers }, body: {} });

  t.same(await statuses(6, () => call(basic(other.email, other.password))), [200, 200, 200, 200, 200, 200], "successful calls do not count");
  t.same(await statuses(6, () => call(`Basic ${victim.token}`)), [200, 200, 200, 200, 200, 200], "nor do calls with a raw token");
  t.same(await statuses(3, () => call(basic(victim.email, "wrong-password"))), [401, 401, 401], "three wrong passwords");
  const fourth = await call(basic(victim.email, victim.password));
  isErr(t, fourth, 429, "the fourth attempt");
  t.match(fourth.body.error.detail, /Block brute force webhook basic auth/);
  isErr(t, await call(basic(victim.email.toUpperCase(), victim.password)), 429, "the user name in capitals");
  isErr(t, await call(basic(victim.email, victim.password), `/api/v/4/webhook/execute/${sys.systemKey}//${hook}/`), 429, "another path spelling");
  isErr(t, await call(basic(victim.email, victim.password), undefined, { "ClearBlade-DevToken": sys.devToken }), 429, "with a developer token");
  t.equal((await call(basic(other.email, other.password))).status, 200, "another user still calls");
  t.equal((await call(`Basic ${victim.token}`)).status, 200, "the victim's token still works");
});

t.test("--enable-default-throttlers=false turns every built-in case off", async (t) => {
  const x = await server({ args: ["--enable-default-throttlers", "false"] });
  const sys = await devWithSystem(x);
  t.same((await sys.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases, [], "none listed");
  const name = uniq("dev");
  t.equal((await sys.dev.post(`/api/v/2/devices/${sys.systemKey}/${name}`, { type: "x", state: "", active_key: "device-key-1", enabled: true, allow_key_auth: true })).status, 200);
  t.same(await statuses(5, () => request(x.url, "POST", `/api/v/2/devices/${sys.systemKey}/auth`, { body: { deviceName: name, activeKey: "wrong-key-1" } })), [401, 401, 401, 401, 401], "device auth");
  t.same(await statuses(5, () => request(x.url, "POST", "/admin/auth", { body: { email: sys.email, password: "wrong-password" } })), [401, 401, 401, 401, 401], "developer auth");
});

// ---- 4. who may change cases ------------------------------------------------------------------------

t.test("a developer changes only the cases of its own systems; platform-wide ones need a platform admin", async (t) => {
  const a = await devWithSystem(o, "owner-a");
  const b = await devWithSystem(o, "owner-b");

  // b cannot reach a's system nor every system
  for (const [what, fields] of [
    ["another developer's system", { system_key: a.systemKey, resource: "/api/v/1/user/auth", max_num: 0, priority: 1 }],
    ["every system (*)", { system_key: "*", resource: "/api/v/1/user/auth", max_num: -1, priority: 1 }],
    ["each system (?)", { system_key: "?", resource: "/api/v/1/user/auth", max_num: -1, priority: 1 }],
    ["a system that does not exist", { system_key: "f".repeat(30), resource: "*" }],
  ] as const) {
    isErr(t, await b.dev.post(casesPath(HTTP), kase(fields)), 403, `create for ${what}`);
  }
  isErr(t, await b.dev.post(casesPath(CONN), kase({ system_key: a.systemKey, max_num: 0 })), 403, "MQTT Connections too");
  const va = await newUser(a);
  t.equal((await userAuth(a, { email: va.email, password: va.password })).status, 200, "a's users are not locked out");

  // its own system is fine, and so is an admin anywhere
  const mine = await b.dev.post(casesPath(HTTP), kase({ system_key: b.systemKey, resource: "/never/b" }));
  t.equal(mine.status, 200, mine.text);
  const ofA = await a.dev.post(casesPath(HTTP), kase({ system_key: a.systemKey, resource: "/never/a" }));
  t.equal(ofA.status, 200, ofA.text);
  const wide = await admin.post(casesPath(HTTP), kase({ system_key: "*", resource: "/never/wide" }));
  t.equal(wide.status, 200, `admin creates a * case: ${wide.text}`);
  const forA = await admin.post(casesPath(HTTP), kase({ system_key: a.systemKey, resource: "/never/admin-a" }));
  t.equal(forA.status, 200, "admin creates a case for any system");

  // changes and deletions follow the case's system
  for (const [what, name] of [["a * case", wide.body.case_name], ["another developer's case", ofA.body.case_name]] as const) {
    isErr(t, await b.dev.put(casePath(HTTP, name), { max_num: 0 }), 403, `update ${what}`);
    isErr(t, await b.dev.del(casePath(HTTP, name)), 403, `delete ${what}`);
  }
  isErr(t, await b.dev.put(casePath(HTTP, mine.body.case_name), { system_key: "*" }), 403, "moving an own case to every system");
  isErr(t, await b.dev.put(casePath(HTTP, mine.body.case_name), { system_key: a.systemKey }), 403, "moving an own case to another system");
  isErr(t, await b.dev.put(casePath(HTTP, "Block brute force auth"), { max_num: -1 }), 403, "a built-in case");
  isErr(t, await b.dev.put(casePath(HTTP, uniq("none")), { max_num: 1 }), 404, "an unknown case");
  isErr(t, await b.dev.del(casePath(HTTP, uniq("none"))), 404, "an unknown case (delete)");
  t.equal((await b.dev.put(casePath(HTTP, mine.body.case_name), { max_num: 5 })).status, 200, "its own case");
  t.equal((await admin.put(casePath(HTTP, ofA.body.case_name), { max_num: 5 })).status, 200, "admin changes any case");

  // listings: own systems and the platform-wide cases, not other developers' systems
  const seen = (await b.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.map((c: any) => c.case_name);
  t.ok(seen.includes(mine.body.case_name), "b sees its own case");
  t.ok(seen.includes(wide.body.case_name), "b sees the * case");
  t.ok(BUILT_INS.every((n) => seen.includes(n)), "b sees the built-in cases");
  t.notOk(seen.includes(ofA.body.case_name) || seen.includes(forA.body.case_name), "b does not see a's cases");
  const all = (await b.dev.get("/admin/throttlers")).body[0].cases.map((c: any) => c.case_name);
  t.same(all, seen, "the same in the full listing");
  const adminSees = (await admin.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.map((c: any) => c.case_name);
  t.ok([mine, ofA, wide, forA].every((c) => adminSees.includes(c.body.case_name)), "admin sees every case");

  // bulk deletes take only what the caller may change
  const cleared = await b.dev.del("/admin/throttlers");
  t.equal(cleared.status, 200, cleared.text);
  const left = (await admin.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.map((c: any) => c.case_name);
  t.notOk(left.includes(mine.body.case_name), "b's case is gone");
  t.ok([ofA, wide, forA].every((c) => left.includes(c.body.case_name)), "everyone else's stay");
  t.equal((await b.dev.del(`/admin/throttlers/${enc(HTTP)}`)).status, 200);
  t.ok((await admin.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.some((c: any) => c.case_name === wide.body.case_name), "one throttler too");
  for (const c of [ofA, wide, forA]) t.equal((await admin.del(casePath(HTTP, c.body.case_name))).status, 200);
});

// ---- 5. a system's own cases do not hide the built-in ones -------------------------------------------

t.test("a system with exact cases still gets the built-in sign-in limit", async (t) => {
  const sys = await devWithSystem(o, "exact");
  // an exact case on another resource, and a generous one on sign-in evaluated after the built-in
  t.equal((await sys.dev.post(casesPath(HTTP), kase({ system_key: sys.systemKey, resource: "/api/v/1/user/info", max_num: 100 }))).status, 200);
  t.equal((await sys.dev.post(casesPath(HTTP), kase({ system_key: sys.systemKey, resource: "/api/v/1/user/auth", consumer: "?", max_num: 100, priority: 300 }))).status, 200);
  const v = await newUser(sys);
  const got = await statuses(4, () => userAuth(sys, { email: v.email, password: "wrong-password" }));
  t.same(got, [401, 401, 401, 429], "3 per 10 minutes still");
  const r = await userAuth(sys, { email: v.email, password: v.password });
  t.ok(isEnvelope(r.body, 429) && /Block brute force auth/.test(r.body.error.detail), "refused by the built-in case");
});

// ---- 6. sign-ins on an edge, checked by the platform ---------------------------------------------------

t.test("a developer signing in on an edge: good sign-ins cost nothing on the platform; its lockout is reported as throttling", async (t) => {
  const sys = await devWithSystem(o, "edge-signin");
  const edgeName = uniq("gw");
  const rec = await sys.dev.post(`/admin/edges/${sys.systemKey}/${edgeName}`, {});
  t.equal(rec.status, 200, rec.text);
  // the edge's own built-in cases on too: both sides count
  const edge = await server({ defaultThrottlers: true, args: ["--mode", "edge", "--platform-url", o.url, "--system-key", sys.systemKey, "--edge-name", edgeName, "--edge-token", rec.body.token] });
  const onEdge = (password: string) => request(edge.url, "POST", "/admin/auth", { body: { email: sys.email, password } });
  const onPlatform = (password: string) => request(o.url, "POST", "/admin/auth", { body: { email: sys.email, password } });
  // the edge knows its developer once the first sync is through
  t.ok(await waitFor(async () => (await onEdge(sys.password)).status === 200, 20_000), "the developer signs in on the edge");
  t.same(await statuses(8, () => onEdge(sys.password)), Array(8).fill(200), "again and again on the edge");
  t.equal((await onEdge("wrong-password")).status, 401, "a typo on the edge");
  t.same([(await onPlatform(sys.password)).status, (await onPlatform(sys.password)).status], [200, 200], "the console still signs in on the platform");
  // three failures on the platform lock the developer out there; the edge says so, not "unreachable"
  t.same(await statuses(3, () => onPlatform("wrong-password")), [401, 401, 401]);
  const r = await onEdge(sys.password);
  isErr(t, r, 429, "the edge passes the platform's lockout on");
  t.match(r.body.error.detail, /too many failed attempts/);
  t.notMatch(r.body.error.detail, /not reachable/);
  t.ok(Number(r.headers["retry-after"]) > 0, "with Retry-After");
});
