// The audit trail: /admin/audit[/{systemKey}][/count]. Writes through the API, password resets and
// MQTT connects are recorded with actor, asset class and id, changes and response time; rows
// survive a clean stop; --audit off records nothing.
import mqtt from "mqtt";
import t from "tap";
import { collectionWith, type DevSystem, devWithSystem, isErr, must, newUser, ok200, qs, request, startOutpost, uniq, waitFor } from "./harness.ts";

const ADMIN_EMAIL = "audit-admin@example.com", ADMIN_PASSWORD = "audit-admin-password-1";
const o = await startOutpost({ args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });
t.teardown(() => o.stop());

const sys = await devWithSystem(o, "audit");
const other = await devWithSystem(o, "audit-other");
const trail = (s: DevSystem, q?: unknown) => s.dev.get(`/admin/audit/${s.systemKey}${q === undefined ? "" : `?query=${qs(q)}`}`);
/** A user whose role may read and write `collectionId`'s rows. */
async function userOn(s: DevSystem, collectionId: string) {
  const u = await newUser(s);
  const role = await must(s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("rw"), collections: [{ itemInfo: { id: collectionId }, permissions: 15 }] }), "role");
  await must(s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role.role_id] } } }), "role add");
  return u;
}
const where = (f: Record<string, unknown>) => ({ FILTERS: [Object.entries(f).map(([k, v]) => ({ EQ: [{ [k]: v }] }))] });

t.test("writes are recorded with actor, asset class and id, changes and response time", async (t) => {
  const col = await collectionWith(sys, [["label", "string"]]);
  const u = await userOn(sys, col.id);
  await must(u.client.post(`/api/v/1/data/${col.id}`, { label: "by-user" }), "user insert");
  await must(sys.dev.post(`/api/v/1/collection/${sys.systemKey}/${col.name}`, { label: "by-dev" }), "dev insert by name");
  await must(sys.dev.put(`/api/v/1/data/${col.id}`, { query: [[{ EQ: [{ label: "by-dev" }] }]], $set: { label: "changed" } }), "dev update");
  const dev = uniq("d");
  await must(sys.dev.post(`/admin/devices/${sys.systemKey}/${dev}`, { type: "t", state: "s", active_key: "k-123456", enabled: true }), "device");
  await must(sys.dev.del(`/admin/devices/${sys.systemKey}/${dev}`), "device delete");
  const rows = await trail(sys);
  ok200(t, rows, "trail");
  t.ok(Array.isArray(rows.body), "an array");
  const r0 = rows.body[0];
  t.same(Object.keys(r0).sort(), ["action_type", "asset_class", "asset_id", "changes", "email", "id", "response_time", "system_key", "time", "user_type"], "ClearBlade's fields");
  t.ok(rows.body.every((r: any, i: number) => i === 0 || r.id < rows.body[i - 1].id), "newest first");
  const items = rows.body.filter((r: any) => r.asset_class === "collections" && r.action_type === "Create" && r.asset_id !== col.name && r.asset_id === col.id);
  t.equal(items.length, 1, "the user's insert by collection id");
  const byUser = items[0];
  t.equal(byUser.email, u.email, "actor: the user's email");
  t.equal(byUser.user_type, "USER", "user_type USER");
  t.equal(byUser.system_key, sys.systemKey, "its system");
  t.same(JSON.parse(byUser.changes), { label: "by-user" }, "changes: the body sent, as JSON text");
  t.type(byUser.response_time, "number");
  t.ok(byUser.response_time >= 0 && byUser.response_time < 10_000, "response_time in milliseconds");
  t.match(byUser.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$/, "time: RFC 3339");
  const byDev = rows.body.find((r: any) => r.asset_class === "collections" && r.action_type === "Create" && r.asset_id === col.name);
  t.ok(byDev, "the developer's insert by collection name");
  t.equal(byDev?.email, sys.email, "actor: the developer");
  t.equal(byDev?.user_type, "DEV");
  const upd = rows.body.find((r: any) => r.asset_class === "collections" && r.action_type === "Update" && r.asset_id === col.id);
  t.ok(upd, "the update, found in its system though named by collection id with a developer's token");
  t.equal(upd?.system_key, sys.systemKey);
  t.ok(rows.body.some((r: any) => r.asset_class === "devices" && r.action_type === "Create" && r.asset_id === dev), "device create");
  t.ok(rows.body.some((r: any) => r.asset_class === "devices" && r.action_type === "Delete" && r.asset_id === dev), "device delete");
  t.ok(rows.body.some((r: any) => r.asset_class === "collections" && r.action_type === "Create Columns"), "columns added");
  const signUp = rows.body.find((r: any) => r.asset_class === "users" && r.action_type === "Create" && r.email === u.email);
  t.ok(signUp, "the user's sign-up");
  t.notOk(signUp?.changes.includes(u.password), "the password is not in the trail");
  t.match(signUp?.changes ?? "", /"password":"\(redacted\)"/, "only that there was one");
  t.notOk(JSON.stringify(rows.body).includes(u.password), "no password anywhere in the trail");
  t.notOk(rows.body.some((r: any) => r.asset_class === "collections" && r.action_type === "Read"), "reads are not recorded");
});

