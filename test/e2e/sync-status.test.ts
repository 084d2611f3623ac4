// Status that tells the truth, black-box: code that does not compile is refused at upload with its
// line and column; a service that reaches an edge another way (written into the platform's
// database, as an older platform would send it) is failed on the edge with its message, never
// synced; the rows of a collection that failed inherit its failure; versions are per asset and go
// up by one per change; template entries naming unknown kinds, assets or topic filters are
// refused; an entry of an edge's named template can be removed (what the console's Remove calls),
// and every asset says which entry, of the edge or of its named template, brings it.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { pgUrlFor } from "../pgdb.ts";
import { Client, devWithSystem, isErr, must, ok200, type Outpost, pgDatabaseOf, request, startOutpost, TEST_DB, uniq, waitFor } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-sync-status-"));
const templates = join(dir, "templates");
mkdirSync(templates);
writeFileSync(join(templates, "plant.json"), JSON.stringify({ assets: [
  { def_module: "service", def_name: "*", mode: "sync_to_edge" },
  { def_module: "library", def_name: "*", mode: "sync_to_edge" },
] }));
writeFileSync(join(templates, "typo.json"), JSON.stringify({ assets: [{ def_module: "servcie", def_name: "*", mode: "sync_to_edge" }] }));
writeFileSync(join(templates, "broken.json"), "{ not json");

