// Write coalescing on broker connections: what a connection is given in one turn leaves in one
// write, in order and intact; writes with callbacks, end and destroy flush first; big batches
// leave at once; backpressure stays the real stream's.
import { afterAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { Duplex } from "node:stream";
import mqttPacket from "mqtt-packet";
import { coalesceWrites } from "../../../src/broker/writes.ts";

/** One turn of the event loop: the flush is a setImmediate queued before this one. */
const turn = () => new Promise<void>((r) => setImmediate(r));

type Call = { chunk: Buffer; cb: boolean };

/** Records every call to `conn.write` as it is before coalescing (the real stream's write). */
function spyWrites<T extends { write: (...a: any[]) => boolean }>(conn: T): Call[] {
  const calls: Call[] = [];
  const write = conn.write.bind(conn);
  conn.write = ((chunk: any, ...rest: any[]) => {
    const enc: BufferEncoding = typeof rest[0] === "string" ? (rest[0] as BufferEncoding) : "utf8";
    const buf = typeof chunk === "string" ? Buffer.from(chunk, enc) : Buffer.from(chunk);
    calls.push({ chunk: buf, cb: rest.some((a) => typeof a === "function") });
    return write(chunk, ...rest);
  }) as T["write"];
  return calls;
}

/** A stream that keeps what is written to it (a Duplex, as broker connections are; its readable
 *  side is unused); `hold` keeps each write's callback until release(). */
function sink(opts: { highWaterMark?: number; hold?: boolean } = {}) {
  const got: Buffer[] = [];
  const held: (() => void)[] = [];
  const w = new Duplex({
    writableHighWaterMark: opts.highWaterMark,
    read() {},
    write(chunk: Buffer, _enc, cb) {
      got.push(Buffer.from(chunk));
      if (opts.hold) held.push(() => cb());
      else cb();
    },
  });
  const release = () => { for (const cb of held.splice(0)) cb(); };
  return { w, got, release };
}

const servers: net.Server[] = [];
const sockets: net.Socket[] = [];
afterAll(() => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
});

/** A connected TCP pair on 127.0.0.1: `local` is the side under test, `peer` the other end. */
async function tcpPair(): Promise<{ local: net.Socket; peer: net.Socket }> {
  let accepted!: (s: net.Socket) => void;
  const peerP = new Promise<net.Socket>((r) => { accepted = r; });
  const server = net.createServer((s) => accepted(s));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const local = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1");
  await new Promise((r) => local.once("connect", r));
  const peer = await peerP;
  sockets.push(local, peer);
  return { local, peer };
}

/** Everything the peer receives until it has `n` bytes. */
function receive(peer: net.Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let len = 0;
    const onData = (d: Buffer) => {
      parts.push(d);
      len += d.length;
      if (len >= n) { peer.off("data", onData); resolve(Buffer.concat(parts)); }
    };
    peer.on("data", onData);
    peer.once("error", reject);
  });
}

