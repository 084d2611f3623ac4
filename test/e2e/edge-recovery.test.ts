// Edge sync recovery, black-box (a second suite beside edges.test.ts, written independently; it
// holds the regression tests for lost acknowledgements, deploy-mode templates at the first start,
// kinds removed from a template and QoS 1 messages acknowledged just before a stop).
// Edges and edge sync, black-box: a real platform and a real edge (two processes of the built
// binary on loopback). Edge records on the user and developer paths (fields, types, custom
// columns, failure paths), templates (per edge and named), the initial sync of every asset kind,
// platform changes reaching the edge, rows and relayed messages going up, code running on the
// edge, per-asset sync status (synced, pending, failed, retry) and a platform outage the edge works
// through and catches up after, also across an edge restart during the outage (docs/sync.md).
// Also: a lost acknowledgement must not leave an applied change pending, an edge with a wrong token is refused, and a named template with
// deploy-mode code copies it at start-up (the first one included) but not live.
//
// The edge reaches the platform through a TCP pass-through in this process (`gate`): it changes
// nothing on the wire, and lets the outage test hold the edge off for a moment after the platform
// restarted, so "isConnected false, then true" is seen deterministically.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import t from "tap";
import { Client, type HttpResponse, type Outpost, devWithSystem, newUser, request, startOutpost, uniq, waitFor, qs, isErr, ok200 } from "./harness.ts";

// ---- helpers ----------------------------------------------------------------------------------


function must<T = any>(r: HttpResponse<T>, what: string): HttpResponse<T> {
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 500)}`);
  return r;
}

/** A free port below the ephemeral range, so no outgoing connection takes it while the platform
 *  is down between a stop and a restart on the same port. */
async function quietPort(): Promise<number> {
  let low = 32768;
  try { low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || low; } catch { /* default */ }
  const top = Math.min(low - 1, 30_000), bottom = Math.max(10_000, top - 15_000);
  for (let i = 0; i < 200; i++) {
    const port = bottom + Math.floor(Math.random() * (top - bottom));
    const free = await new Promise<boolean>((res) => {
      const s = net.createServer();
      s.once("error", () => res(false));
      s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
    });
    if (free) return port;
  }
  throw new Error("no free port");
}

/** A TCP pass-through to 127.0.0.1:target that can be shut (refusing and cutting connections),
 *  or muted (what the edge sends is dropped; what the platform sends still arrives). */
async function gate(target: number) {
  let open = true, muted = false;
  const live = new Set<net.Socket>();
  const srv = net.createServer((c) => {
    if (!open) { c.destroy(); return; }
    const u = net.connect(target, "127.0.0.1");
    live.add(c); live.add(u);
    const end = () => { c.destroy(); u.destroy(); live.delete(c); live.delete(u); };
    c.on("error", end); u.on("error", end); c.on("close", end); u.on("close", end);
    c.on("data", (d) => { if (!muted) u.write(d); });
    u.pipe(c);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`,
    shut() { open = false; for (const s of live) s.destroy(); live.clear(); },
    open() { open = true; muted = false; },
    mute() { muted = true; },
    close() { open = false; for (const s of live) s.destroy(); return new Promise<void>((r) => srv.close(() => r())); },
  };
}

// ---- the platform -----------------------------------------------------------------------------

const PPORT = await quietPort();
const PURL = `http://127.0.0.1:${PPORT}`;
const tplDir = mkdtempSync(join(tmpdir(), "outpost-edge-templates-"));
// a named template like the shipped edge-templates/gateway-basic.json
const GATEWAY_BASIC = [
  { def_module: "library", def_name: "*", mode: "deploy" },
  { def_module: "service", def_name: "*", mode: "deploy" },
  { def_module: "trigger", def_name: "*", mode: "sync_to_edge" },
  { def_module: "timer", def_name: "*", mode: "sync_to_edge" },
  { def_module: "collection", def_name: "*", mode: "sync", rows: true },
  { def_module: "role", def_name: "*", mode: "sync_to_edge" },
  { def_module: "user", def_name: "*", mode: "sync_to_edge" },
  { def_module: "device", def_name: "*", mode: "sync_to_edge" },
  { def_module: "topic", def_name: "telemetry/#", mode: "sync_to_platform" },
];
writeFileSync(join(tplDir, "gateway-basic.json"), JSON.stringify({ description: "test copy", assets: GATEWAY_BASIC }));
const pArgs = ["--edge-templates-dir", tplDir, "--http-port", String(PPORT)];

/** Starts the platform on PPORT (the harness's own --http-port comes first; the last one wins). */
async function startPlatform(dataDir?: string): Promise<Outpost> {
  const o = await startOutpost({ args: pArgs, keepData: true, waitForHealth: false, ...(dataDir ? { dataDir } : {}) });
  const up = await waitFor(async () => {
    if (o.proc.exitCode !== null) throw new Error("exited");
    return (await request(PURL, "GET", "/health")).status === 200;
  }, 15_000, 20);
  if (!up || o.proc.exitCode !== null) { await o.kill(); throw new Error(`platform did not come up on ${PPORT}:\n${o.logs()}`); }
  return o;
}

let P = await startPlatform();
const pData = P.dataDir;
const s = await devWithSystem({ url: PURL }, "edges-a");
const s2 = await devWithSystem({ url: PURL }, "edges-b");
const SK = s.systemKey;
const edgeDirs: string[] = [];
const running = new Set<Outpost>();
const gates: { close(): Promise<void> }[] = [];
t.teardown(async () => {
  for (const o of running) await o.kill();
  await P.kill();
  for (const g of gates) await g.close();
  for (const d of [pData, tplDir, ...edgeDirs]) rmSync(d, { recursive: true, force: true });
});

const edgePath = (name: string, base: "api" | "admin" = "api", sk = SK) => `${base === "api" ? "/api/v/3/edges" : "/admin/edges"}/${sk}/${encodeURIComponent(name)}`;

async function userWith(perms: Record<string, unknown>) {
  const u = await newUser(s);
  if (Object.keys(perms).length) {
    const role = must(await s.dev.post(`/admin/user/${SK}/roles`, { name: uniq("R"), ...perms }), "role");
    must(await s.dev.put(`/admin/user/${SK}`, { user: u.userId, changes: { roles: { add: [role.body.role_id] } } }), "user roles");
  }
  const a = must(await s.app.post("/api/v/1/user/auth", { email: u.email, password: u.password }), "user auth");
  return { ...u, client: new Client(PURL, { "ClearBlade-UserToken": a.body.user_token }) };
}

// ---- 1. edge records --------------------------------------------------------------------------

