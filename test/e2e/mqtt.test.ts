// The embedded MQTT broker, black-box, with real clients on real sockets (mqtt.js over TCP and
// WebSocket, and the Debian mosquitto clients): CONNECT authentication (username = token,
// password = system key), per-system topic isolation, role permissions on subscribe, publish and
// wills, QoS 0/1/2, retained messages, last will, persistent sessions, delivery and retained
// messages across a broker restart on the same data, and the bound on a client's offline queue.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import mqtt from "mqtt";
import type { IClientOptions, IConnackPacket, IPublishPacket, MqttClient } from "mqtt";
import t, { type Test } from "tap";
import { type DevSystem, type Outpost, devWithSystem, newUser, startOutpost, uniq, hasCommand, needs, mqttFlush, waitFor } from "./harness.ts";

// ---- servers ----------------------------------------------------------------------------------

const o = await startOutpost();
// the second server keeps its data for a restart and bounds offline queues at 10 packets
const QUEUE_LIMIT = 10;
const o2args = ["--mqtt-offline-queue-limit", String(QUEUE_LIMIT)];
let o2: Outpost = await startOutpost({ keepData: true, args: o2args });
const o2dir = o2.dataDir;

const clients = new Set<MqttClient>();
t.teardown(async () => {
  for (const c of clients) c.end(true);
  const t0 = Date.now();
  await Promise.all([o.stop(), o2.stop()]);
  console.error(`# teardown ${Date.now() - t0} ms`);
  rmSync(o2dir, { recursive: true, force: true });
});

const sA = await devWithSystem(o, "mqtt-a");
const sB = await devWithSystem(o, "mqtt-b");

// ---- helpers ----------------------------------------------------------------------------------


const tcp = (srv: Outpost) => `mqtt://127.0.0.1:${srv.mqttPort}`;
const ws = (srv: Outpost) => `ws://127.0.0.1:${srv.mqttWsPort}/mqtt`;

interface Opened { client: MqttClient; connack: IConnackPacket }

/** Connects; resolves on CONNACK 0, rejects with the client's error (code = CONNACK return code). */
function open(url: string, opts: IClientOptions): Promise<Opened> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 10_000, clientId: uniq("cid"), protocolVersion: 4, ...opts });
    clients.add(c);
    let settled = false;
    c.on("error", (e) => { if (!settled) { settled = true; c.end(true); rej(e); } });
    c.on("close", () => { if (!settled) { settled = true; rej(new Error("closed before CONNACK")); } });
    c.once("connect", (connack) => { if (!settled) { settled = true; res({ client: c, connack }); } });
  });
}

/** Connects as `token` to the system `key` and returns the client. */
async function as(url: string, token: string, key: string, opts: IClientOptions = {}): Promise<MqttClient> {
  return (await open(url, { username: token, password: key, ...opts })).client;
}

/** The CONNACK refusal code of a connection attempt, or "connected". */
async function refusal(url: string, opts: IClientOptions): Promise<number | string> {
  try {
    const { client } = await open(url, opts);
    client.end(true);
    return "connected";
  } catch (e) {
    return (e as { code?: number }).code ?? String(e);
  }
}

interface Got { topic: string; payload: Buffer; qos: number; retain: boolean; text: string }

/** Records every message the client receives. */
/** Every PUBLISH c receives, as it arrives (see mqttFlush). */
function collect(c: MqttClient): Got[] {
  const got: Got[] = [];
  c.on("packetreceive", (packet) => {
    if (packet.cmd !== "publish") return;
    const { topic, qos, retain } = packet as IPublishPacket, payload = Buffer.from((packet as IPublishPacket).payload);
    got.push({ topic, payload, qos, retain, text: payload.toString("utf8") });
  });
  return got;
}

/** Flushes each client (mqttFlush). */
const flushed = (...cs: MqttClient[]): Promise<unknown> => Promise.all(cs.map((c) => mqttFlush(c)));

/** SUBSCRIBE `filter` and, last in the same packet, `flushTopic`, whose retained marker the caller
 *  published at QoS 2 (stored before its PUBCOMP): the broker reads retained messages filter by
 *  filter in the packet's order, so once the marker (taken out of `got`) and a flush arrived,
 *  every retained message of `filter` is in `got`. */
async function subscribeFlushed(c: MqttClient, got: Got[], filter: string, qos: 0 | 1 | 2, flushTopic: string): Promise<number> {
  const [code] = await suback(c, [filter, flushTopic], qos);
  if (!(await waitFor(() => got.some((g) => g.topic === flushTopic), 5_000))) throw new Error(`the retained marker on ${flushTopic} did not arrive`);
  await flushed(c);
  for (let i = got.length - 1; i >= 0; i--) if (got[i]!.topic === flushTopic) got.splice(i, 1);
  return code!;
}

