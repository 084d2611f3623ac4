// bench/mqtt.ts: one publisher and one subscriber, 100,000 QoS 0 messages of 64 bytes, through
// Outpost's broker (authenticated user, history on for the topic), a bare aedes and Mosquitto
// (Debian package), on loopback. Targets: Outpost >= 0.8 of bare aedes and >= 0.8 of Mosquitto.
// Then shared subscriptions: the same messages to three members of one group ($share/<group>/...)
// against one plain subscriber, at QoS 0 and 1, in the same run (target >= 0.8), with the
// broker's CPU time per message, which a loaded machine disturbs less than throughput. Then 10,000
// concurrent authenticated connections to Outpost and the memory per connection.
// `bun bench/mqtt.ts shared` runs the shared-subscription part alone.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import { BUN, ROOT, cpuMicros, fmt, json, median, port, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const N = Number(process.env.BENCH_MESSAGES ?? 100_000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10_000);
const PAYLOAD = Buffer.alloc(64, "x");

function connect(url: string, opts: mqtt.IClientOptions = {}): Promise<mqtt.MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 30_000, ...opts });
    c.once("connect", () => res(c));
    c.once("error", rej);
  });
}

/** Messages per second from the first publish to the last message received. */
async function throughput(url: string, opts: mqtt.IClientOptions = {}, n = N): Promise<number> {
  const sub = await connect(url, { ...opts, clientId: `sub${Math.random()}` });
  const pub = await connect(url, { ...opts, clientId: `pub${Math.random()}` });
  const topic = "bench/throughput";
  await sub.subscribeAsync(topic, { qos: 0 });
  let got = 0;
  const done = new Promise<void>((res) => sub.on("message", () => { if (++got === n) res(); }));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    // respect the socket's backpressure like a real publisher would
    if (!pub.publish(topic, PAYLOAD, { qos: 0 }) as unknown as boolean) { /* mqtt.js queues internally */ }
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r));
  }
  const timeout = new Promise<void>((_, rej) => setTimeout(() => rej(new Error(`only ${got}/${n} received`)), 120_000));
  await Promise.race([done, timeout]);
  const rate = n / ((performance.now() - t0) / 1000);
  await Promise.all([pub.endAsync(), sub.endAsync()]);
  return rate;
}

/** Messages per second from the first publish to the last message received by any of the
 *  subscribers, each subscribed to its filter (one plain filter, or members of a group), and the
 *  broker's (process `pid`) CPU time per message meanwhile. */
async function spread(url: string, opts: mqtt.IClientOptions, filters: string[], n: number, qos: 0 | 1, pid: number): Promise<{ rate: number; cpu: number; shares: number[] }> {
  const topic = "bench/shared";
  const subs = await Promise.all(filters.map((_, i) => connect(url, { ...opts, clientId: `sub${i}-${Math.random()}` })));
  const pub = await connect(url, { ...opts, clientId: `pub${Math.random()}` });
  for (const [i, f] of filters.entries()) await subs[i]!.subscribeAsync(f, { qos });
  let got = 0;
  const shares = filters.map(() => 0);
  const done = new Promise<void>((res) => subs.forEach((c, i) => c.on("message", () => { shares[i]!++; if (++got === n) res(); })));
  const t0 = performance.now(), cpu0 = cpuMicros(pid);
  for (let i = 0; i < n; i++) {
    pub.publish(topic, PAYLOAD, { qos });
    if (i % 1000 === 999) await new Promise((r) => setImmediate(r));
  }
  const timeout = new Promise<void>((_, rej) => setTimeout(() => rej(new Error(`only ${got}/${n} received`)), 120_000));
  await Promise.race([done, timeout]);
  const rate = n / ((performance.now() - t0) / 1000);
  const cpu = (cpuMicros(pid) - cpu0) / n;
  await Promise.all([pub.endAsync(), ...subs.map((c) => c.endAsync())]);
  return { rate, cpu, shares };
}

/** Shared subscriptions (three members) against a plain subscription, same broker, same run:
 *  throughput, and the broker's CPU time per message (which a loaded machine disturbs less). */