const procs: Outpost[] = [];
t.teardown(async () => {
  for (const p of procs.reverse()) await p.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

const platform = await startOutpost({ args: ["--edge-templates-dir", templates, "--log-level", "info"] });
procs.push(platform);
const s = await devWithSystem(platform, "status-truth");
const SK = s.systemKey;
const svcPath = (name: string) => `/admin/code/v/1/${SK}/${name}`;
const libPath = (name: string) => `/codeadmin/v/2/library/${SK}/${name}`;
const tplPath = (edge: string) => `/admin/edges/template/${SK}/${edge}`;
const statusOf = async (edge: string) => (await must(s.dev.get(`/admin/${SK}/sync/edge/status/${edge}`), "status")) as any[];
const assetOf = async (edge: string, type: string, name: string) => (await statusOf(edge)).find((a) => a.asset_type === type && a.asset_name === name);

async function newEdge(name: string, body: Record<string, unknown> = {}) {
  const token = `${name}-token-123`;
  await must(s.dev.post(`/admin/edges/${SK}/${name}`, { token, ...body }), `edge ${name}`);
  return token;
}
async function startEdge(name: string, token: string) {
  const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", name, "--edge-token", token, "--sync-ping-ms", "1000"] });
  procs.push(e);
  return e;
}
const localStatus = async (e: Outpost, token: string) => (await request(e.url, "GET", "/api/v/4/edge/status", { headers: { "ClearBlade-DevToken": token } })).body;

/** Runs SQL on the platform's own database, behind its back (as a database restored by hand, or
 *  written by a version that did not check, leaves it). */
function rawSql(o: Outpost, sql: string) {
  if (TEST_DB === "postgres") execFileSync("psql", [pgUrlFor(pgDatabaseOf(o.dataDir)), "-v", "ON_ERROR_STOP=1", "-c", sql], { stdio: "pipe" });
  else execFileSync("sqlite3", [join(o.dataDir, "outpost.db"), ".timeout 10000", sql], { stdio: "pipe" });
}

t.test("code that does not compile is refused at upload, with its line and column", async (t) => {
  const svc = uniq("calc");
  const bad = await s.dev.post(svcPath(svc), { code: `function ${svc}(req, resp) {\n  var x = 1;\n  resp.success(x +);\n}`, parameters: [] });
  isErr(t, bad, 400, 111, "a service with a syntax error");
  t.match(bad.body.error.detail, `service '${svc}' does not compile: SyntaxError: unexpected token in expression: ')' (line 3, column 19)`, bad.body.error.detail);
  t.same(bad.body.error.lowLevelError, { error: "SyntaxError: unexpected token in expression: ')'", line: 3, column: 19 }, "line and column as fields");
  t.equal((await s.dev.get(svcPath(svc))).status, 404, "nothing stored");

  // what QuickJS runs is accepted: ES2020 and later syntax
  const modern = `function ${svc}(req, resp) {
    class A { #p = 1; static s = 2; get p() { return this.#p; } }
    const o = { a: { b: null } }, n = o.a?.b ?? 10n ** 2n;
    let x = 0; x ||= 1; x &&= 2; x ??= 3;
    const { a, ...rest } = { a: 1, b: 2 };
    async function* gen() { for await (const v of [1]) yield v; }
    resp.success([new A().p, String(n), x, rest.b, /(?<y>\\d{4})/u.exec("2024").groups.y, 1_000]);
  }`;
  ok200(t, await s.dev.post(svcPath(svc), { code: modern, parameters: [] }), "modern syntax compiles");
  t.same((await s.dev.post(`/api/v/1/code/${SK}/${svc}`, {})).body, { success: true, results: [1, "100", 2, 2, "2024", 1000] }, "and runs as compiled");

  // an update that does not compile keeps the service as it was
  const up = await s.dev.put(svcPath(svc), { code: `function ${svc}(req, resp) { resp.success(1) }}` });
  isErr(t, up, 400, 111, "an update with a syntax error");
  t.match(up.body.error.detail, /\(line 1, column \d+\)/, up.body.error.detail);
  t.equal((await s.dev.get(svcPath(svc))).body.code, modern, "the stored code did not change");
  // what QuickJS refuses though a JavaScript function body would take it: a return outside a function
  isErr(t, await s.dev.put(svcPath(svc), { code: "return 5" }), 400, 111, "a top-level return");
  isErr(t, await s.dev.put(svcPath(svc), { code: "let a = 1;\nlet a = 2;" }), 400, 111, "a redeclared let (an early error)");
  isErr(t, await s.dev.put(svcPath(svc), { code: `${"(".repeat(50_000)}1${")".repeat(50_000)}` }), 400, 111, "code nested too deeply to compile");
  ok200(t, await s.dev.put(svcPath(svc), { code: `function ${svc}(req, resp) { resp.success("again"); }` }), "the checker works on after that");

  // libraries too
  const lib = uniq("lib");
  const lb = await s.dev.post(libPath(lib), { code: "var helper = function( { return 1; };" });
  isErr(t, lb, 400, 111, "a library with a syntax error");
  t.match(lb.body.error.detail, `library '${lib}' does not compile: SyntaxError`, lb.body.error.detail);
  ok200(t, await s.dev.post(libPath(lib), { code: "var helper = function() { return 1; };" }), "a library that compiles");
  isErr(t, await s.dev.put(libPath(lib), { code: "var helper = ;" }), 400, 111, "a library update that does not compile");
  t.match((await s.dev.get(libPath(lib))).body.code, /return 1/, "the library did not change");
});

t.test("a service that arrives at an edge without compiling is failed there, with its message", async (t) => {
  const good = uniq("good"), broken = uniq("broken");
  ok200(t, await s.dev.post(svcPath(good), { code: `function ${good}(req, resp) { resp.success(1); }`, parameters: [] }));
  ok200(t, await s.dev.post(svcPath(broken), { code: `function ${broken}(req, resp) { resp.success(2); }`, parameters: [] }));
  // the platform's database now holds code an upload would have refused
  rawSql(platform, `UPDATE services SET code = 'function ${broken}(req, resp) {\n  resp.success( }' WHERE system_key = '${SK}' AND name = '${broken}'`);
  const edge = uniq("gw"), token = await newEdge(edge);
  ok200(t, await s.dev.put(tplPath(edge), { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }] }));
  const e = await startEdge(edge, token);
  t.ok(await waitFor(async () => (await assetOf(edge, "service", broken))?.status === "failed", 30_000), "the platform shows it failed on the edge");
  const a = await assetOf(edge, "service", broken);
  t.match(a.last_error, `service '${broken}' does not compile: SyntaxError: unexpected token in expression: '}' (line 2, column 17)`, a.last_error);
  t.equal((await assetOf(edge, "service", good))?.status, "synced", "the good one is synced");
  const local = await localStatus(e, token);
  const mine = local.assets.find((x: any) => x.asset_name === broken);
  t.match(mine, { asset_type: "service", status: "failed", last_error: /does not compile: SyntaxError.*\(line 2, column 17\)/ }, "the edge's own status says failed, with the message");
  t.equal(local.assets.find((x: any) => x.asset_name === good)?.status, "synced");

  // put right on the platform: it compiles, reaches the edge and is synced
  ok200(t, await s.dev.put(svcPath(broken), { code: `function ${broken}(req, resp) { resp.success(3); }` }), "fixed");
  t.ok(await waitFor(async () => (await assetOf(edge, "service", broken))?.status === "synced", 30_000), "synced once it compiles");
  t.ok(await waitFor(async () => !(await localStatus(e, token)).assets.some((x: any) => x.status === "failed"), 10_000), "and the edge's own status shows nothing failed");
});

