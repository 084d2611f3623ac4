// MQTT connections on Bun's own sockets (src/broker/tcp.ts), over real sockets on loopback: the
// stream surface aedes uses (read, write with backpressure and 'drain', end, destroy, 'end',
// 'error', 'close'), the pause of a connection whose bytes are not read, and aedes framing on it
// (packets split over reads, several in one read, oversized and malformed packets).
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import net from "node:net";
import { Aedes, type Client } from "aedes";
import mqttPacket from "mqtt-packet";
import type { TCPSocketListener } from "bun";
import { leanListeners, listenerCounts } from "../../../src/broker/lean.ts";
import { MAX_PACKET_BYTES, fastPublishIn, withFrameParser } from "../../../src/broker/publish.ts";
import { type TcpConnection, listenTcp } from "../../../src/broker/tcp.ts";
import { sleep, waitFor } from "./wait.ts";

/** A listener whose connections are kept in order of arrival. */
function server() {
  const conns: TcpConnection[] = [];
  const waiting: ((c: TcpConnection) => void)[] = [];
  const listener = listenTcp("127.0.0.1", 0, (c) => {
    const w = waiting.shift();
    if (w) w(c); else conns.push(c);
  });
  const next = () => new Promise<TcpConnection>((r) => { const c = conns.shift(); if (c) r(c); else waiting.push(r); });
  return { listener, next };
}

const listeners: TCPSocketListener<TcpConnection>[] = [];
const sockets: net.Socket[] = [];
afterEach(() => { for (const s of sockets.splice(0)) s.destroy(); });
afterAll(() => { for (const l of listeners) l.stop(true); });

/** A server and one connection to it: the client side (node:net) and the server's TcpConnection. */
async function pair() {
  const s = server();
  listeners.push(s.listener);
  const client = net.connect(s.listener.port, "127.0.0.1");
  sockets.push(client);
  const [conn] = await Promise.all([s.next(), new Promise((r) => client.once("connect", r))]);
  return { client, conn };
}

/** Bytes that show a mix-up or a loss: each position's byte depends on where it is. */
const pattern = (size: number, seed = 0) => { const b = Buffer.alloc(size); for (let i = 0; i < size; i++) b[i] = (i * 7 + seed + (i >> 12)) & 0xff; return b; };

/** Everything the client receives, and whether it ended. */
function collect(client: net.Socket) {
  const got = { chunks: [] as Buffer[], bytes: 0, ended: false, closed: false };
  client.on("data", (b: Buffer) => { got.chunks.push(b); got.bytes += b.length; });
  client.on("end", () => { got.ended = true; });
  client.on("close", () => { got.closed = true; });
  return got;
}

/** Records the connection's events, in order. */
function events(conn: TcpConnection) {
  const seen: string[] = [];
  for (const e of ["readable", "drain", "end", "error", "close"]) conn.on(e, (err?: unknown) => seen.push(e === "error" ? `error:${(err as Error).message}` : e));
  return seen;
}

