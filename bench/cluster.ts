// bench/cluster.ts: a cluster of two platform nodes (one Redis, one shared libSQL file) against
// one node of the same cluster, measured in the same run, in turns:
//   - MQTT messages per second: two publishers and two subscribers, QoS 0, 64-byte messages; on
//     one node all four clients are on it, on two nodes each publisher's subscriber is on the other
//     node (every message crosses between nodes);
//   - HTTP requests per second of an authenticated read (wrk), all on one node or split between two;
//   - publish latency, one message every 2 ms: publisher and subscriber on one node, and on two.
// Target: two nodes at least 0.8 of one (on a 2-core machine both share the same cores, so about
// 1 is expected; the point is that coordination costs little).
// BENCH_CLUSTER_DB: the shared database URL (default: a libSQL file in a temporary directory).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import { alternate, BIN, fmt, hasWrk, load, pct, port, redisServer, report, setupSystem, verdict, waitHttp } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 40_000);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 1_000);
const PAYLOAD = Buffer.alloc(64, "x");


async function node(db: string, redis: string, id: string) {
  const dataDir = mkdtempSync(join(tmpdir(), "outpost-bench-cluster-"));
  const httpPort = port(), mqttPort = port();
  const p = Bun.spawn([BIN, "--http-port", String(httpPort), "--mqtt-port", String(mqttPort), "--mqtt-ws-port", String(port()), "--data-dir", dataDir,
    "--db", db, "--redis-url", redis, "--node-id", id, "--secret-key", "bench-cluster-secret-0123456789", "--log-level", "error",
    "--enable-default-throttlers", "false", "--history-max-rows", "0"], { cwd: dataDir, stdout: "ignore", stderr: "inherit" });
  const url = `http://127.0.0.1:${httpPort}`;
  await waitHttp(url + "/health");
  return { url, mqttUrl: `mqtt://127.0.0.1:${mqttPort}`, stop: async () => { p.kill("SIGTERM"); await p.exited; rmSync(dataDir, { recursive: true, force: true }); } };
}
type Node = Awaited<ReturnType<typeof node>>;

function connect(url: string, opts: mqtt.IClientOptions): Promise<mqtt.MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 30_000, clientId: `b${Math.random()}`, ...opts });
    c.once("connect", () => res(c));
    c.once("error", rej);
  });
}

/** Messages per second received by two subscribers, each fed by its own publisher. `pairs`: for
 *  each pair, the nodes of its publisher and of its subscriber. */
async function throughput(pairs: [Node, Node][], auth: mqtt.IClientOptions): Promise<number> {
  const clients: mqtt.MqttClient[] = [];
  const runs = await Promise.all(pairs.map(async ([pn, sn], i) => {
    const topic = `bench/cluster/${i}/${Math.random()}`;
    const sub = await connect(sn.mqttUrl, auth);
    const pub = await connect(pn.mqttUrl, auth);
    clients.push(sub, pub);
    await sub.subscribeAsync(topic, { qos: 0 });
    return { sub, pub, topic };
  }));
  await Bun.sleep(200); // subscriptions reach the other broker
  let got = 0;
  const total = MESSAGES * runs.length;
  const done = new Promise<void>((res) => { for (const r of runs) r.sub.on("message", () => { if (++got === total) res(); }); });
  const t0 = performance.now();
  await Promise.all(runs.map(async (r) => {
    for (let i = 0; i < MESSAGES; i++) {
      r.pub.publish(r.topic, PAYLOAD, { qos: 0 });
      if (i % 500 === 499) await new Promise((x) => setImmediate(x));
    }
  }));
  const timeout = new Promise<void>((_, rej) => setTimeout(() => rej(new Error(`only ${got}/${total} received`)), 120_000));
  await Promise.race([done, timeout]);
  const rate = total / ((performance.now() - t0) / 1000);
  await Promise.all(clients.map((c) => c.endAsync()));
  return rate;
}

