// The QoS 0 PUBLISH fast paths around aedes: encodePublish0 must be byte-identical to mqtt-packet,
// fastPublishIn must emit exactly the packets aedes' own parser would (same fields, same order,
// however the bytes are split), and fastPublishOut must deliver like aedes does, end to end.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { Aedes, type Client } from "aedes";
import mqtt, { type MqttClient } from "mqtt";
import mqttPacket from "mqtt-packet";
import { FrameParser, MAX_PACKET_BYTES, encodePublish, encodePublish0, fastPublishIn, fastPublishOut } from "../../../src/broker/publish.ts";
import { coalesceWrites } from "../../../src/broker/writes.ts";

type Version = 3 | 4 | 5;
type AnyPacket = Record<string, any>;

/** mqtt-packet's encoding of a packet (the loose cast: its types cannot express every packet). */
const gen = (packet: AnyPacket, protocolVersion: Version = 4): Buffer =>
  mqttPacket.generate(packet as mqttPacket.Packet, { protocolVersion });

const connectFrame = (v: Version) =>
  gen({ cmd: "connect", protocolId: v === 3 ? "MQIsdp" : "MQTT", protocolVersion: v, clientId: "t", clean: true, keepalive: 0 }, v);

const pub0 = (topic: string, payload: string | Buffer, extra: AnyPacket = {}) =>
  ({ cmd: "publish", topic, payload, qos: 0, retain: false, dup: false, ...extra });

type ParserLike = ReturnType<typeof mqttPacket.parser> & { settings: { protocolVersion?: number } };

/** A parser as aedes makes one, after `connect` of version v: what it emits is collected (as
 *  copies of the fields at emit time). `fast`: fastPublishIn replaces it (as the broker does, with
 *  its listeners); `handed` then records each chunk the FrameParser gave the shared mqtt-packet parser. */
function parserAfterConnect(v: Version, fast: boolean) {
  const aedesParser = mqttPacket.parser() as ParserLike;
  const packets: AnyPacket[] = [];
  const errors: Error[] = [];
  const handed: Buffer[] = [];
  aedesParser.on("packet", (p) => packets.push({ ...p }));
  aedesParser.on("error", (e) => errors.push(e));
  let parser: ParserLike | FrameParser = aedesParser;
  if (fast) {
    const fp = fastPublishIn({ _parser: aedesParser } as unknown as Client);
    fp.parseWhole = (b: Buffer) => { handed.push(Buffer.from(b)); FrameParser.prototype.parseWhole.call(fp, b); };
    parser = fp;
  }
  parser.parse(connectFrame(v));
  expect(packets.map((p) => p.cmd)).toEqual(["connect"]);
  expect(parser.settings.protocolVersion).toBe(v);
  packets.length = 0;
  handed.length = 0;
  return { parser, packets, errors, handed };
}

/** What aedes' unmodified parser makes of `bytes` (one parse call), for comparison. */
function reference(bytes: Buffer, v: Version = 4) {
  const r = parserAfterConnect(v, false);
  r.parser.parse(bytes);
  return { packets: r.packets, errors: r.errors };
}

/** A mix of every kind of frame a broker receives, QoS 0 publishes among them. */
function mixedFrames(): Buffer[] {
  return [
    gen(pub0("a/b", "hello")),
    gen({ cmd: "publish", topic: "q/1", payload: Buffer.from("one"), qos: 1, messageId: 1, retain: false, dup: false }),
    gen(pub0("r", Buffer.alloc(0), { retain: true })),
    gen({ cmd: "subscribe", messageId: 2, subscriptions: [{ topic: "x/#", qos: 1 }, { topic: "y", qos: 0 }] }),
    gen(pub0("températures/😀", Buffer.from([0, 255, 1, 254]))),
    gen({ cmd: "publish", topic: "q/2", payload: Buffer.from("two"), qos: 2, messageId: 3, retain: true, dup: true }),
    gen({ cmd: "pingreq" }),
    gen(pub0("d", "dup flag set", { dup: true })),
    gen({ cmd: "unsubscribe", messageId: 4, unsubscriptions: ["x/#"] }),
    gen(pub0("big", Buffer.alloc(300, 7))), // two-byte remaining length
    gen({ cmd: "puback", messageId: 5 }),
    gen({ cmd: "pubrec", messageId: 6 }),
    gen({ cmd: "pubrel", messageId: 7 }),
    gen({ cmd: "pubcomp", messageId: 8 }),
    gen(pub0("", "empty topic")),
    gen(pub0("last", "x")),
  ];
}