async function sharedVsPlain(url: string, opts: mqtt.IClientOptions, rounds: number, pid: number) {
  const rows: [string, string][] = [];
  // BENCH_SHARED_QOS=1: the QoS 1 part alone
  for (const qos of (process.env.BENCH_SHARED_QOS ?? "0,1").split(",").map(Number) as (0 | 1)[]) {
    const n = qos === 0 ? N : Math.round(N / 5);
    const group = ["$share/workers/bench/shared", "$share/workers/bench/shared", "$share/workers/bench/shared"];
    await spread(url, opts, group, n / 5, qos, pid); // warm-up
    const plain: number[] = [], shared: number[] = [], plainCpu: number[] = [], sharedCpu: number[] = [];
    let shares: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const p = await spread(url, opts, ["bench/shared"], n, qos, pid);
      plain.push(p.rate);
      plainCpu.push(p.cpu);
      const s = await spread(url, opts, group, n, qos, pid);
      shared.push(s.rate);
      sharedCpu.push(s.cpu);
      shares = s.shares;
    }
    const ratios = shared.map((v, i) => v / plain[i]!);
    const ratio = median(ratios);
    // CPU per message, plain / shared: like the throughput ratio, above 1 when shared costs less
    const cpuRatio = median(plainCpu.map((v, i) => v / sharedCpu[i]!));
    rows.push(
      [`QoS ${qos}, ${fmt(n)} messages: plain msg/s`, fmt(median(plain))],
      [`QoS ${qos}: shared (3 members) msg/s`, `${fmt(median(shared))}  (split ${shares.map((x) => fmt(x)).join(" / ")})`],
      [`QoS ${qos}: shared / plain`, `${fmt(ratio, 2)}  ${verdict(ratio, 0.8)}  (rounds ${ratios.map((r) => fmt(r, 2)).join(", ")})`],
      [`QoS ${qos}: broker CPU per message, plain / shared`, `${fmt(median(plainCpu), 1)} / ${fmt(median(sharedCpu), 1)} µs, ratio ${fmt(cpuRatio, 2)}`],
    );
  }
  report(`MQTT shared subscriptions: 1 publisher -> a group of 3 members vs 1 plain subscriber (medians of ${rounds} rounds)`, rows);
}

