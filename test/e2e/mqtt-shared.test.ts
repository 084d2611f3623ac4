
import net from "node:net";
import mqtt from "mqtt";
import type { IClientOptions, IPublishPacket, MqttClient } from "mqtt";
import mqttPacket from "mqtt-packet";
import t from "tap";
import { type DevSystem, devWithSystem, hasCommand, mqttFlush, needs, startOutpost, storedData, uniq, waitFor, startTwoNodes } from "./harness.ts";

const o = await startOutpost();
const clients = new Set<MqttClient>();
const cleanups: (() => Promise<void> | void)[] = [];
t.teardown(async () => {
  for (const c of clients) c.end(true);
  await o.stop();
  for (const c of cleanups.reverse()) await c();
});
const sA = await devWithSystem(o, "share-a");
const sB = await devWithSystem(o, "share-b");

// ---- helpers ----------------------------------------------------------------------------------

interface Member { c: MqttClient; got: { topic: string; text: string; qos: number; retain: boolean }[] }

/** A connected client; `before` runs before it connects (a resumed session's queue can come in
 *  the same read as the CONNACK, before code after an awaited connect runs). */
function connect(port: number, s: DevSystem, opts: IClientOptions = {}, before?: (c: MqttClient) => void): Promise<MqttClient> {
  return new Promise((res, rej) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: s.devToken, password: s.systemKey, clientId: uniq("c"), reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4, ...opts });
    clients.add(c);
    before?.(c);
    c.once("connect", () => res(c));
    c.once("error", (e) => { c.end(true); rej(e); });
  });
}

/** A client recording every PUBLISH it receives (as it arrives, from its CONNACK on). */
async function member(port: number, s: DevSystem, opts: IClientOptions = {}): Promise<Member> {
  const got: Member["got"] = [];
  const c = await connect(port, s, opts, (client) => client.on("packetreceive", (p) => {
    if (p.cmd !== "publish") return;
    const pp = p as IPublishPacket;
    got.push({ topic: pp.topic, text: Buffer.from(pp.payload).toString("utf8"), qos: pp.qos, retain: pp.retain });
  }));
  return { c, got };
}

async function suback(c: MqttClient, filter: string | string[], qos: 0 | 1 | 2 = 1): Promise<number[]> {
  try {
    return (await c.subscribeAsync(filter, { qos })).map((g) => g.qos);
  } catch (e) {
    const codes = (e as { packet?: { granted?: number[] } }).packet?.granted;
    if (codes) return codes;
    throw e;
  }
}

const texts = (m: Member, prefix: string) => m.got.filter((g) => g.text.startsWith(prefix)).map((g) => g.text);

/** Publishes `n` QoS 1 messages "<tag>:<i>" on `topic`, `window` unacknowledged at a time. */
async function publishMany(c: MqttClient, topic: string, tag: string, n: number, window = 200, onSent?: (i: number) => void) {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= n) return;
      await c.publishAsync(topic, `${tag}:${i}`, { qos: 1 });
      onSent?.(i);
    }
  };
  await Promise.all(Array.from({ length: window }, worker));
}

// ---- shared subscriptions ---------------------------------------------------------------------

