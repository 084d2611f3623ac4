// bench/fleet.ts: one platform node serving a whole fleet of edges of one system, at 1,000, 10,000
// and the most this machine's file descriptors allow. The edges are protocol-level simulated
// edges (bench/simEdges.ts: the real sync protocol, no database each) and one real edge process,
// whose own log times the same changes as a check on the simulator. For each size:
//  1. connect-all: every edge opens at once (a herd): the time until all completed their first
//     snapshot, and opens that timed out (3 s, as a real edge waits; target: none at 10,000);
//     the platform's RSS per edge;
//  2. one change reaching every edge, p50 and p99 of the arrivals (targets: p99 <= 100 ms at
//     10,000, <= 200 ms at 19,000), timed where it arrives, never by polling; then its baseline,
//     a bare Bun server sending one frame to as many links of the same simulator (the ratio of
//     the p99s);
//  3. a whole-fleet read (the edges list, every record with its lag) while the fleet is connected;
//  4. a 100-row batch reaching every edge (until the last edge had all 100 rows);
//  5. a restart of the platform with a change written just before it: the first API answer, the
//     time until every edge was welcomed back (target 5 s at the largest size), whether any edge
//     needed a full snapshot and whether any lost the change (target: none);
// with /health's p99 during each (target: under 20 ms).
//   FLEET_SIZES=1000,10000,19000  sizes (default 1,000, 10,000 and the file-descriptor limit)
//   FLEET_CHANGES=20               changes of part 2
//   FLEET_CONNECT_LIMIT_S=180      how long part 1 may take (past it the size is reported as failed)
//   SCALE=small                    a smoke test (CI): sizes 50,200
// A cluster: "a two-node cluster holds twice the single-node fleet with the edges spread over both"
//   FLEET_CLUSTER=2                platform nodes sharing one PostgreSQL database (a new one on
//                                  OUTPOST_TEST_PG's server, the test server by default) and one
//                                  Redis; the edges spread over them in turn, changes written on the
//                                  first; default size: that many times the most one node holds
//   FLEET_LOG_DIR=dir              each platform node logs at warn, its log written there at the end
//   FLEET_SIM_PROCS=n              simulator processes (default: enough for the file-descriptor
//                                  limit, and one per node), each driving a share of the edges
// Every process (each node, each simulator) is bound by its own descriptor limit (`ulimit -n`,
// raised to the hard limit `ulimit -Hn` at most): past it, more processes, never more per process.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgDatabase, dropPgDatabase } from "../test/pgdb.ts";
import { liveBatches, Node, SimFleet, type SimStats, type SimWaits } from "./edgesim.ts";
import { fmt, json, listenOverflows, pct, redisServer, report, setupSystem, startBaseline, verdict } from "./lib.ts";

const small = process.env.SCALE === "small";
/** descriptors the platform keeps for itself (databases, listeners, the real edge's link) */
const FD_SPARE = 1_000;
function hardFdLimit(): string { return Bun.spawnSync(["sh", "-c", "ulimit -Hn"]).stdout.toString().trim(); }
function fdLimit(): number {
  const r = Bun.spawnSync(["sh", "-c", "ulimit -n"]);
  const n = Number(r.stdout.toString().trim());
  return Number.isFinite(n) && n > 0 ? n : 1_024;
}
/** the most edges one process (a node, a simulator) holds links of */
const maxEdges = () => Math.max(1_000, Math.floor((fdLimit() - FD_SPARE) / 1_000) * 1_000);
const NODES = Math.max(1, Number(process.env.FLEET_CLUSTER ?? 1));
const SIZES = process.env.FLEET_SIZES ? process.env.FLEET_SIZES.split(",").map(Number).filter((n) => n > 1)
  : small ? [50, 200] : NODES > 1 ? [NODES * maxEdges()] : [...new Set([1_000, 10_000, maxEdges()])].filter((n) => n <= maxEdges());
const simProcs = (n: number) => Number(process.env.FLEET_SIM_PROCS ?? Math.max(NODES, Math.ceil(n / maxEdges())));
const CLUSTER_SECRET = "fleet-bench-cluster-secret-0123456789";
const CHANGES = Number(process.env.FLEET_CHANGES ?? (small ? 5 : 20));
const BATCH = 100;
/** how long the herd of part 1 may take before the size is given up (the full run stays within 15 minutes) */
const CONNECT_LIMIT_MS = Number(process.env.FLEET_CONNECT_LIMIT_S ?? 180) * 1_000;
/** the least time /health is asked during a phase */
const PHASE_MS = 3_000;
const TOKEN = "fleet-edge-token";
/** where the nodes' logs go at the end of a size (none: they log errors only, kept nowhere) */
const LOG_DIR = process.env.FLEET_LOG_DIR ?? "";
const COLUMNS = [{ name: "sensor", type: "string" }, { name: "value", type: "double" }];

