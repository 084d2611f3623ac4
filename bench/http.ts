// bench/http.ts: authenticated GET /api/v/1/user/info on the Outpost binary against a bare Elysia
// route (target ratio >= 0.85); the binary's cold start to the first 200 (target median < 200 ms);
// its size (target under 125 MB) and idle memory (an edge's, target under 70 MB).
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, alternate, fmt, load, median, port, report, setupSystem, startBaseline, startOutpost, verdict } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

export async function benchHttp() {
  const outpost = await startOutpost();
  const baseline = await startBaseline("elysia.ts");
  try {
    const s = await setupSystem(outpost.url);
    const headers = { "ClearBlade-UserToken": s.userToken };
    // warm both up
    await load(outpost.url + "/api/v/1/user/info", headers, 1);
    await load(baseline.url + "/", {}, 1);
    // the median of paired rounds' ratios: a round's two runs see the same neighbours
    const [ours, bare, ratio] = await alternate(
      () => load(outpost.url + "/api/v/1/user/info", headers, SECONDS),
      () => load(baseline.url + "/", {}, SECONDS),
      5,
    );
    report("HTTP: authenticated GET /api/v/1/user/info vs bare Elysia route", [
      ["outpost req/s", fmt(ours)],
      ["bare Elysia req/s", fmt(bare)],
      ["ratio (median of 5 paired rounds)", `${fmt(ratio, 2)}  ${verdict(ratio, 0.85)}`],
    ]);
  } finally {
    await outpost.stop();
    await baseline.stop();
  }

  // cold start: spawn -> first 200 on /health, polling every 2 ms, from an empty directory
  const times: number[] = [];
  let idleKb = 0;
  for (let i = 0; i < 15; i++) {
    const dir = mkdtempSync(join(tmpdir(), "outpost-cold-"));
    let hp = 0, t0 = 0, p: ReturnType<typeof Bun.spawn> | undefined;
    for (let attempt = 0; ; attempt++) {
      hp = port();
      t0 = performance.now();
      p = Bun.spawn([BIN, "--http-port", String(hp), "--mqtt-port", String(port()), "--mqtt-ws-port", String(port()), "--log-level", "error"], { cwd: dir, stdout: "ignore", stderr: "ignore" });
      let up = false;
      for (;;) {
        try { if ((await fetch(`http://127.0.0.1:${hp}/health`)).status === 200) { up = true; break; } } catch { await Bun.sleep(2); }
        if (p.exitCode !== null) break; // a port another process holds (exit 2): again on others
        if (performance.now() - t0 > 10_000) throw new Error("cold start timed out");
      }
      if (up) break;
      if (attempt >= 3) throw new Error(`the binary exited with ${p.exitCode}`);
    }
    times.push(performance.now() - t0);
    if (i === 0) { await Bun.sleep(1000); idleKb = Number(/VmRSS:\s+(\d+)/.exec(await Bun.file(`/proc/${p.pid}/status`).text())?.[1] ?? 0); }
    p.kill("SIGKILL");
    await p.exited;
    rmSync(dir, { recursive: true, force: true });
  }
  const med = median(times);
  // an edge at rest: its platform link down (nothing listens there), nothing to run
  const edge = await startOutpost(["--mode", "edge", "--platform-url", `http://127.0.0.1:${port()}`, "--system-key", "0".repeat(30), "--edge-name", "bench", "--edge-token", "bench-edge-token"]);
  await Bun.sleep(3000);
  const edgeKb = edge.rssKb();
  await edge.stop();
  // the size target is in decimal megabytes (125,000,000 bytes); MiB shown beside it
  const sizeBytes = statSync(BIN).size, sizeMb = sizeBytes / 1e6;
  report("Binary cold start, size and idle memory", [
    ["cold start to first 200, median of 15", `${fmt(med, 1)} ms  ${verdict(med, 200, false)}`],
    ["cold start min / max", `${fmt(Math.min(...times), 1)} / ${fmt(Math.max(...times), 1)} ms`],
    ["binary size", `${fmt(sizeMb, 1)} MB (${fmt(sizeBytes / (1024 * 1024), 1)} MiB)  ${verdict(sizeMb, 125, false)}`],
    ["idle RSS of a platform after start", `${fmt(idleKb / 1024, 1)} MB`],
    ["idle RSS of an edge after start", `${fmt(edgeKb / 1024, 1)} MB  ${verdict(edgeKb / 1024, 70, false)}`],
  ]);
}

if (import.meta.main) await benchHttp();
