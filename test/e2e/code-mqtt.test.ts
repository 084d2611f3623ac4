// MQTT.Client and MQTT.Message in code services, black-box: a service publishes and subscribes
// on the node's own broker and real MQTT clients (mqtt.js over TCP, user or developer token as
// username, system key as password) see it; a stream service (execution_timeout -1, started by
// the engine) republishes what it receives until it is deleted; the run's user's topic rights
// apply; another system's topics stay out of reach; hostile arguments are refused with the server
// unharmed; external brokers pass the egress check (mosquitto, once the engine has an allow flag).
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mqtt from "mqtt";
import type { MqttClient } from "mqtt";
import t from "tap";
import { Client, type DevSystem, type Outpost, canConnect, devWithSystem, freePort, hasCommand, mqttFlush, newUser, runBin, sleep, startOutpost, uniq, waitFor } from "./harness.ts";

const o = await startOutpost();
const extra: Outpost[] = [];
const clients = new Set<MqttClient>();
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await Promise.all([o, ...extra].map((x) => Promise.race([x.stop(), sleep(5_000).then(() => x.kill())])));
});
const sA = await devWithSystem(o, "cmqtt-a");
const sB = await devWithSystem(o, "cmqtt-b");

// ---- helpers ----------------------------------------------------------------------------------

const adminSvc = (sys: DevSystem, name: string) => `/admin/code/v/1/${sys.systemKey}/${name}`;
const execPath = (sys: DevSystem, name: string) => `/api/v/1/code/${sys.systemKey}/${name}`;

async function service(sys: DevSystem, name: string, code: string, more: Record<string, unknown> = {}) {
  const r = await sys.dev.post(adminSvc(sys, name), { code, parameters: [], execution_timeout: 20, ...more });
  if (r.status !== 200) throw new Error(`create service ${name}: ${r.status} ${r.text}`);
}
const exec = (sys: DevSystem, c: Client, name: string, params: unknown = {}) => c.post(execPath(sys, name), params);

/** A user of `sys` whose role holds `perms`, with a fresh token. */
async function userWith(sys: DevSystem, perms: Record<string, unknown>) {
  const u = await newUser(sys);
  const role = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name: uniq("R"), ...perms });
  if (role.status !== 200) throw new Error(`role: ${role.text}`);
  const r = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role.body.role_id] } } });
  if (r.status !== 200) throw new Error(`user roles: ${r.text}`);
  const a = await sys.app.post("/api/v/1/user/auth", { email: u.email, password: u.password });
  if (a.status !== 200) throw new Error(`user auth: ${a.text}`);
  return { ...u, token: a.body.user_token as string, client: new Client(o.url, { "ClearBlade-UserToken": a.body.user_token }) };
}
const canRun = (...names: string[]) => ({ services: names.map((name) => ({ itemInfo: { name }, permissions: 1 })) });

