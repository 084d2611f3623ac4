// The aedes persistence on libSQL (tables and SQL in src/store/mqtt.ts): QoS 1/2 state, persistent
// sessions, retained messages and wills survive a broker restart. Same async API as
// aedes-persistence's asyncPersistence.js, and passes its conformance suite
// (test/unit/broker/persistence.test.ts).
//
// The database is the source of truth; memory holds what hot paths read:
//  - subscriptions, with the QoS > 0 ones in a QlobberSub trie, since subscriptionsByTopic runs on
//    every QoS > 0 publish. Loaded in setup(), written to after each database write succeeds;
//  - the length of each client's outgoing queue, so bounding it costs no COUNT per enqueue.
// Past `offlineQueueLimit` queued packets a client's oldest are dropped: a slow or absent
// subscriber cannot exhaust memory or disk.
//
// In a cluster (`shared`) several brokers use one database: each tells the others of its
// subscription changes through the brokers' emitter, so a QoS > 0 publish on any node queues for
// every persistent session wherever it was made; and queue lengths are read again before trimming
// (another node may have sent and cleared what this one counted).
//
// A full disk (the database refuses writes for want of space) disconnects no client and loses no
// retained message: retained messages, queued packets and inbound QoS 2 packets it refuses are held
// in memory, served from there, and written once it takes writes again (lost only if the process
// stops first; inbound QoS 2 packets stay in memory until their PUBREL).
import { Readable } from "node:stream";
import PacketJs from "aedes-packet";
// @ts-expect-error qlobber ships no types; the part used here is declared by SubTrie below
import QlobberSubJs from "qlobber/aedes/qlobber-sub";
import type { Logger } from "../core/log.ts";
import { type Db, diskFull, type RunResult, type Stmt } from "../store/db.ts";
import { decodePacket, encodePacket, mqttRepo, type MqttPacket, type PacketRow } from "../store/mqtt.ts";
import { HeldWrites } from "./heldWrites.ts";
import { dollarBlocked, matches, retainedRows } from "./retained.ts";

export type { MqttPacket } from "../store/mqtt.ts";

/** A subscription as in a SUBSCRIBE packet (and as subscriptionsByClient returns it). */
export interface Subscription { topic: string; qos: number; rh?: number; rap?: boolean; nl?: boolean; subscriptionIdentifier?: number }
/** A QoS > 0 subscription matching a topic (subscriptionsByTopic). */
export interface TopicSubscription { clientId: string; topic: string; qos: number; rh?: number; rap?: boolean; nl?: boolean }
export interface LibsqlPersistenceOptions {
  db: Db;
  /** Most packets kept queued per client; the oldest go first. Default 1000; Infinity: no bound. */
  offlineQueueLimit?: number;
  /** other brokers use the same database (a cluster) */
  shared?: boolean;
  /** told when writes are held in memory for a full disk, and when they are written */
  log?: Logger;
  /** topics start with a tenant's key ("<systemKey>/<topic>"): MQTT's rule on a topic's first
   *  level ([MQTT-4.7.2-1]: a filter starting with a wildcard does not match a topic starting
   *  with "$") applies to the level after the key */
  scoped?: boolean;
}

interface ClientRef { id: string }
type EmitterPacket = { topic: string; payload: Buffer };
interface BrokerRef { id: string; mq?: { on(topic: string, fn: (p: EmitterPacket, done: () => void) => void): void; emit(p: EmitterPacket, done?: (err?: Error) => void): void } }
/** A subscription change of one broker, for the others (`$SYS/<broker id>/outpost/subscriptions`). */
type SubscriptionNews = { op: "add"; clientId: string; subs: [string, StoredSubscription][] } | { op: "remove"; clientId: string; topics: string[] } | { op: "clean"; clientId: string };
const NEWS_TOPIC = (brokerId: string) => `$SYS/${brokerId}/outpost/subscriptions`;
type StoredSubscription = Omit<Subscription, "topic">;