/** A route asked every 20 ms from here (/health by default): its answer times, for one phase at a
 *  time. /api/about is asked the same way beside it: it touches no database, so where the two part
 *  is /health's own wait (its write, once a second, queued behind the node's transactions). */
class HealthProbe {
  private times: number[] = [];
  private on = true;
  private failed = 0;
  constructor(private readonly url: () => string, private readonly path = "/health") { void this.run(); }
  private async run() {
    while (this.on) {
      const t0 = performance.now();
      const ok = await fetch(`${this.url()}${this.path}`, { signal: AbortSignal.timeout(10_000) }).then((r) => r.status === 200, () => false);
      if (ok) this.times.push(performance.now() - t0); else this.failed++;
      await Bun.sleep(ok ? 20 : 5);
    }
  }
  /** p99 and max since the last take (ms), and how many asks failed (the platform was down) */
  take() { const t = this.times; this.times = []; const f = this.failed; this.failed = 0; return { p99: t.length ? pct(t, 0.99) : NaN, max: t.length ? Math.max(...t) : NaN, n: t.length, failed: f }; }
  stop() { this.on = false; }
}
/** where the edges' time went: opens until the platform took them, hellos until their welcome */
const waited = (w: SimWaits) => `open ${fmt(pct(w.open, 0.5))} / ${fmt(pct(w.open, 0.99))} ms (${fmt(w.open.length)}), hello to welcome ${fmt(pct(w.welcome, 0.5))} / ${fmt(pct(w.welcome, 0.99))} ms (${fmt(w.welcome.length)})`;
const health = (h: ReturnType<HealthProbe["take"]>, about?: ReturnType<HealthProbe["take"]>) =>
  `p99 ${fmt(h.p99, 1)} ms, max ${fmt(h.max, 1)} ms (${h.n} asks)  ${verdict(h.p99, 20, false)}${about ? `; /api/about p99 ${fmt(about.p99, 1)} ms, max ${fmt(about.max, 1)} ms` : ""}`;

/** Creates the edges `conc` at a time. */
async function createEdges(url: string, sk: string, names: string[], D: Record<string, string>, conc = 16) {
  let next = 0;
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < names.length) { const n = names[next++]!; await json(`${url}/admin/edges/${sk}/${n}`, "POST", { token: TOKEN, template: "fleet" }, D); }
  }));
}

/** The platform: one node, or NODES nodes sharing a PostgreSQL database and a Redis (made here
 *  and dropped after). The API is asked on the first node. */
class Platform {
  nodes: Node[] = [];
  private shared: { db: string; redis: Awaited<ReturnType<typeof redisServer>> } | null = null;
  constructor(private readonly tplDir: string) {}
  get url() { return this.nodes[0]!.url; }
  get urls() { return this.nodes.map((x) => x.url); }
  rssKb() { return this.nodes.reduce((a, x) => a + x.rssKb(), 0); }
  cpuMs() { return this.nodes.reduce((a, x) => a + x.cpuMs(), 0); }
  async start() {
    if (!this.nodes.length) {
      const base = ["--log-level", LOG_DIR ? "warn" : "error", "--edge-templates-dir", this.tplDir];
      if (NODES === 1) this.nodes = [new Node(base)];
      else {
        this.shared = { db: await createPgDatabase(), redis: await redisServer() };
        const { db, redis } = this.shared;
        this.nodes = Array.from({ length: NODES }, (_, k) => new Node([...base, "--db", db, "--redis-url", redis.url, "--node-id", `fleet-${k}`, "--secret-key", CLUSTER_SECRET]));
      }
      // the first node makes the schema, the others find it
      await this.nodes[0]!.start();
      await Promise.all(this.nodes.slice(1).map((x) => x.start()));
    } else await Promise.all(this.nodes.map((x) => x.start()));
  }
  async stop() { await Promise.all(this.nodes.map((x) => x.stop())); }
  /** stopped, and what it shared dropped */
  async end() {
    await this.stop();
    if (LOG_DIR) this.nodes.forEach((x, k) => writeFileSync(join(LOG_DIR, `node-${k}.log`), x.out));
    if (this.shared) { await this.shared.redis.stop(); await dropPgDatabase(this.shared.db); this.shared = null; }
  }
}