t.test("edge records: create, read, update, list, count, delete on the user and developer paths", async (t) => {
  const name = uniq("rec");
  const before = Math.floor(Date.now() / 1000) - 5;
  const c = await s.dev.post(edgePath(name), { description: "first", token: "edge-secret-1", location: "lab" });
  ok200(t, c, "POST /api/v/3/edges/{sk}/{name}");
  const b = c.body;
  t.equal(b.name, name, "name");
  t.equal(b.edge_key, `${SK}:${name}`, "edge_key is <systemKey>:<name>");
  t.equal(b.system_key, SK, "system_key");
  t.equal(b.system_secret, s.systemSecret, "system_secret");
  t.equal(b.novi_system_key, SK, "novi_system_key");
  t.equal(b.token, "", "a token the client chose is not echoed");
  t.equal(b.description, "first", "description");
  t.equal(b.location, "lab", "a standard column (location) is kept");
  t.equal(b.isConnected, false, "isConnected is the boolean false before the edge talked");
  t.equal(b.first_talked, null, "first_talked null before the edge talked");
  t.equal(b.last_talked, null, "last_talked null before the edge talked");
  t.type(b.last_seen_version, "string", "last_seen_version is a string");
  t.type(b.created_date, "number", "created_date is a number (unix seconds)");
  t.ok(b.created_date >= before && b.created_date <= Math.floor(Date.now() / 1000) + 5, "created_date is now, in seconds");

  for (const base of ["api", "admin"] as const) {
    const g = await s.dev.get(edgePath(name, base));
    ok200(t, g, `GET ${base} path`);
    t.equal(g.body.edge_key, `${SK}:${name}`, `${base}: edge_key`);
    t.equal(g.body.description, "first", `${base}: description`);
    t.equal(g.body.token, "", `${base}: the secret is never shown on read`);
    t.equal(g.body.isConnected, false, `${base}: isConnected`);
  }

  // the server picks the secret when none is given: shown once, in the create answer
  const gen = uniq("gen");
  const g = await s.dev.post(edgePath(gen, "admin"), {});
  ok200(t, g, "POST /admin/edges/{sk}/{name} without a token");
  t.type(g.body.token, "string", "a generated token is returned");
  t.ok(g.body.token.length >= 16, "the generated token is long");
  t.equal((await s.dev.get(edgePath(gen))).body.token, "", "and not shown again");

  const u = await s.dev.put(edgePath(name), { description: "second", mac_address: "aa:bb:cc" });
  ok200(t, u, "PUT /api/v/3/edges/{sk}/{name}");
  t.equal(u.body.description, "second", "the answer is the updated edge");
  t.equal(u.body.mac_address, "aa:bb:cc");
  t.equal(u.body.location, "lab", "fields not sent are kept");
  const u2 = await s.dev.put(edgePath(name, "admin"), { description: "third" });
  ok200(t, u2, "PUT /admin/edges/{sk}/{name}");
  const after = (await s.dev.get(edgePath(name))).body;
  t.equal(after.description, "third", "read back after update");
  t.equal(after.mac_address, "aa:bb:cc");

  const l = await s.dev.get(`/api/v/2/edges/${SK}`);
  ok200(t, l, "GET /api/v/2/edges/{sk}");
  t.ok(Array.isArray(l.body), "an array");
  t.ok(l.body.some((e: any) => e.name === name) && l.body.some((e: any) => e.name === gen), "both edges listed");
  t.ok(l.body.every((e: any) => e.edge_key === `${SK}:${e.name}` && typeof e.isConnected === "boolean"), "each with edge_key and isConnected");
  const al = await s.dev.get(`/admin/edges/${SK}`);
  ok200(t, al, "GET /admin/edges/{sk}");
  t.same(al.body.map((e: any) => e.name).sort(), l.body.map((e: any) => e.name).sort(), "both list paths agree");
  const f = await s.dev.get(`/api/v/2/edges/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ name }] }]] })}`);
  ok200(t, f, "list with a query");
  t.same(f.body.map((e: any) => e.name), [name], "the query filters by name");

  const n = await s.dev.get(`/api/v/3/edges/${SK}/count`);
  ok200(t, n, "GET /api/v/3/edges/{sk}/count");
  t.equal(n.body.count, l.body.length, "{count} matches the list");

  ok200(t, await s.dev.del(edgePath(gen)), "DELETE /api/v/3/edges/{sk}/{name}");
  isErr(t, await s.dev.get(edgePath(gen)), 404, "gone after delete");
  isErr(t, await s.dev.del(edgePath(gen)), 404, "a second delete");
  t.equal((await s.dev.get(`/api/v/3/edges/${SK}/count`)).body.count, l.body.length - 1, "count goes down");
  ok200(t, await s.dev.del(edgePath(name, "admin")), "DELETE /admin/edges/{sk}/{name}");
  isErr(t, await s.dev.get(edgePath(name, "admin")), 404, "gone on the developer path too");
});

t.test("edge records: failure paths", async (t) => {
  const name = uniq("bad");
  ok200(t, await s.dev.post(edgePath(name), { token: "edge-secret-2" }), "create");
  isErr(t, await s.dev.post(edgePath(name), { token: "edge-secret-3" }), 400, "duplicate name");
  isErr(t, await s.dev.post(edgePath(name, "admin"), {}), 400, "duplicate on the developer path");
  isErr(t, await s.dev.post(edgePath("bad name!"), { token: "edge-secret-2" }), 400, "bad name (space, !)");
  isErr(t, await s.dev.post(edgePath("-leading"), { token: "edge-secret-2" }), 400, "bad name (leading -)");
  isErr(t, await s.dev.post(edgePath(uniq("short")), { token: "short" }), 400, "token shorter than 8");
  isErr(t, await s.dev.post(edgePath(uniq("num")), { token: 123456789 }), 400, "token not a string");
  isErr(t, await s.dev.put(edgePath(name), { token: "tiny" }), 400, "short token on update");
  isErr(t, await s.dev.post(edgePath(uniq("nm")), { name: "different" }), 400, "name in the body differs from the path");
  isErr(t, await s.dev.put(edgePath(name), { name: "renamed" }), 400, "rename");
  isErr(t, await s.dev.post(edgePath(uniq("arr")), [1, 2]), 400, "body not an object");

  const ghost = uniq("ghost");
  isErr(t, await s.dev.get(edgePath(ghost)), 404, "GET unknown edge");
  isErr(t, await s.dev.get(edgePath(ghost, "admin")), 404, "GET unknown edge (admin)");
  isErr(t, await s.dev.put(edgePath(ghost), { description: "x" }), 404, "PUT unknown edge");
  isErr(t, await s.dev.del(edgePath(ghost)), 404, "DELETE unknown edge");

  const tplName = uniq("tpl");
  isErr(t, await s.dev.post(edgePath(tplName), { token: "edge-secret-2", template: "no-such-template" }), 400, "create with an unknown named template");
  isErr(t, await s.dev.get(edgePath(tplName)), 404, "nothing was created");
  isErr(t, await s.dev.put(edgePath(name), { template: "no-such-template" }), 400, "assign an unknown named template");
  isErr(t, await s.dev.put(edgePath(name), { template: "../etc/passwd" }), 400, "a path is no template name");
  isErr(t, await s.dev.put(edgePath(name), { template: 5 }), 400, "template not a string");

  // users need the edges permission
  const plain = await userWith({});
  isErr(t, await plain.client.get(edgePath(name)), 401, "user without the edges permission: GET");
  isErr(t, await plain.client.get(`/api/v/2/edges/${SK}`), 401, "user without the edges permission: list");
  isErr(t, await plain.client.get(`/api/v/3/edges/${SK}/count`), 401, "user without the edges permission: count");
  isErr(t, await plain.client.get(`/api/v/3/edges/${SK}/columns`), 401, "user without the edges permission: columns");
  isErr(t, await plain.client.post(edgePath(uniq("u")), { token: "edge-secret-2" }), 401, "user without the edges permission: POST");
  isErr(t, await plain.client.put(edgePath(name), { description: "x" }), 401, "user without the edges permission: PUT");
  isErr(t, await plain.client.del(edgePath(name)), 401, "user without the edges permission: DELETE");
  const reader = await userWith({ edges: { permissions: 1 } });
  ok200(t, await reader.client.get(edgePath(name)), "user with edges read: GET");
  ok200(t, await reader.client.get(`/api/v/2/edges/${SK}`), "user with edges read: list");
  ok200(t, await reader.client.get(`/api/v/3/edges/${SK}/count`), "user with edges read: count");
  isErr(t, await reader.client.post(edgePath(uniq("u")), { token: "edge-secret-2" }), 401, "read only: POST refused");
  isErr(t, await reader.client.del(edgePath(name)), 401, "read only: DELETE refused");
  const writer = await userWith({ edges: { permissions: 15 } });
  const wn = uniq("byuser");
  ok200(t, await writer.client.post(edgePath(wn), { token: "edge-secret-2" }), "user with edges create: POST");
  ok200(t, await writer.client.put(edgePath(wn), { description: "by a user" }), "user with edges update: PUT");
  ok200(t, await writer.client.del(edgePath(wn)), "user with edges delete: DELETE");
  isErr(t, await new Client(PURL).get(edgePath(name)), 401, "no token");

  // another system's developer
  isErr(t, await s2.dev.get(edgePath(name)), 401, "other system's developer: GET");
  isErr(t, await s2.dev.get(edgePath(name, "admin")), 401, "other system's developer: GET (admin)");
  isErr(t, await s2.dev.get(`/admin/edges/${SK}`), 401, "other system's developer: list");
  isErr(t, await s2.dev.post(edgePath(uniq("x"), "admin"), { token: "edge-secret-2" }), 401, "other system's developer: POST");
  isErr(t, await s2.dev.put(edgePath(name), { description: "x" }), 401, "other system's developer: PUT");
  isErr(t, await s2.dev.del(edgePath(name)), 401, "other system's developer: DELETE");
  isErr(t, await s2.dev.get(`/api/v/3/edges/${SK}/count`), 401, "other system's developer: count");
  ok200(t, await s.dev.get(edgePath(name)), "still there");
  ok200(t, await s.dev.del(edgePath(name)), "clean up");
});