interface SubTrie {
  subscriptionsCount: number;
  add(topic: string, sub: TopicSubscription): void;
  remove(topic: string, sub: { clientId: string; topic: string }): void;
  match(topic: string): TopicSubscription[];
}
const QlobberSub = QlobberSubJs as new (opts: { wildcard_one: string; wildcard_some: string; separator: string }) => SubTrie;
const newTrie = () => new QlobberSub({ wildcard_one: "+", wildcard_some: "#", separator: "/" });
/** aedes-packet: the normalised copy aedes' own persistences queue (messageId reset for QoS > 0). */
const Packet = PacketJs as unknown as new (p: object) => MqttPacket;

const PAGE = 256;

/** The record kept per subscription: its options, without the fields the packet left out. */
function stored(s: Subscription): StoredSubscription {
  const r: StoredSubscription = { qos: s.qos };
  if (s.rh !== undefined) r.rh = s.rh;
  if (s.rap !== undefined) r.rap = s.rap;
  if (s.nl !== undefined) r.nl = s.nl;
  if (s.subscriptionIdentifier !== undefined) r.subscriptionIdentifier = s.subscriptionIdentifier;
  return r;
}

export class LibsqlPersistence {
  readonly offlineQueueLimit: number;
  readonly #db: Db;
  #broker: BrokerRef | undefined;
  #trie = newTrie();
  /** clientId -> topic -> subscription, in the order first subscribed (the table's rowid order). */
  readonly #subs = new Map<string, Map<string, StoredSubscription>>();
  /** clientId -> number of queued outgoing packets; absent when none. */
  readonly #queued = new Map<string, number>();
  #destroyed = false;
  readonly #shared: boolean;
  /** the level MQTT's first-level rules apply to (1 when topics carry a tenant's key) */
  readonly #root: number;
  readonly #log: Logger | undefined;
  /** writes the database refused for a full disk, in memory until it takes them */
  readonly #held: HeldWrites;

  constructor(opts: LibsqlPersistenceOptions) {
    const limit = opts.offlineQueueLimit ?? 1000;
    if (!(limit === Infinity || (Number.isInteger(limit) && limit >= 1))) throw new RangeError(`offlineQueueLimit must be a positive integer or Infinity, got ${limit}`);
    this.#db = opts.db;
    this.offlineQueueLimit = limit;
    this.#shared = opts.shared ?? false;
    this.#root = opts.scoped ? 1 : 0;
    this.#log = opts.log;
    this.#held = new HeldWrites(this.#db, limit, this.#log, (clients) => this.#recount(clients));
  }

