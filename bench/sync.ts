// bench/sync.ts: an initial sync of 100,000 rows to a new edge (rows/s) against raw batched
// inserts into the edge's own kind of database (target ratio >= 0.5), and the latency of one
// platform change reaching the edge, p50 and p99 (targets 50 ms and 250 ms on loopback).
import { createClient } from "@libsql/client";
import { join } from "node:path";
import { fmt, json, pct, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const ROWS = Number(process.env.BENCH_SYNC_ROWS ?? 100_000);
const CHANGES = Number(process.env.BENCH_SYNC_CHANGES ?? 200);

const makeRows = (n: number, offset: number) => Array.from({ length: n }, (_, i) => ({ sensor: `s-${offset + i}`, value: (offset + i) * 0.5, ts: new Date(1_700_000_000_000 + (offset + i) * 1000).toISOString(), ok: (i & 1) === 0 }));

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

export async function benchSync() {
  const P = await startOutpost();
  let E: Awaited<ReturnType<typeof startOutpost>> | undefined;
  try {
    const s = await setupSystem(P.url);
    const D = { "ClearBlade-DevToken": s.devToken };
    const { collectionID } = await json(`${P.url}/admin/collectionmanagement`, "POST", { name: "bulk", appID: s.systemKey,
      columns: [{ name: "sensor", type: "string" }, { name: "value", type: "double" }, { name: "ts", type: "timestamp" }, { name: "ok", type: "bool" }] }, D);
    await json(`${P.url}/admin/edges/${s.systemKey}/bench`, "POST", { token: "bench-edge-token" }, D);
    await json(`${P.url}/admin/edges/template/${s.systemKey}/bench`, "PUT", { add: [{ def_module: "collection", def_name: "bulk", mode: "sync_to_edge" }] }, D);
    for (let i = 0; i < ROWS; i += 1000) await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", makeRows(1000, i), D);

    // initial sync: from the edge's start to every row on it
    const t0 = performance.now();
    E = await startOutpost(["--mode", "edge", "--platform-url", P.url, "--system-key", s.systemKey, "--edge-name", "bench", "--edge-token", "bench-edge-token"]);
    const me = await json(`${P.url}/admin/userinfo`, "GET", undefined, D);
    let ED: Record<string, string> | undefined;
    for (;;) {
      if (!ED) {
        const r = await fetch(`${E.url}/admin/auth`, { method: "POST", body: JSON.stringify({ email: me.email, password: "pw" }) });
        if (r.status === 200) ED = { "ClearBlade-DevToken": ((await r.json()) as { dev_token: string }).dev_token };
      } else {
        const r = await fetch(`${E.url}/api/v/2/collection/${s.systemKey}/bulk/count`, { headers: ED });
        if (r.status === 200 && ((await r.json()) as { count: number }).count === ROWS) break;
      }
      if (performance.now() - t0 > 300_000) throw new Error("initial sync did not finish in 5 minutes");
      await Bun.sleep(20);
    }
    const syncRate = ROWS / ((performance.now() - t0) / 1000);
    const raw = await rawInsert(E.dataDir);
    report(`Sync: initial sync of ${fmt(ROWS)} rows to a new edge`, [
      ["edge rows/s (start to last row)", fmt(syncRate)],
      ["raw batched inserts into the edge's kind of database rows/s", fmt(raw)],
      ["ratio", `${fmt(syncRate / raw, 2)}  ${verdict(syncRate / raw, 0.5)}`],
    ]);

    // latency of one change
    const lat: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      const marker = `lat-${i}`;
      const q = encodeURIComponent(JSON.stringify([[{ EQ: [{ sensor: marker }] }]]));
      const t = performance.now();
      await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", { sensor: marker, value: i }, D);
      for (;;) {
        const r = await fetch(`${E.url}/api/v/2/collection/${s.systemKey}/bulk/count?query=${q}`, { headers: ED! });
        if (((await r.json()) as { count: number }).count === 1) break;
        if (performance.now() - t > 10_000) throw new Error("a change did not reach the edge in 10 s");
      }
      lat.push(performance.now() - t);
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

if (import.meta.main) await benchSync();
