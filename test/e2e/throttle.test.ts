// Throttling against the real binary:
// administration, case validation, matching, limiters, built-in cases, developer bypass, MQTT
// CONNECT and PUBLISH with real MQTT clients, /metrics, and global mode on a real Redis shared
// by two nodes (Redis is started here from the redis-server that .ci/run installs).
import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import http from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import type { IClientOptions, MqttClient } from "mqtt";
import t from "tap";
import { Client, type DevSystem, devWithSystem, freePort, hasCommand, isEnvelope, needs, newUser, type Outpost, mqttFlush, request, startOutpost, uniq, sleep, waitFor, metrics } from "./harness.ts";

const enc = encodeURIComponent;
const HTTP = "HTTP Requests", CONN = "MQTT Connections", PUB = "MQTT Publishes";
const casesPath = (t: string) => `/admin/throttlers/${enc(t)}/cases`;
const casePath = (t: string, c: string) => `/admin/throttlers/${enc(t)}/cases/${enc(c)}`;

const servers: Outpost[] = [];
const clients = new Set<MqttClient>();
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await Promise.all(servers.map((o) => Promise.race([o.stop(), sleep(5000).then(() => o.kill())])));
});
async function server(opts: Parameters<typeof startOutpost>[0] = {}) {
  const o = await startOutpost(opts);
  servers.push(o);
  return o;
}

/** A case body with the usual defaults; fields given replace them. */
const kase = (fields: Record<string, unknown>) => ({ case_name: uniq("case"), system_key: "*", consumer: "*", limiter_type: "frequency", max_num: 1, duration: 60, priority: 10, ...fields });

async function create(dev: Client, throttler: string, body: Record<string, unknown>) {
  const r = await dev.post(casesPath(throttler), body);
  if (r.status !== 200) throw new Error(`case create: ${r.status} ${r.text}`);
  return r.body;
}
async function statuses(n: number, call: () => Promise<{ status: number }>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await call()).status);
  return out;
}

// ---- one server with the built-in cases on, for most of the file -----------------------------

const ADMIN_EMAIL = "root@throttle.example", ADMIN_PASSWORD = "admin-password-1";
const o = await server({ defaultThrottlers: true, args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });

/** The platform admin with a system of its own: cases for every system (`*`, `?`) are the admin's. */
async function adminWithSystem(srv: Outpost, name: string): Promise<DevSystem> {
  const auth = await request(srv.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  if (auth.status !== 200) throw new Error(`admin sign-in: ${auth.text}`);
  const dev = new Client(srv.url, { "ClearBlade-DevToken": auth.body.dev_token });
  const sys = await dev.post("/admin/systemmanagement", { name, description: "test system" });
  if (sys.status !== 200) throw new Error(`system create failed: ${sys.text}`);
  return {
    dev, devToken: auth.body.dev_token, devId: auth.body.user_id, email: ADMIN_EMAIL, password: ADMIN_PASSWORD,
    systemKey: sys.body.appID, systemSecret: sys.body.appSecret,
    app: new Client(srv.url, { "ClearBlade-SystemKey": sys.body.appID, "ClearBlade-SystemSecret": sys.body.appSecret }),
  };
}
const s = await adminWithSystem(o, "throttle-a");
const s2 = await devWithSystem(o, "throttle-b");
const BUILT_INS = ["Block brute force auth", "Block brute force password reset core api", "Block brute force device auth", "Block brute force developer auth", "Block brute force webhook basic auth"];

/** A service anyone authenticated may run: a cheap route for limiter tests. */
async function openService(sys: DevSystem) {
  const name = uniq("svc");
  const r = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code: `function ${name}(req, resp) { resp.success("ok"); }`, parameters: [], systemID: sys.systemKey });
  if (r.status !== 200) throw new Error(r.text);
  const role = await sys.dev.put(`/admin/user/${sys.systemKey}/roles`, { id: "Authenticated", changes: { services: [{ itemInfo: { name }, permissions: 1 }] } });
  if (role.status !== 200) throw new Error(role.text);
  return name;
}
const run = (sys: DevSystem, c: Client, svc: string) => c.post(`/api/v/1/code/${sys.systemKey}/${svc}`, {});

// Every behaviour test uses its own resource so cases of one test cannot catch another's requests.