  /** The broker given to setup(). */
  get broker(): BrokerRef | undefined { return this.#broker; }

  /** Called by aedes on listen: loads subscriptions and queue lengths. */
  async setup(broker: BrokerRef): Promise<void> {
    this.#broker = broker;
    this.#trie = newTrie();
    this.#subs.clear();
    this.#queued.clear();
    for (const r of await mqttRepo.allSubscriptions(this.#db)) this.#remember(r.client_id, r.topic, JSON.parse(r.options));
    for (const r of await mqttRepo.outgoingCounts(this.#db)) this.#queued.set(r.client_id, r.n);
    if (this.#shared && broker.mq) {
      broker.mq.on(NEWS_TOPIC("+"), (packet, done) => {
        if (packet.topic !== NEWS_TOPIC(broker.id)) {
          try { this.#heard(JSON.parse(packet.payload.toString("utf8")) as SubscriptionNews); } catch { /* not ours */ }
        }
        done();
      });
    }
  }

  /** Tells the other brokers of a subscription change (after it is in the database). */
  #tell(news: SubscriptionNews) {
    const mq = this.#shared ? this.#broker?.mq : undefined;
    mq?.emit({ topic: NEWS_TOPIC(this.#broker!.id), payload: Buffer.from(JSON.stringify(news)) }, () => {});
  }

  /** Another broker's subscription change: memory only (it wrote the database). */
  #heard(n: SubscriptionNews) {
    if (n.op === "add") for (const [topic, sub] of n.subs) this.#remember(n.clientId, topic, sub);
    else if (n.op === "remove") this.#forget(n.clientId, n.topics);
    else this.#forget(n.clientId, [...(this.#subs.get(n.clientId)?.keys() ?? [])]);
  }

  #forget(clientId: string, topics: string[]) {
    const subs = this.#subs.get(clientId);
    if (!subs) return;
    for (const topic of topics) {
      const sub = subs.get(topic);
      if (!sub) continue;
      if (sub.qos > 0) this.#trie.remove(topic, { clientId, topic });
      subs.delete(topic);
    }
    if (subs.size === 0) this.#subs.delete(clientId);
  }

  /** Drops the in-memory state. The database stays open: it is the caller's. */
  async destroy(): Promise<void> {
    if (this.#destroyed) throw new Error("destroyed called twice!");
    this.#destroyed = true;
    const held = this.#held.stop();
    if (held) this.#log?.error("mqtt: messages held for a full disk were never written (the broker stopped first)", { messages: held });
    this.#trie = newTrie();
    this.#subs.clear();
    this.#queued.clear();
  }

  /** One statement straight; several atomically. */
  #exec(stmts: Stmt[]): Promise<RunResult[]> {
    if (stmts.length === 1) return this.#db.run(stmts[0]!.sql, stmts[0]!.args).then((r) => [r]);
    return this.#db.batch(stmts);
  }

  // -- retained ----------------------------------------------------------------------------------

  /** Stores a retained message; an empty payload deletes the topic's. */
  async storeRetained(packet: MqttPacket): Promise<void> {
    const payload = packet.payload as { length: number } | undefined | null;
    const topic = packet.topic as string;
    const remove = !payload || payload.length === 0;
    // a topic already held stays held: a direct write would be overwritten by the older held one
    if (!this.#held.retained.has(topic)) {
      try {
        if (remove) await mqttRepo.deleteRetained(this.#db, topic);
        else await mqttRepo.putRetained(this.#db, topic, encodePacket(packet));
        return;
      } catch (e) { if (!diskFull(e)) throw e; }
    }
    this.#held.retained.set(topic, remove ? null : decodePacket(encodePacket(packet)));
    this.#held.holding();
  }

  createRetainedStream(pattern: string): Readable {
    return this.createRetainedStreamCombi([pattern]);
  }

  /** The retained messages matching any of the patterns, each once. */
  createRetainedStreamCombi(patterns: string[]): Readable {
    return Readable.from(this.#retainedMatching(patterns));
  }

  async *#retainedMatching(patterns: string[]): AsyncGenerator<MqttPacket> {
    const seen = patterns.length > 1 ? new Set<string>() : undefined;
    const first = (topic: string) => {
      if (!seen) return true;
      if (seen.has(topic)) return false;
      seen.add(topic);
      return true;
    };
    for (const pattern of patterns) {
      // what is held for a full disk stands in for what the database has of the topic
      const held = this.#held.retained.size ? new Map(this.#held.retained) : null;
      for await (const row of retainedRows(this.#db, pattern, this.#root, PAGE)) {
        if (held?.has(row.topic)) continue;
        if (first(row.topic)) yield decodePacket(row);
      }
      if (!held) continue;
      const filter = pattern.split("/");
      for (const [topic, packet] of held) {
        if (!packet || dollarBlocked(filter, topic, this.#root) || !matches(filter, topic)) continue;
        if (first(topic)) yield packet;
      }
    }
  }

  // -- subscriptions -----------------------------------------------------------------------------

  #remember(clientId: string, topic: string, sub: StoredSubscription): void {
    let subs = this.#subs.get(clientId);
    if (!subs) this.#subs.set(clientId, (subs = new Map()));
    const before = subs.get(topic);
    if (sub.qos > 0) this.#trie.add(topic, { clientId, topic, qos: sub.qos, rh: sub.rh, rap: sub.rap, nl: sub.nl });
    else if (before && before.qos > 0) this.#trie.remove(topic, { clientId, topic });
    subs.set(topic, sub);
  }

  async addSubscriptions(client: ClientRef, subs: Subscription[]): Promise<void> {
    if (subs.length === 0) return;
    const records = subs.map((s) => [s.topic, stored(s)] as const);
    await this.#exec(records.map(([topic, r]) => mqttRepo.putSubscription(client.id, topic, r.qos ?? 0, JSON.stringify(r))));
    for (const [topic, r] of records) this.#remember(client.id, topic, r);
    this.#tell({ op: "add", clientId: client.id, subs: records.map(([t, r]) => [t, r]) });
  }

  async removeSubscriptions(client: ClientRef, topics: string[]): Promise<void> {
    if (topics.length === 0) return;
    await this.#exec(topics.map((t) => mqttRepo.deleteSubscription(client.id, t)));
    this.#forget(client.id, topics);
    this.#tell({ op: "remove", clientId: client.id, topics });
  }

  async cleanSubscriptions(client: ClientRef): Promise<void> {
    await mqttRepo.deleteSubscriptions(this.#db, client.id);
    this.#tell({ op: "clean", clientId: client.id });
    const subs = this.#subs.get(client.id);
    if (!subs) return;
    for (const [topic, sub] of subs) if (sub.qos > 0) this.#trie.remove(topic, { clientId: client.id, topic });
    this.#subs.delete(client.id);
  }

  async subscriptionsByClient(client: ClientRef): Promise<Subscription[]> {
    const subs = this.#subs.get(client.id);
    return subs ? [...subs].map(([topic, s]) => ({ topic, ...s })) : [];
  }

  /** The QoS > 0 subscriptions matching a topic: memory only. */
  async subscriptionsByTopic(topic: string): Promise<TopicSubscription[]> {
    const subs = this.#trie.match(topic);
    // [MQTT-4.7.2-1] (aedes checks the first level only, and for "$SYS" topics only)
    if (this.#root === 0 || topic.charCodeAt(topic.indexOf("/") + 1) !== 36 /* $ */) return subs;
    return subs.filter((s) => !dollarBlocked(s.topic.split("/"), topic, this.#root));
  }

  /** QoS > 0 subscriptions, and clients with any subscription. */
  async countOffline(): Promise<{ subsCount: number; clientsCount: number }> {
    return { subsCount: this.#trie.subscriptionsCount, clientsCount: this.#subs.size };
  }

  /** Ids of the clients subscribed to exactly this topic filter. */
  getClientList(topic: string): Readable {
    const ids: string[] = [];
    for (const [clientId, subs] of this.#subs) if (subs.has(topic)) ids.push(clientId);
    return Readable.from(ids);
  }

  // -- outgoing queue ----------------------------------------------------------------------------

  async outgoingEnqueue(sub: { clientId: string }, packet: MqttPacket): Promise<void> {
    await this.outgoingEnqueueCombi([sub], packet);
  }

  /** Queues the packet for each subscription's client, then drops the oldest packets of any
   *  client now over the limit; all in one transaction. */
  async outgoingEnqueueCombi(subs: { clientId: string }[], packet: MqttPacket): Promise<void> {
    if (subs.length === 0) return;
    // one copy per client, however many of its subscriptions matched ([MQTT-3.3.5-1]; aedes passes
    // one entry per subscription). Two copies of one packet were both replayed at the session's
    // return: aedes drops the second as a duplicate and clears it by the publisher's message id,
    // which could remove the first while its new message id was being recorded ("no such packet":
    // the session's connection closed; seen on PostgreSQL)
    if (subs.length > 1) {
      const seen = new Set<string>();
      subs = subs.filter(({ clientId }) => !seen.has(clientId) && !!seen.add(clientId));
    }
    // a client with packets held for a full disk gets this one held after them (its order kept)
    if (this.#held.queue.size && subs.some(({ clientId }) => this.#held.queue.has(clientId))) {
      const p = new Packet(packet);
      for (const { clientId } of subs) if (this.#held.queue.has(clientId)) this.#held.hold(clientId, p);
      subs = subs.filter(({ clientId }) => !this.#held.queue.has(clientId));
      if (subs.length === 0) return;
    }
    // another node may have sent and cleared packets this one counted: count again before trimming
    if (this.#shared) {
      const over = subs.filter(({ clientId }) => (this.#queued.get(clientId) ?? 0) + 1 > this.offlineQueueLimit).map((s) => s.clientId);
      if (over.length) await this.#recount(over);
    }
    const p = new Packet(packet);
    const row = encodePacket(p);
    const stmts: Stmt[] = [];
    const clients = new Set<string>();
    for (const { clientId } of subs) {
      stmts.push(mqttRepo.enqueue(clientId, p, row));
      this.#queued.set(clientId, (this.#queued.get(clientId) ?? 0) + 1);
      clients.add(clientId);
    }
    // Counted before the write, in call order, so concurrent enqueues trim exactly the excess.
    for (const id of clients) {
      const n = this.#queued.get(id)!;
      if (n <= this.offlineQueueLimit) continue;
      stmts.push(mqttRepo.dropOldest(id, n - this.offlineQueueLimit));
      this.#queued.set(id, this.offlineQueueLimit);
    }
    try {
      await this.#exec(stmts);
    } catch (e) {
      await this.#recount(clients);
      if (!diskFull(e)) throw e;
      for (const id of clients) this.#held.hold(id, p);
    }
  }

  /** Re-reads queue lengths after a failed write left the counts unsure. */
  async #recount(clients: Iterable<string>): Promise<void> {
    for (const id of clients) {
      const n = await mqttRepo.outgoingCount(this.#db, id).catch(() => undefined);
      if (n === undefined) continue;
      if (n > 0) this.#queued.set(id, n);
      else this.#queued.delete(id);
    }
  }

  /** Records the messageId a queued packet is sent with (or replaces it by a PUBREL). */
  async outgoingUpdate(client: ClientRef, packet: MqttPacket): Promise<void> {
    const held = this.#held.queue.get(client.id);
    if (held) {
      // as the database's update matches: the same publication, else another broker's packet
      // with this messageId
      let i = held.findIndex((h) => h.brokerId === packet.brokerId && h.brokerCounter === packet.brokerCounter);
      const same = i >= 0;
      if (!same) i = held.findIndex((h) => h.messageId === packet.messageId && h.brokerId !== packet.brokerId);
      if (i >= 0) {
        if (same) held[i]!.messageId = packet.messageId;
        else held[i] = decodePacket(encodePacket(packet));
        return;
      }
    }
    let found: boolean;
    try { found = await mqttRepo.updateOutgoing(this.#db, client.id, packet, encodePacket(packet)); } catch (e) {
      // the stored packet keeps its old messageId: it is sent again at the client's next session
      if (diskFull(e)) return;
      throw e;
    }
    if (!found) throw new Error("no such packet");
  }

  /** Removes the queued packet acknowledged by `packet` (a PUBACK or PUBCOMP will do); returns it. */
  async outgoingClearMessageId(client: ClientRef, packet: MqttPacket): Promise<MqttPacket | undefined> {
    const messageId = packet?.messageId;
    if (typeof messageId !== "number") return undefined;
    // nothing queued for the client (every queued packet is counted here, unless another node
    // may have queued it): an acknowledgement of a live delivery, no statement for it. Each QoS 1
    // PUBACK of a clean session asked the database, about a third of the broker's time at QoS 1.
    if (!this.#shared && !this.#queued.has(client.id)) return this.#held.unhold(client.id, messageId);
    let row: PacketRow | undefined;
    try { row = await mqttRepo.clearOutgoing(this.#db, client.id, messageId); } catch (e) {
      // left queued: sent again at the client's next session (at least once)
      if (!diskFull(e)) throw e;
    }
    if (!row) return this.#held.unhold(client.id, messageId);
    const n = (this.#queued.get(client.id) ?? 1) - 1;
    if (n > 0) this.#queued.set(client.id, n);
    else this.#queued.delete(client.id);
    return decodePacket(row);
  }

  /** The client's queue as it is when reading starts, in order, read a page at a time; packets
   *  queued later are not included (aedes delivers those directly). */
  outgoingStream(client: ClientRef): Readable {
    const db = this.#db;
    // then the packets held for a full disk, which came after the stored ones
    const held = [...(this.#held.queue.get(client.id) ?? [])];
    return Readable.from((async function* () {
      const last = await mqttRepo.lastOutgoing(db, client.id);
      for (let after = 0; last !== null;) {
        const rows = await mqttRepo.outgoingPage(db, client.id, after, last, PAGE);
        for (const r of rows) yield decodePacket(r);
        if (rows.length < PAGE) break;
        after = rows[rows.length - 1]!.seq;
      }
      yield* held;
    })());
  }

  // -- incoming QoS 2 ----------------------------------------------------------------------------

  async incomingStorePacket(client: ClientRef, packet: MqttPacket): Promise<void> {
    const p = new Packet(packet);
    p.messageId = packet.messageId;
    try { await mqttRepo.putIncoming(this.#db, client.id, packet.messageId as number, encodePacket(p)); } catch (e) {
      if (!diskFull(e)) throw e;
      this.#held.incoming.set(`${client.id}\u0000${packet.messageId}`, decodePacket(encodePacket(p)));
    }
  }

  async incomingGetPacket(client: ClientRef, packet: MqttPacket): Promise<MqttPacket> {
    const held = this.#held.incoming.get(`${client.id}\u0000${packet.messageId}`);
    if (held) return held;
    const row = await mqttRepo.incoming(this.#db, client.id, packet.messageId as number);
    if (!row) throw new Error("no such packet");
    return decodePacket(row);
  }

  async incomingDelPacket(client: ClientRef, packet: MqttPacket): Promise<void> {
    if (this.#held.incoming.delete(`${client.id}\u0000${packet.messageId}`)) return;
    const r = await mqttRepo.deleteIncoming(this.#db, client.id, packet.messageId as number);
    if (r.changes === 0) throw new Error("no such packet");
  }

  /** Forgets the client's inbound QoS 2 packets (a clean session starts). */
  async cleanIncoming(client: ClientRef): Promise<void> {
    for (const k of this.#held.incoming.keys()) if (k.startsWith(`${client.id}\u0000`)) this.#held.incoming.delete(k);
    await mqttRepo.deleteIncomingOf(this.#db, client.id);
  }

  // -- wills -------------------------------------------------------------------------------------

  /** Stores the client's will, stamped (as aedes expects, in place) with this broker and the client. */
  async putWill(client: ClientRef, packet: MqttPacket): Promise<void> {
    packet.brokerId = this.#broker!.id;
    packet.clientId = client.id;
    await mqttRepo.putWill(this.#db, client.id, packet.brokerId, encodePacket(packet));
  }

  async getWill(client: ClientRef): Promise<MqttPacket | undefined> {
    const row = await mqttRepo.will(this.#db, client.id);
    return row ? decodePacket(row) : undefined;
  }

  /** Deletes and returns the client's will. With `client.brokerId` (aedes passes it when it clears
   *  the wills of a dead broker) only a will stored by that broker, so a newer will stored since
   *  the client reconnected stays. */
  async delWill(client: ClientRef & { brokerId?: string | null }): Promise<MqttPacket | undefined> {
    const row: PacketRow | undefined = await mqttRepo.deleteWill(this.#db, client.id, client.brokerId ?? null);
    return row ? decodePacket(row) : undefined;
  }

  /** The wills stored by brokers not in `brokers` (brokerId -> last heartbeat), i.e. dead ones. */
  streamWill(brokers: Record<string, unknown> = {}): Readable {
    const db = this.#db;
    const alive = Object.keys(brokers).filter((id) => brokers[id]);
    return Readable.from((async function* () {
      for (let after: string | null = null; ;) {
        const rows = await mqttRepo.willsPage(db, alive, after, PAGE);
        for (const r of rows) yield decodePacket(r);
        if (rows.length < PAGE) return;
        after = rows[rows.length - 1]!.client_id;
      }
    })());
  }
}