t.test("versions are per asset and go up by one per change; the rows of a failed collection fail with it", async (t) => {
  // a system of its own, with a service and a collection holding rows before its first edge
  const v = await devWithSystem(platform, "versions");
  const VK = v.systemKey;
  const vsvc = (name: string) => `/admin/code/v/1/${VK}/${name}`;
  const early = uniq("early");
  ok200(t, await v.dev.post(vsvc(early), { code: `function ${early}(req, resp) { resp.success(0); }`, parameters: [] }), "a service made before the edge");
  const col = uniq("readings");
  const colId = (await must(v.dev.post("/admin/collectionmanagement", { name: col, appID: VK }), "collection")).collectionID as string;
  await must(v.dev.put("/admin/collectionmanagement", { id: colId, addColumn: { name: "v", type: "int" } }), "column");
  await must(v.dev.post(`/api/v/1/data/${colId}`, { v: 0 }), "a row before the edge");
  const edge = uniq("gw"), token = `${edge}-token-123`;
  await must(v.dev.post(`/admin/edges/${VK}/${edge}`, { token }), "edge");
  const fresh = uniq("fresh");
  const freshId = (await must(v.dev.post("/admin/collectionmanagement", { name: fresh, appID: VK }), "a collection made after the edge")).collectionID as string;
  const svc = uniq("counted");
  ok200(t, await v.dev.post(vsvc(svc), { code: `function ${svc}(req, resp) { resp.success(1); }`, parameters: [] }));
  for (const n of [2, 3]) ok200(t, await v.dev.put(vsvc(svc), { code: `function ${svc}(req, resp) { resp.success(${n}); }` }));
  ok200(t, await v.dev.put(`/admin/edges/template/${VK}/${edge}`, { add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }, { def_module: "collection", def_name: "*", mode: "sync_to_edge", rows: true }] }));
  // one write of two rows is one change of the collection's rows, a second write another
  await must(v.dev.post(`/api/v/1/data/${colId}`, [{ v: 1 }, { v: 2 }]), "rows");
  await must(v.dev.post(`/api/v/1/data/${colId}`, { v: 3 }), "a row");
  const e = await startOutpost({ args: ["--mode", "edge", "--platform-url", platform.url, "--system-key", VK, "--edge-name", edge, "--edge-token", token, "--sync-ping-ms", "1000"] });
  procs.push(e);
  const status = async () => (await must(v.dev.get(`/admin/${VK}/sync/edge/status/${edge}`), "status")) as any[];
  const asset = async (type: string, name: string) => (await status()).find((a) => a.asset_type === type && a.asset_name === name);
  t.ok(await waitFor(async () => (await status()).every((a) => a.status === "synced"), 30_000), "synced");
  t.match(await asset("service", early), { desired_version: 1, applied_version: 1 }, "made before the system's first edge, unchanged: version 1");
  t.match(await asset("service", svc), { desired_version: 3, applied_version: 3 }, "made and changed twice: version 3");
  t.match(await asset("collection_rows", col), { desired_version: 3, applied_version: 3 }, "rows: as at the first edge, and two writes");
  t.match(await asset("collection_rows", fresh), { desired_version: 0, applied_version: 0 }, "rows never written: 0");
  await must(v.dev.post(`/api/v/1/data/${freshId}`, {}), "a first row");
  ok200(t, await v.dev.put(vsvc(svc), { code: `function ${svc}(req, resp) { resp.success(4); }` }));
  t.ok(await waitFor(async () => (await asset("service", svc))?.applied_version === 4 && (await asset("collection_rows", fresh))?.applied_version === 1, 20_000), "one more change each: applied");
  t.equal((await asset("service", early)).desired_version, 1, "the others did not move");
  t.equal((await asset("collection_rows", col)).desired_version, 3);

  // a collection that fails to apply (a local collection of its name on the edge) fails its rows
  // too, whichever way they flow
  const signIn = await request(e.url, "POST", "/admin/auth", { body: { email: v.email, password: v.password } });
  ok200(t, signIn, "the developer signs in on the edge");
  const onEdge = new Client(e.url, { "ClearBlade-DevToken": signIn.body.dev_token });
  for (const mode of ["sync_to_edge", "sync_to_platform"]) {
    const clash = uniq("clash");
    ok200(t, await onEdge.post("/admin/collectionmanagement", { name: clash, appID: VK }), `${mode}: a collection made on the edge`);
    const clashId = (await must(v.dev.post("/admin/collectionmanagement", { name: clash, appID: VK }), "clash")).collectionID as string;
    await must(v.dev.put("/admin/collectionmanagement", { id: clashId, addColumn: { name: "v", type: "int" } }), "column");
    await must(v.dev.post(`/api/v/1/data/${clashId}`, { v: 1 }), "a row");
    ok200(t, await v.dev.put(`/admin/edges/template/${VK}/${edge}`, { add: [{ def_module: "collection", def_name: clash, mode, rows: true }] }), `${mode}: a platform collection of that name in the template`);
    t.ok(await waitFor(async () => (await asset("collection", clash))?.status === "failed", 30_000), `${mode}: the collection fails`);
    const rows = await asset("collection_rows", clash);
    t.equal(rows.status, "failed", `${mode}: its rows are failed, not synced`);
    t.match(rows.last_error, /^its collection failed to apply: .*(exists|clash)/, rows.last_error);
  }
});

