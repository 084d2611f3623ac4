// Whose rights code runs with, as a hostile user of a system would try to choose them: only a
// developer may make a service, trigger or timer run as someone else; anyone else may name only
// itself. A user whose role may create services, triggers and timers (but not read collection
// `vault`) must never get code to read `vault` for it.
import t from "tap";
import { collectionWith, type DevSystem, devWithSystem, type HttpResponse, isErr, newUser, ok200, startOutpost, uniq, waitFor } from "../harness.ts";

const o = await startOutpost();
t.teardown(() => o.stop());
const s: DevSystem = await devWithSystem(o, "runas");
const SK = s.systemKey;
/** Setup steps throw (an assertion on the root test before its subtests would end it). */
function must(r: HttpResponse, what: string): HttpResponse {
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

const vault = await collectionWith(s, [["secret", "string"]], uniq("vault"));
must(await s.dev.post(`/api/v/1/data/${vault.id}`, { secret: "the-crown-jewels" }), "a row in vault");
// where the attacker's code could leave what it read: a collection the attacker may read and write
const drop = await collectionWith(s, [["got", "string"]], uniq("drop"));

// an Administrator user: everything, vault included
const admin = await newUser(s);
must(await s.dev.put(`/admin/user/${SK}`, { user: admin.userId, changes: { roles: { add: ["Administrator"] } } }), "admin user");

// the attacker: may create/update/run services, triggers and timers, use `drop`, not `vault`
const role = must(await s.dev.post(`/admin/user/${SK}/roles`, {
  name: uniq("Coder"), allservices: { permissions: 15 }, triggers: { permissions: 15 }, timers: { permissions: 15 },
  collections: [{ itemInfo: { id: drop.id }, permissions: 15 }],
}), "coder role");
const attacker = await newUser(s);
must(await s.dev.put(`/admin/user/${SK}`, { user: attacker.userId, changes: { roles: { add: [role.body.role_id] } } }), "attacker gets the role");
const A = attacker.client;

/** A service that copies vault into drop (and answers what it read). */
const thief = (name: string) => `async function ${name}(req, resp) {
  var got;
  try { var r = await ClearBladeAsync.Collection({ collectionName: "${vault.name}" }).fetch(); got = JSON.stringify(r.DATA.map(function (x) { return x.secret; })); }
  catch (e) { got = "denied"; }
  try { await ClearBladeAsync.Collection({ collectionName: "${drop.name}" }).create({ got: got }); } catch (e) {}
  resp.success(got);
}`;
const svc = (name: string) => `/api/v/3/code/${SK}/service/${name}`;
const stolen = async () => ((await s.dev.get(`/api/v/1/data/${drop.id}`)).body.DATA as { got: string }[]).map((r) => r.got);

t.test("run_user: a user may not make a service run as another user", async (t) => {
  const name = uniq("steal");
  isErr(t, await A.post(svc(name), { code: thief(name), run_user: admin.userId }), 403, "create with the admin's id");
  isErr(t, await A.post(svc(name), { code: thief(name), run_user: admin.email }), 403, "create with the admin's email");
  ok200(t, await A.post(svc(name), { code: thief(name), run_user: attacker.userId }), "create with its own id");
  isErr(t, await A.put(svc(name), { run_user: admin.userId }), 403, "update to the admin's id");
  const r = await A.post(`/api/v/1/code/${SK}/${name}`, {});
  ok200(t, r, "run");
  t.equal(r.body.results, "denied", "its own rights: vault is not readable");

  // a developer's choice stands, and then nobody else may change the code that runs with it
  const devSvc = uniq("devsvc");
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/${devSvc}`, { code: `function ${devSvc}(req, resp) { resp.success("ok"); }`, run_user: admin.userId }), "developer sets run_user");
  isErr(t, await A.put(svc(devSvc), { code: thief(devSvc) }), 403, "the attacker may not change code that runs as the admin");
  const after = await A.post(`/api/v/1/code/${SK}/${devSvc}`, {});
  t.equal(after.body.results, "ok", "the developer's code is unchanged");
  ok200(t, await A.put(svc(devSvc), { code: thief(devSvc), run_user: "" }), "taking it over means running it as itself");
  t.equal((await A.post(`/api/v/1/code/${SK}/${devSvc}`, {})).body.results, "denied", "and then vault stays closed");
  t.notOk((await stolen()).some((g) => g.includes("crown")), "nothing of vault reached drop");
});

t.test("triggers run with the rights of whoever defined them", async (t) => {
  const name = uniq("trigsteal");
  ok200(t, await A.post(svc(name), { code: thief(name) }), "service");
  const topic = uniq("fire");
  ok200(t, await A.post(`/api/v/3/code/${SK}/trigger/${uniq("t")}`, { def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic }, service_name: name }), "the attacker's trigger");
  const before = (await stolen()).length;
  ok200(t, await s.dev.post(`/api/v/1/message/${SK}/publish`, { topic, body: "go", qos: 0 }), "the event");
  t.ok(await waitFor(async () => (await stolen()).length > before, 10_000), "the trigger ran");
  t.same((await stolen()).slice(before), ["denied"], "as the attacker: vault stays closed (before the fix it ran as the developer)");
});

t.test("timers: only a developer may name the user a timer runs as", async (t) => {
  const name = uniq("timersteal");
  ok200(t, await A.post(svc(name), { code: thief(name) }), "service");
  const timer = (n: string) => `/api/v/3/code/${SK}/timer/${n}`;
  isErr(t, await A.post(timer(uniq("tm")), { service_name: name, frequency: 1, repeats: 1, user_id: admin.userId, user_type: 2 }), 403, "a timer running as the admin");
  isErr(t, await A.post(timer(uniq("tm")), { service_name: name, frequency: 1, repeats: 1, user_id: "", user_type: 1 }), 403, "a timer running as the developer");
  const before = (await stolen()).length;
  const own = uniq("tm");
  const r = await A.post(timer(own), { service_name: name, frequency: 1, repeats: 1 });
  ok200(t, r, "its own timer");
  t.equal(r.body.user_id, attacker.userId, "runs as the attacker");
  t.ok(await waitFor(async () => (await stolen()).length > before, 10_000), "the timer ran");
  t.same((await stolen()).slice(before), ["denied"], "as the attacker: vault stays closed");
  isErr(t, await A.put(timer(own), { user_id: admin.userId }), 403, "nor can an update name the admin");

  // a developer may name a user
  const devTimer = uniq("tm");
  const d = await s.dev.post(`/admin/triggers/timers/${SK}/${devTimer}`, { service_name: name, frequency: 3600, start_time: "2099-01-01T00:00:00Z", user_id: admin.userId, user_type: 2 });
  ok200(t, d, "the developer's timer for the admin");
  t.equal(d.body.user_id, admin.userId);
  isErr(t, await A.put(timer(devTimer), { user_id: admin.userId, description: "x" }), 403, "the attacker may not keep the admin on it");
});

t.test("edges: a user needs a role that grants edges by name; Administrator's 'everything' is not enough", async (t) => {
  isErr(t, await admin.client.post(`/api/v/3/edges/${SK}/${uniq("e")}`, { token: "chosen-by-the-user" }), 401, "an Administrator user cannot create an edge");
  const edgeRole = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("EdgeOps"), edges: { permissions: 15 } });
  ok200(t, edgeRole, "a role granting edges");
  const ops = await newUser(s);
  ok200(t, await s.dev.put(`/admin/user/${SK}`, { user: ops.userId, changes: { roles: { add: [edgeRole.body.role_id] } } }));
  ok200(t, await ops.client.post(`/api/v/3/edges/${SK}/${uniq("e")}`, {}), "a user whose role grants edges can");
  ok200(t, await admin.client.get(`/api/v/2/edges/${SK}`), "reading edges still follows the Administrator role");
});