t.test("administration: three fixed throttlers, listed with every case", async (t) => {
  const all = await s.dev.get("/admin/throttlers");
  t.equal(all.status, 200, all.text);
  t.same(all.body.map((x: any) => x.name), [HTTP, CONN, PUB], "exactly the three throttlers");
  const httpCases = all.body[0].cases;
  const builtIns = httpCases.filter((c: any) => c.built_in);
  t.same(builtIns.map((c: any) => c.case_name).sort(), [...BUILT_INS].sort());
  for (const c of builtIns) t.match(c, { limiter_type: "frequency", max_num: 3, duration: 600, priority: 200 });
  const user = builtIns.filter((c: any) => c.case_name === BUILT_INS[0] || c.case_name === BUILT_INS[1]);
  for (const c of user) t.match(c, { system_key: "?", consumer: "?" });
  t.same(user.map((c: any) => c.resource).sort(), ["/api/v/1/user/auth", "/api/v/1/user/pass"]);

  const one = await s.dev.get(`/admin/throttlers/${enc(HTTP)}`);
  t.equal(one.status, 200);
  t.equal(one.body.name, HTTP);
  t.same(one.body.cases, httpCases, "one throttler with its full case list");
  for (const name of ["MQTT%20Connections", "MQTT%20Publishes"]) t.equal((await s.dev.get(`/admin/throttlers/${name}`)).status, 200, name);

  const unknown = await s.dev.get("/admin/throttlers/Nope");
  t.equal(unknown.status, 404);
  t.ok(isEnvelope(unknown.body, 404));
  // throttlers cannot be created, and the cases path has no GET or PUT
  t.equal((await s.dev.post("/admin/throttlers", { name: "Mine" })).status, 404, "no throttler creation");
  t.equal((await s.dev.post(`/admin/throttlers/Mine/cases`, kase({ resource: "*" }))).status, 404, "cases only inside the three");
  t.equal((await s.dev.get(casesPath(HTTP))).status, 404, "no GET on the cases collection");
  t.equal((await s.dev.put(casesPath(HTTP), {})).status, 404, "no PUT on the cases collection");
});

t.test("administration needs a developer or admin token", async (t) => {
  const u = await newUser(s);
  const dev = uniq("d");
  t.equal((await s.dev.post(`/api/v/2/devices/${s.systemKey}/${dev}`, { type: "x", state: "", active_key: "device-key-1", enabled: true, allow_key_auth: true })).status, 200);
  const da = await s.app.post(`/api/v/2/devices/${s.systemKey}/auth`, { deviceName: dev, activeKey: "device-key-1" });
  const callers: [string, Client][] = [
    ["user", u.client], ["device", new Client(o.url, { "ClearBlade-DeviceToken": da.body.deviceToken })], ["nobody", new Client(o.url)],
    ["key and secret only", s.app],
  ];
  for (const [who, c] of callers) {
    for (const [m, path, body] of [["GET", "/admin/throttlers", undefined], ["POST", casesPath(HTTP), kase({ resource: "*" })], ["DELETE", "/admin/throttlers", undefined]] as const) {
      const r = await c.req(m, path, body);
      t.equal(r.status, 401, `${who}: ${m} ${path}`);
      t.ok(isEnvelope(r.body, 401));
    }
  }
  t.equal((await s2.dev.get("/admin/throttlers")).status, 200, "any developer");
});

t.test("case validation", async (t) => {
  const ok = await s.dev.post(casesPath(HTTP), kase({ case_name: uniq("valid"), resource: "/never/used", max_num: undefined }));
  t.equal(ok.status, 200, ok.text);
  t.equal(ok.body.max_num, 0, "an omitted max_num is 0 (block everything matched)");
  t.equal(ok.body.throttler_name, HTTP, "throttler_name comes from the path");
  const conc = await s.dev.post(casesPath(HTTP), kase({ resource: "/never/used2", limiter_type: "concurrency", duration: undefined }));
  t.equal(conc.status, 200, "concurrency needs no duration");
  const connOk = await s.dev.post(casesPath(CONN), kase({ system_key: "0".repeat(30), resource: "" }));
  t.equal(connOk.status, 200, "an empty resource is accepted for MQTT Connections");

  const bad: [string, string, Record<string, unknown>][] = [
    ["case_name missing", HTTP, kase({ resource: "*", case_name: undefined })],
    ["case_name empty", HTTP, kase({ resource: "*", case_name: " " })],
    ["system_key missing", HTTP, kase({ resource: "*", system_key: undefined })],
    ["consumer missing", HTTP, kase({ resource: "*", consumer: undefined })],
    ["resource missing (HTTP)", HTTP, kase({})],
    ["resource missing (Publishes)", PUB, kase({})],
    ["resource given (Connections)", CONN, kase({ resource: "/x" })],
    ["limiter_type missing", HTTP, kase({ resource: "*", limiter_type: undefined })],
    ["limiter_type unknown", HTTP, kase({ resource: "*", limiter_type: "leaky" })],
    ["priority missing", HTTP, kase({ resource: "*", priority: undefined })],
    ["priority 0", HTTP, kase({ resource: "*", priority: 0 })],
    ["priority negative", HTTP, kase({ resource: "*", priority: -3 })],
    ["priority not whole", HTTP, kase({ resource: "*", priority: 1.5 })],
    ["max_num below -1", HTTP, kase({ resource: "*", max_num: -2 })],
    ["max_num text", HTTP, kase({ resource: "*", max_num: "5" })],
    ["frequency without duration", HTTP, kase({ resource: "*", duration: undefined })],
    ["duration 0", HTTP, kase({ resource: "*", duration: 0 })],
    ["typed consumer, empty value", HTTP, kase({ resource: "*", consumer: "email=" })],
    ["typed consumer, unknown slot", HTTP, kase({ resource: "*", consumer: "user=bob" })],
    ["typed consumer, slot twice", HTTP, kase({ resource: "*", consumer: "email=a,email=b" })],
    ["route pattern with a broken placeholder", HTTP, kase({ resource: "/api/{sys/x" })],
    ["route pattern with * inside", HTTP, kase({ resource: "/api/*/x" })],
    ["unknown field", HTTP, kase({ resource: "*", colour: "red" })],
    ["throttler_name differs", HTTP, kase({ resource: "*", throttler_name: PUB })],
  ];
  for (const [what, throttler, body] of bad) {
    const r = await s.dev.post(casesPath(throttler), body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 400), `${what}: envelope`);
  }
  const notObject = await s.dev.post(casesPath(HTTP), [1]);
  t.equal(notObject.status, 400);
  const dup = await s.dev.post(casesPath(HTTP), kase({ case_name: ok.body.case_name, resource: "*" }));
  t.equal(dup.status, 400, "case_name is unique within its throttler");
  const otherThrottler = await s.dev.post(casesPath(PUB), kase({ case_name: ok.body.case_name, resource: "a/b" }));
  t.equal(otherThrottler.status, 200, "the same name in another throttler is fine");
  const builtInName = await s.dev.post(casesPath(HTTP), kase({ case_name: "Block brute force auth", resource: "*" }));
  t.equal(builtInName.status, 400, "the name of an active built-in case is taken");
});