/** A real MQTT client of `sys` connected to `srv` with `token`. */
async function connect(sys: DevSystem, token = sys.devToken, srv: Outpost = o): Promise<MqttClient> {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${srv.mqttPort}`, { username: token, password: sys.systemKey, clientId: uniq("cid"), reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4 });
  clients.add(c);
  return c;
}
interface Got { topic: string; text: string; bytes: Buffer; qos: number }
/** Every PUBLISH `c` receives, as it arrives. */
function collect(c: MqttClient): Got[] {
  const got: Got[] = [];
  c.on("packetreceive", (p) => {
    if (p.cmd !== "publish") return;
    const bytes = Buffer.from(p.payload);
    got.push({ topic: p.topic, text: bytes.toString("utf8"), bytes, qos: p.qos });
  });
  return got;
}

/** Runs a service in the background; its answer when it comes. */
function background(sys: DevSystem, c: Client, name: string, params: unknown = {}) {
  let answer: any = null;
  const done = exec(sys, c, name, params).then((r) => (answer = r));
  return { done, answered: () => answer !== null };
}

// ---- the node's own broker ------------------------------------------------------------------------

t.test("new MQTT.Client() publishes as the run's user; real clients of the system receive it, bytes and QoS intact", async (t) => {
  const base = `cm/${uniq("p")}`;
  const watcher = await connect(sA);
  const got = collect(watcher);
  await watcher.subscribeAsync(`${base}/#`, { qos: 2 });
  const name = uniq("pub");
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client(), m = new MQTT.Message(new Uint8Array([0, 1, 254, 255]));
    m.topic = "${base}/msg"; m.qos = 1;
    Promise.all([c.publish("${base}/text", "hello " + req.params.who, 2), c.publish("", m), c.publish("${base}/json", { n: 7 })])
      .then(function () { resp.success("published"); }, function (e) { resp.error(e.message); });
  }`);
  const r = await exec(sA, sA.dev, name, { who: "world" });
  t.same(r.body, { success: true, results: "published" });
  t.ok(await waitFor(() => got.length >= 3, 5_000), "three messages arrived");
  const by = (tp: string) => got.find((g) => g.topic === tp);
  t.equal(by(`${base}/text`)?.text, "hello world");
  t.equal(by(`${base}/text`)?.qos, 2, "at the QoS published with");
  t.same([...(by(`${base}/msg`)?.bytes ?? [])], [0, 1, 254, 255], "a Message's bytes, on its own topic");
  t.equal(by(`${base}/msg`)?.qos, 1, "at the Message's QoS");
  t.same(JSON.parse(by(`${base}/json`)?.text ?? "null"), { n: 7 }, "a JSON value as JSON");

  // a publish the service does not wait for still goes out when it ends right after
  const quick = uniq("quick");
  await service(sA, quick, `function ${quick}(req, resp) { new MQTT.Client().publish("${base}/quick", "sent"); resp.success("ended"); }`);
  t.same((await exec(sA, sA.dev, quick)).body, { success: true, results: "ended" });
  t.ok(await waitFor(() => got.some((g) => g.topic === `${base}/quick` && g.text === "sent"), 5_000), "the unawaited publish arrived");
});

t.test("subscribe: onMessage(topic, message) gets what a real client publishes, while the run lasts", async (t) => {
  const base = `cm/${uniq("s")}`;
  const peer = await connect(sA);
  const got = collect(peer);
  await peer.subscribeAsync(`${base}/ready`);
  const name = uniq("sub");
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client(), seen = [];
    c.subscribe(["${base}/in/+", "${base}/bin"], function (topic, m) {
      seen.push({ topic: topic, payload: m.payload, bytes: Array.prototype.slice.call(m.payload_bytes), qos: m.qos, retain: m.retain, dup: m.duplicate, props: m.user_properties });
      if (seen.length === 3) resp.success(seen);
    }).then(function () { return c.publish("${base}/ready", "ready"); }, function (e) { resp.error(e.message); });
  }`);
  const run = background(sA, sA.dev, name);
  t.ok(await waitFor(() => got.some((g) => g.text === "ready"), 10_000), "the service subscribed");
  await peer.publishAsync(`${base}/in/a`, "21.5", { qos: 1 });
  await peer.publishAsync(`${base}/other`, "not for it");
  await peer.publishAsync(`${base}/bin`, Buffer.from([0xFF, 0x00, 0xC3]), { qos: 0 });
  await peer.publishAsync(`${base}/in/b`, "ünïcødé", { qos: 2 });
  const r = await run.done;
  t.equal(r.body.success, true, JSON.stringify(r.body).slice(0, 300));
  t.same(r.body.results, [
    { topic: `${base}/in/a`, payload: "21.5", bytes: [...Buffer.from("21.5")], qos: 1, retain: false, dup: false, props: {} },
    { topic: `${base}/bin`, payload: Buffer.from([0xFF, 0x00, 0xC3]).toString("utf8"), bytes: [0xFF, 0x00, 0xC3], qos: 0, retain: false, dup: false, props: {} },
    { topic: `${base}/in/b`, payload: "ünïcødé", bytes: [...Buffer.from("ünïcødé")], qos: 2, retain: false, dup: false, props: {} },
  ], "in order, only the subscribed topics, text and bytes");

  // a run that only subscribes lasts until its timeout, then ends as timed out
  const idle = uniq("idle");
  await service(sA, idle, `function ${idle}(req, resp) { new MQTT.Client().subscribe("${base}/never", function () {}); }`, { execution_timeout: 1 });
  const i = await exec(sA, sA.dev, idle);
  t.equal(i.body.success, false);
  t.match(String(i.body.results), /timed out/, "a subscribed run waits for messages until its timeout");
  // one whose last subscription goes ends by itself
  const gone = uniq("gone");
  await service(sA, gone, `function ${gone}(req, resp) { var c = new MQTT.Client(); c.subscribe("${base}/x", function () {}).then(function () { return c.unsubscribe("${base}/x"); }); }`, { execution_timeout: 10 });
  const t0 = Date.now();
  const g = await exec(sA, sA.dev, gone);
  t.same(g.body, { success: true, results: null }, "ended without waiting for its timeout");
  t.ok(Date.now() - t0 < 5_000, "well before it");
});

