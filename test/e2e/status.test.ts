// `outpost status` and the edge's local status endpoint, black-box: a platform and two edges (real
// processes). Against the platform: tables and JSON, exit 0 when all is synced, 1 when an asset
// failed (with its error shown), 3 when an edge is unreachable, 2 for a bad command line, 4 when the
// API cannot be asked. On an edge (its configuration from the environment, a file or its flags): its
// own link and assets from GET /api/v/4/edge/status, and that endpoint's failure paths.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { Client, devWithSystem, freePort, isErr, newUser, ok200, request, runBin, startOutpost, uniq, waitFor, type Outpost } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-status-"));
const procs: Outpost[] = [];
t.teardown(async () => {
  for (const p of procs) await p.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

const platform = await startOutpost();
procs.push(platform);
const s = await devWithSystem(platform, "status");
const SK = s.systemKey;
const tokens: Record<string, string> = {};
const edges: Record<string, Outpost> = {};
for (const name of ["gw-1", "gw-2"]) {
  const e = await s.dev.post(`/admin/edges/${SK}/${name}`, {});
  if (e.status !== 200) throw new Error(`edge ${name}: ${e.text}`);
  tokens[name] = e.body.token;
  await s.dev.put(`/admin/edges/template/${SK}/${name}`, { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }, { def_module: "user", def_name: "*", mode: "sync_to_edge" }] });
}
await s.dev.post(`/admin/code/v/1/${SK}/calc`, { code: "function calc(req, resp) { resp.success(1); }", parameters: [] });
const user = await newUser(s);
const edgeArgs = (name: string) => ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", name, "--edge-token", tokens[name]!];
for (const name of ["gw-1", "gw-2"]) {
  const e = await startOutpost({ args: edgeArgs(name) });
  procs.push(e);
  edges[name] = e;
}
const statusOf = async (edge: string) => (await s.dev.get(`/admin/${SK}/sync/edge/status/${edge}`)).body as any[];
const allSynced = async (edge: string) => { const l = await statusOf(edge); return l.length >= 2 && l.every((a) => a.status === "synced"); };
if (!(await waitFor(async () => (await allSynced("gw-1")) && (await allSynced("gw-2")), 30_000))) throw new Error("the edges did not sync");

const fleet = ["status", "--platform-url", platform.url, "--system-key", SK];
const status = (args: string[], env: Record<string, string> = {}) => runBin(args, { env, timeoutMs: 30_000 });

t.test("all synced: exit 0 and a table of edges", async (t) => {
  const r = await status([...fleet, "--dev-token", s.devToken]);
  t.equal(r.code, 0, `exit 0 (${r.stderr})`);
  t.match(r.stdout, /^EDGE\s+CONNECTED\s+LAST TALKED\s+LAG\s+PENDING\s+SYNCED\s+FAILED$/m, "the header");
  t.match(r.stdout, /^gw-1\s+yes\s+\d+s ago\s+0\s+0\s+\d+\s+0$/m, "gw-1's row");
  t.match(r.stdout, /^gw-2\s+yes\s/m, "gw-2's row");
  t.match(r.stdout, /2 edges: 2 connected, 0 with failed assets/, "the summary");
  t.equal((await status(fleet, { OUTPOST_DEV_TOKEN: s.devToken })).code, 0, "the token from OUTPOST_DEV_TOKEN");
  const signIn = await status([...fleet, "--email", s.email, "--password", s.password]);
  t.equal(signIn.code, 0, `signing in with --email/--password (${signIn.stderr})`);
  const j = await status([...fleet, "--dev-token", s.devToken, "--json"]);
  t.equal(j.code, 0);
  const doc = JSON.parse(j.stdout);
  t.equal(doc.system_key, SK);
  t.same(doc.edges.map((e: any) => [e.name, e.connected, e.failed, e.pending]), [["gw-1", true, 0, 0], ["gw-2", true, 0, 0]], "--json: every edge with its counts");
  t.ok(doc.edges.every((e: any) => e.synced >= 2 && typeof e.last_talked === "number" && e.sync_lag === 0), "synced counts, last talked, lag");
  const one = await status([...fleet, "--dev-token", s.devToken, "--edge", "gw-1"]);
  t.equal(one.code, 0);
  t.match(one.stdout, /^edge gw-1: connected, last talked \d+s ago, sync lag 0; 0 pending, \d+ synced, 0 failed$/m, "one edge's line");
  t.match(one.stdout, /^service\s+calc\s+synced\s+\d+\s+\d+\s+\d+\s+-$/m, "its assets");
});

