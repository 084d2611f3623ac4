// bench/scale.ts: cost curves that must stay flat while one dimension grows. Each curve is measured
// at three or four sizes in the same run, in paired rounds (every size once per round, the ratio
// to the smallest size taken per round, then the median), and printed with its ratio:
//  1. QoS 1 messages/s to a client holding 1 .. 50,000 subscriptions (target: >= 0.8 of 1);
//  2. the last 10 messages of a topic holding 1,000 .. 1,000,000 (target: <= 1.5x of 1,000);
//  3. devices: bulk creation, generated and chosen keys (target >= 1,000/s each; a chosen key's
//     argon2id hash is made after the answer, and the time until all landed is printed), and 10,000 device sign-ins after a restart
//     (target <= 60 s); the default device listing at 1,000 .. 100,000 devices;
//  4. collections of 10,000 .. 1,000,000 rows: a page deep in an indexed sort reached through
//     NEXTPAGEURL against page 1 (target <= 5x), deep PAGENUM pages, TOTAL, and inserts as the
//     table grows;
//  5. one change reaching 1 .. 200 connected edges of a system, p50 and p99 (target: p99 <= 500 ms
//     at 200), timed on arrival (the edges' own logs, protocol clients), never by polling: the
//     fleet of bench/sync.ts.
// Sizes are settable (comma-separated lists), so CI runs a small version as a smoke test:
//   SCALE=small                        every curve at small sizes
//   SCALE_PARTS=qos,history,devices,paging,propagation   which curves (default all)
//   SCALE_SUBS, SCALE_HISTORY, SCALE_DEVICES, SCALE_ROWS, SCALE_SIGNINS, SCALE_ROUNDS,
//   SCALE_EDGES, SCALE_EDGE_CHANGES
import mqtt from "mqtt";
import { rmSync } from "node:fs";
import { cpuMicros, fmt, json, median, pct, report, setupSystem, startOutpost, verdict } from "./lib.ts";
import { fleet } from "./sync.ts";

const small = process.env.SCALE === "small";
const sizes = (name: string, full: number[], smoke: number[]) =>
  (process.env[name] ? process.env[name]!.split(",").map(Number) : small ? smoke : full).filter((n) => n > 0);
const num = (name: string, full: number, smoke: number) => Number(process.env[name] ?? (small ? smoke : full));

const ROUNDS = num("SCALE_ROUNDS", 3, 1);
const PARTS = (process.env.SCALE_PARTS ?? "qos,history,devices,paging,propagation").split(",");

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

// ---- 3. devices: bulk creation, a sign-in storm after a restart, the default listing -------------

/** Creates devices in arrays of up to 1,000; returns each one's key (the chosen one, or the one the
 *  server generated). A server without bulk creation gets them one at a time (the previous version,
 *  for comparison). */
async function createDevices(url: string, s: System, names: string[], chosen: boolean): Promise<string[]> {
  const headers = { "ClearBlade-DevToken": s.devToken };
  const keys: string[] = [];
  for (let i = 0; i < names.length; i += 1000) {
    const batch = names.slice(i, i + 1000).map((name) => (chosen ? { name, active_key: `key-of-${name}` } : { name }));
    const r = await fetch(`${url}/admin/devices/${s.systemKey}`, { method: "POST", headers, body: JSON.stringify(batch) });
    if (r.status === 404) {
      for (const d of batch) keys.push((await json(`${url}/admin/devices/${s.systemKey}/${d.name}`, "POST", d, headers)).active_key ?? (d as { active_key: string }).active_key);
      continue;
    }
    const out = (await r.json()) as { name: string; active_key?: string }[];
    if (r.status !== 200) throw new Error(`bulk create: ${r.status} ${JSON.stringify(out)}`);
    out.forEach((d, j) => keys.push(d.active_key ?? (batch[j] as { active_key: string }).active_key));
  }
  return keys;
}

/** Chosen device keys whose argon2id hash is still to be made (/metrics), or null from a server
 *  that hashes them while creating. */