t.test("a stream service (execution_timeout -1) republishes each message it gets, until it is deleted", async (t) => {
  const base = `cm/${uniq("st")}`;
  const peer = await connect(sA);
  const got = collect(peer);
  await peer.subscribeAsync(`${base}/out/#`, { qos: 1 });
  const name = uniq("stream");
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client();
    c.subscribe("${base}/in/+", function (topic, m) { c.publish("${base}/out/" + topic.split("/").pop(), m.payload.toUpperCase(), 1); })
      .then(function () { return c.publish("${base}/out/ready", "ready"); });
  }`, { execution_timeout: -1, auto_restart: true });
  t.ok(await waitFor(() => got.some((g) => g.topic === `${base}/out/ready`), 15_000), "the engine started it and it subscribed");
  for (let i = 0; i < 20; i++) await peer.publishAsync(`${base}/in/m${i}`, `message ${i}`, { qos: 1 });
  t.ok(await waitFor(() => got.filter((g) => /\/out\/m\d+$/.test(g.topic)).length >= 20, 10_000), "every message came back");
  const echoed = got.filter((g) => /\/out\/m\d+$/.test(g.topic));
  t.same(echoed.map((g) => g.text), Array.from({ length: 20 }, (_, i) => `MESSAGE ${i}`), "transformed, in order, once each");
  t.ok(echoed.every((g, i) => g.topic === `${base}/out/m${i}` && g.qos === 1), "on its topic, at QoS 1");

  t.equal((await sA.dev.del(adminSvc(sA, name))).status, 200, "the service is deleted");
  // deleting ends the run, and its subscription with it: nothing comes back any more
  await sleep(500);
  const before = got.length;
  for (let i = 0; i < 10; i++) { await peer.publishAsync(`${base}/in/late${i}`, "late", { qos: 1 }); await sleep(100); }
  await mqttFlush(peer);
  t.equal(got.length, before, "no echo after the service is gone");
});

t.test("rights: MQTT.Client acts as the run's user (topic permissions), only inside its system", async (t) => {
  const base = `cm/${uniq("r")}`;
  const watcher = await connect(sA);
  const got = collect(watcher);
  await watcher.subscribeAsync(`${base}/#`);
  const name = uniq("rights");
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client(), out = {};
    c.publish("${base}/pub", "from " + req.params.who).then(function () { out.publish = "ok"; }, function (e) { out.publish = e.message; })
      .then(function () { return c.subscribe("${base}/sub", function () {}); })
      .then(function () { out.subscribe = "ok"; return c.unsubscribe("${base}/sub"); }, function (e) { out.subscribe = e.message; })
      .then(function () { resp.success(out); });
  }`);
  const reader = await userWith(sA, { ...canRun(name), topics: [{ itemInfo: { name: `${base}/#` }, permissions: 1 }] });
  const r = (await exec(sA, reader.client, name, { who: "reader" })).body.results;
  t.match(r.publish, /publish to topic/, "no publish right: the publish is refused");
  t.equal(r.subscribe, "ok", "the subscribe right is enough to subscribe");
  const writer = await userWith(sA, { ...canRun(name), topics: [{ itemInfo: { name: `${base}/pub` }, permissions: 2 }] });
  const w = (await exec(sA, writer.client, name, { who: "writer" })).body.results;
  t.equal(w.publish, "ok", "with the publish right it publishes");
  t.match(w.subscribe, /subscribe to topic/, "without the subscribe right it cannot subscribe");
  t.ok(await waitFor(() => got.some((g) => g.text === "from writer"), 5_000), "the permitted publish arrived");
  await mqttFlush(watcher);
  t.notOk(got.some((g) => g.text === "from reader"), "the refused one did not");

  // run_user decides when it is set
  const asReader = uniq("asreader");
  await service(sA, asReader, `function ${asReader}(req, resp) { new MQTT.Client().publish("${base}/pub", "x").then(function () { resp.success("ok"); }, function (e) { resp.success(e.message); }); }`, { run_user: reader.userId });
  t.match((await exec(sA, sA.dev, asReader)).body.results, /publish to topic/, "run_user without the right: refused, even for the developer");
});

