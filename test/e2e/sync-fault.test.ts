// Edge sync under faults, black-box: a platform and an edge (two processes of the binary) sync
// 10,000 rows while, round after round, one of them (chosen at random) is killed with SIGKILL at a
// random moment and started again on the same data directory. Writes go on throughout on both
// sides: rows inserted, updated and deleted on the platform flow down (a sync_to_edge collection
// and a sync collection), rows written on the edge flow up (the sync collection). At the end both
// sides must hold exactly the same rows: nothing lost, nothing duplicated, deletes kept.
// OUTPOST_FAULT_SEED repeats a run's random choices (the seed is in the test's name).
// OUTPOST_SYNC_LOGS=DIR keeps both processes' logs there (OUTPOST_SYNC_LOG_LEVEL=debug: every batch).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { Client, type Outpost, devWithSystem, freePort, request, startOutpost, uniq, sleep, waitFor, qs } from "./harness.ts";

const ROWS = 10_000;
const ROUNDS = 24;
/** The longest a kill waits after the round starts (random below it). */
const KILL_WITHIN_MS = 1_500;


// a seeded generator, so a failing run can be repeated with OUTPOST_FAULT_SEED
const SEED = Number(process.env.OUTPOST_FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
let state = SEED || 1;
const rand = () => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return ((state >>> 0) % 1_000_000) / 1_000_000; };
const randInt = (n: number) => Math.floor(rand() * n);

const dirs: string[] = [];
function dataDir() { const d = mkdtempSync(join(tmpdir(), "outpost-fault-e2e-")); dirs.push(d); return d; }

/** A process of the binary on a fixed HTTP port and data directory. */
class Node {
  o: Outpost | null = null;
  starts = 0;
  constructor(readonly name: string, readonly port: number, readonly dir: string, readonly args: () => string[]) {}
  get url() { return `http://127.0.0.1:${this.port}`; }
  async start() {
    const o = await startOutpost({ dataDir: this.dir, args: [...this.args(), "--http-port", String(this.port)], waitForHealth: false });
    this.o = o;
    this.starts++;
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (o.proc.exitCode !== null) throw new Error(`${this.name} exited with ${o.proc.exitCode}:\n${o.logs()}`);
      try { if ((await request(this.url, "GET", "/health")).status === 200) return; } catch { /* not up yet */ }
      if (Date.now() > deadline) { await o.kill(); throw new Error(`${this.name} did not come up:\n${o.logs()}`); }
      await sleep(20);
    }
  }
  /** logs of earlier runs of this node */
  past = "";
  async kill() { const o = this.o; this.o = null; await o?.kill(); this.past += o?.logs() ?? ""; }
  logs() { return this.past + (this.o?.logs() ?? ""); }
}

