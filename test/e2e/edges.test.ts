// Edges and edge sync, black-box: edge records on both path families, templates, and a real platform and a real edge (two processes of the binary on
// loopback): initial sync of every asset kind, platform changes reaching the edge, edge rows
// reaching the platform, synced services, triggers and timers running on the edge, per-asset sync
// status (synced, pending, failed, retry), the edge working through a platform outage and both
// sides catching up, and the failure paths (wrong edge token, unknown edge, non-developers).
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import t, { type Test } from "tap";
import WebSocket from "ws";
import { Client, type DevSystem, type HttpResponse, type Outpost, devWithSystem, freePort, isEnvelope, newUser, request, startOutpost, uniq, sleep, waitFor, qs, isErr, ok200, collectionWith } from "./harness.ts";

// ---- helpers ----------------------------------------------------------------------------------



const dirs: string[] = [];
function dataDir() { const d = mkdtempSync(join(tmpdir(), "outpost-edges-e2e-")); dirs.push(d); return d; }

/** A process of the binary on a fixed HTTP port and data directory, so it can be stopped, killed
 *  and started again where the other side expects it. */
class Node {
  o: Outpost | null = null;
  constructor(readonly port: number, readonly dir: string, readonly args: () => string[]) {}
  get url() { return `http://127.0.0.1:${this.port}`; }
  get up() { return this.o !== null; }
  async start() {
    const o = await startOutpost({ dataDir: this.dir, args: [...this.args(), "--http-port", String(this.port)], waitForHealth: false });
    this.o = o;
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (o.proc.exitCode !== null) throw new Error(`outpost exited with ${o.proc.exitCode}:\n${o.logs()}`);
      try { if ((await request(this.url, "GET", "/health")).status === 200) return this; } catch { /* not up yet */ }
      if (Date.now() > deadline) { await o.kill(); throw new Error(`outpost did not come up:\n${o.logs()}`); }
      await sleep(20);
    }
  }
  async stop() { const o = this.o; this.o = null; await o?.stop(); }
  async kill() { const o = this.o; this.o = null; await o?.kill(); }
  logs() { return this.o?.logs() ?? ""; }
}

