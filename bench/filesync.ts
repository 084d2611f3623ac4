// bench/filesync.ts: a file written to a bucket set's outbox on an edge, until it is in the set's
// inbox/<edge>/ on the platform (both real processes on loopback: copied aside and hashed on the
// edge, sent in chunks over the sync link, written to a part file, hashed again and stored), in
// MB/s, against a raw copy of the same bytes over the same loopback: an HTTP PUT of the file from
// disk to a bare Bun server that streams it to disk. Target ratio >= 0.5. Arrival is the time the
// platform's sync status gives the file's transfer when it was stored. Also the CPU time each
// path takes per MB (its two processes), which other work on the machine moves less.
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alternate, cpuMicros, fmt, json, median, report, setupSystem, startBaseline, startOutpost, verdict } from "./lib.ts";

const MB = 1024 * 1024;
const SIZE = Number(process.env.BENCH_FILESYNC_MB ?? 20) * MB;
const ROUNDS = Number(process.env.BENCH_FILESYNC_ROUNDS ?? 3);

export async function benchFilesync() {
  const P = await startOutpost(["--file-sync-max-bytes", String(2 * SIZE)]);
  const raw = await startBaseline("file-put.ts");
  let E: Awaited<ReturnType<typeof startOutpost>> | null = null;
  try {
    const s = await setupSystem(P.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    const set = "bench";
    await json(`${P.url}/api/v/4/bucket_sets/${s.systemKey}`, "POST", { name: set, platform_storage: "local", edge_storage: "local" }, dev);
    await json(`${P.url}/admin/edges/${s.systemKey}/gw`, "POST", { token: "gw-token-1" }, dev);
    await json(`${P.url}/admin/edges/template/${s.systemKey}/gw`, "PUT", { add: [{ def_module: "bucketset", def_name: set, mode: "sync_to_edge" }] }, dev);
    E = await startOutpost(["--mode", "edge", "--platform-url", P.url, "--system-key", s.systemKey, "--edge-name", "gw", "--edge-token", "gw-token-1",
      "--max-file-mb", String(Math.ceil((SIZE + MB) / MB)), ...(process.env.BENCH_FILESYNC_WINDOW ? ["--file-sync-inflight-bytes", process.env.BENCH_FILESYNC_WINDOW] : [])]);
    const edgeUrl = E.url;
    // the set reaches the edge with the template; the developer signs in there (checked by the platform)
    let edgeDev: Record<string, string> = {};
    for (let i = 0; ; i++) {
      const a = await fetch(`${edgeUrl}/admin/auth`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ email: (await whoami(P.url, s.devToken)), password: "pw" }) });
      if (a.ok) { edgeDev = { "ClearBlade-DevToken": ((await a.json()) as { dev_token: string }).dev_token }; const st = await fetch(`${edgeUrl}/api/v/4/bucket_sets/${s.systemKey}/${set}`, { headers: edgeDev }); if (st.ok) break; }
      if (i > 400) throw new Error("the edge did not get the bucket set");
      await Bun.sleep(50);
    }
    const bytes = randomBytes(SIZE);
    const contents = bytes.toString("base64");
    const src = join(mkdtempSync(join(tmpdir(), "outpost-bench-file-")), "file.bin");
    writeFileSync(src, bytes);
    let round = 0;
    // CPU time each way per MB (both processes of each path), which drifts less than MB/s when
    // other work shares the machine
    const cpu = { sync: [] as number[], put: [] as number[] };
    const cpuNow = (pids: number[], self = false) => pids.reduce((n, pid) => n + cpuMicros(pid), 0) + (self ? process.cpuUsage().user + process.cpuUsage().system : 0);

    const viaSync = async () => {
      const path = `f${round++}.bin`;
      const w = await fetch(`${edgeUrl}/api/v/4/bucket_sets/${s.systemKey}/${set}/file/create`, { method: "POST", headers: { ...edgeDev, "Content-Type": "application/json" },
        body: JSON.stringify({ box: "outbox", path, contents }) });
      if (!w.ok) throw new Error(`write on the edge: ${w.status} ${await w.text()}`);
      // from the moment the file is in the outbox to the time the platform's status says it was
      // stored (polled gently: a tight poll would take the platform's CPU from the transfer)
      const c0 = cpuNow([E!.pid, P.pid]);
      const t0 = Date.now();
      // (a cheap stat first; the status, with its time, once the file is there)
      for (;;) {
        const m = await fetch(`${P.url}/api/v/4/bucket_sets/${s.systemKey}/${set}/file/meta?box=inbox&path=gw/${path}`, { headers: dev });
        await m.arrayBuffer();
        if (m.ok) break;
        if (Date.now() - t0 > 120_000) throw new Error("the file did not arrive");
        await Bun.sleep(100);
      }
      const cpuUsed = cpuNow([E!.pid, P.pid]) - c0;
      const st = await json<any[]>(`${P.url}/admin/${s.systemKey}/sync/edge/status/gw`, "GET", undefined, dev);
      const f = st.find((a) => a.asset_type === "file" && a.asset_name === `${set}/${path}`);
      if (f?.status !== "synced") throw new Error(`the file is there but its transfer is ${f?.status}: ${f?.last_error}`);
      cpu.sync.push(cpuUsed / 1000 / (SIZE / MB));
      return SIZE / MB / ((Date.parse(f.updated_at) - t0) / 1000);
    };
    const viaPut = async () => {
      const c0 = cpuNow([raw.pid], true);
      const t0 = performance.now();
      const r = await fetch(`${raw.url}/put`, { method: "PUT", body: Bun.file(src) });
      await r.json();
      cpu.put.push((cpuNow([raw.pid], true) - c0) / 1000 / (SIZE / MB));
      return SIZE / MB / ((performance.now() - t0) / 1000);
    };
    await viaSync(); await viaPut(); // warm both paths
    cpu.sync.length = cpu.put.length = 0;
    const [sync, put, ratio] = await alternate(viaSync, viaPut, ROUNDS);
    report(`File sync: ${fmt(SIZE / MB)} MB from an edge's outbox to the platform's inbox`, [
      ["edge -> platform (file sync)", `${fmt(sync)} MB/s`],
      ["raw HTTP PUT to a bare server", `${fmt(put)} MB/s`],
      ["ratio", `${fmt(ratio, 2)}  ${verdict(ratio, 0.5)}`],
      ["CPU ms per MB, file sync (edge + platform)", fmt(median(cpu.sync), 2)],
      ["CPU ms per MB, raw PUT (client + server)", fmt(median(cpu.put), 2)],
      ["CPU ratio (raw / file sync)", fmt(median(cpu.put) / median(cpu.sync), 2)],
    ]);
  } finally {
    await E?.stop();
    await raw.stop();
    await P.stop();
  }
}

async function whoami(url: string, token: string): Promise<string> {
  return (await json<{ email: string }>(`${url}/admin/userinfo`, "GET", undefined, { "ClearBlade-DevToken": token })).email;
}

if (import.meta.main) await benchFilesync();