const nodes: Node[] = [];
t.teardown(async () => {
  for (const n of nodes) await n.kill();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

t.test(`a ${ROWS}-row sync survives ${ROUNDS} rounds of SIGKILL of either side (seed ${SEED})`, async (t) => {
  const started = Date.now();
  const platform = new Node("platform", await freePort(), dataDir(), () => ["--log-level", process.env.OUTPOST_SYNC_LOG_LEVEL ?? "info"]);
  nodes.push(platform);
  await platform.start();
  const s = await devWithSystem(platform, "fault");
  const SK = s.systemKey;
  const pdev = s.dev;

  const mk = async (name: string) => {
    const r = await pdev.post("/admin/collectionmanagement", { name, appID: SK });
    if (r.status !== 200) throw new Error(r.text);
    for (const [n, type] of [["label", "string"], ["n", "int"], ["origin", "string"]]) {
      const a = await pdev.put("/admin/collectionmanagement", { id: r.body.collectionID, addColumn: { name: n, type } });
      if (a.status !== 200) throw new Error(a.text);
    }
    return r.body.collectionID as string;
  };
  const down = await mk(uniq("down"));   // sync_to_edge: the 10,000 rows, and the platform's writes
  const both = await mk(uniq("both"));   // sync: written on both sides

  // What each side acknowledged. A write whose request failed (its process was killed) is unknown.
  // Rows are deleted only by the side that wrote them (so a delete that answered 200 really
  // deleted them); rows updated by the other side are left out of the delete check, since a later
  // update wins over an earlier delete (last writer wins).
  const acked = new Map<string, Set<string>>([[down, new Set()], [both, new Set()]]);
  const deleted = new Map<string, Set<string>>([[down, new Set()], [both, new Set()]]);
  const crossUpdated = new Set<string>();
  const unknown = new Set<string>();
  let label = 0;
  const nextLabels = (prefix: string, n: number) => Array.from({ length: n }, () => `${prefix}-${label++}`);
  const anyOf = (labels: string[]) => ({ FILTERS: labels.map((l) => [{ EQ: [{ label: l }] }]) });

  async function insert(c: Client, coll: string, labels: string[], origin: string) {
    let r;
    try { r = await c.post(`/api/v/1/data/${coll}`, labels.map((l, i) => ({ label: l, n: i, origin }))); }
    catch { r = null; }
    if (r?.status === 200) { for (const l of labels) acked.get(coll)!.add(l); return; }
    if (r && r.status < 500) throw new Error(`insert refused: ${r.status} ${r.text}`);
    for (const l of labels) unknown.add(l);
  }
  async function update(c: Client, coll: string, labels: string[], n: number, cross: boolean) {
    if (!labels.length) return; // no filter would mean every row
    if (cross) for (const l of labels) crossUpdated.add(l);
    try { await c.put(`/api/v/1/data/${coll}`, { query: anyOf(labels), $set: { n } }); }
    catch { /* killed: either way, the final state must be the same on both sides */ }
  }
  async function remove(c: Client, coll: string, labels: string[]) {
    if (!labels.length) return;
    let r;
    try { r = await c.del(`/api/v/1/data/${coll}?query=${qs(anyOf(labels))}`); }
    catch { r = null; }
    const sure = r?.status === 200 && r.body?.count === labels.length;
    for (const l of labels) {
      acked.get(coll)!.delete(l);
      if (sure) deleted.get(coll)!.add(l); else unknown.add(l);
    }
  }
  /** Up to n acknowledged labels of a collection, optionally only those with a prefix. */
  const pick = (coll: string, n: number, prefix?: string) => {
    const all = [...acked.get(coll)!].filter((l) => !prefix || l.startsWith(`${prefix}-`));
    const out = new Set<string>();
    for (let i = 0; i < n && all.length; i++) out.add(all[randInt(all.length)]!);
    return [...out];
  };

  const edgeName = uniq("faulty");
  const token = "fault-edge-token-1";
  const ce = await pdev.post(`/admin/edges/${SK}/${edgeName}`, { token });
  t.equal(ce.status, 200, "edge created");
  const tp = await pdev.put(`/admin/edges/template/${SK}/${edgeName}`, { add: [
    { def_module: "collection", def_name: (await pdev.get(`/admin/collectionmanagement?id=${down}`)).body.name, mode: "sync_to_edge" },
    { def_module: "collection", def_name: (await pdev.get(`/admin/collectionmanagement?id=${both}`)).body.name, mode: "sync" },
  ] });
  t.equal(tp.status, 200, "template");
  // the 10,000 rows, on the platform before the edge first connects (the edge record exists, so
  // they are in the change log too, and the edge's first snapshot ends at a position past 0)
  for (let i = 0; i < ROWS; i += 1_000) await insert(pdev, down, nextLabels("p", 1_000), "platform");
  t.equal(acked.get(down)!.size, ROWS, `${ROWS} rows on the platform`);
  const edge = new Node("edge", await freePort(), dataDir(), () => ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", edgeName, "--edge-token", token, "--log-level", process.env.OUTPOST_SYNC_LOG_LEVEL ?? "info"]);
  nodes.push(edge);
  await edge.start();

  // a developer token on the edge (its database keeps it across restarts)
  let edev: Client | null = null;
  t.ok(await waitFor(async () => {
    const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
    if (a.status !== 200) return false;
    edev = new Client(edge.url, { "ClearBlade-DevToken": a.body.dev_token });
    return true;
  }, 20_000), "the developer signs in on the edge");

  // The first snapshot completes (the platform holds the edge's cursor) before the first kill: an
  // interrupted first snapshot is the known bug reproduced by the test at the end of this file.
  // From then on every round syncs a change of every one of the 10,000+ rows while the kills land.
  t.ok(await waitFor(async () => (await pdev.get(`/admin/edges/${SK}/${edgeName}`)).body.cursor > 0 &&
    (await edev!.get(`/api/v/1/data/${down}/count`)).body.count === ROWS, 60_000), `the edge's first snapshot is complete: it holds the ${ROWS} rows`);

  const kills = { platform: 0, edge: 0 };
  let edgeWrites = 0, behind = 0;
  const bulk: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const victim = rand() < 0.5 ? platform : edge;
    const killAt = randInt(KILL_WITHIN_MS);
    // writes on both sides while the sync runs; the kill lands somewhere among them. Each round
    // starts with an update of every row of the big collection: a 10,000-row change to sync.
    const writes = (async () => {
      const deadline = Date.now() + KILL_WITHIN_MS;
      try { const r = await pdev.put(`/api/v/1/data/${down}`, { query: [], $set: { n: -round } }); if (r.status === 200) bulk.push(r.body.count); }
      catch { /* the platform was killed */ }
      while (Date.now() < deadline) {
        const w = randInt(8);
        if (w <= 1) await insert(pdev, down, nextLabels("p", 50), "platform");
        else if (w === 2) await update(pdev, down, pick(down, 40), round * 1000 + randInt(1000), false);
        else if (w === 3) await remove(pdev, down, pick(down, 5));
        else if (w === 4) await insert(pdev, both, nextLabels("pb", 20), "platform");
        else if (w === 5) { await insert(edev!, both, nextLabels("e", 20), "edge"); edgeWrites++; }
        else if (w === 6) {
          const onEdge = rand() < 0.5;
          const l = pick(both, 10);
          await update(onEdge ? edev! : pdev, both, l, onEdge ? round : -round, true);
        } else if (rand() < 0.5) await remove(edev!, both, pick(both, 3, "e"));
        else await remove(pdev, both, pick(both, 3, "pb"));
        await sleep(20 + randInt(40));
      }
    })();
    await sleep(killAt);
    // is the edge behind at this moment (a sync in flight)? only for the report
    try { if ((await pdev.get(`/admin/edges/${SK}/${edgeName}`)).body.sync_lag > 0) behind++; } catch { /* platform down */ }
    await victim.kill();
    kills[victim.name as "platform" | "edge"]++;
    await writes;
    await victim.start();
  }
  t.equal(kills.platform + kills.edge, ROUNDS, `${ROUNDS} rounds: platform killed ${kills.platform}, edge killed ${kills.edge} times; ${edgeWrites} edge write batches`);
  t.ok(kills.platform + kills.edge >= 20, "at least 20 kills");
  t.ok(edgeWrites > 0, "the edge wrote during the rounds");
  t.ok(bulk.length > 0, `whole-collection updates synced under kills: ${bulk.join(", ")} rows`);
  t.comment(`${behind} of ${ROUNDS} kills landed while the edge was behind the platform's change log`);

  // both up: a last write on each side, then the two sides must converge
  await insert(pdev, down, nextLabels("p", 100), "platform");
  await insert(edev!, both, nextLabels("e", 100), "edge");

  const rowsOf = async (c: Client, coll: string) => {
    const r = await c.get(`/api/v/1/data/${coll}?query=${qs({ PAGESIZE: 0, PAGENUM: 0 })}`);
    if (r.status !== 200) throw new Error(`${r.status} ${r.text.slice(0, 200)}`);
    return r.body.DATA as { item_id: string; label: string; n: number; origin: string }[];
  };
  const canon = (rows: { item_id: string }[]) => JSON.stringify([...rows].sort((a, b) => a.item_id.localeCompare(b.item_id)));
  let last = "";
  const convergeStart = Date.now();
  const converged = await waitFor(async () => {
    for (const coll of [down, both]) {
      const [p, e] = await Promise.all([rowsOf(pdev, coll), rowsOf(edev!, coll)]);
      if (canon(p) !== canon(e)) {
        const pm = new Map(p.map((r) => [r.item_id, r])), em = new Map(e.map((r) => [r.item_id, r]));
        const where = (l: string) => (deleted.get(coll)!.has(l) ? "deleted" : unknown.has(l) ? "unknown" : acked.get(coll)!.has(l) ? "acked" : "?") + (crossUpdated.has(l) ? "+cross" : "");
        const onlyE = e.filter((r) => !pm.has(r.item_id)).map((r) => `${r.label}(${where(r.label)})`);
        const onlyP = p.filter((r) => !em.has(r.item_id)).map((r) => `${r.label}(${where(r.label)})`);
        const differ = p.filter((r) => em.has(r.item_id) && JSON.stringify(r) !== JSON.stringify(em.get(r.item_id))).map((r) => `${r.label}: ${r.n} vs ${em.get(r.item_id)!.n}`);
        last = `${coll === down ? "down" : "both"}: platform ${p.length} rows, edge ${e.length} rows; only on the edge ${onlyE.length} [${onlyE.slice(0, 6).join(" ")}], only on the platform ${onlyP.length} [${onlyP.slice(0, 6).join(" ")}], different ${differ.length} [${differ.slice(0, 4).join("; ")}]`;
        return false;
      }
    }
    return true;
  }, 60_000, 500);
  t.ok(converged, `both sides converge${converged ? "" : ` (still different: ${last})`}`);
  t.comment(`converged ${converged ? `in ${Math.round((Date.now() - convergeStart) / 100) / 10} s` : "not"} after the last round`);
  // OUTPOST_SYNC_LOGS=DIR keeps both processes' logs there
  if (process.env.OUTPOST_SYNC_LOGS) for (const n of [platform, edge]) writeFileSync(join(process.env.OUTPOST_SYNC_LOGS, `fault-${n.name}.log`), n.logs());
  const snapshots = (platform.logs().match(/"msg":"edge connected"[^\n]*"snapshot":true/g) ?? []).length;
  t.comment(`the platform's logs show ${(platform.logs().match(/"msg":"edge connected"/g) ?? []).length} edge connections (a killed process may lose its last lines), ${snapshots} with a snapshot`);

  for (const [coll, what] of [[down, "sync_to_edge collection"], [both, "sync collection"]] as const) {
    const p = await rowsOf(pdev, coll), e = await rowsOf(edev!, coll);
    t.equal(canon(e), canon(p), `${what}: every row identical on both sides (${p.length} rows)`);
    const countP = (await pdev.get(`/api/v/1/data/${coll}/count`)).body.count, countE = (await edev!.get(`/api/v/1/data/${coll}/count`)).body.count;
    t.equal(countE, countP, `${what}: same count on both sides (${countP})`);
    t.equal(countP, p.length, `${what}: the count matches the rows read`);
    const labels = p.map((r) => r.label);
    const dup = labels.filter((l, i) => labels.indexOf(l) !== i);
    t.same(dup.slice(0, 5), [], `${what}: nothing duplicated (each written row once)`);
    t.equal(new Set(p.map((r) => r.item_id)).size, p.length, `${what}: item ids unique`);
    const have = new Set(labels);
    const lost = [...acked.get(coll)!].filter((l) => !have.has(l) && !unknown.has(l) && !deleted.get(coll)!.has(l));
    t.same(lost.slice(0, 5), [], `${what}: nothing lost (${acked.get(coll)!.size} acknowledged inserts, ${lost.length} missing)`);
    const back = [...deleted.get(coll)!].filter((l) => have.has(l) && !crossUpdated.has(l));
    t.same(back.slice(0, 5), [], `${what}: acknowledged deletes stay deleted (${deleted.get(coll)!.size})`);
    const strays = labels.filter((l) => !acked.get(coll)!.has(l) && !unknown.has(l) && !deleted.get(coll)!.has(l));
    t.same(strays.slice(0, 5), [], `${what}: no row that nobody wrote`);
  }
  const pRows = await rowsOf(pdev, down);
  t.ok(pRows.length >= ROWS, `the sync_to_edge collection holds at least the ${ROWS} rows (${pRows.length})`);
  t.ok((await rowsOf(pdev, both)).some((r) => r.origin === "edge"), "rows written on the edge are on the platform");

  const status = await pdev.get(`/admin/${SK}/sync/edge/status/${edgeName}`);
  t.equal(status.status, 200, "sync status");
  t.ok(await waitFor(async () => (await pdev.get(`/admin/${SK}/sync/edge/status/${edgeName}`)).body.every((a: any) => a.status === "synced"), 20_000), "every asset synced at the end");
  t.ok(await waitFor(async () => (await pdev.get(`/admin/edges/${SK}/${edgeName}`)).body.sync_lag === 0, 20_000), "no lag at the end");
  t.comment(`seed ${SEED}, ${Math.round((Date.now() - started) / 1000)} s`);
});

// A full snapshot carries the collection's deletes (tombstones) too: an edge whose first snapshot
// was interrupted loses the rows the platform deleted before the new snapshot.
t.test("an edge killed during its first snapshot drops rows the platform deleted meanwhile", async (t) => {
  const FIRST_ROWS = 40_000; // enough pages to catch the edge halfway through
  const platform = new Node("platform", await freePort(), dataDir(), () => []);
  nodes.push(platform);
  await platform.start();
  const s = await devWithSystem(platform, "first-snapshot");
  const SK = s.systemKey;
  const name = uniq("big");
  const c = await s.dev.post("/admin/collectionmanagement", { name, appID: SK });
  const id = c.body.collectionID as string;
  await s.dev.put("/admin/collectionmanagement", { id, addColumn: { name: "label", type: "string" } });
  let inserted = 0;
  for (let i = 0; i < FIRST_ROWS; i += 2_000) {
    const r = await s.dev.post(`/api/v/1/data/${id}`, Array.from({ length: 2_000 }, (_, j) => ({ label: `r${i + j}` })));
    if (r.status === 200) inserted += 2_000;
  }
  t.equal(inserted, FIRST_ROWS, `${FIRST_ROWS} rows on the platform`);
  const edgeName = uniq("first");
  await s.dev.post(`/admin/edges/${SK}/${edgeName}`, { token: "first-snapshot-token" });
  await s.dev.put(`/admin/edges/template/${SK}/${edgeName}`, { add: [{ def_module: "collection", def_name: name, mode: "sync_to_edge" }] });
  const edge = new Node("edge", await freePort(), dataDir(), () => ["--mode", "edge", "--platform-url", platform.url, "--system-key", SK, "--edge-name", edgeName, "--edge-token", "first-snapshot-token"]);
  nodes.push(edge);
  await edge.start();
  // kill the edge once it holds some of the rows but not all
  let partial = -1, token = "";
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (!token) {
      const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } }).catch(() => null);
      if (a?.status === 200) token = a.body.dev_token;
      continue;
    }
    const n = (await request(edge.url, "GET", `/api/v/1/data/${id}/count`, { headers: { "ClearBlade-DevToken": token } })).body?.count;
    if (typeof n === "number" && n > 0 && n < FIRST_ROWS) { partial = n; break; }
    if (n === FIRST_ROWS) break;
  }
  await edge.kill();
  t.ok(partial > 0, `the edge was killed holding ${partial} of ${FIRST_ROWS} rows`);
  // rows the edge already holds (the first inserted come first) are deleted on the platform
  const del = await s.dev.del(`/api/v/1/data/${id}?query=${qs({ FILTERS: Array.from({ length: 50 }, (_, i) => [{ EQ: [{ label: `r${i}` }] }]) })}`);
  t.same(del.body, { count: 50 }, "50 rows deleted on the platform while the edge is down");
  await edge.start();
  const a = await request(edge.url, "POST", "/admin/auth", { body: { email: s.email, password: s.password } });
  const edev = new Client(edge.url, { "ClearBlade-DevToken": a.body.dev_token });
  t.ok(await waitFor(async () => (await s.dev.get(`/admin/edges/${SK}/${edgeName}`)).body.sync_lag === 0 &&
    (await s.dev.get(`/admin/${SK}/sync/edge/status/${edgeName}`)).body.every((x: any) => x.status === "synced"), 30_000), "the edge finishes its snapshot");
  const pc = (await s.dev.get(`/api/v/1/data/${id}/count`)).body.count;
  t.equal(pc, FIRST_ROWS - 50, "the platform holds the rest");
  t.ok(await waitFor(async () => (await edev.get(`/api/v/1/data/${id}/count`)).body.count === pc, 10_000), `the edge holds the same rows (${(await edev.get(`/api/v/1/data/${id}/count`)).body.count})`,
  );
  await edge.kill();
  await platform.kill();
});