/** Rejects if the broker does not answer in time (a stalled connection must not hang the file). */
function within<T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> {
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no answer from the broker within ${ms} ms: ${what}`)), ms);
    p.then((v) => { clearTimeout(timer); res(v); }, (e) => { clearTimeout(timer); rej(e); });
  });
}

/** PUBLISH and wait for the broker's acknowledgement (QoS 1: PUBACK, QoS 2: PUBCOMP). */
function publish(c: MqttClient, topic: string, payload: string | Buffer, opts: { qos: 0 | 1 | 2; retain?: boolean }) {
  return within(c.publishAsync(topic, payload, opts), `PUBLISH ${topic}`);
}

/** SUBSCRIBEs and returns the SUBACK's return codes (128 = failure). */
async function suback(c: MqttClient, topic: string | string[], qos: 0 | 1 | 2 = 1): Promise<number[]> {
  try {
    const granted = await within(c.subscribeAsync(topic, { qos }), `SUBSCRIBE ${topic}`);
    return granted.map((g) => g.qos);
  } catch (e) {
    const codes = (e as { packet?: { granted?: number[] } }).packet?.granted;
    if (codes) return codes;
    throw e;
  }
}

/** Resolves when the client's connection closes (true) or after `ms` (false). */
function closes(c: MqttClient, ms = 10_000): Promise<boolean> {
  if (!c.connected) return Promise.resolve(true);
  return new Promise((res) => {
    const timer = setTimeout(() => res(false), ms);
    c.once("close", () => { clearTimeout(timer); res(true); });
  });
}

/** Ends a client cleanly (DISCONNECT) and waits for it. */
function end(c: MqttClient): Promise<void> {
  clients.delete(c);
  return within(new Promise<void>((r) => c.end(false, {}, () => r())), "DISCONNECT", 3_000).catch(() => { c.end(true); });
}

/** Publishes a marker through `pub` and waits until `got` holds it: everything the broker routed
 *  to the subscriber before the marker has then arrived too. */
async function marker(t: Test, pub: MqttClient, got: Got[], topic: string) {
  const m = uniq("marker");
  await publish(pub, topic, m, { qos: 2 });
  t.ok(await waitFor(() => got.some((g) => g.text === m)), `marker on ${topic} arrived`);
}

/** Waits until the broker has routed `n` messages of a topic (they are in history): aedes sends
 *  PUBACK before it routes a QoS 1 PUBLISH. */
function routed(sys: DevSystem, topic: string, n: number) {
  return waitFor(async () => {
    const r = await sys.dev.get(`/api/v/1/message/${sys.systemKey}?topic=${encodeURIComponent(topic)}&count=0`);
    return r.status === 200 && Array.isArray(r.body) && r.body.length >= n;
  });
}

async function makeRole(sys: DevSystem, name: string, perms: Record<string, unknown>) {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name, ...perms });
  if (r.status !== 200) throw new Error(`role ${name}: ${r.status} ${r.text}`);
  return r.body.role_id as string;
}

async function userWithRole(sys: DevSystem, perms?: Record<string, unknown>) {
  const u = await newUser(sys);
  if (perms) {
    const role = await makeRole(sys, uniq("role"), perms);
    const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } });
    if (r.status !== 200) throw new Error(`role add: ${r.status} ${r.text}`);
  }
  return u;
}

interface Run { code: number | null; stdout: string; stderr: string }
/** Runs a mosquitto client to completion (bounded). */
function run(cmd: string, args: string[], timeoutMs = 20_000): Promise<Run> {
  return new Promise((res) => {
    const p = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "", stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
    p.on("close", (code) => { clearTimeout(timer); res({ code, stdout, stderr }); });
  });
}

// ---- CONNECT authentication -------------------------------------------------------------------

t.test("CONNECT: user, device and developer tokens with the system key are accepted", async (t) => {
  const u = await newUser(sA);
  const viaUser = await open(tcp(o), { username: u.token, password: sA.systemKey });
  t.equal(viaUser.connack.returnCode, 0, "user token: CONNACK 0");
  t.equal(viaUser.connack.sessionPresent, false, "clean session: no session present");
  t.ok(viaUser.client.connected, "user connected");

  const name = uniq("dev");
  const made = await sA.dev.post(`/api/v/2/devices/${sA.systemKey}/${name}`, { active_key: "secret-key-1" });
  t.equal(made.status, 200, `device created (${made.text.slice(0, 200)})`);
  const auth = await sA.app.post(`/api/v/2/devices/${sA.systemKey}/auth`, { deviceName: name, activeKey: "secret-key-1" });
  t.equal(auth.status, 200, "device auth");
  t.type(auth.body.deviceToken, "string");
  const viaDevice = await open(tcp(o), { username: auth.body.deviceToken, password: sA.systemKey });
  t.equal(viaDevice.connack.returnCode, 0, "device token: CONNACK 0");

  const viaDev = await open(tcp(o), { username: sA.devToken, password: sA.systemKey });
  t.equal(viaDev.connack.returnCode, 0, "developer token: CONNACK 0");

  // a connected developer can actually use the connection: round trip
  const got = collect(viaDev.client);
  t.same(await suback(viaDev.client, "auth/rt", 1), [1]);
  await publish(viaDev.client, "auth/rt", "from-dev", { qos: 1 });
  t.ok(await waitFor(() => got.some((g) => g.text === "from-dev")), "developer receives its own publish");

  for (const c of [viaUser.client, viaDevice.client, viaDev.client]) await end(c);
});

t.test("CONNECT: bad credentials are refused with 'Not authorized' (5)", async (t) => {
  const u = await newUser(sA);
  const uB = await newUser(sB);
  t.equal(await refusal(tcp(o), { username: "not-a-token", password: sA.systemKey }), 5, "unknown token");
  t.equal(await refusal(tcp(o), { username: u.token, password: "not-a-system-key" }), 5, "wrong system key");
  t.equal(await refusal(tcp(o), { username: u.token, password: sB.systemKey }), 5, "user token with another system's key");
  t.equal(await refusal(tcp(o), { username: uB.token, password: sA.systemKey }), 5, "other system's user with this key");
  t.equal(await refusal(tcp(o), { username: sA.devToken, password: sB.systemKey }), 5, "developer token with a system the developer does not own");
  t.equal(await refusal(tcp(o), { username: u.token }), 5, "missing password");
  t.equal(await refusal(tcp(o), { username: "", password: sA.systemKey }), 5, "empty username");
  t.equal(await refusal(tcp(o), { username: "", password: "" }), 5, "empty username and password");

  // a logged-out token no longer connects
  const v = await newUser(sA);
  t.equal(await refusal(tcp(o), { username: v.token, password: sA.systemKey }), "connected", "valid before logout");
  const out = await v.client.post("/api/v/1/user/logout");
  t.equal(out.status, 200, "logout");
  t.equal(await refusal(tcp(o), { username: v.token, password: sA.systemKey }), 5, "refused after logout");

  // the error mqtt.js reports
  try {
    await open(tcp(o), { username: "nope", password: sA.systemKey });
    t.fail("connected with a bad token");
  } catch (e) {
    t.match((e as Error).message, /Not authorized/i, "error message says Not authorized");
  }
});

t.test("CONNECT with mosquitto_pub / mosquitto_sub (-u token -P systemKey)", await needs("mosquitto-clients", hasCommand("mosquitto_sub")), async (t) => {
  const port = String(o.mqttPort);
  const topic = `mosq/${uniq("t")}`;
  const watcher = await as(tcp(o), sA.devToken, sA.systemKey);
  const seen = collect(watcher);
  t.same(await suback(watcher, "mosq/#", 1), [1]);

  const sub = run("mosquitto_sub", ["-h", "127.0.0.1", "-p", port, "-u", sA.devToken, "-P", sA.systemKey, "-t", topic, "-q", "1", "-C", "1", "-W", "20", "-v"], 25_000);
  // mosquitto_sub's own output is block-buffered into a pipe: ask the server when it has subscribed
  t.ok(await waitFor(async () => {
    const r = await sA.dev.get(`/api/v/1/message/${sA.systemKey}/currentTopics`);
    return r.status === 200 && Array.isArray(r.body) && r.body.includes(topic);
  }, 15_000), "mosquitto_sub's subscription is live");

  const pub = await run("mosquitto_pub", ["-h", "127.0.0.1", "-p", port, "-u", sA.devToken, "-P", sA.systemKey, "-t", topic, "-m", "hello from mosquitto", "-q", "1"]);
  t.equal(pub.code, 0, `mosquitto_pub exits 0 (${pub.stderr.trim()})`);
  const s = await sub;
  t.equal(s.code, 0, `mosquitto_sub exits 0 after one message (${s.stderr.trim()})`);
  t.match(s.stdout, `${topic} hello from mosquitto`, "mosquitto_sub printed the message");
  t.ok(await waitFor(() => seen.some((g) => g.topic === topic && g.text === "hello from mosquitto")), "mqtt.js subscriber got the mosquitto publish");

  // a user token works too
  const u = await newUser(sA);
  const asUser = await run("mosquitto_pub", ["-h", "127.0.0.1", "-p", port, "-u", u.token, "-P", sA.systemKey, "-t", "mosq/none", "-m", "x", "-q", "0"]);
  t.equal(asUser.code, 0, `user token connects with mosquitto_pub (${asUser.stderr.trim()})`);

  for (const [what, user, pass] of [
    ["bad token", "bad-token", sA.systemKey], ["other system's key", sA.devToken, sB.systemKey], ["wrong key", u.token, "wrong"],
  ] as const) {
    const r = await run("mosquitto_pub", ["-h", "127.0.0.1", "-p", port, "-u", user, "-P", pass, "-t", "mosq/x", "-m", "x"]);
    t.not(r.code, 0, `${what}: mosquitto_pub fails`);
    t.match(r.stderr, /not authori[sz]ed/i, `${what}: refused as not authorised (${r.stderr.trim()})`);
  }
  const noPass = await run("mosquitto_sub", ["-h", "127.0.0.1", "-p", port, "-u", sA.devToken, "-t", "mosq/x", "-W", "5"]);
  t.not(noPass.code, 0, "missing -P: mosquitto_sub fails");
  t.match(noPass.stderr, /not authori[sz]ed/i, `missing password refused (${noPass.stderr.trim()})`);
  t.notOk(seen.some((g) => g.topic === "mosq/x"), "nothing was published by refused clients");
  await end(watcher);
});

// ---- isolation --------------------------------------------------------------------------------

t.test("cross-system isolation: '#' in system B sees nothing of system A", async (t) => {
  const subB = await as(tcp(o), sB.devToken, sB.systemKey);
  const gotB = collect(subB);
  t.same(await suback(subB, "#", 2), [2], "B subscribes to #");
  t.same(await suback(subB, `${sA.systemKey}/#`, 2), [2], "B subscribes to A's key as a topic level");
  t.same(await suback(subB, "+/iso/x", 2), [2]);
  const subA = await as(tcp(o), sA.devToken, sA.systemKey);
  const gotA = collect(subA);
  t.same(await suback(subA, "#", 2), [2], "A subscribes to #");

  const pubA = await as(tcp(o), sA.devToken, sA.systemKey);
  for (const qos of [0, 1, 2] as const) await publish(pubA, "iso/x", `a-${qos}`, { qos });
  await publish(pubA, `${sB.systemKey}/iso/x`, "a-with-b-prefix", { qos: 2 });
  const pubB = await as(tcp(o), sB.devToken, sB.systemKey);
  await marker(t, pubB, gotB, "iso/marker");
  t.ok(await waitFor(() => gotA.filter((g) => g.text.startsWith("a-")).length === 4), "A's own '#' subscriber got all four");
  await flushed(subB);
  t.same(gotB.filter((g) => g.text.startsWith("a-")), [], "B received nothing published in A");
  t.ok(gotB.every((g) => g.topic === "iso/marker"), `B saw only its own marker (${gotB.map((g) => g.topic).join(", ")})`);
  t.ok(gotA.some((g) => g.topic === `${sB.systemKey}/iso/x`), "a topic naming B's key stays a topic of A");
  t.ok(gotA.every((g) => !g.topic.startsWith(`${sA.systemKey}/`)), "topics arrive without any system prefix");
  t.notOk(gotA.some((g) => g.topic === "iso/marker"), "A did not get B's marker");

  // and the other way round
  await publish(pubB, "iso/y", "b-only", { qos: 2 });
  await marker(t, pubA, gotA, "iso/marker-a");
  t.notOk(gotA.some((g) => g.text === "b-only"), "A received nothing published in B");
  t.ok(await waitFor(() => gotB.some((g) => g.text === "b-only" && g.topic === "iso/y")), "B got its own");
  for (const c of [subA, subB, pubA, pubB]) await end(c);
});

