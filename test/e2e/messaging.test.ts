// Messaging over REST, black-box, against real MQTT clients: publishing through
// POST /api/v/1/message/{sk}/publish, message history (GET and DELETE /api/v/1/message/{sk} with
// topic, count, last, start and stop), per-topic history storage settings and the server-wide
// --history-max-rows flag, the topic listings of /api/v/4 with the query object, and
// currentTopics.
import mqtt from "mqtt";
import type { IClientOptions, IPublishPacket, MqttClient } from "mqtt";
import t, { type Test } from "tap";
import { Client, type DevSystem, type Outpost, devWithSystem, newUser, startOutpost, uniq, sleep, waitFor, isErr, ok200 } from "./harness.ts";

// ---- servers ----------------------------------------------------------------------------------

const o = await startOutpost();
const HISTORY_CAP = 5;
const o2 = await startOutpost({ args: ["--history-max-rows", String(HISTORY_CAP)] });

const clients = new Set<MqttClient>();
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await Promise.all([o.stop(), o2.stop()]);
});

const s = await devWithSystem(o, "msg-a");
const s2 = await devWithSystem(o, "msg-b");

// ---- helpers ----------------------------------------------------------------------------------

const q = (v: unknown) => encodeURIComponent(typeof v === "string" ? v : JSON.stringify(v));

function within<T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> {
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no answer from the broker within ${ms} ms: ${what}`)), ms);
    p.then((v) => { clearTimeout(timer); res(v); }, (e) => { clearTimeout(timer); rej(e); });
  });
}

/** An MQTT client of a system (developer token unless given). */
function mq(srv: Outpost, sys: DevSystem, token = sys.devToken, opts: IClientOptions = {}): Promise<MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${srv.mqttPort}`, { reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4, clientId: uniq("m"), username: token, password: sys.systemKey, ...opts });
    clients.add(c);
    let settled = false;
    c.on("error", (e) => { if (!settled) { settled = true; rej(e); } });
    c.once("connect", () => { settled = true; res(c); });
  });
}

interface Got { topic: string; text: string; qos: number }
function collect(c: MqttClient): Got[] {
  const got: Got[] = [];
  c.on("message", (topic, payload, packet: IPublishPacket) => got.push({ topic, text: payload.toString("utf8"), qos: packet.qos }));
  return got;
}

async function sub(c: MqttClient, topic: string | string[], qos: 0 | 1 | 2 = 1) {
  const g = await within(c.subscribeAsync(topic, { qos }), `SUBSCRIBE ${topic}`);
  if (g.some((x) => x.qos === 128)) throw new Error(`subscription to ${topic} refused`);
}

function end(c: MqttClient): Promise<void> {
  clients.delete(c);
  return within(new Promise<void>((r) => c.end(false, {}, () => r())), "DISCONNECT", 3_000).catch(() => { c.end(true); });
}

const publishPath = (sys: DevSystem) => `/api/v/1/message/${sys.systemKey}/publish`;
const historyPath = (sys: DevSystem, params: Record<string, string | number>) =>
  `/api/v/1/message/${sys.systemKey}?${Object.entries(params).map(([k, v]) => `${k}=${q(String(v))}`).join("&")}`;

/** Publishes through REST as the developer; throws unless 200. */
async function restPublish(sys: DevSystem, topic: string, body: string, qos = 0, as: Client = sys.dev) {
  const r = await as.post(publishPath(sys), { topic, body, qos });
  if (r.status !== 200) throw new Error(`publish ${topic}: ${r.status} ${r.text}`);
}

/** History rows (GET), failing the test on a non-200. */
async function history(t: Test, sys: DevSystem, params: Record<string, string | number>, as: Client = sys.dev): Promise<any[]> {
  const r = await as.get(historyPath(sys, params));
  ok200(t, r, `GET history ${JSON.stringify(params)}`);
  t.ok(Array.isArray(r.body), "history is an array");
  return Array.isArray(r.body) ? r.body : [];
}
/** History rows without asserting (for polling). */
async function peek(sys: DevSystem, params: Record<string, string | number>): Promise<any[]> {
  const r = await sys.dev.get(historyPath(sys, params));
  return r.status === 200 && Array.isArray(r.body) ? r.body : [];
}
const payloads = (rows: any[]) => rows.map((r) => r.payload);

/** Waits until the clock is at least `sec` + 30 ms (epoch seconds). */
async function atSecond(sec: number) {
  const wait = sec * 1000 + 30 - Date.now();
  if (wait > 0) await sleep(wait);
}

/** Publishes `names` (as payloads, in order) within one wall-clock second, starting at a fresh
 *  second no earlier than `notBefore`; returns that second. */
async function group(sys: DevSystem, topic: string, names: string[], notBefore = 0): Promise<number> {
  await atSecond(Math.max(notBefore, Math.floor(Date.now() / 1000) + 1));
  const sec = Math.floor(Date.now() / 1000);
  for (const n of names) await restPublish(sys, topic, n);
  if (Math.floor(Date.now() / 1000) !== sec) throw new Error("publishing a group took over a second");
  return sec;
}