t.test("edge columns: the standard set, custom columns added and dropped (UserDefined)", async (t) => {
  const cols = await s.dev.get(`/api/v/3/edges/${SK}/columns`);
  ok200(t, cols, "GET /api/v/3/edges/{sk}/columns");
  t.ok(Array.isArray(cols.body), "an array");
  const col = (list: any[], n: string) => list.find((c) => c.ColumnName === n);
  for (const [n, type] of [["name", "string"], ["description", "string"], ["first_talked", "int"], ["last_talked", "int"], ["last_seen_version", "string"]] as const) {
    const c = col(cols.body, n);
    t.ok(c, `column ${n} listed`);
    t.equal(c?.ColumnType, type, `${n} is ${type}`);
    t.equal(c?.UserDefined, false, `${n} is not user defined`);
  }
  t.ok(cols.body.every((c: any) => typeof c.ColumnName === "string" && typeof c.ColumnType === "string" && typeof c.UserDefined === "boolean"), "each {ColumnName, ColumnType, UserDefined}");
  for (const n of ["template", "isConnected", "created_date"]) t.notOk(col(cols.body, n), `${n}: the record's, not a listed column`);
  t.same((await s.dev.get(`/admin/edges/${SK}/columns`)).body, cols.body, "GET /admin/edges/{sk}/columns is the same");

  const name = uniq("colled");
  ok200(t, await s.dev.post(edgePath(name), { token: "edge-secret-4" }), "an edge made before the column");
  const cn = uniq("site");
  ok200(t, await s.dev.post(`/admin/edges/${SK}/columns`, { column_name: cn, type: "string" }), "POST /admin/edges/{sk}/columns");
  const c2 = col((await s.dev.get(`/api/v/3/edges/${SK}/columns`)).body, cn);
  t.equal(c2?.ColumnType, "string", "the new column is listed with its type");
  t.equal(c2?.UserDefined, true, "and UserDefined true");
  t.equal((await s.dev.get(edgePath(name))).body[cn], null, "an older edge has null in it");
  const u = await s.dev.put(edgePath(name), { [cn]: "north" });
  ok200(t, u, "set the custom column");
  t.equal(u.body[cn], "north");
  t.equal((await s.dev.get(edgePath(name))).body[cn], "north", "read back");
  const other = uniq("colled");
  const made = await s.dev.post(edgePath(other), { token: "edge-secret-4", [cn]: "south" });
  ok200(t, made, "create with the custom column");
  t.equal(made.body[cn], "south");
  const f = await s.dev.get(`/api/v/2/edges/${SK}?query=${qs({ FILTERS: [[{ EQ: [{ [cn]: "south" }] }]] })}`);
  t.same(f.body.map((e: any) => e.name), [other], "lists filter on a custom column");

  isErr(t, await s.dev.post(`/admin/edges/${SK}/columns`, { column_name: cn, type: "string" }), 400, "duplicate column");
  isErr(t, await s.dev.post(`/admin/edges/${SK}/columns`, { column_name: "description", type: "int" }), 400, "a built-in column name with another type");
  isErr(t, await s.dev.post(`/admin/edges/${SK}/columns`, { column_name: uniq("c"), type: "weird" }), 400, "unknown type");
  isErr(t, await s2.dev.post(`/admin/edges/${SK}/columns`, { column_name: uniq("c"), type: "string" }), 401, "other system's developer");
  const user = await userWith({ edges: { permissions: 15 } });
  isErr(t, await user.client.post(`/admin/edges/${SK}/columns`, { column_name: uniq("c"), type: "string" }), 401, "a user may not add columns");

  ok200(t, await s.dev.del(`/admin/edges/${SK}/columns?column=${cn}`), "DELETE /admin/edges/{sk}/columns?column=");
  t.notOk(col((await s.dev.get(`/api/v/3/edges/${SK}/columns`)).body, cn), "no longer listed");
  t.notOk(cn in (await s.dev.get(edgePath(name))).body, "no longer on the record");
  isErr(t, await s.dev.del(`/admin/edges/${SK}/columns?column=${cn}`), 404, "deleting it again");
  isErr(t, await s.dev.del(`/admin/edges/${SK}/columns`), 400, "no column named");
  await s.dev.del(edgePath(name));
  await s.dev.del(edgePath(other));
});

// ---- 2. templates -----------------------------------------------------------------------------

t.test("templates: GET per edge, PUT add/remove with default mode, validation", async (t) => {
  const a = uniq("ta"), b = uniq("tb");
  ok200(t, await s.dev.post(edgePath(a), { token: "edge-secret-5" }));
  ok200(t, await s.dev.post(edgePath(b), { token: "edge-secret-5" }));
  const g = await s.dev.get(`/admin/edges/template/${SK}`);
  ok200(t, g, "GET /admin/edges/template/{sk}");
  t.same(g.body[a], [], "a new edge has an empty template");
  t.same(g.body[b], [], "so does the other");

  // entries name assets the system has
  must(await s.dev.post(`/admin/code/v/1/${SK}/svcX`, { code: "function svcX(req, resp) { resp.success(1); }", parameters: [] }), "service svcX");
  const c1 = must(await s.dev.post("/admin/collectionmanagement", { name: "c1", appID: SK }), "collection c1").body.collectionID as string;
  const put = await s.dev.put(`/admin/edges/template/${SK}/${a}`, {
    add: [
      { def_module: "service", def_name: "svcX" },
      { def_module: "collection", def_name: "c1", mode: "sync", rows: false },
      { def_module: "topic", def_name: "telemetry/#", mode: "sync_to_platform" },
      { def_module: "user", def_name: "*", mode: "deploy" },
    ],
  });
  ok200(t, put, "PUT /admin/edges/template/{sk}/{edge}");
  const key = (e: any) => `${e.def_module}/${e.def_name}`;
  const byKey = (list: any[]) => Object.fromEntries(list.map((e) => [key(e), e]));
  const want = {
    "service/svcX": { def_module: "service", def_name: "svcX", mode: "sync_to_edge", source: "edge" },
    "collection/c1": { def_module: "collection", def_name: "c1", mode: "sync", rows: false, source: "edge" },
    "topic/telemetry/#": { def_module: "topic", def_name: "telemetry/#", mode: "sync_to_platform", source: "edge" },
    "user/*": { def_module: "user", def_name: "*", mode: "deploy", source: "edge" },
  };
  t.same(byKey(put.body[a]), want, "the answer is {edge: entries}; mode defaults to sync_to_edge; each says it is the edge's own");
  const g2 = await s.dev.get(`/admin/edges/template/${SK}`);
  t.same(byKey(g2.body[a]), want, "GET shows the entries");
  t.same(g2.body[b], [], "the other edge is untouched");
  t.same(byKey((await s.dev.get(`/admin/edges/sync/${SK}`)).body[a]), want, "the older /admin/edges/sync path agrees");

  const re = await s.dev.put(`/admin/edges/template/${SK}/${a}`, { add: [{ def_module: "service", def_name: "svcX", mode: "sync" }], remove: [{ def_module: "user", def_name: "*" }] });
  ok200(t, re, "add the same asset again with another mode, remove one");
  const after = byKey(re.body[a]);
  t.equal(after["service/svcX"]?.mode, "sync", "the entry is replaced, not doubled");
  t.equal(re.body[a].filter((e: any) => key(e) === "service/svcX").length, 1, "one entry per asset");
  t.notOk(after["user/*"], "removed");
  t.equal(re.body[a].length, 3, "three left");

  const bad = (body: unknown, what: string) => s.dev.put(`/admin/edges/template/${SK}/${a}`, body).then((r) => isErr(t, r, 400, what));
  await bad({ add: [{ def_module: "widget", def_name: "x" }] }, "unknown def_module");
  await bad({ add: [{ def_module: "service", def_name: "svcY" }] }, "a service the system does not have");
  await bad({ remove: [{ def_module: "service", def_name: "svcY" }] }, "removing an entry the template does not have");
  await bad({ add: [{ def_module: "service", def_name: "x", mode: "sometimes" }] }, "unknown mode");
  await bad({ add: [{ def_module: "service" }] }, "no def_name");
  await bad({ add: [{ def_module: "service", def_name: "" }] }, "empty def_name");
  await bad({ add: [{ def_module: "collection", def_name: "x", rows: "yes" }] }, "rows not a boolean");
  await bad({ add: [{ def_module: "service", def_name: "x", colour: "red" }] }, "unknown entry field");
  await bad({ add: { def_module: "service", def_name: "x" } }, "add not an array");
  await bad({ remove: [{ def_module: "service" }] }, "remove without def_name");
  await bad({ replace: [] }, "unknown body field");
  t.equal((await s.dev.get(`/admin/edges/template/${SK}`)).body[a].length, 3, "nothing changed by the refused requests");
  isErr(t, await s.dev.put(`/admin/edges/template/${SK}/${uniq("ghost")}`, { add: [] }), 404, "unknown edge");
  isErr(t, await s2.dev.get(`/admin/edges/template/${SK}`), 401, "other system's developer: GET");
  isErr(t, await s2.dev.put(`/admin/edges/template/${SK}/${a}`, { add: [] }), 401, "other system's developer: PUT");
  const user = await userWith({ edges: { permissions: 15 } });
  isErr(t, await user.client.get(`/admin/edges/template/${SK}`), 401, "a user token: GET");
  isErr(t, await user.client.put(`/admin/edges/template/${SK}/${a}`, { add: [] }), 401, "a user token: PUT");
  await s.dev.del(edgePath(a));
  await s.dev.del(edgePath(b));
  // the assets named above go too: the edges of later tests take every service and collection
  await s.dev.del(`/admin/code/v/1/${SK}/svcX`);
  await s.dev.del(`/admin/collectionmanagement?id=${c1}`);
});

