// bench/mqttConns.ts: many idle MQTT device connections on one node. Every connection is a device
// signed in with its own token (MQTT 3.1.1, keepalive 300 s) that subscribes at QoS 1 to its own
// command topic, then stays idle, as a fleet of devices waiting for commands does. The connections
// come from several client processes (each well below its own file-descriptor limit, each from its
// own 127.0.0.x source address so that no source address runs out of ports), in steps up to each
// size: Outpost and a bare aedes (no auth, same client load) take the same steps in turns. At each
// size: the time to connect the step's herd, connections that failed, the broker's RSS per
// connection (RSS growth over the idle broker, divided by the connections held) and /health's p99
// while they are held.
//   BENCH_CONN_SIZES=1000,10000,19500  sizes (default: 1,000, 10,000 and what one process's
//                                      file descriptors allow, less 500 for the node's own)
//   BENCH_CONN_PER_CLIENT=5000         connections per client process
//   SCALE=small                        a smoke test: sizes 200,1000
//
// The limit: a server process holds one file descriptor per connection, and this machine's hard
// limit (`ulimit -Hn`) is 20,000 without CAP_SYS_RESOURCE; 100,000 connections on one node need
// that limit raised (LimitNOFILE= in the systemd unit) or several broker processes.
import { createConnection, type Socket } from "node:net";
import { join } from "node:path";
import { BUN, ROOT, fmt, json, pct, port, report, rssKb, setupSystem, startOutpost, verdict } from "./lib.ts";

const small = process.env.SCALE === "small";
const TARGET_KB = 8;
const KEEPALIVE_S = 300;
const PER_CLIENT = Number(process.env.BENCH_CONN_PER_CLIENT ?? 5_000);

function fdLimit(): number {
  const n = Number(Bun.spawnSync(["sh", "-c", "ulimit -n"]).stdout.toString().trim());
  return Number.isFinite(n) && n > 0 ? n : 1_024;
}
const SIZES = process.env.BENCH_CONN_SIZES ? process.env.BENCH_CONN_SIZES.split(",").map(Number).filter((n) => n > 0)
  : small ? [200, 1_000] : [...new Set([1_000, 10_000, fdLimit() - 500])].sort((a, b) => a - b);

// ---- the client process ------------------------------------------------------------------------

interface ChildJob { port: number; localAddress: string; keepalive: number; devices: { clientId: string; token: string; password: string; topic: string }[] }
interface ChildResult { connected: number; failed: number; reasons: Record<string, number>; ms: number; p99: number }

const str = (s: string) => { const b = Buffer.from(s); const out = Buffer.alloc(2 + b.length); out.writeUInt16BE(b.length); b.copy(out, 2); return out; };
const remaining = (n: number) => { const out: number[] = []; do { let b = n % 128; n = Math.floor(n / 128); if (n > 0) b |= 0x80; out.push(b); } while (n > 0); return Buffer.from(out); };
const frame = (type: number, body: Buffer) => Buffer.concat([Buffer.from([type]), remaining(body.length), body]);

function connectPacket(clientId: string, username: string, password: string, keepalive: number) {
  const head = Buffer.concat([str("MQTT"), Buffer.from([4, 0xc2, keepalive >> 8, keepalive & 0xff])]);
  return frame(0x10, Buffer.concat([head, str(clientId), str(username), str(password)]));
}
const subscribePacket = (topic: string) => frame(0x82, Buffer.concat([Buffer.from([0, 1]), str(topic), Buffer.from([1])]));

/** One device: CONNECT, CONNACK, SUBSCRIBE, SUBACK; resolves with the open socket, rejects with why not. */
function device(job: ChildJob, d: ChildJob["devices"][number]): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection({ port: job.port, host: "127.0.0.1", localAddress: job.localAddress });
    let got = Buffer.alloc(0);
    let stage = 0;
    const timer = setTimeout(() => { s.destroy(); reject(new Error("timeout")); }, 30_000);
    const fail = (why: string) => { clearTimeout(timer); s.destroy(); reject(new Error(why)); };
    s.once("connect", () => s.write(connectPacket(d.clientId, d.token, d.password, job.keepalive)));
    s.on("error", (e) => fail((e as NodeJS.ErrnoException).code ?? e.message));
    s.on("close", () => { if (stage < 2) fail("closed"); });
    s.on("data", (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (stage === 0 && got.length >= 4) {
        if (got[0] !== 0x20 || got[3] !== 0) return fail(`connack ${got[3]}`);
        got = got.subarray(4);
        stage = 1;
        s.write(subscribePacket(d.topic));
      }
      if (stage === 1 && got.length >= 5) {
        if (got[0] !== 0x90 || got[4] === 0x80) return fail("subscribe refused");
        stage = 2;
        got = Buffer.alloc(0);
        clearTimeout(timer);
        resolve(s);
      }
    });
  });
}