const nodes: Node[] = [];
t.teardown(async () => {
  for (const n of nodes) await n.kill();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const TEMPLATES_DIR = resolve(process.cwd(), "edge-templates");
const platform = new Node(await freePort(), dataDir(), () => ["--edge-templates-dir", TEMPLATES_DIR]);
nodes.push(platform);
await platform.start();
const s = await devWithSystem(platform, "edges-a");
const other = await devWithSystem(platform, "edges-b");
const SK = s.systemKey;

/** An edge process of `systemKey` (not started) on its own port and data directory. */
async function edgeNode(name: string, token: string, systemKey = SK) {
  const n = new Node(await freePort(), dataDir(), () => ["--mode", "edge", "--platform-url", platform.url, "--system-key", systemKey, "--edge-name", name, "--edge-token", token]);
  nodes.push(n);
  return n;
}
async function newEdgeNode(name: string, token: string, systemKey = SK) {
  return (await edgeNode(name, token, systemKey)).start();
}

const adminEdge = (name?: string, sk = SK) => `/admin/edges/${sk}${name === undefined ? "" : `/${name}`}`;
const apiEdge = (name: string, sk = SK) => `/api/v/3/edges/${sk}/${name}`;
const tplPath = (name?: string, sk = SK) => `/admin/edges/template/${sk}${name === undefined ? "" : `/${name}`}`;
const statusPath = (edge: string, sk = SK) => `/admin/${sk}/sync/edge/status/${edge}`;
const allStatusPath = (sk = SK) => `/admin/${sk}/sync/alledges/status`;
const retryPath = (sk = SK) => `/admin/${sk}/sync/retry`;

async function createEdge(name: string, body: Record<string, unknown> = {}, sys: DevSystem = s) {
  const r = await sys.dev.post(adminEdge(name, sys.systemKey), body);
  if (r.status !== 200) throw new Error(`create edge ${name}: ${r.status} ${r.text}`);
  return r.body;
}

/** All rows of a collection, item_id -> values (without item_id), as one server sees them. */
async function rowsOf(c: Client, id: string): Promise<Map<string, Record<string, unknown>>> {
  const r = await c.get(`/api/v/1/data/${id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`rows of ${id}: ${r.status} ${r.text}`);
  const out = new Map<string, Record<string, unknown>>();
  for (const row of r.body.DATA as Record<string, unknown>[]) {
    const { item_id, ...rest } = row;
    out.set(String(item_id), rest);
  }
  return out;
}
const sortedRows = (m: Map<string, Record<string, unknown>>) => [...m.entries()].sort(([a], [b]) => a.localeCompare(b));

async function devOn(node: Node, sys: DevSystem = s): Promise<Client> {
  const a = await request(node.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
  if (a.status !== 200) throw new Error(`developer sign-in on ${node.url}: ${a.status} ${a.text}`);
  return new Client(node.url, { "ClearBlade-DevToken": a.body.dev_token });
}
async function userOn(node: Node, email: string, password: string, sys: DevSystem = s): Promise<Client> {
  const a = await request(node.url, "POST", "/api/v/1/user/auth", { headers: { "ClearBlade-SystemKey": sys.systemKey, "ClearBlade-SystemSecret": sys.systemSecret }, body: { email, password } });
  if (a.status !== 200) throw new Error(`user sign-in on ${node.url}: ${a.status} ${a.text}`);
  return new Client(node.url, { "ClearBlade-UserToken": a.body.user_token });
}

interface Asset { asset_type: string; asset_name: string; status: string; desired_version: number; applied_version: number; last_error: string; attempts: number; updated_at: string }
async function status(edge: string): Promise<Asset[]> {
  const r = await s.dev.get(statusPath(edge));
  if (r.status !== 200) throw new Error(`status: ${r.status} ${r.text}`);
  return r.body;
}
const find = (list: Asset[], type: string, name: string) => list.find((a) => a.asset_type === type && a.asset_name === name);
async function edgeRecord(name: string) { return (await s.dev.get(adminEdge(name))).body; }

// ---- edge records -----------------------------------------------------------------------------

const STANDARD_FIELDS = ["description", "location", "mac_address", "public_addr", "public_port", "local_addr", "local_port", "broker_port", "broker_tls_port",
  "broker_ws_port", "broker_wss_port", "broker_auth_port", "broker_ws_auth_port", "communication_style", "policy_name", "resolver_func", "sync_edge_tables"];

function checkRecord(t: Test, b: any, name: string, what: string) {
  t.equal(b?.name, name, `${what}: name`);
  t.equal(b?.edge_key, `${SK}:${name}`, `${what}: edge_key is <systemKey>:<name>`);
  t.equal(b?.system_key, SK, `${what}: system_key`);
  t.equal(b?.system_secret, s.systemSecret, `${what}: system_secret`);
  t.equal(b?.novi_system_key, SK, `${what}: novi_system_key`);
  t.ok("token" in (b ?? {}), `${what}: token field`);
  t.type(b?.isConnected, "boolean", `${what}: isConnected is a boolean`);
  for (const k of ["first_talked", "last_talked", "last_seen_version"]) t.ok(k in (b ?? {}), `${what}: ${k}`);
  for (const k of STANDARD_FIELDS) t.ok(k in (b ?? {}), `${what}: standard field ${k}`);
}

t.test("edge records: create, read, update, delete on /admin/edges and /api/v/3/edges with the fields clients read", async (t) => {
  const name = uniq("gw");
  const c = await s.dev.post(adminEdge(name), { system_key: SK, system_secret: s.systemSecret, token: "a-secret-token-1", description: "north hall", location: "hall 3" });
  ok200(t, c, "create on /admin/edges");
  checkRecord(t, c.body, name, "create answer");
  t.equal(c.body.description, "north hall", "description");
  t.equal(c.body.location, "hall 3", "location (standard field)");
  t.equal(c.body.isConnected, false, "a new edge is not connected");
  t.equal(c.body.first_talked, null, "never talked: first_talked null");
  t.equal(c.body.last_talked, null, "never talked: last_talked null");
  t.equal(c.body.last_seen_version, "", "no version seen yet");
  t.type(c.body.token, "string", "token is a string");

  const g = await s.dev.get(adminEdge(name));
  ok200(t, g, "read on /admin/edges");
  checkRecord(t, g.body, name, "GET /admin/edges");
  const g3 = await s.dev.get(apiEdge(name));
  ok200(t, g3, "read on /api/v/3/edges");
  checkRecord(t, g3.body, name, "GET /api/v/3/edges");
  t.notMatch(JSON.stringify(g.body), /a-secret-token-1/, "the stored secret is not echoed back by a read");

  // the server chooses the token when none is given: it is shown once, on create
  const name2 = uniq("gw");
  const c2 = await s.dev.post(apiEdge(name2), { description: "south hall" });
  ok200(t, c2, "create on /api/v/3/edges without a token");
  checkRecord(t, c2.body, name2, "create (generated token)");
  t.type(c2.body.token, "string", "a generated token");
  t.ok(c2.body.token.length >= 16, "the generated token is long enough to be a secret");

  isErr(t, await s.dev.post(adminEdge(name), { token: "a-secret-token-2" }), 400, "create a duplicate");
  isErr(t, await s.dev.post(adminEdge(uniq("gw")), { token: "short" }), 400, "a token shorter than 8 characters");
  isErr(t, await s.dev.post(adminEdge("bad%20name!"), { token: "a-secret-token-3" }), 400, "an invalid edge name");
  isErr(t, await s.dev.post(adminEdge(uniq("gw")), { template: "no-such-template" }), 400, "an unknown named template");

  const u = await s.dev.put(adminEdge(name), { description: "north hall, rack 2", mac_address: "00:11:22:33:44:55" });
  ok200(t, u, "update on /admin/edges");
  checkRecord(t, u.body, name, "update answer");
  t.equal(u.body.description, "north hall, rack 2", "description updated");
  t.equal(u.body.mac_address, "00:11:22:33:44:55", "mac_address updated");
  t.equal(u.body.location, "hall 3", "other fields kept");
  const u3 = await s.dev.put(apiEdge(name), { public_addr: "10.0.0.7" });
  ok200(t, u3, "update on /api/v/3/edges");
  t.equal(u3.body.public_addr, "10.0.0.7");
  t.equal((await s.dev.get(apiEdge(name))).body.mac_address, "00:11:22:33:44:55", "the update is stored");
  isErr(t, await s.dev.put(adminEdge(name), { name: "renamed" }), 400, "an edge cannot be renamed");

  // list and count, with queries
  const l = await s.dev.get(adminEdge());
  ok200(t, l, "list");
  t.ok(Array.isArray(l.body), "the list is an array");
  t.ok(l.body.some((e: any) => e.name === name) && l.body.some((e: any) => e.name === name2), "both edges listed");
  for (const e of l.body) checkRecord(t, e, e.name, `list entry ${e.name}`);
  const lq = await s.dev.get(`${adminEdge()}?query=${qs({ FILTERS: [[{ EQ: [{ description: "south hall" }] }]] })}`);
  ok200(t, lq, "list with a query");
  t.same(lq.body.map((e: any) => e.name), [name2], "the query selects one edge");
  const l2 = await s.dev.get(`/api/v/2/edges/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ location: "hall 3" }] }]] })}`);
  ok200(t, l2, "list on /api/v/2/edges with a query on a standard field");
  t.same(l2.body.map((e: any) => e.name), [name], "selected by location");
  const before = (await s.dev.get(`/api/v/3/edges/${SK}/count`)).body;
  t.type(before.count, "number", "count is {count}");
  t.ok(before.count >= 2, "count includes both edges");
  const cq = await s.dev.get(`/api/v/3/edges/${SK}/count?query=${qs({ FILTERS: [[{ EQ: [{ description: "south hall" }] }]] })}`);
  t.same(cq.body, { count: 1 }, "count with a query");

  // delete
  ok200(t, await s.dev.del(adminEdge(name2)), "delete on /admin/edges");
  isErr(t, await s.dev.get(adminEdge(name2)), 404, "read after delete");
  ok200(t, await s.dev.del(apiEdge(name)), "delete on /api/v/3/edges");
  isErr(t, await s.dev.get(apiEdge(name)), 404, "read after delete (api path)");
  isErr(t, await s.dev.del(apiEdge(name)), 404, "delete again");
  t.equal((await s.dev.get(`/api/v/3/edges/${SK}/count`)).body.count, before.count - 2, "count went down by two");
});

t.test("edge columns: add, use, query, delete (UserDefined)", async (t) => {
  const col = uniq("floor");
  ok200(t, await s.dev.post(`${adminEdge()}/columns`, { column_name: col, type: "string" }), "add a custom column");
  isErr(t, await s.dev.post(`${adminEdge()}/columns`, { column_name: col, type: "string" }), 400, "add it again");
  for (const path of [`${adminEdge()}/columns`, `/api/v/3/edges/${SK}/columns`]) {
    const cols = await s.dev.get(path);
    ok200(t, cols, `GET ${path}`);
    t.ok(Array.isArray(cols.body), "columns is an array");
    const mine = cols.body.find((c: any) => c.ColumnName === col);
    t.same(mine && { ColumnName: mine.ColumnName, ColumnType: mine.ColumnType, UserDefined: mine.UserDefined }, { ColumnName: col, ColumnType: "string", UserDefined: true }, "the custom column is UserDefined");
    const std = cols.body.find((c: any) => c.ColumnName === "description");
    t.equal(std?.UserDefined, false, "a standard column is not UserDefined");
    for (const c of cols.body) t.type(c.UserDefined, "boolean", `${c.ColumnName}: UserDefined is a boolean`);
  }
  const a = uniq("gw"), b = uniq("gw");
  await createEdge(a, { token: "column-test-token" });
  await createEdge(b, { token: "column-test-token" });
  const u = await s.dev.put(adminEdge(a), { [col]: "3" });
  ok200(t, u, "set the custom column");
  t.equal(u.body[col], "3", "the record carries it");
  t.equal((await s.dev.get(adminEdge(b))).body[col], null, "unset on another edge: null");
  const q = await s.dev.get(`${adminEdge()}?query=${qs({ FILTERS: [[{ EQ: [{ [col]: "3" }] }]] })}`);
  t.same(q.body.map((e: any) => e.name), [a], "query on the custom column");
  t.same((await s.dev.get(`/api/v/3/edges/${SK}/count?query=${qs({ FILTERS: [[{ EQ: [{ [col]: "3" }] }]] })}`)).body, { count: 1 }, "count on the custom column");
  ok200(t, await s.dev.del(`${adminEdge()}/columns?column=${col}`), "delete the column");
  t.notOk((await s.dev.get(`${adminEdge()}/columns`)).body.some((c: any) => c.ColumnName === col), "gone from the columns");
  t.notOk(col in (await s.dev.get(adminEdge(a))).body, "gone from the record");
  isErr(t, await s.dev.del(`${adminEdge()}/columns?column=description`), 400, "a standard column is not a custom column to delete");
  await s.dev.del(adminEdge(a));
  await s.dev.del(adminEdge(b));
});

// ---- templates --------------------------------------------------------------------------------

t.test("templates: GET and PUT add/remove, `*`, default mode, the older sync paths, named templates", async (t) => {
  // a system of its own: entries name assets it has (a service, two collections)
  const ts = await devWithSystem(platform, "edges-templates");
  const TS = ts.systemKey;
  ok200(t, await ts.dev.post(`/admin/code/v/1/${TS}/svcA`, { code: "function svcA(req, resp) { resp.success(1); }", parameters: [] }), "service svcA");
  for (const c of ["readings", "both"]) ok200(t, await ts.dev.post("/admin/collectionmanagement", { name: c, appID: TS }), `collection ${c}`);
  const name = uniq("tpl");
  await createEdge(name, { token: "template-token-1" }, ts);
  const empty = await ts.dev.get(tplPath(undefined, TS));
  ok200(t, empty, "GET template");
  t.same(empty.body[name], [], "a new edge has an empty template");

  const p = await ts.dev.put(tplPath(name, TS), { add: [
    { def_module: "service", def_name: "svcA" },
    { def_module: "library", def_name: "*", mode: "deploy" },
    { def_module: "collection", def_name: "readings", mode: "sync_to_platform" },
    { def_module: "collection", def_name: "both", mode: "sync" },
    { def_module: "trigger", def_name: "*", mode: "sync_to_edge" },
  ] });
  ok200(t, p, "PUT add");
  t.same(Object.keys(p.body), [name], "the answer is keyed by the edge's name");
  const byKey = (list: any[]) => Object.fromEntries(list.map((e) => [`${e.def_module}/${e.def_name}`, e.mode]));
  t.same(byKey(p.body[name]), {
    "service/svcA": "sync_to_edge", "library/*": "deploy", "collection/readings": "sync_to_platform", "collection/both": "sync", "trigger/*": "sync_to_edge",
  }, "entries with their modes; mode defaults to sync_to_edge");
  for (const e of p.body[name]) {
    for (const k of ["def_module", "def_name", "mode"]) t.type(e[k], "string", `${e.def_module}/${e.def_name}: ${k}`);
  }
  const g = await ts.dev.get(tplPath(undefined, TS));
  t.same(byKey(g.body[name]), byKey(p.body[name]), "GET returns what PUT set");

  const r = await ts.dev.put(tplPath(name, TS), { remove: [{ def_module: "service", def_name: "svcA" }, { def_module: "trigger", def_name: "*" }], add: [{ def_module: "service", def_name: "*", mode: "sync" }] });
  ok200(t, r, "PUT remove and add");
  t.same(byKey(r.body[name]), { "library/*": "deploy", "collection/readings": "sync_to_platform", "collection/both": "sync", "service/*": "sync" }, "removed and added");
  const again = await ts.dev.put(tplPath(name, TS), { add: [{ def_module: "library", def_name: "*", mode: "sync_to_edge" }] });
  t.equal(byKey(again.body[name])["library/*"], "sync_to_edge", "adding an existing entry changes its mode");
  t.equal(again.body[name].filter((e: any) => e.def_module === "library").length, 1, "no duplicate entry");

  // the older "sync" paths are the same resource
  const old = await ts.dev.get(`/admin/edges/sync/${TS}`);
  ok200(t, old, "GET /admin/edges/sync");
  t.same(byKey(old.body[name]), byKey(again.body[name]), "same template on the sync path");
  ok200(t, await ts.dev.put(`/admin/edges/sync/${TS}/${name}`, { add: [{ def_module: "timer", def_name: "*" }] }), "PUT on the sync path");
  t.equal(byKey((await ts.dev.get(tplPath(undefined, TS))).body[name])["timer/*"], "sync_to_edge", "visible on the template path");

  // bad bodies
  const bad: [unknown, string][] = [
    [{ add: [{ def_module: "widget", def_name: "*" }] }, "an unknown def_module"],
    [{ add: [{ def_module: "service", def_name: "" }] }, "an empty def_name"],
    [{ add: [{ def_module: "service" }] }, "no def_name"],
    [{ add: [{ def_module: "service", def_name: "x", mode: "sideways" }] }, "an unknown mode"],
    [{ add: [{ def_module: "service", def_name: "x", color: "red" }] }, "an unknown field in an entry"],
    [{ add: { def_module: "service", def_name: "x" } }, "add is not an array"],
    [{ remove: [{ def_module: "service" }] }, "remove without def_name"],
    [{ replace: [] }, "an unknown top-level field"],
    ["[1,2", "broken JSON"],
  ];
  for (const [body, what] of bad) isErr(t, await ts.dev.put(tplPath(name, TS), body), 400, what);
  t.same(byKey((await ts.dev.get(tplPath(undefined, TS))).body[name]), { "library/*": "sync_to_edge", "collection/readings": "sync_to_platform", "collection/both": "sync", "service/*": "sync", "timer/*": "sync_to_edge" }, "bad bodies changed nothing");
  isErr(t, await ts.dev.put(tplPath("no-such-edge", TS), { add: [{ def_module: "service", def_name: "*" }] }), 404, "PUT for an unknown edge");

  // named templates from edge-templates/ (the repository's examples), overridden by the edge's own entries
  t.ok(existsSync(join(TEMPLATES_DIR, "telemetry-uplink.json")), "the repository ships telemetry-uplink.json");
  const fleet = uniq("fleet");
  await createEdge(fleet, { token: "template-token-2", template: "telemetry-uplink" }, ts);
  const named = byKey((await ts.dev.get(tplPath(undefined, TS))).body[fleet]);
  t.same(named, { "collection/readings": "sync_to_platform", "collection/sites": "sync_to_edge", "service/*": "sync_to_edge", "device/*": "sync_to_edge" }, "the named template's entries");
  await ts.dev.put(tplPath(fleet, TS), { add: [{ def_module: "service", def_name: "*", mode: "deploy" }, { def_module: "user", def_name: "*" }] });
  const over = byKey((await ts.dev.get(tplPath(undefined, TS))).body[fleet]);
  t.equal(over["service/*"], "deploy", "the edge's own entry overrides the named template's");
  t.equal(over["user/*"], "sync_to_edge", "and adds to it");
  t.equal(over["collection/sites"], "sync_to_edge", "the rest of the named template stays");
  const sw = await ts.dev.put(adminEdge(fleet, TS), { template: "gateway-basic" });
  ok200(t, sw, "switch the named template");
  t.equal(sw.body.template, "gateway-basic", "the record names its template");
  const gb = byKey((await ts.dev.get(tplPath(undefined, TS))).body[fleet]);
  t.equal(gb["collection/*"], "sync", "gateway-basic's entries");
  t.equal(gb["service/*"], "deploy", "own entries still override");
  await ts.dev.del(adminEdge(name, TS));
  await ts.dev.del(adminEdge(fleet, TS));
});

// ---- failure paths without an edge process ----------------------------------------------------

t.test("unknown edges, non-developers and other systems' developers are refused with the envelope", async (t) => {
  const name = uniq("gw");
  await createEdge(name, { token: "refusal-token-1" });
  isErr(t, await s.dev.get(adminEdge("no-such-edge")), 404, "GET an unknown edge");
  isErr(t, await s.dev.put(adminEdge("no-such-edge"), { description: "x" }), 404, "PUT an unknown edge");
  isErr(t, await s.dev.del(adminEdge("no-such-edge")), 404, "DELETE an unknown edge");
  isErr(t, await s.dev.get(statusPath("no-such-edge")), 404, "sync status of an unknown edge");
  isErr(t, await s.dev.post(retryPath(), { edge: "no-such-edge" }), 404, "retry for an unknown edge");
  isErr(t, await s.dev.get(adminEdge(name, "0000000000000000000000000000ff")), 404, "an unknown system");

  const u = await newUser(s);
  const asUser = u.client;
  isErr(t, await asUser.get(statusPath(name)), 401, "a user token on the sync status");
  isErr(t, await asUser.get(allStatusPath()), 401, "a user token on all edges' status");
  isErr(t, await asUser.post(retryPath(), { edge: name }), 401, "a user token on retry");
  isErr(t, await asUser.get(tplPath()), 401, "a user token on the template");
  isErr(t, await asUser.put(tplPath(name), { add: [{ def_module: "service", def_name: "*" }] }), 401, "a user token changing the template");
  isErr(t, await asUser.get(`/api/v/2/edges/${SK}`), 401, "a user without the edges permission listing edges");
  isErr(t, await asUser.post(apiEdge(uniq("gw")), { token: "user-made-token" }), 401, "a user without the edges permission creating an edge");
  isErr(t, await asUser.post(`${adminEdge()}/columns`, { column_name: "x", type: "string" }), 401, "a user adding an edge column");

  // a role with the edges permission lets a user read edges (JS SDK path), still not the sync admin paths
  const role = await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("EdgeReader"), edges: { permissions: 1 } });
  ok200(t, role, "a role with the edges permission");
  ok200(t, await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [role.body.role_id] } } }), "given to the user");
  const reader = await userOn(platform, u.email, u.password);
  const l = await reader.get(`/api/v/2/edges/${SK}`);
  ok200(t, l, "the user lists edges");
  t.ok(Array.isArray(l.body) && l.body.some((e: any) => e.name === name), "the edge is listed");
  ok200(t, await reader.get(apiEdge(name)), "the user reads an edge");
  isErr(t, await reader.post(apiEdge(uniq("gw")), { token: "user-made-token" }), 401, "reading does not allow creating");
  isErr(t, await reader.get(statusPath(name)), 401, "nor the sync status");

  for (const [what, r] of [
    ["another system's developer reads the edge", await other.dev.get(adminEdge(name))],
    ["another system's developer reads the status", await other.dev.get(statusPath(name))],
    ["another system's developer reads all status", await other.dev.get(allStatusPath())],
    ["another system's developer changes the template", await other.dev.put(tplPath(name), { add: [{ def_module: "service", def_name: "*" }] })],
  ] as [string, HttpResponse][]) {
    t.ok(r.status === 401 || r.status === 403, `${what} -> 401/403 (got ${r.status})`);
    t.ok(isEnvelope(r.body, r.status), `${what}: error envelope`);
  }
  const none = new Client(platform.url);
  isErr(t, await none.get(statusPath(name)), 401, "no token on the status");
  isErr(t, await none.get(adminEdge()), 401, "no token on the list");
  await s.dev.del(adminEdge(name));
});

// ---- a real edge ------------------------------------------------------------------------------

const EDGE = uniq("gw");
const EDGE_TOKEN = "edge-secret-token-1";
const edge = await edgeNode(EDGE, EDGE_TOKEN);

// assets created on the platform before the edge first connects
const A = {
  ref: { id: "", name: uniq("ref") },          // sync_to_edge, with rows
  inbox: { id: "", name: uniq("inbox") },      // sync (both ways)
  up: { id: "", name: uniq("up") },            // sync_to_platform
  events: { id: "", name: uniq("events") },    // sync_to_platform: what services on the edge record
  schemaOnly: { id: "", name: uniq("schema") },// sync_to_edge, rows: false
  priv: { id: "", name: uniq("private") },     // not in the template
  lib: uniq("edgemath"),
  calc: uniq("calc"),
  recorder: uniq("recorder"),
  trigger: uniq("onInbox"),
  pconn: uniq("onPconn"),
  econn: uniq("onEconn"),
  edisc: uniq("onEdisc"),
  estart: uniq("onEstart"),
  timer: uniq("tick"),
  role: uniq("EdgeOps"),
  roleId: "",
  device: uniq("sensor"),
  user: { email: "", password: "", id: "" },
};
const REF_ROWS = 60;

/** Events the recorder service wrote (`tag`, whether it ran on an edge). */
async function eventsOn(c: Client, tag: string) {
  const r = await c.get(`/api/v/1/data/${A.events.id}?query=${qs({ FILTERS: [[{ EQ: [{ tag }] }]], PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`events: ${r.status} ${r.text}`);
  return r.body.DATA as { tag: string; on_edge: boolean; edge_id: string; payload: string }[];
}

t.test("initial sync of every asset kind: collections with rows, services, libraries, triggers, timers, roles, users, devices", async (t) => {
  for (const [k, cols] of [["ref", [["label", "string"], ["n", "int"]]], ["inbox", [["label", "string"], ["n", "int"]]], ["up", [["label", "string"], ["n", "int"]]],
    ["events", [["tag", "string"], ["on_edge", "bool"], ["edge_id", "string"], ["payload", "string"]]], ["schemaOnly", [["label", "string"]]], ["priv", [["label", "string"]]]] as const) {
    const c = await collectionWith(s, cols as unknown as [string, string][], A[k].name);
    A[k].id = c.id;
  }
  const refRows = Array.from({ length: REF_ROWS }, (_, i) => ({ label: `r${i}`, n: i }));
  ok200(t, await s.dev.post(`/api/v/1/data/${A.ref.id}`, refRows), "rows of ref");
  ok200(t, await s.dev.post(`/api/v/1/data/${A.schemaOnly.id}`, [{ label: "stays on the platform" }]), "a row of the schema-only collection");
  ok200(t, await s.dev.post(`/api/v/1/data/${A.priv.id}`, [{ label: "private" }]), "a row of a collection outside the template");
  ok200(t, await s.dev.post(`/api/v/1/data/${A.inbox.id}`, [{ label: "from the platform", n: 1 }]), "a row of inbox");

  ok200(t, await s.dev.post(`/codeadmin/v/2/library/${SK}/${A.lib}`, { code: "function triple(x) { return x * 3; }", dependencies: "", description: "triples", api: "triple(x)" }), "library");
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/${A.calc}`, { code: `function ${A.calc}(req, resp) { resp.success({ v: triple(req.params.x), edge: ClearBlade.isEdge(), edgeId: cbmeta.edge_id, gen: 1 }); }`, parameters: ["x"], dependencies: `clearblade,${A.lib}` }), "service using the library");
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/${A.recorder}`, { code: `function ${A.recorder}(req, resp) {
    var tag = req.params.tag || (req.params.timer ? "timer" : req.params.collectionName ? "inbox" : String(req.params.trigger || "other").split("::").pop());
    ClearBlade.Collection({ collectionName: "${A.events.name}" }).create({ tag: tag, on_edge: ClearBlade.isEdge(), edge_id: cbmeta.edge_id || "", payload: JSON.stringify(req.params) }, function (err, d) {
      if (err) resp.error(d); else resp.success("recorded");
    });
  }`, parameters: [] }), "recorder service");
  ok200(t, await s.dev.post(`/admin/triggers/handlers/${SK}/${A.trigger}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: A.inbox.name }, service_name: A.recorder }), "trigger on inbox");
  for (const [name, ev] of [[A.pconn, "PlatformConnectedOnEdge"], [A.estart, "EdgeStarted"], [A.econn, "EdgeConnectedOnPlatform"], [A.edisc, "EdgeDisconnectedOnPlatform"]]) {
    ok200(t, await s.dev.post(`/admin/triggers/handlers/${SK}/${name}`, { def_module: "StartConnectDisconnect", def_name: ev, key_value_pairs: {}, service_name: A.recorder }), `trigger on ${ev}`);
  }
  const later = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, "Z");
  ok200(t, await s.dev.post(`/admin/triggers/timers/${SK}/${A.timer}`, { frequency: 3600, repeats: -1, start_time: later, service_name: A.recorder, description: "hourly" }), "timer");

  const role = await s.dev.post(`/admin/user/${SK}/roles`, { name: A.role, collections: [A.ref, A.inbox, A.up, A.events].map((c) => ({ itemInfo: { id: c.id }, permissions: 15 })), services: [{ itemInfo: { name: A.calc }, permissions: 1 }] });
  ok200(t, role, "role");
  A.roleId = role.body.role_id;
  const u = await newUser(s);
  A.user = { email: u.email, password: u.password, id: u.userId };
  ok200(t, await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [A.roleId] } } }), "user gets the role");
  ok200(t, await s.dev.post(`/admin/devices/${SK}/${A.device}`, { type: "sensor", state: "idle", active_key: "sensor-key-1" }), "device");

  await createEdge(EDGE, { token: EDGE_TOKEN, description: "the test edge" });
  const tpl = await s.dev.put(tplPath(EDGE), { add: [
    { def_module: "service", def_name: "*" }, { def_module: "library", def_name: "*" }, { def_module: "trigger", def_name: "*" },
    { def_module: "timer", def_name: "*" }, { def_module: "role", def_name: "*" }, { def_module: "user", def_name: "*" }, { def_module: "device", def_name: "*" },
    { def_module: "collection", def_name: A.ref.name, mode: "sync_to_edge" }, { def_module: "collection", def_name: A.inbox.name, mode: "sync" },
    { def_module: "collection", def_name: A.up.name, mode: "sync_to_platform" }, { def_module: "collection", def_name: A.events.name, mode: "sync_to_platform" },
    { def_module: "collection", def_name: A.schemaOnly.name, mode: "sync_to_edge", rows: false },
  ] });
  ok200(t, tpl, "template");

  await edge.start();
  t.ok(await waitFor(async () => (await edgeRecord(EDGE)).isConnected === true), "the edge connects");
  t.ok(await waitFor(async () => (await eventsOn(s.dev, "EdgeConnectedOnPlatform")).some((e) => !e.on_edge && JSON.parse(e.payload).edgeName === EDGE)), "EdgeConnectedOnPlatform fired on the platform with the edge's name");
  t.ok(await waitFor(async () => {
    const st = await status(EDGE);
    return st.length > 0 && st.every((a) => a.status === "synced");
  }), "every asset of the template reaches synced");

  const ed = await devOn(edge);
  t.ok(ed.headers["ClearBlade-DevToken"], "the system's developer signs in on the edge with the platform credentials");
  // collections: the template's, with the platform's ids; rows where the template says so
  const cols = await ed.get(`/admin/allcollections?appid=${SK}`);
  ok200(t, cols, "collections on the edge");
  const names = new Map<string, string>(cols.body.map((c: any) => [c.name, c.collectionID]));
  for (const k of ["ref", "inbox", "up", "events", "schemaOnly"] as const) t.equal(names.get(A[k].name), A[k].id, `collection ${k} is on the edge with the platform's id`);
  t.notOk(names.has(A.priv.name), "a collection outside the template is not");
  t.same(sortedRows(await rowsOf(ed, A.ref.id)), sortedRows(await rowsOf(s.dev, A.ref.id)), `the ${REF_ROWS} rows of ref are identical on the edge`);
  t.equal((await rowsOf(ed, A.ref.id)).size, REF_ROWS, "row count");
  t.equal((await rowsOf(ed, A.inbox.id)).size, 1, "the sync collection's row came down");
  t.equal((await rowsOf(ed, A.schemaOnly.id)).size, 0, "rows: false brings the schema without rows");
  const colsOf = async (c: Client, id: string) => (await c.get(`/api/v/1/data/${id}/columns`)).body.map((x: any) => `${x.ColumnName}:${x.ColumnType}`).sort();
  t.same(await colsOf(ed, A.events.id), await colsOf(s.dev, A.events.id), "columns of a sync_to_platform collection are the platform's");
  t.same(await colsOf(ed, A.schemaOnly.id), await colsOf(s.dev, A.schemaOnly.id), "columns of a schema-only collection");
  // code
  const svcs = await ed.get(`/admin/code/v/1/${SK}`);
  ok200(t, svcs, "services on the edge");
  t.same([...svcs.body.code].sort(), [A.calc, A.recorder].sort(), "both services");
  const svc = await ed.get(`/admin/code/v/1/${SK}/${A.calc}`);
  t.match(svc.body.code ?? svc.text, /triple\(req\.params\.x\)/, "with their code");
  const libs = await ed.get(`/codeadmin/v/2/library/${SK}`);
  ok200(t, libs, "libraries on the edge");
  t.same(libs.body.map((l: any) => l.name), [A.lib], "the library");
  t.match(libs.body[0]?.code, /x \* 3/, "with its code");
  const trg = await ed.get(`/admin/triggers/handlers/${SK}`);
  ok200(t, trg, "triggers on the edge");
  t.same(trg.body.map((x: any) => x.name).sort(), [A.trigger, A.pconn, A.estart, A.econn, A.edisc].sort(), "every trigger");
  const tm = await ed.get(`/admin/triggers/timers/${SK}/${A.timer}`);
  ok200(t, tm, "the timer is on the edge");
  t.equal(tm.body.frequency, 3600, "with its frequency");
  // roles, users, devices
  const roles = await ed.get(`/admin/user/${SK}/roles`);
  ok200(t, roles, "roles on the edge");
  const roleNames = (r: HttpResponse) => (r.body as any[]).map((x) => x.Name).sort();
  t.same(roleNames(roles), roleNames(await s.dev.get(`/admin/user/${SK}/roles`)), "the same roles as on the platform");
  t.ok(roleNames(roles).includes(A.role), "including the custom role");
  const edgeRole = (roles.body as any[]).find((x) => x.Name === A.role);
  t.same(edgeRole?.Permissions?.Collections?.map((c: any) => c.ID ?? c.Id ?? c.id).sort(), [A.ref, A.inbox, A.up, A.events].map((c) => c.id).sort(), "with its collection permissions");
  const users = await ed.get(`/admin/user/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ email: A.user.email }] }]] })}`);
  ok200(t, users, "users on the edge");
  t.equal(users.body.length, 1, "the user");
  t.equal(users.body[0]?.user_id, A.user.id, "with the platform's user id");
  const dev = await ed.get(`/admin/devices/${SK}/${A.device}`);
  ok200(t, dev, "the device is on the edge");
  t.equal(dev.body.state, "idle", "with its state");
  // they sign in on the edge as on the platform
  const uc = await userOn(edge, A.user.email, A.user.password);
  ok200(t, await uc.get(`/api/v/1/user/info`), "the user signs in on the edge");
  const rolesOfUser = await ed.get(`/admin/user/${SK}/roles?user=${A.user.id}`);
  t.same(roleNames(rolesOfUser), roleNames(await s.dev.get(`/admin/user/${SK}/roles?user=${A.user.id}`)), "the user's role memberships came along");
  t.ok(roleNames(rolesOfUser).includes(A.role), "including the custom role");
  const da = await request(edge.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: A.device, activeKey: "sensor-key-1" } });
  ok200(t, da, "the device signs in on the edge");
  t.type(da.body.deviceToken, "string", "a device token from the edge");
  isErr(t, await request(edge.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: A.device, activeKey: "wrong-key" } }), 401, "with its key only");
});