describe("TcpConnection", () => {
  test("read() gives every byte received since the last read, in order, and null when there is none", async () => {
    const { client, conn } = await pair();
    let readable = 0;
    conn.on("readable", () => readable++);
    const sent = pattern(200_000);
    client.write(sent.subarray(0, 1));
    await waitFor(() => readable >= 1);
    client.write(sent.subarray(1, 70_000));
    client.write(sent.subarray(70_000));
    const got: Buffer[] = [];
    await waitFor(() => {
      for (let b = conn.read(); b; b = conn.read()) got.push(b);
      return Buffer.concat(got).length >= sent.length;
    });
    expect(Buffer.concat(got).equals(sent)).toBe(true);
    expect(conn.read()).toBeNull();
    expect(conn.remoteAddress).toBe("127.0.0.1");
  });

  test("a connection whose bytes are not read stops reading past 1 MB, and resumes once they are", async () => {
    const { client, conn } = await pair();
    const sent = pattern(32 * 1024 * 1024, 3);
    let lastEvent = 0;
    let most = 0;
    const held = () => (conn as unknown as { received: Buffer | null }).received?.length ?? 0;
    conn.on("readable", () => { lastEvent = Date.now(); most = Math.max(most, held()); });
    let clientDone = false;
    client.write(sent, () => { clientDone = true; });
    // the pause shows as 'readable' events that stop well short of everything sent
    await waitFor(() => lastEvent > 0 && Date.now() - lastEvent > 300, 20_000);
    expect(held()).toBeGreaterThan(1024 * 1024);
    expect(most).toBeLessThan(4 * 1024 * 1024);
    expect(clientDone).toBe(false);
    const got: Buffer[] = [];
    let n = 0;
    await waitFor(() => {
      for (let b = conn.read(); b; b = conn.read()) { got.push(b); n += b.length; }
      return n >= sent.length;
    }, 30_000);
    expect(Buffer.concat(got).equals(sent)).toBe(true);
    await waitFor(() => clientDone);
  });

  test("a write the socket cannot take whole returns false; later writes queue behind it; 'drain' once all left, callbacks in order", async () => {
    const { client, conn } = await pair();
    client.pause();
    const seen = events(conn);
    const big = pattern(64 * 1024 * 1024, 5);
    const done: string[] = [];
    expect(conn.write(Buffer.from("head"), () => done.push("head"))).toBe(true);
    expect(conn.write(big, () => done.push("big"))).toBe(false);
    expect(conn.writableNeedDrain).toBe(true);
    expect(conn.write("tail", () => done.push("tail"))).toBe(false);
    expect(conn.write(new Uint8Array([1, 2, 3]))).toBe(false);
    await sleep(0);
    // nothing past what the socket took is reported written while the peer reads nothing
    expect(done).toEqual(["head"]);
    expect(seen).not.toContain("drain");
    const got = collect(client);
    client.resume();
    await waitFor(() => got.bytes >= 4 + big.length + 4 + 3, 30_000);
    await waitFor(() => seen.includes("drain"));
    expect(done).toEqual(["head", "big", "tail"]);
    expect(seen.filter((e) => e === "drain")).toHaveLength(1);
    expect(conn.writableNeedDrain).toBe(false);
    expect(Buffer.concat(got.chunks).equals(Buffer.concat([Buffer.from("head"), big, Buffer.from("tail"), Buffer.from([1, 2, 3])]))).toBe(true);
    expect(conn.write("after")).toBe(true);
  });

  test("end() sends what is queued first, then the FIN; 'close' follows once; a write after end() fails its callback", async () => {
    const { client, conn } = await pair();
    client.pause();
    const seen = events(conn);
    const big = pattern(16 * 1024 * 1024, 9);
    conn.write(big);
    let closedCb = 0;
    conn.end(() => { closedCb++; });
    const err = await new Promise<Error | null | undefined>((r) => expect(conn.write("late", r)).toBe(false));
    expect(err?.message).toBe("write after end");
    const got = collect(client);
    client.resume();
    await waitFor(() => got.ended, 30_000);
    expect(Buffer.concat(got.chunks).equals(big)).toBe(true);
    client.end();
    await waitFor(() => seen.includes("close"));
    expect(closedCb).toBe(1);
    expect(seen.filter((e) => e === "close")).toHaveLength(1);
    // no 'drain' for a connection that takes no more writes (as a Node stream)
    expect(seen).not.toContain("drain");
    expect(conn.destroyed).toBe(true);
  });

  test("the peer's FIN: 'end', this side ends too, then 'close' once", async () => {
    const { client, conn } = await pair();
    const seen = events(conn);
    const got = collect(client);
    client.end();
    await waitFor(() => seen.includes("close") && got.closed);
    expect(seen).toEqual(["end", "close"]);
    expect(got.ended).toBe(true);
  });

  test("destroy(err): 'error' with err, then 'close'; queued writes fail their callbacks; the peer sees the end", async () => {
    const { client, conn } = await pair();
    client.pause();
    const seen = events(conn);
    conn.write(pattern(64 * 1024 * 1024));
    const queued = new Promise<Error | null | undefined>((r) => conn.write("queued", r));
    const got = collect(client);
    conn.destroy(new Error("boom"));
    expect(conn.destroyed).toBe(true);
    expect(conn.read()).toBeNull();
    expect((await queued)?.message).toBe("connection closed");
    await waitFor(() => seen.includes("close"));
    expect(seen).toEqual(["error:boom", "close"]);
    client.resume();
    await waitFor(() => got.closed, 30_000);
    conn.destroy(new Error("again"));
    await sleep(0);
    expect(seen).toEqual(["error:boom", "close"]);
  });

  test("destroy() without an error: 'close' only", async () => {
    const { client, conn } = await pair();
    const seen = events(conn);
    const got = collect(client);
    conn.destroy();
    await waitFor(() => seen.includes("close") && got.closed);
    expect(seen).toEqual(["close"]);
  });

  test("the peer resets the connection: 'close' once, and the connection is destroyed", async () => {
    const { client, conn } = await pair();
    const seen = events(conn);
    client.resetAndDestroy();
    await waitFor(() => seen.includes("close"));
    expect(seen.filter((e) => e === "close")).toHaveLength(1);
    expect(seen.filter((e) => e !== "close" && !e.startsWith("error:") && e !== "end")).toEqual([]);
    expect(conn.destroyed).toBe(true);
    expect(conn.write("x")).toBe(false);
  });
});

