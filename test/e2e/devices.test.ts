// Devices, black-box: the user routes /api/v/2/devices (plus /api/v/3 count and columns, /api/v/4
// connections), the developer routes /admin/devices, device key authentication and refresh,
// rotating keys, device roles, custom columns, bulk operations by query, live MQTT connections and
// permissions.
import mqtt from "mqtt";
import t, { type Test } from "tap";
import { Client, type DevSystem, type HttpResponse, devWithSystem, isEnvelope, newUser, request, startOutpost, uniq, sleep, isErr, ok200, qs } from "./harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s = await devWithSystem(o, "devices-a");
const s2 = await devWithSystem(o, "devices-b");

// ---- helpers ----------------------------------------------------------------------------------

const nowSec = () => Math.floor(Date.now() / 1000);

/** the error detail (or message) mentions `word` */
function detailHas(t: Test, r: HttpResponse, word: string, what = "") {
  const d = `${r.body?.error?.detail ?? ""} ${r.body?.error?.message ?? ""}`;
  t.ok(d.includes(word), `${what}: error names '${word}' (${d.slice(0, 200)})`);
}

const api = (sys: DevSystem) => `/api/v/2/devices/${sys.systemKey}`;
const adm = (sys: DevSystem) => `/admin/devices/${sys.systemKey}`;
const one = (sys: DevSystem, name: string, base: "api" | "admin" = "api") => `${base === "api" ? api(sys) : adm(sys)}/${encodeURIComponent(name)}`;

async function createDevice(sys: DevSystem, name: string, body: Record<string, unknown> = {}) {
  const r = await sys.dev.post(one(sys, name, "admin"), { type: "sensor", state: "new", active_key: `${name}-key`, ...body });
  if (r.status !== 200) throw new Error(`create device ${name}: ${r.status} ${r.text}`);
  return r.body;
}

const deviceAuth = (sys: DevSystem, deviceName: string, activeKey: string) =>
  request(o.url, "POST", `${api(sys)}/auth`, { body: { deviceName, activeKey } });

async function deviceToken(sys: DevSystem, name: string, key = `${name}-key`): Promise<string> {
  const r = await deviceAuth(sys, name, key);
  if (r.status !== 200) throw new Error(`device auth ${name}: ${r.status} ${r.text}`);
  return r.body.deviceToken;
}
const asDevice = (token: string) => new Client(o.url, { "ClearBlade-DeviceToken": token });

async function createRole(sys: DevSystem, body: Record<string, unknown>): Promise<string> {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, body);
  if (r.status !== 200) throw new Error(`create role: ${r.status} ${r.text}`);
  return r.body.role_id;
}

/** A user of `sys` whose only extra role grants `devices` at `level` (0 = no role). */
async function userWith(sys: DevSystem, level: number) {
  const u = await newUser(sys);
  if (level > 0) {
    const roleId = await createRole(sys, { name: uniq("Dev"), devices: { permissions: level } });
    const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [roleId] } } });
    if (r.status !== 200) throw new Error(`user roles: ${r.status} ${r.text}`);
  }
  const a = await sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password });
  if (a.status !== 200) throw new Error(`user auth: ${a.status} ${a.text}`);
  return new Client(o.url, { "ClearBlade-UserToken": a.body.user_token });
}

const mqttUrl = () => `mqtt://127.0.0.1:${o.mqttPort}`;
function mqttConnect(token: string, systemKey: string, clientId: string): Promise<mqtt.MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(mqttUrl(), { username: token, password: systemKey, clientId, reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4 });
    c.once("connect", () => res(c));
    c.once("error", (e) => { c.end(true); rej(e); });
  });
}
const mqttEnd = (c: mqtt.MqttClient) => new Promise<void>((r) => c.end(false, {}, () => r()));

/** Polls `get` until `ok` holds or ~5 s pass; returns the last value. */
async function eventually<T>(get: () => Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  let v = await get();
  while (!ok(v) && Date.now() < until) { await sleep(50); v = await get(); }
  return v;
}

/** No key material or internal storage leaks into a device record. */
function noSecrets(t: Test, rec: any, key: string | undefined, what: string) {
  const text = JSON.stringify(rec);
  if (key) t.notOk(text.includes(key), `${what}: the key never appears`);
  t.notOk(/hash/i.test(Object.keys(rec ?? {}).join(",")), `${what}: no hash fields`);
  t.notOk("active_key" in (rec ?? {}) && rec.active_key, `${what}: active_key is write-only`);
}

// ---- create and read --------------------------------------------------------------------------

t.test("POST /admin/devices/{sk}/{name}: the device record", async (t) => {
  const name = uniq("dev");
  const key = "given-key-" + uniq();
  const before = nowSec();
  const r = await s.dev.post(one(s, name, "admin"), {
    name, type: "thermostat", state: "idle", description: "hall", active_key: key, enabled: true, allow_key_auth: true, allow_certificate_auth: false,
  });
  ok200(t, r, "create");
  const d = r.body;
  t.equal(d.name, name);
  t.equal(d.type, "thermostat");
  t.equal(d.state, "idle");
  t.equal(d.description, "hall");
  t.equal(d.enabled, true, "enabled is a boolean");
  t.equal(d.allow_key_auth, true);
  t.equal(d.allow_certificate_auth, false);
  t.equal(d.device_key, `${s.systemKey} :: ${name}`, "device_key is '<systemKey> :: <name>'");
  t.equal(d.system_key, s.systemKey);
  t.equal(d.has_keys, false);
  t.ok(Number.isInteger(d.created_date), "created_date is an integer");
  t.ok(d.created_date >= before - 2 && d.created_date <= nowSec() + 2, `created_date is now in unix seconds (${d.created_date})`);
  t.ok(Number.isInteger(d.last_active_date), "last_active_date is an integer");
  t.ok(d.last_active_date >= before - 2 && d.last_active_date <= nowSec() + 2, "last_active_date in unix seconds");
  noSecrets(t, d, key, "create response with a given key");

  for (const [what, c, path] of [
    ["developer path", s.dev, one(s, name, "admin")],
    ["user path with a dev token", s.dev, one(s, name)],
    ["Platform-DevToken header", new Client(o.url, { "Platform-DevToken": s.devToken }), one(s, name, "admin")],
  ] as const) {
    const g = await c.get(path);
    ok200(t, g, `GET (${what})`);
    t.equal(g.body.name, name, `${what}: name`);
    t.equal(g.body.device_key, d.device_key, `${what}: device_key`);
    t.equal(g.body.created_date, d.created_date, `${what}: created_date`);
    t.equal(g.body.state, "idle", `${what}: state`);
    noSecrets(t, g.body, key, `GET ${what}`);
  }
  ok200(t, await deviceAuth(s, name, key), "the given key authenticates");
  isErr(t, await s.dev.get(one(s, uniq("missing"), "admin")), 404, undefined, "GET a missing device");
  isErr(t, await s.dev.get(one(s, uniq("missing"))), 404, undefined, "GET a missing device (user path)");
});

t.test("POST /api/v/2/devices/{sk}/{name} without a key: a generated key is shown once", async (t) => {
  const creator = await userWith(s, 15);
  const name = uniq("gen");
  const r = await creator.post(one(s, name), { name, type: "t", state: "s", enabled: true, allow_key_auth: true });
  ok200(t, r, "create with a user token holding devices:15");
  t.type(r.body.active_key, "string", "the generated key is returned");
  t.ok(r.body.active_key.length >= 6, "at least 6 characters");
  t.equal(r.body.device_key, `${s.systemKey} :: ${name}`);
  const key = r.body.active_key as string;
  const a = await deviceAuth(s, name, key);
  ok200(t, a, "the generated key authenticates");
  const g = await creator.get(one(s, name));
  ok200(t, g);
  noSecrets(t, g.body, key, "GET after a generated key");
  const l = await creator.get(`${api(s)}?query=${qs({ FILTERS: [[{ EQ: [{ name }] }]] })}`);
  ok200(t, l);
  t.equal(l.body.length, 1);
  noSecrets(t, l.body[0], key, "list after a generated key");

  // defaults when only the name is given
  const bare = uniq("bare");
  const b = await s.dev.post(one(s, bare, "admin"), {});
  ok200(t, b, "create with an empty body");
  t.equal(b.body.name, bare);
  t.equal(b.body.enabled, true, "enabled by default");
  t.equal(b.body.allow_key_auth, true, "key auth allowed by default");
  t.type(b.body.active_key, "string", "a key is generated");
  ok200(t, await deviceAuth(s, bare, b.body.active_key), "and works");
});

