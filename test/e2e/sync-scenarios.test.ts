// Edge sync in the situations a fleet meets every week, black-box: a platform and edges (processes
// of the binary), each edge reaching the platform through a TCP proxy the test controls (cut, black
// hole, latency, bytes counted). Each situation ends with the edge holding exactly its template:
// rows identical row for row, nothing outside the template, services at their current version;
// and while it converges, the platform's status never says synced when the edge is behind.
//   1. a template changed while the edge is offline
//   2. an edge deleted and created again under its name, with another template
//   3. an edge killed in the middle of a snapshot that follows a template change
//   4. a link that goes silent (black hole) or is cut, and heals
//   5. an edge whose clock is 5 minutes slow, 5 minutes fast, or further ahead than accepted
//      (faketime)
//   6. an up-to-date edge reconnecting after the log was compacted, and after a platform restart
// OUTPOST_SYNC_ROWS sets the size of the big collections (6,000 by default).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { Client, type DevSystem, devWithSystem, dropTestDb, freePort, NodeProcess, needs, qs, request, sleep, uniq, waitFor, must } from "./harness.ts";
import { type TcpProxy, tcpProxy } from "./tcp-proxy.ts";

const ROWS = Number(process.env.OUTPOST_SYNC_ROWS ?? 6_000);
/** the edges' ping period: a silent link is dropped after two */
const PING_MS = 2_000;
/** accepted skew of edge clocks on this platform (seconds) */
const MAX_SKEW_S = 600;

// ---- processes --------------------------------------------------------------------------------

const dirs: string[] = [];
const newDir = () => { const d = mkdtempSync(join(tmpdir(), "outpost-scenario-")); dirs.push(d); return d; };

/** A process of the binary on a fixed HTTP port and data directory, started again as often as a
 *  test wants; `env` may shift its clock (libfaketime). */
/** A process of this test, in a data directory it removes when done. */
class Proc extends NodeProcess {
  constructor(name: string, port: number, args: () => string[], env: Record<string, string> = {}) { super(name, port, newDir(), args, env); }
}
const procs: Proc[] = [];
const proxies: TcpProxy[] = [];
t.teardown(async () => {
  // OUTPOST_SYNC_LOGS=DIR keeps every process's log there
  if (process.env.OUTPOST_SYNC_LOGS) for (const p of procs) writeFileSync(join(process.env.OUTPOST_SYNC_LOGS, `${p.name}.log`), p.logs());
  for (const p of procs) await p.kill();
  for (const x of proxies) await x.close();
  for (const d of dirs) { rmSync(d, { recursive: true, force: true }); await dropTestDb(d); }
});

/** libfaketime (Debian's faketime package), preloaded into an edge to shift its wall clock: the
 *  multi-threaded variant, loaded straight (the faketime command forks, so a kill would miss the
 *  edge); the monotonic clock, which timers use, is left alone. */
const FAKETIME_LIB = ["x86_64-linux-gnu", "aarch64-linux-gnu", ""].map((d) => join("/usr/lib", d, "faketime/libfaketimeMT.so.1")).find((p) => existsSync(p));
const shiftedClock = (offset: string): Record<string, string> => ({ LD_PRELOAD: FAKETIME_LIB!, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: "1", FAKETIME_NO_CACHE: "1" });

const platform = new Proc("platform", await freePort(), () => ["--log-level", "debug", "--sync-compact-ms", "1000", "--max-clock-skew", String(MAX_SKEW_S)]);
procs.push(platform);
await platform.start();

// ---- helpers ----------------------------------------------------------------------------------

interface Entry { def_module: string; def_name: string; mode?: string; rows?: boolean }
type Row = Record<string, unknown> & { item_id: string };

