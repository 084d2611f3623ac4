// bench/mqtt.ts: one publisher and one subscriber, 100,000 QoS 0 messages of 64 bytes, through
// Outpost's broker (authenticated user, history on for the topic), a bare aedes and Mosquitto
// (Debian package), on loopback. Targets: Outpost >= 0.8 of bare aedes and >= 0.8 of Mosquitto.
// Then shared subscriptions: the same messages to three members of one group ($share/<group>/...)
// against one plain subscriber, at QoS 0 and 1, in the same run (target >= 0.8), with the
// broker's CPU time per message, which a loaded machine disturbs less than throughput.
// Then QoS 1 telemetry fan-in: 200 devices each publishing 100 QoS 1 messages of 128 bytes to
// their own topic, one subscriber on telemetry/# at QoS 1, against bare aedes and Mosquitto in
// the same rounds (target >= 1.2x Mosquitto); on Outpost the devices sign in with their own
// tokens, history is on and a trigger is defined (on another topic: every publish is matched,
// none fires). Every acknowledged message must arrive, or the run fails. Last, 10,000 concurrent
// connections signed in with one user's token, on a fresh node, and the memory per connection.
// `bun bench/mqtt.ts shared` runs the shared-subscription part alone, `fanin` the fan-in, `idle` the idle connections (on a node of their own).
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

const FANIN_DEVICES = Number(process.env.BENCH_FANIN_DEVICES ?? 200);
const FANIN_EACH = Number(process.env.BENCH_FANIN_EACH ?? 100);

/** QoS 1 fan-in: every device publishes its messages (pipelined, as a device with a backlog does)
 *  and waits for their PUBACKs; messages/s from the first publish to the last delivery, and the
 *  broker's CPU time per message when its pid is known. Throws unless every message the broker
 *  acknowledged reached the subscriber. */
async function fanIn(url: string, subOpts: mqtt.IClientOptions, deviceOpts: (i: number) => mqtt.IClientOptions, pid?: number): Promise<{ rate: number; cpu: number; loadCpu: number; topic: string }> {
  const tag = Math.random().toString(36).slice(2, 8);
  const sub = await connect(url, { ...subOpts, clientId: `fanin-sub-${tag}` });
  await sub.subscribeAsync("telemetry/#", { qos: 1 });
  const devices: mqtt.MqttClient[] = [];
  for (let i = 0; i < FANIN_DEVICES; i += 50) {
    devices.push(...await Promise.all(Array.from({ length: Math.min(50, FANIN_DEVICES - i) }, (_, j) =>
      connect(url, { ...deviceOpts(i + j), clientId: `fanin-${tag}-${i + j}` }))));
  }
  const total = FANIN_DEVICES * FANIN_EACH;
  const delivered = new Set<string>();
  let last = 0;
  const all = new Promise<void>((res) => sub.on("message", (_topic, payload) => {
    delivered.add(payload.subarray(0, 16).toString());
    if (delivered.size === total) { last = performance.now(); res(); }
  }));
  const payload = (i: number, k: number) => { const b = Buffer.alloc(128, "t"); b.write(`${String(i).padStart(7, "0")}:${String(k).padStart(8, "0")}`); return b; };
  const cpu0 = pid ? cpuMicros(pid) : 0;
  const load0 = process.cpuUsage();
  const t0 = performance.now();
  let acked = 0;
  await Promise.all(devices.map(async (c, i) => {
    const topic = `telemetry/${tag}-${i}`;
    await Promise.all(Array.from({ length: FANIN_EACH }, (_, k) => c.publishAsync(topic, payload(i, k), { qos: 1 }).then(() => { acked++; })));
  }));
  const timeout = new Promise<void>((_, rej) => setTimeout(() => rej(new Error(`fan-in at ${url}: ${delivered.size} of ${acked} acknowledged messages delivered`)), Number(process.env.BENCH_FANIN_TIMEOUT ?? 120_000)));
  await Promise.race([all, timeout]);
  if (acked !== total) throw new Error(`fan-in: ${acked} of ${total} acknowledged`);
  const rate = total / ((last - t0) / 1000);
  const cpu = pid ? (cpuMicros(pid) - cpu0) / total : NaN;
  const load = process.cpuUsage(load0);
  await Promise.all([sub.endAsync(), ...devices.map((c) => c.endAsync())]);
  return { rate, cpu, loadCpu: (load.user + load.system) / total, topic: `telemetry/${tag}-0` };
}