const METRICS_TOKEN = "bench-metrics-token-0123456789";
async function hashesWaiting(url: string): Promise<number | null> {
  const r = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const m = (await r.text()).match(/^outpost_device_key_hashes_waiting(?:\{\})? (\d+)$/m);
  return m ? Number(m[1]) : null;
}

async function devicesCurve() {
  const SIGNINS = num("SCALE_SIGNINS", 10_000, 1_000);
  const CHOSEN = Math.min(SIGNINS, num("SCALE_CHOSEN", 2_000, 200));
  const SINGLE = num("SCALE_SINGLE", 40, 10);
  const LIST = sizes("SCALE_DEVICES", [1_000, 10_000, 100_000], [1_000, 5_000]);
  // the built-in sign-in throttling stays on: each device signs in once
  const withMetrics = ["--metrics-token", METRICS_TOKEN];
  let o = await startOutpost(withMetrics);
  const dataDir = o.dataDir;
  try {
    const s = await setupSystem(o.url);
    // one at a time with a chosen key, as before: the baseline of creation
    let t0 = performance.now();
    for (let i = 0; i < SINGLE; i++) await json(`${o.url}/admin/devices/${s.systemKey}/one-${i}`, "POST", { active_key: `key-of-one-${i}` }, { "ClearBlade-DevToken": s.devToken });
    const singleRate = SINGLE / ((performance.now() - t0) / 1000);
    t0 = performance.now();
    const generatedNames = Array.from({ length: SIGNINS - CHOSEN }, (_, i) => `gen-${i}`);
    const generatedKeys = await createDevices(o.url, s, generatedNames, false);
    const bulkRate = generatedNames.length / ((performance.now() - t0) / 1000);
    // chosen keys (their argon2id hashes made after the answer), while another client writes rows:
    // neither the creation nor the hashing after it may hold its writes
    const { collectionID } = await json(`${o.url}/admin/collectionmanagement`, "POST", { name: "beside", appID: s.systemKey }, { "ClearBlade-DevToken": s.devToken });
    const write = async () => { const t = performance.now(); await json(`${o.url}/api/v/1/data/${collectionID}`, "POST", [{}], { "ClearBlade-DevToken": s.devToken }); return performance.now() - t; };
    const idle: number[] = [];
    for (let i = 0; i < 20; i++) idle.push(await write());
    t0 = performance.now();
    const chosenNames = Array.from({ length: CHOSEN }, (_, i) => `chosen-${i}`);
    let creating = true;
    const creation = createDevices(o.url, s, chosenNames, true).finally(() => { creating = false; });
    const busy: number[] = [];
    while (creating) { busy.push(await write()); await Bun.sleep(20); }
    const chosenKeys = await creation;
    const chosenRate = CHOSEN / ((performance.now() - t0) / 1000);
    // until every argon2id hash has landed (the sign-ins after the restart run either way)
    const hashing: number[] = [];
    for (;;) {
      const left = await hashesWaiting(o.url);
      if (left === 0 || left === null) break;
      hashing.push(await write());
      await Bun.sleep(200);
    }
    const hashedSecs = (performance.now() - t0) / 1000;

    // a restart, then every device signs in again, 64 at a time
    await o.stop();
    o = await startOutpost(withMetrics, dataDir);
    const storm = [...generatedNames.map((n, i) => [n, generatedKeys[i]!]), ...chosenNames.map((n, i) => [n, chosenKeys[i]!])];
    let next = 0, failed = 0;
    t0 = performance.now();
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (next < storm.length) {
        const [deviceName, activeKey] = storm[next++]!;
        const r = await fetch(`${o.url}/api/v/2/devices/${s.systemKey}/auth`, { method: "POST", body: JSON.stringify({ deviceName, activeKey }) });
        if (r.status !== 200) failed++;
        await r.arrayBuffer();
      }
    }));
    const stormSecs = (performance.now() - t0) / 1000;
    if (failed) throw new Error(`sign-in storm: ${failed} of ${storm.length} failed`);

    // the default listing (no query: page 1 by creation date) of systems holding N devices
    const systems: System[] = [];
    for (const n of LIST) {
      const sys = await setupSystem(o.url);
      await createDevices(o.url, sys, Array.from({ length: n }, (_, i) => `d-${String(i).padStart(7, "0")}`), false);
      systems.push(sys);
    }
    const list = (sys: System) => () => json(`${o.url}/api/v/2/devices/${sys.systemKey}`, "GET", undefined, { "ClearBlade-DevToken": sys.devToken });
    const rounds: number[][] = [];
    for (let round = 0; round < ROUNDS && systems.length; round++) rounds.push(await latencies(systems.map(list), 20));
    const { values, ratios } = systems.length ? curve(rounds) : { values: [], ratios: [] };
    report(`Scale 3: devices (built-in sign-in throttling on)`, [
      ["create one at a time (chosen key)", `${fmt(singleRate, 1)} devices/s`],
      [`bulk create, generated keys (${fmt(generatedNames.length)})`, `${fmt(bulkRate)} devices/s  ${verdict(bulkRate, 1000)}`],
      [`bulk create, chosen keys (${fmt(CHOSEN)})`, `${fmt(chosenRate)} devices/s  ${verdict(chosenRate, 1000)}`],
      [`  their argon2id hashes all landed after`, `${fmt(hashedSecs, 1)} s`],
      ["a row insert beside the creation / the hashing / idle (p90)", `${fmt(pct(busy.length ? busy : [0], 0.9), 1)} / ${fmt(pct(hashing.length ? hashing : [0], 0.9), 1)} / ${fmt(pct(idle, 0.9), 1)} ms`],
      [`${fmt(storm.length)} sign-ins after a restart (${fmt(CHOSEN)} chosen keys)`, `${fmt(stormSecs, 1)} s, ${fmt(storm.length / stormSecs)}/s  ${verdict(stormSecs * 10_000 / storm.length, 60, false)} (60 s for 10,000)`],
      ...LIST.map((n, i): [string, string] => [`default listing, ${fmt(n)} devices`, `${fmt(values[i]!, 2)} ms  ratio ${fmt(ratios[i]!, 2)}`]),
    ]);
  } finally {
    await o.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---- 4. collections: deep pages, TOTAL, inserts as the table grows -------------------------------

async function pagingCurve() {
  const ROWS = sizes("SCALE_ROWS", [10_000, 100_000, 1_000_000], [2_000, 20_000]);
  const PAGE = 100;
  const o = await startOutpost();
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    const results: { n: number; first: number; last: number; walkFirst: number; walkLast: number; byNumber: number; unFirst: number; unDeep: number; carried: number; counted: number; insertFirst: number; insertLast: number }[] = [];
    // the same page asked for with its columns in another order each time: reused results do not count
    const orders = [["item_id", "n", "v"], ["n", "item_id", "v"], ["v", "n", "item_id"], ["item_id", "v", "n"], ["n", "v", "item_id"], ["v", "item_id", "n"]];
    const reorder = (url: string, i: number) => {
      const [path, query] = url.split("?query=");
      const q = JSON.parse(decodeURIComponent(query!));
      q.SELECTCOLUMNS = orders[i % orders.length];
      return `${o.url}${path}?query=${encodeURIComponent(JSON.stringify(q))}`;
    };
    /** The median time of a page, asked for in each column order, over `rounds` rounds with a write
     *  before each (a new write version: nothing of the round before is reused; the first request
     *  of a round counts TOTAL again, the median leaves it out). */
    const timeEach = async (id: string, url: string, rounds = 4) => {
      const xs: number[] = [];
      for (let r = 0; r < rounds; r++) {
        await json(`${o.url}/api/v/1/data/${id}`, "PUT", { query: [[{ EQ: [{ n: 0 }] }]], $set: { v: -r } }, dev);
        for (let i = 0; i < orders.length; i++) { const u = reorder(url, i); const t0 = performance.now(); await json(u, "GET", undefined, dev); xs.push(performance.now() - t0); }
      }
      return median(xs);
    };
    for (const n of ROWS) {
      const { collectionID: id } = await json(`${o.url}/admin/collectionmanagement`, "POST", { name: `rows${n}`, appID: s.systemKey }, dev);
      for (const [c, type] of [["n", "int"], ["v", "double"]]) await json(`${o.url}/admin/collectionmanagement`, "PUT", { id, addColumn: { name: c, type } }, dev);
      // n: a permutation of 0..n-1 (7919 is prime to every size of the form 2^a 5^b); v unindexed
      const tenth = Math.max(1000, Math.floor(n / 10 / 1000) * 1000);
      const rate = async (from: number, to: number) => {
        const t0 = performance.now();
        for (let i = from; i < to; i += 1000) {
          const rows = Array.from({ length: Math.min(1000, to - i) }, (_, j) => ({ n: ((i + j) * 7919) % n, v: ((i + j) * 104729) % 1_000_003 }));
          await json(`${o.url}/api/v/1/data/${id}`, "POST", rows, dev);
        }
        return (to - from) / ((performance.now() - t0) / 1000);
      };
      const insertFirst = await rate(0, tenth);
      await rate(tenth, n - tenth);
      const insertLast = await rate(n - tenth, n);
      // indexed after the inserts: their pace is the table's and its item_id index's, not that of
      // an index of values in random order
      await json(`${o.url}/api/v/4/data/${s.systemKey}/rows${n}/index?columnName=n`, "POST", undefined, dev);
      const base = `/api/v/1/data/${id}`;
      const sorted = (sort: unknown, extra: Record<string, unknown> = {}) => `${base}?query=${encodeURIComponent(JSON.stringify({ SORT: sort, PAGESIZE: PAGE, PAGENUM: 1, ...extra }))}`;
      // walk every page of the indexed sort through NEXTPAGEURL, timing each
      const times: number[] = [];
      let url: string | null = sorted([{ ASC: "n" }]);
      let deepUrl = url;
      while (url) {
        const t0 = performance.now();
        const page: { NEXTPAGEURL: string | null; DATA: { n: number }[] } = await json(`${o.url}${url}`, "GET", undefined, dev);
        times.push(performance.now() - t0);
        if (page.NEXTPAGEURL) deepUrl = page.NEXTPAGEURL;
        url = page.NEXTPAGEURL;
      }
      if (times.length !== n / PAGE) throw new Error(`walk: ${times.length} pages of ${n / PAGE}`);
      const first = await timeEach(id, sorted([{ ASC: "n" }]));
      const last = await timeEach(id, deepUrl);
      const byNumber = await timeEach(id, sorted([{ ASC: "n" }], { PAGENUM: n / PAGE }), 1);
      // the unindexed sort: page 1, and the deep page through its NEXTPAGEURL (one walk step away)
      const unFirst = await timeEach(id, sorted([{ ASC: "v" }]), 1);
      const mid = await json<{ NEXTPAGEURL: string }>(`${o.url}${sorted([{ ASC: "v" }], { PAGENUM: n / PAGE - 1 })}`, "GET", undefined, dev);
      const unDeep = await timeEach(id, mid.NEXTPAGEURL, 1);
      // the first page after a write: without a filter TOTAL is carried over the write, with one
      // (here matching every row) it is counted again
      const carried: number[] = [], counted: number[] = [];
      for (let i = 0; i < 6; i++) {
        await json(`${o.url}/api/v/1/data/${id}`, "POST", [{ n: n + i, v: 0 }], dev);
        let t0 = performance.now();
        await json(`${o.url}${sorted([{ ASC: "n" }])}`, "GET", undefined, dev);
        carried.push(performance.now() - t0);
        t0 = performance.now();
        await json(`${o.url}${sorted([{ ASC: "n" }], { FILTERS: [[{ GTE: [{ n: 0 }] }]] })}`, "GET", undefined, dev);
        counted.push(performance.now() - t0);
      }
      const walk = (xs: number[]) => median(xs.slice(0, Math.min(50, xs.length)));
      results.push({ n, first, last, walkFirst: walk(times.slice(1)), walkLast: walk(times.slice(-50)), byNumber, unFirst, unDeep, carried: median(carried), counted: median(counted), insertFirst, insertLast });
    }
    const r0 = results[0]!;
    const big = results.at(-1)!;
    report(`Scale 4: collections, pages of ${PAGE} (medians; a page asked for in several column orders so reused results do not count)`, [
      ...results.flatMap((r): [string, string][] => [
        [`${fmt(r.n)} rows: indexed sort, page 1 / page ${fmt(r.n / PAGE)} via NEXTPAGEURL`, `${fmt(r.first, 2)} / ${fmt(r.last, 2)} ms  ratio ${fmt(r.last / r.first, 2)}`],
        [`${fmt(r.n)} rows: walking every page, first 50 / last 50`, `${fmt(r.walkFirst, 2)} / ${fmt(r.walkLast, 2)} ms a page`],
        [`${fmt(r.n)} rows: page ${fmt(r.n / PAGE)} by PAGENUM alone (OFFSET)`, `${fmt(r.byNumber, 2)} ms`],
        [`${fmt(r.n)} rows: unindexed sort, page 1 / last page via NEXTPAGEURL`, `${fmt(r.unFirst, 1)} / ${fmt(r.unDeep, 1)} ms`],
        [`${fmt(r.n)} rows: page 1 after an insert: TOTAL carried over / filtered, counted`, `${fmt(r.carried, 2)} / ${fmt(r.counted, 2)} ms`],
        [`${fmt(r.n)} rows: inserts, first / last tenth`, `${fmt(r.insertFirst)} / ${fmt(r.insertLast)} rows/s  ratio ${fmt(r.insertLast / r.insertFirst, 2)}`],
      ]),
      [`deep page vs page 1 at ${fmt(big.n)} rows`, `${fmt(big.last / big.first, 2)}  ${verdict(big.last / big.first, 5, false)}`],
      [`page 1 at ${fmt(big.n)} vs ${fmt(r0.n)} rows`, `${fmt(big.first / r0.first, 2)}`],
    ]);
  } finally {
    await o.stop();
    rmSync(o.dataDir, { recursive: true, force: true });
  }
}

