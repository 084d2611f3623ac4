// Shared benchmark helpers. Every benchmark measures its baseline in the same run and prints the
// ratio, because this machine is shared and absolute numbers drift.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "..");
// a relative OUTPOST_BIN is taken from where the bench started (processes start in their data directory)
export const BIN = process.env.OUTPOST_BIN ? resolve(process.env.OUTPOST_BIN) : join(ROOT, "dist/outpost-linux-x64");
export const BUN = process.execPath;

export const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!; };
export const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]!; };
export const fmt = (n: number, d = 0) => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });

// below the kernel's ephemeral range (32768 and up): an outgoing connection holding a server's port
// made a run fail now and then ("port ... did not open", a server exiting 2)
let nextPort = 10000 + Math.floor(Math.random() * 20000);
export const port = () => nextPort++;

export async function waitHttp(url: string, timeoutMs = 20_000, everyMs = 5): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try { if ((await fetch(url)).status === 200) return; } catch { /* not up */ }
    if (Date.now() > end) throw new Error(`${url} did not answer`);
    await Bun.sleep(everyMs);
  }
}

export interface Proc { pid: number; url: string; stop(): Promise<void>; rssKb(): number }

/** Starts the Outpost binary on fresh ports and an empty data directory (or the one given, to
 *  start it again on its data). */
export async function startOutpost(args: string[] = [], dir?: string): Promise<Proc & { httpPort: number; mqttPort: number; dataDir: string }> {
  const dataDir = dir ?? mkdtempSync(join(tmpdir(), "outpost-bench-"));
  const httpPort = port(), mqttPort = port(), wsPort = port();
  const p = Bun.spawn([BIN, "--http-port", String(httpPort), "--mqtt-port", String(mqttPort), "--mqtt-ws-port", String(wsPort),
    "--data-dir", dataDir, "--log-level", process.env.BENCH_LOG_LEVEL ?? "error", ...args], { cwd: dataDir, stdout: "ignore", stderr: "inherit" });
  const url = `http://127.0.0.1:${httpPort}`;
  await waitHttp(url + "/health");
  return { pid: p.pid, url, httpPort, mqttPort, dataDir, rssKb: () => rssKb(p.pid), stop: async () => { p.kill("SIGTERM"); await p.exited; } };
}

/** Starts a bun script from bench/baselines with a port argument. */
export async function startBaseline(script: string, args: string[] = [], health = "/"): Promise<Proc> {
  const httpPort = port();
  const p = Bun.spawn([BUN, join(ROOT, "bench/baselines", script), String(httpPort), ...args], { stdout: "ignore", stderr: "inherit" });
  const url = `http://127.0.0.1:${httpPort}`;
  await waitHttp(url + health);
  return { pid: p.pid, url, rssKb: () => rssKb(p.pid), stop: async () => { p.kill("SIGTERM"); await p.exited; } };
}

/** CPU time a process has used so far (user + system), in microseconds, from /proc (0 elsewhere).
 *  CPU per request drifts less than requests per second on a shared machine: time the load
 *  generator or a neighbour takes from the server does not count. */
export function cpuMicros(pid: number): number {
  try {
    const stat = require("node:fs").readFileSync(`/proc/${pid}/stat`, "utf8") as string;
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from the third on
    return (Number(f[11]) + Number(f[12])) * (1_000_000 / 100); // utime, stime in 100 Hz ticks
  } catch { return 0; }
}

/** The kernel's count of SYNs dropped because a listener's queue was full (TcpExt ListenOverflows),
 *  the whole network namespace's: other work on the machine adds to it. */
export function listenOverflows(): number {
  try {
    const lines = (require("node:fs").readFileSync("/proc/net/netstat", "utf8") as string).split("\n");
    const names = lines.find((l) => l.startsWith("TcpExt:"))!.split(" "), values = lines.filter((l) => l.startsWith("TcpExt:"))[1]!.split(" ");
    return Number(values[names.indexOf("ListenOverflows")] ?? NaN);
  } catch { return NaN; }
}

export function rssKb(pid: number): number {
  try {
    const s = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string;
    return Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
  } catch { return 0; }
}

export const hasWrk = () => Bun.spawnSync(["which", "wrk"]).exitCode === 0;

/** Requests per second of POST url with headers and a JSON body, from wrk (64 connections); any
 *  answer other than 2xx fails the benchmark. */
