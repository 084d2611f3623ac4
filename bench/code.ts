// bench/code.ts: requests/s of executing a trivial service over HTTP against a bare Elysia route
// (target ratio >= 0.6); the same service of system B while system A keeps its share of the code
// workers in busy loops, against B alone (target >= 0.4), and the p99 of GET /health under that
// load (target < 20 ms); a service doing one collection fetch with ClearBlade's blocking callback
// call against the same work through ClearBladeAsync (target >= 0.8); 1,000 idle stream services
// on one node (waiting in waitForMessage): resident memory per instance and the p99 of GET /health
// while they wait (target < 20 ms); the cost of a warm run in a sandbox and of a run's trip through
// the worker pool (measured in-process).
// Execution is a POST with a JSON parameters body, so the baseline is a bare Elysia POST route
// reading a JSON body and answering JSON; a GET route's figure is printed too (on Bun a POST costs
// about 1.7x a GET before any handler runs).
import { WorkerPool } from "../src/code/pool.ts";
import { paramsJson, type RunHooks, Sandbox } from "../src/code/sandbox.ts";
import { createLogger } from "../src/core/log.ts";
import { alternate, cpuMicros, cpuPerRequest, fmt, json, load, loadPost, median, pct, report, setupSystem, startBaseline, startOutpost, verdict } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

/** A req as the engine makes it for an HTTP call: one caller's context (serialized once per
 *  caller, as the engine caches it). */
