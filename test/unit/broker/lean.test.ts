// The shared keepalive wheel and listeners of src/broker/lean.ts, with real aedes clients over
// real sockets (TcpConnection, as the broker runs them): a client silent past 1.5 times its
// keepalive is closed, one that talks is not, keepalive 0 never expires, and a client that goes
// leaves the wheel.
import { afterAll, describe, expect, test } from "bun:test";
import type { EventEmitter } from "node:events";
import net from "node:net";
import { Aedes, type Client } from "aedes";
import mqttPacket from "mqtt-packet";
import { KeepaliveWheel, leanListeners, listenerCounts } from "../../../src/broker/lean.ts";
import { fastPublishIn, withFrameParser } from "../../../src/broker/publish.ts";
import { listenTcp } from "../../../src/broker/tcp.ts";
import { waitFor } from "./wait.ts";

type Internals = { _keepaliveTimer: unknown; closed: boolean };
type WheelInternals = { entries: Set<{ client: Client }>; timer: unknown };

const broker = await Aedes.createBroker();
/** the clients the wheel closed, with when */
const expired: { id: string; at: number }[] = [];
// what the broker does with an expired client (src/broker/broker.ts)
const wheel = new KeepaliveWheel((client) => {
  expired.push({ id: client.id, at: Date.now() });
  broker.emit("keepaliveTimeout", client);
  (client as unknown as EventEmitter).emit("error", new Error("keep alive timeout"));
});
const inner = wheel as unknown as WheelInternals;
broker.on("clientReady", (client) => wheel.adopt(client));
const disconnected = new Map<string, number>();
broker.on("clientDisconnect", (client) => disconnected.set(client.id, Date.now()));
const listener = listenTcp("127.0.0.1", 0, (conn) => {
  const before = listenerCounts(conn);
  const client = withFrameParser(() => broker.handle(conn as unknown as net.Socket));
  leanListeners(client, before);
  fastPublishIn(client);
});
const sockets: net.Socket[] = [];
afterAll(async () => {
  for (const s of sockets) s.destroy();
  wheel.stop();
  listener.stop(true);
  await new Promise<void>((r) => broker.close(() => r()));
});

const clientOf = (id: string) => (broker as unknown as { clients: Record<string, Client> }).clients[id];
const inWheel = (id: string) => [...inner.entries].some((k) => k.client.id === id);

/** A device: CONNECT with `keepalive` seconds, resolved once aedes has it ready (adopted). */
async function device(clientId: string, keepalive: number) {
  const sock = net.connect(listener.port, "127.0.0.1");
  sockets.push(sock);
  const state = { closed: false, closedAt: 0, pingresps: 0, connackAt: 0 };
  const parser = mqttPacket.parser();
  parser.on("packet", (p) => { if (p.cmd === "pingresp") state.pingresps++; if (p.cmd === "connack") state.connackAt = Date.now(); });
  sock.on("data", (b: Buffer) => parser.parse(b));
  sock.on("close", () => { state.closed = true; state.closedAt = Date.now(); });
  sock.on("error", () => {});
  await new Promise((r) => sock.once("connect", r));
  const ready = new Promise<void>((r) => { const on = (c: Client) => { if (c.id === clientId) { broker.off("clientReady", on); r(); } }; broker.on("clientReady", on); });
  sock.write(mqttPacket.generate({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clientId, clean: true, keepalive } as mqttPacket.IConnectPacket));
  await ready;
  return { sock, state, ping: () => sock.write(mqttPacket.generate({ cmd: "pingreq" })) };
}