t.test("the edge record and the sync status of a connected, synced edge", async (t) => {
  const e = await edgeRecord(EDGE);
  checkRecord(t, e, EDGE, "connected edge");
  t.equal(e.isConnected, true, "isConnected");
  t.type(e.first_talked, "number", "first_talked is set");
  t.type(e.last_talked, "number", "last_talked is set");
  t.ok(e.first_talked <= e.last_talked, "first_talked <= last_talked");
  t.ok(Math.abs(e.last_talked - Date.now() / 1000) < 120, "last_talked is recent (epoch seconds)");
  t.type(e.last_seen_version, "string");
  t.ok(e.last_seen_version.length > 0, `last_seen_version reported (${e.last_seen_version})`);
  t.ok(await waitFor(async () => (await edgeRecord(EDGE)).sync_lag === 0), "no lag once synced");

  const st = await status(EDGE);
  for (const a of st) {
    t.same(Object.keys(a).sort(), ["applied_version", "asset_name", "asset_type", "attempts", "desired_version", "entry", "last_error", "source", "status", "updated_at"], `${a.asset_type}/${a.asset_name}: fields`);
    t.equal(a.status, "synced", `${a.asset_type}/${a.asset_name}: synced`);
    t.ok(a.applied_version >= a.desired_version, `${a.asset_type}/${a.asset_name}: applied ${a.applied_version} >= desired ${a.desired_version}`);
    t.equal(a.last_error, "", "no error");
  }
  const want: [string, string][] = [
    ["service", A.calc], ["service", A.recorder], ["library", A.lib], ["trigger", A.trigger], ["trigger", A.pconn], ["trigger", A.estart], ["timer", A.timer], ["role", A.role],
    ["user", A.user.email], ["device", A.device], ["collection", A.ref.name], ["collection_rows", A.ref.name], ["collection", A.inbox.name],
    ["collection_rows", A.inbox.name], ["collection", A.schemaOnly.name], ["collection_rows", A.up.name], ["collection_rows", A.events.name],
  ];
  for (const [type, name] of want) t.ok(find(st, type, name), `status lists ${type} ${name}`);
  t.notOk(find(st, "collection_rows", A.schemaOnly.name), "rows: false has no rows asset");
  t.notOk(st.some((a) => a.asset_name === A.priv.name), "an asset outside the template is not listed");

  const all = await s.dev.get(allStatusPath());
  ok200(t, all, "all edges' status");
  t.ok(Array.isArray(all.body), "an array");
  const mine = all.body.find((x: any) => x.edge_name === EDGE);
  t.ok(mine, "lists the edge");
  t.equal(mine?.isConnected, true, "connected");
  t.equal(mine?.sync_lag, 0, "no lag");
  t.same(mine?.assets?.map((a: Asset) => `${a.asset_type}/${a.asset_name}/${a.status}`), st.map((a) => `${a.asset_type}/${a.asset_name}/${a.status}`), "the same assets as the edge's own status");
});

