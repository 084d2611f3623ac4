
import mqtt from "mqtt";
import type { IPublishPacket, MqttClient } from "mqtt";
import type { Test } from "tap";
import t from "tap";
import { type DevSystem, devWithSystem, hasCommand, mqttFlush, needs, startOutpost, uniq, waitFor, startTwoNodes } from "./harness.ts";

const o = await startOutpost();
const clients = new Set<MqttClient>();
const cleanups: (() => Promise<void> | void)[] = [];
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await o.stop();
  for (const c of cleanups.reverse()) await c();
});

// ---- helpers ----------------------------------------------------------------------------------

/** A device of `s` (its role may publish and subscribe under `base`) connected to `port`. */
async function device(port: number, s: DevSystem, base: string): Promise<MqttClient> {
  const name = uniq("dev");
  const role = await s.dev.post(`/admin/user/${s.systemKey}/roles`, { name: uniq("R"), topics: [{ itemInfo: { name: `${base}/#` }, permissions: 3 }] });
  if (role.status !== 200) throw new Error(`role: ${role.text}`);
  const made = await s.dev.post(`/api/v/2/devices/${s.systemKey}/${name}`, { active_key: "secret-key-1" });
  if (made.status !== 200) throw new Error(`device: ${made.text}`);
  const roles = await s.dev.put(`/admin/devices/roles/${s.systemKey}/${name}`, { add: [role.body.role_id] });
  if (roles.status !== 200) throw new Error(`device roles: ${roles.text}`);
  const auth = await s.app.post(`/api/v/2/devices/${s.systemKey}/auth`, { deviceName: name, activeKey: "secret-key-1" });
  if (auth.status !== 200) throw new Error(`device auth: ${auth.text}`);
  return connect(port, auth.body.deviceToken, s.systemKey);
}

async function connect(port: number, token: string, systemKey: string): Promise<MqttClient> {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { username: token, password: systemKey, clientId: uniq("c"), reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4 });
  clients.add(c);
  return c;
}

/** The texts of the PUBLISHes `c` receives, as they arrive. */
function collect(c: MqttClient): string[] {
  const got: string[] = [];
  c.on("packetreceive", (p) => { if (p.cmd === "publish") got.push(Buffer.from((p as IPublishPacket).payload).toString("utf8")); });
  return got;
}

/** A service that joins `$share/<group>/<base>/jobs/#`, says so on <base>/joined, and answers with
 *  what its share was once <base>/stop arrives (a plain subscription: it gets every copy). */
async function sharingService(s: DevSystem, name: string) {
  const code = `function ${name}(req, resp) {
    var c = new MQTT.Client(), got = [], base = req.params.base;
    c.subscribe(base + "/stop", function () { resp.success(got); })
      .then(function () { return c.subscribe("$share/" + req.params.group + "/" + base + "/jobs/#", function (topic, m) { got.push(m.payload); }); })
      .then(function () { return c.publish(base + "/joined", "yes"); }, function (e) { resp.error(e.message); });
  }`;
  const r = await s.dev.post(`/admin/code/v/1/${s.systemKey}/${name}`, { code, parameters: [], execution_timeout: 60 });
  if (r.status !== 200) throw new Error(`service ${name}: ${r.status} ${r.text}`);
}

/** Publishes `n` QoS 1 messages "<tag>:<i>", `window` unacknowledged at a time. */
async function publishMany(c: MqttClient, topic: string, tag: string, n: number, window = 20) {
  let next = 0;
  const worker = async () => { for (let i = next++; i < n; i = next++) await c.publishAsync(topic, `${tag}:${i}`, { qos: 1 }); };
  await Promise.all(Array.from({ length: window }, worker));
}

/** A device on `devPort` and the service (run through `runUrl`) in one group, `pub` told when the
 *  service joined; the device's messages as they arrive, and the run's answer when it comes. */