t.test("partial updates change only the fields sent", async (t) => {
  const c = await create(s.dev, HTTP, kase({ resource: "/never/upd", consumer: "email=a@b.co", max_num: 5 }));
  const u = await s.dev.put(casePath(HTTP, c.case_name), { priority: 7 });
  t.equal(u.status, 200, u.text);
  t.match(u.body, { case_name: c.case_name, priority: 7, max_num: 5, consumer: "email=a@b.co", resource: "/never/upd", duration: 60, limiter_type: "frequency" });
  const listed = (await s.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.find((x: any) => x.case_name === c.case_name);
  t.equal(listed.priority, 7, "the change is stored");
  t.equal((await s.dev.put(casePath(HTTP, c.case_name), { limiter_type: "concurrency" })).body.limiter_type, "concurrency");

  for (const [what, body] of [["rename", { case_name: "other" }], ["bad priority", { priority: 0 }], ["bad consumer", { consumer: "x=y" }], ["unknown field", { nope: 1 }], ["empty resource", { resource: "" }]] as const) {
    const r = await s.dev.put(casePath(HTTP, c.case_name), body);
    t.equal(r.status, 400, `${what}: ${r.text}`);
    t.ok(isEnvelope(r.body, 400));
  }
  const after = (await s.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.find((x: any) => x.case_name === c.case_name);
  t.equal(after.priority, 7, "refused updates change nothing");
  t.equal((await s.dev.put(casePath(HTTP, "no-such-case"), { priority: 1 })).status, 404);
  t.equal((await s.dev.del(casePath(HTTP, "no-such-case"))).status, 404);
  const d = await s.dev.del(casePath(HTTP, c.case_name));
  t.equal(d.status, 200);
  t.notOk((await s.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases.some((x: any) => x.case_name === c.case_name), "deleted");
});

t.test("built-in cases: protected while active, kept by the bulk deletes", async (t) => {
  for (const name of ["Block brute force auth", "Block brute force password reset core api"]) {
    const u = await s.dev.put(casePath(HTTP, name), { max_num: 100 });
    t.equal(u.status, 403, `modify ${name}`);
    t.ok(isEnvelope(u.body, 403));
    t.match(u.body.error.detail, name, "the error names the case");
    const d = await s.dev.del(casePath(HTTP, name));
    t.equal(d.status, 403, `delete ${name}`);
    t.match(d.body.error.detail, name);
  }
  const mine = await create(s.dev, HTTP, kase({ resource: "/never/bulk1" }));
  const minePub = await create(s.dev, PUB, kase({ resource: "never/bulk" }));
  const one = await s.dev.del(`/admin/throttlers/${enc(HTTP)}`);
  t.equal(one.status, 200, one.text);
  let httpCases = (await s.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases;
  t.notOk(httpCases.some((c: any) => c.case_name === mine.case_name), "the custom HTTP cases are gone");
  t.equal(httpCases.filter((c: any) => c.built_in).length, BUILT_INS.length, "the built-in ones stay");
  t.ok((await s.dev.get(`/admin/throttlers/${enc(PUB)}`)).body.cases.some((c: any) => c.case_name === minePub.case_name), "other throttlers are untouched");
  t.equal((await s.dev.get(`/admin/throttlers/${enc(HTTP)}`)).status, 200, "the throttler itself remains");
  const all = await s.dev.del("/admin/throttlers");
  t.equal(all.status, 200);
  const after = (await s.dev.get("/admin/throttlers")).body;
  t.same(after.map((x: any) => x.cases.filter((c: any) => !c.built_in).length), [0, 0, 0], "every custom case is gone");
  httpCases = after[0].cases;
  t.equal(httpCases.length, BUILT_INS.length, "the built-in cases stay");
});

t.test("built-in: 3 sign-ins per 10 minutes per system and consumer; 429 with the envelope", async (t) => {
  const u = await newUser(s);
  const other = await newUser(s);
  const auth = (sys: DevSystem, email: string, password: string) => sys.app.post("/api/v/1/user/auth", { email, password });
  t.same(await statuses(3, () => auth(s, u.email, u.password)), [200, 200, 200], "three sign-ins pass");
  const fourth = await auth(s, u.email, u.password);
  t.equal(fourth.status, 429, "the fourth is throttled");
  t.ok(isEnvelope(fourth.body, 429), "in the error envelope");
  t.match(fourth.body.error.detail, /Block brute force auth/);
  t.ok(Number(fourth.headers["retry-after"]) > 0, "with Retry-After");
  t.equal((await auth(s, u.email, "wrong-password")).status, 429, "wrong passwords count against the same bucket");
  t.equal((await auth(s, other.email, other.password)).status, 200, "another consumer has its own bucket");
  const u2 = await newUser(s2, { email: u.email });
  t.equal((await auth(s2, u.email, u2.password)).status, 200, "the same email in another system has its own bucket");

  // password changes: PUT /api/v/1/user/pass
  const v = await newUser(s);
  const got: number[] = [];
  for (let i = 0; i < 4; i++) {
    const r = await v.client.put("/api/v/1/user/pass", { old_password: i === 0 ? v.password : `new-password-${i}`, new_password: `new-password-${i + 1}` });
    got.push(r.status);
  }
  t.same(got, [200, 200, 200, 429], "three password changes pass, the fourth is throttled");
});

t.test("token bucket: max_num per duration, refilled one token every duration/max_num seconds", async (t) => {
  const svc = await openService(s);
  const u = await newUser(s);
  await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${s.systemKey}/${svc}`, consumer: u.email, max_num: 2, duration: 2 }));
  t.same(await statuses(3, () => run(s, u.client, svc)), [200, 200, 429], "two pass, the third is throttled");
  const r = await run(s, u.client, svc);
  t.equal(r.status, 429);
  t.ok(isEnvelope(r.body, 429));
  t.equal(r.headers["retry-after"], "1", "a token comes back within a second");
  await sleep(1100);
  t.same(await statuses(2, () => run(s, u.client, svc)), [200, 429], "one token came back after duration/max_num = 1 s");
});

t.test("max_num 0 always throttles, -1 never; an allow case with a lower priority number exempts a consumer", async (t) => {
  const svc = await openService(s);
  const path = `/api/v/1/code/${s.systemKey}/${svc}`;
  const [a, b] = [await newUser(s), await newUser(s)];
  const block = await create(s.dev, HTTP, kase({ resource: path, max_num: 0, priority: 50 }));
  t.same(await statuses(2, () => run(s, a.client, svc)), [429, 429], "max_num 0 blocks");
  await create(s.dev, HTTP, kase({ resource: path, consumer: `email=${b.email}`, max_num: -1, priority: 10 }));
  t.same(await statuses(5, () => run(s, b.client, svc)), [200, 200, 200, 200, 200], "the allow case wins for b");
  t.equal((await run(s, a.client, svc)).status, 429, "a is still blocked");
  t.equal((await s.dev.del(casePath(HTTP, block.case_name))).status, 200);
  t.equal((await run(s, a.client, svc)).status, 200, "a case change takes effect at once");
});

t.test("priority: the first matching case by ascending priority decides", async (t) => {
  const svc = await openService(s);
  const path = `/api/v/1/code/${s.systemKey}/${svc}`;
  const u = await newUser(s);
  const loose = await create(s.dev, HTTP, kase({ resource: path, max_num: 100, priority: 5 }));
  await create(s.dev, HTTP, kase({ resource: path, max_num: 0, priority: 6 }));
  t.same(await statuses(3, () => run(s, u.client, svc)), [200, 200, 200], "priority 5 (100 per minute) is evaluated first");
  t.equal((await s.dev.put(casePath(HTTP, loose.case_name), { priority: 7 })).status, 200);
  t.equal((await run(s, u.client, svc)).status, 429, "after the change the blocking case comes first");
});

t.test("system_key: exact, ? (a bucket per system), * (one shared bucket)", async (t) => {
  const res = `/api/v/1/code/{systemKey}/${uniq("sk")}`;
  // the same service name in both systems, so one route pattern covers both
  const name = res.split("/").pop()!;
  for (const sys of [s, s2]) {
    const r = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code: `function ${name}(req, resp) { resp.success(1); }`, parameters: [], systemID: sys.systemKey });
    t.equal(r.status, 200);
    await sys.dev.put(`/admin/user/${sys.systemKey}/roles`, { id: "Authenticated", changes: { services: [{ itemInfo: { name }, permissions: 1 }] } });
  }
  const [u1, u2] = [await newUser(s), await newUser(s2)];
  const go = (sys: DevSystem, u: { client: Client }) => run(sys, u.client, name);

  const exact = await create(s.dev, HTTP, kase({ resource: res, system_key: s.systemKey, max_num: 0 }));
  t.equal((await go(s, u1)).status, 429, "exact: the named system is throttled");
  t.equal((await go(s2, u2)).status, 200, "exact: another system is not");
  await s.dev.del(casePath(HTTP, exact.case_name));

  const each = await create(s.dev, HTTP, kase({ resource: res, system_key: "?", max_num: 1 }));
  t.same([(await go(s, u1)).status, (await go(s2, u2)).status], [200, 200], "?: each system has its own bucket");
  t.same([(await go(s, u1)).status, (await go(s2, u2)).status], [429, 429]);
  await s.dev.del(casePath(HTTP, each.case_name));

  await create(s.dev, HTTP, kase({ resource: res, system_key: "*", max_num: 1 }));
  t.same([(await go(s, u1)).status, (await go(s2, u2)).status], [200, 429], "*: all systems share one bucket");
});

t.test("consumer: legacy exact, ? and *; typed email and ip_address slots; a device name in the email slot", async (t) => {
  const svc = await openService(s);
  const path = `/api/v/1/code/${s.systemKey}/${svc}`;
  const [a, b] = [await newUser(s), await newUser(s)];
  const go = (u: { client: Client }) => run(s, u.client, svc).then((r) => r.status);
  const clear = async (name: string) => { t.equal((await s.dev.del(casePath(HTTP, name))).status, 200); };

  let c = await create(s.dev, HTTP, kase({ resource: path, consumer: a.email, max_num: 0 }));
  t.same([await go(a), await go(b)], [429, 200], "legacy exact email");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: "127.0.0.1", max_num: 0 }));
  t.same([await go(a), await go(b)], [429, 429], "legacy exact IP address");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: "?", max_num: 1 }));
  t.same([await go(a), await go(b), await go(a), await go(b)], [200, 200, 429, 429], "legacy ?: a bucket per consumer");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: "*", max_num: 1 }));
  t.same([await go(a), await go(b)], [200, 429], "legacy *: one pooled bucket");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: `email=${b.email},ip_address=*`, max_num: 0 }));
  t.same([await go(a), await go(b)], [200, 429], "typed email slot");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: "ip_address=10.9.9.9", max_num: 0 }));
  t.same([await go(a), await go(b)], [200, 200], "typed ip_address slot that does not match");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: "email=?,ip_address=127.0.0.1", max_num: 1 }));
  t.same([await go(a), await go(b), await go(a)], [200, 200, 429], "typed ? in the email slot: a bucket per email");
  await clear(c.case_name);

  // devices identify by name in the email slot
  const dev = uniq("dev");
  t.equal((await s.dev.post(`/api/v/2/devices/${s.systemKey}/${dev}`, { type: "x", state: "", active_key: "device-key-1", enabled: true, allow_key_auth: true })).status, 200);
  await s.dev.put(`/admin/user/${s.systemKey}/roles`, { id: "Authenticated", changes: { services: [{ itemInfo: { name: svc }, permissions: 1 }] } });
  const da = await s.app.post(`/api/v/2/devices/${s.systemKey}/auth`, { deviceName: dev, activeKey: "device-key-1" });
  const device = new Client(o.url, { "ClearBlade-DeviceToken": da.body.deviceToken });
  c = await create(s.dev, HTTP, kase({ resource: path, consumer: `email=${dev}`, max_num: 0 }));
  t.same([(await run(s, device, svc)).status, await go(a)], [429, 200], "the device's name fills the email slot");
  await clear(c.case_name);
});

t.test("resource: exact path, * and route patterns with {param} and a trailing *", async (t) => {
  const svc = await openService(s);
  const u = await newUser(s);
  const other = await openService(s);
  const go = (name: string) => run(s, u.client, name).then((r) => r.status);
  const clear = async (name: string) => { await s.dev.del(casePath(HTTP, name)); };
  const sysPart = `{systemKey}`;

  let c = await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${s.systemKey}/${svc}`, consumer: u.email, max_num: 0 }));
  t.same([await go(svc), await go(other)], [429, 200], "exact path");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${sysPart}/${svc}`, consumer: u.email, max_num: 0 }));
  t.same([await go(svc), await go(other)], [429, 200], "a {param} placeholder");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${sysPart}/*`, consumer: u.email, max_num: 0 }));
  t.same([await go(svc), await go(other)], [429, 429], "a trailing catch-all");
  t.equal((await u.client.get("/api/v/1/user/info")).status, 200, "other routes pass");
  await clear(c.case_name);
  c = await create(s.dev, HTTP, kase({ resource: "*", consumer: u.email, max_num: 0 }));
  t.equal((await u.client.get("/api/v/1/user/info")).status, 429, "* matches every resource");
  await clear(c.case_name);
  t.equal((await u.client.get("/api/v/1/user/info")).status, 200);
});