t.test("a synced service runs on the edge, with a user token obtained on the edge", async (t) => {
  const uc = await userOn(edge, A.user.email, A.user.password);
  const r = await uc.post(`/api/v/1/code/${SK}/${A.calc}`, { x: 14 });
  ok200(t, r, "execute on the edge");
  t.same(r.body, { success: true, results: { v: 42, edge: true, edgeId: EDGE, gen: 1 } }, "ran on the edge, with the synced library");
  const p = await (await userOn(platform, A.user.email, A.user.password)).post(`/api/v/1/code/${SK}/${A.calc}`, { x: 1 });
  t.same(p.body?.results?.edge, false, "the same service on the platform says it is not on an edge");
  // the user's role governs the edge too
  isErr(t, await uc.post(`/api/v/1/code/${SK}/${A.recorder}`, { tag: "x" }), 401, "a service the user's role does not grant");
  isErr(t, await uc.get(`/api/v/1/data/${A.schemaOnly.id}`), 401, "a collection the user's role does not grant");
  ok200(t, await uc.get(`/api/v/1/data/${A.ref.id}`), "a collection the role grants");
});

t.test("a synced trigger fires on the edge (and its service's rows flow up)", async (t) => {
  const uc = await userOn(edge, A.user.email, A.user.password);
  const ins = await uc.post(`/api/v/1/data/${A.inbox.id}`, { label: "from the edge", n: 7 });
  ok200(t, ins, "insert into inbox on the edge");
  const ed = await devOn(edge);
  t.ok(await waitFor(async () => (await eventsOn(ed, "inbox")).length >= 1), "the trigger's service recorded the insert on the edge");
  const ev = (await eventsOn(ed, "inbox"))[0]!;
  t.equal(ev.on_edge, true, "it ran on the edge");
  t.equal(ev.edge_id, EDGE, "on this edge");
  t.equal(JSON.parse(ev.payload).collectionName, A.inbox.name, "fired by the inbox insert");
  t.ok(await waitFor(async () => (await eventsOn(s.dev, "inbox")).some((e) => e.on_edge === true && e.edge_id === EDGE)), "the recorded row (sync_to_platform) reached the platform");

  // a timer created on the platform now runs on the edge too
  const name = uniq("fast");
  ok200(t, await s.dev.post(`/admin/triggers/timers/${SK}/${name}`, { frequency: 1, repeats: 2, start_time: "now", service_name: A.recorder }), "a fast timer on the platform");
  t.ok(await waitFor(async () => (await eventsOn(ed, "timer")).some((e) => e.on_edge && JSON.parse(e.payload).timer === name), 20_000), "the synced timer fired on the edge");
  await s.dev.del(`/admin/triggers/timers/${SK}/${name}`);
});