t.test("three members, 10,000 QoS 1 messages, one member killed mid-run: every message reaches the group; duplicates only of what the killed member held", async (t) => {
  const N = 10_000;
  const group = uniq("g");
  const ms = await Promise.all([0, 1, 2].map(() => member(o.mqttPort, sA)));
  for (const m of ms) t.same(await suback(m.c, `$share/${group}/jobs/+`, 1), [1], "member subscribes at QoS 1");
  const pub = await connect(o.mqttPort, sA);
  const tag = uniq("m");
  const victim = ms[0]!;
  // killed once it has taken a third of its share: its socket is destroyed without a DISCONNECT,
  // and whatever the broker wrote to it since its last PUBACK is unacknowledged
  let killedAt = -1;
  const kill = () => {
    if (killedAt >= 0 || texts(victim, tag).length < N / 9) return;
    killedAt = texts(victim, tag).length;
    victim.c.stream.destroy();
  };
  victim.c.on("packetreceive", kill);
  const t0 = Date.now();
  await publishMany(pub, "jobs/a", tag, N);
  const live = ms.slice(1);
  const total = () => new Set(ms.flatMap((m) => texts(m, tag))).size;
  t.ok(await waitFor(() => total() >= N, 30_000), `every one of the ${N} messages reached a member (${total()})`);
  const secs = (Date.now() - t0) / 1000;
  t.ok(killedAt > 0, `the member was killed after ${killedAt} messages`);

  const counts = new Map<string, number>();
  for (const m of ms) for (const x of texts(m, tag)) counts.set(x, (counts.get(x) ?? 0) + 1);
  const victimGot = new Set(texts(victim, tag));
  const dups = [...counts].filter(([, n]) => n > 1);
  t.equal(counts.size, N, "none lost");
  t.ok(dups.every(([x, n]) => n === 2 && victimGot.has(x)), `a message went to two members only when the killed member had it unacknowledged (${dups.length} such)`);
  for (const m of live) t.equal(new Set(texts(m, tag)).size, texts(m, tag).length, "a live member got no message twice");
  t.ok(dups.length <= 1000, `duplicates bounded by what was in flight to the killed member (${dups.length})`);
  const shares = ms.map((m) => texts(m, tag).length);
  // the two survivors share what came after the kill evenly
  const [a, b] = [shares[1]!, shares[2]!];
  t.ok(Math.min(a, b) / Math.max(a, b) >= 0.8, `the survivors' shares are within 20% of each other (${a} / ${b})`);
  t.comment(`fairness: killed member ${shares[0]} (killed at ${killedAt}), survivors ${a} and ${b}; ${dups.length} redelivered duplicates; ${Math.round(N / secs)} msg/s end to end`);
  for (const m of live) m.c.end(true);
  pub.end(true);
});

t.test("fair before anything fails: three members get a third each (QoS 0 and QoS 1)", async (t) => {
  for (const qos of [0, 1] as const) {
    const group = uniq("fair");
    const ms = await Promise.all([0, 1, 2].map(() => member(o.mqttPort, sA)));
    for (const m of ms) t.same(await suback(m.c, `$share/${group}/fair/#`, qos), [qos]);
    const pub = await connect(o.mqttPort, sA);
    const tag = uniq("f");
    for (let i = 0; i < 300; i++) await pub.publishAsync(`fair/${i % 7}`, `${tag}:${i}`, { qos });
    t.ok(await waitFor(() => ms.reduce((n, m) => n + texts(m, tag).length, 0) >= 300, 10_000), `QoS ${qos}: all 300 arrived`);
    await Promise.all(ms.map((m) => mqttFlush(m.c)));
    const shares = ms.map((m) => texts(m, tag).length);
    t.equal(shares.reduce((x, y) => x + y, 0), 300, `QoS ${qos}: each once (${shares})`);
    t.ok(shares.every((n) => n >= 80 && n <= 120), `QoS ${qos}: about a third each (${shares})`);
    t.ok(ms.every((m) => m.got.every((g) => g.topic.startsWith("fair/") && g.qos === qos)), "topics in the client's own form, at the granted QoS");
    for (const m of ms) m.c.end(true);
    pub.end(true);
  }
});

t.test("a shared subscription and a plain one of the same client each get the message; another group gets its own copy", async (t) => {
  const g1 = uniq("g"), g2 = uniq("g");
  const both = await member(o.mqttPort, sA);
  t.same(await suback(both.c, [`$share/${g1}/x/#`, "x/#"], 1), [1, 1]);
  const other = await member(o.mqttPort, sA);
  t.same(await suback(other.c, `$share/${g2}/x/#`, 1), [1]);
  const pub = await connect(o.mqttPort, sA);
  const tag = uniq("b");
  await pub.publishAsync("x/1", `${tag}:1`, { qos: 1 });
  t.ok(await waitFor(() => texts(both, tag).length >= 2 && texts(other, tag).length >= 1, 5_000), "delivered");
  await Promise.all([mqttFlush(both.c), mqttFlush(other.c)]);
  t.equal(texts(both, tag).length, 2, "once through its group, once through its plain subscription");
  t.equal(texts(other, tag).length, 1, "the other group's only member gets it once");
  both.c.end(true); other.c.end(true); pub.end(true);
});