const CONTEXT = JSON.stringify({
  systemKey: "9b79a67844ac845e38a1141c5b1486", systemSecret: "22F1FA1176DD928BAE64CC04842210", userEmail: "u@example.com", userid: "3b8a1cc577d55408937d39664c67cc",
  userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE", isLogging: false,
  caller: { userid: "3b8a1cc577d55408937d39664c67cc", userEmail: "u@example.com", userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE" },
});
const TRIVIAL = { libraries: [], service: { name: "triv", code: "function triv(req, resp){ resp.success(req.params.n) }" }, meta: {} };

/** µs per warm run of a pooled sandbox, in this thread (what a worker spends on a run). */
async function sandboxRun(): Promise<number> {
  const sb = await Sandbox.create(TRIVIAL, { memoryBytes: 64 << 20, sliceMs: 500 });
  const hooks: RunHooks = { host: (_op, _a, answer) => answer('{"ok":true,"data":null}'), log: () => {} };
  const req = (n: number) => ({ context: CONTEXT, params: paramsJson({ n }), instanceId: crypto.randomUUID() });
  for (let i = 0; i < 2000; i++) await sb.run("triv", req(i), hooks, 60_000);
  const N = 20_000;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await sb.run("triv", req(i), hooks, 60_000);
  const us = ((performance.now() - t0) / N) * 1000;
  sb.dispose();
  return us;
}

/** µs of a run through the worker pool: one at a time (a round trip), and 64 in flight (per run). */
async function poolRun(): Promise<[number, number]> {
  const pool = new WorkerPool({ workers: 2, memoryMb: 256, sandboxMemoryMb: 64, sliceMs: 500, maxShare: 0.5, queueMax: 1_000, log: createLogger("silent") });
  pool.start();
  await pool.ready();
  const spec = (n: number) => ({
    system: "bench", key: "bench/triv", version: "1", source: TRIVIAL, entry: "triv", context: CONTEXT, params: paramsJson({ n }),
    timeoutMs: 60_000, logs: false, instanceId: "bench", host: async () => '{"ok":true,"data":null}',
  });
  const one = async (n: number) => { for (let i = 0; i < n; i++) await pool.submit(spec(i)).done; };
  const inFlight = async (n: number) => { let i = 0; await Promise.all(Array.from({ length: 64 }, async () => { while (i < n) await pool.submit(spec(i++)).done; })); };
  await one(2_000);
  await inFlight(20_000);
  let t0 = performance.now();
  await one(5_000);
  const serial = ((performance.now() - t0) / 5_000) * 1000;
  t0 = performance.now();
  await inFlight(50_000);
  const parallel = ((performance.now() - t0) / 50_000) * 1000;
  await pool.stop();
  return [serial, parallel];
}

/** A developer's system with a trivial service a user may run; the URL and the user's headers. */
export async function trivialService(url: string) {
  const s = await setupSystem(url);
  const dev = { "ClearBlade-DevToken": s.devToken };
  await json(`${url}/admin/code/v/1/${s.systemKey}/trivial`, "POST", { code: "function trivial(req, resp){ resp.success('ok') }" }, dev);
  const { role_id } = await json(`${url}/admin/user/${s.systemKey}/roles`, "POST", { name: "runner", services: [{ itemInfo: { name: "trivial" }, permissions: 1 }] }, dev);
  await json(`${url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role_id] } } }, dev);
  const headers = { "ClearBlade-UserToken": s.userToken };
  const check = await json(`${url}/api/v/1/code/${s.systemKey}/trivial`, "POST", {}, headers);
  if (check.success !== true || check.results !== "ok") throw new Error("service check failed: " + JSON.stringify(check));
  return { s, dev, headers, url: `${url}/api/v/1/code/${s.systemKey}/trivial` };
}

/** Keeps `n` runs of a busy loop of system A going (each ends at its slice) and probes GET /health
 *  every 5 ms, until stopped: the probes' latencies in ms. */
function pressure(base: string, loopUrl: string, headers: Record<string, string>, n: number) {
  let stopped = false;
  const health: number[] = [];
  let loops = 0;
  const done = Promise.all([
    ...Array.from({ length: n }, async () => {
      while (!stopped) { await (await fetch(loopUrl, { method: "POST", headers, body: "{}" })).text(); loops++; }
    }),
    (async () => {
      while (!stopped) {
        const t0 = performance.now();
        await (await fetch(`${base}/health`)).text();
        health.push(performance.now() - t0);
        await Bun.sleep(5);
      }
    })(),
  ]);
  return { health, loops: () => loops, stop: async () => { stopped = true; await done; } };
}

export async function benchCode() {
  const o = await startOutpost();
  const baseline = await startBaseline("elysia-post.ts");
  try {
    const b = await trivialService(o.url);
    const { url, headers } = b;
    // steady state is what is compared: both servers run a short load first (JIT, pools, caches)
    await loadPost(url, headers, 2);
    await loadPost(baseline.url + "/", {}, 2);
    const [ours, bare, ratio] = await alternate(() => loadPost(url, headers, SECONDS), () => loadPost(baseline.url + "/", {}, SECONDS), 5);
    // the servers' own CPU per request, over one more run each
    const oursCpu = await cpuPerRequest(o.pid, () => loadPost(url, headers, SECONDS), SECONDS);
    const bareCpu = await cpuPerRequest(baseline.pid, () => loadPost(baseline.url + "/", {}, SECONDS), SECONDS);
    const bareGet = await load(baseline.url + "/", {}, SECONDS);

    // fairness: system A's busy loops on its share of the workers, B's trivial service under load
    const a = await setupSystem(o.url);
    const aDev = { "ClearBlade-DevToken": a.devToken };
    // (a loop runs to its execution_timeout, or to its slice while B's runs wait for its worker)
    await json(`${o.url}/admin/code/v/1/${a.systemKey}/spin`, "POST", { code: "function spin(req, resp){ while (true) {} }", execution_timeout: 2 }, aDev);
    const spin = `${o.url}/api/v/1/code/${a.systemKey}/spin`;
    const health: number[] = [];
    let loops = 0;
    const [withA, alone, fairness] = await alternate(async () => {
      const p = pressure(o.url, spin, aDev, 4);
      await Bun.sleep(200);
      const rps = await loadPost(url, headers, SECONDS);
      await p.stop();
      health.push(...p.health);
      loops += p.loops();
      return rps;
    }, () => loadPost(url, headers, SECONDS), 3);
    const healthP99 = pct(health, 0.99);
    if (loops === 0) throw new Error("system A's loops did not run");

    const [blocking, promised, blockingRatio] = await blockingVsAsync(o.url, b);
    const sandbox = await sandboxRun();
    const [serial, parallel] = await poolRun();
    report("Code: execute a trivial service over HTTP vs bare Elysia route", [
      ["outpost req/s (POST /api/v/1/code/...)", fmt(ours)],
      ["bare Elysia POST route req/s", fmt(bare)],
      ["ratio (median of 5 paired rounds)", `${fmt(ratio, 2)}  ${verdict(ratio, 0.6)}`],
      ["server CPU per request: outpost / bare", `${fmt(oursCpu, 1)} µs / ${fmt(bareCpu, 1)} µs  ratio ${fmt(bareCpu / oursCpu, 2)}`],
      ["(bare Elysia GET route req/s, for reference)", `${fmt(bareGet)}  ratio ${fmt(ours / bareGet, 2)}`],
      ["system B req/s while A loops on its share / alone", `${fmt(withA)} / ${fmt(alone)}`],
      ["ratio (median of 3 paired rounds)", `${fmt(fairness, 2)}  ${verdict(fairness, 0.4)}`],
      ["GET /health under that load: p50 / p99", `${fmt(median(health), 1)} ms / ${fmt(healthP99, 1)} ms  ${verdict(healthP99, 20, false)}`],
      ["one collection fetch: blocking callback req/s / ClearBladeAsync req/s", `${fmt(blocking)} / ${fmt(promised)}`],
      ["ratio (median of 3 paired rounds)", `${fmt(blockingRatio, 2)}  ${verdict(blockingRatio, 0.8)}`],
      ["warm run in a sandbox (a worker's part)", `${fmt(sandbox, 1)} µs`],
      ["run through the worker pool: one at a time / 64 in flight", `${fmt(serial, 1)} µs / ${fmt(parallel, 1)} µs per run`],
    ]);
  } finally {
    await o.stop();
    await baseline.stop();
  }
  const idle = await idleStreams(Number(process.env.BENCH_STREAMS ?? 1000));
  report("Code: idle stream services waiting in waitForMessage", [
    ["stream services running", fmt(idle.running)],
    ["resident memory: before / with them", `${fmt(idle.beforeMb, 1)} MB / ${fmt(idle.afterMb, 1)} MB`],
    ["per idle instance", `${fmt(idle.perInstanceKb)} KB`],
    ["time to start them all", `${fmt(idle.startMs)} ms`],
    ["server CPU while they wait (10 s)", `${fmt(idle.cpuPct, 1)} % of one core`],
    ["GET /health while they wait: p50 / p99", `${fmt(idle.p50, 1)} ms / ${fmt(idle.p99, 1)} ms  ${verdict(idle.p99, 20, false)}`],
    ["a bare Elysia GET in the same window: p50 / p99", `${fmt(idle.bareP50, 1)} ms / ${fmt(idle.bareP99, 1)} ms`],
    ["a message to every instance answered (echoes received)", `${fmt(idle.echoes)} of ${fmt(idle.running)}`],
  ]);
}

/** Requests/s of a service doing one collection fetch through ClearBlade's classic callback call
 *  (the run's stack waits for the answer) against the same work through ClearBladeAsync. */
export async function blockingVsAsync(url: string, b: Awaited<ReturnType<typeof trivialService>>): Promise<[number, number, number]> {
  const sk = b.s.systemKey;
  const col = await json(`${url}/admin/collectionmanagement`, "POST", { appID: sk, name: "readings" }, b.dev);
  await json(`${url}/api/v/1/data/${col.collectionID}`, "POST", [{}, {}, {}], b.dev);
  const make = async (name: string, code: string) => {
    await json(`${url}/admin/code/v/1/${sk}/${name}`, "POST", { code }, b.dev);
    const check = await json(`${url}/api/v/1/code/${sk}/${name}`, "POST", {}, b.dev);
    if (check.success !== true || check.results !== 3) throw new Error(`${name}: ${JSON.stringify(check)}`);
    return `${url}/api/v/1/code/${sk}/${name}`;
  };
  const blocking = await make("blocking", `function blocking(req, resp){ var rows; ClearBlade.Collection({ collectionName: "readings" }).fetch(ClearBlade.Query({ collectionName: "readings" }), function (err, d) { rows = d; }); resp.success(rows.DATA.length) }`);
  const promised = await make("promised", `function promised(req, resp){ ClearBladeAsync.Collection({ collectionName: "readings" }).fetch(ClearBladeAsync.Query({ collectionName: "readings" })).then(function (d) { resp.success(d.DATA.length) }) }`);
  await loadPost(blocking, b.dev, 2);
  await loadPost(promised, b.dev, 2);
  return alternate(() => loadPost(blocking, b.dev, SECONDS), () => loadPost(promised, b.dev, SECONDS), 3);
}

/** `n` stream services (10 systems, execution_timeout -1, auto_restart: started when saved), each
 *  waiting in a waitForMessage loop and echoing what it gets: the node's memory per instance, its
 *  CPU and /health while they wait, and one message to each answered. */
export async function idleStreams(n: number) {
  const o = await startOutpost(["--code-memory-mb", String(Math.max(256, Math.ceil(n * 2.5))), "--code-streams-max", String(n)]);
  const bare = await startBaseline("elysia.ts");
  try {
    const systems = await Promise.all(Array.from({ length: 10 }, () => setupSystem(o.url)));
    await json(`${o.url}/health`);
    await Bun.sleep(1_000);
    const beforeMb = o.rssKb() / 1024;
    const t0 = performance.now();
    const per = Math.ceil(n / systems.length);
    await Promise.all(systems.map(async (s, k) => {
      const dev = { "ClearBlade-DevToken": s.devToken };
      for (let i = 0; i < per && k * per + i < n; i++) {
        const name = `stream${i}`;
        await json(`${o.url}/admin/code/v/1/${s.systemKey}/${name}`, "POST", {
          execution_timeout: -1, auto_restart: true,
          code: `function ${name}(req, resp){ var m = ClearBlade.Messaging(); m.subscribe("in/${name}", function () {}); while (true) { m.waitForMessage(["in/${name}"], function (err, msg) { m.publish("out/${name}", msg); }); } }`,
        }, dev);
      }
    }));
    let running = 0;
    for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
      running = 0;
      for (const s of systems) running += Object.keys(await json(`${o.url}/codeadmin/v/3/running/${s.systemKey}`, "GET", undefined, { "ClearBlade-DevToken": s.devToken })).length;
      if (running >= n) break;
      await Bun.sleep(500);
    }
    // listed as they are submitted: they are all up once the node's CPU is idle again
    for (const deadline = Date.now() + 180_000; Date.now() < deadline;) {
      const c = cpuMicros(o.pid), w = performance.now();
      await Bun.sleep(1_000);
      if ((cpuMicros(o.pid) - c) / 1000 / (performance.now() - w) < 0.1) break;
    }
    const startMs = performance.now() - t0;
    const afterMb = o.rssKb() / 1024;
    // while they wait: the server's CPU, and /health probed every 20 ms, each probe followed by
    // one of a bare Elysia server (what the machine's own scheduling delays cost in that window)
    const c0 = cpuMicros(o.pid), w0 = performance.now();
    const health: number[] = [], bareHealth: number[] = [];
    const probe = async (url: string, into: number[]) => {
      const h0 = performance.now();
      await (await fetch(url)).text();
      into.push(performance.now() - h0);
    };
    while (performance.now() - w0 < 10_000) {
      await probe(`${o.url}/health`, health);
      await probe(`${bare.url}/`, bareHealth);
      await Bun.sleep(20);
    }
    const cpuPct = ((cpuMicros(o.pid) - c0) / 1000 / (performance.now() - w0)) * 100;
    // one message to each: every instance answers on its own topic
    const echoes = await echoAll(o.mqttPort, systems, per, n);
    return { running, beforeMb, afterMb, perInstanceKb: ((afterMb - beforeMb) * 1024) / Math.max(1, running), startMs, cpuPct, p50: median(health), p99: pct(health, 0.99),
      bareP50: median(bareHealth), bareP99: pct(bareHealth, 0.99), echoes };
  } finally {
    await o.stop();
    await bare.stop();
  }
}

/** Publishes one message to each stream service and counts the echoes that come back. */
async function echoAll(mqttPort: number, systems: { devToken: string; systemKey: string }[], per: number, n: number): Promise<number> {
  const { default: mqtt } = await import("mqtt");
  let echoes = 0;
  await Promise.all(systems.map(async (s, k) => {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: s.devToken, password: s.systemKey, reconnectPeriod: 0 });
    const count = Math.max(0, Math.min(per, n - k * per));
    let got = 0;
    const all = new Promise<void>((r) => { c.on("message", () => { got++; echoes++; if (got === count) r(); }); if (count === 0) r(); });
    await c.subscribeAsync("out/#", { qos: 0 });
    for (let i = 0; i < count; i++) c.publish(`in/stream${i}`, "ping", { qos: 0 });
    await Promise.race([all, Bun.sleep(20_000)]);
    await c.endAsync();
  }));
  return echoes;
}

/** POST load with wrk and a Lua script (requests/s). Spawned without blocking this process, so
 *  probes and pressure loops here keep running while it loads the server. */
if (import.meta.main) await benchCode();