t.test("templates: named templates from --edge-templates-dir, overridden entry by entry", async (t) => {
  const key = (e: any) => `${e.def_module}/${e.def_name}`;
  const norm = (list: any[]) => list.map((e) => `${key(e)}:${e.mode}`).sort();
  const a = uniq("named");
  const c = await s.dev.post(edgePath(a), { token: "edge-secret-6", template: "gateway-basic" });
  ok200(t, c, "create with a named template");
  t.equal(c.body.template, "gateway-basic", "the record names its template");
  t.same(norm((await s.dev.get(`/admin/edges/template/${SK}`)).body[a]), norm(GATEWAY_BASIC), "the effective template is the named one");

  const b = uniq("named");
  ok200(t, await s.dev.post(edgePath(b), { token: "edge-secret-6" }));
  const u = await s.dev.put(edgePath(b), { template: "gateway-basic" });
  ok200(t, u, "PUT {template} assigns it");
  t.equal(u.body.template, "gateway-basic");
  t.same(norm((await s.dev.get(`/admin/edges/template/${SK}`)).body[b]), norm(GATEWAY_BASIC), "the second edge shares it");

  const extra = uniq("extra");
  must(await s.dev.post(`/admin/code/v/1/${SK}/${extra}`, { code: `function ${extra}(req, resp) { resp.success(1); }`, parameters: [] }), "a service");
  const o = await s.dev.put(`/admin/edges/template/${SK}/${b}`, { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }, { def_module: "service", def_name: extra }] });
  ok200(t, o, "the edge's own entries");
  const eff = (await s.dev.get(`/admin/edges/template/${SK}`)).body;
  const svc = eff[b].filter((e: any) => key(e) === "service/*");
  t.equal(svc.length, 1, "one entry for service *");
  t.equal(svc[0]?.mode, "sync_to_edge", "the edge's entry overrides the named one");
  t.ok(eff[b].some((e: any) => key(e) === `service/${extra}`), "an own entry is added");
  t.ok(eff[b].some((e: any) => key(e) === "collection/*" && e.mode === "sync"), "the named entries still apply");
  t.same(norm(eff[a]), norm(GATEWAY_BASIC), "the other edge with the named template is untouched");

  ok200(t, await s.dev.put(edgePath(b), { template: "" }), "unassign");
  t.same(norm((await s.dev.get(`/admin/edges/template/${SK}`)).body[b]), ["service/*:sync_to_edge", `service/${extra}:sync_to_edge`], "only the own entries remain");
  await s.dev.del(edgePath(a));
  await s.dev.del(edgePath(b));
  await s.dev.del(`/admin/code/v/1/${SK}/${extra}`);
});

// ---- 3.–8. a platform and an edge -------------------------------------------------------------

const EDGE = "gw1", EDGE_TOKEN = "gw1-secret-token";
const g = await gate(PPORT);
gates.push(g);
const edgeArgs = ["--mode", "edge", "--platform-url", g.url, "--system-key", SK, "--edge-name", EDGE, "--edge-token", EDGE_TOKEN];
let E: Outpost | null = null;
let edgeDev: Client | null = null;
let eUserKey: Client | null = null;

