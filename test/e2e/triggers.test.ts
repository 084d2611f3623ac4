// Triggers and timers, black-box: the definitions catalogue, trigger handler CRUD on the developer
// paths (/admin/triggers/handlers) and the user-token paths (/api/v/3/code/{sk}/trigger[s]) with
// flat and nested bodies, each module firing from a real action (HTTP insert, user registration,
// device update, MQTT publish) with its key_value_pairs filter, loop protection, and timers: CRUD,
// start times, repeat counts, disabling, bad bodies and a schedule that survives a restart.
import { rmSync } from "node:fs";
import mqtt from "mqtt";
import t, { type Test } from "tap";
import { Client, type DevSystem, type Outpost, devWithSystem, newUser, request, startOutpost, uniq, sleep, waitFor, qs, isErr, ok200, collectionWith } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "triggers-a");
const s2 = await devWithSystem(o, "triggers-b");
const SK = s.systemKey;

// ---- helpers ----------------------------------------------------------------------------------

// A trigger change is live when its request returns: the action that should fire it follows at once.

async function service(sys: DevSystem, name: string, code: string, extra: Record<string, unknown> = {}) {
  const r = await sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [], ...extra });
  if (r.status !== 200) throw new Error(`create service ${name}: ${r.status} ${r.text}`);
}