t.test("create failures", async (t) => {
  const name = uniq("dup");
  await createDevice(s, name);
  isErr(t, await s.dev.post(one(s, name, "admin"), { active_key: "another-key" }), 400, undefined, "duplicate (developer path)");
  isErr(t, await s.dev.post(one(s, name), { active_key: "another-key" }), 400, undefined, "duplicate (user path)");

  const bad: [string, unknown, string][] = [
    [uniq("short"), { active_key: "abc" }, "active_key shorter than 6"],
    [uniq("short"), { active_key: "" }, "empty active_key"],
    [uniq("numkey"), { active_key: 12345678 }, "numeric active_key"],
    [uniq("body"), { name: uniq("other") }, "body name differs from the path name"],
    [uniq("unk"), { nosuchfield: 1 }, "unknown field"],
    [uniq("en"), { enabled: "yes" }, "enabled not a boolean"],
    [uniq("ak"), { allow_key_auth: 3 }, "allow_key_auth not a boolean"],
    [uniq("st"), { state: 5 }, "state not a string"],
    [uniq("ty"), { type: { a: 1 } }, "type not a string"],
    [uniq("arr"), [{ name: "x" }], "array body"],
    [uniq("json"), "{not json", "malformed JSON"],
  ];
  for (const [n, body, what] of bad) {
    isErr(t, await s.dev.post(one(s, n, "admin"), body), 400, undefined, what);
    isErr(t, await s.dev.get(one(s, n, "admin")), 404, undefined, `${what}: nothing was created`);
  }
  const unk = await s.dev.post(one(s, uniq("unk2"), "admin"), { colour_of_sky: "blue" });
  detailHas(t, unk, "colour_of_sky", "unknown field");

  for (const n of ["has space", "-leading-dash", "semi;colon", "x".repeat(200), "dollar$", "quote'"]) {
    isErr(t, await s.dev.post(`${adm(s)}/${encodeURIComponent(n)}`, { active_key: "valid-key" }), 400, undefined, `invalid name ${JSON.stringify(n.slice(0, 20))}`);
  }
  isErr(t, await request(o.url, "POST", one(s, uniq("notoken")), { body: {} }), 401, undefined, "no token");
  isErr(t, await new Client(o.url, { "ClearBlade-UserToken": "not-a-token" }).post(one(s, uniq("badtoken")), {}), 400, undefined, "invalid token");
});

// ---- custom columns ---------------------------------------------------------------------------

t.test("device columns: list, add, type checks, delete", async (t) => {
  const c = await devWithSystem(o, "devices-cols");
  const colsPath = `/admin/devices/${c.systemKey}/columns`;
  const check = (list: any[], what: string) => {
    t.ok(Array.isArray(list), `${what}: an array`);
    for (const col of list) {
      t.ok(typeof col.ColumnName === "string" && typeof col.ColumnType === "string" && typeof col.PK === "boolean" && typeof col.UserDefined === "boolean",
        `${what}: ${col.ColumnName} has ColumnName, ColumnType, PK, UserDefined`);
    }
    return new Map(list.map((x) => [x.ColumnName, x]));
  };
  let cols = check((await c.dev.get(colsPath)).body, "initial");
  for (const n of ["name", "type", "state", "description", "enabled", "allow_key_auth"]) {
    t.ok(cols.has(n), `built-in column ${n}`);
    t.equal(cols.get(n)?.UserDefined, false, `${n} is not user-defined`);
  }
  t.equal(cols.get("name")?.PK, true, "name is the primary key");
  t.notOk([...cols.values()].some((x) => x.UserDefined), "no user-defined columns yet");
  t.notOk(cols.has("active_key"), "the write-only key is not a column");

  for (const [column_name, type] of [["temp_c", "int"], ["label", "string"], ["vip", "bool"], ["ratio", "float"]]) {
    ok200(t, await c.dev.post(colsPath, { column_name, type }), `add column ${column_name} ${type}`);
  }
  cols = check((await c.dev.get(colsPath)).body, "after adds");
  for (const [n, ty] of [["temp_c", "int"], ["label", "string"], ["vip", "bool"], ["ratio", "float"]]) {
    t.equal(cols.get(n)?.UserDefined, true, `${n} is user-defined`);
    t.equal(cols.get(n)?.ColumnType, ty, `${n} is ${ty}`);
    t.equal(cols.get(n)?.PK, false);
  }
  const v3 = await c.dev.get(`/api/v/3/devices/${c.systemKey}/columns`);
  ok200(t, v3, "GET /api/v/3/devices/{sk}/columns");
  t.same(v3.body, (await c.dev.get(colsPath)).body, "the /api/v/3 listing matches the admin listing");

  isErr(t, await c.dev.post(colsPath, { column_name: "label", type: "string" }), 400, undefined, "duplicate column");
  isErr(t, await c.dev.post(colsPath, { column_name: "state", type: "int" }), 400, undefined, "a built-in column name with another type");
  isErr(t, await c.dev.post(colsPath, { column_name: "weird", type: "nonsense" }), 400, undefined, "unknown type");
  isErr(t, await c.dev.post(colsPath, { column_name: "bad name; DROP TABLE devices", type: "string" }), 400, undefined, "invalid column name");
  isErr(t, await c.dev.post(colsPath, { type: "string" }), 400, undefined, "no column name");

  // values are type-checked, with the column named in the error
  const typed = uniq("typed");
  const bad: [Record<string, unknown>, string][] = [
    [{ temp_c: "hot" }, "temp_c"], [{ temp_c: 1.5 }, "temp_c"], [{ label: 5 }, "label"], [{ vip: "maybe" }, "vip"], [{ ratio: "x" }, "ratio"],
  ];
  for (const [body, col] of bad) {
    const r = await c.dev.post(one(c, typed, "admin"), { active_key: "typed-key", ...body });
    isErr(t, r, 400, undefined, `create with bad ${col} ${JSON.stringify(body[col])}`);
    detailHas(t, r, col, `bad ${col}`);
  }
  isErr(t, await c.dev.get(one(c, typed, "admin")), 404, undefined, "nothing created by the bad bodies");

  const d = await c.dev.post(one(c, typed, "admin"), { active_key: "typed-key", temp_c: 21, label: "kitchen", vip: true });
  ok200(t, d, "create with custom values");
  t.equal(d.body.temp_c, 21);
  t.equal(d.body.label, "kitchen");
  t.equal(d.body.vip, true);
  t.equal(d.body.ratio, null, "an unset custom column is null");
  const g = await c.dev.get(one(c, typed));
  t.same([g.body.temp_c, g.body.label, g.body.vip, g.body.ratio], [21, "kitchen", true, null], "read back");
  const u = await c.dev.put(one(c, typed), { temp_c: "warm" });
  isErr(t, u, 400, undefined, "update with a bad custom value");
  detailHas(t, u, "temp_c", "update with bad temp_c");
  t.equal((await c.dev.get(one(c, typed))).body.temp_c, 21, "unchanged after the failed update");

  // delete a column: it disappears from the listing and the records
  isErr(t, await c.dev.del(colsPath), 400, undefined, "DELETE columns without column_name");
  ok200(t, await c.dev.del(`${colsPath}?column_name=label`), "DELETE ?column_name=label");
  cols = check((await c.dev.get(colsPath)).body, "after delete");
  t.notOk(cols.has("label"), "label is gone from the columns");
  t.ok(cols.has("temp_c"), "other columns stay");
  const g2 = await c.dev.get(one(c, typed));
  t.notOk("label" in g2.body, "label is gone from the record");
  t.equal(g2.body.temp_c, 21, "other values stay");
  isErr(t, await c.dev.post(one(c, uniq("after"), "admin"), { label: "x" }), 400, undefined, "a deleted column is an unknown field");
  isErr(t, await c.dev.del(`${colsPath}?column_name=label`), 404, undefined, "deleting it again");
  isErr(t, await c.dev.del(`${colsPath}?column_name=state`), 400, undefined, "a built-in column cannot be deleted");
  ok200(t, await c.dev.post(colsPath, { column_name: "label", type: "string" }), "re-add the column");
  t.equal((await c.dev.get(one(c, typed))).body.label, null, "old values do not come back");

  // only the system's developer manages columns; readers may list them
  const reader = await userWith(c, 1);
  ok200(t, await reader.get(`/api/v/3/devices/${c.systemKey}/columns`), "a user with devices:1 lists columns");
  const writer = await userWith(c, 15);
  isErr(t, await writer.post(colsPath, { column_name: "sneaky", type: "string" }), 401, undefined, "a user cannot add columns");
  isErr(t, await writer.del(`${colsPath}?column_name=temp_c`), 401, undefined, "a user cannot delete columns");
  isErr(t, await s.dev.post(colsPath, { column_name: "sneaky", type: "string" }), 401, undefined, "another developer cannot add columns");
  isErr(t, await s.dev.del(`${colsPath}?column_name=temp_c`), 401, undefined, "another developer cannot delete columns");
  isErr(t, await s.dev.get(colsPath), 401, undefined, "another developer cannot list columns");
  t.ok((await c.dev.get(colsPath)).body.some((x: any) => x.ColumnName === "temp_c"), "temp_c survived");
  t.notOk((await c.dev.get(colsPath)).body.some((x: any) => x.ColumnName === "sneaky"), "no sneaky column");
  // columns are per system
  t.notOk((await s.dev.get(`${adm(s)}/columns`)).body.some((x: any) => x.ColumnName === "temp_c"), "another system has no temp_c");
});

// ---- update and delete ------------------------------------------------------------------------