/** Requests per second of wrk runs against the nodes at once (connections split between them). */
async function httpRps(nodes: Node[], headers: Record<string, string>): Promise<number> {
  const path = "/api/v/1/user/info";
  if (nodes.length === 1 || !hasWrk()) return load(nodes[0]!.url + path, headers, SECONDS, 64);
  const h = Object.entries(headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]);
  const outs = await Promise.all(nodes.map(async (n) => {
    const p = Bun.spawn(["wrk", "-t1", `-c${Math.floor(64 / nodes.length)}`, `-d${SECONDS}s`, ...h, n.url + path], { stdout: "pipe" });
    return new Response(p.stdout).text();
  }));
  return outs.reduce((sum, out) => {
    if (/Non-2xx or 3xx responses/.test(out)) throw new Error("non-2xx responses");
    return sum + Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0);
  }, 0);
}

/** Publish-to-receive latency (ms), one message every 2 ms. */
async function latency(pubNode: Node, subNode: Node, auth: mqtt.IClientOptions): Promise<number[]> {
  const topic = `bench/latency/${Math.random()}`;
  const sub = await connect(subNode.mqttUrl, auth);
  const pub = await connect(pubNode.mqttUrl, auth);
  await sub.subscribeAsync(topic, { qos: 0 });
  await Bun.sleep(200);
  const sent = new Map<string, number>();
  const out: number[] = [];
  const done = new Promise<void>((res) => sub.on("message", (_t, p) => {
    const at = sent.get(String(p));
    if (at !== undefined) out.push(performance.now() - at);
    if (out.length === LATENCY_SAMPLES) res();
  }));
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const id = String(i);
    sent.set(id, performance.now());
    pub.publish(topic, id, { qos: 0 });
    await Bun.sleep(2);
  }
  await Promise.race([done, Bun.sleep(10_000)]);
  await Promise.all([pub.endAsync(), sub.endAsync()]);
  return out;
}

export async function benchCluster() {
  if (Bun.spawnSync(["which", "redis-server"]).exitCode !== 0) { console.log("\n== cluster: skipped (redis-server is not installed)"); return; }
  const dir = mkdtempSync(join(tmpdir(), "outpost-bench-cluster-db-"));
  const db = process.env.BENCH_CLUSTER_DB ?? `file:${join(dir, "outpost.db")}`;
  const redis = await redisServer();
  const a = await node(db, redis.url, "a");
  const b = await node(db, redis.url, "b");
  try {
    const s = await setupSystem(a.url);
    // the system's developer publishes and subscribes (no role set-up needed)
    const auth = { username: s.devToken, password: s.systemKey, protocolVersion: 4 as const };
    const user = { "ClearBlade-UserToken": s.userToken };
    await httpRps([a], user); // warm both
    await httpRps([a, b], user);

    const [mqtt2, mqtt1, mqttRatio] = await alternate(() => throughput([[a, b], [b, a]], auth), () => throughput([[a, a], [a, a]], auth), 5);
    const [http2, http1, httpRatio] = await alternate(() => httpRps([a, b], user), () => httpRps([a], user));
    const same = await latency(a, a, auth);
    const cross = await latency(a, b, auth);
    const ms = (xs: number[], p: number) => xs.length ? `${fmt(pct(xs, p), 2)} ms` : "n/a";
    report("cluster: two nodes against one (one Redis, one shared database)", [
      ["MQTT msgs/s, 1 node", fmt(mqtt1)],
      ["MQTT msgs/s, 2 nodes (every message crosses)", fmt(mqtt2)],
      ["  ratio 2 nodes / 1 node", `${fmt(mqttRatio, 2)}  ${verdict(mqttRatio, 0.8)}`],
      ["HTTP req/s, 1 node", fmt(http1)],
      ["HTTP req/s, 2 nodes", fmt(http2)],
      ["  ratio 2 nodes / 1 node", `${fmt(httpRatio, 2)}  ${verdict(httpRatio, 0.8)}`],
      ["publish latency, same node p50 / p99", `${ms(same, 0.5)} / ${ms(same, 0.99)}`],
      ["publish latency, across nodes p50 / p99", `${ms(cross, 0.5)} / ${ms(cross, 0.99)}`],
    ]);
  } finally {
    await a.stop();
    await b.stop();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await benchCluster();
