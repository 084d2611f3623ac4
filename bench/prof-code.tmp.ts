import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { json, setupSystem } from "./lib.ts";
const dataDir = mkdtempSync(join(tmpdir(), "prof-"));
const port = 19555;
const p = Bun.spawn([process.execPath, "--cpu-prof-md", "--cpu-prof-dir=/tmp/prof", "--cpu-prof-interval=200", "src/main.ts", "--http-port", String(port), "--mqtt-port", "19556", "--mqtt-ws-port", "19557", "--mqtt-tls-port", "19558", "--mqtt-wss-port", "19559", "--data-dir", dataDir, "--log-level", "error"], { stdout: "inherit", stderr: "inherit" });
const url = `http://127.0.0.1:${port}`;
for (let i = 0; i < 100; i++) { try { if ((await fetch(url + "/health")).ok) break; } catch {} await Bun.sleep(100); }
const s = await setupSystem(url);
const dev = { "ClearBlade-DevToken": s.devToken };
await json(`${url}/admin/code/v/1/${s.systemKey}/trivial`, "POST", { code: "function trivial(req, resp){ resp.success('ok') }" }, dev);
const { role_id } = await json(`${url}/admin/user/${s.systemKey}/roles`, "POST", { name: "runner", services: [{ itemInfo: { name: "trivial" }, permissions: 1 }] }, dev);
await json(`${url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role_id] } } }, dev);
const script = `/tmp/prof-wrk.lua`;
await Bun.write(script, `wrk.method = "POST"\nwrk.body = "{}"\nwrk.headers["ClearBlade-UserToken"] = "${s.userToken}"\n`);
const w = Bun.spawnSync(["wrk", "-t1", "-c64", "-d6s", "-s", script, `${url}/api/v/1/code/${s.systemKey}/trivial`]);
console.log(w.stdout.toString());
p.kill("SIGTERM"); await p.exited;