t.test("cross-system isolation: equal retained topics in two systems do not collide", async (t) => {
  const topic = `shared/${uniq("r")}`;
  const pA = await as(tcp(o), sA.devToken, sA.systemKey);
  const pB = await as(tcp(o), sB.devToken, sB.systemKey);
  await publish(pA, topic, "retained-in-A", { qos: 1, retain: true });
  await publish(pB, topic, "retained-in-B", { qos: 1, retain: true });
  const flushTopic = `flush/${uniq("r")}`;
  for (const p of [pA, pB]) await publish(p, flushTopic, "flush", { qos: 2, retain: true });

  for (const [sys, want] of [[sA, "retained-in-A"], [sB, "retained-in-B"]] as const) {
    const c = await as(tcp(o), sys.devToken, sys.systemKey);
    const got = collect(c);
    await subscribeFlushed(c, got, topic, 1, flushTopic);
    t.ok(got.length >= 1, `a new subscriber in ${want.slice(-1)} gets a retained message`);
    t.equal(got.length, 1, "exactly one retained message");
    t.equal(got[0]?.text, want, `system ${want.slice(-1)} gets its own retained payload`);
    t.equal(got[0]?.retain, true, "with the retain flag");
    t.equal(got[0]?.topic, topic);
    await end(c);
  }
  // clearing A's leaves B's
  await publish(pA, topic, "", { qos: 1, retain: true });
  const cA = await as(tcp(o), sA.devToken, sA.systemKey), cB = await as(tcp(o), sB.devToken, sB.systemKey);
  const gA = collect(cA), gB = collect(cB);
  await suback(cA, "shared/#", 1);
  await suback(cB, "shared/#", 1);
  t.ok(await waitFor(() => gB.some((g) => g.text === "retained-in-B")), "B's retained message survives A clearing its own");
  await marker(t, pA, gA, "shared/marker");
  t.notOk(gA.some((g) => g.topic === topic), "A's retained message is gone");
  for (const p of [pA, pB]) await publish(p, flushTopic, "", { qos: 1, retain: true });
  for (const c of [pA, pB, cA, cB]) await end(c);
});