/** Outpost with FANIN_DEVICES devices that may publish on telemetry/#, a user who may subscribe to
 *  it, and a trigger on another topic; what fanIn needs to connect them. */
async function fanInSetup(o: { url: string }) {
  const s = await setupSystem(o.url);
  const dev = { "ClearBlade-DevToken": s.devToken };
  const role = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", { name: "telemetry", topics: [{ itemInfo: { name: "telemetry/#" }, permissions: 3 }] }, dev);
  await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role.role_id] } } }, dev);
  const names = Array.from({ length: FANIN_DEVICES }, (_, i) => `meter-${i}`);
  const created = await json(`${o.url}/admin/devices/${s.systemKey}`, "POST", names.map((name) => ({ name })), dev) as { name: string; active_key: string }[];
  const tokens: string[] = [];
  for (const d of created) {
    await json(`${o.url}/admin/devices/roles/${s.systemKey}/${d.name}`, "PUT", { add: [role.role_id] }, dev);
    tokens.push((await json(`${o.url}/api/v/2/devices/${s.systemKey}/auth`, "POST", { deviceName: d.name, activeKey: d.active_key })).deviceToken);
  }
  await json(`${o.url}/admin/code/v/1/${s.systemKey}/onAlert`, "POST", { code: "function onAlert(req, resp) { resp.success('ok'); }", parameters: [] }, dev);
  await json(`${o.url}/admin/triggers/handlers/${s.systemKey}/alerts`, "POST", { def_module: "Messaging", def_name: "Publish", key_value_pairs: { topic: "alerts/#" }, service_name: "onAlert" }, dev);
  return { s, sub: { username: s.userToken, password: s.systemKey }, device: (i: number) => ({ username: tokens[i]!, password: s.systemKey }) };
}