t.test("unsubscribe leaves the group: what follows goes to the others only", async (t) => {
  const group = uniq("u");
  const [m1, m2] = await Promise.all([member(o.mqttPort, sA), member(o.mqttPort, sA)]);
  for (const m of [m1!, m2!]) t.same(await suback(m.c, `$share/${group}/u/t`, 1), [1]);
  const pub = await connect(o.mqttPort, sA);
  const before = uniq("pre");
  for (let i = 0; i < 10; i++) await pub.publishAsync("u/t", `${before}:${i}`, { qos: 1 });
  t.ok(await waitFor(() => texts(m1!, before).length + texts(m2!, before).length >= 10, 5_000));
  t.ok(texts(m1!, before).length > 0 && texts(m2!, before).length > 0, "both members took messages before");
  await m1!.c.unsubscribeAsync(`$share/${group}/u/t`);
  const after = uniq("post");
  for (let i = 0; i < 20; i++) await pub.publishAsync("u/t", `${after}:${i}`, { qos: 1 });
  t.ok(await waitFor(() => texts(m2!, after).length >= 20, 5_000), "the remaining member got all 20");
  await mqttFlush(m1!.c);
  t.same(texts(m1!, after), [], "the member that left got none");
  m1!.c.end(true); m2!.c.end(true); pub.end(true);
});

t.test("per system: equal group names and filters in two systems never share", async (t) => {
  const group = uniq("iso");
  const a = await member(o.mqttPort, sA), b = await member(o.mqttPort, sB);
  t.same(await suback(a.c, `$share/${group}/iso/#`, 1), [1]);
  t.same(await suback(b.c, `$share/${group}/iso/#`, 1), [1]);
  const pa = await connect(o.mqttPort, sA), pb = await connect(o.mqttPort, sB);
  const ta = uniq("A"), tb = uniq("B");
  for (let i = 0; i < 20; i++) { await pa.publishAsync("iso/x", `${ta}:${i}`, { qos: 1 }); await pb.publishAsync("iso/x", `${tb}:${i}`, { qos: 0 }); }
  t.ok(await waitFor(() => texts(a, ta).length >= 20 && texts(b, tb).length >= 20, 5_000), "each system's only member gets all of its own system's messages");
  await Promise.all([mqttFlush(a.c), mqttFlush(b.c)]);
  t.same(texts(a, tb), [], "A's member got nothing of B's");
  t.same(texts(b, ta), [], "B's member got nothing of A's");
  a.c.end(true); b.c.end(true); pa.end(true); pb.end(true);
});

t.test("no retained messages for a shared subscription; a plain one gets them", async (t) => {
  const pub = await connect(o.mqttPort, sA);
  const topic = `ret/${uniq("r")}`;
  await pub.publishAsync(topic, "kept", { qos: 1, retain: true });
  const plain = await member(o.mqttPort, sA);
  t.same(await suback(plain.c, topic, 1), [1]);
  t.ok(await waitFor(() => plain.got.some((g) => g.text === "kept" && g.retain), 5_000), "positive control: a plain subscriber gets the retained message");
  const shared = await member(o.mqttPort, sA);
  t.same(await suback(shared.c, `$share/${uniq("g")}/${topic}`, 1), [1]);
  await pub.publishAsync(topic, "live", { qos: 1 });
  t.ok(await waitFor(() => shared.got.some((g) => g.text === "live"), 5_000), "the shared subscriber gets a live message");
  t.same(shared.got.map((g) => g.text), ["live"], "and never the retained one (it would have come first)");
  await pub.publishAsync(topic, "", { qos: 1, retain: true });
  plain.c.end(true); shared.c.end(true); pub.end(true);
});

t.test("refused shared filters: no group name, a wildcard in it, no filter", async (t) => {
  for (const f of ["$share/g", "$share//a", "$share/g+/a", "$share/#/a", "$share/g/"]) {
    // a refusal (128), or a wildcard where none may be: a protocol error that closes the connection
    const c = await connect(o.mqttPort, sA);
    const codes = await suback(c, f, 1).catch(() => "closed");
    t.ok(codes === "closed" || (Array.isArray(codes) && codes[0] === 128), `${f}: refused (${codes})`);
    c.end(true);
  }
});

