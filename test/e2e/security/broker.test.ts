// Multi-tenant isolation of the embedded broker, black-box: two systems A and B on one server,
// clients of both over TCP and WebSocket with user, device and developer tokens (and the platform
// admin's developer token, which may connect to either system). Nothing system A publishes,
// retains, queues for an offline session or leaves as a will may reach a client of system B,
// whatever B picks as its client id, its session flag, its filters or its topics; and B's clients
// cannot disturb A's (kick them off, take their queued messages, replace their wills). The same
// holds the other way round.
//
// Every message every client receives is recorded in one ledger: payloads published in A start
// with "A|", in B with "B|", so a client's foreign messages are the ones without its own system's
// tag. Each test asserts its observers' counts; the last test sums the whole ledger. Positive
// controls (A's own subscribers do get A's messages) keep every test able to fail.
import mqtt from "mqtt";
import type { IClientOptions, IConnackPacket, IPublishPacket, MqttClient } from "mqtt";
import t, { type Test } from "tap";
import { type DevSystem, devWithSystem, mqttFlush, newUser, request, startOutpost, uniq, waitFor } from "../harness.ts";

// ---- server and the two systems ---------------------------------------------------------------

const ADMIN_EMAIL = `${uniq("admin")}@example.com`, ADMIN_PASSWORD = "admin-password-1";
const o = await startOutpost({ args: ["--admin-email", ADMIN_EMAIL, "--admin-password", ADMIN_PASSWORD] });

const open_ = new Set<MqttClient>();
t.teardown(async () => {
  for (const c of open_) c.end(true);
  await o.stop();
});

const TCP = `mqtt://127.0.0.1:${o.mqttPort}`;
const WS = `ws://127.0.0.1:${o.mqttWsPort}/mqtt`;
const TRANSPORTS = { tcp: TCP, ws: WS } as const;
type Transport = keyof typeof TRANSPORTS;
type Kind = "developer" | "user" | "device" | "admin";
const KINDS: Kind[] = ["developer", "user", "device", "admin"];
type SideName = "A" | "B";

interface Side { name: SideName; sys: DevSystem; key: string; tokens: Record<Kind, string> }

/** A role granting read and create on every topic, so users and devices may use any filter. */
async function topicRole(sys: DevSystem): Promise<string> {
  const r = await sys.dev.post(`/admin/user/${sys.systemKey}/roles`, { name: uniq("mqtt-all"), topics: [{ itemInfo: { name: "#" }, permissions: 3 }] });
  if (r.status !== 200) throw new Error(`role: ${r.status} ${r.text}`);
  return r.body.role_id as string;
}

async function makeSide(name: SideName, adminToken: string): Promise<Side> {
  const sys = await devWithSystem(o, `isolation-${name}`);
  const role = await topicRole(sys);
  const u = await newUser(sys);
  const ur = await sys.dev.put(`/admin/user/${sys.systemKey}`, { user: u.userId, changes: { roles: { add: [role] } } });
  if (ur.status !== 200) throw new Error(`user role: ${ur.text}`);
  const device = uniq("dev");
  const made = await sys.dev.post(`/api/v/2/devices/${sys.systemKey}/${device}`, { active_key: "device-key-1" });
  if (made.status !== 200) throw new Error(`device: ${made.text}`);
  const dr = await sys.dev.put(`/admin/devices/roles/${sys.systemKey}/${device}`, { add: [role] });
  if (dr.status !== 200) throw new Error(`device role: ${dr.text}`);
  const auth = await sys.app.post(`/api/v/2/devices/${sys.systemKey}/auth`, { deviceName: device, activeKey: "device-key-1" });
  if (auth.status !== 200) throw new Error(`device auth: ${auth.text}`);
  return { name, sys, key: sys.systemKey, tokens: { developer: sys.devToken, user: u.token, device: auth.body.deviceToken, admin: adminToken } };
}