async function makeRole(sys: DevSystem, perms: Record<string, unknown>) {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name: uniq("role"), ...perms });
  if (r.status !== 200) throw new Error(`role: ${r.status} ${r.text}`);
  return r.body.role_id as string;
}

async function userWith(sys: DevSystem, perms?: Record<string, unknown>) {
  const u = await newUser(sys);
  if (perms) {
    const role = await makeRole(sys, perms);
    const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } });
    if (r.status !== 200) throw new Error(`role add: ${r.status} ${r.text}`);
  }
  return u;
}

// ---- REST publish -----------------------------------------------------------------------------

t.test("POST publish: body or payload, qos, reaches MQTT subscribers of the system only", async (t) => {
  const watch = await mq(o, s);
  const got = collect(watch);
  await sub(watch, "rest/#", 2);
  const other = await mq(o, s2);
  const otherGot = collect(other);
  await sub(other, "#", 2);

  let r = await s.dev.post(publishPath(s), { topic: "rest/a", body: "hello body", qos: 1 });
  ok200(t, r, "publish with body and qos 1");
  t.ok(r.body !== null && typeof r.body === "object", "answers with a JSON body");
  t.ok(await waitFor(() => got.some((g) => g.topic === "rest/a" && g.text === "hello body")), "the subscriber got it");
  t.equal(got.find((g) => g.topic === "rest/a")?.qos, 1, "delivered with QoS 1");

  r = await s.dev.post(publishPath(s), { topic: "rest/b", payload: "hello payload" });
  ok200(t, r, "publish with payload, no qos");
  t.ok(await waitFor(() => got.some((g) => g.topic === "rest/b" && g.text === "hello payload")), "payload form delivered");
  t.equal(got.find((g) => g.topic === "rest/b")?.qos, 0, "qos defaults to 0");

  r = await s.dev.post(publishPath(s), { topic: "rest/c", payload: { a: 1, b: [true, "x"] }, qos: 2 });
  ok200(t, r, "publish with an object payload");
  t.ok(await waitFor(() => got.some((g) => g.topic === "rest/c")), "object payload delivered");
  const c = got.find((g) => g.topic === "rest/c");
  t.same(c ? JSON.parse(c.text) : null, { a: 1, b: [true, "x"] }, "as its JSON text");
  t.equal(c?.qos, 2, "delivered with QoS 2");

  r = await s.dev.post(publishPath(s), { topic: "rest/d", body: "ünïcode ✓" });
  ok200(t, r, "unicode body");
  t.ok(await waitFor(() => got.some((g) => g.topic === "rest/d" && g.text === "ünïcode ✓")), "unicode payload intact");

  // a marker in s2 proves the other system's subscriber is caught up
  await s2.dev.post(publishPath(s2), { topic: "rest/marker", body: "m" });
  t.ok(await waitFor(() => otherGot.some((g) => g.topic === "rest/marker")), "other system's marker arrived");
  t.same(otherGot.map((g) => g.topic), ["rest/marker"], "the other system saw none of this system's publishes");
  await end(watch);
  await end(other);
});

t.test("POST publish: permissions", async (t) => {
  const watch = await mq(o, s);
  const got = collect(watch);
  await sub(watch, "#", 1);

  const none = await userWith(s);
  let r = await none.client.post(publishPath(s), { topic: "perm/x", body: "no-grant" });
  isErr(t, r, 401, "user without a topic grant");
  const deviceName = uniq("dev");
  const dev = await s.dev.post(`/api/v/2/devices/${s.systemKey}/${deviceName}`, { active_key: "secret-key-1" });
  t.equal(dev.status, 200, "device created");
  const dauth = await s.app.post(`/api/v/2/devices/${s.systemKey}/auth`, { deviceName, activeKey: "secret-key-1" });
  t.equal(dauth.status, 200, "device auth");
  r = await s.app.with({ "ClearBlade-UserToken": dauth.body.deviceToken }).post(publishPath(s), { topic: "perm/x", body: "device-no-grant" });
  isErr(t, r, 401, "device without a topic grant");

  const writer = await userWith(s, { topics: [{ itemInfo: { name: "perm/#" }, permissions: 2 }] });
  r = await writer.client.post(publishPath(s), { topic: "perm/ok", body: "granted" });
  ok200(t, r, "user with a create grant on perm/#");
  r = await writer.client.post(publishPath(s), { topic: "other/x", body: "outside-grant" });
  isErr(t, r, 401, "same user, topic outside the grant");
  const reader = await userWith(s, { topics: [{ itemInfo: { name: "perm/#" }, permissions: 1 }] });
  r = await reader.client.post(publishPath(s), { topic: "perm/ok", body: "read-only" });
  isErr(t, r, 401, "read grant only");

  const foreign = await newUser(s2);
  r = await foreign.client.post(publishPath(s), { topic: "perm/x", body: "foreign" });
  isErr(t, r, 401, "user of another system");
  r = await s2.dev.post(publishPath(s), { topic: "perm/x", body: "foreign-dev" });
  isErr(t, r, 401, "developer of another system");
  r = await new Client(o.url).post(publishPath(s), { topic: "perm/x", body: "anonymous" });
  isErr(t, r, 401, "no token");

  t.ok(await waitFor(() => got.some((g) => g.text === "granted")), "the granted publish was delivered");
  await restPublish(s, "perm/marker", "marker");
  t.ok(await waitFor(() => got.some((g) => g.text === "marker")));
  t.same(got.map((g) => g.text).filter((x) => x !== "granted" && x !== "marker"), [], "no refused publish was delivered");
  const h = await history(t, s, { topic: "perm/x", count: 0 });
  t.same(h, [], "refused publishes are not in history");
  await end(watch);
});