describe("encodePublish0", () => {
  /** encodePublish0 against mqtt-packet: same bytes, and parsed back to the same message. */
  function check(topic: string, payload: Buffer | string | undefined, retain: boolean) {
    const frame = encodePublish0(topic, payload, retain);
    const body = typeof payload === "string" ? Buffer.from(payload) : (payload ?? Buffer.alloc(0));
    expect(frame.equals(gen(pub0(topic, body, { retain })))).toBe(true);
    const packets: AnyPacket[] = [];
    const parser = mqttPacket.parser();
    parser.on("packet", (p) => packets.push(p));
    parser.on("error", (e) => { throw e; });
    expect(parser.parse(frame)).toBe(0);
    expect(packets).toHaveLength(1);
    const p = packets[0]!;
    expect([p.cmd, p.topic, p.qos, p.retain, p.dup]).toEqual(["publish", topic, 0, retain, false]);
    expect(Buffer.compare(p.payload, body)).toBe(0);
    return frame;
  }

  test("empty, missing, string and binary payloads, with and without retain", () => {
    check("a/b", Buffer.alloc(0), false);
    check("a/b", undefined, true);
    check("a/b", "", false);
    check("a/b", "héllo wörld €", true);
    check("a/b", Buffer.from([0, 1, 2, 0xff, 0x80]), false);
    check("", "empty topic", false);
  });

  test("a multi-byte UTF-8 topic is measured in bytes, not characters", () => {
    const topic = "températures/北京/😀";
    const frame = check(topic, "x", false);
    expect(frame.readUInt16BE(2)).toBe(Buffer.byteLength(topic));
  });

  test("QoS 1 frames (encodePublish): mqtt-packet's bytes, message id, dup and retain included", () => {
    for (const [topic, payload, retain, dup, messageId] of [["a/b", "x", false, false, 1], ["telemetry/m-7", Buffer.alloc(128, 5), true, true, 65535], ["", "", false, false, 300]] as const) {
      const frame = encodePublish(topic, payload, retain, 1, messageId, dup);
      expect(frame.toString("hex")).toBe(gen({ cmd: "publish", topic, payload: typeof payload === "string" ? Buffer.from(payload) : payload, qos: 1, messageId, retain, dup }).toString("hex"));
    }
    // a QoS 0 frame carries no message id, and never dup
    expect(encodePublish("t", "p", false, 0, 9, true).equals(encodePublish0("t", "p"))).toBe(true);
  });

  test("remaining lengths on both sides of each varint boundary", () => {
    const topic = "t/size";
    // remaining length = 2 + topic + payload; [length, bytes of its varint]
    const cases: [number, number][] = [[127, 1], [128, 2], [16_383, 2], [16_384, 3], [2_097_151, 3], [2_097_152, 4]];
    for (const [length, varint] of cases) {
      const payload = Buffer.alloc(length - 2 - topic.length);
      for (let i = 0; i < payload.length; i += 997) payload[i] = i % 256;
      const frame = check(topic, payload, false);
      expect(frame.length).toBe(1 + varint + length);
    }
  });
});

