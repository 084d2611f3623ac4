// The QoS 0 and 1 PUBLISH fast paths, in and out, around aedes. Most broker traffic is QoS 0
// publishes and QoS 1 telemetry, and aedes spends most of a message's time on them outside its
// routing: mqtt-packet's streaming parser (a BufferList, a state machine, debug calls) on the way
// in, and on the way out a setImmediate, a packet copy and writeToStream's four or five writes per
// delivery. Here:
// - in: the bytes are split into frames; a QoS 0 or 1 PUBLISH of an MQTT 3.1/3.1.1 client is
//   decoded directly and emitted as the same packet object, every other frame goes whole to one
//   mqtt-packet parser shared by every connection (FrameParser replaces aedes' parser of each);
// - out: a QoS 0 delivery, and a QoS 1 delivery to a clean session (nothing of it is stored: aedes
//   only numbers it), to an MQTT 3.1/3.1.1 client is encoded as one buffer and written (into the
//   connection's batch, see writes.ts); it completes at once unless the connection must drain.
//   fastPublishIn does not re-enter its read loop, and complete() bounds completions nested
//   through mqemitter's queue (aedes defers every delivery a turn for fear of both).
// Everything else (QoS 2, persistent sessions' QoS 1, MQTT 5, a connection not yet connected)
// takes aedes' own path.
import { EventEmitter } from "node:events";
import type { Client } from "aedes";
import mqttPacket from "mqtt-packet";

// mqtt-packet writes a packet's 16-bit numbers (message ids, topic lengths) from a table of
// 65,536 two-byte buffers, built at its first write: about 3.3 MB of heap that stays, for a
// broker whose PUBLISH frames are encoded here. Its other packets (CONNACK, SUBACK, PUBACK, ...)
// allocate their two bytes instead.
(mqttPacket as unknown as { writeToStream: { cacheNumbers: boolean } }).writeToStream.cacheNumbers = false;

const PUBLISH = 3;
/** The largest packet a client may send (MQTT allows 256 MiB; one such packet is a gateway's
 *  memory): the HTTP API's body limit. A bigger one is a protocol error that closes the connection. */
export const MAX_PACKET_BYTES = 32 * 1024 * 1024;

interface Settings { protocolVersion?: number; bridgeMode?: boolean }

/** mqtt-packet's parser, one for every connection: each frame it is given is whole (split by
 *  FrameParser), so between frames it holds nothing of a connection but the settings it is
 *  handed for the frame. What it emits is taken here and emitted by the connection's parser. */
type MqttPacketParser = EventEmitter & { settings: Settings; parse(b: Buffer): number; error: Error | null; _list: { length: number }; _stateCounter: number; _pos: number; _resetState(): void };
let shared: MqttPacketParser | null = null;
let parsed: Record<string, unknown> | null = null;
let parseError: Error | null = null;
function sharedParser() {
  if (shared) return shared;
  shared = mqttPacket.parser() as unknown as MqttPacketParser;
  shared.on("packet", (p: Record<string, unknown>) => { parsed = p; });
  shared.on("error", (e: Error) => { parseError = e; });
  return shared;
}

/** A connection's parser, in place of the one aedes makes for every client (mqtt-packet's Parser:
 *  an EventEmitter with a BufferList stream, a packet being filled and the CONNECT packet, about
 *  1.5 KB on each idle connection). This one holds the bytes not yet parsed and the protocol
 *  version: it splits them into frames, decodes a QoS 0 or 1 PUBLISH of an MQTT 3.1/3.1.1 client
 *  itself and hands every other frame whole to the shared mqtt-packet parser. It emits 'packet'
 *  and 'error' as aedes' did, to the listeners aedes gave that one. */
export class FrameParser extends EventEmitter {
  /** aedes': the client, and the packets read before its CONNECT was accepted */
  client: unknown = null;
  _queue: unknown[] | null = null;
  settings: Settings = {};
  // bytes not yet parsed: `pending`, then `later` while a frame known to be longer is incomplete
  // (joined once the frame is whole: joining every chunk would copy a big frame quadratically)
  private pending: Buffer | null = null;
  private later: Buffer[] | null = null;
  private laterBytes = 0;
  private need = 0;
  private busy = false;