t.test("POST publish: bad bodies are 400 envelopes", async (t) => {
  const watch = await mq(o, s);
  const got = collect(watch);
  await sub(watch, "#", 1);
  const cases: [string, unknown][] = [
    ["missing topic", { body: "x" }],
    ["empty topic", { topic: "", body: "x" }],
    ["topic not a string", { topic: 5, body: "x" }],
    ["wildcard + in topic", { topic: "bad/+", body: "x" }],
    ["wildcard # in topic", { topic: "bad/#", body: "x" }],
    ["qos 3", { topic: "bad/q", body: "x", qos: 3 }],
    ["qos -1", { topic: "bad/q", body: "x", qos: -1 }],
    ["unknown field", { topic: "bad/u", body: "x", extra: 1 }],
    ["an array body", [{ topic: "bad/a", body: "x" }]],
  ];
  for (const [what, body] of cases) isErr(t, await s.dev.post(publishPath(s), body), 400, what);
  isErr(t, await s.dev.post(publishPath(s), "{not json"), 400, "malformed JSON");
  await restPublish(s, "bad/marker", "marker");
  t.ok(await waitFor(() => got.some((g) => g.text === "marker")));
  t.same(got.filter((g) => g.text !== "marker"), [], "nothing was published by a bad request");
  await end(watch);
});

// ---- history ----------------------------------------------------------------------------------

t.test("GET history: count, last, start, stop, newest first", async (t) => {
  const topic = `h/${uniq("main")}`;
  const tA = await group(s, topic, ["a1", "a2", "a3"]);
  const tB = await group(s, topic, ["b1", "b2", "b3"], tA + 2);
  const tC = await group(s, topic, ["c1", "c2", "c3"], tB + 2);
  const all = ["c3", "c2", "c1", "b3", "b2", "b1", "a3", "a2", "a1"];

  const rows = await history(t, s, { topic, count: 0 });
  t.same(payloads(rows), all, "count 0: everything, newest first");
  t.same(rows.map((r) => r.time), [tC, tC, tC, tB, tB, tB, tA, tA, tA], "time is the publish second (unix seconds)");
  t.same(payloads(await history(t, s, { topic, count: 2 })), ["c3", "c2"], "count 2: the newest two");
  t.same(payloads(await history(t, s, { topic, count: 1 })), ["c3"], "count 1: the newest");
  t.same(payloads(await history(t, s, { topic, count: 100 })), all, "count above the total: everything");
  t.same(payloads(await history(t, s, { topic, count: "5" })), all.slice(0, 5), "count as a string (as the wire sends it)");

  // last: read back from this point in time
  t.same(payloads(await history(t, s, { topic, count: 0, last: tB + 1 })), ["b3", "b2", "b1", "a3", "a2", "a1"], "last between B and C: B and A");
  t.same(payloads(await history(t, s, { topic, count: 2, last: tB + 1 })), ["b3", "b2"], "last with count: the newest before it");
  t.same(payloads(await history(t, s, { topic, count: 0, last: tA - 1 })), [], "last before everything: none");
  t.same(payloads(await history(t, s, { topic, count: 0, last: tC + 60 })), all, "last in the future: everything");

  // start / stop window
  t.same(payloads(await history(t, s, { topic, count: 0, start: tB - 1 })), all.slice(0, 6), "start before B: C and B");
  t.same(payloads(await history(t, s, { topic, count: 0, start: tB })), all.slice(0, 6), "start is inclusive: start = B's second includes B");
  t.same(payloads(await history(t, s, { topic, count: 0, stop: tB + 1 })), all.slice(3), "stop after B: B and A");
  t.same(payloads(await history(t, s, { topic, count: 0, start: tB - 1, stop: tB + 1 })), ["b3", "b2", "b1"], "window around B: B only");
  t.same(payloads(await history(t, s, { topic, count: 2, start: tA - 1, stop: tB + 1 })), ["b3", "b2"], "window with count: the newest in the window");
  t.same(payloads(await history(t, s, { topic, count: 0, start: tC + 1 })), [], "start after everything: none");
  t.same(payloads(await history(t, s, { topic, count: 0, start: tC, stop: tA })), [], "start after stop: none");
  t.same(payloads(await history(t, s, { topic, count: 0, last: tC - 1, start: tB - 1 })), ["b3", "b2", "b1"], "last and start together");
  t.same(payloads(await history(t, s, { topic, count: 0, last: -1, start: -1, stop: -1 })), all, "-1 means unused (as the JS SDK sends)");
  t.same(payloads(await history(t, s, { topic, count: 10, last: 0 })), all.slice(0, 10), "last=0 means now (the Node SDK's getMessageHistory(topic, 0, count))");
  t.same(payloads(await history(t, s, { topic, count: 0, last: 0, start: 0, stop: 0 })), all, "0 leaves any bound out");
  // second-granular bounds: a row's own `time` selects it
  t.same(payloads(await history(t, s, { topic, count: 0, stop: tB })), all.slice(3), "stop is inclusive: stop = B's second includes B");
  t.same(payloads(await history(t, s, { topic, count: 0, start: tB, stop: tB })), ["b3", "b2", "b1"], "start = stop = B's second: exactly B (rows whose time is tB)");

  t.same(await history(t, s, { topic: `${topic}/none`, count: 0 }), [], "a topic without history: []");
  t.same(await history(t, s2, { topic, count: 0 }), [], "the same topic in another system has no history");
});