describe("coalesceWrites", () => {
  test("the writes of one turn reach a socket as one write, in order and intact", async () => {
    const { local, peer } = await tcpPair();
    const calls = spyWrites(local);
    coalesceWrites(local);
    const parts = Array.from({ length: 200 }, (_, i) => Buffer.from(`message ${i};`));
    const expected = Buffer.concat(parts);
    const got = receive(peer, expected.length);
    for (const p of parts) expect(local.write(p)).toBe(true);
    expect(calls).toHaveLength(0); // nothing leaves before the turn ends
    await turn();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.chunk.equals(expected)).toBe(true);
    expect((await got).equals(expected)).toBe(true);
  });

  test("the next turn's writes make a new batch", async () => {
    const { w, got } = sink();
    const calls = spyWrites(w);
    coalesceWrites(w);
    w.write(Buffer.from("a"));
    w.write(Buffer.from("b"));
    await turn();
    w.write(Buffer.from("c"));
    await turn();
    expect(calls.map((c) => c.chunk.toString())).toEqual(["ab", "c"]);
    expect(got.map(String)).toEqual(["ab", "c"]);
  });

  test("an mqtt-packet writeToStream (corked, four or five pieces) leaves as one write", async () => {
    const { w, got } = sink();
    const calls = spyWrites(w);
    coalesceWrites(w);
    const packet = { cmd: "publish" as const, topic: "t/ü", payload: Buffer.from("hello"), qos: 0 as const, retain: false, dup: false };
    mqttPacket.writeToStream(packet, w);
    mqttPacket.writeToStream(packet, w);
    await turn();
    await turn(); // past writeToStream's nextTick uncork too
    const frame = mqttPacket.generate(packet);
    expect(calls).toHaveLength(1);
    expect(Buffer.concat(got).equals(Buffer.concat([frame, frame]))).toBe(true);
  });

  test("string chunks are encoded with their encoding; typed arrays keep their view", async () => {
    const { w, got } = sink();
    coalesceWrites(w);
    const u8 = new Uint8Array([0, 1, 2, 3, 4, 5]).subarray(2, 5);
    w.write("héllo €");
    w.write("68690a", "hex");
    w.write("aGk=", "base64");
    w.write("é", "latin1");
    w.write("ab", "utf16le");
    w.write(u8);
    await turn();
    const expected = Buffer.concat([
      Buffer.from("héllo €", "utf8"),
      Buffer.from([0x68, 0x69, 0x0a]),
      Buffer.from("hi"),
      Buffer.from([0xe9]),
      Buffer.from([0x61, 0, 0x62, 0]),
      Buffer.from([2, 3, 4]),
    ]);
    expect(got).toHaveLength(1);
    expect(got[0]!.equals(expected)).toBe(true);
  });

  test("a write with a callback sends what is pending first, then itself, and calls back", async () => {
    const { local, peer } = await tcpPair();
    const calls = spyWrites(local);
    coalesceWrites(local);
    const got = receive(peer, 10);
    local.write(Buffer.from("ab"));
    local.write("cd", "utf8");
    const called = new Promise<unknown>((r) => local.write(Buffer.from("ef"), (err) => r(err ?? "ok")));
    // the pending bytes and the written one left at once, as two writes, the second with the callback
    expect(calls.map((c) => [c.chunk.toString(), c.cb])).toEqual([["abcd", false], ["ef", true]]);
    local.write("gh", "utf8", () => {});
    local.write(Buffer.from("ij"));
    expect(await called).toBe("ok");
    expect((await got).toString()).toBe("abcdefghij");
    expect(calls.map((c) => [c.chunk.toString(), c.cb])).toEqual([["abcd", false], ["ef", true], ["gh", true], ["ij", false]]);
  });

  test("end() sends the pending bytes first; the peer has them all when the stream ends", async () => {
    const { local, peer } = await tcpPair();
    coalesceWrites(local);
    const parts: Buffer[] = [];
    peer.on("data", (d: Buffer) => parts.push(d));
    const ended = new Promise<string>((r) => peer.once("end", () => r(Buffer.concat(parts).toString())));
    local.write(Buffer.from("one,"));
    local.write("two,");
    local.end("three");
    expect(await ended).toBe("one,two,three");
  });

  test("destroy() sends the pending bytes before destroying", async () => {
    const { w, got } = sink();
    const log: string[] = [];
    const write = w.write.bind(w);
    w.write = ((chunk: Buffer, ...rest: any[]) => { log.push(`write ${chunk}`); return (write as (...a: any[]) => boolean)(chunk, ...rest); }) as typeof w.write;
    const destroy = w.destroy.bind(w);
    w.destroy = ((err?: Error) => { log.push("destroy"); return destroy(err); }) as typeof w.destroy;
    coalesceWrites(w);
    w.write(Buffer.from("x"));
    w.write(Buffer.from("y"));
    w.destroy();
    expect(log).toEqual(["write xy", "destroy"]);
    expect(w.destroyed).toBe(true);
    expect(got.map(String)).toEqual(["xy"]);
    await turn();
    expect(log).toEqual(["write xy", "destroy"]); // and nothing later
  });

  test("nothing is handed to a stream destroyed before its batch left", async () => {
    const { w } = sink();
    const calls = spyWrites(w);
    coalesceWrites(w);
    w.destroy();
    w.write(Buffer.from("late"));
    await turn();
    expect(calls).toHaveLength(0);
  });

  test("connections carry no methods of their own: one prototype per stream class holds them", async () => {
    const a = sink(), b = sink();
    coalesceWrites(a.w);
    coalesceWrites(b.w);
    for (const name of ["write", "end", "destroy", "cork", "uncork"]) expect(Object.hasOwn(a.w, name)).toBe(false);
    expect(Object.getPrototypeOf(a.w)).toBe(Object.getPrototypeOf(b.w));
    expect(a.w).toBeInstanceOf(Duplex);
    // and each keeps its own batch
    a.w.write(Buffer.from("a1"));
    b.w.write(Buffer.from("b1"));
    a.w.write(Buffer.from("a2"));
    await turn();
    expect(a.got.map(String)).toEqual(["a1a2"]);
    expect(b.got.map(String)).toEqual(["b1"]);
  });

  test("cork() does not hold a batch past its turn", async () => {
    const { w, got } = sink();
    coalesceWrites(w);
    w.cork();
    w.write(Buffer.from("held?"));
    await turn();
    expect(got.map(String)).toEqual(["held?"]);
  });

  test("over 64 KiB pending leaves at once, before the turn ends", () => {
    const { w } = sink();
    const calls = spyWrites(w);
    coalesceWrites(w);
    w.write(Buffer.alloc(40_000, 1));
    w.write(Buffer.alloc(25_535, 2)); // 65,535 bytes: still waiting
    expect(calls).toHaveLength(0);
    w.write(Buffer.alloc(1, 3)); // 65,536
    expect(calls).toHaveLength(1);
    expect(calls[0]!.chunk.length).toBe(65_536);
    expect(calls[0]!.chunk[0]).toBe(1);
    expect(calls[0]!.chunk[40_000]).toBe(2);
    expect(calls[0]!.chunk[65_535]).toBe(3);
    // a single big write leaves on its own too
    w.write(Buffer.alloc(100_000, 4));
    expect(calls).toHaveLength(2);
    expect(calls[1]!.chunk.length).toBe(100_000);
  });

  test("a big batch still keeps the order of what came before and after it", async () => {
    const { local, peer } = await tcpPair();
    coalesceWrites(local);
    const a = Buffer.from("head");
    const big = Buffer.alloc(200_000);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const b = Buffer.from("tail");
    const got = receive(peer, a.length + big.length + b.length);
    local.write(a);
    local.write(big);
    local.write(b);
    expect((await got).equals(Buffer.concat([a, big, b]))).toBe(true);
  });
});


