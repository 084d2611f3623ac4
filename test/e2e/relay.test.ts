// Message relay between a platform and its edges, black-box, as ClearBlade's four forms: a real
// platform, two edges of one system (the first reaching the platform through a TCP proxy that can
// cut its link) and an edge of another system with the second edge's name. The topic is kept whole
// on every side: receivers subscribe to the suffixed topic, plain-topic subscribers get nothing.
// Also: another system sees nothing, an edge that is away does not get what was sent meanwhile
// (live only, as ClearBlade) while what it publishes meanwhile goes up once it is back (its
// durable outbox), nothing loops, and on a cluster a message published on one node reaches an
// edge linked to another.
import { mkdtempSync, rmSync } from "node:fs";
import { spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import t from "tap";
import { createPgDatabase, dropPgDatabase } from "../pgdb.ts";
import { canConnect, Client, type DevSystem, devWithSystem, freePort, hasCommand, metrics, mqttFlush, must, needs, NodeProcess, type Outpost, request, startOutpost, TEST_DB, uniq, waitFor } from "./harness.ts";
import { tcpProxy } from "./tcp-proxy.ts";

const started: Outpost[] = [];
const closers: (() => Promise<void> | void)[] = [];
const dirs: string[] = [];
t.teardown(async () => {
  for (const o of started) await o.stop().catch(() => {});
  for (const c of closers.reverse()) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const newDir = () => { const d = mkdtempSync(join(tmpdir(), "outpost-relay-")); dirs.push(d); return d; };

/** What an MQTT client received, recorded as each PUBLISH arrives (see mqttFlush). */
class Sub {
  readonly got: { topic: string; payload: string; qos: number }[] = [];
  private constructor(readonly c: mqtt.MqttClient) {
    c.on("packetreceive", (p) => { if (p.cmd === "publish") this.got.push({ topic: p.topic, payload: String(p.payload), qos: p.qos }); });
  }
  static async connect(port: number, token: string, systemKey: string, filters: string[]): Promise<Sub> {
    const c = await new Promise<mqtt.MqttClient>((res, rej) => {
      const x = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: token, password: systemKey, clientId: uniq("r"), reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4 });
      x.once("connect", () => res(x));
      x.once("error", (e) => { x.end(true); rej(e); });
    });
    closers.push(() => { c.end(true); });
    const s = new Sub(c);
    if (filters.length) await c.subscribeAsync(filters, { qos: 1 });
    return s;
  }
  count(topic: string, payload: string) { return this.got.filter((m) => m.topic === topic && m.payload === payload).length; }
  has(topic: string, payload: string, ms = 10_000) { return waitFor(() => this.count(topic, payload) > 0, ms); }
  /** what it got on topics starting with `prefix` */
  on(prefix: string) { return this.got.filter((m) => m.topic.startsWith(prefix)).map((m) => `${m.topic}=${m.payload}`); }
  publish(topic: string, payload: string, qos: 0 | 1 = 1) { return this.c.publishAsync(topic, payload, { qos }); }
  flush() { return mqttFlush(this.c); }
}

const platform = await startOutpost({ args: ["--log-level", "info"] });
started.push(platform);

interface EdgeRun { name: string; token: string; sys: DevSystem; o: Outpost; url: string }
async function newEdge(sys: DevSystem, name: string, platformUrl = platform.url, dataDir?: string): Promise<EdgeRun> {
  const token = `${name}-token-1`;
  if (!dataDir) await must(sys.dev.post(`/admin/edges/${sys.systemKey}/${name}`, { token }), "edge");
  const o = await startOutpost({ dataDir: dataDir ?? newDir(), args: ["--mode", "edge", "--platform-url", platformUrl, "--system-key", sys.systemKey, "--edge-name", name, "--edge-token", token, "--sync-ping-ms", "500", "--log-level", "info"] });
  started.push(o);
  if (!(await waitFor(() => connected(sys, name), 20_000))) throw new Error(`edge ${name} did not connect`);
  return { name, token, sys, o, url: platformUrl };
}
const connected = async (sys: DevSystem, edge: string, via = sys.dev) => (await via.get(`/admin/edges/${sys.systemKey}/${edge}`)).body.isConnected === true;
/** A developer token on an edge (checked with the platform). */
async function edgeToken(o: { url: string }, sys: DevSystem): Promise<string> {
  let token = "";
  if (!(await waitFor(async () => {
    const a = await request(o.url, "POST", "/admin/auth", { body: { email: sys.email, password: sys.password } });
    token = a.body?.dev_token ?? "";
    return a.status === 200;
  }, 20_000))) throw new Error("the developer cannot sign in on the edge");
  return token;
}
const metric = async (o: { url: string }, name: string): Promise<number> => {
  const line = (await metrics(o)).text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
};

const S = await devWithSystem(platform, "relay");
const S2 = await devWithSystem(platform, "relay-other");
const A = uniq("gwa"), B = uniq("gwb");
const proxy = await tcpProxy(platform.httpPort);
closers.push(() => proxy.close());
const eA = await newEdge(S, A, proxy.url);
let eB = await newEdge(S, B);
// another system's edge with the same name as B: relay is per system
const eX = await newEdge(S2, B);

// every subscriber listens on every form (ClearBlade's receivers subscribe to the suffixed topic),
// and on the bare topics
const FILTERS = ["r/#"];
const pSub = await Sub.connect(platform.mqttPort, S.devToken, S.systemKey, FILTERS);
const aSub = await Sub.connect(eA.o.mqttPort, await edgeToken(eA.o, S), S.systemKey, FILTERS);
let bSub = await Sub.connect(eB.o.mqttPort, await edgeToken(eB.o, S), S.systemKey, FILTERS);
const xSub = await Sub.connect(eX.o.mqttPort, await edgeToken(eX.o, S2), S2.systemKey, ["#"]);
const p2Sub = await Sub.connect(platform.mqttPort, S2.devToken, S2.systemKey, ["#"]);
const pPub = await Sub.connect(platform.mqttPort, S.devToken, S.systemKey, []);

t.test("edge -> platform: <topic>/_platform reaches the platform's subscribers of the suffixed topic, not of the bare one", async (t) => {
  await aSub.publish("r/up/_platform", "up-1");
  t.ok(await pSub.has("r/up/_platform", "up-1"), "the platform's subscriber of r/up/_platform gets it, suffix kept");
  t.equal(pSub.got.find((m) => m.topic === "r/up/_platform")?.qos, 1, "at the QoS it was published with (1)");
  // a marker from the same edge, after it, proves the first went through
  await aSub.publish("r/up/mark/_platform", "m");
  t.ok(await pSub.has("r/up/mark/_platform", "m"), "a later marker arrives");
  await pSub.flush();
  t.same(pSub.on("r/up").filter((x) => !x.includes("/_platform")), [], "nothing on the bare topic r/up");
  t.equal(pSub.count("r/up/_platform", "up-1"), 1, "once");
  await bSub.flush();
  t.same(bSub.on("r/up/"), [], "the other edge gets nothing of it");
});

t.test("platform -> one edge: <topic>/_edge/<name> reaches that edge's subscribers only", async (t) => {
  await pPub.publish(`r/one/_edge/${B}`, "down-1");
  t.ok(await bSub.has(`r/one/_edge/${B}`, "down-1"), "edge B's subscriber of the same topic gets it");
  // a REST publish on the platform goes down too
  await must(S.dev.post(`/api/v/1/message/${S.systemKey}/publish`, { topic: `r/one/_edge/${B}`, body: "down-rest", qos: 0 }), "REST publish");
  t.ok(await bSub.has(`r/one/_edge/${B}`, "down-rest"), "and a REST publish");
  // a broadcast after it: edge A gets that, so it would have got the first by then
  await pPub.publish("r/one/mark/_broadcast", "m");
  t.ok(await aSub.has("r/one/mark/_broadcast", "m"), "edge A gets a later broadcast");
  t.same(aSub.on("r/one/_edge"), [], "edge A got nothing sent to B");
  t.equal(bSub.count(`r/one/_edge/${B}`, "down-1"), 1, "B got it once");
});

t.test("edge -> another edge: <topic>/_edge/<name> from A reaches B, not the platform's subscribers", async (t) => {
  await aSub.publish(`r/e2e/_edge/${B}`, "sideways");
  t.ok(await bSub.has(`r/e2e/_edge/${B}`, "sideways"), "edge B gets it");
  await aSub.publish("r/e2e/mark/_platform", "m");
  t.ok(await pSub.has("r/e2e/mark/_platform", "m"), "a later message from A reaches the platform");
  await pSub.flush();
  t.same(pSub.on("r/e2e/_edge"), [], "the platform's subscribers of the topic got nothing");
  await aSub.flush();
  t.equal(aSub.count(`r/e2e/_edge/${B}`, "sideways"), 1, "A's own subscriber got it once (locally), not back from the platform");
  // for this edge alone: it stays here
  await aSub.publish(`r/e2e/_edge/${A}`, "self");
  t.ok(await aSub.has(`r/e2e/_edge/${A}`, "self"), "a message for the edge itself reaches its own subscribers");
});

t.test("platform -> all edges: <topic>/_broadcast reaches every edge of the system", async (t) => {
  await pPub.publish("r/all/_broadcast", "to-all");
  t.ok(await aSub.has("r/all/_broadcast", "to-all"), "edge A gets it");
  t.ok(await bSub.has("r/all/_broadcast", "to-all"), "edge B gets it");
  t.ok(await pSub.has("r/all/_broadcast", "to-all"), "the platform's own subscriber gets it (a plain publish there)");
});

t.test("edge -> everyone: <topic>/_broadcast from A reaches the platform and B", async (t) => {
  await aSub.publish("r/every/_broadcast", "from-a");
  t.ok(await pSub.has("r/every/_broadcast", "from-a"), "the platform's subscriber gets it");
  t.ok(await bSub.has("r/every/_broadcast", "from-a"), "edge B gets it");
  await aSub.publish("r/every/mark/_broadcast", "m");
  t.ok(await bSub.has("r/every/mark/_broadcast", "m"), "a later broadcast from A reaches B");
  await aSub.flush();
  t.equal(aSub.count("r/every/_broadcast", "from-a"), 1, "A's own subscriber got it once: not sent back down to A");
});

t.test("edge -> another edge and the platform: <topic>/_edgeAndPlatform/<name>", async (t) => {
  const topic = `r/both/_edgeAndPlatform/${B}`;
  await aSub.publish(topic, "both");
  t.ok(await pSub.has(topic, "both"), "the platform's subscriber of the same topic gets it");
  t.ok(await bSub.has(topic, "both"), "edge B's subscriber gets it");
  await aSub.publish("r/both/mark/_platform", "m");
  t.ok(await pSub.has("r/both/mark/_platform", "m"), "a later message reaches the platform");
  await pSub.flush();
  t.same(pSub.on("r/both").filter((x) => !x.includes("/_")), [], "the platform's subscribers of the bare topic get nothing");
  // from the platform too
  await pPub.publish(`r/both2/_edgeAndPlatform/${B}`, "from-platform");
  t.ok(await bSub.has(`r/both2/_edgeAndPlatform/${B}`, "from-platform"), "published on the platform, it reaches B");
});

t.test("no loop: a message relayed down is not relayed back up, one relayed up is not sent back down", async (t) => {
  await pPub.publish("r/loop/_broadcast", "once");
  t.ok(await aSub.has("r/loop/_broadcast", "once"), "A gets it");
  t.ok(await bSub.has("r/loop/_broadcast", "once"), "B gets it");
  // markers from both edges, through their outboxes after anything they would have sent back
  await aSub.publish("r/loop/a/_platform", "m");
  await bSub.publish("r/loop/b/_platform", "m");
  t.ok(await pSub.has("r/loop/a/_platform", "m") && await pSub.has("r/loop/b/_platform", "m"), "both markers reach the platform");
  await pPub.publish("r/loop/mark/_broadcast", "m");
  t.ok(await aSub.has("r/loop/mark/_broadcast", "m") && await bSub.has("r/loop/mark/_broadcast", "m"), "a later broadcast reaches both edges");
  await Promise.all([pSub.flush(), aSub.flush(), bSub.flush()]);
  t.equal(pSub.count("r/loop/_broadcast", "once"), 1, "the platform's subscriber got it once");
  t.equal(aSub.count("r/loop/_broadcast", "once"), 1, "A got it once");
  t.equal(bSub.count("r/loop/_broadcast", "once"), 1, "B got it once");
});

t.test("another system's platform and edge (named like B) see nothing of it", async (t) => {
  // a broadcast in the other system, after everything above: its edge gets that one only
  const p2 = await Sub.connect(platform.mqttPort, S2.devToken, S2.systemKey, []);
  await p2.publish("r/other/_broadcast", "theirs");
  t.ok(await xSub.has("r/other/_broadcast", "theirs"), "the other system's edge gets its own system's broadcast");
  await pPub.publish(`r/late/_edge/${B}`, "late");
  t.ok(await bSub.has(`r/late/_edge/${B}`, "late"), "B gets a message for it published after");
  await Promise.all([xSub.flush(), p2Sub.flush()]);
  t.same(xSub.on(""), ["r/other/_broadcast=theirs"], "the other system's edge B got nothing else");
  t.same(p2Sub.on(""), ["r/other/_broadcast=theirs"], "the other system's platform subscriber got nothing else");
});

t.test("offline: an edge away gets nothing sent meanwhile (live only); what it publishes meanwhile goes up when it is back", async (t) => {
  proxy.cut();
  t.ok(await waitFor(async () => !(await connected(S, A)), 15_000), "edge A's link is down");
  const dropped = await metric(platform, "outpost_sync_relay_dropped_total");
  await pPub.publish(`r/away/_edge/${A}`, "while-away");
  t.ok(await waitFor(async () => (await metric(platform, "outpost_sync_relay_dropped_total")) > dropped, 5_000), "the platform counts it dropped");
  // published on A while it is away: kept in its outbox
  await aSub.publish("r/away/_platform", "stored");
  await aSub.publish(`r/away/_edge/${B}`, "stored-for-b");
  proxy.heal();
  t.ok(await waitFor(() => connected(S, A), 20_000), "edge A is back");
  t.ok(await pSub.has("r/away/_platform", "stored", 15_000), "what A published while away reaches the platform (store and forward)");
  t.ok(await bSub.has(`r/away/_edge/${B}`, "stored-for-b", 15_000), "and edge B, B being connected when it arrives");
  await pPub.publish(`r/away/_edge/${A}`, "after");
  t.ok(await aSub.has(`r/away/_edge/${A}`, "after"), "a message sent after it is back arrives");
  t.equal(aSub.count(`r/away/_edge/${A}`, "while-away"), 0, "the one sent while it was away does not");
});

t.test("an edge stopped and started again: relay resumes", async (t) => {
  const dir = eB.o.dataDir;
  await eB.o.stop();
  t.ok(await waitFor(async () => !(await connected(S, B)), 15_000), "edge B is away");
  eB = await newEdge(S, B, platform.url, dir);
  bSub = await Sub.connect(eB.o.mqttPort, await edgeToken(eB.o, S), S.systemKey, FILTERS);
  await pPub.publish("r/again/_broadcast", "again");
  t.ok(await bSub.has("r/again/_broadcast", "again"), "B gets a broadcast again");
});

t.test("2,000 messages each way at QoS 1: all arrive, in order (rates measured)", async (t) => {
  const N = 2_000;
  const down = `r/bulk/_edge/${B}`, up = "r/bulk/_platform";
  let t0 = Date.now();
  for (let i = 0; i < N; i++) void pPub.publish(down, String(i));
  t.ok(await waitFor(() => bSub.got.filter((m) => m.topic === down).length >= N, 60_000), "every message down reaches edge B");
  const downMs = Date.now() - t0;
  t.same(bSub.got.filter((m) => m.topic === down).map((m) => Number(m.payload)), Array.from({ length: N }, (_, i) => i), "once each, in order");
  t0 = Date.now();
  for (let i = 0; i < N; i++) void aSub.publish(up, String(i));
  t.ok(await waitFor(() => pSub.got.filter((m) => m.topic === up).length >= N, 60_000), "every message up reaches the platform");
  const upMs = Date.now() - t0;
  t.same(pSub.got.filter((m) => m.topic === up).map((m) => Number(m.payload)), Array.from({ length: N }, (_, i) => i), "once each, in order");
  t.comment(`platform -> edge: ${N} QoS 1 messages in ${downMs} ms (${Math.round(N / downMs * 1000)}/s); edge -> platform through the outbox: ${upMs} ms (${Math.round(N / upMs * 1000)}/s)`);
});

t.test("a hostile edge's wildcard or $ topic is not published on the platform", async (t) => {
  // through a raw sync session with A's token, as the edge itself would send them
  const { default: WebSocket } = await import("ws");
  proxy.cut(); // A's own link out of the way (one session per edge)
  t.ok(await waitFor(async () => !(await connected(S, A)), 15_000), "A's link is down");
  const ws = new WebSocket(`ws://127.0.0.1:${platform.httpPort}/api/v/4/sync`);
  closers.push(() => ws.close());
  const got: any[] = [];
  ws.on("message", (d) => { const m = JSON.parse(d.toString()); got.push(m); if (m.t === "batch") ws.send(JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] })); });
  await new Promise((res, rej) => { ws.once("open", res); ws.once("error", rej); });
  ws.send(JSON.stringify({ t: "hello", systemKey: S.systemKey, edge: A, token: eA.token, cursor: 0, version: "test", os: "linux", arch: "x64", failures: [], synced: false }));
  t.ok(await waitFor(() => got.some((m) => m.t === "welcome"), 10_000), "welcomed");
  const msg = (topic: string) => JSON.stringify({ topic, payload: Buffer.from("bad").toString("base64"), qos: 0 });
  ws.send(JSON.stringify({ t: "up", items: [{ id: 1, kind: "message", body: msg("r/#/_platform") }, { id: 2, kind: "message", body: msg("$SYS/x/_broadcast") }, { id: 3, kind: "message", body: msg("r/hostile/_platform") }] }));
  t.ok(await pSub.has("r/hostile/_platform", "bad"), "a proper topic in the same batch is published");
  await pSub.flush();
  t.same(pSub.got.filter((m) => m.payload === "bad").map((m) => m.topic), ["r/hostile/_platform"], "the wildcard topic is not");
  ws.close();
  proxy.heal();
  t.ok(await waitFor(() => connected(S, A), 20_000), "A is back");
});