// ---- aedes on TcpConnection, as the broker runs it (src/broker/broker.ts accept) ----------------

describe("aedes framing on TcpConnection", () => {
  let broker: Aedes;
  let listener: TCPSocketListener<TcpConnection>;
  const clients: Client[] = [];

  const gen = (p: Record<string, unknown>) => mqttPacket.generate(p as unknown as mqttPacket.Packet);
  const connect = (clientId: string) => gen({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clientId, clean: true, keepalive: 0 });

  async function start() {
    broker ??= await Aedes.createBroker();
    listener ??= listenTcp("127.0.0.1", 0, (conn) => {
      const before = listenerCounts(conn);
      const client = withFrameParser(() => broker.handle(conn as unknown as net.Socket));
      leanListeners(client, before);
      fastPublishIn(client);
      clients.push(client);
    });
  }
  afterAll(async () => {
    listener?.stop(true);
    if (broker) await new Promise<void>((r) => broker.close(() => r()));
  });

  /** A raw client: the packets it receives, decoded, and whether it closed. */
  async function raw() {
    await start();
    const sock = net.connect(listener.port, "127.0.0.1");
    sock.setNoDelay(true);
    sockets.push(sock);
    const parser = mqttPacket.parser();
    const packets: mqttPacket.Packet[] = [];
    parser.on("packet", (p) => packets.push(p));
    const state = { closed: false };
    sock.on("data", (b: Buffer) => parser.parse(b));
    sock.on("close", () => { state.closed = true; });
    sock.on("error", () => {});
    await new Promise((r) => sock.once("connect", r));
    return { sock, packets, state };
  }

  const connectedIds = () => Object.keys((broker as unknown as { clients: Record<string, unknown> }).clients);

  test("CONNECT, SUBSCRIBE and PINGREQ in one read: CONNACK first, then SUBACK and PINGRESP", async () => {
    const c = await raw();
    c.sock.write(Buffer.concat([connect("one-read"), gen({ cmd: "subscribe", messageId: 7, subscriptions: [{ topic: "a/b", qos: 1 }] }), gen({ cmd: "pingreq" })]));
    await waitFor(() => c.packets.length >= 3);
    // aedes answers a SUBSCRIBE once its persistence has it, a PINGREQ at once: either may come first
    expect(c.packets[0]!.cmd).toBe("connack");
    c.packets.sort((a, b) => a.cmd.localeCompare(b.cmd));
    expect(c.packets.map((p) => p.cmd)).toEqual(["connack", "pingresp", "suback"]);
    expect((c.packets[2] as mqttPacket.ISubackPacket).messageId).toBe(7);
    expect((c.packets[2] as mqttPacket.ISubackPacket).granted).toEqual([1]);
  });

  test("a CONNECT and a PUBLISH split into one-byte reads arrive whole", async () => {
    const sub = await raw();
    sub.sock.write(Buffer.concat([connect("split-sub"), gen({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "split/t", qos: 0 }] })]));
    await waitFor(() => sub.packets.length >= 2);

    const c = await raw();
    const brokerSide = () => clients.at(-1)!.conn as unknown as TcpConnection;
    await waitFor(() => clients.length > 0 && (brokerSide() as unknown) !== undefined);
    let reads = 0;
    const conn = brokerSide();
    conn.on("readable", () => reads++);
    const payload = pattern(300, 1);
    const bytes = Buffer.concat([connect("split"), gen({ cmd: "publish", topic: "split/t", payload, qos: 0, retain: false, dup: false })]);
    for (let i = 0; i < bytes.length; i++) {
      c.sock.write(bytes.subarray(i, i + 1));
      await waitFor(() => reads > i); // each byte its own read
    }
    await waitFor(() => c.packets.length >= 1 && sub.packets.length >= 3);
    expect(c.packets[0]!.cmd).toBe("connack");
    const got = sub.packets[2] as mqttPacket.IPublishPacket;
    expect(got.topic).toBe("split/t");
    expect(Buffer.from(got.payload as Buffer).equals(payload)).toBe(true);
  });

  test("a packet announced over MAX_PACKET_BYTES closes the connection at its header, and the client is gone", async () => {
    const c = await raw();
    c.sock.write(connect("oversized"));
    await waitFor(() => c.packets.length >= 1 && connectedIds().includes("oversized"));
    // a PUBLISH header whose remaining length is one byte over the limit, and no body
    const len = MAX_PACKET_BYTES + 1;
    const varint: number[] = [];
    for (let n = len; ; ) { let b = n % 128; n = Math.floor(n / 128); if (n > 0) b |= 0x80; varint.push(b); if (n === 0) break; }
    c.sock.write(Buffer.from([0x30, ...varint]));
    await waitFor(() => c.state.closed);
    await waitFor(() => !connectedIds().includes("oversized"));
  });

  test("a malformed packet (a five-byte remaining length) closes the connection; another client is untouched", async () => {
    const other = await raw();
    other.sock.write(connect("bystander"));
    await waitFor(() => other.packets.length >= 1);
    const c = await raw();
    c.sock.write(connect("malformed"));
    await waitFor(() => c.packets.length >= 1);
    c.sock.write(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01]));
    await waitFor(() => c.state.closed);
    await waitFor(() => !connectedIds().includes("malformed"));
    other.sock.write(gen({ cmd: "pingreq" }));
    await waitFor(() => other.packets.length >= 2);
    expect(other.packets[1]!.cmd).toBe("pingresp");
    expect(other.state.closed).toBe(false);
  });

  test("a packet before CONNECT other than CONNECT closes the connection", async () => {
    const c = await raw();
    c.sock.write(gen({ cmd: "pingreq" }));
    await waitFor(() => c.state.closed);
    expect(c.packets).toEqual([]);
  });

  test("the peer closing: aedes' client disconnects (the shared listeners of leanListeners)", async () => {
    const c = await raw();
    c.sock.write(connect("leaves"));
    await waitFor(() => connectedIds().includes("leaves"));
    const conn = clients.at(-1)!.conn as unknown as TcpConnection;
    // one listener each for end, error and close: aedes' per-client closures are gone
    expect(listenerCounts(conn)).toEqual([1, 1, 1]);
    const gone = new Promise<string>((r) => broker.once("clientDisconnect", (cl) => r(cl.id)));
    c.sock.end();
    expect(await gone).toBe("leaves");
    expect(connectedIds()).not.toContain("leaves");
  });

  test("the peer resetting: aedes' client disconnects", async () => {
    const c = await raw();
    c.sock.write(connect("resets"));
    await waitFor(() => connectedIds().includes("resets"));
    const gone = new Promise<string>((r) => broker.once("clientDisconnect", (cl) => r(cl.id)));
    c.sock.resetAndDestroy();
    expect(await gone).toBe("resets");
  });
});