async function startEdge(dataDir?: string) {
  E = await startOutpost({ args: edgeArgs, keepData: true, ...(dataDir ? { dataDir } : {}) });
  running.add(E);
  if (!dataDir) edgeDirs.push(E.dataDir);
  eUserKey = new Client(E.url, { "ClearBlade-SystemKey": SK, "ClearBlade-SystemSecret": s.systemSecret });
  if (edgeDev) edgeDev = new Client(E.url, edgeDev.headers);
  return E;
}
async function stopEdge() {
  if (!E) return;
  await E.stop();
  running.delete(E);
}
/** The developer signs in on the edge with the platform email and password. */
async function edgeSignIn(): Promise<Client> {
  let tok = "";
  await waitFor(async () => {
    const r = await request(E!.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (r.status === 200) tok = r.body.dev_token;
    return r.status === 200;
  }, 20_000);
  if (!tok) throw new Error(`the developer cannot sign in on the edge:\n${E!.logs()}`);
  return (edgeDev = new Client(E!.url, { "ClearBlade-DevToken": tok }));
}
const ed = () => edgeDev!;

async function makeCollection(c: Client, name: string, columns: [string, string][]) {
  const r = must(await c.post("/admin/collectionmanagement", { name, appID: SK }), `create collection ${name}`);
  const id = r.body.collectionID as string;
  for (const [n, type] of columns) must(await c.put("/admin/collectionmanagement", { id, addColumn: { name: n, type } }), `add column ${n}`);
  return id;
}
const rows = async (c: Client, id: string) => {
  const r = await c.get(`/api/v/1/data/${id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) throw new Error(`read ${id}: ${r.status} ${r.text}`);
  return r.body.DATA as any[];
};
const exec = (c: Client, svc: string, params: unknown = {}) => c.post(`/api/v/1/code/${SK}/${svc}`, params);
const status = async () => must(await s.dev.get(`/admin/${SK}/sync/edge/status/${EDGE}`), "status").body as any[];
const statusOf = (list: any[], type: string, name: string) => list.find((x) => x.asset_type === type && x.asset_name === name);
const edgeRecord = async () => must(await s.dev.get(edgePath(EDGE)), "edge record").body;

const helloCode = (v: number) => `function hello(req, resp) {
  resp.success({ v: ${v}, edge: ClearBlade.isEdge(), meta: cbmeta.is_edge, id: ClearBlade.edgeId(), lib: edgeLib("x") });
}`;
const ids = {} as Record<"things" | "inbox" | "results" | "readings" | "shared" | "role", string>;
const names = { role: uniq("Operators"), dev1: uniq("dev1"), dev2: uniq("dev2") };
let u1: Awaited<ReturnType<typeof newUser>>, u2: Awaited<ReturnType<typeof newUser>>;
let thingRows: { item_id: string; v: string; n: number }[] = [];

t.test("initial sync: every asset kind reaches the edge", async (t) => {
  // the assets, made on the platform before the edge exists
  must(await s.dev.post(`/codeadmin/v/2/library/${SK}/edgelib`, { code: "function edgeLib(x) { return 'lib:' + x; }" }), "library");
  must(await s.dev.post(`/admin/code/v/1/${SK}/hello`, { code: helloCode(1), parameters: [], dependencies: "clearblade,edgelib" }), "service hello");
  must(await s.dev.post(`/admin/code/v/1/${SK}/extra`, { code: "function extra(req, resp) { resp.success('extra'); }", parameters: [] }), "service extra");
  ids.things = await makeCollection(s.dev, "things", [["v", "string"], ["n", "int"]]);
  ids.inbox = await makeCollection(s.dev, "inbox", [["v", "string"]]);
  ids.results = await makeCollection(s.dev, "results", [["tag", "string"], ["is_edge", "bool"], ["edge_id", "string"], ["item", "string"]]);
  ids.readings = await makeCollection(s.dev, "readings", [["sensor", "string"], ["value", "float"]]);
  ids.shared = await makeCollection(s.dev, "shared", [["v", "string"], ["origin", "string"]]);
  must(await s.dev.post(`/admin/code/v/1/${SK}/onInbox`, {
    code: `function onInbox(req, resp) {
      ClearBlade.Collection({ collectionName: "results" }).create({ tag: "from-trigger", is_edge: cbmeta.is_edge === true, edge_id: ClearBlade.edgeId(), item: String(req.params.items && req.params.items[0] && req.params.items[0].item_id) }, function (err, d) {
        if (err) resp.error(d); else resp.success("ok");
      });
    }`, parameters: [] }), "service onInbox");
  must(await s.dev.post(`/admin/triggers/handlers/${SK}/trgInbox`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: "inbox" }, service_name: "onInbox" }), "trigger");
  must(await s.dev.post(`/admin/triggers/timers/${SK}/tmrHourly`, { frequency: 3600, repeats: -1, start_time: "2099-01-01T00:00:00Z", service_name: "hello" }), "timer");
  const ins = must(await s.dev.post(`/api/v/1/data/${ids.things}`, [{ v: "a", n: 1 }, { v: "b", n: 2 }, { v: "c", n: 3 }]), "rows");
  thingRows = ins.body.map((r: any, i: number) => ({ item_id: r.item_id, v: ["a", "b", "c"][i]!, n: i + 1 }));
  const role = must(await s.dev.post(`/admin/user/${SK}/roles`, { name: names.role, services: [{ itemInfo: { name: "hello" }, permissions: 1 }] }), "role");
  ids.role = role.body.role_id;
  u1 = await newUser(s);
  u2 = await newUser(s);
  must(await s.dev.put(`/admin/user/${SK}`, { user: u1.userId, changes: { roles: { add: [ids.role] } } }), "u1 roles");
  for (const d of [names.dev1, names.dev2]) must(await s.dev.post(`/admin/devices/${SK}/${d}`, { type: "sensor", state: "new", active_key: `${d}-key` }), `device ${d}`);

  must(await s.dev.post(edgePath(EDGE), { token: EDGE_TOKEN, description: "the gateway" }), "edge record");
  must(await s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, {
    add: [
      { def_module: "library", def_name: "*" },
      { def_module: "service", def_name: "*" },
      { def_module: "trigger", def_name: "*" },
      { def_module: "timer", def_name: "*" },
      { def_module: "collection", def_name: "*" },
      { def_module: "collection", def_name: "readings", mode: "sync_to_platform" },
      { def_module: "collection", def_name: "shared", mode: "sync" },
      { def_module: "role", def_name: "*" },
      { def_module: "user", def_name: "*" },
      { def_module: "device", def_name: names.dev1 },
      { def_module: "device", def_name: names.dev2 },
      { def_module: "topic", def_name: "telemetry/#", mode: "sync_to_platform" },
    ],
  }), "template");

  await startEdge();
  t.ok((await edgeSignIn()).headers["ClearBlade-DevToken"], "the developer signs in on the edge with the platform email and password");
  const arrived = await waitFor(async () => (await ed().get(`/admin/devices/${SK}/${names.dev2}`)).status === 200, 20_000);
  t.ok(arrived, "the snapshot arrived (the last kind, devices, is on the edge)");

  // each kind, read through the edge's own API
  const svc = await ed().get(`/admin/code/v/1/${SK}/hello`);
  ok200(t, svc, "service on the edge");
  t.equal(svc.body.code, helloCode(1), "service code identical");
  const run = await exec(ed(), "hello");
  ok200(t, run, "the service runs on the edge");
  t.same(run.body.results, { v: 1, edge: true, meta: true, id: EDGE, lib: "lib:x" }, "cbmeta.is_edge true, edge id, library loaded");
  const onPlatform = await exec(s.dev, "hello");
  t.same(onPlatform.body.results, { v: 1, edge: false, meta: false, id: "", lib: "lib:x" }, "the same service on the platform says it is not an edge");
  ok200(t, await ed().get(`/admin/code/v/1/${SK}/extra`), "second service on the edge");
  const lib = await ed().get(`/codeadmin/v/2/library/${SK}/edgelib`);
  ok200(t, lib, "library on the edge");
  t.equal(lib.body.code, "function edgeLib(x) { return 'lib:' + x; }", "library code identical");
  const trg = await ed().get(`/admin/triggers/handlers/${SK}/trgInbox`);
  ok200(t, trg, "trigger on the edge");
  t.equal(trg.body.service_name, "onInbox");
  t.same(trg.body.key_value_pairs, { collectionName: "inbox" });
  t.equal(trg.body.def_name, "ItemCreated");
  const tm = await ed().get(`/admin/triggers/timers/${SK}/tmrHourly`);
  ok200(t, tm, "timer on the edge");
  t.equal(tm.body.frequency, 3600);
  t.equal(tm.body.service_name, "hello");
  for (const c of ["things", "inbox", "results", "readings", "shared"] as const) {
    const d = await ed().get(`/admin/collectionmanagement?id=${ids[c]}`);
    ok200(t, d, `collection ${c} on the edge with the platform's id`);
    t.equal(d.body.name, c, `${c}: name`);
  }
  const cols = await ed().get(`/api/v/1/data/${ids.things}/columns`);
  t.same(cols.body.map((c: any) => `${c.ColumnName}:${c.ColumnType}`).sort(), ["item_id:uuid", "n:int", "v:string"], "collection schema identical");
  const er = await rows(ed(), ids.things);
  t.same(er.map((r) => ({ item_id: r.item_id, v: r.v, n: r.n })).sort((a, b) => a.n - b.n), thingRows, "collection rows identical, same item ids");
  const roles = await ed().get(`/admin/user/${SK}/roles`);
  ok200(t, roles, "roles on the edge");
  const r = roles.body.find((x: any) => x.Name === names.role);
  t.ok(r, "the role is on the edge");
  t.equal(r?.ID, ids.role, "with the platform's id");
  t.same(r?.Permissions?.CodeServices?.map((x: any) => [x.Name, x.Level]), [["hello", 1]], "and its permissions");
  const users = (await ed().get(`/admin/user/${SK}`)).body.Data.map((x: any) => x.email);
  t.ok(users.includes(u1.email) && users.includes(u2.email), "users on the edge");
  const ua = await eUserKey!.post("/api/v/1/user/auth", { email: u1.email, password: u1.password });
  ok200(t, ua, "a user of the template signs in on the edge");
  t.equal(ua.body.user_id, u1.userId, "same user id");
  const asU1 = new Client(E!.url, { "ClearBlade-UserToken": ua.body.user_token });
  ok200(t, await exec(asU1, "hello"), "the synced role lets the user run the service on the edge");
  const ua2 = must(await eUserKey!.post("/api/v/1/user/auth", { email: u2.email, password: u2.password }), "u2 auth");
  isErr(t, await exec(new Client(E!.url, { "ClearBlade-UserToken": ua2.body.user_token }), "hello"), 401, "a user without the role may not");
  isErr(t, await eUserKey!.post("/api/v/1/user/auth", { email: u1.email, password: "wrong-password" }), 401, "a wrong password is refused on the edge");
  const dv = await ed().get(`/admin/devices/${SK}/${names.dev1}`);
  ok200(t, dv, "device on the edge");
  t.equal(dv.body.type, "sensor");
  const da = await request(E!.url, "POST", `/api/v/2/devices/${SK}/auth`, { body: { deviceName: names.dev1, activeKey: `${names.dev1}-key` } });
  ok200(t, da, "the device authenticates on the edge with its key");

  const rec = await edgeRecord();
  t.equal(rec.isConnected, true, "the edge record shows isConnected true");
  t.type(rec.first_talked, "number", "first_talked set");
  t.type(rec.last_talked, "number", "last_talked set");
  t.ok(rec.last_seen_version.length > 0, "last_seen_version reported by the edge");
  t.equal(rec.token, "", "the secret is still not shown");
});

t.test("platform changes reach the edge: rows, service update and delete, new user, schema", async (t) => {
  const add = must(await s.dev.post(`/api/v/1/data/${ids.things}`, { v: "new", n: 10 }), "insert");
  const newId = add.body[0].item_id;
  t.ok(await waitFor(async () => (await rows(ed(), ids.things)).some((r) => r.item_id === newId && r.v === "new" && r.n === 10)), "an inserted row reaches the edge");
  must(await s.dev.put(`/api/v/1/data/${ids.things}`, { query: [[{ EQ: [{ v: "a" }] }]], $set: { v: "a2", n: 11 } }), "update");
  t.ok(await waitFor(async () => (await rows(ed(), ids.things)).some((r) => r.item_id === thingRows[0]!.item_id && r.v === "a2" && r.n === 11)), "an updated row reaches the edge");
  must(await s.dev.del(`/api/v/1/data/${ids.things}?query=${qs([[{ EQ: [{ v: "b" }] }]])}`), "delete");
  t.ok(await waitFor(async () => !(await rows(ed(), ids.things)).some((r) => r.item_id === thingRows[1]!.item_id)), "a deleted row goes from the edge");
  t.equal((await rows(ed(), ids.things)).length, 3, "three rows on the edge (a2, c, new)");

  must(await s.dev.put(`/admin/code/v/1/${SK}/hello`, { code: helloCode(2) }), "service update");
  t.ok(await waitFor(async () => (await exec(ed(), "hello")).body?.results?.v === 2), "the edge runs the updated service");
  must(await s.dev.del(`/admin/code/v/1/${SK}/extra`), "service delete");
  t.ok(await waitFor(async () => (await ed().get(`/admin/code/v/1/${SK}/extra`)).status === 404), "a deleted service goes from the edge");

  const u3 = await newUser(s);
  t.ok(await waitFor(async () => (await eUserKey!.post("/api/v/1/user/auth", { email: u3.email, password: u3.password })).status === 200), "a user created on the platform signs in on the edge");

  must(await s.dev.put("/admin/collectionmanagement", { id: ids.things, addColumn: { name: "note", type: "string" } }), "add column");
  t.ok(await waitFor(async () => (await ed().get(`/api/v/1/data/${ids.things}/columns`)).body.some((c: any) => c.ColumnName === "note")), "a new column reaches the edge");
});