t.test("template entries are checked: unknown kinds, assets and topic filters are refused, * is taken", async (t) => {
  const calc = uniq("calc");
  ok200(t, await s.dev.post(svcPath(calc), { code: `function ${calc}(req, resp) { resp.success(1); }`, parameters: [] }));
  const edge = uniq("gw");
  await newEdge(edge);
  const put = (body: unknown) => s.dev.put(tplPath(edge), body);
  const refused = async (body: unknown, detail: RegExp, what: string) => {
    const r = await put(body);
    isErr(t, r, 400, 111, what);
    t.match(r.body?.error?.detail, detail, `${what}: ${r.body?.error?.detail}`);
  };
  await refused({ add: [{ def_module: "servcie", def_name: "*", mode: "sync_to_edge" }] }, /add\[0\]\.def_module must be one of service, library/, "an unknown kind");
  await refused({ add: [{ def_module: "service", def_name: calc.slice(0, -1) + "x", mode: "sync_to_edge" }] }, new RegExp(`add\\[0\\]: this system has no service '${calc.slice(0, -1)}x' \\(did you mean '${calc}'\\?\\)`), "a misspelled service");
  await refused({ add: [{ def_module: "collection", def_name: "nothing-like-it", mode: "sync" }] }, /this system has no collection 'nothing-like-it': name one it has, or \* for every collection/, "an unknown collection");
  await refused({ add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }, { def_module: "user", def_name: "nobody@example.com", mode: "sync_to_edge" }] }, /add\[1\]: this system has no user/, "an unknown user, after a good entry");
  await refused({ add: [{ def_module: "topic", def_name: "a/#/b", mode: "sync_to_platform" }] }, /not a topic filter: # must be a whole level and the last one/, "a bad topic filter");
  await refused({ add: [{ def_module: "topic", def_name: "a/b+", mode: "sync_to_platform" }] }, /\+ must be a whole level/, "a bad + in a topic filter");
  await refused({ add: [{ def_module: "service", def_name: "*", mode: "sideways" }] }, /mode must be one of/, "an unknown mode");
  await refused({ remove: [{ def_module: "servcie", def_name: "*" }] }, /remove\[0\]\.def_module must be one of/, "removing an unknown kind");
  await refused({ remove: [{ def_module: "service", def_name: calc }] }, new RegExp(`remove\\[0\\]: the template of edge '${edge}' has no entry service '${calc}'`), "removing an entry the template does not have");
  t.same((await must(s.dev.get(`/admin/edges/template/${SK}`), "templates"))[edge], [], "nothing of those was kept");
  const ok = await put({ add: [{ def_module: "service", def_name: "*", mode: "sync_to_edge" }, { def_module: "service", def_name: calc, mode: "deploy" }, { def_module: "topic", def_name: "plant/+/temp/#", mode: "sync_to_platform" }] });
  ok200(t, ok, "a wildcard, an existing service and a topic filter");
  t.same(ok.body[edge].map((e: any) => [e.def_module, e.def_name, e.source]), [["service", "*", "edge"], ["service", calc, "edge"], ["topic", "plant/+/temp/#", "edge"]], "each entry says it is the edge's own");

  // named templates: one that does not exist or cannot be read is refused with why
  const rec = (body: unknown) => s.dev.put(`/admin/edges/${SK}/${edge}`, body);
  isErr(t, await rec({ template: "nope" }), 400, 111, "a named template that does not exist");
  t.match((await rec({ template: "nope" })).body.error.detail, /template 'nope' does not exist in /);
  t.match((await rec({ template: "typo" })).body.error.detail, /template 'typo': assets\[0\]\.def_module must be one of service/, "a named template with an unknown kind says which entry");
  t.match((await rec({ template: "broken" })).body.error.detail, /template 'broken' .* is not JSON/, "a named template that is not JSON");
  t.match(platform.logs(), /"msg":"a named edge template cannot be used".*"problem":"template 'broken'/, "the platform said so at start too");
});