async function child() {
  let input = "";
  for await (const chunk of Bun.stdin.stream()) {
    input += Buffer.from(chunk).toString();
    if (input.includes("\n")) break;
  }
  const job = JSON.parse(input) as ChildJob;
  const held: Socket[] = [];
  const times: number[] = [];
  const reasons: Record<string, number> = {};
  const t0 = performance.now();
  let next = 0;
  // a bounded number of CONNECTs in flight, as devices coming back after an outage would be
  await Promise.all(Array.from({ length: 256 }, async () => {
    while (next < job.devices.length) {
      const d = job.devices[next++]!;
      const t = performance.now();
      try { held.push(await device(job, d)); times.push(performance.now() - t); }
      catch (err) { const why = (err as Error).message; reasons[why] = (reasons[why] ?? 0) + 1; }
    }
  }));
  const result: ChildResult = { connected: held.length, failed: job.devices.length - held.length, reasons, ms: performance.now() - t0, p99: times.length ? pct(times, 0.99) : 0 };
  process.stdout.write(JSON.stringify(result) + "\n");
  // held until the parent ends this process (or itself ends: then this process is adopted)
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 1000);
  process.on("SIGTERM", () => process.exit(0));
}

// ---- the driver --------------------------------------------------------------------------------

export class Side {
  readonly children: { proc: ReturnType<typeof Bun.spawn> }[] = [];
  held = 0;
  constructor(readonly name: string, readonly port: number, readonly pid: number, readonly baseKb: number, readonly addressBase: number) {}

  /** Adds `devices` connections from new client processes; the herd's time and failures. */
  async grow(devices: ChildJob["devices"]): Promise<{ ms: number; failed: number; reasons: Record<string, number>; p99: number }> {
    const runs: Promise<ChildResult>[] = [];
    const t0 = performance.now();
    for (let i = 0; i < devices.length; i += PER_CLIENT) {
      const proc = Bun.spawn([BUN, import.meta.path, "--child"], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
      // 127.0.0.2, .3, ...: each client process its own source address (and its own 28,000 ports)
      const job: ChildJob = { port: this.port, localAddress: `127.0.${this.addressBase}.${2 + this.children.length}`, keepalive: KEEPALIVE_S, devices: devices.slice(i, i + PER_CLIENT) };
      proc.stdin.write(JSON.stringify(job) + "\n");
      proc.stdin.flush();
      this.children.push({ proc });
      runs.push((async () => {
        const reader = proc.stdout.getReader();
        let line = "";
        while (!line.includes("\n")) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`a client process of ${this.name} ended early`);
          line += Buffer.from(value).toString();
        }
        reader.releaseLock();
        return JSON.parse(line) as ChildResult;
      })());
    }
    const results = await Promise.all(runs);
    const ms = performance.now() - t0;
    const reasons: Record<string, number> = {};
    for (const r of results) for (const [k, v] of Object.entries(r.reasons)) reasons[k] = (reasons[k] ?? 0) + v;
    const connected = results.reduce((a, r) => a + r.connected, 0);
    this.held += connected;
    return { ms, failed: devices.length - connected, reasons, p99: Math.max(...results.map((r) => r.p99)) };
  }

  perConnectionKb(): number { return (rssKb(this.pid) - this.baseKb) / Math.max(1, this.held); }

  async stop() {
    for (const c of this.children) c.proc.kill("SIGTERM");
    await Promise.all(this.children.map((c) => c.proc.exited));
  }
}

/** /health latencies (ms): `n` requests one after another. */
async function healthP99(url: string, n = 200): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await fetch(`${url}/health`);
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`/health answered ${r.status}`);
    times.push(performance.now() - t);
  }
  return pct(times, 0.99);
}

/** RSS once it stops moving (the connections just made settle: buffers freed, a GC run). */
export async function settledRss(pid: number): Promise<number> {
  let last = rssKb(pid);
  for (let i = 0; i < 20; i++) {
    await Bun.sleep(500);
    const now = rssKb(pid);
    if (Math.abs(now - last) < 256) return now;
    last = now;
  }
  return last;
}

/** Devices with their own tokens, each allowed to subscribe to its command topic. */
export async function fleet(url: string, n: number) {
  const s = await setupSystem(url);
  const dev = { "ClearBlade-DevToken": s.devToken };
  await json(`${url}/admin/user/${s.systemKey}/roles`, "PUT", { id: "Authenticated", changes: { topics: [{ itemInfo: { name: "cmd/#" }, permissions: 3 }] } }, dev);
  const keys: { name: string; key: string }[] = [];
  for (let i = 0; i < n; i += 1000) {
    const names = Array.from({ length: Math.min(1000, n - i) }, (_, j) => `sensor-${String(i + j).padStart(6, "0")}`);
    const out = await json(`${url}/admin/devices/${s.systemKey}`, "POST", names.map((name) => ({ name })), dev) as { name: string; active_key: string }[];
    for (const d of out) keys.push({ name: d.name, key: d.active_key });
  }
  const devices: ChildJob["devices"] = new Array(n);
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < n) {
      const i = next++;
      const { name, key } = keys[i]!;
      const r = await json(`${url}/api/v/2/devices/${s.systemKey}/auth`, "POST", { deviceName: name, activeKey: key });
      devices[i] = { clientId: name, token: r.deviceToken, password: s.systemKey, topic: `cmd/${name}` };
    }
  }));
  return devices;
}