t.test("template removal removes the asset from the edge", async (t) => {
  ok200(t, await s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { remove: [{ def_module: "device", def_name: names.dev2 }] }), "remove one device entry");
  t.ok(await waitFor(async () => (await ed().get(`/admin/devices/${SK}/${names.dev2}`)).status === 404), "the removed device is gone from the edge");
  ok200(t, await ed().get(`/admin/devices/${SK}/${names.dev1}`), "the other device stays");
  ok200(t, await s.dev.get(`/admin/devices/${SK}/${names.dev2}`), "the device is still on the platform");

  ok200(t, await s.dev.put(`/admin/edges/template/${SK}/${EDGE}`, { remove: [{ def_module: "timer", def_name: "*" }] }), "remove the only timer entry");
  t.ok(await waitFor(async () => (await ed().get(`/admin/triggers/timers/${SK}/tmrHourly`)).status === 404, 10_000),
    "the timer is gone from the edge when its kind leaves the template");
  ok200(t, await ed().get(`/admin/triggers/handlers/${SK}/trgInbox`), "other kinds stay");
  ok200(t, await s.dev.get(`/admin/triggers/timers/${SK}/tmrHourly`), "the timer is still on the platform");
});

t.test("edge-side rows and relayed messages reach the platform", async (t) => {
  const r1 = must(await ed().post(`/api/v/1/data/${ids.readings}`, { sensor: "s1", value: 1.5 }), "insert on the edge (sync_to_platform)");
  const rid = r1.body[0].item_id;
  t.ok(await waitFor(async () => (await rows(s.dev, ids.readings)).some((r) => r.item_id === rid && r.sensor === "s1" && r.value === 1.5)), "a row written on the edge reaches the platform (sync_to_platform)");

  const r2 = must(await ed().post(`/api/v/1/data/${ids.shared}`, { v: "from-edge", origin: "edge" }), "insert on the edge (sync)");
  const sid = r2.body[0].item_id;
  t.ok(await waitFor(async () => (await rows(s.dev, ids.shared)).some((r) => r.item_id === sid && r.v === "from-edge")), "a row written on the edge reaches the platform (sync)");
  must(await ed().put(`/api/v/1/data/${ids.shared}`, { query: [[{ EQ: [{ v: "from-edge" }] }]], $set: { v: "edited-on-edge" } }), "update on the edge");
  t.ok(await waitFor(async () => (await rows(s.dev, ids.shared)).some((r) => r.item_id === sid && r.v === "edited-on-edge")), "an update on the edge reaches the platform");
  const p2 = must(await s.dev.post(`/api/v/1/data/${ids.shared}`, { v: "from-platform", origin: "platform" }), "insert on the platform (sync)");
  t.ok(await waitFor(async () => (await rows(ed(), ids.shared)).some((r) => r.item_id === p2.body[0].item_id)), "and the other way");

  // rows of a sync_to_edge collection stay on the edge
  must(await ed().post(`/api/v/1/data/${ids.things}`, { v: "edge-local", n: 99 }), "insert on the edge (sync_to_edge)");
  const marker = must(await ed().post(`/api/v/1/data/${ids.shared}`, { v: "marker", origin: "edge" }), "a later row that goes up").body[0].item_id;
  t.ok(await waitFor(async () => (await rows(s.dev, ids.shared)).some((r) => r.item_id === marker)), "the later row went up");
  t.notOk((await rows(s.dev, ids.things)).some((r) => r.v === "edge-local"), "a row of a sync_to_edge collection did not go up");

  // messages: x/_platform (topic kept whole, as ClearBlade) and a topic of the template reach an
  // MQTT subscriber on the platform
  const pm = await mqttConnect(P.mqttPort, s.devToken);
  const em = await mqttConnect(E!.mqttPort, edgeDev!.headers["ClearBlade-DevToken"]!);
  t.teardown(() => { pm.end(true); em.end(true); });
  const got: { topic: string; payload: string }[] = [];
  pm.on("message", (topic, payload) => got.push({ topic, payload: payload.toString() }));
  await new Promise<void>((res, rej) => pm.subscribe(["x", "x/_platform", "telemetry/#", "local/#"], { qos: 1 }, (e) => (e ? rej(e) : res())));
  await new Promise<void>((res, rej) => em.publish("x/_platform", "to-platform", { qos: 1 }, (e) => (e ? rej(e) : res())));
  await new Promise<void>((res, rej) => em.publish("local/only", "stays", { qos: 1 }, (e) => (e ? rej(e) : res())));
  await new Promise<void>((res, rej) => em.publish("telemetry/t1", "reading", { qos: 1 }, (e) => (e ? rej(e) : res())));
  t.ok(await waitFor(() => got.some((m) => m.topic === "x/_platform" && m.payload === "to-platform"), 10_000), "a message on x/_platform reaches the platform's subscriber on x/_platform");
  t.ok(await waitFor(() => got.some((m) => m.topic === "telemetry/t1" && m.payload === "reading"), 10_000), "a message on a template topic (telemetry/#) reaches the platform");
  t.notOk(got.some((m) => m.topic.startsWith("local/")), "a topic outside the template stays on the edge");
  t.notOk(got.some((m) => m.topic === "x"), "the bare topic's subscriber got nothing");
});

function mqttConnect(port: number, token: string): Promise<mqtt.MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: token, password: SK, clientId: uniq("m"), reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4 });
    c.once("connect", () => res(c));
    c.once("error", (e) => { c.end(true); rej(e); });
  });
}

t.test("a synced trigger and service run on the edge", async (t) => {
  const ins = must(await ed().post(`/api/v/1/data/${ids.inbox}`, { v: "ping" }), "insert into inbox on the edge");
  const item = ins.body[0].item_id;
  let found: any;
  t.ok(await waitFor(async () => { found = (await rows(ed(), ids.results)).find((r) => r.item === item); return !!found; }, 15_000), "the trigger's service wrote a row on the edge");
  t.equal(found?.tag, "from-trigger");
  t.equal(found?.is_edge, true, "cbmeta.is_edge is true in the service on the edge");
  t.equal(found?.edge_id, EDGE, "ClearBlade.edgeId() is the edge's name");
  t.notOk((await rows(s.dev, ids.results)).some((r) => r.item === item), "it ran on the edge, not on the platform");
});