// ---- permissions ------------------------------------------------------------------------------

t.test("permissions: a user without a topic grant can neither subscribe nor publish", async (t) => {
  const watch = await as(tcp(o), sA.devToken, sA.systemKey);
  const seen = collect(watch);
  await suback(watch, "perm0/#", 1);
  const u = await userWithRole(sA);
  const c = await as(tcp(o), u.token, sA.systemKey);
  t.same(await suback(c, "perm0/a", 1), [128], "SUBACK 128 for a topic without grant");
  t.same(await suback(c, "#", 0), [128], "SUBACK 128 for '#'");
  t.ok(c.connected, "a denied SUBSCRIBE keeps the connection");
  c.publish("perm0/a", "should-not-pass", { qos: 1 });
  t.ok(await closes(c), "a denied PUBLISH closes the connection");
  await marker(t, watch, seen, "perm0/marker");
  t.notOk(seen.some((g) => g.text === "should-not-pass"), "the denied publish was not delivered");
  await end(watch);
});

t.test("permissions: a grant on a/# allows a/b but not c/d", async (t) => {
  const watch = await as(tcp(o), sA.devToken, sA.systemKey);
  const seen = collect(watch);
  t.same(await suback(watch, "#", 1), [1]);
  const u = await userWithRole(sA, { topics: [{ itemInfo: { name: "a/#" }, permissions: 3 }] });
  const c = await as(tcp(o), u.token, sA.systemKey);
  const mine = collect(c);
  t.same(await suback(c, "a/b", 1), [1], "subscribe a/b granted with QoS 1");
  t.same(await suback(c, "a/#", 2), [2], "subscribe a/# granted with QoS 2");
  t.same(await suback(c, "c/d", 1), [128], "subscribe c/d: 128");
  t.same(await suback(c, ["a/x", "c/x"], 1), [1, 128], "mixed SUBSCRIBE: one granted, one refused");
  await publish(c, "a/b", "user-a-b", { qos: 1 });
  t.ok(await waitFor(() => seen.some((g) => g.topic === "a/b" && g.text === "user-a-b")), "user's publish on a/b reaches the developer");
  await publish(watch, "a/b", "dev-a-b", { qos: 1 });
  t.ok(await waitFor(() => mine.some((g) => g.text === "dev-a-b")), "user receives on a/b");
  await publish(watch, "c/d", "dev-c-d", { qos: 2 });
  await marker(t, watch, mine, "a/b");
  t.notOk(mine.some((g) => g.text === "dev-c-d"), "user receives nothing on c/d");

  c.publish("c/d", "user-c-d", { qos: 1 });
  t.ok(await closes(c), "publishing to c/d closes the user's connection");
  await marker(t, watch, seen, "perm-marker");
  t.notOk(seen.some((g) => g.text === "user-c-d"), "the c/d publish was not delivered");

  // read-only and create-only grants
  const ro = await userWithRole(sA, { topics: [{ itemInfo: { name: "ro/+" }, permissions: 1 }, { itemInfo: { name: "wo/+" }, permissions: 2 }] });
  const r = await as(tcp(o), ro.token, sA.systemKey);
  t.same(await suback(r, "ro/x", 1), [1], "read grant: may subscribe");
  t.same(await suback(r, "ro/x/y", 1), [128], "'+' grants one level only");
  t.same(await suback(r, "wo/x", 1), [128], "create grant alone: may not subscribe");
  await publish(r, "wo/x", "write-only-ok", { qos: 1 });
  t.ok(await waitFor(() => seen.some((g) => g.text === "write-only-ok")), "create grant: may publish");
  r.publish("ro/x", "read-only-publish", { qos: 1 });
  t.ok(await closes(r), "read grant alone: publish closes the connection");
  await marker(t, watch, seen, "perm-marker2");
  t.notOk(seen.some((g) => g.text === "read-only-publish"), "not delivered");
  await end(watch);
});