/** One size's run. */
async function size(n: number) {
  const tplDir = mkdtempSync(join(tmpdir(), "outpost-bench-fleet-"));
  writeFileSync(join(tplDir, "fleet.json"), JSON.stringify({ assets: [{ def_module: "collection", def_name: "fleet", mode: "sync_to_edge" }] }));
  // each process holds at most its descriptor limit's links: said before anything starts
  const procs = simProcs(n);
  if (Math.ceil(n / NODES) > maxEdges() || Math.ceil(n / procs) > maxEdges()) {
    throw new Error(`${fmt(n)} edges need at least ${Math.ceil(n / maxEdges())} nodes and simulator processes: each holds at most ${fmt(maxEdges())} links (${fmt(fdLimit())} file descriptors, \`ulimit -Hn\` ${hardFdLimit()})`);
  }
  const P = new Platform(tplDir);
  let sim: SimFleet | null = null, real: Node | null = null, probe: HealthProbe | null = null, about: HealthProbe | null = null;
  const rows: [string, string][] = [];
  try {
    await P.start();
    probe = new HealthProbe(() => P.url);
    about = new HealthProbe(() => P.url, "/api/about");
    const s = await setupSystem(P.url);
    const D = { "ClearBlade-DevToken": s.devToken };
    const { collectionID } = await json(`${P.url}/admin/collectionmanagement`, "POST", { name: "fleet", appID: s.systemKey, columns: COLUMNS }, D);
    const names = Array.from({ length: n }, (_, i) => `fleet-edge-${i}`);
    await createEdges(P.url, s.systemKey, names, D);
    const rss0 = P.rssKb();

    // 1. the herd: every simulated edge opens at once; the real edge too
    probe.take(); about.take();
    const o0 = listenOverflows(), c0 = P.cpuMs();
    const t0 = Date.now();
    real = new Node(["--log-level", "debug", "--mode", "edge", "--platform-url", P.url, "--system-key", s.systemKey, "--edge-name", names[0]!, "--edge-token", TOKEN]);
    sim = new SimFleet(P.urls, s.systemKey, names.slice(1), TOKEN, procs);
    const up = await sim.until("every edge's first sync", (x) => x.synced === n - 1, CONNECT_LIMIT_MS, 50).catch(() => null);
    if (!up) {
      // a herd the node does not absorb: said, and the other parts skipped (they need every edge)
      const x = await sim.stats();
      rows.push([`connect-all (${fmt(n)} at once)`, `NOT ALL SYNCED in ${CONNECT_LIMIT_MS / 1000} s: ${fmt(x.synced)} of ${fmt(n - 1)} (${fmt(x.welcomed)} welcomed); ${fmt(x.openTimeouts)} of ${fmt(x.opens)} opens timed out, ${fmt(x.closes)} links closed`]);
      rows.push(["  waits p50 / p99", waited(await sim.waits())]);
      rows.push(["  /health", health(probe.take(), about!.take())]);
      return;
    }
    await real.start();
    const connectMs = up.lastSyncedAt - t0;
    await Bun.sleep(2_000); // settled: pings have begun
    const rssPerEdge = (P.rssKb() - rss0) / n;
    rows.push([`connect-all (${fmt(n)} at once): until all synced`, `${fmt(connectMs)} ms`]);
    rows.push(["  opens that timed out (3 s) / opens", `${fmt(up.openTimeouts)} / ${fmt(up.opens)}  ${verdict(up.openTimeouts, 0, false)}`]);
    rows.push(["  listen-queue overflows (the machine's) / platform CPU", `${fmt(listenOverflows() - o0)} / ${fmt(P.cpuMs() - c0)} ms`]);
    rows.push(["  waits p50 / p99", waited(await sim.waits())]);
    rows.push(["  platform RSS per edge", `${fmt(rssPerEdge, 1)} KB`]);
    rows.push(["  /health", health(probe.take(), about!.take())]);

    // 2. one change at a time reaching every edge
    const sent: number[] = [];
    const lat: number[] = [];
    const seenByReal = liveBatches(real.out).length;
    for (let i = 0; i < CHANGES; i++) {
      await sim.expect(`c${i}`, 1);
      sent.push(Date.now());
      await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", { sensor: `c${i}/0`, value: i }, D);
      if (LOG_DIR) console.error(`change ${i} written in ${Date.now() - sent[i]!} ms`);
      const at = await sim.whenAll(`c${i}`, 30_000);
      const missing = at.filter((t) => t === 0).length;
      if (missing) throw new Error(`change ${i} did not reach ${missing} edges in 30 s`);
      for (const t of at) lat.push(t - sent[i]!);
      if (LOG_DIR) console.error(`change ${i}: p50 ${pct(at.map((t) => t - sent[i]!), 0.5)} ms, last ${Math.max(...at) - sent[i]!} ms`);
      await Bun.sleep(200);
    }
    // the real edge, timed by its own log: the n-th live batch carried the n-th change
    const realLat = liveBatches(real.out).slice(seenByReal).map((t, i) => t - sent[i]!).filter((x) => Number.isFinite(x));
    rows.push([`one change to all (${CHANGES} changes): p50 / p99`, `${fmt(pct(lat, 0.5), 1)} / ${fmt(pct(lat, 0.99), 1)} ms`]);
    rows.push(["  the real edge (its own log): p50 / max", realLat.length === CHANGES ? `${fmt(pct(realLat, 0.5), 1)} / ${fmt(Math.max(...realLat), 1)} ms` : `only ${realLat.length} of ${CHANGES} seen`]);
    rows.push(["  /health", health(probe.take(), about!.take())]);
    // its baseline at once, the fleet still connected (and idle) as during the changes
    await bareFanout(n, lat, rows);
    probe.take(); about.take(); // the baseline's time is no phase of the platform's

    // 3. the whole fleet's records read while it is connected
    const reads: number[] = [];
    for (const until = Date.now() + PHASE_MS; Date.now() < until || !reads.length;) {
      const r0 = performance.now();
      const list = await json<{ isConnected: boolean }[]>(`${P.url}/admin/edges/${s.systemKey}`, "GET", undefined, D);
      reads.push(performance.now() - r0);
      if (list.filter((e) => e.isConnected).length !== n) throw new Error(`the list shows ${list.filter((e) => e.isConnected).length} of ${n} edges connected`);
    }
    rows.push([`the edges list (${fmt(n)} records with their lag), read again for ${PHASE_MS / 1000} s`, `${fmt(pct(reads, 0.5))} ms each`]);
    rows.push(["  /health", health(probe.take(), about!.take())]);

    // 4. a 100-row batch reaching every edge
    await sim.expect("batch", BATCH);
    const bt = Date.now();
    await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", Array.from({ length: BATCH }, (_, i) => ({ sensor: `batch/${i}`, value: i })), D);
    const bat = await sim.whenAll("batch", 60_000);
    if (bat.some((t) => t === 0)) throw new Error(`the batch did not reach ${bat.filter((t) => t === 0).length} edges in 60 s`);
    const bl = bat.map((t) => t - bt);
    await Bun.sleep(Math.max(0, bt + PHASE_MS - Date.now()));
    rows.push([`a ${BATCH}-row batch to all: p50 / p99 / last`, `${fmt(pct(bl, 0.5))} / ${fmt(pct(bl, 0.99))} / ${fmt(Math.max(...bl))} ms`]);
    rows.push(["  /health", health(probe.take(), about!.take())]);

    // 5. a restart, with a change written just before it (it may or may not have gone out)
    await sim.expect("restart", 1);
    await json(`${P.url}/api/v/1/data/${collectionID}`, "POST", { sensor: "restart/0", value: 0 }, D);
    await P.stop();
    await sim.reset();
    probe.take(); about.take();
    const o1 = listenOverflows();
    const rt = Date.now();
    await P.start();
    const apiMs = Date.now() - rt;
    const back: SimStats = await sim.until("every edge back", (x) => x.welcomed === n - 1, 120_000, 20);
    const backMs = back.lastWelcomeAt - rt;
    const restartOverflows = listenOverflows() - o1, restartCpu = P.cpuMs();
    const got = await sim.whenAll("restart", 30_000);
    rows.push([`restart: the API's first answer (from the process's start${NODES > 1 ? ", every node" : ""})`, `${fmt(apiMs)} ms  ${verdict(apiMs, 1_000, false)}`]);
    rows.push(["  all edges back (welcomed)", `${fmt(backMs)} ms  ${verdict(backMs, 5_000, false)}`]);
    rows.push(["  waits p50 / p99", waited(await sim.waits())]);
    rows.push(["  listen-queue overflows (the machine's) / platform CPU until all back", `${fmt(restartOverflows)} / ${fmt(restartCpu)} ms`]);
    rows.push(["  full snapshots / open timeouts", `${fmt(back.fullSnapshots)} / ${fmt(back.openTimeouts)}  ${verdict(back.fullSnapshots, 0, false)}`]);
    rows.push(["  edges that lost the change written before the restart", `${fmt(got.filter((t) => t === 0).length)}  ${verdict(got.filter((t) => t === 0).length, 0, false)}`]);
    rows.push(["  /health (once answering)", health(probe.take(), about!.take())]);
  } finally {
    probe?.stop();
    about?.stop();
    sim?.stop();
    await real?.stop("SIGKILL");
    await P.end();
    const on = NODES === 1 ? "one platform node" : `${NODES} platform nodes sharing PostgreSQL and Redis, the edges spread over them`;
    report(`Fleet: ${fmt(n)} edges of one system on ${on} (${fmt(n - 1)} simulated in ${procs} process${procs > 1 ? "es" : ""}, 1 real)`, rows);
  }
}