describe("KeepaliveWheel", () => {
  test("a silent client is closed between 1.5 times its keepalive and one turn later; one that talks and one with keepalive 0 stay", async () => {
    const unlimited = await device("ka-zero", 0);
    const talker = await device("ka-talker", 1);
    const talking = setInterval(() => talker.ping(), 400);
    try {
      const silent = await device("ka-silent", 1);
      const start = silent.state.connackAt;
      // aedes' own timer is gone: the wheel holds the keepalive
      expect(inWheel("ka-silent")).toBe(true);
      expect(inWheel("ka-talker")).toBe(true);
      expect(inWheel("ka-zero")).toBe(false);
      expect((clientOf("ka-silent") as unknown as Internals)._keepaliveTimer?.constructor.name).toBe("Keepalive");

      await waitFor(() => silent.state.closed, 6_000);
      const after = silent.state.closedAt - start;
      expect(after).toBeGreaterThanOrEqual(1_500);
      expect(after).toBeLessThan(1_500 + 1_000 + 500);
      expect(expired.map((e) => e.id)).toEqual(["ka-silent"]);
      expect(inWheel("ka-silent")).toBe(false);
      await waitFor(() => disconnected.has("ka-silent"));

      // both were connected before the silent one, so both would have expired by now
      expect(talker.state.pingresps).toBeGreaterThanOrEqual(3);
      expect(talker.state.closed).toBe(false);
      expect(unlimited.state.closed).toBe(false);
      expect(clientOf("ka-talker")).toBeDefined();
      expect(clientOf("ka-zero")).toBeDefined();
      expect(inWheel("ka-talker")).toBe(true);
    } finally {
      clearInterval(talking);
    }

    // the talker falls silent: now it expires too
    await waitFor(() => talker.state.closed, 6_000);
    expect(expired.map((e) => e.id)).toEqual(["ka-silent", "ka-talker"]);
    expect(unlimited.state.closed).toBe(false);
  }, 20_000);

  test("a client that disconnects leaves the wheel at its next turn, and an empty wheel stops its timer", async () => {
    const d = await device("ka-leaves", 60);
    expect(inWheel("ka-leaves")).toBe(true);
    expect(inner.timer).not.toBeNull();
    d.sock.end();
    await waitFor(() => disconnected.has("ka-leaves"));
    // aedes dropped the keepalive on close; the wheel notices at its next turn
    expect((clientOf("ka-leaves") as Internals | undefined)?._keepaliveTimer ?? null).toBeNull();
    await waitFor(() => !inWheel("ka-leaves"), 3_000);
    await waitFor(() => inner.timer === null, 3_000);
    expect(expired.map((e) => e.id)).not.toContain("ka-leaves");
  });

  test("adopt() twice keeps one entry; a client without a keepalive is not adopted", async () => {
    await device("ka-twice", 30);
    const client = clientOf("ka-twice")!;
    wheel.adopt(client);
    expect([...inner.entries].filter((k) => k.client === client)).toHaveLength(1);
    const zero = await device("ka-none", 0);
    wheel.adopt(clientOf("ka-none")!);
    expect(inWheel("ka-none")).toBe(false);
    zero.sock.end();
  });

  test("stop() drops every entry and the timer", async () => {
    const w = new KeepaliveWheel(() => { throw new Error("not expected"); });
    const d = await device("ka-stop", 1);
    // the broker's wheel holds it already; this one takes nothing from it
    w.adopt(clientOf("ka-stop")!);
    expect((w as unknown as WheelInternals).entries.size).toBe(0);
    w.stop();
    expect((w as unknown as WheelInternals).timer).toBeNull();
    d.sock.end();
  });
});

describe("leanListeners", () => {
  test("one shared listener each for 'end', 'error' and 'close', the same function on every connection", async () => {
    await device("lean-a", 0);
    await device("lean-b", 0);
    const a = (clientOf("lean-a") as unknown as { conn: EventEmitter }).conn;
    const b = (clientOf("lean-b") as unknown as { conn: EventEmitter }).conn;
    expect(listenerCounts(a)).toEqual([1, 1, 1]);
    for (const e of ["end", "error", "close"]) expect(a.listeners(e)[0]).toBe(b.listeners(e)[0]);
  });

  test("an 'error' on the connection is the client's: aedes reports it and the client is closed", async () => {
    const d = await device("lean-err", 0);
    const conn = (clientOf("lean-err") as unknown as { conn: EventEmitter }).conn;
    const reported = new Promise<string>((r) => broker.once("clientError", (c, err) => r(`${c.id}: ${err.message}`)));
    conn.emit("error", new Error("wire fault"));
    expect(await reported).toBe("lean-err: wire fault");
    await waitFor(() => disconnected.has("lean-err") && d.state.closed);
  });
});