// ---- QoS, retained, will ----------------------------------------------------------------------

t.test("QoS 0, 1 and 2 delivery, downgrade to the subscription's QoS, payload integrity", async (t) => {
  const sub2 = await as(tcp(o), sA.devToken, sA.systemKey);
  const got2 = collect(sub2);
  t.same(await suback(sub2, "qos/#", 2), [2]);
  const sub1 = await as(tcp(o), sA.devToken, sA.systemKey);
  const got1 = collect(sub1);
  t.same(await suback(sub1, "qos/#", 1), [1]);
  const exact1 = await as(tcp(o), sA.devToken, sA.systemKey);
  const gotExact = collect(exact1);
  t.same(await suback(exact1, "qos/2", 1), [1], "an exact-topic subscription at QoS 1");
  const sub0 = await as(tcp(o), sA.devToken, sA.systemKey);
  const got0 = collect(sub0);
  t.same(await suback(sub0, "qos/#", 0), [0]);

  const pub = await as(tcp(o), sA.devToken, sA.systemKey);
  for (const qos of [0, 1, 2] as const) await publish(pub, `qos/${qos}`, `payload-${qos}`, { qos });
  const bin = randomBytes(100_000);
  await publish(pub, "qos/bin", bin, { qos: 2 });

  t.ok(await waitFor(() => got2.length >= 4 && got1.length >= 4 && got0.length >= 4), "all subscribers got all four");
  await flushed(sub2, sub1, sub0);
  for (const [got, max] of [[got2, 2], [got1, 1], [got0, 0]] as const) {
    t.equal(got.length, 4, `QoS ${max} subscriber: no duplicates`);
    for (const qos of [0, 1, 2]) {
      const m = got.find((g) => g.topic === `qos/${qos}`);
      t.equal(m?.text, `payload-${qos}`, `sub QoS ${max}: payload of the QoS ${qos} publish`);
      t.equal(m?.qos, Math.min(qos, max), `sub QoS ${max}, pub QoS ${qos}: delivered with QoS ${Math.min(qos, max)}`);
      t.equal(m?.retain, false, "not retained");
    }
    const b = got.find((g) => g.topic === "qos/bin");
    t.ok(b && Buffer.compare(b.payload, bin) === 0, `sub QoS ${max}: 100 kB binary payload intact`);
  }
  t.ok(await waitFor(() => gotExact.length >= 1));
  t.equal(gotExact[0]?.qos, 1, "exact subscription QoS 1, pub QoS 2: delivered with QoS 1");
  // order within one publisher and QoS is kept
  const seq = Array.from({ length: 50 }, (_, i) => `n${i}`);
  for (const s of seq) pub.publish("qos/seq", s, { qos: 1 });
  t.ok(await waitFor(() => got1.filter((g) => g.topic === "qos/seq").length === 50), "50 QoS 1 messages arrive");
  t.same(got1.filter((g) => g.topic === "qos/seq").map((g) => g.text), seq, "in publish order");
  for (const c of [sub0, sub1, sub2, exact1, pub]) await end(c);
});