/** Starts a request whose body is still being sent; resolves with its answer once `finish` is called. */
function slowRequest(base: string, path: string, headers: Record<string, string>) {
  const u = new URL(base);
  let finish!: () => void;
  const answered = new Promise<number>((res, rej) => {
    const req = http.request({ host: u.hostname, port: u.port, method: "POST", path, headers: { ...headers, "transfer-encoding": "chunked" }, agent: false }, (r) => {
      r.resume();
      r.on("end", () => res(r.statusCode ?? 0));
    });
    req.on("error", rej);
    req.write("{");
    finish = () => req.end("}");
  });
  return { answered, finish: () => finish() };
}

t.test("concurrency: in-flight requests per key, refused at once above max_num, slots given back", async (t) => {
  const svc = await openService(s);
  const [u, v] = [await newUser(s), await newUser(s)];
  const path = `/api/v/1/code/${s.systemKey}/${svc}`;
  await create(s.dev, HTTP, kase({ resource: path, consumer: "?", limiter_type: "concurrency", max_num: 1, duration: undefined }));
  // the first holds its slot once its headers are evaluated: /metrics counts evaluations (a
  // developer's requests, such as these reads, are not evaluated)
  const evals = async () => Number(/^outpost_throttle_evaluation_seconds_count (\d+)$/m.exec((await metrics(o, s.dev.headers)).text)?.[1] ?? NaN);
  const evaluated = await evals();
  const first = slowRequest(o.url, path, { "ClearBlade-UserToken": u.token });
  t.ok(await waitFor(async () => (await evals()) > evaluated, 15_000), "the first is in flight, waiting for its body");
  const t0 = Date.now();
  t.equal((await run(s, u.client, svc)).status, 429, "a second concurrent request is refused");
  t.ok(Date.now() - t0 < 1000, "at once, no queueing");
  t.equal((await run(s, v.client, svc)).status, 200, "another consumer has its own counter");
  first.finish();
  t.equal(await first.answered, 200, "the first completes");
  // its slot was given back before its answer left
  t.same(await statuses(3, () => run(s, u.client, svc)), [200, 200, 200], "the slot was given back");
});

