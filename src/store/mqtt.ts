// MQTT broker state (the aedes persistence, src/broker/persistence.ts): retained messages,
// persistent-session subscriptions, the outgoing queue of each client, inbound QoS 2 packets and
// wills. A packet is stored as JSON of every field but the payload (see encodePacket) plus the
// payload as a BLOB, or TEXT when aedes handed over a string; columns next to it repeat the
// fields that lookups filter on.
import type { Executor, Stmt } from "./db.ts";
import type { Dialect } from "../core/dialect.ts";

// The two MQTT migrations are plain objects: the ranges of src/store/migrations/ list (and
// type-check) them, so this file does not import them back.
export const MQTT_MIGRATION = {
  version: 3,
  name: "mqtt persistence",
  up: [
    // Topics start with the owning system key, so the range scans of retainedRange read one
    // system's rows through the primary key.
    `CREATE TABLE mqtt_retained (
      topic TEXT PRIMARY KEY,
      packet TEXT NOT NULL,
      payload BLOB
    )`,
    // options: JSON of the stored subscription (qos, rh, rap, nl, subscriptionIdentifier).
    `CREATE TABLE mqtt_subscriptions (
      client_id TEXT NOT NULL,
      topic TEXT NOT NULL,
      qos INTEGER NOT NULL,
      options TEXT NOT NULL,
      PRIMARY KEY (client_id, topic)
    )`,
    // seq is the rowid: queue order. Every index below ends in it implicitly, so "the first
    // row of a client that ..." is one index seek, whatever the length of the queue.
    `CREATE TABLE mqtt_outgoing (
      seq INTEGER PRIMARY KEY,
      client_id TEXT NOT NULL,
      broker_id TEXT,
      broker_counter INTEGER,
      message_id INTEGER,
      packet TEXT NOT NULL,
      payload BLOB
    )`,
    `CREATE INDEX mqtt_outgoing_client ON mqtt_outgoing(client_id)`,
    `CREATE INDEX mqtt_outgoing_broker ON mqtt_outgoing(client_id, broker_id, broker_counter)`,
    `CREATE INDEX mqtt_outgoing_message ON mqtt_outgoing(client_id, message_id)`,
    `CREATE TABLE mqtt_incoming (
      client_id TEXT NOT NULL,
      message_id INTEGER NOT NULL,
      packet TEXT NOT NULL,
      payload BLOB,
      PRIMARY KEY (client_id, message_id)
    )`,
    `CREATE TABLE mqtt_wills (
      client_id TEXT PRIMARY KEY,
      broker_id TEXT,
      packet TEXT NOT NULL,
      payload BLOB
    )`,
  ],
};

/** Client ids became "<systemKey>/<client id>" (a client id names a session within one system).
 *  Stored state moves to the scoped id of the system its topic lies in; a row whose topic names
 *  no system (a PUBREL in flight, a shared subscription) is dropped. */
const SCOPED_BY_TOPIC = (table: string, topicOf: (d: Dialect) => string) => [
  (d: Dialect) => { const topic = topicOf(d); return `DELETE FROM ${table} WHERE NOT EXISTS (SELECT 1 FROM systems WHERE system_key = substr(${topic}, 1, ${d.position(topic, "'/'")} - 1))`; },
  (d: Dialect) => { const topic = topicOf(d); return `UPDATE ${table} SET client_id = substr(${topic}, 1, ${d.position(topic, "'/'")}) || client_id`; },
];
const packetTopic = (d: Dialect) => d.jsonText("packet", "topic");
export const MQTT_SCOPE_MIGRATION = {
  version: 12,
  name: "mqtt client ids scoped by system",
  up: [
    ...SCOPED_BY_TOPIC("mqtt_subscriptions", () => "topic"),
    ...SCOPED_BY_TOPIC("mqtt_outgoing", packetTopic),
    ...SCOPED_BY_TOPIC("mqtt_incoming", packetTopic),
    ...SCOPED_BY_TOPIC("mqtt_wills", packetTopic),
  ],
};

/** A packet as aedes hands it over: mqtt-packet fields plus aedes' own (brokerId, brokerCounter, ...). */
export interface MqttPacket {
  cmd?: string; topic?: string; payload?: unknown; qos?: number; retain?: boolean; dup?: boolean;
  messageId?: number; brokerId?: string | null; brokerCounter?: number; clientId?: string;
  [field: string]: unknown;
}
/** A stored packet: JSON of its fields, and the payload. */
export interface PacketRow { packet: string; payload: Uint8Array | string | null }
export interface OutgoingRow extends PacketRow { seq: number }
export interface SubscriptionRow { client_id: string; topic: string; qos: number; options: string }
export interface RetainedRow extends PacketRow { topic: string }
export interface WillRow extends PacketRow { client_id: string }

