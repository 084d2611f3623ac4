// Portals and plugins, black-box: /admin/portals/{systemKey}, /api/v/2/portals/{systemKey}/{name},
// /api/v/2/plugins/{systemKey}[/{name}]; config taken as an object or JSON text and returned as an
// object; developers manage both, a user reads and updates a portal by the role permission portals;
// a real edge receives the ones its template names, online and after being offline.
import t from "tap";
import { Client, type DevSystem, type Outpost, devWithSystem, isErr, must, newUser, ok200, request, startOutpost, uniq, waitFor } from "./harness.ts";

// error codes of src/core/errors.ts
const E = { BAD_JSON: 106, INVALID_ARGUMENT: 111, PERMISSION_DENIED: 200, NOT_AUTHORIZED_FOR_SYSTEM: 201, AUTH_REQUIRED: 202, DEVELOPER_ONLY: 205, ALREADY_EXISTS: 207, NOT_FOUND: 208 } as const;

let o: Outpost;
let s: DevSystem;
let other: DevSystem;

t.before(async () => {
  o = await startOutpost();
  s = await devWithSystem(o, "portals");
  other = await devWithSystem(o, "other");
});
t.teardown(() => o?.stop());

const portalPath = (sys: DevSystem, name: string) => `/api/v/2/portals/${sys.systemKey}/${encodeURIComponent(name)}`;
const pluginPath = (sys: DevSystem, name?: string) => `/api/v/2/plugins/${sys.systemKey}${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;
const config = { version: 1, allow_edit: true, plugins: [], panes: [{ title: "Main", widgets: [{ type: "gauge", settings: { min: 0, max: 100 } }] }], datasources: [{ name: "temps", type: "collection" }], columns: 3 };

t.test("a portal made with config as JSON text (cb-cli) comes back as an object, in the list too", async (t) => {
  const name = uniq("board");
  const made = await s.dev.post(portalPath(s, name), { name, description: "Plant floor", config: JSON.stringify(config), type: "custom_v2", namespace: "" });
  ok200(t, made, "create");
  t.same(made.body.config, config, "create answers the config as an object");
  const got = await must(s.dev.get(portalPath(s, name)), "get");
  t.equal(got.name, name);
  t.equal(got.description, "Plant floor");
  t.same(got.config, config, "config is an object");
  t.equal(got.system_key, s.systemKey, "system_key");
  t.equal(got.type, "custom_v2", "type");
  t.equal(got.namespace, "", "namespace");
  t.match(got.last_updated, /^\d\d [A-Z][a-z]{2} \d\d \d\d:\d\d UTC$/, "last_updated as ClearBlade shows it");
  const list = await must(s.dev.get(`/admin/portals/${s.systemKey}`), "list");
  t.ok(Array.isArray(list), "the list is an array");
  const entry = list.find((p: any) => p.name === name);
  t.same(entry?.config, config, "the list's entry carries the config as an object (what cb-cli export writes)");
  t.notOk(list.some((p: any) => p.system_key !== s.systemKey), "only this system's portals");
});

t.test("config as an object, no config (the default), updates keep what is not sent", async (t) => {
  const name = uniq("obj");
  ok200(t, await s.dev.post(portalPath(s, name), { description: "d", config, extra_setting: { theme: "dark" } }), "create with an object config");
  t.same((await must(s.dev.get(portalPath(s, name)), "get")).extra_setting, { theme: "dark" }, "a field of the record is kept as sent");
  const bare = uniq("bare");
  const b = await must(s.dev.post(portalPath(s, bare), {}), "create without a body's config");
  t.same(b.config, {}, "the default config: empty");
  const up = await must(s.dev.put(portalPath(s, name), { description: "changed" }), "update the description only");
  t.equal(up.description, "changed");
  t.same(up.config, config, "config unchanged");
  const up2 = await must(s.dev.put(portalPath(s, name), { config: JSON.stringify({ ...config, columns: 4 }), system_key: s.systemKey, last_updated: "whatever" }), "update the config as text, echoing server fields");
  t.equal(up2.config.columns, 4, "config replaced");
  t.equal(up2.description, "changed", "description kept");
  t.equal(up2.system_key, s.systemKey, "system_key is the server's");
});

t.test("bad portal bodies and names", async (t) => {
  const name = uniq("bad");
  isErr(t, await s.dev.post(portalPath(s, name), { config: "{not json" }), 400, E.INVALID_ARGUMENT, "config text that is not JSON");
  isErr(t, await s.dev.post(portalPath(s, name), { config: "[1,2]" }), 400, E.INVALID_ARGUMENT, "config text of an array");
  isErr(t, await s.dev.post(portalPath(s, name), { config: 42 }), 400, E.INVALID_ARGUMENT, "config a number");
  isErr(t, await s.dev.post(portalPath(s, name), { config: [] }), 400, E.INVALID_ARGUMENT, "config an array");
  isErr(t, await s.dev.post(portalPath(s, name), { description: 7 }), 400, E.INVALID_ARGUMENT, "description a number");
  isErr(t, await s.dev.post(portalPath(s, name), { name: "another" }), 400, E.INVALID_ARGUMENT, "a body name that is not the path's");
  isErr(t, await s.dev.post(portalPath(s, name), [1]), 400, E.INVALID_ARGUMENT, "an array body");
  isErr(t, await s.dev.post(portalPath(s, name), "{oops"), 400, E.BAD_JSON, "malformed JSON");
  isErr(t, await s.dev.post(portalPath(s, "x".repeat(300)), {}), 400, E.INVALID_ARGUMENT, "a name too long");
  isErr(t, await s.dev.get(portalPath(s, name)), 404, E.NOT_FOUND, "none of the failures made it");
  ok200(t, await s.dev.post(portalPath(s, name), {}), "create");
  isErr(t, await s.dev.post(portalPath(s, name), {}), 400, E.ALREADY_EXISTS, "create twice");
  isErr(t, await s.dev.put(portalPath(s, name), { name: "renamed" }), 400, E.INVALID_ARGUMENT, "rename");
  isErr(t, await s.dev.put(portalPath(s, uniq("missing")), { description: "x" }), 404, E.NOT_FOUND, "update a missing portal");
  isErr(t, await s.dev.del(portalPath(s, uniq("missing"))), 404, E.NOT_FOUND, "delete a missing portal");
  ok200(t, await s.dev.del(portalPath(s, name)), "delete");
  isErr(t, await s.dev.get(portalPath(s, name)), 404, E.NOT_FOUND, "gone after delete");
});

t.test("other systems and other developers", async (t) => {
  const name = uniq("mine");
  ok200(t, await s.dev.post(portalPath(s, name), { config }), "create");
  isErr(t, await other.dev.get(portalPath(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer reads");
  isErr(t, await other.dev.put(portalPath(s, name), { description: "x" }), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer updates");
  isErr(t, await other.dev.del(portalPath(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer deletes");
  isErr(t, await other.dev.get(`/admin/portals/${s.systemKey}`), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer lists");
  isErr(t, await other.dev.get(portalPath(other, name)), 404, E.NOT_FOUND, "the name in another system is another portal");
  isErr(t, await request(o.url, "GET", portalPath(s, name)), 401, E.AUTH_REQUIRED, "no token");
  isErr(t, await s.dev.get(`/admin/portals/nosuchsystem`), 404, undefined, "a system that does not exist");
  const u = await newUser(other);
  isErr(t, await u.client.get(portalPath(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "a user of another system");
  t.equal((await must(s.dev.get(portalPath(s, name)), "still there")).description, "", "nothing changed");
});

t.test("users: read and update by the role permission portals; never create, delete or list", async (t) => {
  const name = uniq("shared");
  ok200(t, await s.dev.post(portalPath(s, name), { config }), "create");
  const u = await newUser(s);
  isErr(t, await u.client.get(portalPath(s, name)), 401, E.PERMISSION_DENIED, "a user without the grant reads");
  const role = uniq("Viewers");
  ok200(t, await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: role, portals: [{ itemInfo: { name }, permissions: 1 }] }), "role with read on the portal");
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } }), "user in the role");
  const again = await must(s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "sign in again");
  const reader = s.app.with({ "ClearBlade-UserToken": again.user_token });
  const got = await must(reader.get(portalPath(s, name)), "read with the grant");
  t.same(got.config, config, "the user reads the config");
  isErr(t, await reader.put(portalPath(s, name), { description: "by user" }), 401, E.PERMISSION_DENIED, "read does not update");
  isErr(t, await reader.get(portalPath(s, uniq("other"))), 401, E.PERMISSION_DENIED, "the grant names one portal");
  const roles = await must(s.dev.get(`/admin/user/${s.systemKey}/roles`), "roles");
  const id = roles.find((r: any) => r.Name === role).ID;
  ok200(t, await s.dev.put(`/admin/user/${s.systemKey}/roles`, { id, changes: { portals: [{ itemInfo: { name }, permissions: 5 }] } }), "grant read and update");
  const up = await reader.put(portalPath(s, name), { description: "by user" });
  ok200(t, up, "update with the grant");
  t.equal(up.body.description, "by user");
  isErr(t, await reader.post(portalPath(s, uniq("new")), {}), 401, E.DEVELOPER_ONLY, "a user creates");
  isErr(t, await reader.del(portalPath(s, name)), 401, E.DEVELOPER_ONLY, "a user deletes");
  isErr(t, await reader.get(`/admin/portals/${s.systemKey}`), 401, E.DEVELOPER_ONLY, "a user lists");
  isErr(t, await reader.get(pluginPath(s)), 401, E.DEVELOPER_ONLY, "a user lists plugins");
});

t.test("plugins: the name in the body on create, the same rules", async (t) => {
  const name = uniq("widget");
  const made = await s.dev.post(pluginPath(s), { name, description: "a gauge", code: "function gauge() {}", config: JSON.stringify({ kind: "widget" }) });
  ok200(t, made, "create");
  t.equal(made.body.name, name);
  const got = await must(s.dev.get(pluginPath(s, name)), "get");
  t.equal(got.code, "function gauge() {}", "the plugin's code is kept");
  t.same(got.config, { kind: "widget" }, "config text returned as an object");
  t.equal(got.system_key, s.systemKey);
  const list = await must(s.dev.get(pluginPath(s)), "list");
  t.ok(Array.isArray(list) && list.some((p: any) => p.name === name), "listed");
  const up = await must(s.dev.put(pluginPath(s, name), { code: "function gauge2() {}" }), "update");
  t.equal(up.code, "function gauge2() {}");
  t.equal(up.description, "a gauge", "description kept");
  const bare = await must(s.dev.post(pluginPath(s), { name: uniq("nocfg") }), "a plugin without config");
  t.notOk("config" in bare, "no config invented for a plugin");
  isErr(t, await s.dev.post(pluginPath(s), { description: "no name" }), 400, E.INVALID_ARGUMENT, "no name");
  isErr(t, await s.dev.post(pluginPath(s), { name }), 400, E.ALREADY_EXISTS, "twice");
  isErr(t, await s.dev.post(pluginPath(s), { name: uniq("p"), config: "nope" }), 400, E.INVALID_ARGUMENT, "bad config text");
  isErr(t, await other.dev.get(pluginPath(s, name)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer");
  isErr(t, await other.dev.get(pluginPath(s)), 401, E.NOT_AUTHORIZED_FOR_SYSTEM, "another developer lists");
  const u = await newUser(s);
  isErr(t, await u.client.get(pluginPath(s, name)), 401, E.DEVELOPER_ONLY, "a user reads a plugin");
  ok200(t, await s.dev.del(pluginPath(s, name)), "delete");
  isErr(t, await s.dev.get(pluginPath(s, name)), 404, E.NOT_FOUND, "gone");
  t.notOk((await must(s.dev.get(`/admin/portals/${s.systemKey}`), "portals")).some((p: any) => p.name === name), "plugins are not portals");
});

t.test("a deleted system takes its portals with it", async (t) => {
  const sys = await devWithSystem(o, "doomed");
  ok200(t, await sys.dev.post(portalPath(sys, "p1"), { config }), "create");
  ok200(t, await sys.dev.del(`/admin/systemmanagement?id=${sys.systemKey}`), "delete the system");
  isErr(t, await sys.dev.get(`/admin/portals/${sys.systemKey}`), 404, undefined, "no system, no portals");
});

// ---- edge sync --------------------------------------------------------------------------------

async function edgeDev(e: Outpost, sys: DevSystem): Promise<Client> {
  let c: Client | null = null;
  const ok = await waitFor(async () => {
    const a = await request(e.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
    if (a.status === 200) c = new Client(e.url, { "ClearBlade-DevToken": a.body.dev_token });
    return a.status === 200;
  }, 20_000);
  if (!ok) throw new Error("the developer cannot sign in on the edge");
  return c!;
}

t.test("an edge receives the portals and plugins its template names, online and after being offline", async (t) => {
  const sys = await devWithSystem(o, "edgeportals");
  const edge = uniq("gw"), token = `${edge}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge}`, { token }), "edge record");
  ok200(t, await sys.dev.post(portalPath(sys, "office"), { config }), "a portal the template does not name");
  ok200(t, await sys.dev.post(portalPath(sys, "floor"), { description: "v1", config: JSON.stringify(config) }), "the portal it names, before the edge starts");
  isErr(t, await sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge}`, { add: [{ def_module: "portal", def_name: "nosuch", mode: "sync" }] }), 400, E.INVALID_ARGUMENT, "a template entry naming a portal the system does not have");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge}`, {
    add: [{ def_module: "portal", def_name: "floor", mode: "sync_to_edge" }, { def_module: "plugin", def_name: "*", mode: "sync_to_edge" }],
  }), "template: the portal floor, every plugin");
  const edgeArgs = ["--mode", "edge", "--platform-url", o.url, "--system-key", sys.systemKey, "--edge-name", edge, "--edge-token", token, "--sync-ping-ms", "500"];
  let e = await startOutpost({ args: edgeArgs, keepData: true });
  const dataDir = e.dataDir;
  t.teardown(async () => { await e.stop(); });
  let ed = await edgeDev(e, sys);
  const onEdge = async (path: string) => (await ed.get(path)).body;
  t.ok(await waitFor(async () => (await ed.get(portalPath(sys, "floor"))).status === 200, 20_000), "the snapshot brought the portal");
  const got = await onEdge(portalPath(sys, "floor"));
  t.same(got.config, config, "with its config");
  t.equal(got.description, "v1");
  isErr(t, await ed.get(portalPath(sys, "office")), 404, E.NOT_FOUND, "not the portal the template does not name");

  ok200(t, await sys.dev.put(portalPath(sys, "floor"), { description: "v2" }), "change on the platform");
  t.ok(await waitFor(async () => (await onEdge(portalPath(sys, "floor"))).description === "v2", 20_000), "the change reaches the edge");
  ok200(t, await sys.dev.post(pluginPath(sys), { name: "gauge", code: "g1" }), "a plugin on the platform");
  t.ok(await waitFor(async () => (await onEdge(pluginPath(sys, "gauge"))).code === "g1", 20_000), "the plugin reaches the edge");
  const status = await must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${edge}`), "sync status");
  t.ok(status.some((a: any) => a.asset_type === "portal" && a.asset_name === "floor"), "sync status lists the portal");
  t.ok(status.some((a: any) => a.asset_type === "plugin" && a.asset_name === "gauge"), "and the plugin");
  isErr(t, await ed.get(portalPath(sys, "office")), 404, E.NOT_FOUND, "still not the other portal (after changes that did arrive)");

  // offline: the changes wait for it
  await e.stop();
  ok200(t, await sys.dev.put(portalPath(sys, "floor"), { description: "v3", config: { ...config, columns: 9 } }), "change while the edge is off");
  ok200(t, await sys.dev.del(pluginPath(sys, "gauge")), "delete the plugin while the edge is off");
  ok200(t, await sys.dev.post(pluginPath(sys), { name: "chart", code: "c1" }), "a new plugin while the edge is off");
  e = await startOutpost({ args: edgeArgs, dataDir, keepData: true });
  ed = await edgeDev(e, sys);
  t.ok(await waitFor(async () => (await onEdge(pluginPath(sys, "chart"))).code === "c1", 20_000), "the new plugin arrives once the edge is back");
  const after = await onEdge(portalPath(sys, "floor"));
  t.equal(after.description, "v3", "the portal's change arrived");
  t.equal(after.config.columns, 9, "with its config");
  isErr(t, await ed.get(pluginPath(sys, "gauge")), 404, E.NOT_FOUND, "the deleted plugin is gone");
  ok200(t, await sys.dev.del(portalPath(sys, "floor")), "delete the portal online");
  t.ok(await waitFor(async () => (await ed.get(portalPath(sys, "floor"))).status === 404, 20_000), "gone from the edge");
  t.ok(await waitFor(async () => {
    const st = await must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${edge}`), "status");
    return st.filter((a: any) => a.asset_type === "plugin" || a.asset_type === "portal").every((a: any) => a.status === "synced");
  }, 20_000), "every portal and plugin entry synced");
});