t.test("a persistent session's member: QoS 1 delivery and its acknowledgement go through its session", async (t) => {
  const group = uniq("p");
  const id = uniq("pers");
  const m = await member(o.mqttPort, sA, { clientId: id, clean: false });
  t.same(await suback(m.c, `$share/${group}/p/t`, 1), [1]);
  const pub = await connect(o.mqttPort, sA);
  const tag = uniq("p");
  for (let i = 0; i < 20; i++) await pub.publishAsync("p/t", `${tag}:${i}`, { qos: 1 });
  t.ok(await waitFor(() => texts(m, tag).length >= 20, 5_000), "all 20 delivered");
  m.c.end(false);
  await new Promise<void>((r) => m.c.once("close", () => r()));
  // back on its session: the group membership comes back with it, and nothing is sent again
  const again = await member(o.mqttPort, sA, { clientId: id, clean: false });
  await mqttFlush(again.c);
  const tag2 = uniq("p2");
  await pub.publishAsync("p/t", `${tag2}:0`, { qos: 1 });
  t.ok(await waitFor(() => texts(again, tag2).length >= 1, 5_000), "the restored session is a member again");
  t.same(texts(again, tag), [], "acknowledged messages are not sent again");
  again.c.end(true); pub.end(true);
});

// ---- [MQTT-4.7.2-1] and [MQTT-3.1.3-8] at the packet level ----------------------------------------

/** A raw MQTT 3.1.1 connection: writes packets with mqtt-packet, parses what comes back. */
async function raw(port: number) {
  const sock = net.connect(port, "127.0.0.1");
  await new Promise<void>((res, rej) => { sock.once("connect", res); sock.once("error", rej); });
  const parser = mqttPacket.parser({ protocolVersion: 4 });
  const packets: mqttPacket.Packet[] = [];
  parser.on("packet", (p) => packets.push(p));
  sock.on("data", (d: Buffer) => parser.parse(d));
  let closed = false;
  sock.on("close", () => { closed = true; });
  sock.on("error", () => {});
  return {
    packets,
    get closed() { return closed; },
    send: (p: Record<string, unknown>) => sock.write(mqttPacket.generate(p as unknown as mqttPacket.Packet)),
    sendRaw: (b: Buffer) => sock.write(b),
    end: () => sock.destroy(),
  };
}

t.test("[MQTT-3.1.3-8] CONNECT without a client id and CleanSession 0: CONNACK 2, connection closed, nothing of it kept", async (t) => {
  // the will is the part of a session a client can observe: stored at CONNECT, published when
  // the connection drops (a session without subscriptions leaves nothing else; the id the broker
  // would have made up is not known to the client, so sessionPresent cannot be asked)
  const tag = uniq("will");
  const watcher = await member(o.mqttPort, sA);
  t.same(await suback(watcher.c, `will/${tag}/#`, 1), [1]);
  const r = await raw(o.mqttPort);
  // mqtt-packet will not write this CONNECT: written with CleanSession 1, the flag is cleared
  const will = (who: string) => ({ topic: `will/${tag}/${who}`, payload: Buffer.from(`${tag}:${who}`), qos: 1, retain: false });
  const connect = mqttPacket.generate({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean: true, clientId: "", keepalive: 30, username: sA.devToken, password: Buffer.from(sA.systemKey), will: will("refused") } as mqttPacket.IConnectPacket);
  let at = 1;
  while (connect[at]! & 0x80) at++;
  const flags = at + 1 + 6 + 1; // remaining length, protocol name, level
  t.equal(connect[flags]! & 0x02, 0x02, "CleanSession bit located");
  connect[flags]! &= ~0x02;
  r.sendRaw(connect);
  t.ok(await waitFor(() => r.packets.length > 0 && r.closed, 5_000), "answered and closed");
  t.match(r.packets[0], { cmd: "connack", returnCode: 2, sessionPresent: false }, "identifier rejected");
  t.equal(r.packets.length, 1, "nothing else");
  // the same CONNECT with CleanSession 1 is accepted (the control)
  const ok = await raw(o.mqttPort);
  ok.send({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean: true, clientId: "", keepalive: 30, username: sA.devToken, password: Buffer.from(sA.systemKey) });
  t.ok(await waitFor(() => ok.packets.length > 0, 5_000));
  t.match(ok.packets[0], { cmd: "connack", returnCode: 0 }, "CleanSession 1 without an id: accepted");
  t.notOk(ok.closed, "and kept open");
  ok.end();
  r.end();
  // a client with a will, connected (the control): its will is stored, and published when its
  // connection drops; the refused client's will was neither
  const control = await raw(o.mqttPort);
  control.send({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean: true, clientId: uniq("ctl"), keepalive: 30, username: sA.devToken, password: Buffer.from(sA.systemKey), will: will("control") });
  t.ok(await waitFor(() => control.packets.length > 0, 5_000));
  t.match(control.packets[0], { cmd: "connack", returnCode: 0 }, "the control is accepted");
  // (pg_dump writes a payload's bytes as hex)
  const stored = (x: string) => storedData(o).some((f) => f.bytes.includes(x) || f.bytes.includes(Buffer.from(x).toString("hex")));
  t.ok(stored(`${tag}:control`), "the control's will is in the database (the search finds a stored will)");
  t.notOk(stored(`${tag}:refused`), "the refused client's will was never stored");
  control.end();
  t.ok(await waitFor(() => texts(watcher, tag).includes(`${tag}:control`), 5_000), "the control's will is published when its connection drops");
  await mqttFlush(watcher.c);
  t.same(texts(watcher, tag), [`${tag}:control`], "the refused client's will never was");
  watcher.c.end(true);
});