// ---------------------------------------------------------------------------------------------
// Packet codec. JSON keeps the fields and their order (the payload comes back last). One-key
// marker objects carry what JSON cannot: a Buffer below the top level (MQTT 5 correlation data)
// and a field present with the value undefined (aedes-packet sets `messageId: undefined`). Marker
// keys start with NUL; object keys that do are escaped by doubling it, so a user property from
// the wire can never pass for a marker.

const BUF = "\u0000b";
const UNDEF = "\u0000u";
const NUL = "\u0000";

function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const v = this[key]; // before toJSON: a Buffer is still a Buffer here
  if (v instanceof Uint8Array) return { [BUF]: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") };
  if (v === undefined) return { [UNDEF]: 1 };
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    let escaped: Record<string, unknown> | undefined;
    for (const k in value) if (k.startsWith(NUL)) { escaped = {}; break; }
    if (escaped) {
      for (const [k, x] of Object.entries(value)) escaped[k.startsWith(NUL) ? NUL + k : k] = x;
      return escaped;
    }
  }
  return value;
}

function isMarker(o: Record<string, unknown>, key: string): boolean {
  if (!Object.hasOwn(o, key)) return false;
  for (const k in o) if (k !== key) return false;
  return true;
}

/** Undoes the markers of `replacer` in a parsed value (only called when the text has a NUL escape). */
function revive(v: unknown): unknown {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = revive(v[i]);
    return v;
  }
  const o = v as Record<string, unknown>;
  if (isMarker(o, BUF)) return Buffer.from(o[BUF] as string, "base64");
  if (isMarker(o, UNDEF)) return undefined;
  let renamed = false;
  for (const k in o) {
    o[k] = revive(o[k]);
    if (k.startsWith(NUL)) renamed = true;
  }
  if (!renamed) return o;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(o)) out[k.startsWith(NUL) ? k.slice(1) : k] = x;
  return out;
}

/** A packet's stored form. A Buffer (or Uint8Array) payload goes to its own column; any other
 *  payload value, a string included, stays in the JSON (a BLOB column would give a string back as
 *  bytes on PostgreSQL). */
export function encodePacket(p: object): PacketRow {
  const raw = (p as { payload?: unknown }).payload;
  if (raw instanceof Uint8Array) {
    const { payload: _, ...rest } = p as { payload?: unknown };
    return { packet: JSON.stringify(rest, replacer), payload: raw };
  }
  return { packet: JSON.stringify(p, replacer), payload: null };
}

const toBuffer = (b: Uint8Array): Buffer => (Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));

export function decodePacket(row: PacketRow): MqttPacket {
  const parsed = JSON.parse(row.packet);
  const p = (row.packet.includes("\\u0000") ? revive(parsed) : parsed) as MqttPacket;
  if (row.payload !== null) p.payload = typeof row.payload === "string" ? row.payload : toBuffer(row.payload);
  return p;
}

/** The JSON text of one field value, as encodePacket would store it. */
const encodeValue = (v: unknown): string => JSON.stringify(v, replacer);

/** A stored packet with its messageId set (in place; the other fields keep their stored form). */
function withMessageId(packet: string, messageId: unknown): string {
  const o = JSON.parse(packet) as Record<string, unknown>;
  o.messageId = JSON.parse(encodeValue(messageId));
  return JSON.stringify(o);
}

// ---------------------------------------------------------------------------------------------

const PACKET = `packet, payload`;