describe("fastPublishIn", () => {
  test("QoS 1 publishes come out as mqtt-packet makes them, message id included, without going through it", () => {
    const frames = [
      gen({ cmd: "publish", topic: "telemetry/a", payload: Buffer.alloc(128, 1), qos: 1, messageId: 1, retain: false, dup: false }),
      gen({ cmd: "publish", topic: "t", payload: Buffer.from("kept"), qos: 1, messageId: 65535, retain: true, dup: true }),
      gen({ cmd: "publish", topic: "températures/😀", payload: Buffer.alloc(0), qos: 1, messageId: 42, retain: false, dup: false }),
      gen({ cmd: "publish", topic: "big", payload: Buffer.alloc(20_000, 3), qos: 1, messageId: 7, retain: false, dup: false }),
    ];
    for (const v of [3, 4] as const) {
      const f = parserAfterConnect(v, true);
      for (const frame of frames) f.parser.parse(frame);
      const ref = reference(Buffer.concat(frames), v);
      expect(ref.packets).toHaveLength(frames.length);
      expect(f.packets).toStrictEqual(ref.packets);
      expect(f.packets.map((p) => p.messageId)).toEqual([1, 65535, 42, 7]);
      expect(f.errors).toEqual([]);
      expect(f.handed).toEqual([]);
    }
  });

  test("a QoS 1 frame too short for its message id is left to mqtt-packet", () => {
    // topic "ab" and one byte where the two of the message id should be
    const bad = Buffer.from([0x32, 0x05, 0x00, 0x02, 0x61, 0x62, 0x01]);
    const f = parserAfterConnect(4, true);
    f.parser.parse(bad);
    expect(f.handed.map((b) => b.toString("hex"))).toEqual([bad.toString("hex")]);
    expect(f.packets).toStrictEqual(reference(bad).packets);
  });

  test("QoS 0 publishes come out as mqtt-packet makes them, without going through it", () => {
    const frames = [
      gen(pub0("a/b", "hello")),
      gen(pub0("a/b", "kept", { retain: true })),
      gen(pub0("d", "dup", { dup: true })),
      gen(pub0("températures/😀", Buffer.from([0, 255]))),
      gen(pub0("", Buffer.alloc(0))),
      gen(pub0("big", Buffer.alloc(20_000, 3))),
    ];
    for (const v of [3, 4] as const) {
      const f = parserAfterConnect(v, true);
      for (const frame of frames) f.parser.parse(frame);
      const ref = reference(Buffer.concat(frames), v);
      expect(ref.packets).toHaveLength(frames.length);
      expect(f.packets).toStrictEqual(ref.packets);
      expect(f.errors).toEqual([]);
      expect(f.handed).toEqual([]); // none of them needed mqtt-packet
    }
  });

  test("other frames go to mqtt-packet whole, one frame per call", () => {
    const frames = mixedFrames();
    const f = parserAfterConnect(4, true);
    f.parser.parse(Buffer.concat(frames));
    const slow = frames.filter((b) => !(b[0]! >> 4 === 3 && (b[0]! & 6) <= 2));
    expect(f.handed.map((b) => b.toString("hex"))).toEqual(slow.map((b) => b.toString("hex")));
  });

  test("many frames in one chunk come out in order, the same as mqtt-packet's", () => {
    const frames: Buffer[] = [];
    for (let i = 0; i < 1_000; i++) {
      frames.push(i % 10 === 9
        ? gen({ cmd: "publish", topic: `q/${i}`, payload: String(i), qos: 1, messageId: i + 1, retain: false, dup: false })
        : gen(pub0(`t/${i}`, `payload ${i}`)));
    }
    const bytes = Buffer.concat(frames);
    const f = parserAfterConnect(4, true);
    expect(f.parser.parse(bytes)).toBe(0);
    expect(f.packets).toHaveLength(1_000);
    expect(f.packets.map((p) => p.topic)).toEqual(frames.map((_, i) => (i % 10 === 9 ? `q/${i}` : `t/${i}`)));
    expect(f.packets).toStrictEqual(reference(bytes).packets);
  });

  test("QoS 1/2, SUBSCRIBE, UNSUBSCRIBE, PINGREQ and acks keep their place among QoS 0 publishes", () => {
    const bytes = Buffer.concat(mixedFrames());
    const f = parserAfterConnect(4, true);
    f.parser.parse(bytes);
    const ref = reference(bytes);
    expect(f.packets.map((p) => p.cmd)).toEqual([
      "publish", "publish", "publish", "subscribe", "publish", "publish", "pingreq", "publish",
      "unsubscribe", "publish", "puback", "pubrec", "pubrel", "pubcomp", "publish", "publish",
    ]);
    expect(f.packets).toStrictEqual(ref.packets);
    expect(f.packets[3]!.subscriptions).toEqual([{ topic: "x/#", qos: 1 }, { topic: "y", qos: 0 }]);
    expect(f.packets[5]).toMatchObject({ topic: "q/2", qos: 2, messageId: 3, retain: true, dup: true });
    expect(f.errors).toEqual([]);
  });

  test("a stream split at any byte gives the same packets, in order", () => {
    const bytes = Buffer.concat(mixedFrames());
    const expected = reference(bytes).packets;
    for (let at = 0; at <= bytes.length; at++) {
      const f = parserAfterConnect(4, true);
      f.parser.parse(bytes.subarray(0, at));
      f.parser.parse(bytes.subarray(at));
      expect(f.packets, `split at ${at}`).toStrictEqual(expected);
      expect(f.errors).toEqual([]);
    }
  });

  test("a stream fed one byte at a time gives the same packets, in order", () => {
    const bytes = Buffer.concat(mixedFrames());
    const f = parserAfterConnect(4, true);
    for (let i = 0; i < bytes.length; i++) f.parser.parse(bytes.subarray(i, i + 1));
    expect(f.packets).toStrictEqual(reference(bytes).packets);
  });

  test("an emitted payload is a copy, not a view of the chunk read", () => {
    const f = parserAfterConnect(4, true);
    const chunk = Buffer.concat([gen(pub0("a", "original")), gen(pub0("b", "second"))]);
    f.parser.parse(chunk);
    chunk.fill(0x21); // the socket's buffer being reused
    expect(f.packets.map((p) => p.payload.toString())).toEqual(["original", "second"]);
  });

  test("MQTT 5: QoS 0 publishes with properties are decoded by mqtt-packet, properties included", () => {
    const frame = gen(pub0("v5/t", "hi", {
      properties: { contentType: "text/plain", payloadFormatIndicator: true, userProperties: { k: "v" } },
    }), 5);
    const f = parserAfterConnect(5, true);
    f.parser.parse(frame);
    expect(f.packets).toHaveLength(1);
    expect(f.packets[0]!.topic).toBe("v5/t");
    expect(f.packets[0]!.payload.toString()).toBe("hi");
    expect(f.packets[0]!.properties).toEqual({ contentType: "text/plain", payloadFormatIndicator: true, userProperties: { k: "v" } });
    expect(f.packets).toStrictEqual(reference(frame, 5).packets);
  });

  test("a publish before CONNECT is left to mqtt-packet", () => {
    const aedesParser = mqttPacket.parser() as ParserLike;
    const packets: AnyPacket[] = [];
    aedesParser.on("packet", (p) => packets.push({ ...p }));
    const parser = fastPublishIn({ _parser: aedesParser } as unknown as Client);
    const frame = gen(pub0("early", "x"));
    parser.parse(frame);
    expect(packets).toStrictEqual(reference(frame).packets);
  });

  test("a remaining length of five bytes is an 'error' from the parser, not a throw", () => {
    const malformed = Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00]);
    const f = parserAfterConnect(4, true);
    expect(() => f.parser.parse(malformed)).not.toThrow();
    expect(f.errors.map((e) => e.message)).toEqual(reference(malformed).errors.map((e) => e.message));
    expect(f.errors).toHaveLength(1);
    expect(f.packets).toEqual([]);
  });

  test("the malformed length is found when its bytes arrive in pieces, after good frames", () => {
    const f = parserAfterConnect(4, true);
    f.parser.parse(Buffer.concat([gen(pub0("ok", "1")), Buffer.from([0x30, 0xff, 0xff])]));
    expect(f.errors).toEqual([]);
    f.parser.parse(Buffer.from([0xff, 0xff, 0x01]));
    expect(f.packets.map((p) => p.topic)).toEqual(["ok"]);
    expect(f.errors).toHaveLength(1);
  });

  test("a packet over MAX_PACKET_BYTES is an 'error' as soon as its header arrives, and nothing is kept", () => {
    const f = parserAfterConnect(4, true);
    const frame = encodePublish0("big", Buffer.alloc(MAX_PACKET_BYTES, 1)); // body: topic + payload > limit
    f.parser.parse(Buffer.concat([gen(pub0("ok", "1")), frame.subarray(0, 1000)]));
    expect(f.packets.map((p) => p.topic)).toEqual(["ok"]);
    expect(f.errors.map((e) => e.message)).toEqual([`packet larger than ${MAX_PACKET_BYTES} bytes`]);
    expect(f.handed).toEqual([]); // not even its start reached mqtt-packet
    // exactly at the limit is fine
    const g = parserAfterConnect(4, true);
    g.parser.parse(encodePublish0("b", Buffer.alloc(MAX_PACKET_BYTES - 3, 2)));
    expect(g.packets).toHaveLength(1);
    expect(g.errors).toEqual([]);
  });

  test("a QoS 0 publish whose topic overruns the frame is mqtt-packet's error too", () => {
    const bad = Buffer.from([0x30, 0x04, 0x00, 0x09, 0x61, 0x62]); // topic length 9 in a 4-byte body
    const f = parserAfterConnect(4, true);
    f.parser.parse(bad);
    expect(f.packets).toEqual([]);
    expect(f.errors.map((e) => e.message)).toEqual(reference(bad).errors.map((e) => e.message));
    expect(f.errors).toHaveLength(1);
  });

  test("parse() called again from a 'packet' listener: every packet once, in stream order", () => {
    const frames = mixedFrames();
    const bytes = Buffer.concat(frames);
    const expected = reference(bytes).packets;
    // the stream in three chunks; the later ones are read from inside listeners, the way aedes'
    // nextBatch reads the socket when a packet completes synchronously
    const cut1 = frames.slice(0, 5).reduce((n, b) => n + b.length, 0) + 3; // inside frame 6
    const cut2 = bytes.length - 2; // inside the last frame
    const f = parserAfterConnect(4, true);
    let n = 0;
    f.parser.on("packet", (p: AnyPacket) => {
      n++;
      if (n === 1) f.parser.parse(bytes.subarray(cut1, cut2)); // from a fast-path packet
      if (p.cmd === "subscribe") f.parser.parse(bytes.subarray(cut2)); // from one mqtt-packet emitted
    });
    f.parser.parse(bytes.subarray(0, cut1));
    expect(f.packets).toStrictEqual(expected);
    expect(f.errors).toEqual([]);
  });

  // chunks of an incomplete frame are joined once it is whole: joining each one would copy a
  // big frame quadratically (a 32 MiB PUBLISH in 64 KiB chunks took ~2.4 s that way)
  test("a large frame arriving in many chunks costs about what it costs mqtt-packet", () => {
    const frame = encodePublish0("big", Buffer.alloc(MAX_PACKET_BYTES - 16, 1));
    const time = (fast: boolean) => {
      const f = parserAfterConnect(4, fast);
      const t = performance.now();
      for (let o = 0; o < frame.length; o += 65_536) f.parser.parse(frame.subarray(o, o + 65_536));
      expect(f.packets).toHaveLength(1);
      return performance.now() - t;
    };
    const plain = time(false);
    expect(time(true)).toBeLessThan(10 * plain + 300);
  });

  test("parse() from the listener of the last packet of a chunk is not lost", () => {
    const a = gen(pub0("a", "1"));
    const b = gen(pub0("b", "2"));
    const f = parserAfterConnect(4, true);
    f.parser.once("packet", () => f.parser.parse(b));
    f.parser.parse(a);
    expect(f.packets.map((p) => p.topic)).toEqual(["a", "b"]);
  });
});