t.test("PUT /api/v/2/devices/{sk}/{name} and /admin/devices/{sk}/{name}", async (t) => {
  const name = uniq("upd");
  const created = await createDevice(s, name, { description: "before" });
  const r = await s.dev.put(one(s, name), { state: "running", description: "after", causeTrigger: true });
  ok200(t, r, "update state and description with causeTrigger");
  t.equal(r.body.state, "running", "the response is the updated record");
  t.equal(r.body.description, "after");
  t.equal(r.body.name, name);
  t.equal(r.body.device_key, `${s.systemKey} :: ${name}`);
  t.notOk("causeTrigger" in r.body, "causeTrigger is not stored");
  const g = await s.dev.get(one(s, name));
  t.equal(g.body.state, "running");
  t.equal(g.body.description, "after");
  t.equal(g.body.type, "sensor", "untouched fields stay");
  t.equal(g.body.created_date, created.created_date, "created_date does not change");

  const q = await s.dev.put(one(s, name, "admin"), { state: "quiet", causeTrigger: false });
  ok200(t, q, "update on the developer path with causeTrigger:false");
  t.equal((await s.dev.get(one(s, name))).body.state, "quiet");

  const rn = await s.dev.put(one(s, name), { name: uniq("renamed"), state: "x" });
  isErr(t, rn, 400, undefined, "renaming");
  detailHas(t, rn, "Not allowed to update field 'name'", "renaming");
  t.equal((await s.dev.get(one(s, name))).body.state, "quiet", "nothing changed by the refused rename");

  isErr(t, await s.dev.put(one(s, name), { bogus: 1 }), 400, undefined, "unknown field");
  isErr(t, await s.dev.put(one(s, name), { state: 7 }), 400, undefined, "state not a string");
  isErr(t, await s.dev.put(one(s, name), { enabled: "sometimes" }), 400, undefined, "enabled not a boolean");
  isErr(t, await s.dev.put(one(s, name), { active_key: "abc" }), 400, undefined, "too short active_key");
  isErr(t, await s.dev.put(one(s, name), "[oops"), 400, undefined, "malformed JSON");
  isErr(t, await s.dev.put(one(s, uniq("nope")), { state: "x" }), 404, undefined, "update a missing device");

  const user = await userWith(s, 4);
  const ur = await user.put(one(s, name), { state: "by-user" });
  ok200(t, ur, "a user with devices:4 updates");
  t.equal(ur.body.state, "by-user");
});

t.test("DELETE /api/v/2/devices/{sk}/{name} and /admin/devices/{sk}/{name}", async (t) => {
  for (const base of ["api", "admin"] as const) {
    const name = uniq("del");
    await createDevice(s, name);
    const tok = await deviceToken(s, name);
    ok200(t, await asDevice(tok).get(one(s, name)), `${base}: the device's token works before`);
    const r = await s.dev.del(one(s, name, base));
    ok200(t, r, `${base}: delete`);
    isErr(t, await s.dev.get(one(s, name)), 404, undefined, `${base}: gone`);
    isErr(t, await deviceAuth(s, name, `${name}-key`), 401, undefined, `${base}: its key no longer authenticates`);
    isErr(t, await asDevice(tok).get(one(s, name)), 400, undefined, `${base}: its token no longer works`);
    isErr(t, await s.dev.del(one(s, name, base)), 404, undefined, `${base}: deleting again`);
    // the name can be used again, and the new device does not inherit anything
    const again = await createDevice(s, name, { active_key: "fresh-key-123" });
    t.equal(again.name, name, `${base}: the name can be reused`);
    isErr(t, await deviceAuth(s, name, `${name}-key`), 401, undefined, `${base}: the old key does not work on the new device`);
  }
  const user = await userWith(s, 8);
  const name = uniq("udel");
  await createDevice(s, name);
  ok200(t, await user.del(one(s, name)), "a user with devices:8 deletes");
  isErr(t, await s.dev.get(one(s, name)), 404);
});

// ---- lists, queries, count --------------------------------------------------------------------

t.test("GET /api/v/2/devices/{sk}: filters, sort, paging, SELECTCOLUMNS; GET /api/v/3/.../count", async (t) => {
  const L = await devWithSystem(o, "devices-list");
  ok200(t, await L.dev.post(`${adm(L)}/columns`, { column_name: "rank", type: "int" }));
  const specs = [
    { name: "alpha", type: "meter", state: "on", rank: 5 },
    { name: "bravo", type: "meter", state: "off", rank: 1 },
    { name: "charlie", type: "valve", state: "on", rank: 9 },
    { name: "delta", type: "valve", state: "off", rank: 3 },
    { name: "echo", type: "pump", state: "on", rank: 7 },
  ];
  for (const d of specs) await createDevice(L, d.name, { ...d, active_key: `${d.name}-key` });
  const names = (r: HttpResponse) => (r.body as any[]).map((x) => x.name);
  const byName = (xs: string[]) => [...xs].sort();

  for (const [what, path, c] of [["user path", api(L), L.dev], ["developer path", adm(L), L.dev]] as const) {
    const all = await c.get(path);
    ok200(t, all, `${what}: list everything`);
    t.ok(Array.isArray(all.body), `${what}: a bare array`);
    t.same(byName(names(all)), specs.map((d) => d.name), `${what}: every device`);
    for (const d of all.body) {
      t.equal(d.device_key, `${L.systemKey} :: ${d.name}`, `${what}: ${d.name} device_key`);
      noSecrets(t, d, `${d.name}-key`, `${what}: ${d.name}`);
    }
  }
  const get = (q: unknown) => L.dev.get(`${api(L)}?query=${qs(q)}`);
  let r = await get({ FILTERS: [[{ EQ: [{ type: "meter" }] }]] });
  ok200(t, r, "EQ");
  t.same(byName(names(r)), ["alpha", "bravo"], "EQ type");
  r = await get({ FILTERS: [[{ EQ: [{ type: "valve" }] }, { EQ: [{ state: "on" }] }]] });
  t.same(names(r), ["charlie"], "AND inside a group");
  r = await get({ FILTERS: [[{ EQ: [{ type: "pump" }] }], [{ EQ: [{ name: "bravo" }] }]] });
  t.same(byName(names(r)), ["bravo", "echo"], "OR of groups");
  r = await get({ FILTERS: [[{ NEQ: [{ state: "on" }] }]] });
  t.same(byName(names(r)), ["bravo", "delta"], "NEQ");
  r = await get({ FILTERS: [[{ GT: [{ rank: 4 }] }]] });
  t.same(byName(names(r)), ["alpha", "charlie", "echo"], "GT on a custom int column");
  r = await get([[{ EQ: [{ type: "valve" }] }]]);
  ok200(t, r, "a bare FILTERS array as the query");
  t.same(byName(names(r)), ["charlie", "delta"], "bare FILTERS array");
  r = await get({ SORT: [{ DESC: "rank" }] });
  t.same(names(r), ["charlie", "echo", "alpha", "delta", "bravo"], "SORT DESC rank");
  r = await get({ SORT: [{ ASC: "name" }] });
  t.same(names(r), ["alpha", "bravo", "charlie", "delta", "echo"], "SORT ASC name");
  r = await get({ SORT: [{ ASC: "name" }], PAGESIZE: 2, PAGENUM: 2 });
  t.same(names(r), ["charlie", "delta"], "PAGESIZE 2 PAGENUM 2");
  r = await get({ SORT: [{ ASC: "name" }], PAGESIZE: 2, PAGENUM: 3 });
  t.same(names(r), ["echo"], "last page");
  r = await get({ SORT: [{ ASC: "name" }], PAGESIZE: 0, PAGENUM: 0 });
  t.equal(r.body.length, 5, "PAGESIZE 0 PAGENUM 0: everything");
  r = await get({ FILTERS: [[{ EQ: [{ type: "meter" }] }]], SORT: [{ ASC: "name" }], SELECTCOLUMNS: ["name", "rank"] });
  ok200(t, r, "SELECTCOLUMNS");
  t.same(r.body, [{ name: "alpha", rank: 5 }, { name: "bravo", rank: 1 }], "only the selected columns");
  r = await L.dev.get(`${adm(L)}?query=${qs({ FILTERS: [[{ EQ: [{ state: "off" }] }]] })}`);
  t.same(byName(names(r)), ["bravo", "delta"], "a filter on the developer path");

  isErr(t, await get({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] }), 400, undefined, "filter on an unknown column");
  isErr(t, await get({ SORT: [{ DESC: "nosuch" }] }), 400, undefined, "sort on an unknown column");
  isErr(t, await get({ SELECTCOLUMNS: ["name", "nosuch"] }), 400, undefined, "select an unknown column");
  isErr(t, await get({ FILTERS: [[{ LIKE: [{ name: "a" }] }]] }), 400, undefined, "unknown operator");
  isErr(t, await get({ PAGESIZE: -1 }), 400, undefined, "negative PAGESIZE");
  isErr(t, await L.dev.get(`${api(L)}?query=${encodeURIComponent("{nope")}`), 400, undefined, "query not JSON");

  // count
  for (const c of [L.dev, await userWith(L, 1)]) {
    const n = await c.get(`/api/v/3/devices/${L.systemKey}/count`);
    ok200(t, n, "count");
    t.same(n.body, { count: 5 }, "{count} of every device");
  }
  const nq = await L.dev.get(`/api/v/3/devices/${L.systemKey}/count?query=${qs({ FILTERS: [[{ EQ: [{ state: "on" }] }]] })}`);
  t.same(nq.body, { count: 3 }, "count with a filter");
  const nb = await L.dev.get(`/api/v/3/devices/${L.systemKey}/count?query=${qs([[{ LT: [{ rank: 4 }] }]])}`);
  t.same(nb.body, { count: 2 }, "count with a bare FILTERS array");
  isErr(t, await L.dev.get(`/api/v/3/devices/${L.systemKey}/count?query=${qs({ FILTERS: [[{ EQ: [{ nosuch: 1 }] }]] })}`), 400, undefined, "count: unknown column");
  t.same((await s2.dev.get(`/api/v/3/devices/${s2.systemKey}/count`)).body.count, (await s2.dev.get(api(s2))).body.length, "count agrees with the listing elsewhere");
});