  parse(chunk: Buffer): number {
    if (this.pending === null || this.pending.length === 0) this.pending = chunk;
    else if (this.pending.length + this.laterBytes + chunk.length < this.need) { (this.later ??= []).push(chunk); this.laterBytes += chunk.length; return this.pending.length + this.laterBytes; }
    else { this.pending = Buffer.concat([this.pending, ...(this.later ?? []), chunk]); this.later = null; this.laterBytes = 0; }
    // a packet handled synchronously can read the socket again: the running loop takes the bytes
    if (this.busy) return this.pending.length;
    this.busy = true;
    this.need = 0;
    try {
      while (this.pending !== null && this.pending.length > 0) {
        const buf: Buffer = this.pending;
        const header = frameHeader(buf);
        if (header === null) break; // an incomplete header: wait for more bytes
        if (header === undefined) { this.pending = null; this.parseWhole(buf); break; } // malformed: mqtt-packet reports it
        const [bodyStart, end] = header;
        if (end - bodyStart > MAX_PACKET_BYTES) { this.pending = null; this.emit("error", new Error(`packet larger than ${MAX_PACKET_BYTES} bytes`)); break; }
        if (end > buf.length) { this.need = end; break; }
        this.pending = end === buf.length ? null : buf.subarray(end);
        const v = this.settings.protocolVersion;
        const qosBits = buf[0]! & 0x06;
        const packet = buf[0]! >> 4 === PUBLISH && qosBits <= 2 && (v === 4 || v === 3) ? publishFrame(buf, bodyStart, end, qosBits >> 1) : null;
        if (packet) this.emit("packet", packet);
        else this.parseWhole(buf.subarray(0, end));
      }
    } finally {
      this.busy = false;
    }
    return this.pending?.length ?? 0;
  }

  /** One whole frame (or a malformed rest) through the shared mqtt-packet parser. */
  parseWhole(frame: Buffer) {
    const p = sharedParser();
    p.settings = this.settings;
    parsed = null;
    parseError = null;
    try {
      p.parse(frame);
    } finally {
      // nothing of this connection stays in it: a frame it did not finish, or an error, is dropped
      // (its reset leaves the read position, which it otherwise zeroes only after a whole packet)
      if (p.error || p._list.length > 0 || p._stateCounter !== 0) { p._resetState(); p._pos = 0; }
      p.error = null;
    }
    const packet = parsed as Record<string, unknown> | null, err = parseError as Error | null;
    parsed = null;
    parseError = null;
    if (err) { this.emit("error", err); return; }
    if (!packet) return;
    // a CONNECT sets the protocol version of what follows (only that: the packet holds the credentials)
    if (packet.cmd === "connect") this.settings = packet.bridgeMode ? { protocolVersion: packet.protocolVersion as number, bridgeMode: true } : { protocolVersion: packet.protocolVersion as number };
    this.emit("packet", packet);
  }
}

/** Runs `handle` (aedes' handle(), which makes a client and its parser) with mqtt-packet making
 *  a FrameParser as the parser: aedes' own is never made (making it, to drop it at once, left its
 *  stream's pieces to fragment the heap). Synchronous, so nothing else makes a parser meanwhile. */
export function withFrameParser<T>(handle: () => T): T {
  const m = mqttPacket as unknown as { parser: () => unknown };
  const parser = m.parser;
  m.parser = () => new FrameParser();
  try { return handle(); } finally { m.parser = parser; }
}

/** The client's FrameParser: the one it was made with (withFrameParser), or one put in place of
 *  aedes' parser, with that one's listeners (aedes listens on it; nothing else holds it). Call it
 *  right after aedes' handle(), before any bytes are read. */