t.test("developers are never throttled", async (t) => {
  const svc = await openService(s);
  await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${s.systemKey}/${svc}`, max_num: 0 }));
  await create(s.dev, HTTP, kase({ resource: "/admin/throttlers", max_num: 0, priority: 1 }));
  t.same(await statuses(3, () => s.dev.post(`/api/v/1/code/${s.systemKey}/${svc}`, {})), [200, 200, 200], "a developer token passes a blocking case");
  t.equal((await s.dev.get("/admin/throttlers")).status, 200);
  const u = await newUser(s);
  t.equal((await run(s, u.client, svc)).status, 429, "a user does not");
  await s.dev.del("/admin/throttlers");
});

t.test("/metrics: a counter of throttled requests per throttler and a histogram of evaluation time", async (t) => {
  const before = await metrics(o);
  t.equal(before.status, 200);
  t.match(before.headers["content-type"], /text\/plain/);
  const count = (text: string, throttler: string) => Number(new RegExp(`^outpost_throttled_total\\{throttler="${throttler}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
  const evals = (text: string) => Number(/^outpost_throttle_evaluation_seconds_count (\d+)$/m.exec(text)?.[1] ?? -1);
  const svc = await openService(s);
  const u = await newUser(s);
  await create(s.dev, HTTP, kase({ resource: `/api/v/1/code/${s.systemKey}/${svc}`, consumer: u.email, max_num: 0 }));
  await statuses(4, () => run(s, u.client, svc));
  const after = (await metrics(o)).text;
  t.equal(count(after, HTTP) - count(before.text, HTTP), 4, "four more throttled HTTP requests");
  t.ok(evals(after) >= evals(before.text) + 4, "evaluations are timed");
  t.match(after, /# TYPE outpost_throttle_evaluation_seconds histogram/);
  t.match(after, /outpost_throttle_evaluation_seconds_bucket\{le="\+Inf"\} \d+/);
  await s.dev.del("/admin/throttlers");
});

// ---- MQTT ----------------------------------------------------------------------------------------

const tcp = (srv: Outpost) => `mqtt://127.0.0.1:${srv.mqttPort}`;
/** Connects; resolves with the client, or rejects with the CONNACK refusal (error.code). */
function open(url: string, opts: IClientOptions): Promise<MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5_000, clientId: uniq("cid"), protocolVersion: 4, ...opts });
    clients.add(c);
    let settled = false;
    c.on("error", (e) => { if (!settled) { settled = true; c.end(true); rej(e); } });
    c.on("close", () => { if (!settled) { settled = true; rej(new Error("closed before CONNACK")); } });
    c.once("connect", () => { if (!settled) { settled = true; res(c); } });
  });
}
const refusal = (url: string, opts: IClientOptions) => open(url, opts).then((c) => { c.end(true); return "connected" as const; }, (e) => (e as { code?: number }).code ?? String(e));

