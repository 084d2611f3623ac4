// Developer keys (/admin/devkeys): long-lived developer access for tools and monitors. A key is
// shown once, listed without its token, scoped to some systems or to reads, revocable, and never
// makes more keys; every failure answers in the envelope.
import t from "tap";
import mqtt from "mqtt";
import { Client, devWithSystem, isErr, type Outpost, must, request, startOutpost, uniq } from "./harness.ts";

let o: Outpost;
t.before(async () => { o = await startOutpost(); });
t.teardown(() => o?.stop());

const keyClient = (token: string) => new Client(o.url, { "ClearBlade-DevToken": token });

t.test("a full key acts as its developer, in every system, without expiring; the token is shown once", async (t) => {
  const a = await devWithSystem(o, "keys-a");
  const created = await must(a.dev.post("/admin/devkeys", { name: "ci script" }), "create key");
  t.match(created, { name: "ci script", systems: null, read_only: false, expires_at: -1 });
  t.type(created.token, "string");
  t.ok(created.token.length >= 43, "a 256-bit token");
  const k = keyClient(created.token);
  t.equal((await k.get("/admin/allapps")).body.length, 1, "lists the developer's systems");
  const col = await k.post(`/admin/collectionmanagement`, { appID: a.systemKey, name: uniq("c") });
  t.equal(col.status, 200, `creates in the system: ${col.text}`);
  const listed = await must(a.dev.get("/admin/devkeys"), "list");
  t.equal(listed.length, 1);
  t.same(Object.keys(listed[0]).sort(), ["created_at", "expires_at", "id", "name", "read_only", "systems"], "listed without the token");
  t.notOk(JSON.stringify(listed).includes(created.token));
  // a key never manages keys, nor carries a platform admin's powers
  isErr(t, await k.post("/admin/devkeys", { name: "child" }), 403, "a key cannot make a key");
  isErr(t, await k.get("/admin/devkeys"), 403, "nor list them");
  isErr(t, await k.del(`/admin/devkeys/${created.id}`), 403, "nor revoke one");
});

t.test("a read-only key reads and writes nothing, over HTTP and MQTT", async (t) => {
  const a = await devWithSystem(o, "keys-ro");
  const { token } = await must(a.dev.post("/admin/devkeys", { name: "monitor", read_only: true }), "create key");
  const k = keyClient(token);
  t.equal((await k.get(`/admin/${a.systemKey}/sync/alledges/status`)).status, 200, "reads sync status");
  t.equal((await k.get(`/admin/edges/${a.systemKey}`)).status, 200, "reads edges");
  isErr(t, await k.post(`/admin/collectionmanagement`, { appID: a.systemKey, name: uniq("c") }), 403, "creates nothing");
  isErr(t, await k.put("/admin/systemmanagement", { id: a.systemKey, name: "renamed" }), 403, "changes nothing");
  isErr(t, await k.del(`/admin/systemmanagement?id=${a.systemKey}`), 403, "deletes nothing");
  // MQTT: it may connect and subscribe, but not publish
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: token, password: a.systemKey, reconnectPeriod: 0 });
  const granted = await c.subscribeAsync("ro/topic", { qos: 1 });
  t.equal(granted[0]!.qos, 1, "subscribes");
  const closed = new Promise<void>((r) => c.once("close", () => r()));
  c.publish("ro/topic", "x", { qos: 1 });
  await closed; // the broker closes a connection whose publish it refuses
  t.pass("a publish is refused");
  c.end(true);
});

t.test("a key scoped to some systems reaches those only", async (t) => {
  const a = await devWithSystem(o, "keys-scope");
  const second = await must(a.dev.post("/admin/systemmanagement", { name: "second" }), "second system");
  const { token } = await must(a.dev.post("/admin/devkeys", { name: "one system", systems: [a.systemKey] }), "create key");
  const k = keyClient(token);
  t.same((await k.get("/admin/allapps")).body.map((s: any) => s.appID ?? s.systemKey), [a.systemKey], "lists only that system");
  t.equal((await k.get(`/admin/allcollections?appid=${a.systemKey}`)).status, 200, "works in it");
  isErr(t, await k.get(`/admin/allcollections?appid=${second.appID}`), 401, "not in the other");
  isErr(t, await k.post("/admin/systemmanagement", { name: "third" }), 403, "creates no system");
  const c = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { username: token, password: second.appID, reconnectPeriod: 0 });
  const refused = await new Promise<boolean>((r) => { c.once("connect", () => r(false)); c.once("error", () => r(true)); c.once("close", () => r(true)); });
  t.ok(refused, "nor connects to the other over MQTT");
  c.end(true);
});

t.test("a revoked or expired key stops working at once", async (t) => {
  const a = await devWithSystem(o, "keys-revoke");
  const made = await must(a.dev.post("/admin/devkeys", { name: "temp" }), "create key");
  const k = keyClient(made.token);
  t.equal((await k.get("/admin/allapps")).status, 200);
  t.equal((await a.dev.del(`/admin/devkeys/${made.id}`)).status, 200, "revoked");
  isErr(t, await k.get("/admin/allapps"), 400, "refused after revocation");
  t.same(await must(a.dev.get("/admin/devkeys"), "list"), [], "no longer listed");
  const short = await must(a.dev.post("/admin/devkeys", { name: "short", expires_in: 1 }), "short key");
  t.ok(short.expires_at > Date.now() / 1000 && short.expires_at <= Date.now() / 1000 + 2, "expires_at in unix seconds");
  await new Promise((r) => setTimeout(r, 2100));
  isErr(t, await keyClient(short.token).get("/admin/allapps"), 400, "refused once expired");
});

t.test("failure paths: bad bodies, other developers' systems and keys, callers that are not developers", async (t) => {
  const a = await devWithSystem(o, "keys-fail");
  const b = await devWithSystem(o, "keys-other");
  isErr(t, await a.dev.post("/admin/devkeys", {}), 400, "no name");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "" }), 400, "empty name");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x".repeat(101) }), 400, "name too long");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x", scope: "all" }), 400, "unknown field");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x", read_only: "yes" }), 400, "read_only not a boolean");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x", expires_in: -5 }), 400, "negative lifetime");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x", systems: [] }), 400, "an empty system list");
  isErr(t, await a.dev.post("/admin/devkeys", { name: "x", systems: [b.systemKey] }), 401, "another developer's system");
  isErr(t, await a.dev.post("/admin/devkeys", "not json at all"), 400, "not an object");
  const mine = await must(a.dev.post("/admin/devkeys", { name: "mine" }), "create key");
  isErr(t, await b.dev.del(`/admin/devkeys/${mine.id}`), 404, "another developer's key is not found");
  t.equal((await keyClient(mine.token).get("/admin/allapps")).status, 200, "and still works");
  isErr(t, await a.dev.del("/admin/devkeys/nope"), 404, "an unknown key");
  isErr(t, await request(o.url, "GET", "/admin/devkeys"), 401, "no token");
  const user = await a.app.post("/api/v/1/user/reg", { email: `${uniq("u")}@example.com`, password: "user-password-1" });
  isErr(t, await new Client(o.url, { "ClearBlade-UserToken": user.body.user_token }).post("/admin/devkeys", { name: "u" }), 401, "a user token");
  t.equal((await b.dev.get("/admin/devkeys")).body.length, 0, "keys are per developer");
});
