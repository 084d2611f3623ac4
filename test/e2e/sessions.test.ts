
import mqtt from "mqtt";
import type { MqttClient } from "mqtt";
import t from "tap";
import { Client, type DevSystem, devWithSystem, hasCommand, isErr, must, needs, newUser, ok200, qs, request, startOutpost, startTwoNodes, uniq, waitFor } from "./harness.ts";

const o = await startOutpost();
const clients = new Set<MqttClient>();
const cleanups: (() => Promise<void> | void)[] = [];
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await o.stop();
  for (const c of cleanups.reverse()) await c();
});

const sys = await devWithSystem(o, "sessions");
const other = await devWithSystem(o, "sessions-other");
const base = (s: DevSystem, kind: "user" | "device") => `/admin/v/4/session/${s.systemKey}/${kind}`;

/** An MQTT client connected with `token`; `closed` settles when the broker closes it. */
function connect(port: number, token: string, systemKey: string): Promise<{ c: MqttClient; closed: Promise<void>; isClosed(): boolean }> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: token, password: systemKey, clientId: uniq("s"), reconnectPeriod: 0, connectTimeout: 10_000 });
    clients.add(c);
    let closedNow = false;
    const closed = new Promise<void>((r) => c.once("close", () => { closedNow = true; r(); }));
    c.once("connect", () => res({ c, closed, isClosed: () => closedNow }));
    c.once("error", (e) => { c.end(true); rej(e); });
  });
}

/** A user with two sessions (its sign-up's and a sign-in's). */
async function userWithTwoSessions(s: DevSystem) {
  const u = await newUser(s);
  const again = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user sign-in");
  return { ...u, token2: again.user_token as string };
}

/** A user who may publish and subscribe on still/#. */
async function userOnStill(s: DevSystem) {
  const u = await newUser(s);
  const role = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("still"), topics: [{ itemInfo: { name: "still/#" }, permissions: 3 }] }), "role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "role add");
  return u;
}

async function deviceWithToken(s: DevSystem, name = uniq("dev")) {
  await must(s.dev.post(`/admin/devices/${s.systemKey}/${name}`, { type: "sensor", state: "new", active_key: `${name}-key`, enabled: true, allow_key_auth: true }), "create device");
  const r = await must(request(o.url, "POST", `/api/v/2/devices/${s.systemKey}/auth`, { body: { deviceName: name, activeKey: `${name}-key` } }), "device auth");
  return { name, token: r.deviceToken as string };
}

t.test("user sessions: listed with user_id and issued, filtered, counted", async (t) => {
  const before = Math.floor(Date.now() / 1000) - 1;
  const a = await userWithTwoSessions(sys);
  const b = await newUser(sys);
  const all = await sys.dev.get(base(sys, "user"));
  ok200(t, all, "list");
  t.ok(Array.isArray(all.body), "an array");
  const ofA = all.body.filter((r: any) => r.user_id === a.userId);
  t.equal(ofA.length, 2, "two sessions of the user signed in twice");
  t.ok(ofA.every((r: any) => typeof r.issued === "number" && r.issued >= before && r.issued <= Date.now() / 1000 + 1), "issued: unix seconds of now");
  t.same(Object.keys(ofA[0]).sort(), ["issued", "user_id"], "ClearBlade's fields only");
  t.equal(all.body.filter((r: any) => r.user_id === b.userId).length, 1, "the other user's one session");
  const filtered = await sys.dev.get(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: a.userId }] }]] })}`);
  ok200(t, filtered, "filtered list");
  t.equal(filtered.body.length, 2, "FILTERS on user_id");
  const bare = await sys.dev.get(`${base(sys, "user")}?query=${qs([[{ EQ: [{ user_id: b.userId }] }]])}`);
  t.equal(bare.body.length, 1, "a bare FILTERS array too");
  const count = await sys.dev.get(`${base(sys, "user")}/count?query=${qs({ FILTERS: [[{ EQ: [{ user_id: a.userId }] }]] })}`);
  ok200(t, count, "count");
  t.same(count.body, { count: 2 }, "{count}");
  const total = await must(sys.dev.get(`${base(sys, "user")}/count`), "count all");
  t.equal(total.count, all.body.length, "count without a query: every session");
  const recent = await must(sys.dev.get(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ GTE: [{ issued: before }] }]] })}`), "issued filter");
  t.ok(recent.length >= 3, "FILTERS on issued");
  const none = await must(other.dev.get(base(other, "user")), "the other system's list");
  t.notOk(none.some((r: any) => r.user_id === a.userId || r.user_id === b.userId), "another system's sessions are not listed there");
});