t.test("another system's topics are out of reach", async (t) => {
  const base = `cm/${uniq("x")}`;
  const inA = await connect(sA), inB = await connect(sB);
  const gotA = collect(inA), gotB = collect(inB);
  await inA.subscribeAsync("#");
  await inB.subscribeAsync("#");
  const name = uniq("iso");
  // publishes to topics that name the other system, and listens to everything it can
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client(), seen = [];
    c.subscribe(["#", "$share/g/#"], function (topic, m) {
      seen.push(topic + "=" + m.payload);
      if (m.payload === "marker") resp.success(seen);
    }).then(function () {
      return Promise.all([c.publish("${sB.systemKey}/${base}", "a to b?"), c.publish("../${sB.systemKey}/${base}", "a to b again?"), c.publish("${base}/ready", "ready")]);
    });
  }`);
  const run = background(sA, sA.dev, name);
  t.ok(await waitFor(() => gotA.some((g) => g.text === "ready"), 10_000), "the service is listening");
  await inB.publishAsync(`${base}/b`, "b only", { qos: 1 });
  await mqttFlush(inB);
  await inA.publishAsync(`${base}/marker`, "marker", { qos: 1 });
  const r = await run.done;
  const seen = r.body.results as string[];
  t.ok(Array.isArray(seen) && seen.includes(`${base}/marker=marker`), "the service got its own system's marker");
  t.notOk(seen.some((s) => s.includes("b only")), "and nothing of the other system");
  await mqttFlush(inB);
  t.notOk(gotB.some((g) => /a to b/.test(g.text)), "the other system's clients got nothing from it");
  t.ok(await waitFor(() => gotA.some((g) => g.topic === `${sB.systemKey}/${base}` && g.text === "a to b?"), 5_000), "a topic naming the other system stays a topic of its own system");

  // naming this node's broker with another system's key needs a token of that system
  const bUser = await userWith(sB, { topics: [{ itemInfo: { name: `${base}/#` }, permissions: 3 }] });
  const named = uniq("named");
  await service(sA, named, `function ${named}(req, resp) {
    var c = new MQTT.Client({ address: "127.0.0.1", port: ${o.mqttPort}, username: req.params.token, password: "${sB.systemKey}" });
    c.publish("${base}/via-address", "with " + req.params.who).then(function () { resp.success("ok"); }, function (e) { resp.success(e.message); });
  }`);
  t.equal((await exec(sA, sA.dev, named, { token: bUser.token, who: "b token" })).body.results, "ok", "with a token of that system: published there");
  t.ok(await waitFor(() => gotB.some((g) => g.text === "with b token"), 5_000), "as a connection with those credentials would");
  const aUser = await newUser(sA);
  t.match((await exec(sA, sA.dev, named, { token: aUser.token, who: "a token" })).body.results, /token does not belong to this system/, "a token of this system is refused there");
  t.match((await exec(sA, sA.dev, named, { token: "not-a-token", who: "nobody" })).body.results, /valid token/, "so is a made-up token");
  await mqttFlush(inB);
  t.notOk(gotB.some((g) => g.text === "with a token" || g.text === "with nobody"), "nothing arrived from the refused ones");
});

t.test("hostile arguments are refused with what is wrong; the server carries on", async (t) => {
  const name = uniq("hostile");
  await service(sA, name, `function ${name}(req, resp) {
    var c = new MQTT.Client(), out = [], many = [];
    for (var i = 0; i < 1000; i++) many.push("h/" + i);
    var tries = [
      function () { return c.publish("t", new Array(1048577).join("abcd") + "abcde"); },
      function () { return c.publish("t", "x", 7); },
      function () { return c.publish("t", "x", -1); },
      function () { return c.publish("t", "x", 1, "true"); },
      function () { return c.publish({ topic: "t" }, "x"); },
      function () { return c.publish("a/#", "x"); },
      function () { return c.publish("t", undefined); },
      function () { return c.subscribe(many, function () {}); },
      function () { return c.subscribe(12, function () {}); },
      function () { return c.subscribe("t", "not a function"); },
      function () { return c.subscribe("x/#/y", function () {}); },
      function () { return c.unsubscribe(null); },
      function () { return new MQTT.Client({ address: 42 }).publish("t", "x"); },
      function () { return new MQTT.Client({ address: "example.com", port: 70000 }).publish("t", "x"); },
      function () { return new MQTT.Client({ use_tls: "yes", address: "example.com" }).publish("t", "x"); },
      function () { return new MQTT.Client({ username: new Array(5000).join("u") }).publish("t", "x"); },
      function () { return new MQTT.Client({ address: "169.254.169.254" }).publish("t", "x"); },
      function () { return new MQTT.Client({ address: "10.0.0.1", port: 1883 }).publish("t", "x"); },
      function () { return new MQTT.Client({ address: "127.0.0.1", port: ${o.mqttPort + 1} }).publish("t", "x"); },
    ];
    function next(i) {
      if (i === tries.length) return resp.success(out);
      var p;
      try { p = tries[i](); } catch (e) { out.push("threw " + e.message); return next(i + 1); }
      p.then(function () { out.push("ok"); next(i + 1); }, function (e) { out.push(e.message); next(i + 1); });
    }
    next(0);
  }`);
  const r = await exec(sA, sA.dev, name);
  t.equal(r.body.success, true, JSON.stringify(r.body).slice(0, 300));
  const out = r.body.results as string[];
  const expected = [/at most 4194304 bytes/, /qos must be 0, 1 or 2/, /qos must be 0, 1 or 2/, /retain must be a boolean/, /without wildcards/, /without wildcards/,
    /payload must be/, /1 to 256 topic filters/, /must be a string or a non-empty array/, /onMessage must be a function/, /not a topic filter/,
    /must be a string or a non-empty array/, /options.address must be a string/, /options.port must be an integer/, /options.use_tls must be a boolean/,
    /options.username must be a string of at most 4096/, /egress refused: 169\.254\.169\.254/, /egress refused: 10\.0\.0\.1/, /egress refused: 127\.0\.0\.1/];
  t.equal(out.length, expected.length, "every try answered");
  expected.forEach((re, i) => t.match(out[i], re, `try ${i}: ${out[i]}`));
  // many clients in one run: bounded
  const crowd = uniq("crowd");
  await service(sA, crowd, `function ${crowd}(req, resp) {
    var all = [];
    for (var i = 0; i < 100; i++) all.push(new MQTT.Client().publish("crowd", "x").then(function () { return "ok"; }, function (e) { return e.message; }));
    Promise.all(all).then(function (a) { resp.success(a); });
  }`);
  const c = (await exec(sA, sA.dev, crowd)).body.results as string[];
  t.equal(c.filter((x) => x === "ok").length, 16, "16 clients open at once");
  t.ok(c.slice(16).every((x) => /too many MQTT clients/.test(x)), "the rest refused");
  t.equal(o.proc.exitCode, null, "the server is still running");
  t.equal((await sA.dev.post(`/api/v/1/message/${sA.systemKey}/publish`, { topic: "alive", body: "x" })).status, 200, "and answering");
});