export async function benchMqttShared() {
  const o = await startOutpost();
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    const role = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", { name: "bench", topics: [{ itemInfo: { name: "bench/#" }, permissions: 3 }] }, dev);
    await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role.role_id] } } }, dev);
    await sharedVsPlain(`mqtt://127.0.0.1:${o.mqttPort}`, { username: s.userToken, password: s.systemKey }, Number(process.env.BENCH_ROUNDS ?? 3), o.pid);
  } finally {
    await o.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

function startProc(cmd: string[]) {
  const p = Bun.spawn(cmd, { stdout: "ignore", stderr: "ignore" });
  return { pid: p.pid, stop: async () => { p.kill("SIGTERM"); await p.exited; } };
}

async function waitPort(p: number) {
  for (let i = 0; i < 200; i++) {
    try { await new Promise<void>((res, rej) => { const s = require("node:net").connect(p, "127.0.0.1", () => { s.end(); res(); }); s.on("error", rej); }); return; }
    catch { await Bun.sleep(25); }
  }
  throw new Error(`port ${p} did not open`);
}

const hasMosquitto = () => Bun.spawnSync(["which", "mosquitto"]).exitCode === 0;

export async function benchMqtt() {
  const o = await startOutpost();
  const aedesPort = port();
  const aedes = startProc([BUN, join(ROOT, "bench/baselines/aedes.ts"), String(aedesPort)]);
  let mosq: { stop(): Promise<void> } | undefined;
  const mosqPort = port();
  const mosqDir = mkdtempSync(join(tmpdir(), "mosq-"));
  if (hasMosquitto()) {
    writeFileSync(join(mosqDir, "m.conf"), `listener ${mosqPort} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
    mosq = startProc(["mosquitto", "-c", join(mosqDir, "m.conf")]);
  }
  try {
    await waitPort(aedesPort);
    if (mosq) await waitPort(mosqPort);
    const s = await setupSystem(o.url);
    // the user may publish and subscribe on bench/#; history stays on (the default) for the topic
    const dev = { "ClearBlade-DevToken": s.devToken };
    const role = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", { name: "bench", topics: [{ itemInfo: { name: "bench/#" }, permissions: 3 }] }, dev);
    await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role.role_id] } } }, dev);
    const ours = { username: s.userToken, password: s.systemKey };

    // a warm-up pass through each broker first: the JIT of a JavaScript broker (and of this
    // process's clients) should not count against whichever broker happens to run first
    await throughput(`mqtt://127.0.0.1:${o.mqttPort}`, ours, N / 5);
    await throughput(`mqtt://127.0.0.1:${aedesPort}`, {}, N / 5);
    if (mosq) await throughput(`mqtt://127.0.0.1:${mosqPort}`, {}, N / 5);
    const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
    const r: Record<string, number[]> = { outpost: [], aedes: [], mosquitto: [] };
    for (let i = 0; i < rounds; i++) {
      r.outpost!.push(await throughput(`mqtt://127.0.0.1:${o.mqttPort}`, ours));
      r.aedes!.push(await throughput(`mqtt://127.0.0.1:${aedesPort}`));
      if (mosq) r.mosquitto!.push(await throughput(`mqtt://127.0.0.1:${mosqPort}`));
    }
    const history = await json(`${o.url}/api/v/1/message/${s.systemKey}?topic=bench/throughput&count=5`, "GET", undefined, dev);
    if (!Array.isArray(history) || history.length !== 5) throw new Error("history was not written: " + JSON.stringify(history));
    const [ou, ae, mo] = [median(r.outpost!), median(r.aedes!), mosq ? median(r.mosquitto!) : NaN];
    // ratios of the runs of one round (they see about the same machine), then their median
    const ratio = (xs: number[]) => median(r.outpost!.map((v, i) => v / xs[i]!));
    report(`MQTT: ${fmt(N)} QoS 0 messages of 64 bytes, 1 publisher -> 1 subscriber (medians of ${rounds} rounds after a warm-up)`, [
      ["outpost msg/s (auth, history on)", fmt(ou)],
      ["bare aedes msg/s", fmt(ae)],
      ["mosquitto msg/s", mosq ? fmt(mo) : "not installed (apt-get install mosquitto)"],
      ["outpost / aedes", `${fmt(ratio(r.aedes!), 2)}  ${verdict(ratio(r.aedes!), 0.8)}`],
      ["outpost / mosquitto", mosq ? `${fmt(ratio(r.mosquitto!), 2)}  ${verdict(ratio(r.mosquitto!), 0.8)}` : "-"],
    ]);

    await sharedVsPlain(`mqtt://127.0.0.1:${o.mqttPort}`, ours, rounds, o.pid);

    // many idle authenticated connections
    const before = o.rssKb();
    const clients: mqtt.MqttClient[] = [];
    const t0 = performance.now();
    for (let i = 0; i < CONNECTIONS; i += 250) {
      const batch = await Promise.all(Array.from({ length: Math.min(250, CONNECTIONS - i) }, (_, j) =>
        connect(`mqtt://127.0.0.1:${o.mqttPort}`, { ...ours, clientId: `idle-${i + j}`, keepalive: 300 })));
      clients.push(...batch);
    }
    const took = performance.now() - t0;
    await Bun.sleep(1000);
    const after = o.rssKb();
    const count = await json(`${o.url}/api/v/1/message/${s.systemKey}/currentTopics`, "GET", undefined, dev);
    void count;
    report(`MQTT: ${fmt(CONNECTIONS)} concurrent authenticated connections`, [
      ["connected", `${fmt(clients.length)} in ${fmt(took / 1000, 1)} s`],
      ["broker RSS before / after", `${fmt(before / 1024, 1)} / ${fmt(after / 1024, 1)} MB`],
      ["memory per connection", `${fmt((after - before) / clients.length, 1)} KB`],
    ]);
    await Promise.all(clients.map((c) => c.endAsync(true)));
  } finally {
    await o.stop();
    await aedes.stop();
    await mosq?.stop();
    rmSync(mosqDir, { recursive: true, force: true });
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

if (import.meta.main) await (process.argv[2] === "shared" ? benchMqttShared() : benchMqtt());