interface Recorded { tag: string; trig: string; params: any; at: number }
/** A collection `events` per system and recorder services writing req.params into it. */
const eventCols = new Map<string, { id: string; name: string }>();
async function events(sys: DevSystem) {
  let c = eventCols.get(sys.systemKey);
  if (!c) {
    c = await collectionWith(sys, [["tag", "string"], ["trig", "string"], ["payload", "string"], ["at", "float"]], uniq("events"));
    eventCols.set(sys.systemKey, c);
  }
  return c;
}
/** Creates a service that records each run under `tag`; returns its name. */
async function recorder(sys: DevSystem, tag = uniq("tag")) {
  const c = await events(sys);
  const name = uniq("rec");
  await service(sys, name, `function ${name}(req, resp) {
    ClearBlade.Collection({ collectionName: "${c.name}" }).create({ tag: "${tag}", trig: String(req.params.trigger || ""), payload: JSON.stringify(req.params), at: Date.now() }, function (err, d) {
      if (err) resp.error(d); else resp.success("recorded");
    });
  }`);
  return { name, tag };
}
async function recorded(sys: DevSystem, tag: string): Promise<Recorded[]> {
  const c = await events(sys);
  const r = await sys.dev.get(`/api/v/1/data/${c.id}?query=${qs({ FILTERS: [[{ EQ: [{ tag }] }]], SORT: [{ ASC: "at" }], PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`read events: ${r.status} ${r.text}`);
  return r.body.DATA.map((x: any) => ({ tag: x.tag, trig: x.trig, params: JSON.parse(x.payload), at: x.at }));
}

const hp = (sys: DevSystem, name?: string) => `/admin/triggers/handlers/${sys.systemKey}${name === undefined ? "" : `/${name}`}`;
const up = (sys: DevSystem, name?: string) => name === undefined ? `/api/v/3/code/${sys.systemKey}/triggers` : `/api/v/3/code/${sys.systemKey}/trigger/${name}`;
const tp = (sys: DevSystem, name?: string) => `/admin/triggers/timers/${sys.systemKey}${name === undefined ? "" : `/${name}`}`;
const utp = (sys: DevSystem, name?: string) => name === undefined ? `/api/v/3/code/${sys.systemKey}/timers` : `/api/v/3/code/${sys.systemKey}/timer/${name}`;

/** Waits until the events of `sys` emitted so far are dispatched: events are dispatched in
 *  order, so once a probe trigger's run for an insert made now is recorded, every event before it
 *  has been matched, and the runs it started were queued before the probe's. What should not have
 *  fired is checked after this, not after a wall-clock pause. */
const probes = new Map<string, Promise<{ col: { id: string; name: string }; tag: string }>>();
async function dispatched(sys: DevSystem) {
  let probe = probes.get(sys.systemKey);
  if (!probe) {
    probe = (async () => {
      const col = await collectionWith(sys, [["v", "int"]], uniq("probe"));
      const rec = await recorder(sys);
      await trigger(sys, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: col.name }, service_name: rec.name });
      return { col, tag: rec.tag };
    })();
    probes.set(sys.systemKey, probe);
  }
  const { col, tag } = await probe;
  const before = (await recorded(sys, tag)).length;
  const r = await sys.dev.post(`/api/v/1/data/${col.id}`, { v: 1 });
  if (r.status !== 200) throw new Error(`probe insert: ${r.status} ${r.text}`);
  if (!(await waitFor(async () => (await recorded(sys, tag)).length > before))) throw new Error("the probe trigger did not run");
}

/** Waits until the timer scheduler has fired a one-second metronome timer, made now, `ticks`
 *  times: one tick fires every timer then due, so a timer that should not run any more would have
 *  run in those ticks, and a run fired before them was recorded about when the metronome's first
 *  was. What should not have run is checked after this, not after a wall-clock pause. */
async function ticked(sys: DevSystem, ticks: number) {
  const rec = await recorder(sys);
  const name = uniq("metronome");
  const r = await sys.dev.post(tp(sys, name), { frequency: 1, repeats: -1, start_time: "now", service_name: rec.name });
  if (r.status !== 200) throw new Error(`metronome timer: ${r.status} ${r.text}`);
  try {
    if (!(await waitFor(async () => (await recorded(sys, rec.tag)).length >= ticks, 20_000))) throw new Error("the metronome timer did not run");
  } finally {
    await sys.dev.del(tp(sys, name));
  }
}

async function trigger(sys: DevSystem, body: Record<string, unknown>, name = uniq("trg")) {
  const r = await sys.dev.post(hp(sys, name), body);
  if (r.status !== 200) throw new Error(`create trigger: ${r.status} ${r.text}`);
  return name;
}

async function userWith(sys: DevSystem, perms: Record<string, unknown>) {
  const u = await newUser(sys);
  if (Object.keys(perms).length) {
    const role = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name: uniq("R"), ...perms });
    if (role.status !== 200) throw new Error(`role: ${role.text}`);
    const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role.body.role_id] } } });
    if (r.status !== 200) throw new Error(`user roles: ${r.text}`);
  }
  const a = await sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password });
  if (a.status !== 200) throw new Error(`auth: ${a.text}`);
  return { ...u, client: new Client(o.url, { "ClearBlade-UserToken": a.body.user_token }) };
}

/** RFC 3339 without fractions, `ms` from now (rounded up to a whole second). */
const rfc3339In = (ms: number) => new Date(Math.ceil((Date.now() + ms) / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");

// ---- definitions ------------------------------------------------------------------------------

t.test("GET /admin/triggers/definitions lists the catalogue", async (t) => {
  const r = await s.dev.get("/admin/triggers/definitions");
  ok200(t, r);
  t.ok(Array.isArray(r.body), "an array");
  const malformed = r.body.filter((d: any) => typeof d.def_module !== "string" || typeof d.def_name !== "string" || !Array.isArray(d.def_keys) || typeof d.visibility !== "boolean");
  t.ok(r.body.length > 0, `${r.body.length} definitions`);
  t.same(malformed, [], "each {def_module, def_name, def_keys[], visibility}");
  const find = (m: string, n: string) => r.body.find((d: any) => d.def_module === m && d.def_name === n);
  const expect: [string, string, string[]][] = [
    ["Data", "CollectionCreated", []],
    ["Data", "ItemCreated", ["collectionId", "collectionName"]],
    ["Data", "ItemUpdated", ["collectionId", "collectionName", "itemId"]],
    ["Data", "ItemDeleted", ["collectionId", "collectionName", "itemId"]],
    ["User", "UserCreated", []],
    ["User", "UserUpdated", ["userId"]],
    ["User", "UserDeleted", ["userId"]],
    ["UserRoles", "UserRoleAdded", ["userID", "roleID"]],
    ["UserRoles", "UserRoleRemoved", ["userID", "roleID"]],
    ["Device", "DeviceCreated", []],
    ["Device", "DeviceUpdated", ["deviceName"]],
    ["Device", "DeviceDeleted", ["deviceName"]],
    ["Messaging", "Publish", ["topic"]],
    ["Messaging", "Subscribe", ["topic"]],
    ["Messaging", "Unsubscribe", ["topic"]],
    ["Messaging", "MQTTUserConnected", ["email"]],
    ["Messaging", "MQTTDeviceConnected", ["deviceName"]],
    ["StartConnectDisconnect", "PlatformStarted", []],
    ["StartConnectDisconnect", "EdgeConnectedOnPlatform", ["edgeName"]],
  ];
  for (const [m, n, keys] of expect) {
    const d = find(m, n);
    t.ok(d, `${m}::${n} is listed`);
    if (d) t.same([...d.def_keys].sort(), [...keys].sort(), `${m}::${n} def_keys`);
  }
  const modules = new Set(r.body.map((d: any) => d.def_module));
  for (const m of ["Data", "User", "UserRoles", "Device", "Messaging", "StartConnectDisconnect"]) t.ok(modules.has(m), `module ${m}`);
  const u = await newUser(s);
  ok200(t, await u.client.get("/admin/triggers/definitions"), "a user token may read the catalogue (JS SDK)");
  isErr(t, await new Client(o.url).get("/admin/triggers/definitions"), 401, "no token");
});

// ---- handler CRUD -----------------------------------------------------------------------------

function checkTriggerShape(t: Test, b: any, want: { name: string; module: string; action: string; kvp: Record<string, string>; service: string }, what: string) {
  t.equal(b?.name, want.name, `${what}: name`);
  t.equal(b?.system_key, SK, `${what}: system_key`);
  t.equal(b?.system_secret, s.systemSecret, `${what}: system_secret`);
  t.equal(b?.event_definition?.def_module, want.module, `${what}: event_definition.def_module`);
  t.equal(b?.event_definition?.def_name, want.action, `${what}: event_definition.def_name`);
  t.ok(Array.isArray(b?.event_definition?.def_keys), `${what}: event_definition.def_keys is an array`);
  t.type(b?.event_definition?.visibility, "boolean", `${what}: event_definition.visibility`);
  t.same(b?.key_value_pairs, want.kvp, `${what}: key_value_pairs`);
  t.equal(b?.service_name, want.service, `${what}: service_name`);
}

t.test("trigger handler CRUD on /admin/triggers/handlers: flat and nested bodies", async (t) => {
  const rec = await recorder(s);
  const rec2 = await recorder(s);
  const name = uniq("flat");
  const c = await s.dev.post(hp(s, name), { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: "things" }, service_name: rec.name, system_key: SK, name });
  ok200(t, c, "create (flat)");
  checkTriggerShape(t, c.body, { name, module: "Data", action: "ItemCreated", kvp: { collectionName: "things" }, service: rec.name }, "create answer");
  t.same([...c.body.event_definition.def_keys].sort(), ["collectionId", "collectionName"], "def_keys of the definition");

  const g = await s.dev.get(hp(s, name));
  ok200(t, g, "read");
  checkTriggerShape(t, g.body, { name, module: "Data", action: "ItemCreated", kvp: { collectionName: "things" }, service: rec.name }, "GET");

  const nested = uniq("nested");
  const n = await s.dev.post(hp(s, nested), { event_definition: { def_module: "Messaging", def_name: "Publish", def_keys: ["topic"], visibility: true }, key_value_pairs: { topic: "x/#" }, service_name: rec.name });
  ok200(t, n, "create (nested event_definition)");
  checkTriggerShape(t, n.body, { name: nested, module: "Messaging", action: "Publish", kvp: { topic: "x/#" }, service: rec.name }, "nested create");

  const l = await s.dev.get(hp(s));
  ok200(t, l, "list");
  t.ok(Array.isArray(l.body), "an array");
  t.ok(l.body.some((x: any) => x.name === name) && l.body.some((x: any) => x.name === nested), "both listed");
  checkTriggerShape(t, l.body.find((x: any) => x.name === nested), { name: nested, module: "Messaging", action: "Publish", kvp: { topic: "x/#" }, service: rec.name }, "list entry");

  const u = await s.dev.put(hp(s, name), { key_value_pairs: { collectionName: "other" }, service_name: rec2.name });
  ok200(t, u, "update");
  checkTriggerShape(t, u.body, { name, module: "Data", action: "ItemCreated", kvp: { collectionName: "other" }, service: rec2.name }, "update answer");
  checkTriggerShape(t, (await s.dev.get(hp(s, name))).body, { name, module: "Data", action: "ItemCreated", kvp: { collectionName: "other" }, service: rec2.name }, "GET after update");
  const u2 = await s.dev.put(hp(s, name), { def_module: "Data", def_name: "ItemDeleted", key_value_pairs: { itemId: "abc" } });
  ok200(t, u2, "change the definition");
  t.equal(u2.body.event_definition.def_name, "ItemDeleted");
  t.same(u2.body.key_value_pairs, { itemId: "abc" });
  t.equal(u2.body.service_name, rec2.name, "the service is kept");
  const u3 = await s.dev.put(hp(s, name), { disabled: true });
  ok200(t, u3, "disable");
  t.equal((await s.dev.get(hp(s, name))).body.disabled, true, "disabled is stored");

  ok200(t, await s.dev.del(hp(s, name)), "delete");
  isErr(t, await s.dev.get(hp(s, name)), 404, "read after delete");
  t.notOk((await s.dev.get(hp(s))).body.some((x: any) => x.name === name), "not listed");
  ok200(t, await s.dev.del(hp(s, nested)), "delete the nested one");
});

t.test("trigger handler CRUD on /api/v/3/code/{sk}/trigger[s] with a user token", async (t) => {
  const rec = await recorder(s);
  const u = await userWith(s, { triggers: { permissions: 15 } });
  const name = uniq("utrg");
  const c = await u.client.post(up(s, name), { def_module: "Device", def_name: "DeviceUpdated", key_value_pairs: { deviceName: "d1" }, service_name: rec.name });
  ok200(t, c, "create as a user");
  checkTriggerShape(t, c.body, { name, module: "Device", action: "DeviceUpdated", kvp: { deviceName: "d1" }, service: rec.name }, "user create");
  const g = await u.client.get(up(s, name));
  ok200(t, g, "read as a user");
  checkTriggerShape(t, g.body, { name, module: "Device", action: "DeviceUpdated", kvp: { deviceName: "d1" }, service: rec.name }, "user GET");
  const l = await u.client.get(up(s));
  ok200(t, l, "list as a user");
  t.ok(Array.isArray(l.body) && l.body.some((x: any) => x.name === name), "listed");
  const p = await u.client.put(up(s, name), { event_definition: { def_module: "Device", def_name: "DeviceDeleted" }, key_value_pairs: { deviceName: "d2" } });
  ok200(t, p, "update as a user (nested)");
  t.equal(p.body.event_definition.def_name, "DeviceDeleted");
  t.same(p.body.key_value_pairs, { deviceName: "d2" });
  t.equal((await s.dev.get(hp(s, name))).body.event_definition.def_name, "DeviceDeleted", "the developer path sees the same trigger");
  ok200(t, await u.client.del(up(s, name)), "delete as a user");
  isErr(t, await u.client.get(up(s, name)), 404, "gone");

  // permissions
  const plain = await userWith(s, {});
  const body = { def_module: "Data", def_name: "ItemCreated", service_name: rec.name };
  const keep = await trigger(s, body);
  isErr(t, await plain.client.post(up(s, uniq("p")), body), 401, "a user without the triggers permission cannot create");
  isErr(t, await plain.client.get(up(s)), 401, "nor list");
  isErr(t, await plain.client.get(up(s, keep)), 401, "nor read");
  isErr(t, await plain.client.put(up(s, keep), { disabled: true }), 401, "nor update");
  isErr(t, await plain.client.del(up(s, keep)), 401, "nor delete");
  const reader = await userWith(s, { triggers: { permissions: 1 } });
  ok200(t, await reader.client.get(up(s, keep)), "triggers read may read");
  isErr(t, await reader.client.post(up(s, uniq("p")), body), 401, "but not create");
  isErr(t, await reader.client.del(up(s, keep)), 401, "nor delete");
  isErr(t, await s2.dev.get(hp(s)), 401, "another system's developer cannot list");
  isErr(t, await s2.dev.get(hp(s, keep)), 401, "nor read");
  isErr(t, await s2.dev.post(hp(s, uniq("x")), body), 401, "nor create");
  isErr(t, await s2.dev.del(hp(s, keep)), 401, "nor delete");
  isErr(t, await new Client(o.url).get(hp(s)), 401, "no token");
  ok200(t, await s.dev.get(hp(s, keep)), "still there");
  ok200(t, await s.dev.del(hp(s, keep)));
});

t.test("trigger handler failures", async (t) => {
  const rec = await recorder(s);
  const existing = await trigger(s, { def_module: "Data", def_name: "ItemCreated", service_name: rec.name });
  const bad: [string, unknown, number, RegExp][] = [
    [uniq("b"), { def_module: "Data", def_name: "ItemExploded", service_name: rec.name }, 400, /definition|ItemExploded/],
    [uniq("b"), { def_module: "Nope", def_name: "ItemCreated", service_name: rec.name }, 400, /definition|Nope/],
    [uniq("b"), { def_name: "ItemCreated", service_name: rec.name }, 400, /def_module/],
    [uniq("b"), { service_name: rec.name }, 400, /def_module|def_name/],
    [uniq("b"), { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { topic: "a/#" }, service_name: rec.name }, 400, /topic/],
    [uniq("b"), { def_module: "User", def_name: "UserCreated", key_value_pairs: { email: "x@y.z" }, service_name: rec.name }, 400, /email/],
    [uniq("b"), { def_module: "Messaging", def_name: "Publish", key_value_pairs: "topic=a", service_name: rec.name }, 400, /key_value_pairs/],
    [uniq("b"), { def_module: "Data", def_name: "ItemCreated" }, 400, /service_name/],
    [uniq("b"), { def_module: "Data", def_name: "ItemCreated", service_name: "no_such_service" }, 400, /no_such_service/],
    [uniq("b"), { def_module: "Data", def_name: "ItemCreated", service_name: rec.name, colour: "red" }, 400, /colour/],
    [uniq("b"), { def_module: "Data", def_name: "ItemCreated", service_name: rec.name, disabled: "yes" }, 400, /disabled/],
    ["bad name!", { def_module: "Data", def_name: "ItemCreated", service_name: rec.name }, 400, /name/],
    [existing, { def_module: "Data", def_name: "ItemCreated", service_name: rec.name }, 400, /already exists/],
  ];
  for (const [n, body, status, re] of bad) {
    const r = await s.dev.post(hp(s, encodeURIComponent(n)), body);
    isErr(t, r, status, `${n} ${JSON.stringify(body)}`);
    t.match(`${r.body?.error?.detail}`, re, `detail matches ${re}`);
  }
  isErr(t, await s.dev.post(hp(s, uniq("arr")), [1]), 400, "an array body");
  isErr(t, await s.dev.req("POST", hp(s, uniq("bj")), "{bad json"), 400, "malformed JSON");
  const ghost = uniq("ghost");
  isErr(t, await s.dev.get(hp(s, ghost)), 404, "read an unknown trigger");
  isErr(t, await s.dev.put(hp(s, ghost), { disabled: true }), 404, "update an unknown trigger");
  isErr(t, await s.dev.del(hp(s, ghost)), 404, "delete an unknown trigger");
  isErr(t, await s.dev.put(hp(s, existing), { key_value_pairs: { deviceName: "x" } }), 400, "update with a filter key the definition does not have");
  isErr(t, await s.dev.put(hp(s, existing), { service_name: "no_such_service" }), 400, "update to a missing service");
  const still = await s.dev.get(hp(s, existing));
  t.same(still.body.key_value_pairs, {}, "failed updates changed nothing");
  t.equal(still.body.service_name, rec.name);
  const names = (await s.dev.get(hp(s))).body.map((x: any) => x.name);
  t.notOk(names.includes("bad name!"), "nothing failed got created");
  ok200(t, await s.dev.del(hp(s, existing)));
});

// ---- firing -----------------------------------------------------------------------------------

t.test("Data::ItemCreated fires from an HTTP insert, filtered by collectionName", async (t) => {
  const watched = await collectionWith(s, [["v", "string"]]);
  const other = await collectionWith(s, [["v", "string"]]);
  const rec = await recorder(s);
  await trigger(s, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: watched.name }, service_name: rec.name });
  const recId = await recorder(s);
  await trigger(s, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionId: watched.id }, service_name: recId.name });

  ok200(t, await s.dev.post(`/api/v/1/data/${other.id}`, { v: "ignored" }), "insert into the other collection");
  const ins = await s.dev.post(`/api/v/1/data/${watched.id}`, { v: "hello" });
  ok200(t, ins, "insert into the watched collection");
  const itemId = ins.body[0]?.item_id;
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 1), "the trigger's service ran");
  t.ok(await waitFor(async () => (await recorded(s, recId.tag)).length >= 1), "the collectionId filter matches too");
  await dispatched(s);
  const got = await recorded(s, rec.tag);
  t.equal(got.length, 1, "exactly once: the other collection's insert did not match");
  const p = got[0]?.params;
  t.equal(p?.trigger, "Data::ItemCreated", "params.trigger");
  t.equal(got[0]?.trig, "Data::ItemCreated");
  t.equal(p?.collectionName, watched.name, "params.collectionName");
  t.equal(p?.collectionId, watched.id, "params.collectionId");
  t.ok(Array.isArray(p?.items) && p.items.some((i: any) => i.item_id === itemId), "params.items has the new item_id");
  t.equal((await recorded(s, recId.tag)).length, 1);

  // several items in one insert: one event
  ok200(t, await s.dev.post(`/api/v/1/data/${watched.id}`, [{ v: "a" }, { v: "b" }]));
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 2), "a second insert fires again");
  const second = (await recorded(s, rec.tag))[1];
  t.equal(second?.params.items.length, 2, "both items in one event");
  // the user path of inserting counts too
  const u = await userWith(s, { collections: [{ itemInfo: { id: watched.id }, permissions: 2 }] });
  ok200(t, await u.client.post(`/api/v/1/data/${watched.id}`, { v: "from a user" }), "a user inserts");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 3), "a user's insert fires too");
});

t.test("User::UserCreated fires from a registration", async (t) => {
  const rec = await recorder(s);
  await trigger(s, { def_module: "User", def_name: "UserCreated", service_name: rec.name });
  const u = await newUser(s);
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).some((e) => e.params.user?.email === u.email)), "the service ran for the new user");
  const e = (await recorded(s, rec.tag)).find((x) => x.params.user?.email === u.email);
  t.equal(e?.params.trigger, "User::UserCreated");
  t.equal(e?.params.user?.user_id, u.userId, "params.user.user_id");
  t.type(e?.params.user?.creation_date, "string", "params.user.creation_date");
  // a user created by the developer counts too
  const email = `${uniq("admin")}@example.com`;
  ok200(t, await s.dev.post(`/admin/user/${SK}`, { email, password: "pw-123456" }), "developer creates a user");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).some((x) => x.params.user?.email === email)), "fires for that user too");
  // another system's registrations do not fire this system's trigger
  const before = (await recorded(s, rec.tag)).length;
  await newUser(s2);
  await dispatched(s); // one event bus: the other system's event was dispatched before the probe's
  t.equal((await recorded(s, rec.tag)).length, before, "another system's users do not fire it");
});

t.test("Device::DeviceUpdated fires from a device update, filtered by deviceName", async (t) => {
  const d1 = uniq("d1"), d2 = uniq("d2");
  for (const n of [d1, d2]) ok200(t, await s.dev.post(`/admin/devices/${SK}/${n}`, { type: "t", state: "off", active_key: `${n}-key-long` }), `create ${n}`);
  const rec = await recorder(s);
  await trigger(s, { def_module: "Device", def_name: "DeviceUpdated", key_value_pairs: { deviceName: d1 }, service_name: rec.name });
  ok200(t, await s.dev.put(`/admin/devices/${SK}/${d2}`, { state: "ignored" }), "update the other device");
  ok200(t, await s.dev.put(`/admin/devices/${SK}/${d1}`, { state: "on" }), "update the watched device");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 1), "the service ran");
  await dispatched(s);
  const got = await recorded(s, rec.tag);
  t.equal(got.length, 1, "only the watched device fired it");
  t.equal(got[0]?.params.trigger, "Device::DeviceUpdated");
  t.equal(got[0]?.params.deviceName, d1, "params.deviceName");
  t.equal(got[0]?.params.changes?.state, "on", "params.changes");
  // the user path (/api/v/2/devices) fires it too
  const u = await userWith(s, { devices: { permissions: 15 } });
  ok200(t, await u.client.put(`/api/v/2/devices/${SK}/${d1}`, { state: "user-set" }), "update as a user");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).some((e) => e.params.changes?.state === "user-set")), "the user's update fired too");
});

t.test("Messaging::Publish fires from an MQTT publish matching a/# (not b/x)", async (t) => {
  const rec = await recorder(s);
  await trigger(s, { def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic: "a/#" }, service_name: rec.name });
  const c = await new Promise<mqtt.MqttClient>((res, rej) => {
    const m = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { username: s.devToken, password: SK, clientId: uniq("pub"), reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4 });
    m.once("connect", () => res(m));
    m.once("error", (e) => { m.end(true); rej(e); });
  });
  t.teardown(() => { c.end(true); });
  const pub = (topic: string, payload: string) => new Promise<void>((res, rej) => c.publish(topic, payload, { qos: 1 }, (e) => (e ? rej(e) : res())));
  await pub("b/x", "not me");
  await pub("ab/x", "not me either");
  await pub("a/x/y", "deep");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 1), "the service ran");
  await pub("a", "parent level");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 2), "a/# matches a itself");
  await dispatched(s);
  const got = await recorded(s, rec.tag);
  t.same(got.map((e) => e.params.topic).sort(), ["a", "a/x/y"], "only the matching topics fired");
  const deep = got.find((e) => e.params.topic === "a/x/y");
  t.equal(deep?.params.trigger, "Messaging::Publish");
  t.equal(deep?.params.body, "deep", "params.body is the payload");
  t.type(deep?.params.userId, "string", "params.userId");
  // REST publish fires it too
  const rest = await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic: "a/rest", body: "via http" });
  ok200(t, rest, "REST publish");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).some((e) => e.params.topic === "a/rest" && e.params.body === "via http")), "a REST publish fires it too");
});

t.test("a disabled trigger does not fire; enabling it again does", async (t) => {
  const col = await collectionWith(s, [["v", "int"]]);
  const rec = await recorder(s);
  const name = await trigger(s, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: col.name }, service_name: rec.name, disabled: true });
  ok200(t, await s.dev.post(`/api/v/1/data/${col.id}`, { v: 1 }));
  await dispatched(s);
  t.equal((await recorded(s, rec.tag)).length, 0, "disabled: no run");
  ok200(t, await s.dev.put(hp(s, name), { disabled: false }));
  ok200(t, await s.dev.post(`/api/v/1/data/${col.id}`, { v: 2 }));
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length === 1), "enabled: it runs");
  ok200(t, await s.dev.del(hp(s, name)));
  ok200(t, await s.dev.post(`/api/v/1/data/${col.id}`, { v: 3 }));
  await dispatched(s);
  t.equal((await recorded(s, rec.tag)).length, 1, "deleted: no more runs");
});

t.test("a trigger whose service causes its own event does not loop forever", async (t) => {
  // in its own system so no other trigger sees these inserts
  const col = await collectionWith(s2, [["n", "int"]]);
  const name = uniq("looper");
  await service(s2, name, `function ${name}(req, resp) {
    ClearBlade.Collection({ collectionName: "${col.name}" }).create({ n: 1 }, function (err) { resp.success(err ? "failed" : "inserted"); });
  }`);
  await trigger(s2, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: col.name }, service_name: name });
  ok200(t, await s2.dev.post(`/api/v/1/data/${col.id}`, { n: 0 }), "the first insert");
  const count = async () => (await s2.dev.get(`/api/v/1/data/${col.id}/count`)).body.count as number;
  t.ok(await waitFor(async () => (await count()) > 1), "the trigger fired at least once");
  // wait until the count stops changing: unchanged across a round of the dispatcher (a probe's
  // trigger run, queued behind whatever the chain queued), not across a wall-clock pause, which a
  // loaded machine outlasts between two links of the chain
  let last = -1;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const n = await count();
    if (n === last) break;
    last = n;
    await dispatched(s2);
  }
  t.ok(Date.now() < deadline, `the row count settled (at ${last})`);
  t.ok(last > 1 && last <= 10, `bounded and small (${last} rows)`);
  await dispatched(s2);
  t.equal(await count(), last, "and stays there");
  ok200(t, await request(o.url, "GET", "/health"), "the server is fine");
});

// ---- timers -----------------------------------------------------------------------------------

function checkTimerShape(t: Test, b: any, want: { name: string; frequency: number; repeats: number; service: string }, what: string) {
  t.equal(b?.timer_key, `${SK}::${want.name}`, `${what}: timer_key "<sk>::<name>"`);
  t.equal(b?.name, want.name, `${what}: name`);
  t.equal(b?.frequency, want.frequency, `${what}: frequency`);
  t.equal(b?.repeats, want.repeats, `${what}: repeats`);
  t.equal(b?.service_name, want.service, `${what}: service_name`);
  t.equal(b?.system_key, SK, `${what}: system_key`);
  t.type(b?.start_time, "string", `${what}: start_time`);
  t.ok(!Number.isNaN(Date.parse(b?.start_time)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(b?.start_time), `${what}: start_time is RFC 3339 (${b?.start_time})`);
  for (const k of ["description", "system_secret", "user_id", "user_token"]) t.ok(k in (b ?? {}), `${what}: has ${k}`);
}

t.test("timer CRUD on /admin/triggers/timers and /api/v/3/code/{sk}/timer[s]", async (t) => {
  const rec = await recorder(s);
  const name = uniq("tmr");
  const start = rfc3339In(3600_000);
  const c = await s.dev.post(tp(s, name), { frequency: 60, repeats: -1, start_time: start, service_name: rec.name, description: "hourly-ish" });
  ok200(t, c, "create");
  checkTimerShape(t, c.body, { name, frequency: 60, repeats: -1, service: rec.name }, "create answer");
  t.equal(Date.parse(c.body.start_time), Date.parse(start), "start_time kept");
  t.equal(c.body.description, "hourly-ish");
  const g = await s.dev.get(tp(s, name));
  ok200(t, g, "read");
  checkTimerShape(t, g.body, { name, frequency: 60, repeats: -1, service: rec.name }, "GET");
  const l = await s.dev.get(tp(s));
  ok200(t, l, "list");
  t.ok(Array.isArray(l.body) && l.body.some((x: any) => x.name === name), "listed in an array");
  const u = await s.dev.put(tp(s, name), { frequency: 120, description: "changed" });
  ok200(t, u, "update");
  checkTimerShape(t, u.body, { name, frequency: 120, repeats: -1, service: rec.name }, "update answer");
  t.equal((await s.dev.get(tp(s, name))).body.description, "changed");
  ok200(t, await s.dev.del(tp(s, name)), "delete");
  isErr(t, await s.dev.get(tp(s, name)), 404, "read after delete");
  isErr(t, await s.dev.del(tp(s, name)), 404, "delete again");
  isErr(t, await s.dev.put(tp(s, name), { frequency: 5 }), 404, "update a missing timer");
  t.equal((await recorded(s, rec.tag)).length, 0, "a timer starting in an hour never ran");

  // user paths
  const usr = await userWith(s, { timers: { permissions: 15 } });
  const un = uniq("utmr");
  const uc = await usr.client.post(utp(s, un), { frequency: 30, repeats: 5, start_time: rfc3339In(3600_000), service_name: rec.name });
  ok200(t, uc, "create as a user");
  checkTimerShape(t, uc.body, { name: un, frequency: 30, repeats: 5, service: rec.name }, "user create");
  checkTimerShape(t, (await usr.client.get(utp(s, un))).body, { name: un, frequency: 30, repeats: 5, service: rec.name }, "user GET");
  const ul = await usr.client.get(utp(s));
  t.ok(Array.isArray(ul.body) && ul.body.some((x: any) => x.name === un), "user list");
  ok200(t, await usr.client.put(utp(s, un), { repeats: 2 }), "update as a user");
  t.equal((await s.dev.get(tp(s, un))).body.repeats, 2, "the developer path sees it");
  const plain = await userWith(s, {});
  isErr(t, await plain.client.get(utp(s)), 401, "a user without the timers permission cannot list");
  isErr(t, await plain.client.get(utp(s, un)), 401, "nor read");
  isErr(t, await plain.client.post(utp(s, uniq("p")), { frequency: 5, service_name: rec.name }), 401, "nor create");
  isErr(t, await plain.client.put(utp(s, un), { frequency: 5 }), 401, "nor update");
  isErr(t, await plain.client.del(utp(s, un)), 401, "nor delete");
  isErr(t, await s2.dev.get(tp(s, un)), 401, "another system's developer");
  isErr(t, await s2.dev.post(tp(s, uniq("x")), { frequency: 5, service_name: rec.name }), 401, "another system's developer cannot create");
  ok200(t, await usr.client.del(utp(s, un)), "delete as a user");
  isErr(t, await usr.client.get(utp(s, un)), 404, "gone");
});

t.test("timer bodies that are refused", async (t) => {
  const rec = await recorder(s);
  const existing = uniq("ex");
  ok200(t, await s.dev.post(tp(s, existing), { frequency: 3600, start_time: rfc3339In(3600_000), service_name: rec.name }));
  const bad: [string, unknown, RegExp][] = [
    [uniq("b"), { frequency: 0, service_name: rec.name }, /frequency/],
    [uniq("b"), { frequency: -5, service_name: rec.name }, /frequency/],
    [uniq("b"), { frequency: "10", service_name: rec.name }, /frequency/],
    [uniq("b"), { frequency: 1.5, service_name: rec.name }, /frequency/],
    [uniq("b"), { service_name: rec.name }, /frequency/],
    [uniq("b"), { frequency: 5, repeats: -2, service_name: rec.name }, /repeats/],
    [uniq("b"), { frequency: 5, repeats: "3", service_name: rec.name }, /repeats/],
    [uniq("b"), { frequency: 5 }, /service_name/],
    [uniq("b"), { frequency: 5, service_name: "no_such_service" }, /no_such_service/],
    [uniq("b"), { frequency: 5, service_name: rec.name, start_time: "tomorrow" }, /start_time/],
    [uniq("b"), { frequency: 5, service_name: rec.name, start_time: "2026-13-45" }, /start_time/],
    [uniq("b"), { frequency: 5, service_name: rec.name, start_time: 12345 }, /start_time/],
    [uniq("b"), { frequency: 5, service_name: rec.name, colour: "red" }, /colour/],
    [uniq("b"), { frequency: 5, service_name: rec.name, disabled: "no" }, /disabled/],
    ["bad name!", { frequency: 5, service_name: rec.name }, /name/],
    [existing, { frequency: 5, service_name: rec.name }, /already exists/],
  ];
  for (const [n, body, re] of bad) {
    const r = await s.dev.post(tp(s, encodeURIComponent(n)), body);
    isErr(t, r, 400, `${n} ${JSON.stringify(body)}`);
    t.match(`${r.body?.error?.detail}`, re, `detail matches ${re}`);
  }
  isErr(t, await s.dev.post(tp(s, uniq("arr")), [1]), 400, "an array body");
  isErr(t, await s.dev.put(tp(s, existing), { frequency: 0 }), 400, "update with a bad frequency");
  t.equal((await s.dev.get(tp(s, existing))).body.frequency, 3600, "a refused update changed nothing");
  const names = (await s.dev.get(tp(s))).body.map((x: any) => x.name);
  t.notOk(names.includes("bad name!"), "nothing refused got created");
  await ticked(s, 2);
  t.equal((await recorded(s, rec.tag)).length, 0, "no refused timer ever ran");
  ok200(t, await s.dev.del(tp(s, existing)));
});

t.test("timer: start_time now, frequency 1, repeats 3 -> exactly 3 runs", async (t) => {
  const rec = await recorder(s);
  const name = uniq("three");
  const t0 = Date.now();
  const c = await s.dev.post(tp(s, name), { frequency: 1, repeats: 3, start_time: "now", service_name: rec.name });
  ok200(t, c, "create with start_time now");
  t.ok(Math.abs(Date.parse(c.body.start_time) - t0) < 5000, `"now" is stored as the current time (${c.body.start_time})`);
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 1, 4000), "the first run comes promptly");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 3, 8000), "three runs");
  await ticked(s, 2);
  const got = await recorded(s, rec.tag);
  t.equal(got.length, 3, "exactly three, no more");
  // one run a period, not all at once: the runs' own clock reads (a run waiting for a worker on a
  // loaded machine comes late, the next on time: single gaps vary, two periods hold)
  const span = got[2]!.at - got[0]!.at;
  t.ok(span >= 1_000, `three runs span about two periods (${span} ms: ${got.map((g) => g.at - got[0]!.at).join(", ")})`);
  t.same(got.map((e) => e.params.timer), [name, name, name], "params.timer names the timer");
  t.same(got.map((e) => e.params.runs), [1, 2, 3], "params.runs counts");
  const g = await s.dev.get(tp(s, name));
  t.equal(g.body.repeats, 3, "the timer is still there with its settings");
  ok200(t, await s.dev.del(tp(s, name)));
});

t.test("timer: repeats -1 keeps firing; disabled stops it", async (t) => {
  const rec = await recorder(s);
  const name = uniq("forever");
  ok200(t, await s.dev.post(tp(s, name), { frequency: 1, repeats: -1, start_time: "Now", service_name: rec.name }), "create (start_time \"Now\")");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 5, 10_000), "five runs and counting");
  const u = await s.dev.put(tp(s, name), { disabled: true });
  ok200(t, u, "disable");
  await ticked(s, 2); // a run already fired may still land
  const n = (await recorded(s, rec.tag)).length;
  await ticked(s, 2);
  t.equal((await recorded(s, rec.tag)).length, n, "disabled: no more runs");
  ok200(t, await s.dev.put(tp(s, name), { disabled: false }), "enable again");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length > n, 4000), "enabled: it runs again");
  ok200(t, await s.dev.del(tp(s, name)), "delete");
  await ticked(s, 2);
  const m = (await recorded(s, rec.tag)).length;
  await ticked(s, 2);
  t.equal((await recorded(s, rec.tag)).length, m, "deleted: no more runs");
});

t.test("timer: frequency 2 fires every ~2 s (no lost ticks)", async (t) => {
  const rec = await recorder(s);
  const name = uniq("cadence");
  ok200(t, await s.dev.post(tp(s, name), { frequency: 2, repeats: 5, start_time: "now", service_name: rec.name }));
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 5, 16_000), "five runs");
  const at = (await recorded(s, rec.tag)).map((e) => e.at);
  const gaps = at.slice(1).map((x, i) => x - at[i]!);
  t.ok(gaps.every((d) => d >= 1800), `never sooner than 2 s (gaps ${gaps.join(", ")} ms)`);
  t.ok(gaps.every((d) => d <= 2600), `and not a second late either (gaps ${gaps.join(", ")} ms)`);
  t.ok(at[at.length - 1]! - at[0]! <= 4 * 2000 + 1000, `five runs take about 8 s (${at[at.length - 1]! - at[0]!} ms)`);
  ok200(t, await s.dev.del(tp(s, name)));
});

t.test("timer: an RFC 3339 start_time in the future is waited for", async (t) => {
  const rec = await recorder(s);
  const name = uniq("later");
  const start = rfc3339In(3000);
  ok200(t, await s.dev.post(tp(s, name), { frequency: 1, repeats: 1, start_time: start, service_name: rec.name }));
  const startMs = Date.parse(start);
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 1, 10_000), "it runs");
  const got = await recorded(s, rec.tag);
  t.ok(got[0]!.at >= startMs - 50, `not before its start time (${got[0]!.at - startMs} ms after ${start})`);
  t.ok(got[0]!.at < startMs + 3000, "and soon after it");
  await ticked(s, 2);
  t.equal((await recorded(s, rec.tag)).length, 1, "repeats 1: once");
  // an offset start time is understood too
  const off = uniq("offset");
  const at = new Date(Date.now() + 2000);
  const local = new Date(at.getTime() + 2 * 3600_000).toISOString().replace(/\.\d{3}Z$/, "+02:00");
  const c = await s.dev.post(tp(s, off), { frequency: 1, repeats: 1, start_time: local, service_name: rec.name });
  ok200(t, c, `start_time with an offset (${local})`);
  t.ok(Math.abs(Date.parse(c.body.start_time) - Date.parse(local)) < 1000, "the same instant is stored");
  t.ok(await waitFor(async () => (await recorded(s, rec.tag)).length >= 2, 10_000), "and it runs");
  const second = (await recorded(s, rec.tag))[1];
  t.ok(second!.at >= Date.parse(local) - 1000, "not before its start");
});

t.test("timer survives a restart and keeps its frequency", async (t) => {
  let srv: Outpost = await startOutpost({ keepData: true });
  const dir = srv.dataDir;
  t.teardown(async () => { await srv.stop(); rmSync(dir, { recursive: true, force: true }); });
  const sys = await devWithSystem(srv, "timers-restart");
  const col = await collectionWith(sys, [["n", "int"], ["at", "float"]]);
  const name = uniq("tick");
  await service(sys, name, `function ${name}(req, resp) { ClearBlade.Collection({ collectionName: "${col.name}" }).create({ n: req.params.runs, at: Date.now() }, function () { resp.success(1); }); }`);
  ok200(t, await sys.dev.post(`/admin/triggers/timers/${sys.systemKey}/${name}`, { frequency: 2, repeats: -1, start_time: "now", service_name: name }), "create a timer every 2 s");
  const ticks = async (c: Client): Promise<number[]> => {
    const r = await c.get(`/api/v/1/data/${col.id}?query=${qs({ SORT: [{ ASC: "at" }], PAGESIZE: 0, PAGENUM: 0 })}`);
    if (r.status !== 200) throw new Error(`ticks: ${r.status} ${r.text}`);
    return r.body.DATA.map((x: any) => x.at as number);
  };
  t.ok(await waitFor(async () => (await ticks(sys.dev)).length >= 2, 8000), "it runs before the restart");
  const before = (await ticks(sys.dev)).length;

  await srv.stop();
  const down = Date.now();
  await sleep(1500);
  srv = await startOutpost({ dataDir: dir, keepData: true });
  const up = Date.now();
  const dev = new Client(srv.url, { "ClearBlade-DevToken": sys.devToken });
  const g = await dev.get(`/admin/triggers/timers/${sys.systemKey}/${name}`);
  ok200(t, g, "the timer is still defined after the restart");
  t.equal(g.body.frequency, 2);
  t.ok(await waitFor(async () => (await ticks(dev)).filter((x) => x >= up).length >= 3, 12_000), "it fires after the restart");
  const all = await ticks(dev);
  const after = all.filter((x) => x >= down);
  t.ok(all.length >= before + 3, `runs were added (${before} -> ${all.length})`);
  const gaps = after.slice(1).map((x, i) => x - after[i]!);
  // the runs' own clock reads: the first run on the new process's fresh workers can start late and
  // the next on time, so one gap shrinks; a catch-up burst would put runs within a few ms
  t.ok(gaps.every((d) => d >= 1000), `no burst after the restart: no two runs within 1 s (gaps ${gaps.join(", ")} ms)`);
  const mean = (after[after.length - 1]! - after[0]!) / gaps.length;
  t.ok(mean >= 1800, `never more often than every 2 s on average after the restart (${Math.round(mean)} ms; gaps ${gaps.join(", ")} ms)`);
  t.ok(gaps.every((d) => d <= 3500), `and still about every 2 s (gaps ${gaps.join(", ")} ms)`);
  const pre = all.filter((x) => x < down);
  if (pre.length && after.length) t.ok(after[0]! - pre[pre.length - 1]! >= 1800, "no catch-up burst right after the restart");
});