t.test("bad command lines exit 2; an API that cannot be asked exits 4", async (t) => {
  const cases: [string[], number, RegExp][] = [
    [[...fleet], 2, /developer token is required/],
    [["status", "--platform-url", platform.url, "--dev-token", s.devToken], 2, /--system-key is required/],
    [["status", "--platform-url", platform.url, "--system-key", "NOT-HEX", "--dev-token", "x"], 2, /--system-key must be a system key/],
    [["status", "--platform-url", "ftp://x", "--system-key", SK, "--dev-token", "x"], 2, /not an http/],
    [[...fleet, "--dev-token", s.devToken, "--bogus"], 2, /unknown flag --bogus/],
    [[...fleet, "--dev-token"], 2, /needs a value/],
    [[...fleet, "--dev-token", s.devToken, "--platform-ca", join(dir, "none.pem")], 2, /--platform-ca .*none\.pem/],
    [["status"], 2, /--platform-url and --system-key are required/],
    [[...fleet, "--dev-token", "not-a-token"], 4, /400/],
    [[...fleet, "--email", s.email, "--password", "wrong"], 4, /admin\/auth: 401/],
    [[...fleet, "--dev-token", s.devToken, "--edge", "no-such-edge"], 4, /404/],
    [["status", "--platform-url", `http://127.0.0.1:${await freePort()}`, "--system-key", SK, "--dev-token", s.devToken], 4, /cannot reach/],
  ];
  for (const [args, code, re] of cases) {
    const r = await status(args);
    t.equal(r.code, code, `${args.slice(1).join(" ")} -> ${code}`);
    t.match(r.stderr, re, "says why");
    t.notMatch(r.stderr, /\bat \S+:\d+:\d+/, "no stack trace");
  }
  const help = await status(["status", "--help"]);
  t.equal(help.code, 0);
  t.match(help.stdout, /Exit status: 0 all synced/);
});

const clash = uniq("clash");

