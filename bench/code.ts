// bench/code.ts: requests/s of executing a trivial service over HTTP against a bare Elysia route
// (target ratio >= 0.4), and the engine's overhead per warm call in microseconds (a pooled
// sandbox running a trivial service, measured in-process).
// Execution is a POST with a JSON parameters body, so the baseline is a bare Elysia POST route
// reading a JSON body and answering JSON; a GET route's figure is printed too (on Bun a POST costs
// about 1.7x a GET before any handler runs).
import { paramsJson, type RunHooks, Sandbox } from "../src/code/sandbox.ts";
import { alternate, cpuMicros, fmt, json, load, report, setupSystem, startBaseline, startOutpost, verdict } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

async function engineOverhead(): Promise<number> {
  const sb = await Sandbox.create({ libraries: [], service: { name: "triv", code: "function triv(req, resp){ resp.success(req.params.n) }" }, meta: {} }, { memoryBytes: 64 << 20, sliceMs: 500 });
  const hooks: RunHooks = { host: (_op, _a, answer) => answer('{"ok":true,"data":null}'), log: () => {} };
  // a req as the engine makes it for an HTTP call: one caller's context (serialized once per
  // caller, as the engine caches it), fresh parameters and instance id each run
  const context = JSON.stringify({
    systemKey: "9b79a67844ac845e38a1141c5b1486", systemSecret: "22F1FA1176DD928BAE64CC04842210", userEmail: "u@example.com", userid: "3b8a1cc577d55408937d39664c67cc",
    userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE", isLogging: false,
    caller: { userid: "3b8a1cc577d55408937d39664c67cc", userEmail: "u@example.com", userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE" },
  });
  const req = (n: number) => ({ context, params: paramsJson({ n }), instanceId: crypto.randomUUID() });
  for (let i = 0; i < 2000; i++) await sb.run("triv", req(i), hooks, 60_000);
  const N = 20_000;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await sb.run("triv", req(i), hooks, 60_000);
  const us = ((performance.now() - t0) / N) * 1000;
  sb.dispose();
  return us;
}

export async function benchCode() {
  const o = await startOutpost();
  const baseline = await startBaseline("elysia-post.ts");
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    await json(`${o.url}/admin/code/v/1/${s.systemKey}/trivial`, "POST", { code: "function trivial(req, resp){ resp.success('ok') }" }, dev);
    const { role_id } = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", { name: "runner", services: [{ itemInfo: { name: "trivial" }, permissions: 1 }] }, dev);
    await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role_id] } } }, dev);
    const headers = { "ClearBlade-UserToken": s.userToken };
    const check = await json(`${o.url}/api/v/1/code/${s.systemKey}/trivial`, "POST", {}, headers);
    if (check.success !== true || check.results !== "ok") throw new Error("service check failed: " + JSON.stringify(check));
    // wrk sends GET; the execute route is POST: use a Lua-free trick, a second process posting in a loop
    const url = `${o.url}/api/v/1/code/${s.systemKey}/trivial`;
    // steady state is what is compared: both servers run a short load first (JIT, pools, caches)
    await loadPost(url, headers, 2);
    await loadPost(baseline.url + "/", {}, 2);
    const [ours, bare, ratio] = await alternate(() => loadPost(url, headers, SECONDS), () => loadPost(baseline.url + "/", {}, SECONDS), 5);
    // the servers' own CPU per request, over one more run each
    const cpuPerRequest = async (pid: number, run: () => Promise<number>) => {
      const c0 = cpuMicros(pid);
      const rps = await run();
      return (cpuMicros(pid) - c0) / (rps * SECONDS);
    };
    const oursCpu = await cpuPerRequest(o.pid, () => loadPost(url, headers, SECONDS));
    const bareCpu = await cpuPerRequest(baseline.pid, () => loadPost(baseline.url + "/", {}, SECONDS));
    const bareGet = await load(baseline.url + "/", {}, SECONDS);
    const overhead = await engineOverhead();
    report("Code: execute a trivial service over HTTP vs bare Elysia route", [
      ["outpost req/s (POST /api/v/1/code/...)", fmt(ours)],
      ["bare Elysia POST route req/s", fmt(bare)],
      ["ratio (median of 5 paired rounds)", `${fmt(ratio, 2)}  ${verdict(ratio, 0.4)}`],
      ["server CPU per request: outpost / bare", `${fmt(oursCpu, 1)} µs / ${fmt(bareCpu, 1)} µs  ratio ${fmt(bareCpu / oursCpu, 2)}`],
      ["(bare Elysia GET route req/s, for reference)", `${fmt(bareGet)}  ratio ${fmt(ours / bareGet, 2)}`],
      ["engine overhead per warm call", `${fmt(overhead, 1)} µs`],
    ]);
  } finally {
    await o.stop();
    await baseline.stop();
  }
}

/** POST load: wrk with a Lua script when wrk is installed, else the bun load generator. */
async function loadPost(url: string, headers: Record<string, string>, seconds: number): Promise<number> {
  if (Bun.spawnSync(["which", "wrk"]).exitCode === 0) {
    const script = `/tmp/outpost-wrk-post-${process.pid}.lua`;
    await Bun.write(script, `wrk.method = "POST"\nwrk.body = "{}"\n${Object.entries(headers).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`).join("\n")}\n`);
    const p = Bun.spawnSync(["wrk", "-t1", "-c64", `-d${seconds}s`, "-s", script, url]);
    const out = p.stdout.toString();
    if (/Non-2xx/.test(out)) throw new Error("non-2xx responses: " + out);
    return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
  }
  throw new Error("bench/code.ts needs wrk for POST load (apt-get install wrk)");
}

if (import.meta.main) await benchCode();