describe("fastPublishOut with aedes, end to end", () => {
  let broker: Aedes;
  let server: net.Server;
  let url = "";
  const clients: MqttClient[] = [];
  /** Publish frames aedes wrote itself (mqtt-packet's writeToStream), per broker-side socket. */
  const aedesPublishes = new Map<object, number>();
  const brokerSockets = new Set<object>();
  const writeToStream = mqttPacket.writeToStream;

  beforeAll(async () => {
    broker = await Aedes.createBroker();
    server = net.createServer((sock) => {
      brokerSockets.add(sock);
      coalesceWrites(sock);
      const c = broker.handle(sock);
      fastPublishIn(c);
      fastPublishOut(c);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `mqtt://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    // aedes and this file share mqtt-packet's module object, so aedes' own writes can be counted
    (mqttPacket as { writeToStream: typeof writeToStream }).writeToStream = ((packet, stream, opts) => {
      if (packet.cmd === "publish" && brokerSockets.has(stream)) aedesPublishes.set(stream, (aedesPublishes.get(stream) ?? 0) + 1);
      return writeToStream(packet, stream, opts);
    }) as typeof writeToStream;
  });

  afterAll(async () => {
    (mqttPacket as { writeToStream: typeof writeToStream }).writeToStream = writeToStream;
    await Promise.all(clients.map((c) => c.endAsync(true)));
    await new Promise<void>((r) => broker.close(() => r()));
    await new Promise<void>((r) => server.close(() => r()));
  });

  async function connect(clientId: string, protocolVersion: 3 | 4 = 4): Promise<MqttClient> {
    const protocolId = protocolVersion === 3 ? "MQIsdp" : "MQTT";
    const c = await mqtt.connectAsync(url, { clientId, protocolId, protocolVersion, reconnectPeriod: 0, clean: true });
    clients.push(c);
    return c;
  }

  /** How many publishes aedes encoded itself for the connection of `clientId`. */
  const aedesWrote = (clientId: string) => {
    const conn = (broker as unknown as { clients: Record<string, { conn: object }> }).clients[clientId]?.conn;
    expect(conn).toBeDefined();
    return aedesPublishes.get(conn!) ?? 0;
  };

  /** Resolves with the first `n` messages `c` receives (or rejects after `ms`). */
  function receive(c: MqttClient, n: number, ms = 15_000) {
    return new Promise<{ topic: string; payload: Buffer; packet: AnyPacket }[]>((resolve, reject) => {
      const got: { topic: string; payload: Buffer; packet: AnyPacket }[] = [];
      const timer = setTimeout(() => { c.off("message", on); reject(new Error(`got ${got.length} of ${n} messages`)); }, ms);
      const on = (topic: string, payload: Buffer, packet: AnyPacket) => {
        got.push({ topic, payload, packet });
        if (got.length === n) { clearTimeout(timer); c.off("message", on); resolve(got); }
      };
      c.on("message", on);
    });
  }

  /** Resolves once the broker has finished a publish on `topic` (retained stored, delivered). */
  const published = (topic: string) => new Promise<void>((r) => {
    const on = (p: { topic: string }) => { if (p.topic === topic) { broker.off("publish", on); r(); } };
    broker.on("publish", on);
  });

  const payloadOf = (i: number) => {
    // mostly small, a few over 64 KiB, bytes depending on i so a mix-up shows
    const size = i % 1_000 === 500 ? 100_000 : 8 + (i % 97);
    const b = Buffer.alloc(size);
    b.write(`${i}:`);
    for (let j = String(i).length + 1; j < size; j++) b[j] = (i * 31 + j) % 256;
    return b;
  };

  test("5,000 QoS 0 messages reach a 3.1.1 subscriber in order and intact, by the fast path", async () => {
    const sub = await connect("sub-bulk");
    const pub = await connect("pub-bulk");
    await sub.subscribeAsync("bulk/#", { qos: 0 });
    const got = receive(sub, 5_000, 30_000);
    for (let i = 0; i < 5_000; i++) pub.publish(`bulk/${i % 7}`, payloadOf(i), { qos: 0 });
    const messages = await got;
    for (let i = 0; i < 5_000; i++) {
      const m = messages[i]!;
      if (m.topic !== `bulk/${i % 7}` || !m.payload.equals(payloadOf(i)) || m.packet.qos !== 0 || m.packet.retain) {
        throw new Error(`message ${i}: ${m.topic} ${m.payload.subarray(0, 12).toString()}… qos ${m.packet.qos} retain ${m.packet.retain}`);
      }
    }
    expect(aedesWrote("sub-bulk")).toBe(0);
  }, 60_000);

  test("a retained message published before subscribing arrives with retain set", async () => {
    const pub = await connect("pub-ret");
    const sub = await connect("sub-ret");
    const stored = published("ret/1");
    pub.publish("ret/1", "kept", { qos: 0, retain: true });
    await stored;
    const got = receive(sub, 1);
    await sub.subscribeAsync("ret/1", { qos: 0 });
    const [m] = await got;
    expect(m!.topic).toBe("ret/1");
    expect(m!.payload.toString()).toBe("kept");
    expect(m!.packet.retain).toBe(true);
    expect(aedesWrote("sub-ret")).toBe(0);
  });

  test("a live message published with retain reaches a subscriber with retain cleared", async () => {
    const pub = await connect("pub-ret2");
    const sub = await connect("sub-ret2");
    await sub.subscribeAsync("ret/2", { qos: 0 });
    const got = receive(sub, 1);
    pub.publish("ret/2", "live", { qos: 0, retain: true });
    const [m] = await got;
    expect(m!.payload.toString()).toBe("live");
    expect(m!.packet.retain).toBe(false); // MQTT 3.1.1 §3.3.1.3
  });

  test("a client subscribed with two overlapping filters receives each message once", async () => {
    const pub = await connect("pub-overlap");
    const sub = await connect("sub-overlap");
    await sub.subscribeAsync({ "a/#": { qos: 0 }, "a/b": { qos: 0 } });
    const seen: string[] = [];
    sub.on("message", (topic, payload) => seen.push(`${topic} ${payload}`));
    const done = receive(sub, 4);
    pub.publish("a/b", "1", { qos: 0 });
    pub.publish("a/c", "2", { qos: 0 });
    pub.publish("a/b", "3", { qos: 0 });
    pub.publish("a/end", "4", { qos: 0 });
    await done;
    // a duplicate would come right after its message; give a late one time to show too
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual(["a/b 1", "a/c 2", "a/b 3", "a/end 4"]);
  });

  test("a clean session's QoS 1 subscription receives QoS 1 messages by the fast path, numbered apart", async () => {
    const pub = await connect("pub-q1");
    const sub = await connect("sub-q1");
    await sub.subscribeAsync("q1/t", { qos: 1 });
    const got = receive(sub, 3);
    await pub.publishAsync("q1/t", "first", { qos: 1 });
    await pub.publishAsync("q1/t", "second", { qos: 1, retain: false });
    await pub.publishAsync("q1/t", "third", { qos: 1 });
    const ms = await got;
    expect(ms.map((m) => [m.payload.toString(), m.packet.qos])).toEqual([["first", 1], ["second", 1], ["third", 1]]);
    const ids = ms.map((m) => m.packet.messageId as number);
    expect(new Set(ids).size).toBe(3);
    for (const id of ids) expect(id >= 1 && id <= 65535).toBe(true);
    expect(aedesWrote("sub-q1")).toBe(0);
    // the subscriber's PUBACKs settled them: nothing is sent again
    const again = receive(sub, 1, 300).then(() => "resent", () => "none");
    expect(await again).toBe("none");
  });

  test("a persistent session's QoS 1 subscription takes aedes' own path (its queue records the message id)", async () => {
    const pub = await connect("pub-q1p");
    const sub = await mqtt.connectAsync(url, { clientId: "sub-q1p", reconnectPeriod: 0, clean: false });
    clients.push(sub);
    await sub.subscribeAsync("q1p/t", { qos: 1 });
    const got = receive(sub, 2);
    await pub.publishAsync("q1p/t", "first", { qos: 1 });
    await pub.publishAsync("q1p/t", "second", { qos: 1 });
    expect((await got).map((m) => [m.payload.toString(), m.packet.qos])).toEqual([["first", 1], ["second", 1]]);
    expect(aedesWrote("sub-q1p")).toBe(2);
  });

  test("a QoS 0 message to a QoS 1 subscription takes the fast path", async () => {
    const pub = await connect("pub-q10");
    const sub = await connect("sub-q10");
    await sub.subscribeAsync("q10/t", { qos: 1 });
    const got = receive(sub, 1);
    pub.publish("q10/t", "zero", { qos: 0 });
    const [m] = await got;
    expect([m!.payload.toString(), m!.packet.qos]).toEqual(["zero", 0]);
    expect(aedesWrote("sub-q10")).toBe(0);
  });

  test("an MQTT 3.1 (MQIsdp) subscriber gets QoS 0 messages by the fast path too", async () => {
    const pub = await connect("pub-v3");
    const sub = await connect("sub-v3", 3);
    await sub.subscribeAsync("v3/t", { qos: 0 });
    const got = receive(sub, 2);
    pub.publish("v3/t", "one", { qos: 0 });
    pub.publish("v3/t", "two", { qos: 0 });
    expect((await got).map((m) => m.payload.toString())).toEqual(["one", "two"]);
    expect(aedesWrote("sub-v3")).toBe(0);
  });

  test("a message carrying MQTT 5 properties goes to a 3.1.1 subscriber by aedes' own path", async () => {
    const sub = await connect("sub-props");
    await sub.subscribeAsync("props/t", { qos: 0 });
    const got = receive(sub, 1);
    broker.publish({ cmd: "publish", topic: "props/t", payload: Buffer.from("with properties"), qos: 0, retain: false, dup: false, properties: { contentType: "text/plain" } } as Parameters<Aedes["publish"]>[0], () => {});
    const [m] = await got;
    expect(m!.payload.toString()).toBe("with properties");
    expect(aedesWrote("sub-props")).toBe(1);
  });

  // aedes 1.2 answers an MQTT 5 CONNECT with return code 1 (lib/handlers/connect.js: protocol
  // versions 3 and 4 only), so no MQTT 5 client can subscribe; the fast paths must not change that.
  test("an MQTT 5 client is still refused by aedes 1.2 (unacceptable protocol version)", async () => {
    const err = await mqtt.connectAsync(url, { clientId: "v5", protocolVersion: 5, reconnectPeriod: 0 }).then(
      (c) => { clients.push(c); return null; },
      (e: Error & { code?: number }) => e,
    );
    expect(err?.code).toBe(1);
  });
});

// mqemitter runs at most 100 messages at once and starts a queued one from inside a delivery's
// completion: completions nested that way must not grow the stack without bound (aedes defers
// every delivery a turn for this; fastPublishOut completes at once up to a depth).
describe("fastPublishOut under a backlog", () => {
  test("a backlog released at once (a slow subscriber drains) is delivered without overflowing the stack", async () => {
    const broker = await Aedes.createBroker(); // mqemitter concurrency 100, as in broker.ts
    const server = net.createServer((sock) => {
      coalesceWrites(sock);
      const c = broker.handle(sock);
      fastPublishIn(c);
      fastPublishOut(c);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on("uncaughtException", onUncaught);
    const raw = async (clientId: string) => {
      const s = net.connect(port, "127.0.0.1");
      await new Promise((r) => s.once("connect", r));
      s.write(gen({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clientId, clean: true, keepalive: 0 }));
      await new Promise((r) => s.once("data", r)); // CONNACK
      return s;
    };
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const mq = (broker as unknown as { mq: { current: number; length: number } }).mq;
    const conns: net.Socket[] = [];
    let fast: MqttClient | undefined;
    try {
      // a subscriber that stops reading: once its socket is full, each delivery to it waits for 'drain'
      const slow = await raw("slow");
      conns.push(slow);
      slow.write(gen({ cmd: "subscribe", messageId: 1, subscriptions: [{ topic: "x/#", qos: 0 }] }));
      await new Promise((r) => slow.once("data", r)); // SUBACK
      slow.pause();
      fast = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { clientId: "fast", reconnectPeriod: 0 });
      await fast.subscribeAsync("f/#", { qos: 0 });
      let got = 0;
      fast.on("message", () => got++);
      const slowConn = () => (broker as unknown as { clients: Record<string, { conn: net.Socket }> }).clients.slow!.conn;
      const filler = await raw("filler");
      conns.push(filler);
      for (let i = 0; i < 500 && !slowConn().writableNeedDrain; i++) {
        filler.write(encodePublish0("x/big", Buffer.alloc(1 << 20)));
        await sleep(5);
      }
      expect(slowConn().writableNeedDrain).toBe(true);
      // one chunk: 150 messages for the slow subscriber take the 100 slots, the rest queue up
      const N = 20_000;
      const burst: Buffer[] = [];
      for (let i = 0; i < 150; i++) burst.push(encodePublish0("x/small", String(i)));
      for (let i = 0; i < N; i++) burst.push(encodePublish0("f/t", String(i)));
      const pub = await raw("pub");
      conns.push(pub);
      pub.write(Buffer.concat(burst));
      for (let i = 0; i < 100 && mq.length < 1_000; i++) await sleep(20);
      expect(mq.length).toBeGreaterThanOrEqual(1_000);
      // the slow subscriber reads again: its drain releases the queue
      slow.on("data", () => {});
      slow.resume();
      for (let i = 0; i < 300 && got < N && uncaught.length === 0; i++) await sleep(20);
      expect(uncaught.map(String)).toEqual([]);
      expect(got).toBe(N);
    } finally {
      process.off("uncaughtException", onUncaught);
      for (const s of conns) s.destroy();
      await fast?.endAsync(true);
      await new Promise<void>((r) => broker.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 30_000);
});
