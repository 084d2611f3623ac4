// What the edge benchmarks share (bench/sync.ts, bench/scale.ts, bench/fleet.ts): a process of the
// binary that can be restarted on its data, the times a real edge logs for what it applied, and
// the simulated edges of bench/simEdges.ts driven from here.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, cpuMicros, port, rssKb, waitHttp } from "./lib.ts";

/** A process of the binary on a fixed port and data directory (to restart it), its log kept. */
export class Node {
  private p: ReturnType<typeof spawn> | null = null;
  out = "";
  readonly httpPort = port();
  readonly dir = mkdtempSync(join(tmpdir(), "outpost-bench-sync-"));
  constructor(readonly args: string[]) {}
  get url() { return `http://127.0.0.1:${this.httpPort}`; }
  rssKb() { return this.p?.pid ? rssKb(this.p.pid) : 0; }
  /** the process's CPU time so far (user and system, ms) */
  cpuMs() { return this.p?.pid ? cpuMicros(this.p.pid) / 1_000 : 0; }
  async start() {
    this.p = spawn(BIN, ["--http-port", String(this.httpPort), "--mqtt-port", String(port()), "--mqtt-ws-port", String(port()), "--mqtt-tls-port", String(port()),
      "--mqtt-wss-port", String(port()), "--data-dir", this.dir, "--enable-default-throttlers", "false", ...this.args], { cwd: this.dir, stdio: ["ignore", "ignore", "pipe"] });
    this.p.stderr!.on("data", (d) => { this.out += d; });
    const p = this.p;
    // a process that exits (a port another took) says why instead of a timeout
    const exited = new Promise<never>((_, reject) => p.once("exit", (code) => reject(new Error(`outpost exited with ${code}: ${this.out.slice(-2000)}`))));
    exited.catch(() => { /* a later exit (a stop) is no error */ });
    await Promise.race([waitHttp(`${this.url}/health`, 60_000), exited]);
  }
  async stop(signal: NodeJS.Signals = "SIGTERM") {
    const p = this.p;
    this.p = null;
    if (!p || p.exitCode !== null) return;
    const done = new Promise((r) => p.once("exit", r));
    p.kill(signal);
    await done;
  }
}

/** The "batch applied" lines an edge logs at debug level for live changes (not snapshots), with
 *  their time: when a change arrived, from the edge's own clock (the same machine's). */
export const liveBatches = (log: string) => [...log.matchAll(/\{"time":"([^"]+)","level":"debug","msg":"batch applied"[^\n]*"seqs":\[\d[\d,]*\]/g)]
  .filter((m) => !/"snapshot":true/.test(m[0])).map((m) => Date.parse(m[1]!));

export interface SimWaits { open: number[]; welcome: number[] }
export interface SimStats { edges: number; welcomed: number; synced: number; opens: number; openTimeouts: number; closes: number; welcomes: number; fullSnapshots: number; lastWelcomeAt: number; lastSyncedAt: number }

async function until(stats: () => Promise<SimStats>, what: string, pred: (s: SimStats) => boolean, timeoutMs: number, everyMs: number): Promise<SimStats> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await stats();
    if (pred(s)) return s;
    if (Date.now() > deadline) throw new Error(`${what} did not happen in ${timeoutMs / 1000} s: ${JSON.stringify(s)}`);
    await Bun.sleep(everyMs);
  }
}

async function whenAll(arrivals: () => Promise<number[]>, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const at = await arrivals();
    if (at.every((t) => t > 0) || Date.now() > deadline) return at;
    await Bun.sleep(50);
  }
}

/** Edges that speak the sync protocol without being edges (bench/simEdges.ts), in a child process. */
export class SimEdges {
  private readonly p: ReturnType<typeof spawn>;
  private next = 1;
  private readonly waiting = new Map<number, (out: unknown) => void>();
  private exited = false;