t.test("retained messages: delivered on subscribe, replaced, cleared by an empty retained publish", async (t) => {
  const topic = `ret/${uniq("a")}`;
  const pub = await as(tcp(o), sA.devToken, sA.systemKey);
  const live = await as(tcp(o), sA.devToken, sA.systemKey);
  const liveGot = collect(live);
  await suback(live, topic, 1);
  await publish(pub, topic, "v1", { qos: 1, retain: true });
  t.ok(await waitFor(() => liveGot.some((g) => g.text === "v1")), "a live subscriber gets the retained publish");
  t.equal(liveGot.find((g) => g.text === "v1")?.retain, false, "live delivery clears the retain flag (MQTT 3.1.1 §3.3.1.3)");

  const fresh = async (filter: string) => {
    const c = await as(tcp(o), sA.devToken, sA.systemKey);
    const got = collect(c);
    await suback(c, filter, 1);
    return { c, got };
  };
  const s1 = await fresh(topic);
  t.ok(await waitFor(() => s1.got.length >= 1), "a new subscriber gets the retained message");
  t.equal(s1.got[0]?.text, "v1");
  t.equal(s1.got[0]?.retain, true, "with the retain flag set");
  t.equal(s1.got[0]?.qos, 1, "at the lower of publish and subscription QoS");

  await publish(pub, topic, "v2", { qos: 1, retain: true });
  await publish(pub, `${topic}/child`, "child", { qos: 0, retain: true });
  const flushTopic = `flush/${uniq("r")}`;
  await publish(pub, flushTopic, "flush", { qos: 2, retain: true });
  const s2 = { c: await as(tcp(o), sA.devToken, sA.systemKey), got: [] as Got[] };
  s2.got = collect(s2.c);
  await subscribeFlushed(s2.c, s2.got, topic, 1, flushTopic);
  t.same(s2.got.map((g) => g.text), ["v2"], "the newer retained message replaced the older one");
  const s3 = await fresh(`${topic}/#`);
  t.ok(await waitFor(() => s3.got.length >= 2), "a wildcard subscriber gets every retained message below");
  t.same(s3.got.map((g) => g.text).sort(), ["child", "v2"]);

  // a non-retained publish does not replace it
  await publish(pub, topic, "not-retained", { qos: 1 });
  const s4 = await fresh(topic);
  t.ok(await waitFor(() => s4.got.length >= 1));
  t.equal(s4.got[0]?.text, "v2", "a plain publish leaves the retained message");

  await publish(pub, topic, "", { qos: 1, retain: true });
  const s5 = await fresh(topic);
  await marker(t, pub, s5.got, topic);
  t.same(s5.got.filter((g) => g.retain), [], "after an empty retained publish nothing is retained");
  t.notOk(s5.got.some((g) => g.text === "v2"), "the old retained message is gone");
  await publish(pub, flushTopic, "", { qos: 1, retain: true });
  for (const c of [pub, live, s1.c, s2.c, s3.c, s4.c, s5.c]) await end(c);
});

t.test("last will: published when the socket dies, not on a clean DISCONNECT, only where permitted", async (t) => {
  const watch = await as(tcp(o), sA.devToken, sA.systemKey);
  const seen = collect(watch);
  t.same(await suback(watch, "#", 1), [1]);

  const w = await as(tcp(o), sA.devToken, sA.systemKey, { will: { topic: "will/w1", payload: Buffer.from("w1 is gone"), qos: 1, retain: false } });
  w.stream.destroy();
  t.ok(await waitFor(() => seen.some((g) => g.topic === "will/w1" && g.text === "w1 is gone")), "the will arrives after the socket is destroyed");
  t.equal(seen.find((g) => g.topic === "will/w1")?.qos, 1, "with the will's QoS");

  const clean = await as(tcp(o), sA.devToken, sA.systemKey, { will: { topic: "will/w2", payload: Buffer.from("w2 is gone"), qos: 1, retain: false } });
  await end(clean);

  // a retained will is kept for later subscribers
  const wr = await as(tcp(o), sA.devToken, sA.systemKey, { will: { topic: "will/w3", payload: Buffer.from("w3 retained"), qos: 1, retain: true } });
  wr.stream.destroy();
  t.ok(await waitFor(() => seen.some((g) => g.text === "w3 retained")), "retained will delivered live");
  const late = await as(tcp(o), sA.devToken, sA.systemKey);
  const lateGot = collect(late);
  await suback(late, "will/w3", 1);
  t.ok(await waitFor(() => lateGot.some((g) => g.text === "w3 retained" && g.retain)), "and kept as the retained message");

  // wills of a user need the same publish grant as its publishes
  const u = await userWithRole(sA, { topics: [{ itemInfo: { name: "a/#" }, permissions: 3 }] });
  const okWill = await as(tcp(o), u.token, sA.systemKey, { will: { topic: "a/will", payload: Buffer.from("user will ok"), qos: 1, retain: false } });
  const badWill = await as(tcp(o), u.token, sA.systemKey, { will: { topic: "c/will", payload: Buffer.from("user will denied"), qos: 1, retain: false } });
  // the refused will's client goes first: a will it published would be on its way before the
  // granted one's, which the watcher then waits for
  badWill.stream.destroy();
  okWill.stream.destroy();
  t.ok(await waitFor(() => seen.some((g) => g.text === "user will ok")), "a user's will on a granted topic is published");
  await marker(t, watch, seen, "will/marker");
  await flushed(watch);
  t.notOk(seen.some((g) => g.text === "w2 is gone"), "no will after a clean DISCONNECT");
  t.notOk(seen.some((g) => g.text === "user will denied"), "no will on a topic the user may not publish to");
  await publish(watch, "will/w3", "", { qos: 1, retain: true });
  await end(watch);
  await end(late);
});