t.test("sync status: synced, pending while the edge is down, failed, retry", async (t) => {
  const kinds = [["service", "hello"], ["library", "edgelib"], ["trigger", "trgInbox"], ["collection", "things"], ["collection_rows", "things"], ["role", names.role], ["user", u1.email], ["device", names.dev1]];
  // rows of collections with nothing to send down (empty ones, and one whose rows only go up) are checked on their own
  const quiet = new Set(["inbox", "results", "readings"]);
  const ordinary = (x: any) => !(x.asset_type === "collection_rows" && quiet.has(x.asset_name));
  const notSynced = (list: any[]) => JSON.stringify(list.filter((x) => x.status !== "synced").map((x) => [x.asset_type, x.asset_name, x.status, x.desired_version, x.applied_version]));
  let st: any[] = [];
  const allSynced = await waitFor(async () => { st = await status(); return st.length > 0 && st.filter(ordinary).every((x) => x.status === "synced"); }, 15_000);
  t.ok(allSynced, `every asset is synced after sync${allSynced ? "" : `: not synced: ${notSynced(st.filter(ordinary))}`}`);
  for (const c of ["inbox", "results"]) {
    const x = statusOf(st, "collection_rows", c);
    t.equal(x?.status, "synced", `rows of the empty collection '${c}' (nothing to send, desired ${x?.desired_version} <= applied ${x?.applied_version}) count as synced`);
  }
  const up = statusOf(st, "collection_rows", "readings");
  t.equal(up?.status, "synced", `rows of a sync_to_platform collection (nothing goes down; desired ${up?.desired_version}, applied ${up?.applied_version}) are not pending forever`);
  t.ok(Array.isArray(st), "GET /admin/{sk}/sync/edge/status/{edge} is an array");
  for (const [type, name] of kinds) t.equal(statusOf(st, type!, name!)?.status, "synced", `${type} ${name} synced`);
  const one = statusOf(st, "service", "hello");
  for (const [k, type] of [["asset_type", "string"], ["asset_name", "string"], ["status", "string"], ["desired_version", "number"], ["applied_version", "number"], ["last_error", "string"], ["attempts", "number"], ["updated_at", "string"]] as const)
    t.type(one?.[k], type, `status field ${k} is a ${type}`);
  t.ok(st.every((x) => ["pending", "synced", "failed"].includes(x.status)), "status values are pending, synced or failed");

  const all = await s.dev.get(`/admin/${SK}/sync/alledges/status`);
  ok200(t, all, "GET /admin/{sk}/sync/alledges/status");
  t.ok(Array.isArray(all.body), "an array");
  const mine = all.body.find((x: any) => x.edge_name === EDGE);
  t.ok(mine, "our edge is listed");
  t.equal(mine?.isConnected, true, "connected");
  t.ok(Array.isArray(mine?.assets) && mine.assets.length === st.length, "with its assets");

  isErr(t, await s.dev.get(`/admin/${SK}/sync/edge/status/${uniq("ghost")}`), 404, "status of an unknown edge");
  isErr(t, await s2.dev.get(`/admin/${SK}/sync/edge/status/${EDGE}`), 401, "other system's developer: edge status");
  isErr(t, await s2.dev.get(`/admin/${SK}/sync/alledges/status`), 401, "other system's developer: all edges status");
  const user = await userWith({ edges: { permissions: 15 } });
  isErr(t, await user.client.get(`/admin/${SK}/sync/edge/status/${EDGE}`), 401, "a user token");
  isErr(t, await s.dev.post(`/admin/${SK}/sync/retry`, { edge: uniq("ghost") }), 404, "retry for an unknown edge");
  isErr(t, await s2.dev.post(`/admin/${SK}/sync/retry`, { edge: EDGE }), 401, "retry by another system's developer");

  // pending: a change made while the edge is down
  await stopEdge();
  t.ok(await waitFor(async () => (await edgeRecord()).isConnected === false, 10_000), "the edge record shows isConnected false once the edge stopped");
  must(await s.dev.put(`/admin/code/v/1/${SK}/hello`, { code: helloCode(3) }), "service update while the edge is down");
  const pend = statusOf(await status(), "service", "hello");
  t.equal(pend?.status, "pending", "the changed service is pending");
  t.ok(pend && pend.desired_version > pend.applied_version, "desired version ahead of the applied one");
  t.equal(statusOf(await status(), "library", "edgelib")?.status, "synced", "unchanged assets stay synced");
  const allDown = (await s.dev.get(`/admin/${SK}/sync/alledges/status`)).body.find((x: any) => x.edge_name === EDGE);
  t.equal(allDown?.isConnected, false, "all-edges status: not connected");
  t.equal(statusOf(allDown?.assets ?? [], "service", "hello")?.status, "pending", "all-edges status: pending");
  await startEdge(E!.dataDir);
  t.ok(await waitFor(async () => statusOf(await status(), "service", "hello")?.status === "synced", 20_000), "synced once the edge is back");
  t.equal((await edgeRecord()).isConnected, true, "isConnected true again");
  t.equal((await exec(ed(), "hello")).body?.results?.v, 3, "the edge runs the version changed while it was down");

  // failed: the edge holds a local collection of the same name
  const local = await ed().post("/admin/collectionmanagement", { name: "clash", appID: SK });
  ok200(t, local, "a local collection 'clash' made on the edge");
  const clashId = await makeCollection(s.dev, "clash", [["v", "string"]]);
  let failed: any;
  t.ok(await waitFor(async () => { failed = statusOf(await status(), "collection", "clash"); return failed?.status === "failed"; }, 15_000), "the platform's 'clash' cannot apply: failed");
  t.ok(failed?.last_error.length > 0, `with last_error (${failed?.last_error})`);
  t.ok(failed?.attempts >= 1, "attempts counted");
  const after = must(await s.dev.post(`/api/v/1/data/${ids.things}`, { v: "after-failure", n: 12 }), "a later change").body[0].item_id;
  t.ok(await waitFor(async () => (await rows(ed(), ids.things)).some((r) => r.item_id === after)), "a failed asset does not block the others");
  const st2 = await status();
  const others = st2.filter((x) => x.asset_name !== "clash" && ordinary(x));
  t.ok(others.every((x) => x.status === "synced"), `the other assets are still synced${others.every((x) => x.status === "synced") ? "" : `: ${JSON.stringify(others.filter((x) => x.status !== "synced").map((x) => [x.asset_type, x.asset_name, x.status]))}`}`);
  const allF = (await s.dev.get(`/admin/${SK}/sync/alledges/status`)).body.find((x: any) => x.edge_name === EDGE);
  t.equal(statusOf(allF?.assets ?? [], "collection", "clash")?.status, "failed", "all-edges status shows the failure");

  // retry after the cause is gone
  ok200(t, await ed().del(`/admin/collectionmanagement?id=${local.body.collectionID}`), "the local 'clash' is removed on the edge");
  const rt = await s.dev.post(`/admin/${SK}/sync/retry`, { edge: EDGE, asset_class: "collection", asset_id: "clash" });
  ok200(t, rt, "POST /admin/{sk}/sync/retry");
  t.same(rt.body, [{ edge: EDGE, connected: true, queued: 1 }], "the answer names the edge and what was queued");
  t.ok(await waitFor(async () => statusOf(await status(), "collection", "clash")?.status === "synced", 15_000), "synced after the retry");
  t.equal(statusOf(await status(), "collection", "clash")?.last_error, "", "last_error cleared");
  const d = await ed().get(`/admin/collectionmanagement?id=${clashId}`);
  ok200(t, d, "the platform's 'clash' is on the edge now, with its id");
  t.equal(d.body.name, "clash");
  must(await s.dev.post(`/api/v/1/data/${clashId}`, { v: "row-after-retry" }), "a row in it");
  t.ok(await waitFor(async () => (await rows(ed(), clashId)).some((r) => r.v === "row-after-retry")), "its rows flow after the retry");
});

t.test("a change the edge applied whose acknowledgement was lost is not left pending", async (t) => {
  t.ok(await waitFor(async () => statusOf(await status(), "service", "hello")?.status === "synced", 10_000), "synced to begin with");
  g.mute(); // the edge's acknowledgements (and everything else it sends) no longer reach the platform
  must(await s.dev.put(`/admin/code/v/1/${SK}/hello`, { code: helloCode(4) }), "service update");
  t.ok(await waitFor(async () => (await exec(ed(), "hello")).body?.results?.v === 4), "the edge applied the change");
  t.equal(statusOf(await status(), "service", "hello")?.status, "pending", "pending while its acknowledgement is missing");
  g.shut(); // the connection breaks before the acknowledgement got through
  g.open();
  t.ok(await waitFor(async () => (await edgeRecord()).isConnected === true && (await edgeRecord()).cursor > 0, 20_000), "the edge reconnects");
  must(await s.dev.post(`/api/v/1/data/${ids.things}`, { v: "after-lost-ack", n: 30 }), "a later change");
  t.ok(await waitFor(async () => (await rows(ed(), ids.things)).some((r) => r.v === "after-lost-ack")), "later changes flow");
  const x = await waitFor(async () => statusOf(await status(), "service", "hello")?.status === "synced", 10_000);
  const h = statusOf(await status(), "service", "hello");
  t.ok(x, `the service the edge holds shows synced after the reconnect (status ${h?.status}, desired ${h?.desired_version}, applied ${h?.applied_version}, edge cursor ${(await edgeRecord()).cursor})`);
});

