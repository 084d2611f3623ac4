// npm run bench: every benchmark, one after another. `npm run bench -- http` runs one.
import { existsSync } from "node:fs";
import { BIN, hasWrk, targetRows } from "./lib.ts";
import { benchData } from "./data.ts";
import { benchHttp } from "./http.ts";
import { benchMqtt } from "./mqtt.ts";
import { benchMqttConns } from "./mqttConns.ts";
import { benchCode } from "./code.ts";
import { benchSync } from "./sync.ts";
import { benchThrottle } from "./throttle.ts";
import { benchScale } from "./scale.ts";
import { benchCluster } from "./cluster.ts";
import { benchAudit } from "./audit.ts";
import { benchFilesync } from "./filesync.ts";
import { benchCache } from "./cache.ts";
import { benchFleet } from "./fleet.ts";

const benches: Record<string, () => Promise<void>> = { http: benchHttp, data: benchData, mqtt: benchMqtt, mqttconns: benchMqttConns, code: benchCode, sync: benchSync, throttle: benchThrottle, scale: benchScale, cluster: benchCluster, audit: benchAudit, filesync: benchFilesync, cache: benchCache, fleet: benchFleet };
const pick = process.argv.slice(2);
if (!existsSync(BIN)) {
  const b = Bun.spawnSync([process.execPath, "scripts/build.ts"], { stdout: "inherit", stderr: "inherit" });
  if (b.exitCode !== 0) process.exit(1);
}
if (!hasWrk()) console.log("(wrk not installed: using bench/load.ts as the load generator; `apt-get install wrk` gives steadier numbers)");
for (const [name, fn] of Object.entries(benches)) if (!pick.length || pick.includes(name)) await fn();

// the targets at a glance, as a markdown table (what the README's performance table is made from)
if (targetRows.length) {
  const met = targetRows.filter((t) => t.met).length;
  console.log(`\n== Targets: ${met} of ${targetRows.length} met\n\n| benchmark | figure | result |\n|---|---|---|`);
  for (const t of targetRows) console.log(`| ${t.title} | ${t.row} | ${t.value.replace(/\s+/g, " ").replace(/\|/g, "/")} |`);
}