/** A collection with a label and a number column, and `n` rows on the platform. */
async function collection(sys: DevSystem, prefix: string, n: number) {
  const name = uniq(prefix);
  const id = (await must(sys.dev.post("/admin/collectionmanagement", { name, appID: sys.systemKey }), "collection")).collectionID as string;
  for (const [col, type] of [["label", "string"], ["n", "int"]]) await must(sys.dev.put("/admin/collectionmanagement", { id, addColumn: { name: col, type } }), "column");
  for (let i = 0; i < n; i += 1_000) await must(sys.dev.post(`/api/v/1/data/${id}`, Array.from({ length: Math.min(1_000, n - i) }, (_, k) => ({ label: `${name}-${i + k}`, n: i + k }))), "rows");
  return { name, id };
}

/** A service answering its version. */
async function service(sys: DevSystem, prefix: string, version: number, name = uniq(prefix)) {
  const code = `function ${name}(req, resp) { resp.success({ version: ${version} }); }`;
  const r = await sys.dev.get(`/api/v/1/code/${sys.systemKey}/${name}`);
  if (r.status === 200) await must(sys.dev.put(`/admin/code/v/1/${sys.systemKey}/${name}`, { code }), "service update");
  else await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${name}`, { code, parameters: [] }), "service");
  return name;
}

async function rows(c: Client, id: string): Promise<Row[] | null> {
  const r = await c.get(`/api/v/1/data/${id}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
  if (r.status !== 200) return null; // not there (yet)
  return (r.body.DATA as Row[]).sort((a, b) => a.item_id.localeCompare(b.item_id));
}
const same = (a: Row[] | null, b: Row[] | null) => a !== null && b !== null && JSON.stringify(a) === JSON.stringify(b);
async function count(c: Client, id: string): Promise<number> {
  const r = await c.get(`/api/v/1/data/${id}/count`);
  return r.status === 200 ? r.body.count : 0;
}
async function collectionNames(c: Client, sk: string): Promise<string[]> {
  return ((await must(c.get(`/admin/allcollections?appid=${sk}`), "collections")) as { name: string }[]).map((x) => x.name);
}

interface Asset { asset_type: string; asset_name: string; status: string; last_error: string }
const statusOf = async (sys: DevSystem, edge: string): Promise<Asset[]> => must(sys.dev.get(`/admin/${sys.systemKey}/sync/edge/status/${edge}`), "status");
const edgeRecord = async (sys: DevSystem, edge: string) => must(sys.dev.get(`/admin/edges/${sys.systemKey}/${edge}`), "edge record");

/** An edge record with a template, and its process reaching the platform through a proxy. */
async function newEdge(sys: DevSystem, template: Entry[], opts: { env?: Record<string, string>; args?: string[] } = {}) {
  const name = uniq("edge"), token = `${name}-token`;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${name}`, { token }), "edge");
  if (template.length) await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${name}`, { add: template }), "template");
  const proxy = await tcpProxy(platform.port);
  proxies.push(proxy);
  const node = new Proc(name, await freePort(), () => ["--mode", "edge", "--platform-url", proxy.url, "--system-key", sys.systemKey, "--edge-name", name,
    "--edge-token", token, "--sync-ping-ms", String(PING_MS), "--log-level", "debug", ...(opts.args ?? [])], opts.env);
  procs.push(node);
  let dev: Client | null = null;
  return {
    name, token, proxy, node,
    /** the system's developer signed in on the edge (the edge asks the platform the first time) */
    async dev(): Promise<Client> {
      if (dev) return dev;
      const ok = await waitFor(async () => {
        const a = await request(node.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
        if (a.status === 200) dev = new Client(node.url, { "ClearBlade-DevToken": a.body.dev_token });
        return a.status === 200;
      }, 20_000);
      if (!ok) throw new Error(`the developer cannot sign in on ${name}`);
      return dev!;
    },
  };
}
type Edge = Awaited<ReturnType<typeof newEdge>>;

/** Waits for the edge to converge while checking, at every look, that the platform's status does
 *  not say synced while the edge is behind. `behind` names what the edge still lacks ("" : none). */