// ---- 5. one change reaching a growing fleet of edges ------------------------------------------

async function propagationCurve() {
  const EDGES = sizes("SCALE_EDGES", [1, 50, 100, 200], [1, 5, 10]);
  const CHANGES = num("SCALE_EDGE_CHANGES", 10, 3);
  const results: Awaited<ReturnType<typeof fleet>>[] = [];
  // two edges are processes of the binary (timed by their own logs), the rest protocol clients
  for (const n of EDGES) results.push(await fleet(n, Math.min(2, n), CHANGES));
  const big = results.at(-1)!;
  report(`Scale 5: one change reaching N connected edges of a system (${CHANGES} changes, timed on arrival, no polling)`, [
    ...EDGES.map((n, i): [string, string] => [`${fmt(n)} edges: p50 / p99`, `${fmt(results[i]!.p50, 1)} / ${fmt(results[i]!.p99, 1)} ms  ratio p99 ${fmt(results[i]!.p99 / Math.max(results[0]!.p99, 1), 2)}`]),
    [`p99 at ${fmt(EDGES.at(-1)!)} edges`, `${fmt(big.p99, 1)} ms  ${verdict(big.p99, 500, false)}`],
  ]);
}

export async function benchScale() {
  if (PARTS.includes("qos")) await qosCurve();
  if (PARTS.includes("history")) await historyCurve();
  if (PARTS.includes("devices")) await devicesCurve();
  if (PARTS.includes("paging")) await pagingCurve();
  if (PARTS.includes("propagation")) await propagationCurve();
}

if (import.meta.main) await benchScale();
