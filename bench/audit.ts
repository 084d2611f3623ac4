// bench/audit.ts: a write-heavy load with the audit trail on against the same load with it off
// (--audit off), two nodes started side by side in the same run. The load: one-row collection item
// inserts over HTTP (POST /api/v/1/data/{id}), CONNECTIONS at a time, for SECONDS, alternately on
// each node; each insert is one audited change. Target: inserts/s with audit >= 0.9 x without.
// The trail is then checked to hold a row for every insert the audited node answered. The server's
// CPU time per insert is shown too (on a shared machine it drifts less than inserts/s), and the
// inserts' p99 latency (a batch of rows written on the API's thread would show there).
import { alternate, cpuMicros, fmt, json, median, pct, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** Inserts/s of one-row POSTs against `url` for `seconds`, `connections` in flight, and each
 *  insert's latency (ms). */
async function inserts(url: string, headers: Record<string, string>, seconds: number, connections: number): Promise<{ rate: number; n: number; ms: number[] }> {
  const until = performance.now() + seconds * 1000;
  let n = 0, i = 0;
  const ms: number[] = [];
  const worker = async () => {
    while (performance.now() < until) {
      const s0 = performance.now();
      const r = await fetch(url, { method: "POST", headers, body: JSON.stringify({ sensor: `s-${i++}`, value: i * 0.5 }) });
      if (r.status !== 200) throw new Error(`insert failed: ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
      ms.push(performance.now() - s0);
      n++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: connections }, worker));
  return { rate: n / ((performance.now() - t0) / 1000), n, ms };
}

export async function benchAudit() {
  const on = await startOutpost([]);
  const off = await startOutpost(["--audit", "off"]);
  try {
    const target = async (o: { url: string }) => {
      const s = await setupSystem(o.url);
      const dev = { "ClearBlade-DevToken": s.devToken };
      const { collectionID } = await json(o.url + "/admin/collectionmanagement", "POST", { name: "writes", appID: s.systemKey }, dev);
      for (const [n, t] of [["sensor", "string"], ["value", "double"]])
        await json(o.url + "/admin/collectionmanagement", "PUT", { id: collectionID, addColumn: { name: n, type: t } }, dev);
      return { s, url: `${o.url}/api/v/1/data/${collectionID}`, headers: { ...dev, "content-type": "application/json" }, collectionID: collectionID as string };
    };
    const a = await target(on), b = await target(off);
    // warm both (JIT, caches, the database files)
    await inserts(a.url, a.headers, 1, CONNECTIONS);
    await inserts(b.url, b.headers, 1, CONNECTIONS);
    let audited = 0;
    const cpu: { on: number[]; off: number[] } = { on: [], off: [] };
    const p99: { on: number[]; off: number[] } = { on: [], off: [] };
    const run = async (o: { pid: number }, t: typeof a, into: number[], tail: number[]) => {
      const c0 = cpuMicros(o.pid);
      const r = await inserts(t.url, t.headers, SECONDS, CONNECTIONS);
      into.push((cpuMicros(o.pid) - c0) / r.n);
      tail.push(pct(r.ms, 0.99));
      return r;
    };
    const [withAudit, without, ratio] = await alternate(
      async () => { const r = await run(on, a, cpu.on, p99.on); audited += r.n; return r.rate; },
      async () => (await run(off, b, cpu.off, p99.off)).rate,
      ROUNDS,
    );
    const q = encodeURIComponent(JSON.stringify({ FILTERS: [[{ EQ: [{ asset_id: a.collectionID }] }, { EQ: [{ action_type: "Create" }] }]] }));
    const { count } = await json(`${on.url}/admin/audit/${a.s.systemKey}/count?query=${q}`, "GET", undefined, { "ClearBlade-DevToken": a.s.devToken });
    // (the warm-up's inserts are audited too)
    if (count < audited) throw new Error(`the trail holds ${count} insert rows for at least ${audited} inserts`);
    report(`Audit: one-row inserts over HTTP, ${CONNECTIONS} at a time, audit on vs --audit off`, [
      ["inserts/s, audit on", fmt(withAudit)],
      ["inserts/s, audit off", fmt(without)],
      ["insert latency p99 (median of the rounds), on / off", `${fmt(median(p99.on), 1)} ms / ${fmt(median(p99.off), 1)} ms`],
      ["server CPU µs/insert, on / off", `${fmt(median(cpu.on))} / ${fmt(median(cpu.off))} (ratio ${fmt(median(cpu.off) / median(cpu.on), 2)})`],
      ["audit rows written", `${fmt(count)} (every insert's)`],
      ["ratio (median of the rounds' on/off)", `${fmt(ratio, 2)}  ${verdict(ratio, 0.9)}`],
    ]);
  } finally {
    await on.stop();
    await off.stop();
  }
}