t.test("GET history: row shape and origin", async (t) => {
  const topic = `shape/${uniq("t")}`;
  const u = await userWith(s, { topics: [{ itemInfo: { name: "shape/#" }, permissions: 3 }], msgHistory: { permissions: 1 } });
  const c = await mq(o, s, u.token);
  const before = Math.floor(Date.now() / 1000);
  await within(c.publishAsync(topic, "héllo wörld", { qos: 1 }), "PUBLISH");
  await within(c.publishAsync(topic, Buffer.alloc(0), { qos: 0 }), "PUBLISH empty");
  // aedes acknowledges a QoS 1 PUBLISH before it routes it: let both reach history before the
  // REST publish, so "newest first" has one right answer
  t.ok(await waitFor(async () => (await peek(s, { topic, count: 0 })).length === 2), "both MQTT publishes recorded");
  await restPublish(s, topic, "from rest", 2);
  let rows: any[] = [];
  t.ok(await waitFor(async () => (rows = await peek(s, { topic, count: 0 })).length === 3), "three rows");
  const after = Math.floor(Date.now() / 1000);
  for (const r of rows) {
    t.same(Object.keys(r).sort(), ["ip", "payload", "payloadsize", "pk", "qos", "time", "topicid", "userid"], "exactly the wire fields");
    t.type(r.pk, "string");
    t.ok(r.pk.length > 0, "pk is not empty");
    t.equal(r.topicid, topic, "topicid is the topic");
    t.type(r.ip, "string");
    t.ok(Number.isInteger(r.time) && r.time >= before && r.time <= after, "time: integer unix seconds of the publish");
    t.ok(Number.isInteger(r.payloadsize), "payloadsize is an integer");
    t.type(r.payload, "string");
    t.type(r.userid, "string");
    t.ok(Number.isInteger(r.qos), "qos is an integer");
  }
  t.equal(new Set(rows.map((r) => r.pk)).size, 3, "pks are distinct");
  t.equal(rows[0]?.payload, "from rest", "the newest first");
  const by = (p: string) => rows.find((r) => r.payload === p) ?? {};
  const rest = by("from rest"), empty = by(""), mqttRow = by("héllo wörld");
  t.equal(rest.qos, 2, "REST publish qos recorded");
  t.equal(rest.userid, s.devId, "REST publish: userid is the developer");
  t.equal(empty.payload, "", "empty payload");
  t.equal(empty.payloadsize, 0);
  t.equal(empty.qos, 0);
  t.equal(mqttRow.payload, "héllo wörld");
  t.equal(mqttRow.payloadsize, Buffer.byteLength("héllo wörld"), "payloadsize counts bytes, not characters");
  t.equal(mqttRow.qos, 1, "MQTT publish qos recorded");
  t.equal(mqttRow.userid, u.userId, "MQTT publish: userid is the publishing user");
  t.match(mqttRow.ip, /127\.0\.0\.1/, "MQTT publish: ip is the client's address");
  // the user's own read of history (msgHistory read)
  const own = await u.client.get(historyPath(s, { topic, count: 1 }));
  ok200(t, own, "user with msgHistory read");
  t.same(payloads(own.body), ["from rest"]);
  await end(c);
});