  /** `rows` of a change are rows whose `sensor` is "<group>/<n>" (see simEdges.ts). */
  /** `platformUrl`: a node's URL, or a cluster's nodes' (the edges spread over them in turn). */
  /** `mode` "ack": links that only answer each frame with "ack" (a bare server's baseline, see simEdges.ts). */
  constructor(platformUrl: string | string[], systemKey: string, names: string[], token: string, pingMs = 15_000, mode: "sync" | "ack" = "sync") {
    const urls = (Array.isArray(platformUrl) ? platformUrl : [platformUrl]).map((u) => u.replace("http:", "ws:") + "/api/v/4/sync");
    const cfg = { urls, systemKey, names, token, pingMs, mode };
    // thousands of names are too long for a command line: they go in a file
    const file = join(mkdtempSync(join(tmpdir(), "outpost-bench-sim-")), "edges.json");
    writeFileSync(file, JSON.stringify(cfg));
    this.p = spawn(process.execPath, [join(import.meta.dir, "simEdges.ts"), file], { stdio: ["pipe", "pipe", "inherit"] });
    let buf = "";
    this.p.stdout!.on("data", (d) => {
      buf += d;
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const { id, out } = JSON.parse(buf.slice(0, nl)) as { id: number; out: unknown };
        buf = buf.slice(nl + 1);
        this.waiting.get(id)?.(out);
        this.waiting.delete(id);
      }
    });
    this.p.once("exit", () => { this.exited = true; });
  }

  private ask<T>(cmd: Record<string, unknown>): Promise<T> {
    if (this.exited) return Promise.reject(new Error("the simulated edges stopped"));
    const id = this.next++;
    return new Promise<T>((resolve) => {
      this.waiting.set(id, resolve as (out: unknown) => void);
      this.p.stdin!.write(JSON.stringify({ id, ...cmd }) + "\n");
    });
  }

  stats() { return this.ask<SimStats>({ cmd: "stats" }); }
  /** counters back to 0 (opens, timeouts, welcomes, full snapshots) for the next phase */
  reset() { return this.ask<SimStats>({ cmd: "reset" }); }
  /** a change of `rows` rows of `group` is coming: each edge notes when it has them all */
  expect(group: string, rows: number) { return this.ask<boolean>({ cmd: "expect", group, rows }); }
  /** since the last reset: each open until the platform took it, each hello until its welcome (ms) */
  waits() { return this.ask<SimWaits>({ cmd: "waits" }); }
  /** when each edge had all of the group's rows (epoch ms; 0: not yet) */
  arrivals(group: string) { return this.ask<number[]>({ cmd: "group", group }); }

  /** Waits until `pred` holds of the stats, polling the simulator (not the platform). */
  until(what: string, pred: (s: SimStats) => boolean, timeoutMs: number, everyMs = 20) { return until(() => this.stats(), what, pred, timeoutMs, everyMs); }
  /** Waits until every edge had the group's rows (or the time is up): the times, 0 for missing. */
  whenAll(group: string, timeoutMs: number) { return whenAll(() => this.arrivals(group), timeoutMs); }

  stop() { this.p.kill("SIGKILL"); }
}

/** Simulated edges in several processes, each driving a share of them (a process holds at most
 *  its file-descriptor limit's sockets): asked as one, their counts added and their times merged. */
export class SimFleet {
  private readonly parts: SimEdges[];

  /** `procs` processes, each with a contiguous share of `names`; every share spreads its edges
   *  over `platformUrls` in turn; `mode` as SimEdges's. */
  constructor(platformUrls: string[], systemKey: string, names: string[], token: string, procs: number, mode: "sync" | "ack" = "sync") {
    const share = Math.ceil(names.length / procs);
    this.parts = Array.from({ length: procs }, (_, k) => names.slice(k * share, (k + 1) * share)).filter((n) => n.length)
      .map((n) => new SimEdges(platformUrls, systemKey, n, token, undefined, mode));
  }

  private static merge(all: SimStats[]): SimStats {
    const sum = (k: keyof SimStats) => all.reduce((a, x) => a + x[k], 0);
    const max = (k: keyof SimStats) => Math.max(...all.map((x) => x[k]));
    return { edges: sum("edges"), welcomed: sum("welcomed"), synced: sum("synced"), opens: sum("opens"), openTimeouts: sum("openTimeouts"), closes: sum("closes"),
      welcomes: sum("welcomes"), fullSnapshots: sum("fullSnapshots"), lastWelcomeAt: max("lastWelcomeAt"), lastSyncedAt: max("lastSyncedAt") };
  }

  async stats() { return SimFleet.merge(await Promise.all(this.parts.map((p) => p.stats()))); }
  async reset() { return SimFleet.merge(await Promise.all(this.parts.map((p) => p.reset()))); }
  async expect(group: string, rows: number) { await Promise.all(this.parts.map((p) => p.expect(group, rows))); return true; }
  async arrivals(group: string) { return (await Promise.all(this.parts.map((p) => p.arrivals(group)))).flat(); }
  async waits(): Promise<SimWaits> {
    const all = await Promise.all(this.parts.map((p) => p.waits()));
    return { open: all.flatMap((w) => w.open), welcome: all.flatMap((w) => w.welcome) };
  }

  until(what: string, pred: (s: SimStats) => boolean, timeoutMs: number, everyMs = 20) { return until(() => this.stats(), what, pred, timeoutMs, everyMs); }
  whenAll(group: string, timeoutMs: number) { return whenAll(() => this.arrivals(group), timeoutMs); }

  stop() { for (const p of this.parts) p.stop(); }
}