async function converge(t: Test, sys: DevSystem, edge: Edge, behind: () => Promise<string>, ms = 60_000) {
  let lie = "", last = "", looks = 0;
  const done = await waitFor(async () => {
    looks++;
    const st = await statusOf(sys, edge.name);
    const synced = st.length > 0 && st.every((a) => a.status === "synced");
    last = await behind();
    if (synced && last && !lie) lie = `status says synced while the edge lacks: ${last}`;
    return synced && !last;
  }, ms, 100);
  t.equal(lie, "", `the status never said synced while the edge was behind (${looks} looks)`);
  t.ok(done, `the edge converges: every asset synced and nothing missing${done ? "" : ` (still: ${last || JSON.stringify((await statusOf(sys, edge.name)).filter((a) => a.status !== "synced"))}; ${await whyNot(sys, edge)})`}`);
}

/** What a failed convergence shows of the edge: its record on the platform, its own view, and
 *  the two processes' warnings (a CI run keeps only what the test prints). */
async function whyNot(sys: DevSystem, edge: Edge) {
  const rec = await sys.dev.get(`/admin/edges/${sys.systemKey}/${edge.name}`);
  const own = await request(edge.node.url, "GET", "/api/about").catch(() => null);
  const warnings = (p: Proc) => p.logs().split("\n").filter((l) => /"level":"(warn|error)"|\b(WARN|ERROR)\b/.test(l)).slice(-8).join("\n");
  return `record: ${JSON.stringify(rec.body)}; edge /api/about: ${own?.status}; platform warnings:\n${warnings(platform)}\nedge warnings:\n${warnings(edge.node)}`;
}

/** What an edge lacks of collections (rows identical), services (at a version), and what it must
 *  not hold (collections, services, triggers outside its template). */
function lacks(sys: DevSystem, edge: Edge, want: { collections?: { id: string; name: string }[]; services?: [string, number][]; absent?: { collections?: string[]; services?: string[]; triggers?: string[] } }) {
  return async () => {
    const c = await edge.dev();
    const out: string[] = [];
    for (const col of want.collections ?? []) {
      const [p, e] = await Promise.all([rows(sys.dev, col.id), rows(c, col.id)]);
      if (!same(p, e)) out.push(`${col.name} (${e?.length ?? "no"} of ${p?.length} rows, or different)`);
    }
    for (const [svc, version] of want.services ?? []) {
      const r = await c.post(`/api/v/1/code/${sys.systemKey}/${svc}`, {});
      if (r.status !== 200 || r.body?.results?.version !== version) out.push(`service ${svc} v${version} (${r.status} ${JSON.stringify(r.body?.results ?? r.body?.error?.message)})`);
    }
    const names = await collectionNames(c, sys.systemKey);
    for (const col of want.absent?.collections ?? []) if (names.includes(col)) out.push(`collection ${col} should be gone`);
    for (const svc of want.absent?.services ?? []) if ((await c.get(`/api/v/1/code/${sys.systemKey}/${svc}`)).status !== 404) out.push(`service ${svc} should be gone`);
    for (const tr of want.absent?.triggers ?? []) if ((await c.get(`/admin/triggers/handlers/${sys.systemKey}/${tr}`)).status !== 404) out.push(`trigger ${tr} should be gone`);
    return out.join("; ");
  };
}

// ---- 1 ----------------------------------------------------------------------------------------

