// LibsqlPersistence on a full disk: the database refuses every write (SQLITE_FULL, as libSQL
// reports it) while reads go on. Retained messages, queued packets and inbound QoS 2 packets are
// held in memory and served from there, nothing throws at aedes (which would disconnect the
// client), and what is held is written once the database takes writes again.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import type { Readable } from "node:stream";
import { LibsqlPersistence, type MqttPacket } from "../../../src/broker/persistence.ts";
import type { Logger } from "../../../src/core/log.ts";
import { type Db, type Executor, openDb } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS } from "../../../src/store/migrations.ts";

let full = false;
const writes = /^\s*(INSERT|UPDATE|DELETE)\b/i;
const refuse = (sql: string) => {
  if (full && writes.test(sql)) throw Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
};
/** The executor, refusing writes while `full`. */
function fullable<E extends Executor>(ex: E): E {
  return new Proxy(ex, {
    get(target, k) {
      const v = Reflect.get(target, k) as (...a: unknown[]) => unknown;
      if (k === "run" || k === "get" || k === "all") return async (sql: string, args?: unknown[]) => { refuse(sql); return v.call(target, sql, args); };
      if (k === "batch") return async (stmts: { sql: string }[]) => { for (const s of stmts) refuse(s.sql); return v.call(target, stmts); };
      if (k === "tx") return (fn: (tx: Executor) => Promise<unknown>) => v.call(target, (tx: Executor) => fn(fullable(tx)));
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

const logged: string[] = [];
const log = { debug() {}, info: (m: string) => logged.push(m), warn: (m: string) => logged.push(m), error: (m: string) => logged.push(m) } as unknown as Logger;
let db: Db, real: Db, p: LibsqlPersistence;
beforeEach(async () => {
  full = false;
  real = await openDb({ url: ":memory:" });
  await migrate(real, MIGRATIONS);
  db = fullable(real);
  p = new LibsqlPersistence({ db, offlineQueueLimit: 3, log });
  await p.setup({ id: "b1" });
});
afterAll(() => { full = false; });

const list = async (s: Readable) => (await s.toArray()) as MqttPacket[];
const texts = async (s: Readable) => (await list(s)).map((x) => `${x.topic}=${String(x.payload)}`);
const publish = (topic: string, payload: string, extra: Partial<MqttPacket> = {}): MqttPacket =>
  ({ cmd: "publish", topic, payload: Buffer.from(payload), qos: 1, retain: false, dup: false, ...extra });
const stored = async (sql: string) => (await real.all<Record<string, unknown>>(sql)).length;
/** Until `cond` holds (what is held is written on a timer). */
async function until(cond: () => Promise<boolean>, ms = 5_000) {
  for (const end = Date.now() + ms; Date.now() < end;) { if (await cond()) return true; await Bun.sleep(50); }
  return false;
}

describe("a full disk", () => {
  test("retained messages are held, served over the stored ones, and written once it takes writes", async () => {
    await p.storeRetained(publish("sk/a", "old", { retain: true }));
    await p.storeRetained(publish("sk/b", "kept", { retain: true }));
    await p.storeRetained(publish("sk/gone", "x", { retain: true }));
    full = true;
    await p.storeRetained(publish("sk/a", "new", { retain: true }));
    await p.storeRetained(publish("sk/c", "added", { retain: true }));
    await p.storeRetained(publish("sk/gone", "", { retain: true })); // an empty payload deletes
    await p.storeRetained(publish("$SYS/x", "sys", { retain: true }));
    expect(logged.some((m) => /disk under the database is full/.test(m))).toBe(true);
    expect(await texts(p.createRetainedStream("sk/#"))).toEqual(["sk/b=kept", "sk/a=new", "sk/c=added"]);
    expect(await texts(p.createRetainedStream("sk/a"))).toEqual(["sk/a=new"]);
    expect(await texts(p.createRetainedStream("sk/gone"))).toEqual([]);
    expect(await texts(p.createRetainedStreamCombi(["sk/a", "sk/+"]))).toEqual(["sk/a=new", "sk/b=kept", "sk/c=added"]);
    expect(await texts(p.createRetainedStream("#"))).toEqual(["sk/b=kept", "sk/a=new", "sk/c=added"]); // not $SYS
    // a later message of a held topic is held after it (a direct write would lose to the older held one)
    full = false;
    await p.storeRetained(publish("sk/a", "newer", { retain: true }));
    expect(await until(async () => (await stored(`SELECT * FROM mqtt_retained`)) === 4)).toBe(true);
    await Bun.sleep(50);
    expect(await texts(p.createRetainedStream("sk/#"))).toEqual(["sk/a=newer", "sk/b=kept", "sk/c=added"]);
    expect(logged.some((m) => /held for a full disk are written/.test(m))).toBe(true);
  });

  test("queued packets are held after the stored ones, updated, acknowledged, sent at the next session and written later", async () => {
    const a = { id: "a" }, b = { id: "b" };
    await p.outgoingEnqueueCombi([{ clientId: "a" }], publish("sk/t", "m1", { brokerId: "b1", brokerCounter: 1 }));
    full = true;
    await p.outgoingEnqueueCombi([{ clientId: "a" }, { clientId: "b" }], publish("sk/t", "m2", { brokerId: "b1", brokerCounter: 2 }));
    await p.outgoingEnqueueCombi([{ clientId: "a" }], publish("sk/t", "m3", { brokerId: "b1", brokerCounter: 3 }));
    expect((await list(p.outgoingStream(a))).map((x) => String(x.payload))).toEqual(["m1", "m2", "m3"]);
    // sent: its messageId recorded (the held one), then acknowledged
    await p.outgoingUpdate(b, { ...publish("sk/t", "m2", { brokerId: "b1", brokerCounter: 2 }), messageId: 7 });
    expect((await list(p.outgoingStream(b))).map((x) => x.messageId)).toEqual([7]);
    expect(String((await p.outgoingClearMessageId(b, { cmd: "puback", messageId: 7 } as MqttPacket))?.payload)).toBe("m2");
    expect(await list(p.outgoingStream(b))).toEqual([]);
    // a stored packet's update and acknowledgement cannot be written: neither throws (it is sent again later)
    await p.outgoingUpdate(a, { ...publish("sk/t", "m1", { brokerId: "b1", brokerCounter: 1 }), messageId: 1 });
    expect(await p.outgoingClearMessageId(a, { cmd: "puback", messageId: 1 } as MqttPacket)).toBeUndefined();
    // past the queue limit (3) the oldest held goes
    for (let i = 4; i <= 6; i++) await p.outgoingEnqueueCombi([{ clientId: "a" }], publish("sk/t", `m${i}`, { brokerId: "b1", brokerCounter: i }));
    expect((await list(p.outgoingStream(a))).map((x) => String(x.payload))).toEqual(["m1", "m4", "m5", "m6"]);
    full = false;
    expect(await until(async () => (await stored(`SELECT * FROM mqtt_outgoing WHERE client_id = 'a'`)) === 4)).toBe(true);
    // the next packet queued brings the queue back to its limit
    await p.outgoingEnqueueCombi([{ clientId: "a" }], publish("sk/t", "m7", { brokerId: "b1", brokerCounter: 7 }));
    expect((await list(p.outgoingStream(a))).map((x) => String(x.payload))).toEqual(["m5", "m6", "m7"]);
  });

  test("an inbound QoS 2 packet is kept until its PUBREL", async () => {
    const c = { id: "c" };
    full = true;
    await p.incomingStorePacket(c, publish("sk/up", "q2", { qos: 2, messageId: 9 }));
    expect(String((await p.incomingGetPacket(c, { cmd: "pubrel", messageId: 9 } as MqttPacket)).payload)).toBe("q2");
    await p.incomingDelPacket(c, { cmd: "pubrel", messageId: 9 } as MqttPacket);
    await expect(p.incomingGetPacket(c, { cmd: "pubrel", messageId: 9 } as MqttPacket)).rejects.toThrow("no such packet");
  });

  test("other failures still throw", async () => {
    await real.run(`DROP TABLE mqtt_retained`);
    await expect(p.storeRetained(publish("sk/a", "x", { retain: true }))).rejects.toThrow(/no such table/);
  });
});