t.test("[MQTT-4.7.2-1] '#' and '+/…' do not match topics starting with '$' (live, queued for a persistent session, retained)", async (t) => {
  const sub = await raw(o.mqttPort);
  sub.send({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean: true, clientId: uniq("raw"), keepalive: 30, username: sA.devToken, password: Buffer.from(sA.systemKey) });
  sub.send({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "#", qos: 1 }, { topic: "+/d", qos: 1 }, { topic: "$dollar/#", qos: 0 }] });
  t.ok(await waitFor(() => sub.packets.some((p) => p.cmd === "suback"), 5_000), "SUBACK");
  t.match(sub.packets.find((p) => p.cmd === "suback"), { granted: [1, 1, 0] });
  // a persistent session subscribed to '#' and '+/d', then away
  const id = uniq("away");
  const away = await member(o.mqttPort, sA, { clientId: id, clean: false });
  t.same(await suback(away.c, ["#", "+/d"], 1), [1, 1]);
  away.c.end(false);
  await new Promise<void>((r) => away.c.once("close", () => r()));

  const pub = await connect(o.mqttPort, sA);
  const tag = uniq("d");
  await pub.publishAsync("$dollar/d", `${tag}:dollar`, { qos: 1 });
  await pub.publishAsync("$dollar/r", `${tag}:retained`, { qos: 1, retain: true });
  await pub.publishAsync("plain/d", `${tag}:plain`, { qos: 1 });
  const texts = () => sub.packets.filter((p) => p.cmd === "publish").map((p) => [(p as mqttPacket.IPublishPacket).topic, String((p as mqttPacket.IPublishPacket).payload)]);
  t.ok(await waitFor(() => texts().some(([, x]) => x === `${tag}:plain`), 5_000), "the plain topic arrived (through '#' and '+/d')");
  // the '$dollar/#' subscription is the positive control for the $ topics
  t.ok(await waitFor(() => texts().filter(([tp]) => tp!.startsWith("$dollar/")).length >= 2, 5_000), "'$dollar/#' got both $ topics");
  const ping = uniq("flush");
  sub.send({ cmd: "unsubscribe", messageId: 9, unsubscriptions: [ping] });
  t.ok(await waitFor(() => sub.packets.some((p) => p.cmd === "unsuback"), 5_000));
  const dollar = sub.packets.filter((p) => p.cmd === "publish" && (p as mqttPacket.IPublishPacket).topic.startsWith("$"));
  t.equal(dollar.length, 2, `each $ topic once, through '$dollar/#' only (${JSON.stringify(texts())})`);
  t.ok(dollar.every((p) => (p as mqttPacket.IPublishPacket).qos === 0), "at the QoS of '$dollar/#' (0), not of '#' (1)");

  // the persistent session's queue holds the plain message and not the $ ones
  const back = await member(o.mqttPort, sA, { clientId: id, clean: false });
  t.ok(await waitFor(() => texts2(back).includes(`${tag}:plain`), 5_000), "the persistent session gets the queued plain message");
  await mqttFlush(back.c);
  t.same(texts2(back).filter((x) => x.includes(":dollar") || x.includes(":retained")), [], "and none of the $ ones");
  back.c.end(true);

  // retained: a new '#' subscriber gets no retained $ topic; '$dollar/#' does
  const late = await member(o.mqttPort, sA);
  t.same(await suback(late.c, ["$dollar/#"], 1), [1]);
  t.ok(await waitFor(() => texts2(late).includes(`${tag}:retained`), 5_000), "positive control: '$dollar/#' gets the retained $ message");
  const late2 = await member(o.mqttPort, sA);
  t.same(await suback(late2.c, ["#", "+/r", late2.c.options.clientId + "/marker"], 1), [1, 1, 1]);
  await pub.publishAsync(late2.c.options.clientId + "/marker", "m", { qos: 1 });
  t.ok(await waitFor(() => texts2(late2).includes("m"), 5_000), "a live message after the subscription arrived");
  t.same(late2.got.filter((g) => g.topic.startsWith("$")), [], "no retained $ message through '#' or '+/r'");
  await pub.publishAsync("$dollar/r", "", { qos: 1, retain: true });
  late.c.end(true); late2.c.end(true); pub.end(true); sub.end();
});
const texts2 = (m: Member) => m.got.map((g) => g.text);

