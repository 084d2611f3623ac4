// LibsqlPersistence beyond the conformance suite (persistence.test.ts): state surviving a restart,
// the bounded offline queue (one copy per client), retained lookups confined to one topic prefix,
// the packet codec, aedes itself delivering a persistent session's queue after a broker restart,
// and PUBACKs that need no statement.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { Aedes } from "aedes";
import mqtt from "mqtt";
import { LibsqlPersistence, type MqttPacket } from "../../../src/broker/persistence.ts";
import { openDb, type Db, type Row } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS } from "../../../src/store/migrations.ts";
import { decodePacket, encodePacket } from "../../../src/store/mqtt.ts";

const root = mkdtempSync(join(tmpdir(), "outpost-mqtt-persistence-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let seq = 0;
const newFile = () => `file:${join(root, `p${seq++}`, "mqtt.db")}`;

async function open(url: string): Promise<Db> {
  const db = await openDb({ url });
  await migrate(db, MIGRATIONS);
  return db;
}
async function start(db: Db, brokerId: string, offlineQueueLimit?: number) {
  const p = new LibsqlPersistence({ db, offlineQueueLimit });
  await p.setup({ id: brokerId });
  return p;
}
const list = async (s: Readable) => (await s.toArray()) as MqttPacket[];
const text = (p: MqttPacket | undefined) => String(p?.payload);
const publish = (topic: string, payload: string | Buffer, extra: Partial<MqttPacket> = {}): MqttPacket =>
  ({ cmd: "publish", topic, payload: typeof payload === "string" ? Buffer.from(payload) : payload, qos: 1, retain: false, dup: false, ...extra });

describe("restart", () => {
  test("retained, subscriptions, queued outgoing, incoming QoS 2 and wills survive", async () => {
    const url = newFile();
    let db = await open(url);
    let p = await start(db, "broker-1");
    const client = { id: "dev-1" };
    const properties = { correlationData: Buffer.from([0, 1, 2, 255]), userProperties: { a: "1", b: ["x", "y"] }, contentType: "text/plain" };

    const retained = publish("sk/a/temp", "21.5", { qos: 1, retain: true, properties, brokerId: "broker-1", brokerCounter: 7 });
    await p.storeRetained(retained);
    const subs = [
      { topic: "sk/a/+", qos: 1, rh: 0, rap: true, nl: false, subscriptionIdentifier: 9 },
      { topic: "sk/b", qos: 0, rh: 0, rap: false, nl: false },
      { topic: "sk/#", qos: 2 },
    ];
    await p.addSubscriptions(client, subs);
    for (let i = 1; i <= 3; i++) await p.outgoingEnqueue({ clientId: client.id }, publish("sk/a/temp", `m${i}`, { brokerId: "broker-1", brokerCounter: i, properties }));
    await p.outgoingUpdate(client, { ...publish("sk/a/temp", "m1", { brokerId: "broker-1", brokerCounter: 1 }), messageId: 11 }); // m1 in flight
    await p.outgoingUpdate(client, { ...publish("sk/a/temp", "m2", { brokerId: "broker-1", brokerCounter: 2 }), messageId: 12 });
    await p.outgoingUpdate(client, { cmd: "pubrel", messageId: 12 }); // m2 got its PUBREC
    const incoming = publish("sk/up", "q2", { qos: 2, messageId: 5 });
    await p.incomingStorePacket(client, incoming);
    await p.putWill(client, { topic: "sk/dev-1/died", payload: Buffer.from("bye"), qos: 1, retain: false });
    const before = {
      retained: await list(p.createRetainedStream("sk/#")),
      subs: await p.subscriptionsByClient(client),
      byTopic: await p.subscriptionsByTopic("sk/a/temp"),
      count: await p.countOffline(),
      outgoing: await list(p.outgoingStream(client)),
      incoming: await p.incomingGetPacket(client, { messageId: 5 }),
      will: await p.getWill(client),
    };
    await p.destroy();
    await db.close();

    db = await open(url);
    p = await start(db, "broker-2");
    expect(await list(p.createRetainedStream("sk/#"))).toEqual(before.retained);
    expect(before.retained).toEqual([retained]);
    expect(await p.subscriptionsByClient(client)).toEqual(subs);
    expect(await p.subscriptionsByTopic("sk/a/temp")).toEqual(before.byTopic);
    expect(before.byTopic.map((s) => s.topic).sort()).toEqual(["sk/#", "sk/a/+"]);
    expect(await p.countOffline()).toEqual({ subsCount: 2, clientsCount: 1 });
    expect(before.count).toEqual({ subsCount: 2, clientsCount: 1 });

    const outgoing = await list(p.outgoingStream(client));
    expect(outgoing).toEqual(before.outgoing);
    expect(outgoing.map((o) => [o.cmd, o.messageId, o.payload === undefined ? null : text(o)])).toEqual([
      ["publish", 11, "m1"], ["pubrel", 12, null], ["publish", undefined, "m3"],
    ]);
    expect(outgoing[2]!.properties).toEqual(properties);
    // The restored queue keeps working: acks clear by messageId, m3 gets sent.
    expect(text(await p.outgoingClearMessageId(client, { cmd: "puback", messageId: 11 }))).toBe("m1");
    await p.outgoingUpdate(client, { ...outgoing[2]!, messageId: 13 });
    expect((await list(p.outgoingStream(client))).map((o) => o.messageId)).toEqual([12, 13]);

    const restored = await p.incomingGetPacket(client, { messageId: 5 });
    expect(restored).toEqual(before.incoming);
    expect([restored.topic, text(restored), restored.qos, restored.messageId]).toEqual(["sk/up", "q2", 2, 5]);

    const will = await p.getWill(client);
    expect(will).toEqual(before.will!);
    expect(will).toMatchObject({ topic: "sk/dev-1/died", clientId: "dev-1", brokerId: "broker-1" });
    // broker-1 is gone: its wills are due; the live broker's are not.
    expect(await list(p.streamWill({ "broker-2": Date.now() }))).toEqual([will!]);
    expect(await list(p.streamWill({ "broker-1": Date.now() }))).toEqual([]);
    await p.destroy();
    await db.close();
  });

  test("a will is deleted for its broker only", async () => {
    const db = await open(":memory:");
    const p = await start(db, "broker-1");
    await p.putWill({ id: "c" }, { topic: "w", payload: Buffer.from("x") });
    expect(await p.delWill({ id: "c", brokerId: "broker-0" })).toBeUndefined();
    expect(text(await p.delWill({ id: "c", brokerId: "broker-1" }))).toBe("x");
    await p.putWill({ id: "c" }, { topic: "w", payload: Buffer.from("y") });
    expect(text(await p.delWill({ id: "c" }))).toBe("y");
    expect(await p.getWill({ id: "c" })).toBeUndefined();
    await p.destroy();
    await db.close();
  });
});

describe("acknowledgements", () => {
  test("a PUBACK asks the database only for a client with packets queued there (always when the database is shared)", async () => {
    const db = await open(":memory:");
    let statements = 0;
    const counted = new Proxy(db, {
      get: (target, k) => {
        const v = Reflect.get(target, k);
        return typeof v === "function" && ["get", "all", "run", "batch"].includes(k as string) ? (...a: unknown[]) => { statements++; return v.apply(target, a); } : v;
      },
    });
    const p = await start(counted, "b");
    const ask = async (id: string, messageId: number) => { const before = statements; const r = await p.outgoingClearMessageId({ id }, { cmd: "puback", messageId }); return [text(r), statements - before] as const; };
    expect(await ask("live", 3)).toEqual(["undefined", 0]); // a live delivery's PUBACK
    await p.outgoingEnqueue({ clientId: "q" }, publish("t", "m1", { brokerId: "b", brokerCounter: 1 }));
    await p.outgoingUpdate({ id: "q" }, { ...publish("t", "m1", { brokerId: "b", brokerCounter: 1 }), messageId: 4 });
    expect(await ask("q", 4)).toEqual(["m1", 1]);
    expect(await ask("q", 5)).toEqual(["undefined", 0]); // its queue is empty again
    await p.destroy();
    const shared = new LibsqlPersistence({ db: counted, shared: true });
    await shared.setup({ id: "b2" });
    const before = statements;
    expect(await shared.outgoingClearMessageId({ id: "live" }, { cmd: "puback", messageId: 3 })).toBeUndefined();
    expect(statements - before).toBe(1); // another node may have queued it
    await shared.destroy();
    await db.close();
  });
});

describe("offline queue bound", () => {
  const payloads = (ps: MqttPacket[]) => ps.map(text);
  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `m${from + i}`);

  test("keeps exactly the newest `limit` packets, in order", async () => {
    const db = await open(":memory:");
    const p = await start(db, "b", 5);
    for (let i = 1; i <= 12; i++) await p.outgoingEnqueue({ clientId: "slow" }, publish("t", `m${i}`, { brokerId: "b", brokerCounter: i }));
    await p.outgoingEnqueue({ clientId: "other" }, publish("t", "o1", { brokerId: "b", brokerCounter: 100 }));
    expect(payloads(await list(p.outgoingStream({ id: "slow" })))).toEqual(range(8, 12));
    expect(payloads(await list(p.outgoingStream({ id: "other" })))).toEqual(["o1"]);

    // Several subscriptions of one client in one publish: one copy ([MQTT-3.3.5-1]); clients at and
    // under the bound.
    await p.outgoingEnqueueCombi([{ clientId: "slow" }, { clientId: "other" }, { clientId: "slow" }], publish("t", "m13", { brokerId: "b", brokerCounter: 13 }));
    expect(payloads(await list(p.outgoingStream({ id: "slow" })))).toEqual(["m9", "m10", "m11", "m12", "m13"]);
    expect(payloads(await list(p.outgoingStream({ id: "other" })))).toEqual(["o1", "m13"]);
    await p.destroy();
    await db.close();
  });

  test("concurrent enqueues and acks keep the bound", async () => {
    const db = await open(":memory:");
    const p = await start(db, "b", 10);
    await Promise.all(Array.from({ length: 50 }, (_, i) =>
      p.outgoingEnqueue({ clientId: "c" }, publish("t", `m${i + 1}`, { brokerId: "b", brokerCounter: i + 1 }))));
    expect(payloads(await list(p.outgoingStream({ id: "c" })))).toEqual(range(41, 50));
    // Acked packets free their places.
    const queued = await list(p.outgoingStream({ id: "c" }));
    await Promise.all(queued.slice(0, 3).map((q, i) => p.outgoingUpdate({ id: "c" }, { ...q, messageId: i + 1 })));
    await Promise.all([1, 2, 3].map((messageId) => p.outgoingClearMessageId({ id: "c" }, { cmd: "puback", messageId })));
    for (let i = 51; i <= 53; i++) await p.outgoingEnqueue({ clientId: "c" }, publish("t", `m${i}`, { brokerId: "b", brokerCounter: i }));
    expect(payloads(await list(p.outgoingStream({ id: "c" })))).toEqual(range(44, 53));
    await p.destroy();
    await db.close();
  });

  test("queue lengths are reloaded after a restart", async () => {
    const url = newFile();
    let db = await open(url);
    let p = await start(db, "b1", 3);
    for (let i = 1; i <= 3; i++) await p.outgoingEnqueue({ clientId: "c" }, publish("t", `m${i}`, { brokerId: "b1", brokerCounter: i }));
    await p.destroy();
    await db.close();
    db = await open(url);
    p = await start(db, "b2", 3);
    await p.outgoingEnqueue({ clientId: "c" }, publish("t", "m4", { brokerId: "b2", brokerCounter: 1 }));
    expect(payloads(await list(p.outgoingStream({ id: "c" })))).toEqual(["m2", "m3", "m4"]);
    await p.destroy();
    await db.close();
  });

  test("rejects a limit that is not a positive integer", () => {
    expect(() => new LibsqlPersistence({ db: {} as Db, offlineQueueLimit: 0 })).toThrow(RangeError);
    expect(() => new LibsqlPersistence({ db: {} as Db, offlineQueueLimit: 1.5 })).toThrow(RangeError);
    expect(new LibsqlPersistence({ db: {} as Db }).offlineQueueLimit).toBe(1000);
  });
});

describe("retained messages by topic prefix", () => {
  /** The database, recording the topic of every row any query returns. */
  function recording(db: Db) {
    const seen: string[] = [];
    const note = (r: Row | undefined) => { if (r && typeof r.topic === "string") seen.push(r.topic); };
    const wrapped: Db = Object.assign(Object.create(db) as Db, {
      all: async <T>(sql: string, args?: readonly unknown[]) => { const rows = await db.all<Row>(sql, args); rows.forEach(note); return rows as T[]; },
      get: async <T>(sql: string, args?: readonly unknown[]) => { const r = await db.get<Row>(sql, args); note(r); return r as T | undefined; },
    });
    return { db: wrapped, seen };
  }
  const TOPICS = ["sysA/a/x", "sysA/a/y", "sysA/a/y/z", "sysA/a", "sysA/b", "sysA0/a/x", "sysA-x/a/x", "sysA.b", "sysB/a/x", "sysB/a/y", "$SYS/x"];

  test("a pattern reads only the rows below its literal prefix", async () => {
    const base = await open(":memory:");
    const { db, seen } = recording(base);
    const p = await start(db, "b");
    for (const t of TOPICS) await p.storeRetained(publish(t, t, { retain: true }));
    const topics = async (patterns: string[]) => {
      seen.length = 0;
      const got = (await list(p.createRetainedStreamCombi(patterns))).map((r) => r.topic);
      return { got, read: [...seen] };
    };

    let r = await topics(["sysA/a/+"]);
    expect(r.got).toEqual(["sysA/a/x", "sysA/a/y"]);
    expect(r.read.every((t) => t.startsWith("sysA/a/"))).toBe(true);

    r = await topics(["sysA/#"]);
    expect(r.got).toEqual(["sysA/a", "sysA/a/x", "sysA/a/y", "sysA/a/y/z", "sysA/b"]);
    expect(r.read.every((t) => t === "sysA" || t.startsWith("sysA/"))).toBe(true);

    r = await topics(["sysB/+/y"]);
    expect(r.got).toEqual(["sysB/a/y"]);
    expect(r.read.every((t) => t.startsWith("sysB/"))).toBe(true);

    r = await topics(["sysA/a/x"]);
    expect(r).toEqual({ got: ["sysA/a/x"], read: ["sysA/a/x"] });

    r = await topics(["sysA/a/#"]); // "#" includes the parent level
    expect(r.got).toEqual(["sysA/a", "sysA/a/x", "sysA/a/y", "sysA/a/y/z"]);

    // Overlapping patterns: each message once.
    r = await topics(["sysA/a/+", "sysA/a/#", "sysB/a/x"]);
    expect(r.got).toEqual(["sysA/a/x", "sysA/a/y", "sysA/a", "sysA/a/y/z", "sysB/a/x"]);

    // Leading wildcards read everything, but never match "$" topics [MQTT-4.7.2-1].
    r = await topics(["+/a/x"]);
    expect(r.got).toEqual(["sysA/a/x", "sysA-x/a/x", "sysA0/a/x", "sysB/a/x"].sort());
    expect((await topics(["#"])).got).not.toContain("$SYS/x");
    expect((await topics(["$SYS/#"])).got).toEqual(["$SYS/x"]);
    await p.destroy();
    await base.close();
  });

  test("pages through large ranges", async () => {
    const db = await open(":memory:");
    const p = await start(db, "b");
    const n = 700;
    for (let i = 0; i < n; i++) await p.storeRetained(publish(`s/${String(i).padStart(4, "0")}`, `v${i}`, { retain: true }));
    await p.storeRetained(publish("t/0", "other", { retain: true }));
    const got = await list(p.createRetainedStream("s/+"));
    expect(got.length).toBe(n);
    expect(got.map(text)).toEqual(Array.from({ length: n }, (_, i) => `v${i}`));
    await p.storeRetained(publish("s/0001", "", { retain: true })); // an empty payload deletes
    expect((await list(p.createRetainedStream("s/#"))).length).toBe(n - 1);
    await p.destroy();
    await db.close();
  });
});

describe("packet codec", () => {
  test("round-trips every field exactly", () => {
    const packet = {
      cmd: "publish", brokerId: "b", brokerCounter: 3, topic: "t", payload: Buffer.from([0, 1, 2]), qos: 1, retain: false, dup: false,
      messageId: undefined, messageExpiry: 1700000000000,
      properties: {
        correlationData: new Uint8Array([9, 8]), responseTopic: "r", payloadFormatIndicator: true,
        userProperties: { "\u0000b": "looks like a marker", "\u0000\u0000x": ["1", "2"], plain: "p" },
        subscriptionIdentifier: [1, 2],
      },
      nested: [undefined, null, { deep: Buffer.from("d") }],
    };
    const row = encodePacket(packet);
    expect(row.payload).toBe(packet.payload);
    expect(row.packet).not.toContain(`"payload"`);
    const back = decodePacket(row);
    expect(back).toEqual({ ...packet, properties: { ...packet.properties, correlationData: Buffer.from([9, 8]) } });
    expect(Object.keys(back)).toContain("messageId");
    expect(Buffer.isBuffer(back.payload)).toBe(true);
    expect(Buffer.isBuffer((back.properties as { correlationData: unknown }).correlationData)).toBe(true);
    expect((back.properties as { userProperties: object }).userProperties).toEqual(packet.properties.userProperties);
  });

  test("keeps string, empty and absent payloads apart", () => {
    expect(decodePacket(encodePacket({ topic: "t", payload: "text" })).payload).toBe("text");
    expect(decodePacket(encodePacket({ topic: "t", payload: Buffer.alloc(0) })).payload).toEqual(Buffer.alloc(0));
    expect(decodePacket(encodePacket({ cmd: "pubrel", messageId: 1 }))).toEqual({ cmd: "pubrel", messageId: 1 });
    expect(Object.keys(decodePacket(encodePacket({ cmd: "pubrel", messageId: 1 })))).toEqual(["cmd", "messageId"]);
  });
});

describe("with aedes", () => {
  async function listen(db: Db) {
    const persistence = new LibsqlPersistence({ db });
    const broker = await Aedes.createBroker({ persistence });
    const server = net.createServer(broker.handle);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `mqtt://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const stop = async () => {
      await new Promise<void>((r) => broker.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
      await persistence.destroy();
    };
    return { url, stop };
  }
  const connect = (url: string, clientId: string, clean: boolean) =>
    mqtt.connectAsync(url, { clientId, clean, reconnectPeriod: 0, protocolVersion: 4 });

  test("a persistent session gets its queued messages and retained messages after a broker restart", async () => {
    const file = newFile();
    let db = await open(file);
    let b = await listen(db);
    let sub = await connect(b.url, "sub-1", false);
    await sub.subscribeAsync("sk/t/#", { qos: 1 });
    await sub.endAsync();
    const pub = await connect(b.url, "pub-1", true);
    for (let i = 1; i <= 3; i++) await pub.publishAsync("sk/t/x", `m${i}`, { qos: 1 });
    await pub.publishAsync("sk/t/r", "kept", { qos: 1, retain: true });
    await pub.endAsync();
    await b.stop();
    await db.close();

    db = await open(file);
    b = await listen(db);
    const got: string[] = [];
    const all = new Promise<void>((resolve) => {
      const onMessage = (topic: string, payload: Buffer) => { got.push(`${topic} ${payload}`); if (got.length === 4) resolve(); };
      sub = mqtt.connect(b.url, { clientId: "sub-1", clean: false, reconnectPeriod: 0, protocolVersion: 4 });
      sub.on("message", onMessage);
    });
    await Promise.race([all, new Promise((_, rej) => setTimeout(() => rej(new Error(`timed out with ${JSON.stringify(got)}`)), 5000))]);
    expect(got).toEqual(["sk/t/x m1", "sk/t/x m2", "sk/t/x m3", "sk/t/r kept"]);
    await sub.endAsync();

    // Acknowledged: nothing left queued for the session.
    const again = await connect(b.url, "sub-1", false);
    const late: string[] = [];
    again.on("message", (t, m) => late.push(`${t} ${m}`));
    await new Promise((r) => setTimeout(r, 200));
    expect(late).toEqual([]);
    // The retained message came through the restart too.
    const fresh = await connect(b.url, "fresh", true);
    const retained = new Promise<string>((r) => fresh.on("message", (t, m) => r(`${t} ${m}`)));
    await fresh.subscribeAsync("sk/t/r", { qos: 0 });
    expect(await retained).toBe("sk/t/r kept");
    await again.endAsync();
    await fresh.endAsync();
    await b.stop();
    await db.close();
  });
});