// ---- bulk update and delete -------------------------------------------------------------------

t.test("PUT /api/v/2/devices/{sk} {query, $set} -> {DATA, TOTAL}", async (t) => {
  const B = await devWithSystem(o, "devices-bulk");
  ok200(t, await B.dev.post(`${adm(B)}/columns`, { column_name: "zone", type: "string" }));
  for (const [n, type] of [["b1", "lamp"], ["b2", "lamp"], ["b3", "lamp"], ["b4", "fan"]]) await createDevice(B, n!, { type });

  const r = await B.dev.put(api(B), { query: [[{ EQ: [{ type: "lamp" }] }]], $set: { state: "dim", zone: "north" } });
  ok200(t, r, "bulk with a bare FILTERS array");
  t.equal(r.body.TOTAL, 3, "TOTAL");
  t.ok(Array.isArray(r.body.DATA), "DATA is an array");
  t.same(r.body.DATA.map((d: any) => d.name).sort(), ["b1", "b2", "b3"], "DATA has the updated devices");
  t.ok(r.body.DATA.every((d: any) => d.state === "dim" && d.zone === "north"), "DATA shows the new values");
  t.equal((await B.dev.get(one(B, "b2"))).body.state, "dim", "stored");
  t.equal((await B.dev.get(one(B, "b4"))).body.state, "new", "a non-matching device is untouched");
  t.equal((await B.dev.get(one(B, "b4"))).body.zone, null);

  const full = await B.dev.put(adm(B), { query: { FILTERS: [[{ EQ: [{ zone: "north" }] }, { NEQ: [{ name: "b1" }] }]] }, $set: { description: "full query" } });
  ok200(t, full, "bulk with a full query object on the developer path");
  t.equal(full.body.TOTAL, 2);
  t.same(full.body.DATA.map((d: any) => d.name).sort(), ["b2", "b3"]);
  t.equal((await B.dev.get(one(B, "b1"))).body.description, "", "b1 excluded by NEQ");

  const none = await B.dev.put(api(B), { query: [[{ EQ: [{ type: "toaster" }] }]], $set: { state: "x" } });
  ok200(t, none, "bulk matching nothing");
  t.same(none.body, { DATA: [], TOTAL: 0 });

  const user = await userWith(B, 4);
  const u = await user.put(api(B), { query: { FILTERS: [[{ EQ: [{ name: "b4" }] }]] }, $set: { state: "spinning" } });
  ok200(t, u, "a user with devices:4");
  t.equal(u.body.TOTAL, 1);
  t.equal((await B.dev.get(one(B, "b4"))).body.state, "spinning");

  const before = (await B.dev.get(`${api(B)}?query=${qs({ SORT: [{ ASC: "name" }] })}`)).body;
  const bad: [unknown, string][] = [
    [{ $set: { state: "x" } }, "no query"],
    [{ query: [], $set: {} }, "empty $set"],
    [{ query: [] }, "no $set"],
    [{ query: [], $set: { name: "renamed" } }, "$set name"],
    [{ query: [], $set: { zone: 5 } }, "$set a bad custom value"],
    [{ query: [], $set: { nosuch: 1 } }, "$set an unknown column"],
    [{ query: [[{ EQ: [{ nosuch: 1 }] }]], $set: { state: "x" } }, "query on an unknown column"],
    [{ query: [], $set: { state: "x" }, extra: 1 }, "unknown body field"],
    [{ query: "{broken", $set: { state: "x" } }, "query string not JSON"],
  ];
  for (const [body, what] of bad) isErr(t, await B.dev.put(api(B), body), 400, undefined, `bulk update: ${what}`);
  t.same((await B.dev.get(`${api(B)}?query=${qs({ SORT: [{ ASC: "name" }] })}`)).body, before, "the failed bulk updates changed nothing");

  // bulk disabling kills the tokens of the matched devices
  const tok = await deviceToken(B, "b1");
  const tok4 = await deviceToken(B, "b4");
  ok200(t, await B.dev.put(api(B), { query: [[{ EQ: [{ name: "b1" }] }]], $set: { enabled: false } }), "bulk disable");
  isErr(t, await asDevice(tok).get(one(B, "b1")), 400, undefined, "the disabled device's token is dead");
  isErr(t, await deviceAuth(B, "b1", "b1-key"), 401, undefined, "and it cannot authenticate");
  ok200(t, await asDevice(tok4).get(one(B, "b4")), "another device's token is unaffected");
});

t.test("DELETE /api/v/2/devices/{sk}?query=", async (t) => {
  const D = await devWithSystem(o, "devices-bulkdel");
  for (const [n, type] of [["d1", "old"], ["d2", "old"], ["d3", "new"], ["d4", "new"], ["d5", "keep"]]) await createDevice(D, n!, { type });
  const names = async () => ((await D.dev.get(api(D))).body as any[]).map((d) => d.name).sort();

  isErr(t, await D.dev.del(api(D)), 400, undefined, "no query");
  isErr(t, await D.dev.del(`${api(D)}?query=`), 400, undefined, "empty query");
  isErr(t, await D.dev.del(`${api(D)}?query=${encodeURIComponent("{bad")}`), 400, undefined, "query not JSON");
  isErr(t, await D.dev.del(`${api(D)}?query=${qs([[{ EQ: [{ nosuch: 1 }] }]])}`), 400, undefined, "unknown column");
  t.same(await names(), ["d1", "d2", "d3", "d4", "d5"], "nothing deleted by the failures");

  const tok = await deviceToken(D, "d1");
  ok200(t, await D.dev.del(`${api(D)}?query=${qs([[{ EQ: [{ type: "old" }] }]])}`), "delete with a bare FILTERS array");
  t.same(await names(), ["d3", "d4", "d5"], "the matching devices are gone");
  isErr(t, await asDevice(tok).get(one(D, "d1")), 400, undefined, "a deleted device's token is dead");
  ok200(t, await D.dev.del(`${adm(D)}?query=${qs({ FILTERS: [[{ EQ: [{ type: "new" }] }]] })}`), "delete with a full query object on the developer path");
  t.same(await names(), ["d5"]);
  ok200(t, await D.dev.del(`${api(D)}?query=${qs([[{ EQ: [{ type: "nothing" }] }]])}`), "a query matching nothing");
  t.same(await names(), ["d5"]);
  const user = await userWith(D, 8);
  ok200(t, await user.del(`${api(D)}?query=${qs([[{ EQ: [{ name: "d5" }] }]])}`), "a user with devices:8");
  t.same(await names(), []);
  t.same((await D.dev.get(`/api/v/3/devices/${D.systemKey}/count`)).body, { count: 0 });
});

// ---- device authentication --------------------------------------------------------------------

t.test("cb_ttl_override sets a device's token lifetime; the device cannot change its own", async (t) => {
  const name = uniq("ttl");
  await createDevice(s, name, { cb_ttl_override: 120 });
  let r = await deviceAuth(s, name, `${name}-key`);
  ok200(t, r, "auth");
  t.ok(Math.abs(r.body.expiresAt - (nowSec() + 120)) < 5, `expiresAt is about now + 120 s (${r.body.expiresAt - nowSec()})`);
  ok200(t, await s.dev.put(one(s, name, "admin"), { cb_ttl_override: -1 }), "-1: never expires");
  r = await deviceAuth(s, name, `${name}-key`);
  t.equal(r.body.expiresAt, -1, "a token that never expires says -1");
  const refreshed = await request(o.url, "POST", `${api(s)}/auth`, { body: { grant_type: "refresh_token", refresh_token: r.body.refreshToken, access_token: r.body.deviceToken } });
  ok200(t, refreshed, "refresh");
  t.equal(refreshed.body.expiresAt, -1, "a refreshed token keeps the override");
  ok200(t, await s.dev.put(one(s, name, "admin"), { cb_ttl_override: null }), "cleared");
  r = await deviceAuth(s, name, `${name}-key`);
  t.ok(r.body.expiresAt > nowSec() + 200, "back to the system's lifetime");
  const self = await request(o.url, "PUT", one(s, name), { headers: { "ClearBlade-DeviceToken": r.body.deviceToken }, body: { cb_ttl_override: -1 } });
  isErr(t, self, 401, undefined, "a device setting its own token lifetime");
});