describe("backpressure", () => {
  test("write answers false while the real stream needs to drain, true again after 'drain'", async () => {
    const { w, release } = sink({ highWaterMark: 16, hold: true });
    coalesceWrites(w);
    expect(w.write(Buffer.alloc(10))).toBe(true);
    expect(w.write(Buffer.alloc(10))).toBe(true); // 20 bytes pending, none handed on yet
    await turn(); // the batch of 20 fills the real stream past its mark
    expect(w.writableNeedDrain).toBe(true);
    expect(w.write(Buffer.alloc(1))).toBe(false);
    const drained = new Promise((r) => w.once("drain", r));
    release();
    await turn();
    release();
    await drained;
    expect(w.writableNeedDrain).toBe(false);
    expect(w.write(Buffer.alloc(1))).toBe(true);
  });

  test("on a TCP socket whose peer does not read: false, then 'drain', then true", async () => {
    const { local, peer } = await tcpPair();
    peer.pause();
    coalesceWrites(local);
    const chunk = Buffer.alloc(1 << 20, 7); // over 64 KiB: each leaves at once
    let n = 0;
    while (local.write(chunk)) if (++n > 1_000) throw new Error("never needed to drain");
    expect(local.writableNeedDrain).toBe(true);
    expect(local.write(Buffer.from("x"))).toBe(false);
    const drained = new Promise((r) => local.once("drain", r));
    peer.on("data", () => {});
    peer.resume();
    await drained;
    expect(local.write(Buffer.from("y"))).toBe(true);
  });
});