t.test("MQTT Connections: frequency per consumer; a refused CONNECT gets CONNACK 3 and the connection closes", async (t) => {
  const [a, b] = [await newUser(s2), await newUser(s2)];
  await create(s2.dev, CONN, kase({ system_key: s2.systemKey, consumer: "?", max_num: 2, duration: 60 }));
  const as = (u: { token: string }) => ({ username: u.token, password: s2.systemKey });
  t.equal(await refusal(tcp(o), as(a)), "connected");
  t.equal(await refusal(tcp(o), as(a)), "connected");
  t.equal(await refusal(tcp(o), as(a)), 3, "the third CONNECT within the minute is refused (server unavailable)");
  t.equal(await refusal(tcp(o), as(b)), "connected", "another user has its own bucket");
  t.equal(await refusal(tcp(o), { username: s2.devToken, password: s2.systemKey }), "connected", "developers pass");
  const other = await newUser(s);
  t.equal(await refusal(tcp(o), { username: other.token, password: s.systemKey }), "connected", "another system is not matched");
  await s2.dev.del(`/admin/throttlers/${enc(CONN)}`);
  t.equal(await refusal(tcp(o), as(a)), "connected", "deleting the case lifts the limit at once");
});

t.test("MQTT Connections: concurrency limits simultaneous connections and frees the slot on disconnect", async (t) => {
  const u = await newUser(s2);
  await create(s2.dev, CONN, kase({ system_key: s2.systemKey, consumer: `email=${u.email}`, limiter_type: "concurrency", max_num: 1, duration: undefined }));
  const first = await open(tcp(o), { username: u.token, password: s2.systemKey });
  t.equal(await refusal(tcp(o), { username: u.token, password: s2.systemKey }), 3, "a second simultaneous connection is refused");
  // the broker gives the slot back as it counts the connection gone (/metrics)
  const connections = async () => Number(/^outpost_mqtt_connections (\d+)$/m.exec((await metrics(o)).text)?.[1] ?? NaN);
  const connected = await connections();
  await new Promise<void>((r) => first.end(false, {}, () => r()));
  t.ok(await waitFor(async () => (await connections()) < connected, 15_000), "the broker saw the first go");
  t.equal(await refusal(tcp(o), { username: u.token, password: s2.systemKey }), "connected", "after the first goes, a new one is admitted");
  await s2.dev.del(`/admin/throttlers/${enc(CONN)}`);
});