t.test("persistent session: QoS 1 messages published while offline arrive on reconnect", async (t) => {
  const clientId = uniq("persist");
  const opts = { clientId, clean: false } as const;
  const first = await open(tcp(o), { username: sA.devToken, password: sA.systemKey, ...opts });
  t.equal(first.connack.sessionPresent, false, "a new session");
  t.same(await suback(first.client, "ps/t", 1), [1]);
  await end(first.client);

  const pub = await as(tcp(o), sA.devToken, sA.systemKey);
  for (const m of ["m1", "m2", "m3"]) await publish(pub, "ps/t", m, { qos: 1 });
  await publish(pub, "ps/t", "qos0-offline", { qos: 0 });
  t.ok(await routed(sA, "ps/t", 4), "the broker routed them");

  const c = mqtt.connect(tcp(o), { reconnectPeriod: 0, protocolVersion: 4, username: sA.devToken, password: sA.systemKey, ...opts });
  clients.add(c);
  c.on("error", () => {});
  const got = collect(c); // listening before CONNACK: queued messages follow it at once
  const connack = await new Promise<IConnackPacket>((r) => c.once("connect", r));
  t.equal(connack.sessionPresent, true, "the session was kept");
  t.ok(await waitFor(() => got.length >= 3, 5_000), "queued messages delivered");
  await flushed(c);
  t.same(got.filter((g) => g.qos === 1).map((g) => g.text), ["m1", "m2", "m3"], "all three QoS 1 messages, in order, once");
  t.equal(got[0]?.topic, "ps/t", "with the client's own topic");
  t.ok(got.every((g) => g.qos <= 1), "at most the subscription's QoS");
  // the subscription is still there
  await publish(pub, "ps/t", "m4-live", { qos: 1 });
  t.ok(await waitFor(() => got.some((g) => g.text === "m4-live")), "the subscription survived: live delivery works");
  await end(c);

  // a clean session discards it
  await publish(pub, "ps/t", "m5-offline", { qos: 1 });
  t.ok(await routed(sA, "ps/t", 6), "routed");
  const cleanRun = await open(tcp(o), { username: sA.devToken, password: sA.systemKey, clientId, clean: true });
  const cleanGot = collect(cleanRun.client);
  t.equal(cleanRun.connack.sessionPresent, false, "clean: true starts over");
  // a queued message would come right after CONNACK, before anything published from now on
  t.same(await suback(cleanRun.client, "ps/marker", 1), [1]);
  await marker(t, pub, cleanGot, "ps/marker");
  t.same(cleanGot.filter((g) => g.topic === "ps/t"), [], "nothing queued is delivered to a clean session");
  await end(cleanRun.client);
  await publish(pub, "ps/t", "m6", { qos: 1 });
  const again = await open(tcp(o), { username: sA.devToken, password: sA.systemKey, ...opts });
  const againGot = collect(again.client);
  t.equal(again.connack.sessionPresent, false, "the old session is gone");
  t.same(await suback(again.client, "ps/marker", 1), [1]);
  await marker(t, pub, againGot, "ps/marker");
  t.same(againGot.filter((g) => g.topic === "ps/t"), [], "and with it the subscription");
  await end(again.client);
  await end(pub);
});

// ---- WebSocket --------------------------------------------------------------------------------

t.test("MQTT over WebSocket at /mqtt with the same authentication", async (t) => {
  const u = await newUser(sA);
  const viaWs = await open(ws(o), { username: sA.devToken, password: sA.systemKey });
  t.equal(viaWs.connack.returnCode, 0, "developer connects over ws");
  const userWs = await open(ws(o), { username: u.token, password: sA.systemKey });
  t.equal(userWs.connack.returnCode, 0, "user connects over ws");
  t.same(await suback(userWs.client, "ws/x", 1), [128], "permissions apply over ws too");
  t.equal(await refusal(ws(o), { username: "bad-token", password: sA.systemKey }), 5, "bad token over ws: 5");
  t.equal(await refusal(ws(o), { username: sA.devToken, password: sB.systemKey }), 5, "other system's key over ws: 5");
  t.equal(await refusal(ws(o), { username: sA.devToken }), 5, "missing password over ws: 5");

  const wsGot = collect(viaWs.client);
  t.same(await suback(viaWs.client, "ws/#", 2), [2]);
  const tcpSub = await as(tcp(o), sA.devToken, sA.systemKey);
  const tcpGot = collect(tcpSub);
  await suback(tcpSub, "ws/#", 2);
  const tcpPub = await as(tcp(o), sA.devToken, sA.systemKey);
  await publish(tcpPub, "ws/from-tcp", "tcp->ws", { qos: 2 });
  t.ok(await waitFor(() => wsGot.some((g) => g.topic === "ws/from-tcp" && g.text === "tcp->ws" && g.qos === 2)), "TCP publish reaches the WebSocket subscriber");
  await publish(viaWs.client, "ws/from-ws", "ws->tcp", { qos: 1 });
  t.ok(await waitFor(() => tcpGot.some((g) => g.topic === "ws/from-ws" && g.text === "ws->tcp" && g.qos === 1)), "WebSocket publish reaches the TCP subscriber");
  // isolation over ws
  const wsB = await as(ws(o), sB.devToken, sB.systemKey);
  const gotB = collect(wsB);
  await suback(wsB, "#", 1);
  await publish(viaWs.client, "ws/secret", "A only", { qos: 2 });
  const pubB = await as(ws(o), sB.devToken, sB.systemKey);
  await marker(t, pubB, gotB, "ws/b-marker");
  t.notOk(gotB.some((g) => g.text === "A only"), "system B over ws sees nothing of A");
  for (const c of [viaWs.client, userWs.client, tcpSub, tcpPub, wsB, pubB]) await end(c);
});