// ---- external brokers ---------------------------------------------------------------------------

const MOSQUITTO = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].find((p) => hasCommand(p));
const help = await runBin(["--help"]);
const EGRESS_FLAG = /--code-egress-allow/.test(help.stdout + help.stderr);

t.test("an external broker (mosquitto) through the egress allow list", {
  skip: !MOSQUITTO ? "mosquitto is not installed (apt-get install mosquitto)"
    : !EGRESS_FLAG ? "this build has no --code-egress-allow yet: loopback brokers cannot be allowed (the refusal is tested above)" : false,
}, async (t) => {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "mosq-"));
  chmodSync(dir, 0o777);
  writeFileSync(join(dir, "m.conf"), `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\n`);
  const broker: ChildProcess = spawn(MOSQUITTO!, ["-c", join(dir, "m.conf")], { stdio: "ignore" });
  t.teardown(() => { broker.kill(); rmSync(dir, { recursive: true, force: true }); });
  t.ok(await waitFor(() => canConnect(port), 10_000), "mosquitto is up");
  const allowed = await startOutpost({ args: ["--code-egress-allow", "127.0.0.1"] });
  extra.push(allowed);
  const s = await devWithSystem(allowed, "cmqtt-ext");
  const ext = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { reconnectPeriod: 0 });
  clients.add(ext);
  const got = collect(ext);
  await ext.subscribeAsync("ext/out/#");
  const name = uniq("ext");
  await s.dev.post(`/admin/code/v/1/${s.systemKey}/${name}`, { code: `function ${name}(req, resp) {
    var c = new MQTT.Client({ address: "127.0.0.1", port: ${port}, client_id: "outpost-svc" });
    c.subscribe("ext/in", function (topic, m) { c.publish("ext/out/echo", m.payload_bytes, 1).then(function () { resp.success(m.payload); }); })
      .then(function () { return c.publish("ext/out/ready", "ready"); }, function (e) { resp.error(e.message); });
  }`, parameters: [], execution_timeout: 20 });
  const run = exec(s, s.dev, name);
  t.ok(await waitFor(() => got.some((g) => g.topic === "ext/out/ready"), 10_000), "the service connected and subscribed");
  await ext.publishAsync("ext/in", Buffer.from([0x68, 0x69, 0xFF]), { qos: 1 });
  const r = await run;
  t.equal(r.body.success, true, JSON.stringify(r.body));
  t.ok(await waitFor(() => got.some((g) => g.topic === "ext/out/echo"), 5_000), "its publish reached the external broker");
  t.same([...got.find((g) => g.topic === "ext/out/echo")!.bytes], [0x68, 0x69, 0xFF], "bytes intact both ways");
});