t.test("an edge's named template: shown, every asset's source, and an entry of it removed (the console's Remove)", async (t) => {
  const svc = uniq("svc");
  ok200(t, await s.dev.post(svcPath(svc), { code: `function ${svc}(req, resp) { resp.success(1); }`, parameters: [] }));
  const lib = uniq("lib");
  ok200(t, await s.dev.post(libPath(lib), { code: "var x = 1;" }));
  const edge = uniq("gw"), token = await newEdge(edge, { template: "plant" });
  t.equal((await must(s.dev.get(`/admin/edges/${SK}/${edge}`), "record")).template, "plant", "the record names its template");
  const tpl = async () => (await must(s.dev.get(`/admin/edges/template/${SK}`), "templates"))[edge] as any[];
  t.same((await tpl()).map((e) => [e.def_module, e.def_name, e.source]), [["service", "*", "template:plant"], ["library", "*", "template:plant"]], "entries of the named template say so");
  const e = await startEdge(edge, token);
  t.ok(await waitFor(async () => (await assetOf(edge, "library", lib))?.status === "synced", 30_000), "synced");
  t.match(await assetOf(edge, "service", svc), { source: "template:plant", entry: "service/*" }, "an asset names the entry that brings it");
  const local = await localStatus(e, token);
  t.equal(local.template, "plant", "the edge's own status names its template");
  t.match(local.assets.find((a: any) => a.asset_name === lib), { source: "template:plant", entry: "library/*" }, "and each asset's source");

  // the console's Remove: PUT {remove} of an entry that comes from the named template
  const r = await s.dev.put(tplPath(edge), { remove: [{ def_module: "library", def_name: "*" }] });
  ok200(t, r, "removed");
  t.same(r.body[edge].map((x: any) => `${x.def_module}/${x.def_name}`), ["service/*"], "the answer no longer has it");
  t.same((await tpl()).map((x) => `${x.def_module}/${x.def_name}`), ["service/*"], "nor does the template read again");
  t.equal((await must(s.dev.get(`/admin/edges/${SK}/${edge}`), "record")).template, "plant", "the edge keeps its named template");
  t.ok(await waitFor(async () => !(await localStatus(e, token)).assets.some((a: any) => a.asset_name === lib), 20_000), "the library leaves the edge");
  // an entry of the edge's own over a named one: Remove takes the entry away, not only the override
  ok200(t, await s.dev.put(tplPath(edge), { add: [{ def_module: "service", def_name: "*", mode: "deploy" }] }), "the edge's own entry over the named one");
  t.match((await tpl()).find((x) => x.def_name === "*" && x.def_module === "service"), { mode: "deploy", source: "edge" });
  ok200(t, await s.dev.put(tplPath(edge), { remove: [{ def_module: "service", def_name: "*" }] }));
  t.same(await tpl(), [], "removed: neither the override nor the named entry under it");
  // added back, it is the edge's own
  ok200(t, await s.dev.put(tplPath(edge), { add: [{ def_module: "library", def_name: "*", mode: "sync_to_edge" }] }));
  t.same((await tpl()).map((x) => [x.def_module, x.source]), [["library", "edge"]], "an entry added back is the edge's own");
});
