// bench/sync.ts: edge sync.
//  1. an initial sync of 100,000 rows to a new edge (rows/s) against raw batched inserts into the
//     edge's own kind of database (target ratio >= 0.5);
//  2. the latency of one platform change reaching the edge, p50 and p99 (targets 50 ms and 250 ms
//     on loopback), read from the edge's log (the time it applied the batch carrying it);
//  3. the bytes an up-to-date edge receives when it reconnects after the change log was compacted,
//     and after a platform restart (target: no rows, under 10 KB), against the bytes of the
//     snapshot a new edge of the same template receives;
//  4. the time 200 connected edges of one system take to receive one change, p50 and p99 (target
//     p99 under 2 s), against one edge alone. Arrival is measured where it happens, never by
//     polling: the real edges' own logs (the time of their "batch applied" line) and, for the
//     rest of the 200 (a machine this size cannot run 200 processes), the moment a client that
//     speaks the sync protocol receives the batch.
import { createClient } from "@libsql/client";
import { mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { liveBatches, Node, SimEdges } from "./edgesim.ts";
import { fmt, json, pct, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const ROWS = Number(process.env.BENCH_SYNC_ROWS ?? 100_000);
const CHANGES = Number(process.env.BENCH_SYNC_CHANGES ?? 200);
/** rows held by the edge that reconnects (about as many as a real edge that was seen re-sent everything held) */
const RECONNECT_ROWS = Number(process.env.BENCH_SYNC_RECONNECT_ROWS ?? 16_000);
const FLEET = Number(process.env.BENCH_SYNC_EDGES ?? 200);
/** of the fleet, edges that are real processes of the binary */
const REAL_EDGES = Number(process.env.BENCH_SYNC_REAL_EDGES ?? 4);
const FLEET_CHANGES = Number(process.env.BENCH_SYNC_FLEET_CHANGES ?? 10);

const makeRows = (n: number, offset: number) => Array.from({ length: n }, (_, i) => ({ sensor: `s-${offset + i}`, value: (offset + i) * 0.5, ts: new Date(1_700_000_000_000 + (offset + i) * 1000).toISOString(), ok: (i & 1) === 0 }));
const COLUMNS = [{ name: "sensor", type: "string" }, { name: "value", type: "double" }, { name: "ts", type: "timestamp" }, { name: "ok", type: "bool" }];

async function rawInsert(dir: string): Promise<number> {
  const c = createClient({ url: `file:${join(dir, "raw.db")}` });
  await c.execute("PRAGMA journal_mode=WAL");
  await c.execute("CREATE TABLE t (item_id TEXT PRIMARY KEY NOT NULL, sensor TEXT, value REAL, ts TEXT, ok INTEGER, _hlc TEXT)");
  const t0 = performance.now();
  for (let i = 0; i < ROWS; i += 1000)
    await c.batch(makeRows(1000, i).map((r) => ({ sql: "INSERT INTO t VALUES (?,?,?,?,?,?)", args: [crypto.randomUUID(), r.sensor, r.value, r.ts, r.ok ? 1 : 0, null] })), "write");
  const rate = ROWS / ((performance.now() - t0) / 1000);
  c.close();
  return rate;
}

/** A TCP pass-through that counts the bytes going from the platform to the edge. */
async function countingProxy(target: number) {
  let down = 0;
  const srv = net.createServer((c) => {
    const u = net.connect(target, "127.0.0.1");
    c.pipe(u);
    u.on("data", (d: Buffer) => { down += d.length; c.write(d); });
    const end = () => { c.destroy(); u.destroy(); };
    c.on("error", end); u.on("error", end); c.on("close", end); u.on("close", end);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, down: () => down, reset() { down = 0; }, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

async function devToken(url: string, email: string, password: string): Promise<Record<string, string>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await fetch(`${url}/admin/auth`, { method: "POST", body: JSON.stringify({ email, password }) }).catch(() => null);
    if (r?.status === 200) return { "ClearBlade-DevToken": ((await r.json()) as { dev_token: string }).dev_token };
    if (Date.now() > deadline) throw new Error("no developer session on the edge");
    await Bun.sleep(50);
  }
}

async function initialSyncAndLatency() {
  const P = await startOutpost();
  let E: Node | undefined;
  try {
    const s = await setupSystem(P.url);
    const D = { "ClearBlade-DevToken": s.devToken };
    const { collectionID } = await json(`${P.url}/admin/collectionmanagement`, "POST", { name: "bulk", appID: s.systemKey, columns: COLUMNS }, D);
    await json(`${P.url}/admin/edges/${s.systemKey}/bench`, "POST", { token: "bench-edge-token" }, D);
    await json(`${P.url}/admin/edges/template/${s.systemKey}/bench`, "PUT", { add: [{ def_module: "collection", def_name: "bulk", mode: "sync_to_edge" }] }, D);
    for (let i = 0; i < ROWS; i += 1000) await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", makeRows(1000, i), D);

    // initial sync: from the edge's start to every row on it
    const t0 = performance.now();
    // debug: the edge logs every batch it applied (the latency below is read from those lines)
    E = new Node(["--log-level", "debug", "--mode", "edge", "--platform-url", P.url, "--system-key", s.systemKey, "--edge-name", "bench", "--edge-token", "bench-edge-token"]);
    await E.start();
    const me = await json(`${P.url}/admin/userinfo`, "GET", undefined, D);
    const ED = await devToken(E.url, me.email, "pw");
    for (;;) {
      const r = await fetch(`${E.url}/api/v/2/collection/${s.systemKey}/bulk/count`, { headers: ED });
      if (r.status === 200 && ((await r.json()) as { count: number }).count === ROWS) break;
      if (performance.now() - t0 > 300_000) throw new Error("initial sync did not finish in 5 minutes");
      await Bun.sleep(20);
    }
    const syncRate = ROWS / ((performance.now() - t0) / 1000);
    const raw = await rawInsert(E.dir);
    report(`Sync: initial sync of ${fmt(ROWS)} rows to a new edge`, [
      ["edge rows/s (start to last row)", fmt(syncRate)],
      ["raw batched inserts into the edge's kind of database rows/s", fmt(raw)],
      ["ratio", `${fmt(syncRate / raw, 2)}  ${verdict(syncRate / raw, 0.5)}`],
    ]);

    // latency of one change, one at a time: from before the write is sent to the edge's log line
    // saying it applied the batch carrying it (no polling of the edge, which would slow it)
    const lat: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      const seen = liveBatches(E.out).length;
      const t = Date.now();
      await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", { sensor: `lat-${i}`, value: i }, D);
      let arrivals = liveBatches(E.out);
      while (arrivals.length === seen) {
        if (Date.now() - t > 10_000) throw new Error("a change did not reach the edge in 10 s");
        await Bun.sleep(1);
        arrivals = liveBatches(E.out);
      }
      lat.push(arrivals[seen]! - t);
    }
    const p50 = pct(lat, 0.5), p99 = pct(lat, 0.99);
    report(`Sync: latency of one platform change reaching the edge (${CHANGES} changes, loopback)`, [
      ["p50", `${fmt(p50, 1)} ms  ${verdict(p50, 50, false)}`],
      ["p99", `${fmt(p99, 1)} ms  ${verdict(p99, 250, false)}`],
    ]);
  } finally {
    await E?.stop();
    await P.stop();
  }
}

async function reconnectBytes() {
  const P = new Node(["--log-level", "error", "--sync-compact-ms", "500"]);
  await P.start();
  const proxy = await countingProxy(P.httpPort);
  let E: Node | null = null;
  try {
    const s = await setupSystem(P.url);
    const D = { "ClearBlade-DevToken": s.devToken };
    const { collectionID } = await json(`${P.url}/admin/collectionmanagement`, "POST", { name: "held", appID: s.systemKey, columns: COLUMNS }, D);
    await json(`${P.url}/admin/edges/${s.systemKey}/up2date`, "POST", { token: "bench-edge-token" }, D);
    await json(`${P.url}/admin/edges/template/${s.systemKey}/up2date`, "PUT", { add: [{ def_module: "collection", def_name: "held", mode: "sync_to_edge" }] }, D);
    // written once the system has an edge: in the change log too, which compaction empties
    for (let i = 0; i < RECONNECT_ROWS; i += 1000) await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", makeRows(Math.min(1000, RECONNECT_ROWS - i), i), D);
    E = new Node(["--log-level", "error", "--mode", "edge", "--platform-url", proxy.url, "--system-key", s.systemKey, "--edge-name", "up2date", "--edge-token", "bench-edge-token"]);
    await E.start();
    const me = await json(`${P.url}/admin/userinfo`, "GET", undefined, D);
    const ED = await devToken(E.url, me.email, "pw");
    const synced = async () => {
      const st = (await json(`${P.url}/admin/${s.systemKey}/sync/edge/status/up2date`, "GET", undefined, D)) as { status: string }[];
      const rec = await json(`${P.url}/admin/edges/${s.systemKey}/up2date`, "GET", undefined, D);
      return rec.isConnected && st.length > 0 && st.every((a) => a.status === "synced");
    };
    const until = async (what: string, pred: () => Promise<boolean>) => {
      const deadline = Date.now() + 120_000;
      while (!(await pred().catch(() => false))) { if (Date.now() > deadline) throw new Error(`${what} did not happen in 2 minutes`); await Bun.sleep(100); }
    };
    await until("the first snapshot", async () => (await synced()) && (await json(`${E!.url}/api/v/1/data/${collectionID}/count`, "GET", undefined, ED)).count === RECONNECT_ROWS);
    const snapshotBytes = proxy.down();
    await Bun.sleep(2_000); // compaction runs every 500 ms: the log is empty now

    const reconnect = async (restart: () => Promise<void>) => {
      proxy.reset();
      await restart();
      await until("the reconnect", synced);
      await Bun.sleep(1_500); // whatever the platform sends after the welcome
      return proxy.down();
    };
    const afterCompaction = await reconnect(async () => { await E!.stop("SIGKILL"); await E!.start(); });
    const afterRestart = await reconnect(async () => { await P.stop(); await P.start(); });
    const held = (await json(`${E.url}/api/v/1/data/${collectionID}/count`, "GET", undefined, ED)).count;
    if (held !== RECONNECT_ROWS) throw new Error(`the edge holds ${held} rows, not ${RECONNECT_ROWS}`);
    report(`Sync: bytes an up-to-date edge (${fmt(RECONNECT_ROWS)} rows) receives when it reconnects`, [
      ["a new edge's snapshot of the same template (baseline)", `${fmt(snapshotBytes)} bytes`],
      ["reconnect after the log was compacted", `${fmt(afterCompaction)} bytes, ratio ${fmt(afterCompaction / snapshotBytes, 4)}  ${verdict(afterCompaction, 10_000, false)}`],
      ["reconnect after a platform restart", `${fmt(afterRestart)} bytes, ratio ${fmt(afterRestart / snapshotBytes, 4)}  ${verdict(afterRestart, 10_000, false)}`],
    ]);
  } finally {
    await E?.stop("SIGKILL");
    await P.stop();
    await proxy.close();
  }
}

/** `edges` connected edges of one system (`real` of them processes of the binary, the rest
 *  protocol clients) receiving `changes` changes one at a time: each arrival's delay after its
 *  write, p50 and p99, and the median over changes of the time until the last edge had it.
 *  bench/scale.ts draws its propagation curve with it. */
export async function fleet(edges: number, real: number, changes = FLEET_CHANGES) {
  const tplDir = mkdtempSync(join(tmpdir(), "outpost-bench-tpl-"));
  writeFileSync(join(tplDir, "fleet.json"), JSON.stringify({ assets: [{ def_module: "collection", def_name: "fleet", mode: "sync_to_edge" }] }));
  const P = new Node(["--log-level", "error", "--edge-templates-dir", tplDir]);
  await P.start();
  const reals: Node[] = [];
  let sim: SimEdges | null = null;
  try {
    const s = await setupSystem(P.url);
    const D = { "ClearBlade-DevToken": s.devToken };
    const { collectionID } = await json(`${P.url}/admin/collectionmanagement`, "POST", { name: "fleet", appID: s.systemKey, columns: COLUMNS }, D);
    const names = Array.from({ length: edges }, (_, i) => `fleet-edge-${i}`);
    for (const n of names) await json(`${P.url}/admin/edges/${s.systemKey}/${n}`, "POST", { token: "fleet-edge-token", template: "fleet" }, D);
    // the real edges log each applied batch with the changes' sequence numbers (debug)
    for (const n of names.slice(0, real)) {
      const e = new Node(["--log-level", "debug", "--mode", "edge", "--platform-url", P.url, "--system-key", s.systemKey, "--edge-name", n, "--edge-token", "fleet-edge-token"]);
      reals.push(e);
      await e.start();
    }
    const simulated = names.slice(real);
    if (simulated.length) {
      sim = new SimEdges(P.url, s.systemKey, simulated, "fleet-edge-token");
      await sim.until("the protocol edges' first sync", (x) => x.synced === simulated.length, 120_000);
    }
    const connected = async () => (await json(`${P.url}/admin/edges/${s.systemKey}`, "GET", undefined, D) as { isConnected: boolean }[]).filter((e) => e.isConnected).length;
    for (const deadline = Date.now() + 120_000; (await connected()) < edges;) { if (Date.now() > deadline) throw new Error("not every edge connected"); await Bun.sleep(200); }
    await Bun.sleep(1_000);

    // one change at a time; each edge's arrival against the moment the write was sent
    const sent = new Map<string, number>();
    for (let i = 0; i < changes; i++) {
      const marker = `fleet-${i}`;
      await sim?.expect(marker, 1);
      const at = Date.now();
      await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", { sensor: `${marker}/0`, value: i }, D);
      sent.set(marker, at);
      await Bun.sleep(1_000);
    }
    await Bun.sleep(2_000);
    const lat: number[] = [];
    const worst: number[] = [];
    const perChange = new Map<string, number[]>();
    // simulated edges: what they noted on arrival
    if (sim) for (const [marker, at] of sent) perChange.set(marker, (await sim.arrivals(marker)).filter((t) => t > 0).map((t) => t - at));
    // real edges: their own logs; one change at a time, so the n-th batch after the snapshot that
    // carried a change carried the n-th change
    for (const e of reals) {
      liveBatches(e.out).forEach((at, i) => {
        const marker = `fleet-${i}`;
        if (sent.has(marker)) (perChange.get(marker) ?? perChange.set(marker, []).get(marker)!).push(at - sent.get(marker)!);
      });
    }
    for (const [, xs] of perChange) { lat.push(...xs); worst.push(Math.max(...xs)); }
    const received = lat.length, expected = edges * changes;
    if (received < expected) throw new Error(`only ${received} of ${expected} arrivals`);
    return { p50: pct(lat, 0.5), p99: pct(lat, 0.99), allIn: pct(worst, 0.5) };
  } finally {
    sim?.stop();
    for (const e of reals) await e.stop("SIGKILL");
    await P.stop();
  }
}

async function fleetLatency() {
  const one = await fleet(1, 1);
  const many = await fleet(FLEET, Math.min(REAL_EDGES, FLEET));
  report(`Sync: ${FLEET} connected edges of one system receiving one change (${FLEET_CHANGES} changes; ${Math.min(REAL_EDGES, FLEET)} real edges timed by their own logs, the rest by protocol clients on arrival)`, [
    ["one edge alone (baseline): p50 / p99", `${fmt(one.p50, 1)} / ${fmt(one.p99, 1)} ms`],
    [`${FLEET} edges: p50`, `${fmt(many.p50, 1)} ms`],
    [`${FLEET} edges: p99`, `${fmt(many.p99, 1)} ms  ${verdict(many.p99, 2_000, false)}`],
    [`${FLEET} edges: until the last of them has it (median over changes)`, `${fmt(many.allIn, 1)} ms`],
    ["ratio p99 / one edge's p99", fmt(many.p99 / Math.max(one.p99, 1), 2)],
  ]);
}

export async function benchSync() {
  await initialSyncAndLatency();
  await reconnectBytes();
  await fleetLatency();
}

if (import.meta.main) await benchSync();