t.test("password resets and MQTT connects", async (t) => {
  const u = await newUser(sys);
  await must(u.client.put("/api/v/1/user/pass", { old_password: u.password, new_password: "another-password-2" }), "user password change");
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${o.mqttPort}`, { username: sys.devToken, password: sys.systemKey, clientId: uniq("a"), reconnectPeriod: 0 });
  await c.endAsync();
  const reset = await must(trail(sys, where({ action_type: "user password reset" })), "password resets");
  t.ok(reset.some((r: any) => r.email === u.email && r.asset_class === "users"), "User Password Reset, matched in any case");
  t.notOk(JSON.stringify(reset).includes("another-password-2"), "the new password is not in the trail");
  t.ok(await waitFor(async () => (await must(trail(sys, where({ asset_id: c.options.clientId })), "mqtt")).length === 2, 5_000), "connect and disconnect recorded");
  const mq = await must(trail(sys, where({ asset_id: c.options.clientId })), "mqtt rows");
  // (in the order the broker tells them: a client that leaves at once may be told gone first)
  t.same(mq.map((r: any) => [r.asset_class, r.action_type, r.email, r.user_type]).sort(), [["messaging", "MQTT Connect", sys.email, "USER"], ["messaging", "MQTT Disconnect", sys.email, "USER"]], "MQTT Connect and Disconnect, by the developer");
});

t.test("query, paging and count", async (t) => {
  const col = await collectionWith(sys, [["n", "int"]]);
  for (let i = 0; i < 5; i++) await must(sys.dev.post(`/api/v/1/data/${col.id}`, { n: i }), "insert");
  const q = where({ asset_class: "collections", asset_id: col.id, action_type: "create" });
  const rows = await must(trail(sys, q), "filtered");
  t.equal(rows.length, 5, "five inserts, action_type matched in any case");
  const count = await sys.dev.get(`/admin/audit/${sys.systemKey}/count?query=${qs(q)}`);
  ok200(t, count, "count");
  t.same(count.body, { count: 5 }, "{count}");
  const page = await must(trail(sys, { ...q, PAGESIZE: 2, PAGENUM: 2, SORT: [{ ASC: "id" }] }), "page 2");
  t.same(page.map((r: any) => JSON.parse(r.changes).n), [2, 3], "PAGESIZE, PAGENUM and SORT");
  const otherRows = await must(trail(other), "other system's trail");
  t.notOk(otherRows.some((r: any) => r.system_key === sys.systemKey), "another system's trail holds none of these");
  const all = await must(other.dev.get(`/admin/audit/${other.systemKey}/count`), "count all");
  t.equal(all.count, otherRows.length, "count without a query");
  await must(sys.dev.del(`/admin/collectionmanagement?id=${col.id}`), "delete the collection");
  const gone = await must(trail(sys, where({ asset_class: "collections", action_type: "Delete", asset_id: col.id })), "its delete");
  t.equal(gone.length, 1, "a collection deleted by id is in its system's trail (found before it went)");
});

t.test("every system's trail: platform admins", async (t) => {
  const admin = await must(request(o.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }), "admin sign-in");
  const h = { "ClearBlade-DevToken": admin.dev_token };
  const all = await request(o.url, "GET", `/admin/audit?query=${qs({ PAGESIZE: 1000 })}`, { headers: h });
  ok200(t, all, "admin reads every system's trail");
  const keys = new Set(all.body.map((r: any) => r.system_key));
  t.ok(keys.has(sys.systemKey) && keys.has(other.systemKey), "rows of both systems");
  const n = await request(o.url, "GET", `/admin/audit/count?query=${qs(where({ system_key: sys.systemKey }))}`, { headers: h });
  ok200(t, n, "admin count");
  t.equal(n.body.count, (await must(sys.dev.get(`/admin/audit/${sys.systemKey}/count?query=${qs(where({ system_key: sys.systemKey }))}`), "dev count")).count, "the same count as the system's developer gets");
  ok200(t, await request(o.url, "GET", `/admin/audit/${sys.systemKey}`, { headers: h }), "an admin reads a system's trail too");
});

t.test("a deleted system's trail goes with it", async (t) => {
  const admin = await must(request(o.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } }), "admin sign-in");
  const h = { "ClearBlade-DevToken": admin.dev_token };
  const doomed = await devWithSystem(o, "audit-doomed");
  const dev = uniq("doomedDevice");
  await must(doomed.dev.post(`/admin/devices/${doomed.systemKey}/${dev}`, { type: "t", state: "s", active_key: "k-123456", enabled: true }), "device");
  t.ok(await waitFor(async () => (await must(trail(doomed, where({ asset_id: dev })), "trail")).length === 1, 5_000), "the device's creation is recorded");
  await must(doomed.dev.del(`/admin/systemmanagement?id=${doomed.systemKey}`), "delete the system");
  let rows: any[] = [];
  t.ok(await waitFor(async () => {
    rows = (await request(o.url, "GET", `/admin/audit?query=${qs(where({ system_key: doomed.systemKey }))}`, { headers: h })).body;
    return Array.isArray(rows) && rows.length === 0;
  }, 5_000), `no row of the system is left (${JSON.stringify(rows).slice(0, 300)})`);
  const all = await request(o.url, "GET", `/admin/audit?query=${qs({ PAGESIZE: 1000 })}`, { headers: h });
  t.notOk(all.text.includes(dev), "nothing in the platform's trail names its device");
});

t.test("failure paths", async (t) => {
  const u = await newUser(sys);
  isErr(t, await sys.dev.get(`/admin/audit/${sys.systemKey}?query=${encodeURIComponent("{nope")}`), 400, "query not JSON");
  isErr(t, await trail(sys, where({ password: "x" })), 400, "a column the trail does not have");
  isErr(t, await sys.dev.get(`/admin/audit/${sys.systemKey}/count?query=${qs({ SORT: "id" })}`), 400, "a bad SORT");
  isErr(t, await other.dev.get(`/admin/audit/${sys.systemKey}`), 401, "another developer's system");
  isErr(t, await other.dev.get(`/admin/audit/${sys.systemKey}/count`), 401, "another developer's system, count");
  isErr(t, await u.client.get(`/admin/audit/${sys.systemKey}`), 401, "a user token");
  isErr(t, await sys.dev.get("/admin/audit"), 401, "every system's trail, not an admin");
  isErr(t, await sys.dev.get("/admin/audit/count"), 401, "every system's count, not an admin");
  isErr(t, await u.client.get("/admin/audit"), 401, "every system's trail, a user token");
  isErr(t, await request(o.url, "GET", `/admin/audit/${sys.systemKey}`), 401, "no token");
  isErr(t, await sys.dev.get(`/admin/audit/${"e".repeat(24)}`), 404, "a system that does not exist");
  // a refused write is not an audited change
  const col = await collectionWith(sys, [["n", "int"]]);
  const writer = await userOn(sys, col.id);
  isErr(t, await writer.client.post(`/api/v/1/data/${col.id}`, { n: "not a number" }), 400, "a refused insert");
  await must(sys.dev.post(`/api/v/1/data/${col.id}`, { n: 1 }), "an accepted insert after it");
  const rows = await must(trail(sys, where({ asset_id: col.id, action_type: "Create" })), "rows");
  t.equal(rows.length, 1, "only the accepted insert is recorded");
});

t.test("rows waiting at a clean stop are written; --audit off records nothing", async (t) => {
  const p = await startOutpost({ keepData: true });
  const s = await devWithSystem(p, "audit-stop");
  const col = await collectionWith(s, [["n", "int"]]);
  const N = 50;
  await Promise.all(Array.from({ length: N }, (_, i) => must(s.dev.post(`/api/v/1/data/${col.id}`, { n: i }), "insert")));
  await p.stop();
  const again = await startOutpost({ dataDir: p.dataDir, keepData: true });
  const count = await request(again.url, "GET", `/admin/audit/${s.systemKey}/count?query=${qs(where({ asset_id: col.id, action_type: "Create" }))}`, { headers: { "ClearBlade-DevToken": s.devToken } });
  ok200(t, count, "count after the restart");
  t.same(count.body, { count: N }, `all ${N} inserts made just before SIGTERM are in the trail`);
  await again.stop();

  const off = await startOutpost({ args: ["--audit", "off"] });
  const so = await devWithSystem(off, "audit-off");
  const c2 = await collectionWith(so, [["n", "int"]]);
  await must(so.dev.post(`/api/v/1/data/${c2.id}`, { n: 1 }), "insert");
  const got = await must(so.dev.get(`/api/v/1/data/${c2.id}`), "the insert is there");
  t.equal(got.DATA.length, 1, "positive control: the write happened");
  t.same(await must(so.dev.get(`/admin/audit/${so.systemKey}/count`), "count"), { count: 0 }, "--audit off: nothing recorded");
  await off.stop();
});