t.test("1. a template changed while the edge is offline is applied when it comes back", async (t) => {
  const sys = await devWithSystem(platform, "offline-template");
  const a = await collection(sys, "a", 20);
  const log = await collection(sys, "log", 0);
  const s1 = await service(sys, "s1", 1);
  // a trigger: every insert into a writes a row into log (on whichever node it runs)
  const recorder = uniq("rec");
  await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${recorder}`, { code: `function ${recorder}(req, resp) { ClearBlade.Collection({ collectionName: "${log.name}" }).create({ label: "fired" }, function (err, d) { if (err) resp.error(d); else resp.success("ok"); }); }`, parameters: [] }), "recorder");
  const trigger = uniq("trig");
  await must(sys.dev.post(`/admin/triggers/handlers/${sys.systemKey}/${trigger}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: a.name }, service_name: recorder }), "trigger");
  // a probe trigger that stays: every insert into probe writes a "probe" row into log
  const probe = await collection(sys, "probe", 0);
  const prober = uniq("prober");
  await must(sys.dev.post(`/admin/code/v/1/${sys.systemKey}/${prober}`, { code: `function ${prober}(req, resp) { ClearBlade.Collection({ collectionName: "${log.name}" }).create({ label: "probe" }, function (err, d) { if (err) resp.error(d); else resp.success("ok"); }); }`, parameters: [] }), "prober");
  const probeTrigger = uniq("ptrig");
  await must(sys.dev.post(`/admin/triggers/handlers/${sys.systemKey}/${probeTrigger}`, { def_module: "Data", def_name: "ItemCreated", key_value_pairs: { collectionName: probe.name }, service_name: prober }), "probe trigger");
  const edge = await newEdge(sys, [
    { def_module: "collection", def_name: a.name, mode: "sync_to_edge" }, { def_module: "collection", def_name: log.name, mode: "sync_to_edge", rows: false },
    { def_module: "service", def_name: s1 }, { def_module: "service", def_name: recorder }, { def_module: "trigger", def_name: trigger },
    { def_module: "collection", def_name: probe.name, mode: "sync_to_edge", rows: false }, { def_module: "service", def_name: prober }, { def_module: "trigger", def_name: probeTrigger },
  ]);
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a], services: [[s1, 1]] }));
  const ed = await edge.dev();
  t.ok((await ed.get(`/admin/triggers/handlers/${sys.systemKey}/${trigger}`)).status === 200, "the trigger is on the edge");

  await edge.node.kill();
  // offline: two collections and a service added, the trigger removed, a service changed
  const b = await collection(sys, "b", 300), c = await collection(sys, "c", 500);
  const s2 = await service(sys, "s2", 1);
  await service(sys, "s1", 2, s1);
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge.name}`, { add: [
    { def_module: "collection", def_name: b.name, mode: "sync_to_edge" }, { def_module: "collection", def_name: c.name, mode: "sync" }, { def_module: "service", def_name: s2 },
  ], remove: [{ def_module: "trigger", def_name: trigger }] }), "template change");
  const st = await statusOf(sys, edge.name);
  const pending = (type: string, name: string) => st.find((x) => x.asset_type === type && x.asset_name === name)?.status;
  t.same([pending("collection", b.name), pending("collection_rows", b.name), pending("collection_rows", c.name), pending("service", s2), pending("service", s1)],
    ["pending", "pending", "pending", "pending", "pending"], "while the edge is offline, what it lacks is pending");

  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a, b, c], services: [[s1, 2], [s2, 1]], absent: { triggers: [trigger] } }));
  // the removed trigger does not run: an insert into a on the edge records nothing. Events are
  // dispatched in order, so once the probe trigger's run for a later insert is recorded, the
  // insert into a was matched, and a run it started was started before the probe's
  await must(ed.post(`/api/v/1/data/${a.id}`, { label: "after", n: -1 }), "insert on the edge");
  await must(ed.post(`/api/v/1/data/${probe.id}`, { label: "probe", n: 0 }), "probe insert on the edge");
  const labels = async () => ((await rows(ed, log.id)) ?? []).map((r) => r.label);
  t.ok(await waitFor(async () => (await labels()).includes("probe"), 20_000), "the probe trigger fires on the edge for the later insert");
  t.same(await labels(), ["probe"], "the removed trigger does not fire on the edge");
  t.same((await edgeRecord(sys, edge.name)).sync_lag, 0, "no lag");
  await edge.node.kill();
});

// ---- 2 ----------------------------------------------------------------------------------------

t.test("2. an edge deleted and created again with another template converges to exactly that template", async (t) => {
  const sys = await devWithSystem(platform, "recreated");
  const a = await collection(sys, "a", 200);
  const s1 = await service(sys, "s1", 1);
  const edge = await newEdge(sys, [{ def_module: "collection", def_name: a.name, mode: "sync" }, { def_module: "service", def_name: s1 }]);
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a], services: [[s1, 1]] }));
  const before = await edgeRecord(sys, edge.name);
  t.ok(before.isConnected, "connected");

  // deleted while connected, created again under its name with another template; the edge comes
  // back once the new record is complete (it would try in vain meanwhile: its record is gone)
  await must(sys.dev.del(`/admin/edges/${sys.systemKey}/${edge.name}`), "delete the edge");
  edge.proxy.cut();
  t.ok(await waitFor(async () => (await sys.dev.get(`/admin/edges/${sys.systemKey}/${edge.name}`)).status === 404), "gone");
  const b = await collection(sys, "b", 400);
  const s2 = await service(sys, "s2", 1);
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge.name}`, { token: edge.token }), "created again");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge.name}`, { add: [{ def_module: "collection", def_name: b.name, mode: "sync_to_edge" }, { def_module: "service", def_name: s2 }] }), "its template");
  edge.proxy.heal();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [b], services: [[s2, 1]], absent: { collections: [a.name], services: [s1] } }));
  t.ok(edge.node.logs().includes("another incarnation"), "the edge saw it holds another incarnation of its record");
  await edge.node.kill();
});

t.test("2b. an edge made again drops the rows deleted on the platform while it was away, though compaction dropped their tombstones", async (t) => {
  const sys = await devWithSystem(platform, "recreated-rows");
  const a = await collection(sys, "a", 50);
  const template = [{ def_module: "collection", def_name: a.name, mode: "sync_to_edge" }];
  // another edge of the system stays up to date: compaction drops what it has, tombstones included
  const witness = await newEdge(sys, template);
  await witness.node.start();
  await converge(t, sys, witness, lacks(sys, witness, { collections: [a] }));
  const edge = await newEdge(sys, template);
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
  await edge.node.kill();
  await must(sys.dev.del(`/admin/edges/${sys.systemKey}/${edge.name}`), "delete the edge");
  t.same(await must(sys.dev.del(`/api/v/1/data/${a.id}?query=${qs({ FILTERS: [[{ LT: [{ n: 20 }] }]] })}`), "delete rows"), { count: 20 }, "20 rows deleted while it is away");
  // compaction runs every second: the log is watched from here, so a compaction that follows the
  // witness's acknowledgement at once is seen too (every line after this has a head past the deletes)
  const mark = platform.logs().length;
  await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${edge.name}`, { token: edge.token }), "created again");
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge.name}`, { add: template }), "the same template");
  await converge(t, sys, witness, lacks(sys, witness, { collections: [a] }));
  const cursor = (await edgeRecord(sys, witness.name)).cursor as number;
  // the witness's cursor may be past the system's newest entry (empty batches move it over other
  // systems' changes): compacted through the newest entry is past the deletes too
  t.ok(await waitFor(() => [...platform.logs().slice(mark).matchAll(/"msg":"change log compacted"[^\n]*"systemKey":"([0-9a-f]+)","upTo":(\d+),"head":(\d+)/g)].some((m) => m[1] === sys.systemKey && Number(m[2]) >= Math.min(cursor, Number(m[3]))), 20_000),
    "the log (and the deletes' tombstones) compacted past the deletes");
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
  t.equal(await count(await edge.dev(), a.id), 30, "the edge holds the 30 rows left, not the 20 deleted");
  await edge.node.kill();
  await witness.node.kill();
});

// ---- 3 ----------------------------------------------------------------------------------------

// more rows than one snapshot page holds, so the kill can land between two
const BIG = Math.max(ROWS, 4_500);
t.test(`3. an edge killed in the middle of a ${BIG}-row snapshot that follows a template change gets every row`, async (t) => {
  const sys = await devWithSystem(platform, "interrupted");
  const small = await collection(sys, "small", 10);
  const edge = await newEdge(sys, [{ def_module: "collection", def_name: small.name, mode: "sync_to_edge" }]);
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [small] }));
  const ed = await edge.dev();

  const big = await collection(sys, "big", BIG);
  // slow pages so the kill lands between two of them
  edge.proxy.latency(150);
  await must(sys.dev.put(`/admin/edges/template/${sys.systemKey}/${edge.name}`, { add: [{ def_module: "collection", def_name: big.name, mode: "sync_to_edge" }] }), "template change");
  let partial = 0;
  const caught = await waitFor(async () => { partial = await count(ed, big.id); return partial > 0 && partial < BIG; }, 30_000, 10);
  await edge.node.kill();
  edge.proxy.heal();
  t.ok(caught, `the edge was killed holding ${partial} of ${BIG} rows`);
  const st = await statusOf(sys, edge.name);
  t.equal(st.find((a) => a.asset_type === "collection_rows" && a.asset_name === big.name)?.status, "pending", "its rows are pending, not synced");
  t.ok((await edgeRecord(sys, edge.name)).sync_lag > 0, "the edge record shows it behind");

  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [small, big] }));
  t.equal(await count(ed, big.id), BIG, `all ${BIG} rows`);
  await edge.node.kill();
});

// ---- 4 ----------------------------------------------------------------------------------------

t.test("4. a link that goes silent is noticed by both sides within two ping periods; a healed or cut link is used again within 5 s", async (t) => {
  const sys = await devWithSystem(platform, "silent");
  const a = await collection(sys, "a", 10);
  const edge = await newEdge(sys, [{ def_module: "collection", def_name: a.name, mode: "sync" }]);
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
  const ed = await edge.dev();

  for (let round = 1; round <= 2; round++) {
    const logBefore = edge.node.logs().length;
    edge.proxy.blackHole();
    const t0 = Date.now();
    t.ok(await waitFor(async () => (await edgeRecord(sys, edge.name)).isConnected === false, 10_000, 50), "the platform shows the edge disconnected");
    const platformSaw = Date.now() - t0;
    t.ok(await waitFor(() => edge.node.logs().slice(logBefore).includes("sync link silent"), 10_000, 50), "the edge gives the link up");
    const edgeSaw = Date.now() - t0;
    t.ok(platformSaw <= 2 * PING_MS + 1_000 && edgeSaw <= 2 * PING_MS + 1_000, `both within two ping periods (${2 * PING_MS} ms): platform ${platformSaw} ms, edge ${edgeSaw} ms`);
    // both sides keep working meanwhile
    await must(sys.dev.post(`/api/v/1/data/${a.id}`, { label: `platform during the hole ${round}`, n: 1 }), "write on the platform");
    await must(ed.post(`/api/v/1/data/${a.id}`, { label: `edge during the hole ${round}`, n: 2 }), "write on the edge");
    await sleep(round === 1 ? 3_000 : 6_000); // the edge keeps trying meanwhile
    edge.proxy.heal();
    const t1 = Date.now();
    t.ok(await waitFor(async () => (await edgeRecord(sys, edge.name)).isConnected === true, 10_000, 50), "connected again");
    const back = Date.now() - t1;
    t.ok(back < 5_000, `the healed link is used again within 5 s (${back} ms)`);
    await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
  }

  // a cut link: connections reset and refused for a while
  edge.proxy.cut();
  await must(ed.post(`/api/v/1/data/${a.id}`, { label: "edge during the cut", n: 3 }), "write on the edge");
  await sleep(4_000);
  edge.proxy.heal();
  const t2 = Date.now();
  t.ok(await waitFor(async () => (await edgeRecord(sys, edge.name)).isConnected === true, 10_000, 50), "connected after the cut");
  t.ok(Date.now() - t2 < 5_000, `within 5 s of the link coming back (${Date.now() - t2} ms)`);
  await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
  t.equal((await rows(sys.dev, a.id))!.length, 10 + 5, "every write of both sides is on the platform");
  await edge.node.kill();
});

// ---- 5 ----------------------------------------------------------------------------------------

t.test("5. skewed edge clocks: the later write wins on every node; a clock too far ahead is refused and said so", await needs("faketime (libfaketime)", FAKETIME_LIB !== undefined), async (t) => {
  /** the value of row `item` on both nodes, once they agree */
  const agreed = async (ed: Client, id: string, item: string, want: string) => {
    let seen = "";
    const ok = await waitFor(async () => {
      const [p, e] = await Promise.all([rows(platform_dev!, id), rows(ed, id)]);
      const pv = p?.find((r) => r.item_id === item)?.label, ev = e?.find((r) => r.item_id === item)?.label;
      seen = `platform ${pv}, edge ${ev}`;
      return pv === want && ev === want;
    }, 20_000, 100);
    return { ok, seen };
  };
  let platform_dev: Client | null = null;

  t.test("an edge 5 minutes slow, restarted: its update wins (it is the later write)", async (t) => {
    const sys = await devWithSystem(platform, "slow");
    platform_dev = sys.dev;
    const a = await collection(sys, "a", 0);
    const edge = await newEdge(sys, [{ def_module: "collection", def_name: a.name, mode: "sync" }], { env: shiftedClock("-300s") });
    await edge.node.start();
    const [x] = await must(sys.dev.post(`/api/v/1/data/${a.id}`, { label: "platform 1", n: 1 }), "row on the platform");
    await converge(t, sys, edge, lacks(sys, edge, { collections: [a] }));
    await edge.node.kill();
    await edge.node.start();
    const ed = await edge.dev();
    await must(ed.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: x.item_id }] }]], $set: { label: "edge 1" } }), "update on the edge");
    let r = await agreed(ed, a.id, x.item_id, "edge 1");
    t.ok(r.ok, `the edge's update is on both nodes (${r.seen})`);
    await must(sys.dev.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: x.item_id }] }]], $set: { label: "platform 2" } }), "update on the platform");
    r = await agreed(ed, a.id, x.item_id, "platform 2");
    t.ok(r.ok, `then the platform's later update (${r.seen})`);
    await edge.node.kill();
  });

  t.test("an edge 5 minutes fast and a platform restart: the later write still wins", async (t) => {
    const sys = await devWithSystem(platform, "fast");
    platform_dev = sys.dev;
    const a = await collection(sys, "a", 0);
    const edge = await newEdge(sys, [{ def_module: "collection", def_name: a.name, mode: "sync" }], { env: shiftedClock("+300s") });
    await edge.node.start();
    const ed = await edge.dev();
    const [y] = await must(ed.post(`/api/v/1/data/${a.id}`, { label: "edge 1", n: 1 }), "row on the edge");
    let r = await agreed(ed, a.id, y.item_id, "edge 1");
    t.ok(r.ok, `the edge's row is on both nodes (${r.seen})`);
    await platform.stop();
    await platform.start();
    await must(sys.dev.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: y.item_id }] }]], $set: { label: "platform 1" } }), "update on the restarted platform");
    r = await agreed(ed, a.id, y.item_id, "platform 1");
    t.ok(r.ok, `the platform's later update wins on both (${r.seen})`);
    await must(ed.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: y.item_id }] }]], $set: { label: "edge 2" } }), "update on the edge");
    r = await agreed(ed, a.id, y.item_id, "edge 2");
    t.ok(r.ok, `then the edge's (${r.seen})`);
    t.notOk((await statusOf(sys, edge.name)).some((x) => x.asset_type === "clock"), "5 minutes is within the accepted skew: nothing to say");
    await edge.node.kill();
  });

  t.test(`an edge 15 minutes fast (more than --max-clock-skew ${MAX_SKEW_S} s): its stamps are refused, the writes converge, status says why`, async (t) => {
    const sys = await devWithSystem(platform, "far");
    platform_dev = sys.dev;
    const a = await collection(sys, "a", 0);
    const edge = await newEdge(sys, [{ def_module: "collection", def_name: a.name, mode: "sync" }], { env: shiftedClock("+900s") });
    await edge.node.start();
    const ed = await edge.dev();
    const [z] = await must(ed.post(`/api/v/1/data/${a.id}`, { label: "edge 1", n: 1 }), "row on the edge");
    let r = await agreed(ed, a.id, z.item_id, "edge 1");
    t.ok(r.ok, `the edge's row is on both nodes, stamped by the platform (${r.seen})`);
    await must(sys.dev.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: z.item_id }] }]], $set: { label: "platform 1" } }), "update on the platform");
    r = await agreed(ed, a.id, z.item_id, "platform 1");
    t.ok(r.ok, `the platform's later update wins on both, though the edge's clock is ahead (${r.seen})`);
    await must(ed.put(`/api/v/1/data/${a.id}`, { query: [[{ EQ: [{ item_id: z.item_id }] }]], $set: { label: "edge 2" } }), "update on the edge");
    r = await agreed(ed, a.id, z.item_id, "edge 2");
    t.ok(r.ok, `then the edge's (${r.seen})`);
    const clock = (await statusOf(sys, edge.name)).find((x) => x.asset_type === "clock");
    t.equal(clock?.status, "failed", "the status names the clock");
    t.match(clock?.last_error ?? "", /ahead of the platform's.*--max-clock-skew/, `and why: ${clock?.last_error}`);
    t.ok((await edgeRecord(sys, edge.name)).clock_skew_ms > MAX_SKEW_S * 1000, "the edge record shows the skew");
    await edge.node.kill();
  });
});