t.test("MQTT Publishes: a throttled publish is acknowledged but dropped and counted; the connection stays", async (t) => {
  const u = await newUser(s2);
  await s2.dev.put(`/admin/user/${s2.systemKey}/roles`, { id: "Authenticated", changes: { topics: [{ itemInfo: { name: "#" }, permissions: 3 }] } });
  const sub = await open(tcp(o), { username: s2.devToken, password: s2.systemKey });
  const got: string[] = [];
  sub.on("message", (topic, payload) => got.push(`${topic}:${payload}`));
  await new Promise((r, j) => sub.subscribe("#", { qos: 1 }, (e) => (e ? j(e) : r(null))));
  await create(s2.dev, PUB, kase({ system_key: s2.systemKey, resource: "devices/{deviceId}/*", consumer: "?", max_num: 0 }));
  await create(s2.dev, PUB, kase({ system_key: s2.systemKey, resource: "limited", consumer: "?", max_num: 2, duration: 60 }));
  const before = (await metrics(o)).text;
  const pub = await open(tcp(o), { username: u.token, password: s2.systemKey });
  const send = (topic: string, body: string, qos: 0 | 1 = 1) => new Promise<void>((r, j) => pub.publish(topic, body, { qos }, (e) => (e ? j(e) : r())));
  await send("devices/d1/temp", "blocked-1");
  await send("devices/d2/hum/x", "blocked-2");
  await send("other/topic", "free-1");
  for (let i = 1; i <= 4; i++) await send("limited", `lim-${i}`);
  await send("devices/d1/temp", "blocked-qos0", 0);
  // a flush of the publisher: its later free-2 is routed after those before, and the subscriber
  // gets deliveries in routing order, so a dropped publish delivered after all comes before free-2
  await mqttFlush(pub);
  await send("other/topic", "free-2");
  await waitFor(() => got.includes("other/topic:free-2"), 15_000);
  t.ok(pub.connected, "the publisher stays connected (QoS 1 publishes were acknowledged)");
  t.same(got.filter((m) => m.startsWith("other/")), ["other/topic:free-1", "other/topic:free-2"], "unmatched topics are delivered");
  t.notOk(got.some((m) => m.includes("blocked")), "publishes matching the blocking pattern are dropped");
  t.same(got.filter((m) => m.startsWith("limited")), ["limited:lim-1", "limited:lim-2"], "two of four within the limit");
  const after = (await metrics(o)).text;
  const n = (text: string) => Number(/^outpost_throttled_total\{throttler="MQTT Publishes"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  t.equal(n(after) - n(before), 5, "five throttled publishes counted");
  const hist = await s2.dev.get(`/api/v/1/message/${s2.systemKey}?topic=${enc("devices/d1/temp")}&count=10`);
  t.equal(hist.status, 200);
  t.equal((Array.isArray(hist.body) ? hist.body : []).length, 0, "dropped publishes are not in the history");
  await s2.dev.del(`/admin/throttlers/${enc(PUB)}`);
});

// ---- settings --------------------------------------------------------------------------------------

t.test("EnableDefaultThrottlers false or DevelopmentMode true: no built-in cases", async (t) => {
  for (const args of [["--enable-default-throttlers", "false"], ["--development-mode", "true"]]) {
    const x = await server({ defaultThrottlers: true, args });
    const d = await devWithSystem(x);
    const listed = (await d.dev.get(`/admin/throttlers/${enc(HTTP)}`)).body.cases;
    t.same(listed, [], `${args.join(" ")}: none listed`);
    const u = await newUser(d);
    t.same(await statuses(5, () => d.app.post("/api/v/1/user/auth", { email: u.email, password: u.password })), [200, 200, 200, 200, 200], `${args.join(" ")}: sign-ins are not limited`);
    const mine = await d.dev.post(casesPath(HTTP), kase({ case_name: "Block brute force auth", system_key: d.systemKey, resource: "/x" }));
    t.equal(mine.status, 200, "the built-in names are free");
    t.equal((await d.dev.del(casePath(HTTP, "Block brute force auth"))).status, 200, "and such a case can be deleted");
    await x.stop();
  }
});

// ---- global mode: two nodes, one Redis ---------------------------------------------------------------

interface Redis { port: number; stop(): Promise<void>; start(): Promise<void> }
/** A private redis-server on a free port (no persistence), stoppable and restartable on the same port. */
async function redis(): Promise<Redis> {
  const port = await freePort();
  let proc: ChildProcess | null = null;
  const up = async () => {
    proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const ok = await new Promise<boolean>((r) => {
        const sock = net.connect(port, "127.0.0.1");
        sock.once("connect", () => { sock.end(); r(true); });
        sock.once("error", () => r(false));
      });
      if (ok) return;
      if (Date.now() > deadline) throw new Error("redis-server did not start (is it installed?)");
      await sleep(50);
    }
  };
  await up();
  return {
    port,
    stop: async () => { const p = proc; proc = null; if (p && p.exitCode === null) { p.kill("SIGKILL"); await new Promise((r) => p.once("exit", r)); } },
    start: up,
  };
}

t.test("global mode: two nodes share one fixed window through Redis, fall back to local buckets without it", await needs("redis-server", hasCommand("redis-server")), async (t) => {
  const rd = await redis();
  t.teardown(() => rd.stop());
  const shared = mkdtempSync(join(tmpdir(), "outpost-cluster-"));
  const args = ["--db", `file:${join(shared, "outpost.db")}`, "--redis-url", `redis://127.0.0.1:${rd.port}`, "--enable-global-throttlers", "true"];
  // at info, the log says when a node's link to Redis goes and comes back
  const a = await server({ args, logLevel: "info" });
  const b = await server({ args, logLevel: "info" });
  const sys = await devWithSystem(a, "cluster");
  const svc = await openService(sys);
  const u = await newUser(sys);
  const call = (node: Outpost) => request(node.url, "POST", `/api/v/1/code/${sys.systemKey}/${svc}`, { headers: { "ClearBlade-UserToken": u.token }, body: {} }).then((r) => r.status);
  t.equal(await call(b), 200, "the second node serves the same system (shared database)");

  // a case created on node a reaches node b at once (Redis announces it)
  const c = await create(sys.dev, HTTP, kase({ system_key: sys.systemKey, resource: `/api/v/1/code/{systemKey}/${svc}`, consumer: "?", max_num: 4, duration: 4 }));
  const t0 = Date.now();
  let seen = false;
  while (!seen && Date.now() - t0 < 3000) {
    seen = (await request(b.url, "GET", `/admin/throttlers/${enc(HTTP)}`, { headers: { "ClearBlade-DevToken": sys.devToken } })).body.cases.some((x: any) => x.case_name === c.case_name);
    if (!seen) await sleep(20);
  }
  t.ok(seen, "node b lists the new case");
  // one window of 4 across both nodes (a per-node bucket would allow 8)
  const got = [await call(a), await call(b), await call(a), await call(b), await call(a), await call(b)];
  t.same(got, [200, 200, 200, 200, 429, 429], "the fifth request on either node is refused");
  // the window closes after `duration`, then the count starts again
  await sleep(4200);
  t.same([await call(a), await call(b)], [200, 200], "a new window after the old one ended");

  // Redis goes away: each node falls back to its own token bucket (up to 4 each)
  const logs = (n: Outpost, from: number) => n.logs().slice(from);
  let from = [a.logs().length, b.logs().length];
  await rd.stop();
  t.ok(await waitFor(() => [a, b].every((n, i) => logs(n, from[i]!).includes("shared store unavailable")), 15_000), "both nodes saw Redis go");
  const alone = [await call(a), await call(a), await call(a), await call(a), await call(a)];
  t.same(alone, [200, 200, 200, 200, 429], "node a limits on its own");
  t.equal(await call(b), 200, "node b has its own bucket while Redis is down");
  // Redis comes back: the shared window is used again
  from = [a.logs().length, b.logs().length];
  await rd.start();
  t.ok(await waitFor(() => [a, b].every((n, i) => logs(n, from[i]!).includes("shared store connected")), 15_000), "both nodes are back on Redis");
  const back = [await call(a), await call(b), await call(a), await call(b), await call(a)];
  t.same(back, [200, 200, 200, 200, 429], "the shared window again (fresh after the restart)");

  // a case change on node b takes effect on node a immediately
  t.equal((await request(b.url, "PUT", casePath(HTTP, c.case_name), { headers: { "ClearBlade-DevToken": sys.devToken }, body: { max_num: -1 } })).status, 200);
  let lifted = false;
  const t1 = Date.now();
  while (!lifted && Date.now() - t1 < 3000) { lifted = (await call(a)) === 200; if (!lifted) await sleep(20); }
  t.ok(lifted, `node a follows node b's change (${Date.now() - t1} ms)`);
});