async function split(t: Test, s: DevSystem, runUrl: string, devPort: number, pub: MqttClient) {
  const base = `sh/${uniq("b")}`, group = uniq("g"), tag = uniq("m"), name = uniq("svc");
  const dev = await device(devPort, s, base);
  const devGot = collect(dev);
  t.same((await dev.subscribeAsync(`$share/${group}/${base}/jobs/#`, { qos: 1 })).map((g) => g.qos), [1], "the device joined the group");
  const watcher = collect(pub);
  await pub.subscribeAsync(`${base}/joined`, { qos: 1 });
  await sharingService(s, name);
  const run = fetch(`${runUrl}/api/v/1/code/${s.systemKey}/${name}`, {
    method: "POST", headers: { "ClearBlade-UserToken": s.devToken, "Content-Type": "application/json" }, body: JSON.stringify({ base, group }),
  }).then(async (r) => ({ status: r.status, body: await r.json() as { success: boolean; results: unknown } }));
  t.ok(await waitFor(() => watcher.includes("yes"), 15_000), "the service joined the group");
  return { base, group, tag, name, dev, devGot, run };
}

// ---- one node ---------------------------------------------------------------------------------

t.test("a device and a code service's MQTT.Client in one group split the messages, each message once", async (t) => {
  const s = await devWithSystem(o, "cshare");
  const pub = await connect(o.mqttPort, s.devToken, s.systemKey);
  const N = 400;
  const x = await split(t, s, o.url, o.mqttPort, pub);
  await publishMany(pub, `${x.base}/jobs/a`, x.tag, N);
  await mqttFlush(x.dev);
  await pub.publishAsync(`${x.base}/stop`, "stop", { qos: 1 });
  const r = await x.run;
  t.equal(r.status, 200, "the service answered");
  const mine = (r.body.results as string[]).filter((m) => m.startsWith(`${x.tag}:`));
  const theirs = x.devGot.filter((m) => m.startsWith(`${x.tag}:`));
  t.equal(mine.length + theirs.length, N, `every message once to the group (service ${mine.length}, device ${theirs.length})`);
  t.equal(new Set([...mine, ...theirs]).size, N, "no message to both, none twice");
  // the service acknowledges nothing: it is not taken for the idlest member, it gets its turn
  t.ok(Math.min(mine.length, theirs.length) >= N / 2 * 0.8, `about half each (service ${mine.length}, device ${theirs.length})`);
  // the group's members are equal: a message published after the service left goes to the device
  for (let i = 0; i < 4; i++) await pub.publishAsync(`${x.base}/jobs/a`, `${x.tag}:after${i}`, { qos: 1 });
  t.ok(await waitFor(() => x.devGot.filter((m) => m.startsWith(`${x.tag}:after`)).length === 4, 5_000), "with the service's run over, the device gets every message");
  x.dev.end(true); pub.end(true);
});

// ---- two nodes on Redis -------------------------------------------------------------------------

const haveRedis = hasCommand("redis-server");
t.test("cluster: the service on one node and the device on the other share the group's messages, each once", await needs("redis-server", haveRedis), async (t) => {
  const { nodes: [A, B], redisUp } = await startTwoNodes("cshare", cleanups);
  t.ok(redisUp, "redis-server up");
  const s = await devWithSystem({ url: A.url }, "cshare-cluster");
  // the device on A, the service run on B, the publisher on A
  const pub = await connect(A.mqttPort, s.devToken, s.systemKey);
  const x = await split(t, s, B.url, A.mqttPort, pub);
  // A hears of B's member a little after it joined: until then A's device gets everything
  const warm = uniq("warm");
  let w = 0;
  t.ok(await waitFor(async () => {
    await pub.publishAsync(`${x.base}/jobs/w`, `${warm}:${w++}`, { qos: 1 });
    await mqttFlush(x.dev);
    return x.devGot.filter((m) => m.startsWith(`${warm}:`)).length < w;
  }, 15_000, 100), "A routes some of the group's messages to the service's member on B");
  const N = 400;
  await publishMany(pub, `${x.base}/jobs/a`, x.tag, N);
  await mqttFlush(x.dev);
  await pub.publishAsync(`${x.base}/stop`, "stop", { qos: 1 });
  const r = await x.run;
  t.equal(r.status, 200, "the service answered");
  const mine = (r.body.results as string[]).filter((m) => m.startsWith(`${x.tag}:`));
  const theirs = x.devGot.filter((m) => m.startsWith(`${x.tag}:`));
  t.equal(mine.length + theirs.length, N, `every message once to the group (service on B ${mine.length}, device on A ${theirs.length})`);
  t.equal(new Set([...mine, ...theirs]).size, N, "no message to both, none twice");
  t.ok(Math.min(mine.length, theirs.length) >= N / 2 * 0.8, `about half each (service on B ${mine.length}, device on A ${theirs.length})`);
  x.dev.end(true); pub.end(true);
});