export async function loadPost(url: string, headers: Record<string, string>, seconds: number, body = "{}"): Promise<number> {
  if (Bun.spawnSync(["which", "wrk"]).exitCode !== 0) throw new Error("POST load needs wrk (apt-get install wrk)");
  const script = `/tmp/outpost-wrk-post-${process.pid}.lua`;
  await Bun.write(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\n${Object.entries(headers).map(([k, v]) => `wrk.headers["${k}"] = "${v}"`).join("\n")}\n`);
  const p = Bun.spawn(["wrk", "-t1", "-c64", `-d${seconds}s`, "-s", script, url], { stdout: "pipe", stderr: "ignore" });
  const out = await new Response(p.stdout).text();
  await p.exited;
  if (/Non-2xx/.test(out)) throw new Error("non-2xx responses: " + out);
  return Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
}

/** Requests per second of GET url with headers, from a separate process (wrk, or bench/load.ts). */
export async function load(url: string, headers: Record<string, string> = {}, seconds = 5, connections = 64): Promise<number> {
  if (hasWrk()) {
    const h = Object.entries(headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]);
    const p = Bun.spawnSync(["wrk", "-t1", `-c${connections}`, `-d${seconds}s`, ...h, url]);
    const out = p.stdout.toString();
    const m = /Requests\/sec:\s+([\d.]+)/.exec(out);
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
    if (non2xx) throw new Error(`load: ${non2xx[1]} non-2xx responses from ${url}`);
    if (!m) throw new Error("wrk output not understood: " + out);
    return Number(m[1]);
  }
  const p = Bun.spawnSync([BUN, join(ROOT, "bench/load.ts"), url, JSON.stringify(headers), String(seconds), String(connections)]);
  const r = JSON.parse(p.stdout.toString()) as { rps: number; errors: number };
  if (r.errors) throw new Error(`load: ${r.errors} failed requests from ${url}`);
  return r.rps;
}

/** Runs a and b in turns; the medians of each, and the median of the per-round ratios a/b (a round's
 *  two runs see about the same machine, so that ratio drifts least on a shared host). */
export async function alternate(a: () => Promise<number>, b: () => Promise<number>, rounds = 3): Promise<[number, number, number]> {
  const as: number[] = [], bs: number[] = [], ratios: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const x = await a(), y = await b();
    as.push(x); bs.push(y); ratios.push(y > 0 ? x / y : 0);
  }
  return [median(as), median(bs), median(ratios)];
}

/** A server's own CPU per request (µs) over one run of `load` (which answers req/s over `seconds`). */
export async function cpuPerRequest(pid: number, load: () => Promise<number>, seconds: number): Promise<number> {
  const c0 = cpuMicros(pid);
  const rps = await load();
  return (cpuMicros(pid) - c0) / (rps * seconds);
}

export async function json<T = any>(url: string, method = "GET", body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const t = await r.json();
  if (r.status !== 200) throw new Error(`${method} ${url}: ${r.status} ${JSON.stringify(t)}`);
  return t as T;
}

/** A developer, a system and a user on a running Outpost. */
let developers = 0;
export async function setupSystem(url: string) {
  const dev = await json(url + "/admin/reg", "POST", { email: `bench${Date.now()}-${developers++}@example.com`, password: "pw" });
  const sys = await json(url + "/admin/systemmanagement", "POST", { name: "bench" }, { "ClearBlade-DevToken": dev.dev_token });
  const keys = { "ClearBlade-SystemKey": sys.appID, "ClearBlade-SystemSecret": sys.appSecret };
  const user = await json(url + "/api/v/1/user/reg", "POST", { email: "u@example.com", password: "pw" }, keys);
  return { devToken: dev.dev_token as string, systemKey: sys.appID as string, systemSecret: sys.appSecret as string, userToken: user.user_token as string };
}

/** Every row with a target the reports of this process printed: what `npm run bench` sums up at
 *  its end. */
export const targetRows: { title: string; row: string; value: string; met: boolean }[] = [];

export function report(title: string, rows: [string, string][]) {
  for (const [row, value] of rows) {
    if (value.includes("ok (target")) targetRows.push({ title, row, value, met: true });
    else if (value.includes("BELOW TARGET")) targetRows.push({ title, row, value, met: false });
  }
  console.log(`\n== ${title}`);
  const w = Math.max(...rows.map((r) => r[0].length));
  for (const [k, v] of rows) console.log(`  ${k.padEnd(w)}  ${v}`);
}

export const verdict = (ratio: number, target: number, higherIsBetter = true) =>
  (higherIsBetter ? ratio >= target : ratio <= target) ? `ok (target ${higherIsBetter ? ">=" : "<="} ${target})` : `BELOW TARGET (${target})`;

/** A private redis-server on a free port, no persistence (a cluster's nodes share it). */
export async function redisServer() {
  const p = port();
  const proc = Bun.spawn(["redis-server", "--port", String(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore", stderr: "ignore" });
  for (let i = 0; i < 200; i++) {
    try { const s = await Bun.connect({ hostname: "127.0.0.1", port: p, socket: { data() {} } }); s.end(); break; } catch { await Bun.sleep(25); }
  }
  return { url: `redis://127.0.0.1:${p}`, stop: async () => { proc.kill("SIGKILL"); await proc.exited; } };
}