t.test("changes on the platform reach the edge", async (t) => {
  const ed = await devOn(edge);
  // rows: insert, update, delete
  const ins = await s.dev.post(`/api/v/1/data/${A.ref.id}`, { label: "new", n: 1000 });
  ok200(t, ins);
  const newId = ins.body[0].item_id;
  t.ok(await waitFor(async () => (await rowsOf(ed, A.ref.id)).get(newId)?.n === 1000), "an inserted row");
  ok200(t, await s.dev.put(`/api/v/1/data/${A.ref.id}`, { query: [[{ EQ: [{ label: "r5" }] }]], $set: { n: 5005 } }), "update on the platform");
  t.ok(await waitFor(async () => [...(await rowsOf(ed, A.ref.id)).values()].some((r) => r.label === "r5" && r.n === 5005)), "an updated row");
  ok200(t, await s.dev.del(`/api/v/1/data/${A.ref.id}?query=${qs([[{ EQ: [{ label: "r6" }] }]])}`), "delete on the platform");
  t.ok(await waitFor(async () => ![...(await rowsOf(ed, A.ref.id)).values()].some((r) => r.label === "r6")), "a deleted row");
  t.same(sortedRows(await rowsOf(ed, A.ref.id)), sortedRows(await rowsOf(s.dev, A.ref.id)), "ref identical on both sides");

  // schema: a new column
  ok200(t, await s.dev.put("/admin/collectionmanagement", { id: A.ref.id, addColumn: { name: "unit", type: "string" } }), "add a column on the platform");
  t.ok(await waitFor(async () => (await ed.get(`/api/v/1/data/${A.ref.id}/columns`)).body.some((c: any) => c.ColumnName === "unit")), "the column reaches the edge");

  // code: a new version of the service
  ok200(t, await s.dev.put(`/admin/code/v/1/${SK}/${A.calc}`, { code: `function ${A.calc}(req, resp) { resp.success({ v: triple(req.params.x), edge: ClearBlade.isEdge(), edgeId: cbmeta.edge_id, gen: 2 }); }` }), "update the service");
  const uc = await userOn(edge, A.user.email, A.user.password);
  t.ok(await waitFor(async () => (await uc.post(`/api/v/1/code/${SK}/${A.calc}`, { x: 1 })).body?.results?.gen === 2), "the edge runs the new code");

  // a new user, a changed device, a new service, a deleted service
  const u2 = await newUser(s);
  t.ok(await waitFor(async () => { await userOn(edge, u2.email, u2.password); return true; }), "a new user signs in on the edge");
  ok200(t, await s.dev.put(`/admin/devices/${SK}/${A.device}`, { state: "running" }), "update the device");
  t.ok(await waitFor(async () => (await ed.get(`/admin/devices/${SK}/${A.device}`)).body.state === "running"), "the device change");
  const extra = uniq("extra");
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/${extra}`, { code: `function ${extra}(req, resp) { resp.success("x"); }`, parameters: [] }), "a new service");
  t.ok(await waitFor(async () => (await ed.get(`/admin/code/v/1/${SK}`)).body.code.includes(extra)), "the new service reaches the edge");
  ok200(t, await s.dev.del(`/admin/code/v/1/${SK}/${extra}`), "delete it");
  t.ok(await waitFor(async () => !(await ed.get(`/admin/code/v/1/${SK}`)).body.code.includes(extra)), "the deletion reaches the edge");

  // the template: removing an entry removes the asset from the edge; adding one brings it
  ok200(t, await s.dev.put(tplPath(EDGE), { remove: [{ def_module: "collection", def_name: A.schemaOnly.name }] }), "remove a collection from the template");
  t.ok(await waitFor(async () => !(await ed.get(`/admin/allcollections?appid=${SK}`)).body.some((c: any) => c.name === A.schemaOnly.name)), "it leaves the edge");
  ok200(t, await s.dev.put(tplPath(EDGE), { add: [{ def_module: "collection", def_name: A.priv.name, mode: "sync_to_edge" }] }), "add a collection to the template");
  t.ok(await waitFor(async () => (await rowsOf(ed, A.priv.id)).size === 1), "it arrives with its rows");
  t.ok(await waitFor(async () => (await status(EDGE)).every((a) => a.status === "synced")), "all synced again");
});

t.test("rows written on the edge reach the platform (sync_to_platform and sync)", async (t) => {
  const uc = await userOn(edge, A.user.email, A.user.password);
  const a = await uc.post(`/api/v/1/data/${A.up.id}`, [{ label: "edge-1", n: 1 }, { label: "edge-2", n: 2 }]);
  ok200(t, a, "insert into the sync_to_platform collection on the edge");
  const ids = a.body.map((x: any) => x.item_id);
  t.ok(await waitFor(async () => { const m = await rowsOf(s.dev, A.up.id); return ids.every((id: string) => m.has(id)); }), "the rows reach the platform with their ids");
  t.same(sortedRows(await rowsOf(s.dev, A.up.id)), sortedRows(await rowsOf(uc, A.up.id)), "identical on both sides");

  ok200(t, await uc.put(`/api/v/1/data/${A.up.id}`, { query: [[{ EQ: [{ label: "edge-1" }] }]], $set: { n: 100 } }), "update on the edge");
  t.ok(await waitFor(async () => [...(await rowsOf(s.dev, A.up.id)).values()].some((r) => r.label === "edge-1" && r.n === 100)), "the update reaches the platform");
  ok200(t, await uc.del(`/api/v/1/data/${A.up.id}?query=${qs([[{ EQ: [{ label: "edge-2" }] }]])}`), "delete on the edge");
  t.ok(await waitFor(async () => ![...(await rowsOf(s.dev, A.up.id)).values()].some((r) => r.label === "edge-2")), "the delete reaches the platform");

  // the schema of a sync_to_platform collection is the platform's: a new column comes down and the edge writes it
  ok200(t, await s.dev.put("/admin/collectionmanagement", { id: A.up.id, addColumn: { name: "note", type: "string" } }), "add a column to the sync_to_platform collection");
  t.ok(await waitFor(async () => (await uc.get(`/api/v/1/data/${A.up.id}/columns`)).body.some((c: any) => c.ColumnName === "note")), "the column reaches the edge");
  const withNote = await uc.post(`/api/v/1/data/${A.up.id}`, { label: "edge-3", n: 3, note: "hello" });
  ok200(t, withNote, "the edge writes the new column");
  t.ok(await waitFor(async () => (await rowsOf(s.dev, A.up.id)).get(withNote.body[0]?.item_id)?.note === "hello"), "its value reaches the platform");

  // a platform-side row of a sync_to_platform collection stays on the platform
  ok200(t, await s.dev.post(`/api/v/1/data/${A.up.id}`, { label: "platform-only", n: 9 }));
  // the sync collection: both ways
  const b = await uc.post(`/api/v/1/data/${A.inbox.id}`, { label: "both-from-edge", n: 11 });
  const p = await s.dev.post(`/api/v/1/data/${A.inbox.id}`, { label: "both-from-platform", n: 12 });
  t.ok(await waitFor(async () => (await rowsOf(s.dev, A.inbox.id)).has(b.body[0].item_id)), "a sync collection's edge row reaches the platform");
  t.ok(await waitFor(async () => (await rowsOf(uc, A.inbox.id)).has(p.body[0].item_id)), "and its platform row reaches the edge");
  t.ok(await waitFor(async () => JSON.stringify(sortedRows(await rowsOf(s.dev, A.inbox.id))) === JSON.stringify(sortedRows(await rowsOf(uc, A.inbox.id)))), "the sync collection is identical on both sides");
  // changes stream in log order: the inbox row written after it has arrived, so the platform-only row would have too
  t.notOk([...(await rowsOf(uc, A.up.id)).values()].some((r) => r.label === "platform-only"), "a sync_to_platform collection's platform rows do not come down");
});

t.test("status pending while the edge is down; the edge catches up when it is back", async (t) => {
  const edgeEvents = async (tag: string, onEdge: boolean) => (await eventsOn(s.dev, tag)).filter((e) => e.on_edge === onEdge && (onEdge || JSON.parse(e.payload).edgeName === EDGE)).length;
  const [conn0, disc0, started0] = [await edgeEvents("EdgeConnectedOnPlatform", false), await edgeEvents("EdgeDisconnectedOnPlatform", false), await edgeEvents("EdgeStarted", true)];
  await edge.stop();
  t.ok(await waitFor(async () => (await edgeRecord(EDGE)).isConnected === false), "the record shows the edge disconnected");
  t.ok(await waitFor(async () => (await edgeEvents("EdgeDisconnectedOnPlatform", false)) === disc0 + 1), "EdgeDisconnectedOnPlatform fired once on the platform");
  const e0 = await edgeRecord(EDGE);
  t.type(e0.last_talked, "number", "last_talked kept");

  ok200(t, await s.dev.put(`/admin/code/v/1/${SK}/${A.calc}`, { code: `function ${A.calc}(req, resp) { resp.success({ v: triple(req.params.x), edge: ClearBlade.isEdge(), edgeId: cbmeta.edge_id, gen: 3 }); }` }), "change the service while the edge is down");
  const rowIns = await s.dev.post(`/api/v/1/data/${A.ref.id}`, { label: "while-down", n: 77 });
  ok200(t, rowIns, "and add a row");
  const st = await status(EDGE);
  const svc = find(st, "service", A.calc)!;
  t.equal(svc?.status, "pending", "the changed service is pending");
  t.ok(svc && svc.desired_version > svc.applied_version, `desired ${svc?.desired_version} > applied ${svc?.applied_version}`);
  t.equal(find(st, "collection_rows", A.ref.name)?.status, "pending", "the collection's rows are pending");
  t.equal(find(st, "library", A.lib)?.status, "synced", "an unchanged asset stays synced");
  const lagged = await edgeRecord(EDGE);
  t.ok(lagged.sync_lag >= 2, `the edge record shows the lag (${lagged.sync_lag})`);
  const all = (await s.dev.get(allStatusPath())).body.find((x: any) => x.edge_name === EDGE);
  t.equal(all?.isConnected, false, "all-edges status: disconnected");
  t.equal(all?.assets?.find((a: Asset) => a.asset_type === "service" && a.asset_name === A.calc)?.status, "pending", "all-edges status: pending");

  await edge.start();
  t.ok(await waitFor(async () => {
    const x = find(await status(EDGE), "service", A.calc);
    return x?.status === "synced" && x.applied_version >= x.desired_version;
  }), "the service is synced after the edge is back");
  t.ok(await waitFor(async () => (await status(EDGE)).every((a) => a.status === "synced")), "everything synced");
  t.ok(await waitFor(async () => (await edgeRecord(EDGE)).sync_lag === 0), "no lag");
  t.ok(await waitFor(async () => (await edgeEvents("EdgeConnectedOnPlatform", false)) === conn0 + 1), "EdgeConnectedOnPlatform fired once more");
  t.ok(await waitFor(async () => (await edgeEvents("EdgeStarted", true)) > started0), "EdgeStarted fired on the edge (its record reached the platform)");
  const uc = await userOn(edge, A.user.email, A.user.password);
  t.equal((await uc.post(`/api/v/1/code/${SK}/${A.calc}`, { x: 1 })).body?.results?.gen, 3, "the edge runs the code changed while it was down");
  t.ok((await rowsOf(uc, A.ref.id)).has(rowIns.body[0].item_id), "and has the row added while it was down");
});

t.test("an asset that cannot apply is failed, does not block the others, and is retried on request", async (t) => {
  const ed = await devOn(edge);
  const clash = uniq("clash");
  // a collection made on the edge itself holds the name of a platform collection the template then brings
  const c = await collectionWith(s, [["label", "string"]], clash);
  const local = await ed.post("/admin/collectionmanagement", { name: clash, appID: SK });
  ok200(t, local, "a local collection on the edge");
  ok200(t, await s.dev.put(tplPath(EDGE), { add: [{ def_module: "collection", def_name: clash, mode: "sync_to_edge" }] }), "the template names the platform's collection");
  t.ok(await waitFor(async () => find(await status(EDGE), "collection", clash)?.status === "failed"), "the platform's collection is failed on the edge");
  const f = find(await status(EDGE), "collection", clash)!;
  t.match(f.last_error, /clash|exists/, `last_error says why (${f.last_error})`);
  t.ok(f.attempts >= 1, "attempts counted");
  t.equal(f.applied_version, 0, "never applied");
  t.ok(f.desired_version > 0, "a desired version");

  // the others go on
  const next = uniq("afterfail");
  ok200(t, await s.dev.post(`/admin/code/v/1/${SK}/${next}`, { code: `function ${next}(req, resp) { resp.success("ok"); }`, parameters: [] }), "a service created after the failure");
  t.ok(await waitFor(async () => find(await status(EDGE), "service", next)?.status === "synced"), "is synced");
  t.ok((await ed.get(`/admin/code/v/1/${SK}`)).body.code.includes(next), "and on the edge");
  t.equal(find(await status(EDGE), "collection", clash)?.status, "failed", "the failed asset stays failed");

  // a retry while the cause persists fails again and counts the attempt
  const r1 = await s.dev.post(retryPath(), { edge: EDGE });
  ok200(t, r1, "retry");
  t.same(r1.body, [{ edge: EDGE, connected: true, queued: 1 }], "one failed asset queued on the connected edge");
  t.ok(await waitFor(async () => (find(await status(EDGE), "collection", clash)?.attempts ?? 0) > f.attempts), "the retry was attempted");
  t.equal(find(await status(EDGE), "collection", clash)?.status, "failed", "still failed");

  // remove the cause on the edge, retry: synced, with the platform's id
  ok200(t, await ed.del(`/admin/collectionmanagement?id=${local.body.collectionID}`), "remove the local collection");
  ok200(t, await s.dev.post(retryPath(), { edge: EDGE, asset_class: "collection", asset_id: clash }), "retry that asset");
  t.ok(await waitFor(async () => find(await status(EDGE), "collection", clash)?.status === "synced"), "synced after the retry");
  const after = find(await status(EDGE), "collection", clash)!;
  t.equal(after.last_error, "", "the error is cleared");
  t.ok(after.applied_version >= after.desired_version, "applied");
  t.ok((await ed.get(`/admin/allcollections?appid=${SK}`)).body.some((x: any) => x.name === clash && x.collectionID === c.id), "the collection is on the edge with the platform's id");
  const none = await s.dev.post(retryPath(), { edge: EDGE });
  t.same(none.body, [{ edge: EDGE, connected: true, queued: 0 }], "nothing left to retry");
  const every = await s.dev.post(retryPath(), {});
  ok200(t, every, "retry without naming an edge covers every edge");
  t.ok(Array.isArray(every.body) && every.body.some((x: any) => x.edge === EDGE), "this edge among them");
});

t.test("the edge serves its API through a platform outage and both sides catch up", async (t) => {
  const uc0 = await userOn(edge, A.user.email, A.user.password);
  const beforePconn = (await eventsOn(s.dev, "PlatformConnectedOnEdge")).filter((e) => e.on_edge).length;
  await platform.kill();
  t.ok(await waitFor(async () => (await request(edge.url, "GET", "/health")).status === 200), "the edge is up");
  // sign-in, reads, code and writes all work on the edge alone
  const uc = await userOn(edge, A.user.email, A.user.password);
  t.ok(uc.headers["ClearBlade-UserToken"], "a user signs in on the edge with the platform down");
  ok200(t, await uc0.get(`/api/v/1/data/${A.ref.id}`), "an earlier token still works");
  t.equal((await uc.post(`/api/v/1/code/${SK}/${A.calc}`, { x: 2 })).body?.results?.v, 6, "a service runs");
  const upRows = await uc.post(`/api/v/1/data/${A.up.id}`, Array.from({ length: 25 }, (_, i) => ({ label: `offline-${i}`, n: i })));
  ok200(t, upRows, "rows written on the edge while the platform is down");
  const ids0: string[] = upRows.body.slice(1).map((x: any) => x.item_id);
  t.equal(upRows.body[0]?.item_id && (await rowsOf(uc, A.up.id)).get(upRows.body[0].item_id)?.label, "offline-0", "the first of them (deleted below)");
  const inboxRow = await uc.post(`/api/v/1/data/${A.inbox.id}`, { label: "offline-inbox", n: 1 });
  ok200(t, inboxRow, "a sync row too (its trigger fires on the edge)");
  const ed = await devOn(edge);
  t.ok(ed.headers["ClearBlade-DevToken"], "the developer signs in on the edge with the platform down");
  t.ok(await waitFor(async () => (await eventsOn(ed, "inbox")).some((e) => JSON.parse(e.payload).item_id === inboxRow.body[0].item_id || e.payload.includes(inboxRow.body[0].item_id)), 10_000), "the trigger ran on the edge while offline");
  // the edge restarts while the platform is still down: what it writes then goes up later too
  await edge.stop();
  await edge.start();
  const uc2 = await userOn(edge, A.user.email, A.user.password);
  t.equal((await uc2.post(`/api/v/1/code/${SK}/${A.calc}`, { x: 3 })).body?.results?.v, 9, "after an offline restart the edge still runs its services");
  const afterRestart = await uc2.post(`/api/v/1/data/${A.up.id}`, { label: "offline-after-restart", n: 99 });
  ok200(t, afterRestart, "a row written after an offline restart");
  ok200(t, await uc2.del(`/api/v/1/data/${A.up.id}?query=${qs([[{ EQ: [{ label: "offline-0" }] }]])}`), "and a delete");
  ids0.push(afterRestart.body[0].item_id);

  await platform.start();
  t.ok(await waitFor(async () => (await edgeRecord(EDGE)).isConnected === true, 45_000), "the edge reconnects by itself");
  t.ok(await waitFor(async () => { const m = await rowsOf(s.dev, A.up.id); return ids0.every((id) => m.has(id)); }, 30_000), "the rows written offline (before and after the edge's restart) reach the platform");
  t.ok(await waitFor(async () => !(await rowsOf(s.dev, A.up.id)).has(upRows.body[0].item_id)), "the delete made after the offline restart reaches the platform");
  t.ok(await waitFor(async () => (await rowsOf(s.dev, A.inbox.id)).has(inboxRow.body[0].item_id)), "the sync row too");
  t.ok(await waitFor(async () => (await eventsOn(s.dev, "inbox")).some((e) => e.payload.includes(inboxRow.body[0].item_id))), "and the row its trigger wrote on the edge");
  t.ok(await waitFor(async () => (await eventsOn(s.dev, "PlatformConnectedOnEdge")).filter((e) => e.on_edge).length > beforePconn), "PlatformConnectedOnEdge fired on the edge when it reconnected");
  // and down: changes made on the platform after the outage
  const p = await s.dev.post(`/api/v/1/data/${A.ref.id}`, { label: "after-outage", n: 1 });
  ok200(t, p, "a platform row after the outage");
  ok200(t, await s.dev.put(`/admin/devices/${SK}/${A.device}`, { state: "after-outage" }));
  t.ok(await waitFor(async () => (await rowsOf(uc, A.ref.id)).has(p.body[0].item_id)), "reaches the edge");
  t.ok(await waitFor(async () => (await ed.get(`/admin/devices/${SK}/${A.device}`)).body.state === "after-outage"), "a device change reaches the edge");
  t.same(sortedRows(await rowsOf(uc, A.ref.id)), sortedRows(await rowsOf(s.dev, A.ref.id)), "ref identical on both sides");
  t.same(sortedRows(await rowsOf(uc, A.inbox.id)), sortedRows(await rowsOf(s.dev, A.inbox.id)), "inbox identical on both sides");
  const upEdge = await rowsOf(uc, A.up.id), upPlat = await rowsOf(s.dev, A.up.id);
  t.same(sortedRows(upEdge), sortedRows(new Map([...upPlat].filter(([, v]) => v.label !== "platform-only"))), "every edge row of up is on the platform, nothing more");
  t.ok(await waitFor(async () => (await status(EDGE)).every((a) => a.status === "synced")), "everything synced after the outage");
});

/** Opens the sync channel (a WebSocket on the platform's HTTP port), sends `messages`, and
 *  collects what comes back until the platform closes it. */
function syncChannel(messages: unknown[]): Promise<{ received: any[]; code: number; reason: string }> {
  return new Promise((res, rej) => {
    const ws = new WebSocket(`${platform.url.replace(/^http/, "ws")}/api/v/4/sync`);
    const received: any[] = [];
    const timer = setTimeout(() => { ws.terminate(); res({ received, code: -1, reason: "no close within 5 s" }); }, 5_000);
    ws.on("open", () => { for (const m of messages) ws.send(typeof m === "string" ? m : JSON.stringify(m)); });
    ws.on("message", (d) => { try { received.push(JSON.parse(String(d))); } catch { received.push(String(d)); } });
    ws.on("close", (code, reason) => { clearTimeout(timer); res({ received, code, reason: String(reason) }); });
    ws.on("error", (err) => { clearTimeout(timer); rej(err); });
  });
}

t.test("the sync channel refuses wrong tokens, unknown edges and bad messages", async (t) => {
  const hello = (o: Record<string, unknown>) => ({ t: "hello", systemKey: SK, edge: EDGE, token: EDGE_TOKEN, cursor: 0, ...o });
  const cases: [string, unknown[], RegExp][] = [
    ["a wrong token", [hello({ token: "not-the-edge-token" })], /wrong token/],
    ["an unknown edge", [hello({ edge: "no-such-edge" })], /unknown edge/],
    ["the edge under another system", [hello({ systemKey: other.systemKey })], /unknown edge/],
    ["a message before hello", [{ t: "ack", upTo: 1 }], /hello first/],
    ["not JSON", ["{{{"], /JSON/],
    ["a hello without a token", [{ t: "hello", systemKey: SK, edge: EDGE, cursor: 0 }], /token/],
  ];
  for (const [what, msgs, re] of cases) {
    const r = await syncChannel(msgs);
    t.equal(r.received[0]?.t, "error", `${what}: an error message`);
    t.match(r.received[0]?.message ?? "", re, `${what}: says why (${r.received[0]?.message})`);
    t.equal(r.received.length, 1, `${what}: nothing else (no welcome, no batch)`);
    t.equal(r.code, 4000, `${what}: the channel is closed (4000)`);
  }
  t.equal((await edgeRecord(EDGE)).isConnected, true, "the real edge's session is untouched");
});

t.test("an edge with a wrong token, an unknown name or another system is refused", async (t) => {
  const wrong = await newEdgeNode(EDGE, "not-the-right-token");
  t.ok(await waitFor(() => /refused/.test(wrong.logs()), 10_000), "the edge logs that the platform refused it");
  t.match(wrong.logs(), /wrong token|unknown edge/, "with the reason");
  const ua = await request(wrong.url, "POST", "/api/v/1/user/auth", { headers: { "ClearBlade-SystemKey": SK, "ClearBlade-SystemSecret": s.systemSecret }, body: { email: A.user.email, password: A.user.password } });
  t.not(ua.status, 200, `nothing was synced to it: a user cannot sign in there (${ua.status})`);
  t.ok(isEnvelope(ua.body, ua.status), "error envelope");
  t.equal((await edgeRecord(EDGE)).isConnected, true, "the real edge stays connected");
  await wrong.kill();
  const unknown = await newEdgeNode(uniq("ghost"), EDGE_TOKEN);
  t.ok(await waitFor(() => /refused/.test(unknown.logs()), 10_000), "an unknown edge name is refused");
  await unknown.kill();
  const cross = await newEdgeNode(EDGE, EDGE_TOKEN, other.systemKey);
  t.ok(await waitFor(() => /refused/.test(cross.logs()), 10_000), "the edge's name and token under another system are refused");
  await cross.kill();
  t.equal((await edgeRecord(EDGE)).isConnected, true, "the real edge is still connected");

  // deleting the edge on the platform ends its session
  const gone = uniq("gone");
  await createEdge(gone, { token: "gone-token-123" });
  await s.dev.put(tplPath(gone), { add: [{ def_module: "service", def_name: "*" }] });
  const g = await newEdgeNode(gone, "gone-token-123");
  t.ok(await waitFor(async () => (await edgeRecord(gone)).isConnected === true), "another edge connects");
  ok200(t, await s.dev.del(adminEdge(gone)), "delete it on the platform");
  const st = (await s.dev.get(allStatusPath())).body;
  t.notOk(st.some((x: any) => x.edge_name === gone), "no longer in all-edges status");
  t.ok(await waitFor(() => /refused|disconnected/.test(g.logs()), 10_000), "its session ends and it cannot come back");
  await g.kill();
});