t.test("a failed asset: exit 1, shown with its error; --failed and --edge narrow it", async (t) => {
  ok200(t, await s.dev.post("/admin/collectionmanagement", { name: clash, appID: SK }), "the platform's collection");
  const a = await request(edges["gw-1"]!.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  ok200(t, a, "developer on gw-1");
  const ed = new Client(edges["gw-1"]!.url, { "ClearBlade-DevToken": a.body.dev_token });
  const local = await ed.post("/admin/collectionmanagement", { name: clash, appID: SK });
  ok200(t, local, "a local collection of that name on gw-1");
  ok200(t, await s.dev.put(`/admin/edges/template/${SK}/gw-1`, { add: [{ def_module: "collection", def_name: clash, mode: "sync_to_edge" }] }), "gw-1's template names it");
  t.ok(await waitFor(async () => (await statusOf("gw-1")).some((x) => x.asset_name === clash && x.status === "failed")), "failed on the platform's status");

  const r = await status([...fleet, "--dev-token", s.devToken]);
  t.equal(r.code, 1, "exit 1");
  t.match(r.stdout, /^gw-1\s+yes\s.*\s2$/m, "gw-1 counts two failed: the collection, and its rows with it");
  t.match(r.stdout, new RegExp(`^EDGE\\s+TYPE\\s+NAME\\s+ATTEMPTS\\s+LAST ERROR\\ngw-1\\s+collection\\s+${clash}\\s+\\d+\\s+.*exists`, "m"), "the failed asset with its error");
  const failedOnly = await status([...fleet, "--dev-token", s.devToken, "--failed"]);
  t.equal(failedOnly.code, 1);
  t.notMatch(failedOnly.stdout, /^gw-2/m, "--failed: gw-2 is left out");
  const j = JSON.parse((await status([...fleet, "--dev-token", s.devToken, "--failed", "--json"])).stdout);
  t.same(j.edges.map((e: any) => e.name), ["gw-1"], "--failed --json: gw-1 only");
  t.same(j.edges[0].assets.map((x: any) => [x.asset_type, x.asset_name, x.status]), [["collection", clash, "failed"], ["collection_rows", clash, "failed"]], "with its failed assets");
  t.match(j.edges[0].assets[0].last_error, /exists/, "and the error");
  t.match(j.edges[0].assets[1].last_error, /^its collection failed to apply: .*exists/, "the rows' error is the collection's");
  const one = await status([...fleet, "--dev-token", s.devToken, "--edge", "gw-1", "--failed"]);
  t.equal(one.code, 1, "--edge gw-1: exit 1");
  t.match(one.stdout, new RegExp(`^collection\\s+${clash}\\s+failed\\s+\\d+\\s+0\\s+\\d+\\s+.*exists`, "m"), "the failed asset's row");
  t.notMatch(one.stdout, /^service\s+calc/m, "--failed leaves the synced ones out");
  t.equal((await status([...fleet, "--dev-token", s.devToken, "--edge", "gw-2"])).code, 0, "--edge gw-2: all synced, exit 0");
});

t.test("on the edge: its own link and assets, from its configuration", async (t) => {
  const e = edges["gw-1"]!;
  const env = { OUTPOST_MODE: "edge", OUTPOST_HTTP_PORT: String(e.httpPort), OUTPOST_HTTP_HOST: "127.0.0.1", OUTPOST_PLATFORM_URL: platform.url, OUTPOST_SYSTEM_KEY: SK, OUTPOST_EDGE_NAME: "gw-1", OUTPOST_EDGE_TOKEN: tokens["gw-1"]! };
  const r = await status(["status"], env);
  t.equal(r.code, 1, `no flags, the environment: exit 1 (a failed asset) (${r.stderr})`);
  t.match(r.stdout, new RegExp(`^edge gw-1 \\(system ${SK}\\)$`, "m"));
  t.match(r.stdout, /^platform http:\/\/127\.0\.0\.1:\d+: connected, last contact \d+s ago$/m, "the link");
  t.match(r.stdout, /^outbox \d+ waiting; \d+ synced, 1 failed$/m, "outbox and counts");
  t.match(r.stdout, new RegExp(`^collection\\s+${clash}\\s+failed\\s+.*exists`, "m"), "the failed asset with its error");
  t.match(r.stdout, /^service\s+calc\s+synced/m, "a synced one");
  const cfg = join(dir, "edge.json");
  writeFileSync(cfg, JSON.stringify({ mode: "edge", httpPort: e.httpPort, platformUrl: platform.url, systemKey: SK, edgeName: "gw-1", edgeToken: tokens["gw-1"] }));
  const f = await status(["status", "--config", cfg, "--json"]);
  t.equal(f.code, 1, "--config FILE: exit 1");
  const doc = JSON.parse(f.stdout);
  t.equal(doc.edge, "gw-1");
  t.equal(doc.connected, true);
  t.equal(typeof doc.outbox, "number");
  t.ok(doc.last_contact > 0 && doc.last_connected > 0, "last contact and connection times");
  t.same(doc.assets.filter((a: any) => a.status === "failed").map((a: any) => a.asset_name), [clash]);
  const flags = await status(["status", ...edgeArgs("gw-1"), "--http-port", String(e.httpPort), "--failed"]);
  t.equal(flags.code, 1, "the edge's own flags: exit 1");
  t.notMatch(flags.stdout, /^service\s+calc/m, "--failed: the failed one only");
  const wrongToken = await status(["status"], { ...env, OUTPOST_EDGE_TOKEN: "not-the-token" });
  t.equal(wrongToken.code, 4, "another token: refused by the edge, exit 4");
  const notEdge = await status(["status", "--mode", "platform"]);
  t.equal(notEdge.code, 2, "not an edge's configuration: exit 2");
});

t.test("GET /api/v/4/edge/status: who may read it", async (t) => {
  const e = edges["gw-1"]!;
  const path = "/api/v/4/edge/status";
  const byToken = await request(e.url, "GET", path, { headers: { "ClearBlade-DevToken": tokens["gw-1"]! } });
  ok200(t, byToken, "the edge's own token");
  t.equal(byToken.body.edge, "gw-1");
  t.equal(byToken.body.system_key, SK);
  t.equal(byToken.body.connected, true);
  t.ok(Array.isArray(byToken.body.assets), "assets");
  const a = await request(e.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  ok200(t, await request(e.url, "GET", path, { headers: { "ClearBlade-DevToken": a.body.dev_token } }), "the system's developer");
  isErr(t, await request(e.url, "GET", path), 401, 202, "no token");
  isErr(t, await request(e.url, "GET", path, { headers: { "ClearBlade-DevToken": "forged" } }), 400, 204, "an unknown token");
  isErr(t, await request(e.url, "GET", path, { headers: { "ClearBlade-DevToken": tokens["gw-2"]! } }), 400, 204, "another edge's token");
  t.ok(await waitFor(async () => (await request(e.url, "POST", "/api/v/1/user/auth", { headers: { "ClearBlade-SystemKey": SK, "ClearBlade-SystemSecret": s.systemSecret }, body: { email: user.email, password: user.password } })).status === 200), "the user synced to the edge");
  const ua = await request(e.url, "POST", "/api/v/1/user/auth", { headers: { "ClearBlade-SystemKey": SK, "ClearBlade-SystemSecret": s.systemSecret }, body: { email: user.email, password: user.password } });
  isErr(t, await request(e.url, "GET", path, { headers: { "ClearBlade-UserToken": ua.body.user_token } }), 401, 205, "a user of the system");
  isErr(t, await request(platform.url, "GET", path, { headers: { "ClearBlade-DevToken": s.devToken } }), 404, 103, "a platform has no such route");
  const pre = await request(e.url, "OPTIONS", path, { headers: { origin: "http://app.example.com", "access-control-request-method": "GET", "access-control-request-headers": "clearblade-devtoken" } });
  t.equal(pre.status, 204, "a CORS preflight on the edge");
});

t.test("an unreachable edge exits 3; an unreachable platform 4, and 3 on the edge", async (t) => {
  await edges["gw-2"]!.kill();
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/edges/${SK}/gw-2`)).body?.isConnected === false, 30_000), "the platform sees gw-2 gone");
  const r = await status([...fleet, "--dev-token", s.devToken]);
  t.equal(r.code, 3, "exit 3");
  t.match(r.stdout, /^gw-2\s+NO\s/m, "gw-2 shown as not connected");
  const one = await status([...fleet, "--dev-token", s.devToken, "--edge", "gw-2"]);
  t.equal(one.code, 3, "--edge gw-2: exit 3");
  t.match(one.stdout, /^edge gw-2: UNREACHABLE/m);
  t.equal((await status([...fleet, "--dev-token", s.devToken, "--edge", "gw-1"])).code, 1, "--edge gw-1: still 1");

  await platform.kill();
  t.equal((await status([...fleet, "--dev-token", s.devToken])).code, 4, "the platform down: exit 4");
  const e = edges["gw-1"]!;
  t.ok(await waitFor(async () => (await request(e.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": tokens["gw-1"]! } })).body?.connected === false, 30_000), "the edge sees its platform gone");
  const local = await status(["status", ...edgeArgs("gw-1"), "--http-port", String(e.httpPort)]);
  t.equal(local.code, 3, "on the edge: exit 3");
  t.match(local.stdout, /: UNREACHABLE, last contact \d+s ago$/m, "the link down, with the last contact");
});