export function fastPublishIn(client: Client): FrameParser {
  const c = client as unknown as { _parser: EventEmitter & { client: unknown; _queue: unknown[] | null } };
  const old = c._parser;
  if (old instanceof FrameParser) return old;
  const parser = new FrameParser();
  parser.client = old.client;
  parser._queue = old._queue;
  for (const event of ["packet", "error"] as const) for (const l of old.listeners(event)) parser.on(event, l as (...a: unknown[]) => void);
  old.removeAllListeners();
  c._parser = parser as unknown as typeof old;
  return parser;
}

/** [body start, frame end] of the frame at the start of buf; null if its header is incomplete,
 *  undefined if the remaining length is malformed (more than four bytes). */
function frameHeader(buf: Buffer): [number, number] | null | undefined {
  let length = 0;
  let mul = 1;
  for (let i = 1; i <= 4; i++) {
    if (i >= buf.length) return null;
    const b = buf[i]!;
    length += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [i + 1, i + 1 + length];
    mul *= 128;
  }
  return undefined;
}

/** The packet mqtt-packet would make of a QoS 0 or 1 PUBLISH, or null to leave the frame to it. */
function publishFrame(buf: Buffer, start: number, end: number, qos: number) {
  if (end - start < 2) return null;
  const topicEnd = start + 2 + buf.readUInt16BE(start);
  const payloadStart = topicEnd + (qos > 0 ? 2 : 0);
  if (payloadStart > end) return null;
  const packet = {
    cmd: "publish",
    retain: (buf[0]! & 1) !== 0,
    qos,
    dup: (buf[0]! & 8) !== 0,
    length: end - start,
    topic: buf.toString("utf8", start + 2, topicEnd),
    // a copy: a retained or queued payload must not hold the whole read chunk
    payload: Buffer.from(buf.subarray(payloadStart, end)),
  };
  return qos > 0 ? { ...packet, messageId: buf.readUInt16BE(topicEnd) } : packet;
}

/** Delivers QoS 0 messages to the client as single-buffer frames. Call it right after aedes'
 *  handle(), before any subscription takes the client's deliver0. `grantedQoS` (the client's
 *  best grant for a topic): a message of QoS 1 or 2 reaching a QoS 0 subscription's handler takes
 *  the QoS path when another subscription of the client was granted more (MQTT 3.1.1 §3.3.5). */
export function fastPublishOut(client: Client, grantedQoS?: (client: Client, topic: string) => number): void {
  // the deliveries close over these consts alone (every other scope they held would be one more
  // object on each idle connection)
  const c = client as unknown as FastClient, self = client, granted = grantedQoS;
  const aedesDeliver0 = c.deliver0, aedesDeliverQoS = c.deliverQoS;
  c.deliver0 = (packet: Outbound, cb: () => void) => {
    if ((packet.qos ?? 0) > 0 && granted && granted(self, packet.topic) > 0) return c.deliverQoS(packet, cb);
    if (!(c.connected || c.connecting) || (c.version !== 4 && c.version !== 3) || packet.properties) return aedesDeliver0(packet, cb);
    // as aedes: MQTT 5 no-local, then once per message (a client subscribed twice gets it once)
    if ((packet.clientId === c.id && packet.nl) || !firstDelivery(c.duplicates, packet)) return complete(cb);
    const out = c.broker.authorizeForward(self, packet);
    if (!out) return complete(cb);
    sent(c, encodePublish0(out.topic, out.payload, out.retain), cb);
  };
  // a clean session's QoS 1 delivery: numbered as aedes numbers it (QoSPacket), nothing stored
  // (its PUBACK finds nothing queued; see persistence.ts)
  c.deliverQoS = (packet: Outbound, cb: () => void) => {
    if (packet.qos !== 1 || !c.clean || !(c.connected || c.connecting) || (c.version !== 4 && c.version !== 3) || packet.properties) return aedesDeliverQoS(packet, cb);
    if ((packet.clientId === c.id && packet.nl) || !firstDelivery(c.duplicates, packet)) return complete(cb);
    const out = c.broker.authorizeForward(self, packet);
    if (!out) return complete(cb);
    // at most at the QoS of the client's subscription to exactly this topic, as aedes does
    const sub = c.subscriptions[out.topic];
    if (out.qos === 0 || (sub && (sub.qos ?? 0) === 0)) return sent(c, encodePublish0(out.topic, out.payload, out.retain), cb);
    let messageId = out.messageId;
    if (!messageId) {
      messageId = c._nextId;
      c._nextId = c._nextId >= 65535 ? 1 : c._nextId + 1;
    }
    sent(c, encodePublish(out.topic, out.payload, out.retain ?? false, 1, messageId, out.dup ?? false), cb);
  };
}