const adminAuth = await request(o.url, "POST", "/admin/auth", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
if (adminAuth.status !== 200) throw new Error(`admin auth: ${adminAuth.text}`);
const A = await makeSide("A", adminAuth.body.dev_token);
const B = await makeSide("B", adminAuth.body.dev_token);
const other = (s: Side) => (s === A ? B : A);

// ---- clients and the ledger -------------------------------------------------------------------

interface Got { topic: string; text: string; qos: number; retain: boolean }
interface Conn {
  side: SideName; label: string; client: MqttClient; connack: IConnackPacket; got: Got[];
  /** the client's own system's flush markers received (see subscribeFlushed), kept out of got */
  flushes: () => number;
  /** set when the connection closed (for "was A's client kicked off?") */
  closed: () => boolean;
}
/** every client this file opened, with everything it received */
const ledger: Conn[] = [];
const foreign = (c: Conn) => c.got.filter((g) => !g.text.startsWith(`${c.side}|`));
const show = (got: Got[]) => got.slice(0, 6).map((g) => `${g.topic} ${JSON.stringify(g.text.slice(0, 40))}`).join("; ") + (got.length > 6 ? ` ... (${got.length})` : "");

/** Connects `kind` of `side` over `transport`; records messages from before the CONNACK (queued
 *  messages of a persistent session follow it at once). Rejects with the client's error. */
function connect(side: Side, kind: Kind, transport: Transport, opts: IClientOptions = {}): Promise<Conn> {
  const label = `${side.name}:${kind}/${transport}${opts.clientId ? ` id=${opts.clientId}` : ""}${opts.clean === false ? " clean=false" : ""}`;
  return new Promise((res, rej) => {
    const c = mqtt.connect(TRANSPORTS[transport], {
      reconnectPeriod: 0, connectTimeout: 10_000, clientId: uniq("cid"), protocolVersion: 4,
      username: side.tokens[kind], password: side.key, ...opts,
    });
    open_.add(c);
    const got: Got[] = [];
    let closed = false, settled = false, flushes = 0;
    // recorded as each PUBLISH arrives (see mqttFlush)
    c.on("packetreceive", (packet) => {
      if (packet.cmd !== "publish") return;
      const p = packet as IPublishPacket, text = p.payload.toString("utf8");
      if (p.topic.startsWith("flush/") && text.startsWith(`${side.name}|`)) flushes++;
      else got.push({ topic: p.topic, text, qos: p.qos, retain: p.retain });
    });
    c.on("close", () => { closed = true; if (!settled) { settled = true; rej(new Error(`${label}: closed before CONNACK`)); } });
    c.on("error", (e) => { if (!settled) { settled = true; c.end(true); rej(e); } });
    c.once("connect", (connack) => {
      if (settled) return;
      settled = true;
      const conn: Conn = { side: side.name, label, client: c, connack, got, flushes: () => flushes, closed: () => closed };
      ledger.push(conn);
      res(conn);
    });
  });
}

function within<T>(p: Promise<T>, what: string, ms = 5_000): Promise<T> {
  return new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no answer from the broker within ${ms} ms: ${what}`)), ms);
    p.then((v) => { clearTimeout(timer); res(v); }, (e) => { clearTimeout(timer); rej(e); });
  });
}

/** SUBSCRIBE; the SUBACK return codes (128 = refused). */
async function subscribe(c: Conn, filter: string | string[], qos: 0 | 1 | 2 = 1): Promise<number[]> {
  try {
    return (await within(c.client.subscribeAsync(filter, { qos }), `${c.label} SUBSCRIBE ${filter}`)).map((g) => g.qos);
  } catch (e) {
    const codes = (e as { packet?: { granted?: number[] } }).packet?.granted;
    if (codes) return codes;
    throw e;
  }
}

/** PUBLISH and wait for the broker's acknowledgement (QoS 1: PUBACK, 2: PUBCOMP). */
function publish(c: Conn, topic: string, payload: string, opts: { qos: 0 | 1 | 2; retain?: boolean }) {
  return within(c.client.publishAsync(topic, payload, opts), `${c.label} PUBLISH ${topic}`);
}

/** DISCONNECT cleanly (no will) and wait. */
function end(c: Conn): Promise<void> {
  open_.delete(c.client);
  return within(new Promise<void>((r) => c.client.end(false, {}, () => r())), "DISCONNECT", 3_000).catch(() => { c.client.end(true); });
}

/** Drops the connection without DISCONNECT (the will is published). */
function kill(c: Conn) {
  open_.delete(c.client);
  c.client.stream.destroy();
}

/** Waits until the broker has routed `n` messages on `topic` in the system (they are in its
 *  history): aedes acknowledges a QoS 1 PUBLISH before it routes it. */
function routed(side: Side, topic: string, n: number) {
  return waitFor(async () => {
    const r = await side.sys.dev.get(`/api/v/1/message/${side.key}?topic=${encodeURIComponent(topic)}&count=0`);
    return r.status === 200 && Array.isArray(r.body) && r.body.length >= n;
  });
}

/** Every identity of a side over every transport. */
const identities = (): [Kind, Transport][] => KINDS.flatMap((k) => (["tcp", "ws"] as Transport[]).map((tr) => [k, tr] as [Kind, Transport]));

/** Asserts that each observer received nothing at all. */
function nothing(t: Test, observers: Conn[], what: string) {
  const leaked = observers.filter((c) => c.got.length > 0);
  t.same(leaked.map((c) => `${c.label}: ${show(c.got)}`), [], `${what}: ${observers.length} clients received 0 messages`);
}

/** Flushes each client still connected (mqttFlush); a client the broker dropped has closed() set. */
function flushed(conns: Conn[]): Promise<unknown> {
  return Promise.all(conns.filter((c) => !c.closed()).map((c) => mqttFlush(c.client).catch(() => {
    if (!c.closed()) throw new Error(`${c.label}: no answer to a flush and not closed`);
  })));
}

/** The retained flush marker of a side: a subscription that also names it gets it after the
 *  filters before it (the broker reads retained messages filter by filter, in the SUBSCRIBE's order). */
const publishFlushMarker = (c: Conn) => publish(c, "flush/retained", `${c.side}|flush`, { qos: 2, retain: true });

/** SUBSCRIBE to `filter` and, last, the side's retained flush marker; resolves with the codes of
 *  `filter` once the marker and everything the broker sent before it arrived: the retained
 *  messages of `filter` a leak would add are then in `got`. */
async function subscribeFlushed(c: Conn, filter: string | string[], qos: 0 | 1 | 2 = 1): Promise<number[]> {
  const filters = [filter].flat();
  const codes = await subscribe(c, [...filters, "flush/retained"], qos);
  if (!(await waitFor(() => c.flushes() > 0, 5_000))) throw new Error(`${c.label}: its system's retained flush marker did not arrive`);
  await flushed([c]);
  return codes.slice(0, filters.length);
}

// ---- positive controls ------------------------------------------------------------------------

t.test("positive control: each system's own clients exchange messages (every identity, TCP and WebSocket)", async (t) => {
  for (const side of [A, B]) {
    const subs = await Promise.all(identities().map(([k, tr]) => connect(side, k, tr)));
    for (const s of subs) t.same(await subscribe(s, "alerts/#", 2), [2], `${s.label} subscribes alerts/# (QoS 2 granted)`);
    for (const [i, p] of subs.entries()) await publish(p, `alerts/pc/${i}`, `${side.name}|pc-${i}`, { qos: ([0, 1, 2] as const)[i % 3]! });
    const want = subs.length;
    t.ok(await waitFor(() => subs.every((s) => s.got.length >= want), 5_000), `${side.name}: every subscriber got all ${want} messages of its own system`);
    await flushed(subs);
    for (const s of subs) {
      t.equal(s.got.length, want, `${s.label}: exactly ${want} (got ${s.got.length})`);
      t.ok(s.got.every((g) => g.topic.startsWith("alerts/pc/")), `${s.label}: topics in the client's own form, no system prefix (${show(s.got)})`);
    }
    for (const s of subs) await end(s);
  }
});

// ---- wildcards and topics naming a system key, QoS 0/1/2, both directions ----------------------

for (const [pubSide, obsSide] of [[A, B], [B, A]] as const) {
  t.test(`wildcards: nothing published in ${pubSide.name} reaches ${obsSide.name}'s '#', '+/#', '+/+/#', '$SYS/#', '$share/…', a filter naming ${pubSide.name}'s key (QoS 0, 1, 2)`, async (t) => {
    const P = pubSide, Q = obsSide;
    const filters = ["#", "+/#", "+/+/#", "$SYS/#", "$share/g/#", "$share/g/alerts/#", `${P.key}/alerts/#`, `${P.key}/#`, "alerts/#", "+/x", "cfg/x"];
    // one observer per filter and identity/transport of the observing system
    const observers: Conn[] = [];
    await Promise.all(filters.flatMap((f) => identities().map(async ([k, tr]) => {
      const c = await connect(Q, k, tr);
      const code = await subscribe(c, f, 2);
      // a refusal (128) is an acceptable way of keeping the other system out; a grant must then see nothing
      t.ok(code.length === 1 && [0, 1, 2, 128].includes(code[0]!), `${c.label} SUBSCRIBE ${f}: SUBACK ${code}`);
      c.label += ` [${f}]`;
      observers.push(c);
    })));
    // the publishing system's own controls
    const control = await connect(P, "developer", "tcp");
    t.same(await subscribe(control, "#", 2), [2], "control subscribes #");
    const sysControl = await connect(P, "user", "ws");
    t.same(await subscribe(sysControl, "$SYS/#", 2), [2], "control subscribes $SYS/#");
    const sharedControl = await connect(P, "device", "tcp");
    t.same(await subscribe(sharedControl, "$share/g/alerts/#", 2), [2], "control subscribes $share/g/alerts/#");

    // every identity of the publishing system publishes every topic at every QoS
    const topics = ["alerts/x", "alerts/a/b", "cfg/x", "status/x", "/alerts/x", `${Q.key}/alerts/x`, `${P.key}/alerts/x`];
    const publishers = await Promise.all(identities().map(([k, tr]) => connect(P, k, tr)));
    let n = 0, sys = 0;
    for (const p of publishers) {
      for (const qos of [0, 1, 2] as const) {
        for (const topic of topics) { await publish(p, topic, `${P.name}|${topic}|q${qos}|${p.label}`, { qos }); n++; }
        await publish(p, "$SYS/x", `${P.name}|$SYS|q${qos}|${p.label}`, { qos }); sys++;
      }
    }
    const plainCount = () => control.got.filter((g) => !g.topic.startsWith("$")).length;
    t.ok(await waitFor(() => plainCount() >= n, 10_000), `positive control: ${P.name}'s '#' got all ${n} (got ${plainCount()})`);
    t.ok(await waitFor(() => sysControl.got.length >= sys, 10_000), `positive control: ${P.name}'s '$SYS/#' got all ${sys} (got ${sysControl.got.length})`);
    await flushed([...observers, control, sysControl, sharedControl]);
    // the only member of its group gets every message on alerts/#
    t.equal(sharedControl.got.length, publishers.length * 3 * 2, `${P.name}'s own '$share/g/alerts/#' member got each of the messages on alerts/#`);
    // the client's "$SYS/x" lives at "<key>/$SYS/x", so '#' matches it here too: counted apart
    const plain = control.got.filter((g) => !g.topic.startsWith("$"));
    t.equal(plain.length, n, `control: each of the ${n} exactly once`);
    t.comment(`${P.name}'s '#' also got ${control.got.length - plain.length} of the ${sys} '$SYS/x' publishes`);
    t.ok(control.got.some((g) => g.topic === `${Q.key}/alerts/x`), `a topic naming ${Q.name}'s key stays a topic of ${P.name}`);
    t.ok(control.got.every((g) => g.topic.startsWith(`${P.key}/`) ? g.topic === `${P.key}/alerts/x` : true), "no topic arrives with the system prefix added");
    nothing(t, observers, `${Q.name}'s observers of ${P.name}'s ${n + sys} publishes`);
    for (const c of [...observers, control, sysControl, sharedControl, ...publishers]) await end(c);
  });
}

// ---- retained messages ------------------------------------------------------------------------

t.test("retained: A's retained cfg/x reaches no B subscriber, and B retaining cfg/x does not overwrite it", async (t) => {
  const pA = await connect(A, "developer", "tcp");
  const pB = await connect(B, "device", "ws");
  for (const p of [pA, pB]) await publishFlushMarker(p);
  await publish(pA, "cfg/x", "A|retained", { qos: 1, retain: true });
  await publish(pA, "cfg/y/z", "A|retained-deep", { qos: 2, retain: true });
  await publish(pA, "$SYS/r", "A|retained-sys", { qos: 0, retain: true });
  // a fresh A subscriber sees them (positive control, and they are stored before B looks)
  const ctl = await connect(A, "user", "ws");
  await subscribe(ctl, ["cfg/#", "$SYS/#"], 1);
  t.ok(await waitFor(() => ctl.got.length >= 3), `positive control: A's fresh subscriber gets A's 3 retained messages (${show(ctl.got)})`);

  const filters = ["#", "cfg/x", "cfg/#", "+/x", "+/+/#", "$SYS/#", "$share/g/#", `${A.key}/cfg/x`, `${A.key}/#`];
  const observers: Conn[] = [];
  await Promise.all(filters.flatMap((f) => identities().map(async ([k, tr]) => {
    const c = await connect(B, k, tr);
    c.label += ` [${f}]`;
    observers.push(c);
    await subscribeFlushed(c, f, 2);
  })));
  nothing(t, observers, "B's new subscribers get none of A's retained messages");

  // B retains on the same topic
  await publish(pB, "cfg/x", "B|retained", { qos: 2, retain: true });
  const freshA = await connect(A, "device", "tcp");
  await subscribeFlushed(freshA, "cfg/x", 1);
  t.ok(freshA.got.length >= 1, "a fresh A subscriber gets a retained cfg/x");
  t.same(freshA.got.map((g) => [g.topic, g.text, g.retain]), [["cfg/x", "A|retained", true]], "A's retained cfg/x is still A's (B's retain did not overwrite it)");
  const freshB = await connect(B, "user", "tcp");
  await subscribeFlushed(freshB, "cfg/x", 1);
  t.ok(freshB.got.length >= 1, "a fresh B subscriber gets a retained cfg/x");
  await flushed(observers);
  t.same(freshB.got.map((g) => [g.topic, g.text, g.retain]), [["cfg/x", "B|retained", true]], "B gets its own retained cfg/x only");
  const bObservers = observers.filter((c) => c.label.includes("[#]") || c.label.includes("[cfg/x]"));
  t.ok(bObservers.every((c) => foreign(c).length === 0), `B's live observers saw B's retain only (${bObservers.map((c) => show(foreign(c))).join(" ")})`);

  // clear the retained messages, with every subscriber gone (empty payloads carry no tag)
  for (const c of [...observers, ctl, freshA, freshB]) await end(c);
  await publish(pA, "cfg/x", "", { qos: 1, retain: true });
  await publish(pA, "cfg/y/z", "", { qos: 1, retain: true });
  await publish(pA, "$SYS/r", "", { qos: 1, retain: true });
  await publish(pB, "cfg/x", "", { qos: 2, retain: true });
  // the ledger must not count the clearing as foreign: nobody was subscribed
  const after = await connect(A, "developer", "tcp");
  await subscribeFlushed(after, ["#", "$SYS/#"], 1);
  t.same(after.got, [], "retained messages cleared");
  await end(after);
  for (const p of [pA, pB]) await publish(p, "flush/retained", "", { qos: 2, retain: true });
  for (const c of [pA, pB]) await end(c);
});

// ---- wills ------------------------------------------------------------------------------------

t.test("wills: A's will reaches no B client; B's same-id client neither kicks A's nor replaces A's will", async (t) => {
  const watchA = await connect(A, "developer", "tcp");
  t.same(await subscribe(watchA, "#", 1), [1]);
  const watchB = await Promise.all(identities().map(async ([k, tr]) => { const c = await connect(B, k, tr); await subscribe(c, ["#", "status/#", `${A.key}/#`], 1); return c; }));

  // 1. plain wills over both transports
  for (const tr of ["tcp", "ws"] as Transport[]) {
    const w = await connect(A, "user", tr, { will: { topic: "status/x", payload: Buffer.from(`A|will-${tr}`), qos: 1, retain: false } });
    kill(w);
    t.ok(await waitFor(() => watchA.got.some((g) => g.text === `A|will-${tr}`)), `positive control: A's will (${tr}) reaches A's watcher`);
  }

  // 2. the same client id in B
  const X = uniq("will-x");
  const holder = await connect(A, "device", "tcp", { clientId: X, will: { topic: "status/x", payload: Buffer.from("A|will-of-X"), qos: 1, retain: false } });
  const contenders = identities();
  for (const [i, [k, tr]] of contenders.entries()) {
    const last = i === contenders.length - 1;
    const c = await connect(B, k, tr, { clientId: X, will: { topic: "status/x", payload: Buffer.from(`B|will-of-X-${k}-${tr}`), qos: 1, retain: false } });
    t.equal(c.connack.sessionPresent, false, `${c.label}: no session present (got ${c.connack.sessionPresent})`);
    // a takeover closes the holder while the newcomer connects: by its CONNACK, and a round trip
    // on the holder's connection, it would be closed
    await flushed([holder]);
    t.notOk(holder.closed(), `A's ${holder.label} is still connected after ${c.label} connected`);
    if (last) kill(c); // B's own will fires for B
    else await end(c);
  }
  const lastLabel = contenders.at(-1)!.join("-");
  t.ok(await waitFor(() => watchB.every((w) => w.got.some((g) => g.text === `B|will-of-X-${lastLabel}`))), "positive control: B's will of X reaches every B watcher");
  t.same(watchA.got.filter((g) => g.text === "A|will-of-X").length, 0, "A's will of X was not published while its client was still meant to be connected");
  t.same(watchA.got.filter((g) => g.text.startsWith("B|")).map((g) => g.text), [], "A's watcher got none of B's wills");

  // A's client dies now: its own will, exactly once
  const before = watchA.got.filter((g) => g.text === "A|will-of-X").length;
  kill(holder);
  t.ok(await waitFor(() => watchA.got.filter((g) => g.text === "A|will-of-X").length > before, 3_000), "A's will of X is published when A's client dies");
  await flushed([watchA, ...watchB]);
  t.same(watchA.got.filter((g) => g.topic === "status/x" && g.text.includes("will-of-X")).map((g) => g.text), ["A|will-of-X"], "A's watcher got A's will of X exactly once (not B's)");
  for (const w of watchB) t.same(foreign(w).map((g) => `${g.topic} ${g.text}`), [], `${w.label}: nothing of A (wills included)`);
  for (const c of [watchA, ...watchB]) await end(c);
});

// ---- client id reuse, live --------------------------------------------------------------------

t.test("client id reuse: B connecting with a connected A client's id does not disconnect it, and gets none of its messages", async (t) => {
  // every A identity holds a client id; every B identity connects with it (one case each, at once)
  const cases = identities().flatMap(([hk, htr]) => identities().map(([k, tr]) => ({ hk, htr, k, tr })));
  const pA = await connect(A, "developer", "ws");
  await Promise.all(cases.map(async ({ hk, htr, k, tr }, i) => {
    const X = uniq(`live-${i}-`);
    const topic = `alerts/live/${i}`;
    const holder = await connect(A, hk, htr, { clientId: X });
    t.same(await subscribe(holder, "alerts/#", 1), [1], `${holder.label} subscribes`);
    const c = await connect(B, k, tr, { clientId: X });
    const what = `${holder.label} <- ${c.label}`;
    t.equal(c.connack.sessionPresent, false, `${what}: B's CONNACK sessionPresent=false (got ${c.connack.sessionPresent})`);
    await subscribe(c, "#", 1);
    const mark = `A|live-${X}`;
    await publish(pA, topic, mark, { qos: 1 });
    t.ok(await waitFor(() => holder.got.some((g) => g.text === mark), 1_500), `${what}: A's client still receives A's messages`);
    await flushed([holder, c]);
    t.notOk(holder.closed(), `${what}: A's client was not disconnected`);
    t.same(c.got.map((g) => `${g.topic} ${g.text}`), [], `${what}: B's client received 0 messages`);
    await end(c);
    await flushed([holder]);
    t.notOk(holder.closed(), `${what}: A's client is still connected after B's went`);
    if (!holder.closed()) await end(holder);
  }));
  await end(pA);
  // and the other way round: A cannot kick B's client either
  const Y = uniq("live-y");
  const bHolder = await connect(B, "user", "ws", { clientId: Y });
  const aSame = await connect(A, "device", "tcp", { clientId: Y });
  await flushed([bHolder]);
  t.notOk(bHolder.closed(), "B's client is not disconnected by A's client with the same id");
  for (const c of [bHolder, aSame]) if (!c.closed()) await end(c);
});

// ---- client id reuse, persistent sessions -----------------------------------------------------

t.test("persistent sessions: B with a disconnected A client's id gets no session and no queued message; A gets all of them back", async (t) => {
  const cases = identities().flatMap(([k, tr]) => [false, true].map((clean) => ({ k, tr, clean })));
  const aKinds: Kind[] = ["developer", "user", "device"];
  // one after the other: A's session subscribes alerts/#, which would catch a concurrent case's messages
  for (const [i, { k, tr, clean }] of cases.entries()) {
    const X = uniq(`sess-${i}-`);
    const what = `B ${k}/${tr} clean=${clean} as ${X}`;
    const aKind = aKinds[i % aKinds.length]!, aTr: Transport = i % 2 ? "ws" : "tcp";
    // A's client X subscribes alerts/# at QoS 1 in a persistent session, then goes away
    const a1 = await connect(A, aKind, aTr, { clientId: X, clean: false });
    t.equal(a1.connack.sessionPresent, false, `${what}: A's session is new (sessionPresent ${a1.connack.sessionPresent})`);
    t.same(await subscribe(a1, "alerts/#", 1), [1], `${what}: A subscribes alerts/#`);
    await end(a1);
    // A publishes 3 QoS 1 messages while X is offline
    const topic = `alerts/s/${i}`;
    const pA = await connect(A, "developer", "tcp");
    for (const m of [1, 2, 3]) await publish(pA, topic, `A|${X}|m${m}`, { qos: 1 });
    t.ok(await routed(A, topic, 3), `${what}: the broker routed A's 3 messages`);

    // B connects with its own token and key and the client id X
    const b = await connect(B, k, tr, { clientId: X, clean });
    t.equal(b.connack.sessionPresent, false, `${what}: CONNACK sessionPresent=false (got ${b.connack.sessionPresent})`);
    // a live A publish while B holds the id
    await publish(pA, topic, `A|${X}|m4`, { qos: 1 });
    t.ok(await routed(A, topic, 4), `${what}: A's 4th message routed`);
    await flushed([b]);
    t.same(b.got.map((g) => `${g.topic} ${g.text}`), [], `${what}: B received 0 messages`);
    await end(b);

    // A comes back: its session, with all of its messages in order
    const a2 = await connect(A, aKind, aTr, { clientId: X, clean: false });
    t.equal(a2.connack.sessionPresent, true, `${what}: A's session is still there (sessionPresent ${a2.connack.sessionPresent})`);
    await waitFor(() => a2.got.length >= 4, 2_000);
    await flushed([a2]);
    t.same(a2.got.map((g) => g.text), [1, 2, 3, 4].map((m) => `A|${X}|m${m}`), `${what}: A gets m1..m4, in order, once`);
    t.ok(a2.got.every((g) => g.topic === topic), `${what}: on A's own topic (${show(a2.got)})`);
    await end(a2);
    // drop A's session
    await end(await connect(A, aKind, aTr, { clientId: X, clean: true }));
    await end(pA);
  }
});

// ---- the whole ledger -------------------------------------------------------------------------

t.test("ledger: no client of either system received a byte of the other system", async (t) => {
  for (const side of [A, B]) {
    const mine = ledger.filter((c) => c.side === side.name);
    const leaked = mine.filter((c) => foreign(c).length > 0);
    const count = leaked.reduce((n, c) => n + foreign(c).length, 0);
    t.equal(count, 0, `${mine.length} clients of ${side.name} received ${count} messages of ${other(side).name}` +
      (leaked.length ? `: ${leaked.slice(0, 8).map((c) => `${c.label}: ${show(foreign(c))}`).join(" | ")}` : ""));
    const keyed = mine.filter((c) => c.got.some((g) => g.topic.startsWith(`${other(side).key}/`) && !g.text.startsWith(`${side.name}|`)));
    t.same(keyed.map((c) => c.label), [], `no ${side.name} client saw a topic carrying ${other(side).name}'s key prefix`);
  }
});