t.test("cluster: a message published on one node reaches an edge linked to another", await needs("redis-server", hasCommand("redis-server")), async (t) => {
  const redisPort = await freePort();
  const redis = spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  closers.push(async () => { if (redis.exitCode === null) { redis.kill("SIGKILL"); await new Promise((r) => redis.once("exit", r)); } });
  t.ok(await waitFor(() => canConnect(redisPort), 10_000), "redis-server started");
  let db = `file:${join(newDir(), "outpost.db")}`;
  if (TEST_DB === "postgres") {
    db = await createPgDatabase();
    const made = db;
    closers.push(() => dropPgDatabase(made).catch(() => {}));
  }
  const args = (id: string) => () => ["--db", db, "--redis-url", `redis://127.0.0.1:${redisPort}`, "--node-id", id, "--secret-key", "relay-cluster-secret-0123456789"];
  const nodes: NodeProcess[] = [];
  for (const id of ["a", "b"]) nodes.push(new NodeProcess(`node-${id}`, await freePort(), newDir(), args(id)));
  closers.push(async () => { for (const n of nodes) await n.kill(); });
  for (const n of nodes) await n.start(); // one after the other: the first migrates
  const [N1, N2] = nodes as [NodeProcess, NodeProcess];
  const sys = await devWithSystem({ url: N1.url }, "relay-cluster");
  const c1 = uniq("c1"), c2 = uniq("c2");
  // edge c1 linked to node a, c2 to node b
  const e1 = await newEdge(sys, c1, N1.url);
  const e2 = await newEdge(sys, c2, N2.url);
  const via2 = new Client(N2.url, sys.dev.headers);
  t.ok(await connected(sys, c2) && await connected(sys, c1, via2), "both edges connected, each to its node");
  const s1 = await Sub.connect(e1.o.mqttPort, await edgeToken(e1.o, sys), sys.systemKey, FILTERS);
  const s2 = await Sub.connect(e2.o.mqttPort, await edgeToken(e2.o, sys), sys.systemKey, FILTERS);
  const onA = await Sub.connect(N1.mqttPort, sys.devToken, sys.systemKey, FILTERS);
  const onB = await Sub.connect(N2.mqttPort, sys.devToken, sys.systemKey, []);
  await onA.publish(`r/x/_edge/${c2}`, "a-to-c2");
  t.ok(await s2.has(`r/x/_edge/${c2}`, "a-to-c2"), "published on node a, it reaches the edge linked to node b");
  await onB.publish("r/x/_broadcast", "b-to-all");
  t.ok(await s1.has("r/x/_broadcast", "b-to-all"), "a broadcast on node b reaches the edge linked to node a");
  t.ok(await s2.has("r/x/_broadcast", "b-to-all"), "and the one linked to node b");
  await s1.publish(`r/x/_edgeAndPlatform/${c2}`, "c1-to-c2");
  t.ok(await s2.has(`r/x/_edgeAndPlatform/${c2}`, "c1-to-c2"), "edge to edge across the nodes");
  t.ok(await onA.has(`r/x/_edgeAndPlatform/${c2}`, "c1-to-c2"), "and to the platform's subscribers");
  await s1.flush();
  t.equal(s1.count("r/x/_broadcast", "b-to-all"), 1, "once on edge c1");
  for (const o of [e1.o, e2.o]) await o.stop();
});
