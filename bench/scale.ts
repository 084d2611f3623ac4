// bench/scale.ts: cost curves that must stay flat while one dimension grows. Each curve is measured
// at three or four sizes in the same run, in paired rounds (every size once per round, the ratio
// to the smallest size taken per round, then the median), and printed with its ratio:
//  1. QoS 1 messages/s to a client holding 1 .. 50,000 subscriptions (target: >= 0.8 of 1);
//  2. the last 10 messages of a topic holding 1,000 .. 1,000,000 (target: <= 1.5x of 1,000);
//  3. devices: bulk creation (target >= 1,000/s) and 10,000 device sign-ins after a restart
//     (target <= 60 s); the default device listing at 1,000 .. 100,000 devices;
//  4. collections of 10,000 .. 1,000,000 rows: a page deep in an indexed sort reached through
//     NEXTPAGEURL against page 1 (target <= 5x), deep PAGENUM pages, TOTAL, and inserts as the
//     table grows.
// Sizes are settable (comma-separated lists), so CI runs a small version as a smoke test:
//   SCALE=small                        every curve at small sizes
//   SCALE_PARTS=qos,history,devices,paging   which curves (default all)
//   SCALE_SUBS, SCALE_HISTORY, SCALE_DEVICES, SCALE_ROWS, SCALE_SIGNINS, SCALE_ROUNDS
import mqtt from "mqtt";
import { rmSync } from "node:fs";
import { cpuMicros, fmt, json, median, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const small = process.env.SCALE === "small";
const sizes = (name: string, full: number[], smoke: number[]) =>
  (process.env[name] ? process.env[name]!.split(",").map(Number) : small ? smoke : full).filter((n) => n > 0);
const num = (name: string, full: number, smoke: number) => Number(process.env[name] ?? (small ? smoke : full));

const ROUNDS = num("SCALE_ROUNDS", 3, 1);
const PARTS = (process.env.SCALE_PARTS ?? "qos,history,devices,paging").split(",");

type Outpost = Awaited<ReturnType<typeof startOutpost>>;
type System = Awaited<ReturnType<typeof setupSystem>>;

/** Per-round measurements of each size -> [median value per size, median ratio to the first size per size]. */
function curve(rounds: number[][]): { values: number[]; ratios: number[] } {
  const n = rounds[0]!.length;
  const values = Array.from({ length: n }, (_, i) => median(rounds.map((r) => r[i]!)));
  const ratios = Array.from({ length: n }, (_, i) => median(rounds.map((r) => r[i]! / r[0]!)));
  return { values, ratios };
}

/** Milliseconds per call of each of `fns`, the median of `n` calls each after a warm-up call,
 *  taken in turns (one call of each, then again), so drift on the machine hits them alike. */
async function latencies(fns: (() => Promise<unknown>)[], n: number): Promise<number[]> {
  for (const fn of fns) await fn();
  const xs: number[][] = fns.map(() => []);
  for (let i = 0; i < n; i++) {
    for (const [k, fn] of fns.entries()) { const t0 = performance.now(); await fn(); xs[k]!.push(performance.now() - t0); }
  }
  return xs.map(median);
}

function connect(o: Outpost, s: System): Promise<mqtt.MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${o.mqttPort}`, { reconnectPeriod: 0, connectTimeout: 60_000, clientId: `scale${Math.random()}`, username: s.devToken, password: s.systemKey });
    c.once("connect", () => res(c));
    c.once("error", rej);
  });
}

// ---- 1. QoS 1 delivery against the receiver's subscription count -------------------------------

async function qosCurve() {
  const SUBS = sizes("SCALE_SUBS", [1, 1_000, 10_000, 50_000], [1, 100, 1_000]);
  const MESSAGES = num("SCALE_QOS_MESSAGES", 5_000, 1_000);
  const o = await startOutpost();
  try {
    const s = await setupSystem(o.url);
    const pub = await connect(o, s);
    // one receiver per size, each holding n filters: n - 1 it never gets messages on, and its topic
    const receivers: { topic: string; client: mqtt.MqttClient; got: number }[] = [];
    for (const [k, n] of SUBS.entries()) {
      const client = await connect(o, s);
      const r = { topic: `scale/q${k}/t`, client, got: 0 };
      const filters = Array.from({ length: n - 1 }, (_, i) => `scale/q${k}/f${i}`);
      for (let i = 0; i < filters.length; i += 1000)
        await client.subscribeAsync(Object.fromEntries(filters.slice(i, i + 1000).map((f) => [f, { qos: 1 as const }])));
      await client.subscribeAsync(r.topic, { qos: 1 });
      client.on("message", () => { r.got++; });
      receivers.push(r);
    }
    const payload = Buffer.alloc(64, "q");
    /** messages/s from the first publish to the last message received, and the broker's CPU per message */
    const run = async (r: (typeof receivers)[number], n: number): Promise<[number, number]> => {
      r.got = 0;
      const cpu0 = cpuMicros(o.pid);
      const t0 = performance.now();
      const done = new Promise<void>((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`QoS 1: ${r.got}/${n} received in 300 s`)), 300_000);
        const check = setInterval(() => { if (r.got >= n) { clearInterval(check); clearTimeout(timer); res(); } }, 2);
      });
      for (let i = 0; i < n; i++) {
        pub.publish(r.topic, payload, { qos: 1 });
        if (i % 500 === 499) await new Promise((res) => setImmediate(res));
      }
      await done;
      return [n / ((performance.now() - t0) / 1000), (cpuMicros(o.pid) - cpu0) / n];
    };
    for (const r of receivers) await run(r, Math.min(500, MESSAGES)); // warm-up
    const rates: number[][] = [], cpus: number[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const row: number[] = [], cpu: number[] = [];
      for (const r of receivers) { const [rate, us] = await run(r, MESSAGES); row.push(rate); cpu.push(us); }
      rates.push(row); cpus.push(cpu);
    }
    const { values, ratios } = curve(rates);
    const cpu = curve(cpus).values;
    report(`Scale 1: QoS 1 delivery, ${fmt(MESSAGES)} messages to a client holding N subscriptions (medians of ${ROUNDS} rounds)`, [
      ...SUBS.map((n, i): [string, string] => [`${fmt(n)} subscriptions`, `${fmt(values[i]!)} msg/s  ${fmt(cpu[i]!)} µs broker CPU/msg  ratio ${fmt(ratios[i]!, 2)}`]),
      [`${fmt(SUBS.at(-1)!)} vs ${fmt(SUBS[0]!)}`, `${fmt(ratios.at(-1)!, 2)}  ${verdict(ratios.at(-1)!, 0.8)}`],
    ]);
    for (const r of receivers) r.client.end(true);
    pub.end(true);
  } finally {
    await o.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

// ---- 2. the last 10 messages of a topic against the topic's history ----------------------------

async function historyCurve() {
  const HISTORY = sizes("SCALE_HISTORY", [1_000, 10_000, 100_000, 1_000_000], [1_000, 10_000, 50_000]);
  const o = await startOutpost(["--history-max-rows", String(Math.max(...HISTORY) * 2)]);
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    const pub = await connect(o, s);
    const payload = Buffer.alloc(64, "h");
    const count = async (topic: string) => {
      const rows = await json<{ topicid: string; message_count: number }[]>(`${o.url}/api/v/4/message/${s.systemKey}/topics`, "GET", undefined, dev);
      return rows.find((r) => r.topicid === topic)?.message_count ?? 0;
    };
    const t0 = performance.now();
    for (const n of HISTORY) {
      const topic = `scale/h${n}`;
      for (let i = 0; i < n; i++) {
        pub.publish(topic, payload, { qos: 0 });
        if (i % 2000 === 1999) await new Promise((res) => setTimeout(res, 0));
      }
      while ((await count(topic)) < n) await Bun.sleep(200);
    }
    const filled = (performance.now() - t0) / 1000;
    const url = (n: number) => `${o.url}/api/v/1/message/${s.systemKey}?topic=${encodeURIComponent(`scale/h${n}`)}&count=10`;
    const check = await json<unknown[]>(url(HISTORY[0]!), "GET", undefined, dev);
    if (check.length !== 10) throw new Error(`history: ${check.length} messages instead of 10`);
    const rounds: number[][] = [];
    for (let round = 0; round < ROUNDS; round++) rounds.push(await latencies(HISTORY.map((n) => () => json(url(n), "GET", undefined, dev)), 30));
    const { values, ratios } = curve(rounds);
    report(`Scale 2: GET history count=10 of a topic holding N messages (filled in ${fmt(filled, 1)} s; medians of ${ROUNDS} rounds)`, [
      ...HISTORY.map((n, i): [string, string] => [`${fmt(n)} messages`, `${fmt(values[i]!, 2)} ms  ratio ${fmt(ratios[i]!, 2)}`]),
      [`${fmt(HISTORY.at(-1)!)} vs ${fmt(HISTORY[0]!)}`, `${fmt(ratios.at(-1)!, 2)}  ${verdict(ratios.at(-1)!, 1.5, false)}`],
    ]);
    pub.end(true);
  } finally {
    await o.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

export async function benchScale() {
  if (PARTS.includes("qos")) await qosCurve();
  if (PARTS.includes("history")) await historyCurve();
}

if (import.meta.main) await benchScale();