export const mqttRepo = {
  // Retained messages.
  putRetained(ex: Executor, topic: string, p: PacketRow) {
    return ex.run(`INSERT INTO mqtt_retained(topic, packet, payload) VALUES (?, ?, ?)
      ON CONFLICT(topic) DO UPDATE SET packet = excluded.packet, payload = excluded.payload`, [topic, p.packet, p.payload]);
  },
  deleteRetained: (ex: Executor, topic: string) => ex.run(`DELETE FROM mqtt_retained WHERE topic = ?`, [topic]),
  retained: (ex: Executor, topic: string) => ex.get<RetainedRow>(`SELECT topic, ${PACKET} FROM mqtt_retained WHERE topic = ?`, [topic]),
  /** One page of topics in [from, to) in topic order (`to` null: no upper bound); `after`
   *  continues a scan past the last topic of the previous page. */
  retainedRange(ex: Executor, from: string, to: string | null, after: string | null, limit: number) {
    const lower = after === null ? `topic >= ?` : `topic > ?`;
    const args: unknown[] = [after ?? from];
    let sql = `SELECT topic, ${PACKET} FROM mqtt_retained WHERE ${lower}`;
    if (to !== null) { sql += ` AND topic < ?`; args.push(to); }
    args.push(limit);
    return ex.all<RetainedRow>(`${sql} ORDER BY topic LIMIT ?`, args);
  },

  // Subscriptions of persistent sessions.
  allSubscriptions: (ex: Executor) =>
    ex.all<SubscriptionRow>(`SELECT client_id, topic, qos, options FROM mqtt_subscriptions ORDER BY rowid`),
  /** Upserting keeps the row (and its rowid, the order subscriptions are restored in). */
  putSubscription: (clientId: string, topic: string, qos: number, options: string): Stmt => ({
    sql: `INSERT INTO mqtt_subscriptions(client_id, topic, qos, options) VALUES (?, ?, ?, ?)
      ON CONFLICT(client_id, topic) DO UPDATE SET qos = excluded.qos, options = excluded.options`,
    args: [clientId, topic, qos, options],
  }),
  deleteSubscription: (clientId: string, topic: string): Stmt =>
    ({ sql: `DELETE FROM mqtt_subscriptions WHERE client_id = ? AND topic = ?`, args: [clientId, topic] }),
  deleteSubscriptions: (ex: Executor, clientId: string) => ex.run(`DELETE FROM mqtt_subscriptions WHERE client_id = ?`, [clientId]),

  // Outgoing queue.
  outgoingCounts: (ex: Executor) =>
    ex.all<{ client_id: string; n: number }>(`SELECT client_id, count(*) AS n FROM mqtt_outgoing GROUP BY client_id`),
  outgoingCount: async (ex: Executor, clientId: string) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM mqtt_outgoing WHERE client_id = ?`, [clientId]))!.n,
  enqueue: (clientId: string, p: MqttPacket, row: PacketRow): Stmt => ({
    sql: `INSERT INTO mqtt_outgoing(client_id, broker_id, broker_counter, message_id, packet, payload) VALUES (?, ?, ?, ?, ?, ?)`,
    args: [clientId, p.brokerId ?? null, p.brokerCounter ?? null, p.messageId ?? null, row.packet, row.payload],
  }),
  /** Drops the client's `n` oldest queued packets. */
  dropOldest: (clientId: string, n: number): Stmt => ({
    sql: `DELETE FROM mqtt_outgoing WHERE seq IN (SELECT seq FROM mqtt_outgoing WHERE client_id = ? ORDER BY seq LIMIT ?)`,
    args: [clientId, n],
  }),
  /** aedes' outgoingUpdate. The queued packet of the same publication (same brokerId and
   *  brokerCounter) gets the new messageId; only when there is none, the first from another
   *  broker with the same messageId is replaced by `p` (a PUBREL). The publication's own row comes
   *  first: a row whose messageId an earlier session handed out (its broker died before the
   *  acknowledgement) may hold the same messageId ahead of it, and replacing that row would lose
   *  its message. Returns whether a packet matched. */
  async updateOutgoing(ex: Executor, clientId: string, p: MqttPacket, row: PacketRow): Promise<boolean> {
    // the new packet is made here rather than in SQL: PostgreSQL's JSON functions refuse the
    // NUL-prefixed marker keys a stored packet may hold
    const same = `broker_id IS NOT DISTINCT FROM ?1 AND broker_counter IS NOT DISTINCT FROM ?2`;
    const hit = await ex.get<{ seq: number; packet: string; same: number }>(`SELECT seq, packet, CASE WHEN ${same} THEN 1 ELSE 0 END AS same FROM mqtt_outgoing
      WHERE seq = coalesce(
        (SELECT seq FROM mqtt_outgoing WHERE client_id = ?4 AND ${same} ORDER BY seq LIMIT 1),
        (SELECT seq FROM mqtt_outgoing WHERE client_id = ?4 AND message_id IS NOT DISTINCT FROM ?3 AND broker_id IS DISTINCT FROM ?1 ORDER BY seq LIMIT 1))`,
    [p.brokerId ?? null, p.brokerCounter ?? null, p.messageId ?? null, clientId]);
    if (!hit) return false;
    const r = hit.same
      ? await ex.run(`UPDATE mqtt_outgoing SET packet = ?, message_id = ? WHERE seq = ?`, [withMessageId(hit.packet, p.messageId), p.messageId ?? null, hit.seq])
      : await ex.run(`UPDATE mqtt_outgoing SET packet = ?, payload = ?, broker_id = ?, broker_counter = ?, message_id = ? WHERE seq = ?`,
        [row.packet, row.payload, p.brokerId ?? null, p.brokerCounter ?? null, p.messageId ?? null, hit.seq]);
    return r.changes > 0;
  },
  /** Removes the client's first queued packet with this messageId; returns it. */
  clearOutgoing: (ex: Executor, clientId: string, messageId: number) =>
    ex.get<PacketRow>(`DELETE FROM mqtt_outgoing WHERE seq = (SELECT seq FROM mqtt_outgoing WHERE client_id = ? AND message_id = ? ORDER BY seq LIMIT 1)
      RETURNING ${PACKET}`, [clientId, messageId]),
  lastOutgoing: async (ex: Executor, clientId: string) =>
    (await ex.get<{ seq: number | null }>(`SELECT max(seq) AS seq FROM mqtt_outgoing WHERE client_id = ?`, [clientId]))?.seq ?? null,
  /** The client's queued packets with `after < seq <= upTo`, in queue order. */
  outgoingPage: (ex: Executor, clientId: string, after: number, upTo: number, limit: number) =>
    ex.all<OutgoingRow>(`SELECT seq, ${PACKET} FROM mqtt_outgoing WHERE client_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
      [clientId, after, upTo, limit]),

  // Inbound QoS 2 packets, between PUBLISH and PUBREL.
  putIncoming: (ex: Executor, clientId: string, messageId: number, p: PacketRow) =>
    ex.run(`INSERT INTO mqtt_incoming(client_id, message_id, packet, payload) VALUES (?, ?, ?, ?)
      ON CONFLICT(client_id, message_id) DO UPDATE SET packet = excluded.packet, payload = excluded.payload`,
    [clientId, messageId, p.packet, p.payload]),
  incoming: (ex: Executor, clientId: string, messageId: number) =>
    ex.get<PacketRow>(`SELECT ${PACKET} FROM mqtt_incoming WHERE client_id = ? AND message_id = ?`, [clientId, messageId]),
  deleteIncoming: (ex: Executor, clientId: string, messageId: number) =>
    ex.run(`DELETE FROM mqtt_incoming WHERE client_id = ? AND message_id = ?`, [clientId, messageId]),
  deleteIncomingOf: (ex: Executor, clientId: string) => ex.run(`DELETE FROM mqtt_incoming WHERE client_id = ?`, [clientId]),

  // Wills.
  putWill: (ex: Executor, clientId: string, brokerId: string | null, p: PacketRow) =>
    ex.run(`INSERT INTO mqtt_wills(client_id, broker_id, packet, payload) VALUES (?, ?, ?, ?)
      ON CONFLICT(client_id) DO UPDATE SET broker_id = excluded.broker_id, packet = excluded.packet, payload = excluded.payload`,
    [clientId, brokerId, p.packet, p.payload]),
  will: (ex: Executor, clientId: string) =>
    ex.get<PacketRow>(`SELECT ${PACKET} FROM mqtt_wills WHERE client_id = ?`, [clientId]),
  /** Deletes the client's will (only if it was stored by `brokerId`, when given); returns it. */
  deleteWill: (ex: Executor, clientId: string, brokerId: string | null) =>
    ex.get<PacketRow>(`DELETE FROM mqtt_wills WHERE client_id = ?1 AND (CAST(?2 AS TEXT) IS NULL OR broker_id = ?2) RETURNING ${PACKET}`, [clientId, brokerId]),
  /** One page of the wills not stored by one of `brokerIds`, in client id order after `after`. */
  willsPage: (ex: Executor, brokerIds: string[], after: string | null, limit: number) =>
    ex.all<WillRow>(`SELECT client_id, ${PACKET} FROM mqtt_wills
      WHERE ${after === null ? "" : "client_id > ? AND "}(broker_id IS NULL OR NOT ${ex.dialect.inJsonArray("broker_id", "?")})
      ORDER BY client_id LIMIT ?`, after === null ? [JSON.stringify(brokerIds), limit] : [after, JSON.stringify(brokerIds), limit]),
};