t.test("MQTT over WebSocket: the broker answers every packet at once (20 fresh connections)", async (t) => {
  const stalls: string[] = [];
  for (let i = 0; i < 20; i++) {
    const c = await as(ws(o), sA.devToken, sA.systemKey);
    const got = collect(c);
    try {
      // each request right after the previous answer: nothing else arrives to push it through
      await within(c.subscribeAsync(`wsq/${i}`, { qos: 1 }), "SUBSCRIBE", 3_000);
      await within(c.publishAsync(`wsq/${i}`, `p${i}`, { qos: 1 }), "PUBLISH", 3_000);
      if (!(await waitFor(() => got.length === 1, 3_000))) throw new Error("own message not delivered");
    } catch (e) {
      stalls.push(`connection ${i}: ${(e as Error).message}`);
    }
    c.end(true);
    clients.delete(c);
  }
  t.same(stalls, [], "no WebSocket connection stalls");
});

// ---- restart (second server) ------------------------------------------------------------------

t.test("QoS 1 delivery and retained messages survive a broker restart", async (t) => {
  const s = await devWithSystem(o2, "restart");
  const clientId = uniq("restart-sub");
  const sub = await open(tcp(o2), { username: s.devToken, password: s.systemKey, clientId, clean: false });
  t.same(await suback(sub.client, "rs/t", 1), [1]);
  await end(sub.client);

  const pub = await as(tcp(o2), s.devToken, s.systemKey);
  for (const m of ["r1", "r2", "r3"]) await publish(pub, "rs/t", m, { qos: 1 });
  await publish(pub, "rs/ret", "kept across restart", { qos: 1, retain: true });
  t.ok(await routed(s, "rs/t", 3) && await routed(s, "rs/ret", 1), "the broker routed them before it stops");
  await end(pub);

  const code = await o2.stop();
  t.equal(code, 0, "SIGTERM: clean exit");
  o2 = await startOutpost({ dataDir: o2dir, args: o2args });
  t.ok(o2.mqttPort > 0, `restarted on the same data (mqtt port ${o2.mqttPort})`);

  const c = mqtt.connect(tcp(o2), { reconnectPeriod: 0, protocolVersion: 4, username: s.devToken, password: s.systemKey, clientId, clean: false });
  clients.add(c);
  c.on("error", () => {});
  const got = collect(c);
  const connack = await new Promise<IConnackPacket>((r) => c.once("connect", r));
  t.equal(connack.sessionPresent, true, "the persistent session survived the restart");
  t.ok(await waitFor(() => got.length >= 3, 5_000), "queued messages delivered after the restart");
  await flushed(c);
  t.same(got.map((g) => g.text), ["r1", "r2", "r3"], "all three, in order, once");
  t.ok(got.every((g) => g.topic === "rs/t" && g.qos === 1), "own topic, QoS 1");
  const pub2 = await as(tcp(o2), s.devToken, s.systemKey);
  await publish(pub2, "rs/t", "after-restart", { qos: 1 });
  t.ok(await waitFor(() => got.some((g) => g.text === "after-restart")), "the subscription itself survived too");

  const r = await as(tcp(o2), s.devToken, s.systemKey);
  const rGot = collect(r);
  await suback(r, "rs/ret", 1);
  t.ok(await waitFor(() => rGot.length >= 1), "retained message after restart");
  t.equal(rGot[0]?.text, "kept across restart");
  t.equal(rGot[0]?.retain, true);
  for (const x of [c, pub2, r]) await end(x);
});

t.test(`offline queue bound (--mqtt-offline-queue-limit ${QUEUE_LIMIT}): the newest are kept`, async (t) => {
  const s = await devWithSystem(o2, "queue");
  const clientId = uniq("queue-sub");
  const sub = await open(tcp(o2), { username: s.devToken, password: s.systemKey, clientId, clean: false });
  t.same(await suback(sub.client, "q/t", 1), [1]);
  await end(sub.client);

  const pub = await as(tcp(o2), s.devToken, s.systemKey);
  for (let i = 0; i < 30; i++) await publish(pub, "q/t", `n${i}`, { qos: 1 });
  t.ok(await routed(s, "q/t", 30), "the broker routed all 30");

  const c = mqtt.connect(tcp(o2), { reconnectPeriod: 0, protocolVersion: 4, username: s.devToken, password: s.systemKey, clientId, clean: false });
  clients.add(c);
  c.on("error", () => {});
  const got = collect(c);
  await new Promise((r) => c.once("connect", r));
  t.ok(await waitFor(() => got.length >= QUEUE_LIMIT, 5_000), `the queued messages are delivered on reconnect`);
  await flushed(c);
  t.ok(got.length <= QUEUE_LIMIT, `at most ${QUEUE_LIMIT} delivered (got ${got.length})`);
  t.same(got.map((g) => g.text), Array.from({ length: QUEUE_LIMIT }, (_, i) => `n${30 - QUEUE_LIMIT + i}`), "exactly the newest, in order");
  await publish(pub, "q/t", "live", { qos: 1 });
  t.ok(await waitFor(() => got.some((g) => g.text === "live")), "live delivery continues after the drained queue");
  await end(c);
  await end(pub);
});