t.test("POST /api/v/2/devices/{sk}/auth", async (t) => {
  const name = uniq("auth");
  const key = "auth-key-123";
  const created = await createDevice(s, name, { active_key: key });
  const before = nowSec();
  const r = await deviceAuth(s, name, key);
  ok200(t, r, "good key");
  t.equal(r.body.deviceName, name, "deviceName");
  t.type(r.body.deviceToken, "string", "deviceToken");
  t.ok(r.body.deviceToken.length > 10);
  t.type(r.body.refreshToken, "string", "refreshToken");
  t.type(r.body.expiresAt, "number", "expiresAt is a number");
  t.ok(r.body.expiresAt > before, "expiresAt is in the future");
  t.ok(r.body.expiresAt < before * 10, "expiresAt is unix seconds");
  const tok = r.body.deviceToken as string;

  for (const h of ["ClearBlade-DeviceToken", "Platform-UserToken", "ClearBlade-UserToken"]) {
    const g = await new Client(o.url, { [h]: tok }).get(one(s, name));
    ok200(t, g, `the token in ${h}`);
    t.equal(g.body.name, name, `${h}: own record`);
  }
  const g = await asDevice(tok).get(one(s, name));
  t.ok(g.body.last_active_date >= created.created_date, "last_active_date not before creation");
  const a2 = await deviceAuth(s, name, key);
  t.not(a2.body.deviceToken, tok, "each authentication issues a new token");
  ok200(t, await asDevice(tok).get(one(s, name)), "the first token still works");

  isErr(t, await deviceAuth(s, name, "wrong-key-123"), 401, undefined, "wrong key");
  isErr(t, await deviceAuth(s, name, key.toUpperCase()), 401, undefined, "key with another case");
  isErr(t, await deviceAuth(s, uniq("ghost"), key), 401, undefined, "unknown device");
  isErr(t, await deviceAuth(s2, name, key), 401, undefined, "right name and key at another system");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { deviceName: name } }), 400, undefined, "no activeKey");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { activeKey: key } }), 400, undefined, "no deviceName");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: "{oops" }), 400, undefined, "malformed JSON");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`), 400, undefined, "no body");
  const nosys = await request(o.url, "POST", `/api/v/2/devices/${"0".repeat(30)}/auth`, { body: { deviceName: name, activeKey: key } });
  t.ok([400, 401, 404].includes(nosys.status), `unknown system -> 400/401/404 (${nosys.status})`);
  t.ok(isEnvelope(nosys.body, nosys.status), "unknown system: envelope");
});

t.test("device refresh grant", async (t) => {
  const name = uniq("refr");
  await createDevice(s, name);
  const a = await deviceAuth(s, name, `${name}-key`);
  const body = { grant_type: "refresh_token", refresh_token: a.body.refreshToken, access_token: a.body.deviceToken };
  isErr(t, await request(o.url, "POST", `${api(s2)}/auth`, { body }), 401, undefined, "refresh at another system");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { ...body, grant_type: "password" } }), 400, undefined, "grant_type other than refresh_token");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { grant_type: "refresh_token", refresh_token: a.body.refreshToken } }), 400, undefined, "no access_token");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { ...body, refresh_token: "bogus" } }), 401, undefined, "unknown refresh token");
  ok200(t, await asDevice(a.body.deviceToken).get(one(s, name)), "the refused attempts left the session alone");

  const r = await request(o.url, "POST", `${api(s)}/auth`, { body });
  ok200(t, r, "refresh");
  t.equal(r.body.deviceName, name);
  t.type(r.body.deviceToken, "string");
  t.not(r.body.deviceToken, a.body.deviceToken, "a new token");
  t.type(r.body.refreshToken, "string");
  t.type(r.body.expiresAt, "number");
  t.ok(r.body.expiresAt > nowSec());
  const g = await asDevice(r.body.deviceToken).get(one(s, name));
  ok200(t, g, "the refreshed token works");
  t.equal(g.body.name, name, "for the same device");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body }), 401, undefined, "the same refresh token a second time");
  const r2 = await request(o.url, "POST", `${api(s)}/auth`, { body: { grant_type: "refresh_token", refresh_token: r.body.refreshToken, access_token: r.body.deviceToken } });
  ok200(t, r2, "the new refresh token works once");
});

t.test("disabled devices, allow_key_auth and key changes", async (t) => {
  const name = uniq("dis");
  await createDevice(s, name, { active_key: "first-key-1" });
  const first = await deviceAuth(s, name, "first-key-1");
  const tok = first.body.deviceToken as string;

  ok200(t, await s.dev.put(one(s, name), { enabled: false }), "disable");
  isErr(t, await request(o.url, "POST", `${api(s)}/auth`, { body: { grant_type: "refresh_token", refresh_token: first.body.refreshToken, access_token: tok } }),
    401, undefined, "a disabled device cannot refresh its old session");
  t.equal((await s.dev.get(one(s, name))).body.enabled, false);
  isErr(t, await deviceAuth(s, name, "first-key-1"), 401, undefined, "a disabled device cannot authenticate");
  isErr(t, await asDevice(tok).get(one(s, name)), 400, undefined, "disabling kills the existing token");
  ok200(t, await s.dev.put(one(s, name), { enabled: true }), "enable again");
  isErr(t, await asDevice(tok).get(one(s, name)), 400, undefined, "the killed token stays dead after re-enabling");
  const tok2 = await deviceToken(s, name, "first-key-1");
  ok200(t, await asDevice(tok2).get(one(s, name)), "a re-enabled device authenticates again");

  ok200(t, await s.dev.put(one(s, name), { allow_key_auth: false }), "allow_key_auth:false");
  isErr(t, await deviceAuth(s, name, "first-key-1"), 401, undefined, "key auth not allowed");
  ok200(t, await s.dev.put(one(s, name), { allow_key_auth: true }));
  ok200(t, await deviceAuth(s, name, "first-key-1"), "allowed again");

  const created = await s.dev.post(one(s, uniq("off"), "admin"), { active_key: "off-key-123", enabled: false });
  ok200(t, created, "create disabled");
  isErr(t, await deviceAuth(s, created.body.name, "off-key-123"), 401, undefined, "created disabled: no auth");
  const nokey = await s.dev.post(one(s, uniq("nokeyauth"), "admin"), { active_key: "nka-key-123", allow_key_auth: false });
  isErr(t, await deviceAuth(s, nokey.body.name, "nka-key-123"), 401, undefined, "created with allow_key_auth:false: no auth");

  const ch = await s.dev.put(one(s, name), { active_key: "second-key-2" });
  ok200(t, ch, "change the active_key");
  noSecrets(t, ch.body, "second-key-2", "update response");
  isErr(t, await deviceAuth(s, name, "first-key-1"), 401, undefined, "the old key fails");
  ok200(t, await deviceAuth(s, name, "second-key-2"), "the new key works");
});

t.test("what a device token may do", async (t) => {
  const me = uniq("self"), other = uniq("other");
  await createDevice(s, me);
  await createDevice(s, other);
  const tok = await deviceToken(s, me);
  const d = asDevice(tok);

  ok200(t, await d.get(one(s, me)), "read its own record");
  const up = await d.put(one(s, me), { state: "reported", description: "from the device" });
  ok200(t, up, "update its own state");
  t.equal(up.body.state, "reported");
  t.equal((await s.dev.get(one(s, me))).body.state, "reported", "stored");
  ok200(t, await new Client(o.url, { "Platform-UserToken": tok }).put(one(s, me), { state: "via-UT" }), "update with the token in Platform-UserToken");
  for (const [field, v] of [["enabled", false], ["allow_key_auth", false], ["active_key", "self-chosen-key"]] as const) {
    isErr(t, await d.put(one(s, me), { [field]: v }), 401, undefined, `a device cannot change its own ${field}`);
  }
  const rec = (await s.dev.get(one(s, me))).body;
  t.equal(rec.enabled, true, "still enabled");
  t.equal(rec.allow_key_auth, true, "key auth still allowed");
  ok200(t, await deviceAuth(s, me, `${me}-key`), "its key is unchanged");
  isErr(t, await d.put(one(s, me), { name: uniq("x") }), 400, undefined, "a device cannot rename itself");

  isErr(t, await d.get(one(s, other)), 401, undefined, "read another device");
  isErr(t, await d.put(one(s, other), { state: "hijacked" }), 401, undefined, "update another device");
  t.equal((await s.dev.get(one(s, other))).body.state, "new", "the other device is untouched");
  isErr(t, await d.get(api(s)), 401, undefined, "list devices");
  isErr(t, await d.get(`/api/v/3/devices/${s.systemKey}/count`), 401, undefined, "count devices");
  isErr(t, await d.post(one(s, uniq("spawn")), {}), 401, undefined, "create a device");
  isErr(t, await d.del(one(s, other)), 401, undefined, "delete another device");
  isErr(t, await d.del(one(s, me)), 401, undefined, "delete itself");
  isErr(t, await d.put(api(s), { query: [], $set: { state: "all" } }), 401, undefined, "bulk update");
  isErr(t, await d.del(`${api(s)}?query=${qs([])}`), 401, undefined, "bulk delete");
  isErr(t, await d.get(`/admin/devices/keys/${s.systemKey}/${me}`), 401, undefined, "read its rotating keys");
  isErr(t, await d.post(`/admin/devices/keys/${s.systemKey}/${me}`, { count: 2 }), 401, undefined, "create rotating keys");
  isErr(t, await d.put(`/admin/devices/roles/${s.systemKey}/${me}`, { add: ["Administrator"] }), 401, undefined, "change its own roles");
  isErr(t, await asDevice(tok).get(one(s2, me)), 401, undefined, "a token of system A at system B");
  ok200(t, await s.dev.get(one(s, other)), "everything still there");
});

t.test("disabling a device does not touch a same-named device of another system", async (t) => {
  const name = uniq("twin");
  await createDevice(s, name);
  await createDevice(s2, name);
  const a = await deviceToken(s, name), b = await deviceToken(s2, name);
  ok200(t, await s.dev.put(one(s, name), { enabled: false }), "disable A's device");
  isErr(t, await asDevice(a).get(one(s, name)), 400, undefined, "A's token is dead");
  ok200(t, await asDevice(b).get(one(s2, name)), "B's device with the same name keeps its token");
  ok200(t, await s.dev.del(one(s, name)), "delete A's device");
  const b2 = await deviceToken(s2, name);
  ok200(t, await asDevice(b2).get(one(s2, name)), "a fresh B token works");
  ok200(t, await s.dev.post(one(s, name, "admin"), { active_key: "twin-key-2" }));
  const a2 = await deviceToken(s, name, "twin-key-2");
  ok200(t, await s.dev.del(one(s, name)), "delete A's device again");
  isErr(t, await asDevice(a2).get(one(s, name)), 400, undefined, "A's new token died with its device");
  ok200(t, await asDevice(b2).get(one(s2, name)), "deleting A's device leaves B's token alone");
});

// ---- rotating keys ----------------------------------------------------------------------------

t.test("rotating keys: /admin/devices/keys/{sk}/{name}", async (t) => {
  const name = uniq("rot");
  await createDevice(s, name, { active_key: "original-key-1" });
  const kp = `/admin/devices/keys/${s.systemKey}/${name}`;

  const info0 = await s.dev.get(kp);
  ok200(t, info0, "GET with no keys");
  t.same(info0.body, { has_keys: false, count: 0 });

  const c = await s.dev.post(kp, { count: 3 });
  ok200(t, c, "POST {count:3}");
  t.ok(Array.isArray(c.body.keys), "keys is an array");
  t.equal(c.body.keys.length, 3, "three keys");
  t.ok(c.body.keys.every((k: unknown) => typeof k === "string" && (k as string).length >= 6), "keys are strings of at least 6 characters");
  t.equal(new Set(c.body.keys).size, 3, "all different");
  t.type(c.body.active_key, "string", "active_key");
  t.ok(c.body.keys.includes(c.body.active_key), "active_key is one of the keys");
  for (const [i, k] of c.body.keys.entries()) ok200(t, await deviceAuth(s, name, k), `key ${i} authenticates`);
  isErr(t, await deviceAuth(s, name, "original-key-1"), 401, undefined, "the replaced active key no longer works");
  t.same((await s.dev.get(kp)).body, { has_keys: true, count: 3 }, "GET after POST");
  t.equal((await s.dev.get(one(s, name))).body.has_keys, true, "has_keys on the record");
  noSecrets(t, (await s.dev.get(one(s, name))).body, c.body.keys[1], "record after rotating keys");

  const p = await s.dev.put(kp, {});
  ok200(t, p, "PUT rotates");
  t.equal(p.body.keys.length, 3, "as many keys as before");
  t.ok(p.body.keys.every((k: string) => !c.body.keys.includes(k)), "all new");
  for (const [i, k] of c.body.keys.entries()) isErr(t, await deviceAuth(s, name, k), 401, undefined, `old key ${i} fails after rotation`);
  for (const [i, k] of p.body.keys.entries()) ok200(t, await deviceAuth(s, name, k), `new key ${i} works`);
  t.same((await s.dev.get(kp)).body, { has_keys: true, count: 3 });

  const d = await s.dev.del(kp);
  ok200(t, d, "DELETE");
  t.same((await s.dev.get(kp)).body, { has_keys: false, count: 0 }, "GET after DELETE");
  t.equal((await s.dev.get(one(s, name))).body.has_keys, false, "has_keys false on the record");
  for (const i of [1, 2]) isErr(t, await deviceAuth(s, name, p.body.keys[i]), 401, undefined, `deleted rotating key ${i} fails`);

  for (const [count, what] of [[0, "0"], [-2, "negative"], ["3", "string"], [1.5, "fraction"], [{ n: 3 }, "object"]] as const) {
    isErr(t, await s.dev.post(kp, { count }), 400, undefined, `count ${what}`);
  }
  isErr(t, await s.dev.post(kp, [3]), 400, undefined, "array body");
  t.same((await s.dev.get(kp)).body, { has_keys: false, count: 0 }, "the bad requests created no keys");

  const missing = `/admin/devices/keys/${s.systemKey}/${uniq("nokeys")}`;
  isErr(t, await s.dev.post(missing, { count: 2 }), 404, undefined, "POST for a missing device");
  isErr(t, await s.dev.get(missing), 404, undefined, "GET for a missing device");
  isErr(t, await s.dev.put(missing, {}), 404, undefined, "PUT for a missing device");
  isErr(t, await s.dev.del(missing), 404, undefined, "DELETE for a missing device");

  const user = await userWith(s, 15);
  isErr(t, await user.post(kp, { count: 2 }), 401, undefined, "user token: POST");
  isErr(t, await user.get(kp), 401, undefined, "user token: GET");
  isErr(t, await user.put(kp, {}), 401, undefined, "user token: PUT");
  isErr(t, await user.del(kp), 401, undefined, "user token: DELETE");
  isErr(t, await s2.dev.post(kp, { count: 2 }), 401, undefined, "another developer: POST");
  isErr(t, await s2.dev.get(kp), 401, undefined, "another developer: GET");
  isErr(t, await s2.dev.put(kp, {}), 401, undefined, "another developer: PUT");
  isErr(t, await s2.dev.del(kp), 401, undefined, "another developer: DELETE");
  isErr(t, await request(o.url, "POST", kp, { body: { count: 2 } }), 401, undefined, "no token");
  t.same((await s.dev.get(kp)).body, { has_keys: false, count: 0 }, "still no keys");
});

// ---- device roles -----------------------------------------------------------------------------

t.test("device roles: /admin/devices/roles/{sk}/{name}", async (t) => {
  const me = uniq("roled"), other = uniq("target");
  await createDevice(s, me);
  await createDevice(s, other);
  const rp = `/admin/devices/roles/${s.systemKey}/${me}`;
  const tok = await deviceToken(s, me);
  const d = asDevice(tok);

  const g0 = await s.dev.get(rp);
  ok200(t, g0, "GET roles");
  t.ok(Array.isArray(g0.body.roles), "{roles:[…]}");
  const names0 = g0.body.roles.map((r: any) => r.Name);
  t.ok(names0.includes("Authenticated"), `a new device is in Authenticated (${names0})`);
  ok200(t, await d.get(rp), "a device may read its own roles");

  const readName = uniq("DeviceReaders");
  const readId = await createRole(s, { name: readName, devices: { permissions: 1 } });
  isErr(t, await d.get(one(s, other)), 401, undefined, "before: no devices permission");

  ok200(t, await s.dev.put(rp, { add: [readName] }), "add a role by name");
  const g1 = await s.dev.get(rp);
  t.ok(g1.body.roles.some((r: any) => r.Name === readName), "the role is listed");
  const viaRoles = await s.dev.get(`/admin/user/${s.systemKey}/roles?device=${me}`);
  if (viaRoles.status === 200) t.ok(viaRoles.body.some((r: any) => r.Name === readName), "the roles listing ?device= agrees");
  const r1 = await d.get(one(s, other));
  ok200(t, r1, "the same device token now reads another device");
  t.equal(r1.body.name, other);
  ok200(t, await d.get(api(s)), "and lists devices");
  ok200(t, await d.get(`/api/v/3/devices/${s.systemKey}/count`), "and counts them");
  isErr(t, await d.put(one(s, other), { state: "x" }), 401, undefined, "read only: no update of another device");
  isErr(t, await d.post(one(s, uniq("nope")), {}), 401, undefined, "read only: no create");
  ok200(t, await d.get(one(s, other)), "fresh token check");
  const fresh = asDevice(await deviceToken(s, me));
  ok200(t, await fresh.get(one(s, other)), "a fresh token has the role too");

  ok200(t, await s.dev.put(rp, { delete: [readId] }), "remove the role by id");
  t.notOk((await s.dev.get(rp)).body.roles.some((r: any) => r.Name === readName), "no longer listed");
  isErr(t, await d.get(one(s, other)), 401, undefined, "the permission is gone for the same token");

  const fullId = await createRole(s, { name: uniq("DeviceAdmins"), devices: { permissions: 15 } });
  ok200(t, await s.dev.put(rp, { add: [fullId] }), "add a role by id");
  ok200(t, await d.put(one(s, other), { state: "set-by-device" }), "devices:15 lets it update another device");
  const spawned = uniq("spawned");
  ok200(t, await d.post(one(s, spawned), { active_key: "spawned-key" }), "and create one");
  ok200(t, await d.del(one(s, spawned)), "and delete one");
  ok200(t, await s.dev.put(rp, { delete: [fullId], add: [] }), "remove it");
  isErr(t, await d.put(one(s, other), { state: "again" }), 401, undefined, "gone again");

  const before = (await s.dev.get(rp)).body.roles.map((r: any) => r.Name).sort();
  isErr(t, await s.dev.put(rp, { add: "notalist" }), 400, undefined, "add not an array");
  isErr(t, await s.dev.put(rp, { bogus: [] }), 400, undefined, "unknown field");
  isErr(t, await s.dev.put(rp, [readName]), 400, undefined, "array body");
  const unknownRole = await s.dev.put(rp, { add: [uniq("NoSuchRole")] });
  t.ok([400, 404].includes(unknownRole.status), `unknown role -> 400/404 (${unknownRole.status})`);
  t.ok(isEnvelope(unknownRole.body, unknownRole.status), "unknown role: envelope");
  t.same((await s.dev.get(rp)).body.roles.map((r: any) => r.Name).sort(), before, "failed changes left the roles alone");

  const missing = `/admin/devices/roles/${s.systemKey}/${uniq("ghost")}`;
  isErr(t, await s.dev.get(missing), 404, undefined, "GET roles of a missing device");
  isErr(t, await s.dev.put(missing, { add: [readName] }), 404, undefined, "PUT roles of a missing device");

  const user = await userWith(s, 15);
  isErr(t, await user.put(rp, { add: ["Administrator"] }), 401, undefined, "a user cannot change device roles");
  isErr(t, await s2.dev.put(rp, { add: ["Administrator"] }), 401, undefined, "another developer cannot change device roles");
  isErr(t, await s2.dev.get(rp), 401, undefined, "another developer cannot read device roles");
  isErr(t, await (await userWith(s, 0)).get(rp), 401, undefined, "a user without devices permission cannot read device roles");
  ok200(t, await user.get(rp), "a user with devices:1+ reads device roles");
  t.notOk((await s.dev.get(rp)).body.roles.some((r: any) => r.Name === "Administrator"), "no escalation happened");
});

// ---- connections ------------------------------------------------------------------------------

t.test("connections: /api/v/4/devices/{sk}/connections, /connections/{name}, /connectioncount", async (t) => {
  const M = await devWithSystem(o, "devices-mqtt");
  for (const n of ["m1", "m2", "m3"]) await createDevice(M, n);
  const base = `/api/v/4/devices/${M.systemKey}`;
  const list = () => M.dev.get(`${base}/connections`);
  const count = () => M.dev.get(`${base}/connectioncount`);

  const l0 = await list();
  ok200(t, l0, "connections with nobody connected");
  t.same(l0.body, {}, "an empty map");
  const c0 = await count();
  ok200(t, c0, "connectioncount");
  t.same(c0.body, { total_devices: 3, total_device_connections: 0, unique_device_connections: 0 });

  const t1 = await deviceToken(M, "m1"), t2 = await deviceToken(M, "m2");
  const ids = { a: uniq("m1a"), b: uniq("m1b"), c: uniq("m2a") };
  const before = Date.now();
  const clients: mqtt.MqttClient[] = [];
  t.teardown(async () => { for (const c of clients) c.end(true); });
  clients.push(await mqttConnect(t1, M.systemKey, ids.a));
  clients.push(await mqttConnect(t1, M.systemKey, ids.b));
  clients.push(await mqttConnect(t2, M.systemKey, ids.c));
  // a user connection is not a device connection
  const u = await newUser(M);
  clients.push(await mqttConnect(u.token, M.systemKey, uniq("user")));

  const l1 = await eventually(list, (r) => Object.keys(r.body ?? {}).length === 2 && (r.body.m1?.length ?? 0) === 2);
  ok200(t, l1, "connections");
  t.same(Object.keys(l1.body).sort(), ["m1", "m2"], "the connected devices, by name");
  t.same(l1.body.m1.map((c: any) => c.client_id).sort(), [ids.a, ids.b].sort(), "m1's two client ids");
  t.same(l1.body.m2.map((c: any) => c.client_id), [ids.c], "m2's client id");
  for (const c of [...l1.body.m1, ...l1.body.m2]) {
    t.type(c.time_connected, "string", "time_connected is a string");
    const ms = Date.parse(c.time_connected);
    t.ok(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(c.time_connected) && ms >= before - 2000 && ms <= Date.now() + 2000, `time_connected is RFC 3339 and now (${c.time_connected})`);
  }

  const i1 = await M.dev.get(`${base}/connections/m1`);
  ok200(t, i1, "connection info");
  t.equal(i1.body.name, "m1", "device fields");
  t.equal(i1.body.device_key, `${M.systemKey} :: m1`);
  t.equal(i1.body.type, "sensor");
  t.ok(Array.isArray(i1.body.connections), "connections array");
  t.same(i1.body.connections.map((c: any) => c.client_id).sort(), [ids.a, ids.b].sort());
  t.same(i1.body.attached_proxies, [], "attached_proxies");
  noSecrets(t, i1.body, "m1-key", "connection info");
  const i3 = await M.dev.get(`${base}/connections/m3`);
  ok200(t, i3, "connection info of an unconnected device");
  t.same(i3.body.connections, []);
  isErr(t, await M.dev.get(`${base}/connections/${uniq("ghost")}`), 404, undefined, "connection info of a missing device");
  ok200(t, await asDevice(t2).get(`${base}/connections/m2`), "a device reads its own connection info");

  const c1 = await count();
  t.same(c1.body, { total_devices: 3, total_device_connections: 3, unique_device_connections: 2 }, "exact counts");

  // the same from code: ClearBladeAsync.Devices().connectedDevices / deviceConnections / connectedDeviceCount, ClearBlade.deviceConnections
  const svc = uniq("conns");
  ok200(t, await M.dev.post(`/admin/code/v/1/${M.systemKey}/${svc}`, { code: `async function ${svc}(req, resp) {
    var D = ClearBladeAsync.Devices(), classic;
    ClearBlade.deviceConnections("m2", function (err, d) { classic = err ? { err: d } : d; });
    resp.success({ all: await D.connectedDevices(), m1: await D.deviceConnections("m1"), count: await D.connectedDeviceCount(), classic: classic });
  }`, parameters: [] }), "a service reading connections");
  const fromCode = await M.dev.post(`/api/v/1/code/${M.systemKey}/${svc}`, {});
  t.equal(fromCode.body?.success, true, `ran (${fromCode.text.slice(0, 200)})`);
  const r = fromCode.body.results;
  t.same(Object.keys(r.all).sort(), ["m1", "m2"], "connectedDevices: by name");
  t.same(r.m1.connections.map((c: any) => c.client_id).sort(), [ids.a, ids.b].sort(), "deviceConnections");
  t.same(r.count, c1.body, "connectedDeviceCount");
  t.same(r.classic.connections.map((c: any) => c.client_id), [ids.c], "ClearBlade.deviceConnections");

  const reader = await userWith(M, 1);
  ok200(t, await reader.get(`${base}/connections`), "a user with devices:1 lists connections");
  ok200(t, await reader.get(`${base}/connectioncount`), "and counts them");
  ok200(t, await reader.get(`${base}/connections/m1`), "and reads connection info");
  // other systems see none of these
  const other = await s2.dev.get(`/api/v/4/devices/${s2.systemKey}/connections`);
  t.notOk("m1" in (other.body ?? {}) || "m2" in (other.body ?? {}), "another system does not see them");

  // a bad device token cannot connect
  await t.rejects(mqttConnect("not-a-token", M.systemKey, uniq("bad")), "a bad token is refused by the broker");
  await t.rejects(mqttConnect(t1, s2.systemKey, uniq("wrongsys")), "a device token with another system's key is refused");

  // disconnect one of m1's clients, then the rest
  await mqttEnd(clients[0]!);
  const l2 = await eventually(list, (r) => (r.body.m1?.length ?? 0) === 1);
  t.same(l2.body.m1.map((c: any) => c.client_id), [ids.b], "m1 has one connection left");
  t.same((await count()).body, { total_devices: 3, total_device_connections: 2, unique_device_connections: 2 });
  await mqttEnd(clients[1]!);
  const l3 = await eventually(list, (r) => !("m1" in r.body));
  t.same(Object.keys(l3.body), ["m2"], "m1 is gone after its last disconnect");
  t.same((await M.dev.get(`${base}/connections/m1`)).body.connections, [], "m1's connection info is empty");
  await mqttEnd(clients[2]!);
  const l4 = await eventually(list, (r) => Object.keys(r.body).length === 0);
  t.same(l4.body, {}, "nobody connected");
  t.same((await count()).body, { total_devices: 3, total_device_connections: 0, unique_device_connections: 0 }, "counts back to zero");
  await mqttEnd(clients[3]!);
});

// ---- permissions across every route -----------------------------------------------------------

t.test("permissions: no devices permission, other systems, other developers", async (t) => {
  const name = uniq("perm");
  await createDevice(s, name);
  const sk = s.systemKey;
  const routes = (n: string): [string, string, unknown?][] => [
    ["GET", `/api/v/2/devices/${sk}`], ["PUT", `/api/v/2/devices/${sk}`, { query: [], $set: { state: "x" } }],
    ["DELETE", `/api/v/2/devices/${sk}?query=${qs([])}`],
    ["GET", `/api/v/2/devices/${sk}/${n}`], ["PUT", `/api/v/2/devices/${sk}/${n}`, { state: "x" }],
    ["POST", `/api/v/2/devices/${sk}/${uniq("p")}`, {}], ["DELETE", `/api/v/2/devices/${sk}/${n}`],
    ["GET", `/api/v/3/devices/${sk}/count`], ["GET", `/api/v/3/devices/${sk}/columns`],
    ["GET", `/api/v/4/devices/${sk}/connections`], ["GET", `/api/v/4/devices/${sk}/connections/${n}`], ["GET", `/api/v/4/devices/${sk}/connectioncount`],
    ["GET", `/admin/devices/${sk}`], ["PUT", `/admin/devices/${sk}`, { query: [], $set: { state: "x" } }], ["DELETE", `/admin/devices/${sk}?query=${qs([])}`],
    ["GET", `/admin/devices/${sk}/${n}`], ["PUT", `/admin/devices/${sk}/${n}`, { state: "x" }],
    ["POST", `/admin/devices/${sk}/${uniq("p")}`, {}], ["DELETE", `/admin/devices/${sk}/${n}`],
    ["GET", `/admin/devices/${sk}/columns`], ["POST", `/admin/devices/${sk}/columns`, { column_name: uniq("c"), type: "string" }],
    ["DELETE", `/admin/devices/${sk}/columns?column_name=nosuch`],
    ["GET", `/admin/devices/keys/${sk}/${n}`], ["POST", `/admin/devices/keys/${sk}/${n}`, { count: 2 }],
    ["PUT", `/admin/devices/keys/${sk}/${n}`, {}], ["DELETE", `/admin/devices/keys/${sk}/${n}`],
    ["GET", `/admin/devices/roles/${sk}/${n}`], ["PUT", `/admin/devices/roles/${sk}/${n}`, { add: ["Administrator"] }],
  ];
  const callers: [string, Client, number | undefined][] = [
    ["user without the devices permission", await userWith(s, 0), undefined],
    ["user of another system with devices:15", await userWith(s2, 15), undefined],
    ["developer of another system", s2.dev, 201],
    ["device of another system", asDevice(await deviceToken(s2, (await createDevice(s2, uniq("foreign"))).name)), undefined],
  ];
  for (const [who, c, code] of callers) {
    for (const [method, path, body] of routes(name)) {
      isErr(t, await c.req(method, path, body), 401, code, `${who}: ${method} ${path.replace(sk, "{sk}")}`);
    }
  }
  for (const [method, path, body] of routes(name)) {
    isErr(t, await request(o.url, method, path, { body }), 401, undefined, `no token: ${method} ${path.replace(sk, "{sk}")}`);
  }
  const g = await s.dev.get(one(s, name));
  ok200(t, g, "the device survived every refused call");
  t.equal(g.body.state, "new", "and is unchanged");
  t.same((await s.dev.get(`/admin/devices/keys/${sk}/${name}`)).body, { has_keys: false, count: 0 }, "no keys were made");

  // each level bit grants exactly its operation
  const R = await userWith(s, 1), C = await userWith(s, 2), U = await userWith(s, 4), D = await userWith(s, 8);
  const n2 = uniq("lvl");
  isErr(t, await R.post(one(s, n2), {}), 401, undefined, "read-only user cannot create");
  ok200(t, await C.post(one(s, n2), { active_key: "level-key" }), "create with devices:2");
  isErr(t, await C.get(one(s, n2)), 401, undefined, "create-only user cannot read");
  ok200(t, await R.get(one(s, n2)), "read with devices:1");
  ok200(t, await R.get(api(s)), "list with devices:1");
  isErr(t, await R.put(one(s, n2), { state: "x" }), 401, undefined, "read-only user cannot update");
  ok200(t, await U.put(one(s, n2), { state: "by-U" }), "update with devices:4");
  isErr(t, await U.del(one(s, n2)), 401, undefined, "update-only user cannot delete");
  isErr(t, await U.get(one(s, n2)), 401, undefined, "update-only user cannot read");
  ok200(t, await D.del(one(s, n2)), "delete with devices:8");
  isErr(t, await R.get(one(s, n2)), 404, undefined, "deleted");
  isErr(t, await new Client(o.url, { "ClearBlade-UserToken": "garbage" }).get(api(s)), 400, undefined, "garbage token");
});

// ---- SQL text ---------------------------------------------------------------------------------

t.test("SQL text in names, values and queries is harmless", async (t) => {
  const Q = await devWithSystem(o, "devices-sql");
  ok200(t, await Q.dev.post(`${adm(Q)}/columns`, { column_name: "note", type: "string" }));
  await createDevice(Q, "plain");
  const nasty = ["'; DROP TABLE devices; --", "\" OR 1=1 --", "x' OR '1'='1", "Robert'); DELETE FROM devices;--", "\\'; SELECT * FROM tokens; --"];
  const name = "sqlvals";
  const r = await Q.dev.post(one(Q, name, "admin"), { active_key: "sql-key-123", state: nasty[0], description: nasty[1], type: nasty[2], note: nasty[3] });
  ok200(t, r, "create with SQL text in values");
  const g = await Q.dev.get(one(Q, name));
  t.same([g.body.state, g.body.description, g.body.type, g.body.note], nasty.slice(0, 4), "stored verbatim");
  ok200(t, await Q.dev.put(one(Q, name), { state: nasty[4] }), "update with SQL text");
  t.equal((await Q.dev.get(one(Q, name))).body.state, nasty[4]);

  for (const v of nasty) {
    const l = await Q.dev.get(`${api(Q)}?query=${qs([[{ EQ: [{ state: v === nasty[4] ? "nothing" : v }] }]])}`);
    ok200(t, l, `filter value ${JSON.stringify(v)}`);
    t.same(l.body, [], "matches nothing");
  }
  const exact = await Q.dev.get(`${api(Q)}?query=${qs([[{ EQ: [{ state: nasty[4] }] }]])}`);
  t.same(exact.body.map((d: any) => d.name), [name], "an exact match on SQL text finds only that device");
  isErr(t, await Q.dev.get(`${api(Q)}?query=${qs([[{ EQ: [{ "name\" OR 1=1 --": "x" }] }]])}`), 400, undefined, "SQL in a filter column name");
  isErr(t, await Q.dev.get(`${api(Q)}?query=${qs({ SORT: [{ ASC: "name; DROP TABLE devices" }] })}`), 400, undefined, "SQL in a sort column");
  isErr(t, await Q.dev.get(`${api(Q)}?query=${qs({ SELECTCOLUMNS: ["name, (SELECT 1)"] })}`), 400, undefined, "SQL in SELECTCOLUMNS");
  const bulk = await Q.dev.put(api(Q), { query: [[{ EQ: [{ name: "x' OR '1'='1" }] }]], $set: { description: "bulk" } });
  ok200(t, bulk, "bulk update with SQL text in the query");
  t.equal(bulk.body.TOTAL, 0, "matched nothing");
  ok200(t, await Q.dev.del(`${api(Q)}?query=${qs([[{ EQ: [{ name: "' OR 1=1 --" }] }]])}`), "bulk delete with SQL text in the query");
  isErr(t, await deviceAuth(Q, "plain' --", "plain-key"), 401, undefined, "SQL text in the auth device name");
  isErr(t, await deviceAuth(Q, "plain", "' OR '1'='1"), 401, undefined, "SQL text in the auth key");

  for (const n of ["x'; DROP TABLE devices;--", "a\" OR \"1\"=\"1", "1 OR 1=1"]) {
    const c = await Q.dev.post(`${adm(Q)}/${encodeURIComponent(n)}`, { active_key: "sqlname-key" });
    if (c.status === 200) {
      const back = await Q.dev.get(`${adm(Q)}/${encodeURIComponent(n)}`);
      t.equal(back.body.name, n, `name ${JSON.stringify(n)} accepted and stored verbatim`);
      ok200(t, await Q.dev.del(`${adm(Q)}/${encodeURIComponent(n)}`));
    } else isErr(t, c, 400, undefined, `name ${JSON.stringify(n)} rejected`);
  }
  const all = await Q.dev.get(`${api(Q)}?query=${qs({ SORT: [{ ASC: "name" }] })}`);
  t.same(all.body.map((d: any) => d.name), ["plain", name], "both devices still there, nothing else");
  ok200(t, await deviceAuth(Q, "plain", "plain-key"), "authentication still works");
  ok200(t, await s.dev.get(api(s)), "other systems' devices still readable");
});