/** What fastPublishOut uses of aedes' client. */
interface FastClient {
  id: string; version: number | null; connecting: boolean; connected: boolean; errored: boolean; clean: boolean;
  duplicates: Record<string, number>; conn: { write(b: Buffer): boolean }; _nextId: number;
  subscriptions: Record<string, { qos?: number } | undefined>;
  broker: { authorizeForward(client: Client, packet: unknown): Outbound | null | undefined };
  deliver0(packet: Outbound, cb: () => void): void;
  deliverQoS(packet: Outbound, cb: () => void): void;
  waitForDrain(cb: () => void): void;
}

/** A delivery's frame written: complete now, or once the connection drains. */
function sent(c: FastClient, frame: Buffer, cb: () => void) {
  const ok = c.conn.write(frame);
  if (!ok && !c.errored) c.waitForDrain(cb);
  else complete(cb);
}

/** How deep deliveries may complete inside one another before one waits a turn. */
const MAX_SYNC_DEPTH = 32;
let depth = 0;

/** Completes a delivery at once, the common case. A completion can start the next message
 *  mqemitter queued (when its concurrency is full), whose deliveries complete inside it, and so
 *  on: past MAX_SYNC_DEPTH the completion waits a turn, so a released backlog cannot overflow the
 *  stack (aedes defers every delivery for this reason). */
function complete(cb: () => void) {
  if (depth >= MAX_SYNC_DEPTH) { setImmediate(cb); return; }
  depth++;
  try { cb(); } finally { depth--; }
}

interface Outbound {
  topic: string; payload: Buffer | string | undefined; retain?: boolean; qos?: number; messageId?: number; dup?: boolean;
  brokerId?: string; brokerCounter?: number; clientId?: string; nl?: boolean; properties?: unknown;
}

/** aedes' dedupe: a message (broker id, counter) reaches a client at most once. */
function firstDelivery(duplicates: Record<string, number>, packet: Outbound): boolean {
  const id = packet.brokerId;
  if (!id) return true;
  const counter = packet.brokerCounter ?? 0;
  if ((duplicates[id] ?? 0) >= counter) return false;
  duplicates[id] = counter;
  return true;
}

/** A QoS 0 PUBLISH frame (MQTT 3.1.1 §3.3) in one buffer. */
export function encodePublish0(topic: string, payload: Buffer | string | undefined, retain = false): Buffer {
  return encodePublish(topic, payload, retain, 0, 0, false);
}

/** A PUBLISH frame (MQTT 3.1.1 §3.3) in one buffer; the message id is written for QoS > 0. */
export function encodePublish(topic: string, payload: Buffer | string | undefined, retain: boolean, qos: number, messageId: number, dup: boolean): Buffer {
  const topicLen = Buffer.byteLength(topic);
  const body = typeof payload === "string" ? Buffer.from(payload) : (payload ?? EMPTY);
  const length = 2 + topicLen + (qos > 0 ? 2 : 0) + body.length;
  let lenBytes = 1;
  for (let n = length; n >= 128; n = Math.floor(n / 128)) lenBytes++;
  const frame = Buffer.allocUnsafe(1 + lenBytes + length);
  frame[0] = 0x30 | (dup && qos > 0 ? 8 : 0) | (qos << 1) | (retain ? 1 : 0);
  let o = 1;
  let n = length;
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    frame[o++] = b;
  } while (n > 0);
  frame.writeUInt16BE(topicLen, o);
  o += 2;
  o += frame.write(topic, o, "utf8");
  if (qos > 0) { frame.writeUInt16BE(messageId, o); o += 2; }
  body.copy(frame, o);
  return frame;
}

const EMPTY = Buffer.alloc(0);