/** The baseline of one change to all, run right after it: a bare Bun server with no Outpost code
 *  (bench/baselines/fanout.ts, a child process as the platform is) sending one small frame to as
 *  many links of the same simulator (new processes of it, in its "ack" mode: each link answers a
 *  frame with one line), `CHANGES` times. Timed both where the frame arrives (as Outpost's change
 *  is) and until the server had each acknowledgement back. Its rows go to the size's `rows`. */
async function bareFanout(n: number, outpost: number[], rows: [string, string][]) {
  const target = n >= 15_000 ? 200 : 100;
  const outpostP99 = pct(outpost, 0.99);
  let bareP99 = NaN;
  const server = await startBaseline("fanout.ts");
  const names = Array.from({ length: n }, (_, i) => `bare-link-${i}`);
  // the bare server's own answer to a plain GET while its herd opens (the floor of /health's)
  const bareProbe = new HealthProbe(() => server.url, "/");
  const t0 = Date.now();
  const sim = new SimFleet([server.url], "bare", names, TOKEN, simProcs(n), "ack");
  try {
    const up = await sim.until("every link open", (x) => x.welcomed === n, CONNECT_LIMIT_MS, 50).catch(() => null);
    const bareHealth = bareProbe.take();
    bareProbe.stop();
    if (!up) { rows.push([`  bare Bun fan-out (${fmt(n)} links)`, `NOT ALL OPEN in ${CONNECT_LIMIT_MS / 1000} s`]); return; }
    // the floor of a herd (connect-all, a restart): the same simulator's opens, all at once, to a
    // server that does nothing but accept and upgrade them
    rows.push([`  bare Bun server: ${fmt(n)} links opened at once, all open`, `${fmt(up.lastWelcomeAt - t0)} ms, ${fmt(up.openTimeouts)} of ${fmt(up.opens)} opens timed out; a plain GET meanwhile p99 ${fmt(bareHealth.p99, 1)} ms, max ${fmt(bareHealth.max, 1)} ms`]);
    await Bun.sleep(2_000);
    const arrived: number[] = [], acked: number[] = [];
    for (let i = 0; i < CHANGES; i++) {
      await sim.expect(`bare${i}`, 1);
      const sent = Date.now();
      const r = await json<{ links: number; acks: number[] }>(`${server.url}/send?group=bare${i}`);
      if (r.links !== n || r.acks.length !== n) throw new Error(`bare frame ${i}: ${r.acks.length} of ${r.links} links acknowledged in 30 s (${n} expected)`);
      const at = await sim.whenAll(`bare${i}`, 30_000);
      if (at.some((t) => t === 0)) throw new Error(`bare frame ${i} did not reach ${at.filter((t) => t === 0).length} links in 30 s`);
      for (const t of at) arrived.push(t - sent);
      acked.push(...r.acks);
      await Bun.sleep(200);
    }
    bareP99 = pct(arrived, 0.99);
    rows.push([`  bare Bun fan-out (${CHANGES} frames to ${fmt(n)} links): arrived p50 / p99`, `${fmt(pct(arrived, 0.5), 1)} / ${fmt(bareP99, 1)} ms`]);
    rows.push(["  bare: each acknowledgement back at the server, p50 / p99", `${fmt(pct(acked, 0.5), 1)} / ${fmt(pct(acked, 0.99), 1)} ms`]);
  } finally {
    bareProbe.stop();
    sim.stop();
    await server.stop();
    // Outpost's p99 against the bare one, both timed where the frame arrived; the target is Outpost's own p99
    rows.push(["one change to all, p99 vs a bare Bun fan-out", `Outpost ${fmt(outpostP99, 1)} ms / bare ${Number.isNaN(bareP99) ? "not measured" : `${fmt(bareP99, 1)} ms = ${fmt(outpostP99 / bareP99, 2)}`}; Outpost's p99 ${verdict(outpostP99, target, false)}`]);
  }
}

export async function benchFleet() {
  for (const n of SIZES) await size(n);
}

if (import.meta.main) await benchFleet();