/** The fan-in on Outpost, bare aedes and Mosquitto, in alternating rounds. */
async function fanInVsPeers(o: { url: string; mqttPort: number; pid: number }, aedesPort: number, mosq: { port: number; pid: number } | null, rounds: number) {
  const mosqPort = mosq?.port ?? null;
  const { s, sub, device } = await fanInSetup(o);
  const ours = `mqtt://127.0.0.1:${o.mqttPort}`, aedesUrl = `mqtt://127.0.0.1:${aedesPort}`, mosqUrl = mosqPort ? `mqtt://127.0.0.1:${mosqPort}` : null;
  await fanIn(ours, sub, device, o.pid); // warm-up
  await fanIn(aedesUrl, {}, () => ({}));
  if (mosqUrl) await fanIn(mosqUrl, {}, () => ({}));
  const r: Record<string, number[]> = { outpost: [], aedes: [], mosquitto: [], cpu: [], mosqCpu: [], mosqLoad: [] };
  let topic = "";
  for (let i = 0; i < rounds; i++) {
    const ou = await fanIn(ours, sub, device, o.pid);
    topic = ou.topic;
    r.outpost!.push(ou.rate);
    r.cpu!.push(ou.cpu);
    r.aedes!.push((await fanIn(aedesUrl, {}, () => ({}))).rate);
    if (mosqUrl) {
      const mo = await fanIn(mosqUrl, {}, () => ({}), mosq!.pid);
      r.mosquitto!.push(mo.rate);
      r.mosqCpu!.push(mo.cpu);
      r.mosqLoad!.push(mo.loadCpu);
    }
  }
  const history = await json(`${o.url}/api/v/1/message/${s.systemKey}?topic=${topic}&count=5`, "GET", undefined, { "ClearBlade-DevToken": s.devToken });
  if (!Array.isArray(history) || history.length !== 5) throw new Error("fan-in history was not written: " + JSON.stringify(history));
  const ratio = (xs: number[]) => median(r.outpost!.map((v, i) => v / xs[i]!));
  report(`MQTT QoS 1 fan-in: ${fmt(FANIN_DEVICES)} devices x ${fmt(FANIN_EACH)} messages of 128 bytes -> 1 subscriber on telemetry/# (medians of ${rounds} rounds after a warm-up)`, [
    ["outpost msg/s (device auth, history, a trigger)", fmt(median(r.outpost!))],
    ["outpost broker CPU per message", `${fmt(median(r.cpu!), 1)} µs`],
    ["bare aedes msg/s", fmt(median(r.aedes!))],
    ["mosquitto msg/s", mosqUrl ? fmt(median(r.mosquitto!)) : "not installed (apt-get install mosquitto)"],
    ["mosquitto broker CPU per message", mosqUrl ? `${fmt(median(r.mosqCpu!), 1)} µs` : "-"],
    ["outpost / aedes", fmt(ratio(r.aedes!), 2)],
    ["outpost / mosquitto", mosqUrl ? `${fmt(ratio(r.mosquitto!), 2)}  ${verdict(ratio(r.mosquitto!), 1.2)}` : "-"],
    // The load generator's own CPU per message: at Mosquitto's rate it shows how much of the
    // machine's cores the clients leave to any broker (the ceiling of every ratio above).
    ["load generator CPU per message, against mosquitto", mosqUrl ? `${fmt(median(r.mosqLoad!), 1)} µs (${fmt(median(r.mosqLoad!) * median(r.mosquitto!) / 1e6, 2)} of a core at its rate)` : "-"],
  ]);
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

/** Bare aedes and (when installed) Mosquitto on free ports. */
async function peers() {
  const aedesPort = port();
  const aedes = startProc([BUN, join(ROOT, "bench/baselines/aedes.ts"), String(aedesPort)]);
  let mosq: { pid: number; stop(): Promise<void> } | undefined;
  const mosqPort = port();
  const mosqDir = mkdtempSync(join(tmpdir(), "mosq-"));
  if (hasMosquitto()) {
    // no bound on a client's queue (its default, 1,000, drops QoS 1 messages of the fan-in: every
    // broker here must deliver every message it acknowledged)
    writeFileSync(join(mosqDir, "m.conf"), `listener ${mosqPort} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n`);
    mosq = startProc(["mosquitto", "-c", join(mosqDir, "m.conf")]);
  }
  await waitPort(aedesPort);
  if (mosq) await waitPort(mosqPort);
  return {
    aedesPort, mosqPort: mosq ? mosqPort : null, mosqPid: mosq?.pid ?? null,
    stop: async () => { await aedes.stop(); await mosq?.stop(); rmSync(mosqDir, { recursive: true, force: true }); },
  };
}

export async function benchMqttFanIn() {
  const o = await startOutpost();
  const p = await peers();
  try {
    await fanInVsPeers(o, p.aedesPort, p.mosqPort && p.mosqPid ? { port: p.mosqPort, pid: p.mosqPid } : null, Number(process.env.BENCH_ROUNDS ?? 3));
  } finally {
    await o.stop();
    await p.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

/** Many idle connections signed in with one user's token, on a node of their own: its memory
 *  before them is read once its start has settled (the collection a second after the start, see
 *  src/main.ts), not after other runs whose garbage a later collection would give back. */
export async function idleConnections() {
  const o = await startOutpost();
  try {
    const s = await setupSystem(o.url);
    const ours = { username: s.userToken, password: s.systemKey };
    await Bun.sleep(1500);
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
    report(`MQTT: ${fmt(CONNECTIONS)} concurrent authenticated connections (a node of their own)`, [
      ["connected", `${fmt(clients.length)} in ${fmt(took / 1000, 1)} s`],
      ["broker RSS before / after", `${fmt(before / 1024, 1)} / ${fmt(after / 1024, 1)} MB`],
      ["memory per connection", `${fmt((after - before) / clients.length, 1)} KB`],
    ]);
    await Promise.all(clients.map((c) => c.endAsync(true)));
  } finally {
    await o.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

export async function benchMqtt() {
  const o = await startOutpost();
  const p = await peers();
  const { aedesPort } = p, mosq = p.mosqPort !== null, mosqPort = p.mosqPort ?? 0;
  try {
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
    await fanInVsPeers(o, aedesPort, p.mosqPort && p.mosqPid ? { port: p.mosqPort, pid: p.mosqPid } : null, rounds);
  } finally {
    await o.stop();
    await p.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
  await idleConnections();
}

if (import.meta.main) await (process.argv[2] === "shared" ? benchMqttShared() : process.argv[2] === "fanin" ? benchMqttFanIn() : process.argv[2] === "idle" ? idleConnections() : benchMqtt());