t.test("GET/DELETE history: bad parameters and permissions", async (t) => {
  const topic = `hp/${uniq("t")}`;
  await restPublish(s, topic, "keep-me");
  const bad: [string, Record<string, string | number>][] = [
    ["missing topic", { count: 0 }],
    ["empty topic", { topic: "", count: 0 }],
    ["missing count", { topic }],
    ["empty count", { topic, count: "" }],
    ["count not a number", { topic, count: "abc" }],
    ["negative count", { topic, count: -1 }],
    ["fractional count", { topic, count: 1.5 }],
    ["wildcard + topic", { topic: "hp/+", count: 0 }],
    ["wildcard # topic", { topic: "hp/#", count: 0 }],
    ["bare #", { topic: "#", count: 0 }],
    ["start not a number", { topic, count: 0, start: "yesterday" }],
    ["last not a number", { topic, count: 0, last: "x" }],
  ];
  for (const [what, params] of bad) {
    isErr(t, await s.dev.get(historyPath(s, params)), 400, `GET ${what}`);
    isErr(t, await s.dev.del(historyPath(s, params)), 400, `DELETE ${what}`);
  }

  const noRole = await userWith(s);
  isErr(t, await noRole.client.get(historyPath(s, { topic, count: 0 })), 401, "GET without msgHistory");
  isErr(t, await noRole.client.del(historyPath(s, { topic, count: 0 })), 401, "DELETE without msgHistory");
  const readOnly = await userWith(s, { msgHistory: { permissions: 1 } });
  ok200(t, await readOnly.client.get(historyPath(s, { topic, count: 0 })), "GET with msgHistory read");
  isErr(t, await readOnly.client.del(historyPath(s, { topic, count: 0 })), 401, "DELETE with msgHistory read only");
  const topicOnly = await userWith(s, { topics: [{ itemInfo: { name: "#" }, permissions: 15 }] });
  isErr(t, await topicOnly.client.get(historyPath(s, { topic, count: 0 })), 401, "a topic grant is not a history grant");
  const foreign = await newUser(s2);
  isErr(t, await foreign.client.get(historyPath(s, { topic, count: 0 })), 401, "user of another system");
  isErr(t, await s2.dev.get(historyPath(s, { topic, count: 0 })), 401, "developer of another system");
  isErr(t, await new Client(o.url).get(historyPath(s, { topic, count: 0 })), 401, "no token");
  isErr(t, await s.dev.with({ "ClearBlade-DevToken": "not-a-token" }).get(historyPath(s, { topic, count: 0 })), 400, "invalid token");

  t.same(payloads(await history(t, s, { topic, count: 0 })), ["keep-me"], "nothing was deleted by refused DELETEs");
  const full = await userWith(s, { msgHistory: { permissions: 15 } });
  const del = await full.client.del(historyPath(s, { topic, count: 0 }));
  ok200(t, del, "DELETE with msgHistory delete");
  t.same(payloads(del.body), ["keep-me"]);
  t.same(await history(t, s, { topic, count: 0 }), [], "deleted");
});

t.test("DELETE history returns and removes exactly the selected messages", async (t) => {
  const topic = `del/${uniq("t")}`;
  const sibling = `${topic}-sibling`;
  const tA = await group(s, topic, ["a1", "a2", "a3"]);
  const tB = await group(s, topic, ["b1", "b2", "b3"], tA + 2);
  const tC = await group(s, topic, ["c1", "c2", "c3"], tB + 2);
  await restPublish(s, sibling, "sibling");
  const before = await history(t, s, { topic, count: 0 });
  const pk = new Map(before.map((r) => [r.payload, r.pk]));

  let r = await s.dev.del(historyPath(s, { topic, count: 2 }));
  ok200(t, r, "DELETE count 2");
  t.same(payloads(r.body), ["c3", "c2"], "returns the newest two");
  t.same(r.body.map((x: any) => x.pk), [pk.get("c3"), pk.get("c2")], "the same rows GET showed (pk)");
  t.same(r.body[0], before[0], "returned rows have the history row shape");
  t.same(payloads(await history(t, s, { topic, count: 0 })), ["c1", "b3", "b2", "b1", "a3", "a2", "a1"], "exactly those two are gone");

  r = await s.dev.del(historyPath(s, { topic, count: 0, start: tC }));
  ok200(t, r, "DELETE start = C's second");
  t.same(payloads(r.body), ["c1"], "returns what is left of C");
  r = await s.dev.del(historyPath(s, { topic, count: 1, last: tB + 1 }));
  ok200(t, r, "DELETE count 1 with last");
  t.same(payloads(r.body), ["b3"], "returns the newest before last");
  r = await s.dev.del(historyPath(s, { topic, count: 0, start: tA - 1, stop: tA + 1 }));
  ok200(t, r, "DELETE a window");
  t.same(payloads(r.body), ["a3", "a2", "a1"], "returns the window");
  const left = await history(t, s, { topic, count: 0 });
  t.same(payloads(left), ["b2", "b1"], "only the unselected rows remain");
  t.same(left.map((x) => x.pk), [pk.get("b2"), pk.get("b1")], "untouched rows keep their pk");

  r = await s.dev.del(historyPath(s, { topic, count: 0, start: tC + 10 }));
  ok200(t, r, "DELETE selecting nothing");
  t.same(r.body, [], "returns []");
  r = await s.dev.del(historyPath(s, { topic, count: 0 }));
  ok200(t, r, "DELETE count 0");
  t.same(payloads(r.body), ["b2", "b1"], "count 0 deletes (and returns) all");
  t.same(await history(t, s, { topic, count: 0 }), [], "topic history empty");
  r = await s.dev.del(historyPath(s, { topic, count: 0 }));
  t.same(r.body, [], "a second DELETE returns []");
  t.same(payloads(await history(t, s, { topic: sibling, count: 0 })), ["sibling"], "another topic is untouched");

  // new messages after a delete are recorded as usual
  await restPublish(s, topic, "after");
  t.same(payloads(await history(t, s, { topic, count: 0 })), ["after"], "history continues after a delete");
});