async function startAedes() {
  const p = port();
  const proc = Bun.spawn([BUN, join(ROOT, "bench/baselines/aedes.ts"), String(p)], { stdout: "ignore", stderr: "inherit" });
  for (let i = 0; ; i++) {
    const ok = await new Promise<boolean>((res) => { const s = createConnection(p, "127.0.0.1", () => { s.end(); res(true); }); s.on("error", () => res(false)); });
    if (ok) break;
    if (i > 200) throw new Error("bare aedes did not start");
    await Bun.sleep(25);
  }
  return { port: p, pid: proc.pid, stop: async () => { proc.kill("SIGTERM"); await proc.exited; } };
}

export async function benchMqttConns() {
  const largest = Math.max(...SIZES);
  if (largest > fdLimit() - 100) console.log(`(${fmt(largest)} connections exceed this process' file-descriptor limit, ${fmt(fdLimit())}: the broker will refuse some)`);
  const o = await startOutpost();
  const a = await startAedes();
  const sides: Side[] = [];
  try {
    const devices = await fleet(o.url, largest);
    await Bun.sleep(1000);
    const ours = new Side("outpost", o.mqttPort, o.pid, await settledRss(o.pid), 0);
    const bare = new Side("bare aedes", a.port, a.pid, await settledRss(a.pid), 1);
    sides.push(ours, bare);
    const rows: [string, string][] = [
      ["outpost / bare aedes RSS before", `${fmt(ours.baseKb / 1024, 1)} / ${fmt(bare.baseKb / 1024, 1)} MB`],
    ];
    let held = 0;
    for (const size of SIZES) {
      const step = devices.slice(held, size);
      const healthDuring: number[] = [];
      let connecting = true;
      const probe = (async () => {
        while (connecting) {
          const t = performance.now();
          await (await fetch(`${o.url}/health`)).arrayBuffer();
          healthDuring.push(performance.now() - t);
          await Bun.sleep(20);
        }
      })();
      const og = await ours.grow(step);
      connecting = false;
      await probe;
      // the same devices' CONNECTs to bare aedes (it checks nothing)
      const bg = await bare.grow(step);
      held = size;
      const [ok, bk] = [await settledRss(o.pid), await settledRss(a.pid)];
      const [okb, bkb] = [(ok - ours.baseKb) / Math.max(1, ours.held), (bk - bare.baseKb) / Math.max(1, bare.held)];
      const h = await healthP99(o.url);
      const why = (r: Record<string, number>) => Object.entries(r).map(([k, v]) => `${k}: ${fmt(v)}`).join(", ");
      rows.push(
        [`${fmt(size)}: connected outpost / aedes`, `${fmt(ours.held)} / ${fmt(bare.held)}${og.failed ? `  outpost failed ${fmt(og.failed)} (${why(og.reasons)})` : ""}${bg.failed ? `  aedes failed ${fmt(bg.failed)} (${why(bg.reasons)})` : ""}`],
        [`${fmt(size)}: herd of ${fmt(step.length)}: time (p99 each) outpost / aedes`, `${fmt(og.ms / 1000, 1)} s (${fmt(og.p99)} ms) / ${fmt(bg.ms / 1000, 1)} s (${fmt(bg.p99)} ms)`],
        [`${fmt(size)}: RSS per connection outpost / aedes`, `${fmt(okb, 1)} / ${fmt(bkb, 1)} KB  ratio ${fmt(okb / bkb, 2)}  ${verdict(okb, TARGET_KB, false)}`],
        [`${fmt(size)}: RSS outpost / aedes`, `${fmt(ok / 1024)} / ${fmt(bk / 1024)} MB`],
        [`${fmt(size)}: /health p99 connecting / held`, `${fmt(healthDuring.length ? pct(healthDuring, 0.99) : 0, 1)} / ${fmt(h, 1)} ms`],
      );
    }
    report(`MQTT idle device connections (own token each, one QoS 1 subscription, keepalive ${KEEPALIVE_S} s), from client processes of ${fmt(PER_CLIENT)}; fd limit per process ${fmt(fdLimit())}`, rows);
  } finally {
    for (const s of sides) await s.stop();
    await o.stop();
    await a.stop();
    (await import("node:fs")).rmSync(o.dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) await (process.argv[2] === "--child" ? child() : benchMqttConns());