t.test("revoking a user's sessions: its tokens stop at once, its MQTT client is closed, others go on", async (t) => {
  const a = await userWithTwoSessions(sys);
  const b = await userOnStill(sys);
  const ma = await connect(o.mqttPort, a.token, sys.systemKey);
  const mb = await connect(o.mqttPort, b.token, sys.systemKey);
  ok200(t, await a.client.get("/api/v/1/user/info"), "positive control: the user's token works before");
  const r = await sys.dev.del(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: a.userId }] }]] })}`);
  ok200(t, r, "revoke");
  t.same(r.body, { count: 2 }, "both sessions revoked");
  for (const tok of [a.token, a.token2]) {
    const info = await new Client(o.url, { "ClearBlade-UserToken": tok }).get("/api/v/1/user/info");
    isErr(t, info, 400, 204, "a revoked token");
  }
  t.ok(await waitFor(() => ma.isClosed(), 5_000), "the revoked user's MQTT client is closed");
  // the other user's client still works: it gets a message of its own after the close
  const topic = uniq("still/");
  await mb.c.subscribeAsync(topic, { qos: 1 });
  let got = false;
  mb.c.on("message", (tp) => { if (tp === topic) got = true; });
  await mb.c.publishAsync(topic, "x", { qos: 1 });
  t.ok(await waitFor(() => got, 5_000), "the other user's client still publishes and receives");
  t.notOk(mb.isClosed(), "and was not closed");
  ok200(t, await b.client.get("/api/v/1/user/info"), "the other user's token still works");
  const left = await must(sys.dev.get(`${base(sys, "user")}/count?query=${qs({ FILTERS: [[{ EQ: [{ user_id: a.userId }] }]] })}`), "count after");
  t.same(left, { count: 0 }, "no session left for the user");
  const again = await sys.dev.del(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ EQ: [{ user_id: a.userId }] }]] })}`);
  t.same(again.body, { count: 0 }, "revoking again revokes nothing");
  mb.c.end(true);
});

t.test("device sessions: device_key '<systemKey> :: <name>', revoke closes its MQTT client", async (t) => {
  const d1 = await deviceWithToken(sys);
  const d2 = await deviceWithToken(sys);
  const list = await sys.dev.get(base(sys, "device"));
  ok200(t, list, "list");
  const keys = list.body.map((r: any) => r.device_key);
  t.ok(keys.includes(`${sys.systemKey} :: ${d1.name}`) && keys.includes(`${sys.systemKey} :: ${d2.name}`), "both devices' sessions, by device_key");
  t.ok(list.body.every((r: any) => typeof r.issued === "number" && Object.keys(r).sort().join() === "device_key,issued"), "{device_key, issued}");
  const q = qs({ FILTERS: [[{ EQ: [{ device_key: `${sys.systemKey} :: ${d1.name}` }] }]] });
  t.same(await must(sys.dev.get(`${base(sys, "device")}/count?query=${q}`), "count"), { count: 1 }, "FILTERS on device_key");
  const m1 = await connect(o.mqttPort, d1.token, sys.systemKey);
  const m2 = await connect(o.mqttPort, d2.token, sys.systemKey);
  const r = await sys.dev.del(`${base(sys, "device")}?query=${q}`);
  ok200(t, r, "revoke");
  t.same(r.body, { count: 1 }, "one session revoked");
  t.ok(await waitFor(() => m1.isClosed(), 5_000), "its MQTT client is closed");
  isErr(t, await new Client(o.url, { "ClearBlade-DeviceToken": d1.token }).get(`/api/v/2/devices/${sys.systemKey}/${d1.name}`), 400, 204, "its token");
  ok200(t, await new Client(o.url, { "ClearBlade-DeviceToken": d2.token }).get(`/api/v/2/devices/${sys.systemKey}/${d2.name}`), "the other device's token still works");
  t.notOk(m2.isClosed(), "the other device's client is still connected");
  const reconnect = await connect(o.mqttPort, d1.token, sys.systemKey).then(() => "connected", (e: Error) => e.message);
  t.not(reconnect, "connected", "the revoked token cannot connect again");
  // query=[] revokes every device session of the system, on purpose
  const all = await sys.dev.del(`${base(sys, "device")}?query=${qs([])}`);
  ok200(t, all, "revoke all");
  t.ok(all.body.count >= 1, "every remaining device session");
  t.ok(await waitFor(() => m2.isClosed(), 5_000), "the other device's client closed too");
  t.same(await must(sys.dev.get(`${base(sys, "device")}/count`), "count"), { count: 0 }, "none left");
});