// ---- storage limits ---------------------------------------------------------------------------

t.test("per-topic storage settings: max_rows limits history, max_rows 0 stores nothing", async (t) => {
  const five = `lim/${uniq("five")}`, none = `lim/${uniq("none")}`, dflt = `lim/${uniq("default")}`;
  const storagePath = `/api/v/4/message/${s.systemKey}/storage`;
  let r = await s.dev.put(storagePath, [
    { topic: five, max_rows: 5, max_time: 0, edge: true, platform: true },
    { topic: none, max_rows: 0, max_time: 0, edge: true, platform: true },
  ]);
  ok200(t, r, "PUT storage");
  t.ok(Array.isArray(r.body), "answers with the settings");
  const listed = await s.dev.get(storagePath);
  ok200(t, listed, "GET storage");
  const row = (listed.body as any[]).find((x) => x.topic === five);
  t.match(row, { topic: five, max_rows: 5, max_time: 0, edge: true, platform: true, system_key: s.systemKey }, "the setting is listed");
  t.ok((listed.body as any[]).some((x) => x.topic === none && x.max_rows === 0), "max_rows 0 listed");

  const watch = await mq(o, s);
  const got = collect(watch);
  await sub(watch, "lim/#", 1);
  for (let i = 0; i < 20; i++) await restPublish(s, five, `n${i}`);
  for (let i = 0; i < 3; i++) await restPublish(s, none, `z${i}`);
  for (let i = 0; i < 20; i++) await restPublish(s, dflt, `d${i}`);
  const rows = await history(t, s, { topic: five, count: 0 });
  t.ok(rows.length <= 5, `max_rows 5: at most 5 returned (got ${rows.length})`);
  t.same(payloads(rows), ["n19", "n18", "n17", "n16", "n15"], "the newest five");
  t.same(payloads(await history(t, s, { topic: five, count: 3 })), ["n19", "n18", "n17"], "count below the limit");
  t.same(payloads(await history(t, s, { topic: five, count: 0, last: Math.floor(Date.now() / 1000) + 60 })), payloads(rows), "with last: still only the kept rows");
  t.same(await history(t, s, { topic: none, count: 0 }), [], "max_rows 0: nothing stored");
  t.equal((await history(t, s, { topic: dflt, count: 0 })).length, 20, "a topic without a setting keeps the default (1000)");
  t.ok(await waitFor(() => got.filter((g) => g.topic === none).length === 3), "storage settings do not affect delivery");

  // lowering the limit applies to what is stored
  r = await s.dev.put(storagePath, [{ topic: five, max_rows: 2, max_time: 0, edge: true, platform: true }]);
  ok200(t, r, "PUT a lower limit");
  t.same(payloads(await history(t, s, { topic: five, count: 0 })), ["n19", "n18"], "the newest two");
  await restPublish(s, five, "n20");
  t.same(payloads(await history(t, s, { topic: five, count: 0 })), ["n20", "n19"], "still two after a new message");

  // failures
  const u = await userWith(s, { msgHistory: { permissions: 15 } });
  isErr(t, await u.client.put(storagePath, [{ topic: five, max_rows: 1, max_time: 0, edge: true, platform: true }]), 401, "user token on PUT storage");
  isErr(t, await u.client.get(storagePath), 401, "user token on GET storage");
  isErr(t, await s2.dev.put(storagePath, [{ topic: five, max_rows: 1, max_time: 0 }]), 401, "another system's developer");
  isErr(t, await s.dev.put(storagePath, { topic: five, max_rows: 1 }), 400, "body not an array");
  isErr(t, await s.dev.put(storagePath, [{ topic: five, max_rows: -1, max_time: 0 }]), 400, "negative max_rows");
  isErr(t, await s.dev.put(storagePath, [{ topic: "lim/+", max_rows: 1, max_time: 0 }]), 400, "wildcard topic");
  isErr(t, await s.dev.put(storagePath, [{ max_rows: 1, max_time: 0 }]), 400, "missing topic");
  t.same(payloads(await history(t, s, { topic: five, count: 0 })), ["n20", "n19"], "refused changes changed nothing");
  await end(watch);
});