t.test("platform outage: the edge keeps working, then catches up", async (t) => {
  await P.kill();
  g.shut(); // holds the edge off until the test has looked at the restarted platform
  t.ok(await waitFor(async () => (await request(PURL, "GET", "/health").then(() => false, () => true)), 5_000), "the platform is down");

  // the edge on its own
  ok200(t, await ed().get(`/admin/code/v/1/${SK}/hello`), "the edge serves its API");
  const run = await exec(ed(), "hello");
  ok200(t, run, "and runs services");
  t.equal(run.body?.results?.edge, true);
  ok200(t, await eUserKey!.post("/api/v/1/user/auth", { email: u1.email, password: u1.password }), "users still sign in on the edge");
  const o1 = must(await ed().post(`/api/v/1/data/${ids.shared}`, [{ v: "outage-1", origin: "edge" }, { v: "outage-2", origin: "edge" }]), "rows into a sync collection").body.map((r: any) => r.item_id);
  const o2 = must(await ed().post(`/api/v/1/data/${ids.readings}`, { sensor: "outage", value: 7 }), "a row into a sync_to_platform collection").body[0].item_id;
  const inbox = must(await ed().post(`/api/v/1/data/${ids.inbox}`, { v: "during-outage" }), "a trigger's collection").body[0].item_id;
  t.ok(await waitFor(async () => (await rows(ed(), ids.results)).some((r) => r.item === inbox)), "triggers still run on the edge");
  const em = await mqttConnect(E!.mqttPort, edgeDev!.headers["ClearBlade-DevToken"]!);
  await new Promise<void>((res, rej) => em.publish("telemetry/outage", "kept", { qos: 1 }, (e) => (e ? rej(e) : res())));
  em.end(true);

  // the edge itself restarts while the platform is still away: what it writes then must go up too
  const before = E!;
  await stopEdge();
  await startEdge(E!.dataDir);
  ok200(t, await ed().get(`/admin/code/v/1/${SK}/hello`), "an edge restarted during the outage serves its API");
  ok200(t, await exec(ed(), "hello"), "and runs services");
  const o3 = must(await ed().post(`/api/v/1/data/${ids.shared}`, { v: "after-edge-restart", origin: "edge" }), "a row into a sync collection after the edge restarted").body[0].item_id;
  const o4 = must(await ed().post(`/api/v/1/data/${ids.readings}`, { sensor: "after-edge-restart", value: 8 }), "a row into a sync_to_platform collection after the edge restarted").body[0].item_id;
  const em2 = await mqttConnect(E!.mqttPort, edgeDev!.headers["ClearBlade-DevToken"]!);
  await new Promise<void>((res, rej) => em2.publish("telemetry/outage", "after-restart", { qos: 1 }, (e) => (e ? rej(e) : res())));
  em2.end(true);

  // the platform back on the same data and port; changes there while the edge is still away
  P = await startPlatform(pData);
  const rec = await edgeRecord();
  t.equal(rec.isConnected, false, "after the restart the edge record shows isConnected false until the edge is back");
  const pRow = must(await s.dev.post(`/api/v/1/data/${ids.things}`, { v: "while-away", n: 20 }), "a platform row while the edge is away").body[0].item_id;
  must(await s.dev.post(`/admin/code/v/1/${SK}/afterOutage`, { code: "function afterOutage(req, resp) { resp.success('later'); }", parameters: [] }), "a platform service while the edge is away");
  const pm = await mqttConnect(P.mqttPort, s.devToken);
  t.teardown(() => { pm.end(true); });
  const got: string[] = [];
  pm.on("message", (topic, payload) => got.push(`${topic}=${payload}`));
  await new Promise<void>((res, rej) => pm.subscribe("telemetry/#", { qos: 1 }, (e) => (e ? rej(e) : res())));

  g.open();
  t.ok(await waitFor(async () => (await edgeRecord()).isConnected === true, 45_000), "the edge reconnects: isConnected true");
  t.ok(await waitFor(async () => { const r = await rows(s.dev, ids.shared); return o1.every((id: string) => r.some((x) => x.item_id === id)); }), "rows written on the edge during the outage reach the platform (sync)");
  t.ok(await waitFor(async () => (await rows(s.dev, ids.readings)).some((r) => r.item_id === o2 && r.value === 7)), "and (sync_to_platform)");
  const kept = await waitFor(() => got.includes("telemetry/outage=kept"), 15_000);
  const hist = async (c: Client) => (await c.get(`/api/v/1/message/${SK}?topic=${encodeURIComponent("telemetry/outage")}&count=10`)).text.slice(0, 600);
  t.ok(kept, `a message published on the edge during the outage (QoS 1, acknowledged) is relayed after it${kept ? "" : ` (got ${JSON.stringify(got)}; platform history ${await hist(s.dev)}; edge history ${await hist(ed())}; the edge's log before its restart: ${before.logs().slice(-1500)})`}`);
  t.ok(await waitFor(() => got.includes("telemetry/outage=after-restart"), 5_000), "and one published after the edge restarted during the outage");
  t.ok(await waitFor(async () => (await rows(s.dev, ids.shared)).some((r) => r.item_id === o3), 10_000), "a row written on an edge restarted during the outage reaches the platform (sync)");
  t.ok(await waitFor(async () => (await rows(s.dev, ids.readings)).some((r) => r.item_id === o4), 5_000), "and (sync_to_platform)");
  t.ok(await waitFor(async () => (await rows(ed(), ids.things)).some((r) => r.item_id === pRow)), "a platform row made while the edge was away reaches it");
  t.ok(await waitFor(async () => (await exec(ed(), "afterOutage")).body?.results === "later"), "a platform service made while the edge was away runs on it");
  await waitFor(async () => (await rows(s.dev, ids.shared)).length === (await rows(ed(), ids.shared)).length, 5_000);
  const sh = await rows(s.dev, ids.shared), eh = await rows(ed(), ids.shared);
  t.same(eh.map((r) => `${r.item_id}=${r.v}`).sort(), sh.map((r) => `${r.item_id}=${r.v}`).sort(), "the sync collection is identical on both sides");
  for (const [type, name] of [["service", "afterOutage"], ["collection_rows", "things"], ["collection_rows", "shared"]])
    t.ok(await waitFor(async () => statusOf(await status(), type!, name!)?.status === "synced", 15_000), `status of ${type} ${name} back to synced`);
});

t.test("an edge with a wrong token is refused", async (t) => {
  const name = uniq("gwbad");
  must(await s.dev.post(edgePath(name), { token: "the-right-token" }), "edge record");
  const bad = await startOutpost({ args: ["--mode", "edge", "--platform-url", PURL, "--system-key", SK, "--edge-name", name, "--edge-token", "a-wrong-token"] });
  running.add(bad);
  // the platform refuses the hello before it touches the edge record: once the edge is told, the
  // record is as the refusal left it
  t.ok(await waitFor(() => /"msg":"the platform refused the edge"[^\n]*"message":"the platform refused this edge's name or token: unknown edge or wrong token"/.test(bad.logs()), 15_000), "the edge is told it is refused");
  const rec = must(await s.dev.get(edgePath(name)), "record").body;
  t.equal(rec.isConnected, false, "not connected");
  t.equal(rec.first_talked, null, "never talked");
  t.equal(rec.last_refusal, "wrong token", "the record keeps why it was refused");
  isErr(t, await request(bad.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } }).then((r) => r), 401, "nothing synced: the developer is unknown there");
  await bad.stop();
  running.delete(bad);
});

t.test("a named template drives an edge: deploy-mode code at start-up, not live", async (t) => {
  const name = uniq("gw2");
  must(await s.dev.post(edgePath(name), { token: "gw2-secret-token" }), "edge record");
  ok200(t, await s.dev.put(edgePath(name), { template: "gateway-basic" }), "assign the named template");
  const args = ["--mode", "edge", "--platform-url", PURL, "--system-key", SK, "--edge-name", name, "--edge-token", "gw2-secret-token"];
  let e2 = await startOutpost({ args, keepData: true });
  running.add(e2);
  edgeDirs.push(e2.dataDir);
  let tok = "";
  await waitFor(async () => {
    const r = await request(e2.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (r.status === 200) tok = r.body.dev_token;
    return r.status === 200;
  });
  t.ok(tok, "the developer signs in on the second edge");
  let c2 = new Client(e2.url, { "ClearBlade-DevToken": tok });
  t.ok(await waitFor(async () => (await rows(c2, ids.things)).length > 0, 10_000), "collections and rows of the template (collection *, sync) arrive");
  t.ok(await waitFor(async () => (await c2.get(`/admin/triggers/handlers/${SK}/trgInbox`)).status === 200, 5_000), "triggers (sync_to_edge) arrive");
  t.ok(await waitFor(async () => (await c2.get(`/admin/code/v/1/${SK}/hello`)).status === 200, 5_000), "services (deploy) are copied at the edge's first start-up");
  t.ok(await waitFor(async () => (await c2.get(`/codeadmin/v/2/library/${SK}/edgelib`)).status === 200, 5_000), "libraries (deploy) too");

  // a change of deployed code does not go live; the sync_to_edge edge gets it at once
  must(await s.dev.put(`/admin/code/v/1/${SK}/hello`, { code: helloCode(5) }), "service update");
  t.ok(await waitFor(async () => (await exec(ed(), "hello")).body?.results?.v === 5), "the edge with service * sync_to_edge runs the new code");
  // the log goes to an edge in order: once a row written after the update reached the deploy-mode
  // edge, the update would have come before it
  const w = must(await s.dev.post(`/api/v/1/data/${ids.things}`, { v: "after-deploy-update", n: 40 }), "a later row").body[0].item_id;
  t.ok(await waitFor(async () => (await rows(c2, ids.things)).some((r) => r.item_id === w), 15_000), "a later change reaches the deploy-mode edge");
  t.not((await c2.get(`/admin/code/v/1/${SK}/hello`)).body?.code, helloCode(5), "the deploy-mode edge does not get it live");
  await e2.stop();
  running.delete(e2);
  e2 = await startOutpost({ args, dataDir: e2.dataDir });
  running.add(e2);
  c2 = new Client(e2.url, { "ClearBlade-DevToken": tok });
  t.ok(await waitFor(async () => (await c2.get(`/admin/code/v/1/${SK}/hello`)).body?.code === helloCode(5), 15_000), "it gets the new code at its next start-up");
  t.equal((await exec(c2, "hello")).body?.results?.v, 5, "and runs it");
});