// ---- two nodes on Redis -------------------------------------------------------------------------

const haveRedis = hasCommand("redis-server");
t.test("cluster: a group with members on two nodes gets each message once, wherever it is published", await needs("redis-server", haveRedis), async (t) => {
  const { nodes: [A, B], redisUp, db } = await startTwoNodes("share", cleanups);
  t.ok(redisUp, "redis-server up");
  t.comment(`shared database: ${db.startsWith("file:") ? "libSQL file" : "PostgreSQL"}`);
  const s = await devWithSystem({ url: A.url }, "share-cluster");
  const group = uniq("cg");
  // two members on A, one on B; publishers on both
  const ms = [await member(A.mqttPort, s), await member(A.mqttPort, s), await member(B.mqttPort, s)];
  for (const m of ms) t.same(await suback(m.c, `$share/${group}/c/#`, 1), [1]);
  const pa = await connect(A.mqttPort, s), pb = await connect(B.mqttPort, s);
  // each node hears of the other's members a little after their SUBACK: wait until a marker
  // published on each node reaches the member on the other node
  for (const [p, far, name] of [[pa, [ms[2]!], "A"], [pb, [ms[0]!, ms[1]!], "B"]] as const) {
    const mark = uniq("warm");
    t.ok(await waitFor(async () => {
      await p.publishAsync("c/warm", mark, { qos: 0 });
      return far.some((x) => texts(x, mark).length > 0);
    }, 10_000, 100), `${name} routes to the group's members on the other node`);
  }
  const tag = uniq("cl");
  const N = 3_000;
  await Promise.all([publishMany(pa, "c/a", `${tag}a`, N / 2, 100), publishMany(pb, "c/b", `${tag}b`, N / 2, 100)]);
  const all = () => ms.flatMap((m) => texts(m, tag));
  t.ok(await waitFor(() => all().length >= N, 20_000), `all ${N} arrived (${all().length})`);
  await Promise.all(ms.map((m) => mqttFlush(m.c)));
  t.equal(all().length, N, "each message once across both nodes");
  t.equal(new Set(all()).size, N, "no duplicates");
  const shares = ms.map((m) => texts(m, tag).length);
  t.ok(shares.every((n) => n >= N / 3 * 0.7), `each member about a third, wherever it is (${shares})`);
  // the member on B drops with messages in flight: the group still gets everything
  const tag2 = uniq("kill");
  let killed = false;
  ms[2]!.c.on("packetreceive", () => { if (!killed && texts(ms[2]!, tag2).length >= 100) { killed = true; ms[2]!.c.stream.destroy(); } });
  await publishMany(pb, "c/b", tag2, 1000, 50);
  const got2 = () => new Set(ms.flatMap((m) => texts(m, tag2)));
  t.ok(await waitFor(() => got2().size >= 1000, 20_000), `after B's member was killed, all 1000 reached the group (${got2().size})`);
  t.ok(killed, "B's member was killed mid-run");
  for (const m of ms) m.c.end(true);
  pa.end(true); pb.end(true);
});