t.test("failure paths", async (t) => {
  const u = await newUser(sys);
  isErr(t, await sys.dev.get(`${base(sys, "user")}?query=${encodeURIComponent("{not json")}`), 400, "query not JSON");
  isErr(t, await sys.dev.get(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ EQ: [{ password_hash: "x" }] }]] })}`), 400, "a column sessions do not have");
  isErr(t, await sys.dev.get(`${base(sys, "device")}/count?query=${qs({ FILTERS: [[{ EQ: [{ user_id: "x" }] }]] })}`), 400, "user_id on device sessions");
  isErr(t, await sys.dev.del(base(sys, "user")), 400, "DELETE without a query");
  t.same(await must(sys.dev.get(`${base(sys, "user")}/count?query=${qs({ FILTERS: [[{ EQ: [{ user_id: u.userId }] }]] })}`), "count"), { count: 1 }, "the refused DELETE revoked nothing");
  isErr(t, await sys.dev.del(`${base(sys, "user")}?query=${qs({ FILTERS: [[{ EQ: [{ nope: 1 }] }]] })}`), 400, "DELETE with a bad query");
  isErr(t, await other.dev.get(base(sys, "user")), 401, "another developer's system");
  isErr(t, await other.dev.del(`${base(sys, "user")}?query=${qs([])}`), 401, "revoking in another developer's system");
  isErr(t, await u.client.get(base(sys, "user")), 401, "a user token");
  isErr(t, await u.client.del(`${base(sys, "user")}?query=${qs([])}`), 401, "a user token revoking");
  isErr(t, await request(o.url, "GET", base(sys, "user")), 401, "no token");
  isErr(t, await sys.dev.get(`/admin/v/4/session/${"f".repeat(24)}/user`), 404, "a system that does not exist");
  isErr(t, await sys.dev.get(`/admin/v/4/session/${sys.systemKey}/edge`), 404, "a kind of session that does not exist");
  ok200(t, await u.client.get("/api/v/1/user/info"), "the user's session survived every refused call");
});

const haveRedis = hasCommand("redis-server");
t.test("cluster: revoking on one node closes the MQTT client on the other and refuses the token there", await needs("redis-server", haveRedis), async (t) => {
  const { nodes: [A, B], redisUp } = await startTwoNodes("sessions", cleanups);
  t.ok(redisUp, "redis-server up");
  const s = await devWithSystem({ url: A.url }, "sessions-cluster");
  const u = await newUser(s);
  const onB = new Client(B.url, { "ClearBlade-UserToken": u.token });
  // B caches the user's principal: without the shared signal it would accept the token for seconds
  ok200(t, await onB.get("/api/v/1/user/info"), "positive control: the token works on B");
  const m = await connect(B.mqttPort, u.token, s.systemKey);
  const r = await s.dev.del(`/admin/v/4/session/${s.systemKey}/user?query=${qs({ FILTERS: [[{ EQ: [{ user_id: u.userId }] }]] })}`);
  ok200(t, r, "revoked through A");
  t.ok(await waitFor(() => m.isClosed(), 5_000), "the client connected to B is closed");
  isErr(t, await onB.get("/api/v/1/user/info"), 400, 204, "B refuses the token at once");
});