t.test(`--history-max-rows ${HISTORY_CAP} limits every topic's history`, async (t) => {
  const sys = await devWithSystem(o2, "capped");
  for (let i = 0; i < 12; i++) await restPublish(sys, "cap/t", `n${i}`);
  const rows = await history(t, sys, { topic: "cap/t", count: 0 });
  t.ok(rows.length <= HISTORY_CAP, `at most ${HISTORY_CAP} (got ${rows.length})`);
  t.same(payloads(rows), ["n11", "n10", "n9", "n8", "n7"], "the newest five");
  t.same(payloads(await history(t, sys, { topic: "cap/t", count: 2 })), ["n11", "n10"], "count within the cap");
  t.same(payloads(await history(t, sys, { topic: "cap/t", count: 50 })), payloads(rows), "count above the cap: the cap");
  // a per-topic setting overrides the server default
  const r = await sys.dev.put(`/api/v/4/message/${sys.systemKey}/storage`, [{ topic: "cap/more", max_rows: 8, max_time: 0, edge: true, platform: true }]);
  ok200(t, r, "PUT storage on the capped server");
  for (let i = 0; i < 12; i++) await restPublish(sys, "cap/more", `m${i}`);
  t.equal((await history(t, sys, { topic: "cap/more", count: 0 })).length, 8, "the topic's own max_rows 8 wins");
});

// ---- topic listings ---------------------------------------------------------------------------

t.test("GET /api/v/4/message/{sk}/topics and /topics/count with the query object", async (t) => {
  const sys = await devWithSystem(o, "topics");
  const counts: Record<string, number> = { "t/a": 1, "t/b": 2, "t/c": 3, "t/d": 4 };
  for (const [topic, n] of Object.entries(counts)) for (let i = 0; i < n; i++) await restPublish(sys, topic, `${topic}#${i}`);
  await restPublish(s, "t/zz-other-system", "x"); // another system's topic never shows up
  const base = `/api/v/4/message/${sys.systemKey}/topics`;
  const list = async (query?: unknown) => {
    const r = await sys.dev.get(query === undefined ? base : `${base}?query=${q(query)}`);
    ok200(t, r, `topics ${query === undefined ? "" : JSON.stringify(query)}`);
    t.ok(Array.isArray(r.body), "an array");
    return Array.isArray(r.body) ? (r.body as any[]) : [];
  };
  const ids = (rows: any[]) => rows.map((x) => x.topicid);

  const all = await list();
  t.same(ids(all).sort(), ["t/a", "t/b", "t/c", "t/d"], "every topic with history, and only this system's");
  for (const row of all) t.type(row.topicid, "string", "rows carry topicid");
  t.same(ids(await list({ PAGESIZE: 0, PAGENUM: 0 })).sort(), ["t/a", "t/b", "t/c", "t/d"], "PAGESIZE 0 PAGENUM 0: all");

  t.same(ids(await list({ SORT: [{ DESC: "topicid" }] })), ["t/d", "t/c", "t/b", "t/a"], "SORT DESC topicid");
  const p1 = await list({ PAGESIZE: 2, PAGENUM: 1, SORT: [{ DESC: "topicid" }] });
  const p2 = await list({ PAGESIZE: 2, PAGENUM: 2, SORT: [{ DESC: "topicid" }] });
  t.same(ids(p1), ["t/d", "t/c"], "page 1 of 2");
  t.same(ids(p2), ["t/b", "t/a"], "page 2 of 2");
  const u1 = await list({ PAGESIZE: 3, PAGENUM: 1 }), u2 = await list({ PAGESIZE: 3, PAGENUM: 2 });
  t.equal(u1.length, 3, "PAGESIZE 3 page 1: 3");
  t.equal(u2.length, 1, "PAGESIZE 3 page 2: the rest");
  t.same([...ids(u1), ...ids(u2)].sort(), ["t/a", "t/b", "t/c", "t/d"], "pages are disjoint and complete");
  t.same(await list({ PAGESIZE: 2, PAGENUM: 3 }), [], "a page past the end: []");

  t.same(ids(await list({ FILTERS: [[{ EQ: [{ topicid: "t/b" }] }]] })), ["t/b"], "FILTERS EQ topicid");
  t.same(ids(await list({ FILTERS: [[{ NEQ: [{ topicid: "t/b" }] }]], SORT: [{ DESC: "topicid" }] })), ["t/d", "t/c", "t/a"], "FILTERS NEQ topicid");
  t.same(ids(await list({ FILTERS: [[{ EQ: [{ topicid: "t/a" }] }], [{ EQ: [{ topicid: "t/d" }] }]], SORT: [{ DESC: "topicid" }] })), ["t/d", "t/a"], "OR of two groups");
  t.same(ids(await list({ FILTERS: [[{ NEQ: [{ topicid: "t/a" }] }, { NEQ: [{ topicid: "t/d" }] }]], SORT: [{ DESC: "topicid" }] })), ["t/c", "t/b"], "AND within a group");
  t.same(await list({ FILTERS: [[{ EQ: [{ topicid: "t/nope" }] }]] }), [], "EQ matching nothing");
  t.same(ids(await list({ FILTERS: [[{ NEQ: [{ topicid: "t/a" }] }]], PAGESIZE: 1, PAGENUM: 2, SORT: [{ DESC: "topicid" }] })), ["t/c"], "filter, sort and page together");

  const count = await sys.dev.get(`${base}/count`);
  ok200(t, count, "topics/count");
  t.same(count.body, { count: 4 }, "{count: 4}");
  const emptySys = await devWithSystem(o, "no-topics");
  const none = await emptySys.dev.get(`/api/v/4/message/${emptySys.systemKey}/topics/count`);
  ok200(t, none, "count in a system without history");
  t.same(none.body, { count: 0 });
  const noneList = await emptySys.dev.get(`/api/v/4/message/${emptySys.systemKey}/topics`);
  t.same(noneList.body, [], "topics in a system without history: []");

  // failures
  const u = await userWith(sys, { msgHistory: { permissions: 15 }, topics: [{ itemInfo: { name: "#" }, permissions: 15 }] });
  isErr(t, await u.client.get(base), 401, "user token on topics");
  isErr(t, await u.client.get(`${base}/count`), 401, "user token on topics/count");
  isErr(t, await s.dev.get(base), 401, "another developer's system: topics");
  isErr(t, await s.dev.get(`${base}/count`), 401, "another developer's system: topics/count");
  isErr(t, await new Client(o.url).get(base), 401, "no token");
  for (const [what, query] of [
    ["not JSON", "{nope"],
    ["unknown key", JSON.stringify({ PAGES: 1 })],
    ["unknown column", JSON.stringify({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] })],
    ["unknown operator", JSON.stringify({ FILTERS: [[{ LIKE: [{ topicid: "t/a" }] }]] })],
    ["negative PAGESIZE", JSON.stringify({ PAGESIZE: -1, PAGENUM: 1 })],
    ["SORT not an array", JSON.stringify({ SORT: "topicid" })],
    ["bad SORT direction", JSON.stringify({ SORT: [{ UP: "topicid" }] })],
  ] as const) {
    isErr(t, await sys.dev.get(`${base}?query=${encodeURIComponent(query)}`), 400, `topics: ${what}`);
  }
  isErr(t, await sys.dev.get(`${base}/count?query=${encodeURIComponent("{nope")}`), 400, "topics/count: query not JSON");
});

