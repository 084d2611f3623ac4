// bench/data.ts:
//  1. rows/s inserted through the HTTP API (100 arrays of 1,000 rows) against raw batched inserts
//     with @libsql/client into the same kind of file database (target ratio >= 0.5);
//  2. req/s of an authenticated fetch of one row by an indexed column against a bare Elysia
//     route (target ratio >= 0.3).
import { createClient } from "@libsql/client";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alternate, fmt, json, load, report, setupSystem, startBaseline, startOutpost, verdict } from "./lib.ts";

const ROWS = Number(process.env.BENCH_ROWS ?? 100_000);
const BATCH = 1000;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

const makeRows = (n: number, offset = 0) => Array.from({ length: n }, (_, i) => ({
  sensor: `s-${offset + i}`, value: (offset + i) * 0.5, ts: new Date(1_700_000_000_000 + (offset + i) * 1000).toISOString(), ok: (i & 1) === 0,
}));

async function rawInsert(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "outpost-raw-"));
  const c = createClient({ url: `file:${dir}/raw.db` });
  await c.execute("PRAGMA journal_mode=WAL");
  await c.execute("CREATE TABLE t (item_id TEXT PRIMARY KEY NOT NULL, sensor TEXT, value REAL, ts TEXT, ok INTEGER, _hlc TEXT)");
  const t0 = performance.now();
  for (let i = 0; i < ROWS; i += BATCH) {
    await c.batch(makeRows(BATCH, i).map((r) => ({ sql: "INSERT INTO t VALUES (?,?,?,?,?,?)", args: [crypto.randomUUID(), r.sensor, r.value, r.ts, r.ok ? 1 : 0, null] })), "write");
  }
  const rate = ROWS / ((performance.now() - t0) / 1000);
  c.close();
  rmSync(dir, { recursive: true, force: true });
  return rate;
}

export async function benchData() {
  const o = await startOutpost();
  const baseline = await startBaseline("elysia.ts");
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    const mk = async (name: string) => {
      const { collectionID } = await json(o.url + "/admin/collectionmanagement", "POST", { name, appID: s.systemKey }, dev);
      for (const [n, t] of [["sensor", "string"], ["value", "double"], ["ts", "timestamp"], ["ok", "bool"]])
        await json(o.url + "/admin/collectionmanagement", "PUT", { id: collectionID, addColumn: { name: n, type: t } }, dev);
      return collectionID as string;
    };
    // 1. inserts, alternating with the raw baseline
    let round = 0;
    const httpInsert = async () => {
      const id = await mk(`ingest${round++}`);
      const t0 = performance.now();
      for (let i = 0; i < ROWS; i += BATCH) {
        const r = await fetch(`${o.url}/api/v/1/data/${id}`, { method: "POST", headers: { ...dev, "content-type": "application/json" }, body: JSON.stringify(makeRows(BATCH, i)) });
        if (r.status !== 200) throw new Error(`insert failed: ${r.status} ${await r.text()}`);
        await r.arrayBuffer();
      }
      return ROWS / ((performance.now() - t0) / 1000);
    };
    const [ours, raw] = await alternate(httpInsert, rawInsert, 3);
    report(`Data: inserting ${fmt(ROWS)} rows in arrays of ${BATCH}`, [
      ["HTTP API rows/s", fmt(ours)],
      ["raw @libsql/client batch rows/s", fmt(raw)],
      ["ratio", `${fmt(ours / raw, 2)}  ${verdict(ours / raw, 0.5)}`],
    ]);

    // 2. fetch one row by an indexed column, as a user allowed to read the collection
    const id = await mk("lookup");
    for (let i = 0; i < 10_000; i += BATCH) await json(`${o.url}/api/v/1/data/${id}`, "POST", makeRows(BATCH, i), dev);
    await json(`${o.url}/api/v/4/data/${s.systemKey}/lookup/index?columnName=sensor`, "POST", undefined, dev);
    const { role_id } = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", { name: "reader", collections: [{ itemInfo: { id }, permissions: 1 }] }, dev);
    await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role_id] } } }, dev);
    const q = encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ sensor: "s-4242" }] }]] }));
    const url = `${o.url}/api/v/1/collection/${s.systemKey}/lookup?query=${q}`;
    const check = await json(url, "GET", undefined, { "ClearBlade-UserToken": s.userToken });
    if (check.TOTAL !== 1 || check.DATA[0].sensor !== "s-4242") throw new Error("fetch check failed: " + JSON.stringify(check));
    await load(url, { "ClearBlade-UserToken": s.userToken }, 1);
    const [fetchRps, bare] = await alternate(
      () => load(url, { "ClearBlade-UserToken": s.userToken }, SECONDS),
      () => load(baseline.url + "/", {}, SECONDS),
    );
    report("Data: fetch one row by an indexed column (user token) vs bare Elysia route", [
      ["outpost req/s", fmt(fetchRps)],
      ["bare Elysia req/s", fmt(bare)],
      ["ratio", `${fmt(fetchRps / bare, 2)}  ${verdict(fetchRps / bare, 0.3)}`],
    ]);
  } finally {
    await o.stop();
    await baseline.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) await benchData();