// ---- 6 ----------------------------------------------------------------------------------------

t.test(`6. an up-to-date edge reconnecting after compaction, and after a platform restart, gets no snapshot (${ROWS} rows)`, async (t) => {
  const sys = await devWithSystem(platform, "compacted");
  const big = await collection(sys, "big", 0);
  const edge = await newEdge(sys, [{ def_module: "collection", def_name: big.name, mode: "sync_to_edge" }]);
  // written once the system has an edge: the rows are in the change log too
  for (let i = 0; i < ROWS; i += 1_000) await must(sys.dev.post(`/api/v/1/data/${big.id}`, Array.from({ length: Math.min(1_000, ROWS - i) }, (_, k) => ({ label: `r${i + k}`, n: i + k }))), "rows");
  await edge.node.start();
  await converge(t, sys, edge, lacks(sys, edge, { collections: [big] }));
  // the log is compacted once every edge of the system has it
  const cursor = (await edgeRecord(sys, edge.name)).cursor as number;
  const compacted = () => [...platform.logs().matchAll(/"msg":"change log compacted"[^\n]*"systemKey":"([0-9a-f]+)","upTo":(\d+)/g)].some((m) => m[1] === sys.systemKey && Number(m[2]) >= cursor);
  t.ok(await waitFor(compacted, 20_000), "the change log was compacted past the edge's position");

  // a witness: row n 0's label, changed on the platform after the edge reconnected
  const labelOf = async (c: Client) => ((await must(c.get(`/api/v/1/data/${big.id}?query=${qs({ FILTERS: [[{ EQ: [{ n: 0 }] }]] })}`), "row 0")).DATA as Row[])[0]?.label;
  const reconnect = async (what: string, restart: () => Promise<void>) => {
    const mark = platform.logs().length;
    edge.proxy.resetCounts();
    await restart();
    t.ok(await waitFor(() => /"msg":"edge connected"/.test(platform.logs().slice(mark)), 20_000), `${what}: the edge is connected`);
    // the platform sends one message after another, a snapshot queued at the hello before any log
    // batch: once a change made after the hello reached the edge, all the hello made it send has come
    const witness = uniq("witness");
    await must(sys.dev.put(`/api/v/1/data/${big.id}`, { query: [[{ EQ: [{ n: 0 }] }]], $set: { label: witness } }), "witness change");
    t.ok(await waitFor(async () => (await labelOf(await edge.dev())) === witness, 20_000), `${what}: a later change reaches the edge`);
    const line = platform.logs().slice(mark).match(/"msg":"edge connected"[^\n]*/)![0];
    t.match(line, /"snapshot":false/, `${what}: no snapshot`);
    const bytes = edge.proxy.bytesDown();
    t.ok(bytes < 10_000, `${what}: ${bytes} bytes from the platform (under 10 KB)`);
    t.equal(await count(await edge.dev(), big.id), ROWS, `${what}: the edge still holds the ${ROWS} rows`);
  };
  await reconnect("the edge restarted", async () => { await edge.node.kill(); await edge.node.start(); });
  await reconnect("the platform restarted", async () => { await platform.stop(); await platform.start(); });
  await converge(t, sys, edge, lacks(sys, edge, { collections: [big] }));
  await edge.node.kill();
});