t.test("GET /api/v/1/message/{sk}/currentTopics: topics with live subscriptions", async (t) => {
  const sys = await devWithSystem(o, "current");
  const path = `/api/v/1/message/${sys.systemKey}/currentTopics`;
  const current = async (as: Client = sys.dev) => {
    const r = await as.get(path);
    ok200(t, r, "currentTopics");
    t.ok(Array.isArray(r.body) && r.body.every((x: unknown) => typeof x === "string"), "an array of strings");
    return Array.isArray(r.body) ? [...r.body].sort() : [];
  };
  t.same(await current(), [], "no subscriptions yet: []");

  const a = await mq(o, sys);
  await sub(a, ["cur/a", "cur/+/b", "cur/#"], 1);
  const u = await userWith(sys, { topics: [{ itemInfo: { name: "cur/#" }, permissions: 3 }] });
  const b = await mq(o, sys, u.token);
  await sub(b, "cur/a", 0);
  const elsewhere = await mq(o, s); // another system's subscription
  await sub(elsewhere, "cur/other", 1);
  const offline = await mq(o, sys, sys.devToken, { clientId: uniq("offline"), clean: false });
  await sub(offline, "cur/offline", 1);
  await end(offline);

  t.ok(await waitFor(async () => JSON.stringify(await current()) === JSON.stringify(["cur/#", "cur/+/b", "cur/a"]), 5_000),
    "the live subscriptions, each once, without other systems' or offline sessions' topics");
  t.same(await current(), ["cur/#", "cur/+/b", "cur/a"]);
  t.same(await current(u.client), ["cur/#", "cur/+/b", "cur/a"], "a user of the system may read it too");

  await within(a.unsubscribeAsync("cur/+/b"), "UNSUBSCRIBE");
  t.ok(await waitFor(async () => !(await current()).includes("cur/+/b"), 5_000), "an unsubscribed topic disappears");
  await end(a);
  t.ok(await waitFor(async () => JSON.stringify(await current()) === JSON.stringify(["cur/a"]), 5_000), "a disconnected client's topics disappear");
  await end(b);
  t.ok(await waitFor(async () => (await current()).length === 0, 5_000), "no clients: []");

  const foreign = await newUser(s);
  isErr(t, await foreign.client.get(path), 401, "user of another system");
  isErr(t, await s.dev.get(path), 401, "developer of another system");
  isErr(t, await new Client(o.url).get(path), 401, "no token");
  isErr(t, await sys.dev.with({ "ClearBlade-DevToken": "not-a-token" }).get(path), 400, "invalid token");
  await end(elsewhere);
});
