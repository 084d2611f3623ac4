// Shared subscriptions ($share/<group>/<filter>, MQTT 5 §4.8.2, offered to MQTT 3.1.1 clients as
// most brokers do): each message matching the filter goes to one member of the group. aedes has
// none (its pull requests for them stalled on the cluster case), so the broker hands every
// subscription of a `$share/` filter to this module instead of aedes' emitter.
//
// A group is keyed by its name and its filter in the system's space ("<systemKey>/<filter>"), so
// equal group names in two systems never share. One emitter listener per group receives the
// group's messages, and the node a message was published on (its packet's brokerId) routes it:
//  - to a member on this node, the least loaded (fewest unacknowledged messages), ties in turn;
//  - in a cluster, first to a node, in turn weighted by each node's member count (every node tells
//    the others its groups over the brokers' emitter, and routes for groups it has no members of);
//    the chosen node delivers to one of its members (or, if its last member just left, passes the
//    message on once more). Every other node ignores the message: one delivery to the group.
// QoS 1/2 deliveries are held until the member acknowledges them (PUBACK, or PUBREC at QoS 2);
// when the member's connection ends first they go to another member of the group, anywhere in
// the cluster. A member that unsubscribes still gets the acknowledgements of what it was sent.
// Retained messages are not sent to shared subscriptions (MQTT 5 §4.8.2), and shared
// subscriptions of persistent sessions hold no messages while their client is away: the group's
// other members take them.
import type { Aedes, Client } from "aedes";
import type { Logger } from "../core/log.ts";

/** aedes' subscription handler: a packet of the emitter, and the callback that frees its slot. */
export type Handler = (packet: any, cb: () => void) => void;

interface Message { topic: string; payload: Buffer; qos: number }
interface Member {
  /** aedes' client for an MQTT subscriber; null for one in this process (Broker.subscribe) */
  client: Client | null;
  qos: number;
  handler: Handler;
  /** QoS 1/2 deliveries not yet acknowledged */
  unacked: number;
}
interface Group {
  key: string;
  /** the filter in the system's space */
  filter: string;
  members: Member[];
  turn: number;
  /** other nodes' member counts (cluster) */
  remote: Map<string, number>;
  /** turn among the cluster's members */
  clusterTurn: number;
  listener: Handler;
}
interface Unacked { group: string; msg: Message; member: Member }

/** `$share/<group>/<filter>` as its parts, or null if it is not a valid shared subscription. */
export function parseShare(topic: string): { group: string; filter: string } | null {
  if (!topic.startsWith("$share/")) return null;
  const i = topic.indexOf("/", 7);
  if (i < 0) return null;
  const group = topic.slice(7, i), filter = topic.slice(i + 1);
  if (!group || /[+#]/.test(group) || !filter) return null;
  return { group, filter };
}

/** [MQTT-4.7.2-1] in a system's space: whether a filter whose first level after the system key is a
 *  wildcard would be offered a topic whose first level after the key starts with "$". */
export function dollarBlocked(filter: string, topic: string): boolean {
  return startsWithWildcard(filter) && topic.charCodeAt(topic.indexOf("/") + 1) === 36; /* $ */
}

/** Whether a filter in a system's space starts with a wildcard after the system key. */
export function startsWithWildcard(filter: string): boolean {
  const c = filter.charCodeAt(filter.indexOf("/") + 1);
  return c === 43 /* + */ || c === 35; /* # */
}

const NEWS = (node: string) => `$SYS/${node}/outpost/share/groups`;
const HELLO = (node: string) => `$SYS/${node}/outpost/share/hello`;
const DELIVER = (node: string) => `$SYS/${node}/outpost/share/deliver`;
/** How often a node tells its groups again; a node not heard for three times this is gone. */
const NEWS_MS = 5_000;
/** How often a message may be passed on between nodes before it is dropped. */
const MAX_HOPS = 2;

type Emitter = {
  on(topic: string, fn: Handler, done?: () => void): void;
  removeListener(topic: string, fn: Handler, done?: () => void): void;
  emit(packet: object, done?: (err?: Error) => void): void;
};
type AedesClient = Client & { _nextId: number; clean: boolean; deliver0: Handler; deliverQoS: Handler };

export class SharedSubscriptions {
  private readonly groups = new Map<string, Group>();
  /** per client (weakly: a client that ends without a clientDisconnect leaves nothing behind) */
  private readonly unacked = new WeakMap<Client, Map<number, Unacked>>();
  /** other nodes: when each last told its groups */
  private readonly heard = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private newsDue = false;
  private stopped = false;
  /** messages delivered to a member after its predecessor's connection ended (for /metrics) */
  redelivered = 0;

  constructor(private readonly aedes: Aedes, private readonly o: { nodeId: string; clustered: boolean; log: Logger }) {}

  private get mq(): Emitter { return (this.aedes as unknown as { mq: Emitter }).mq; }
  private get persistence() {
    return (this.aedes as unknown as { persistence: { outgoingEnqueue(sub: { clientId: string }, p: object): Promise<void>; outgoingClearMessageId(c: Client, p: { messageId: number }): Promise<unknown> } }).persistence;
  }

  start() {
    if (!this.o.clustered) return;
    const me = this.o.nodeId;
    this.mq.on(NEWS("+"), (p, cb) => { if (p.node !== me) this.heardNews(p.node, p.groups); cb(); });
    this.mq.on(HELLO("+"), (p, cb) => { if (p.node !== me) this.tellSoon(); cb(); });
    this.mq.on(DELIVER(me), (p, cb) => { this.delivered(p); cb(); });
    this.mq.emit({ topic: HELLO(me), node: me });
    this.timer = setInterval(() => { this.expire(); this.tell(); }, NEWS_MS);
    this.timer.unref?.();
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    // the others stop routing here at once
    if (this.o.clustered) this.mq.emit({ topic: NEWS(this.o.nodeId), node: this.o.nodeId, groups: [] }, () => {});
  }

  // ---- membership ------------------------------------------------------------------------------

  /** A subscription to `$share/<group>/<systemKey>/<filter>` (as aedes got it). */
  join(topic: string, client: Client | null, qos: number, handler: Handler, done?: (err?: Error) => void) {
    const share = parseShare(topic);
    if (!share) return done?.(new Error("not a shared subscription"));
    const g = this.group(`${share.group}\u0000${share.filter}`, share.filter);
    if (!g.members.some((m) => m.handler === handler)) g.members.push({ client, qos, handler, unacked: 0 });
    this.tellSoon();
    done?.();
  }

  leave(topic: string, handler: Handler, done?: (err?: Error) => void) {
    const share = parseShare(topic);
    const g = share ? this.groups.get(`${share.group}\u0000${share.filter}`) : undefined;
    if (g) {
      const i = g.members.findIndex((m) => m.handler === handler);
      if (i >= 0) g.members.splice(i, 1);
      this.dropIfIdle(g);
      this.tellSoon();
    }
    done?.();
  }

  private group(key: string, filter: string): Group {
    let g = this.groups.get(key);
    if (g) return g;
    const wildcardFirst = startsWithWildcard(filter);
    const listener: Handler = (packet, cb) => {
      // the node it was published on routes it (in one process: this one)
      if (this.o.clustered && packet.brokerId !== this.o.nodeId) return cb();
      if (!wildcardFirst || !dollarBlocked(filter, packet.topic)) {
        const payload = Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload ?? "");
        this.route(group, { topic: packet.topic, payload, qos: packet.qos ?? 0 }, 0);
      }
      cb();
    };
    const group: Group = { key, filter, members: [], turn: 0, remote: new Map(), clusterTurn: 0, listener };
    this.groups.set(key, (g = group));
    this.mq.on(filter, listener);
    return g;
  }

  private dropIfIdle(g: Group) {
    if (g.members.length > 0 || g.remote.size > 0 || this.groups.get(g.key) !== g) return;
    this.groups.delete(g.key);
    this.mq.removeListener(g.filter, g.listener);
  }

  // ---- routing and delivery --------------------------------------------------------------------

  /** Sends a message of the group to one member: here, or through the node it chose. */
  private route(g: Group, msg: Message, hops: number, not?: string) {
    const node = this.chooseNode(g, not);
    if (node === null) return this.o.log.debug("mqtt: a shared subscription's group has no members; message dropped", { group: g.key.split("\u0000")[0] });
    if (node === this.o.nodeId) return this.deliverHere(g, msg);
    this.mq.emit({ topic: DELIVER(node), key: g.key, filter: g.filter, t: msg.topic, p: msg.payload, q: msg.qos, h: hops }, (err) => {
      // the emitter failed: a member here, if any, takes it
      if (err && g.members.length) this.deliverHere(g, msg);
    });
  }

  /** This node, another, or null when the group has no members anywhere. */
  private chooseNode(g: Group, not?: string): string | null {
    const here = g.members.length;
    let total = not === this.o.nodeId ? 0 : here;
    for (const [node, n] of g.remote) if (node !== not) total += n;
    if (total === 0) return null;
    let slot = g.clusterTurn++ % total;
    if (not !== this.o.nodeId) {
      if (slot < here) return this.o.nodeId;
      slot -= here;
    }
    for (const [node, n] of g.remote) {
      if (node === not) continue;
      if (slot < n) return node;
      slot -= n;
    }
    return null;
  }

  /** Another node chose this one for a member of a group. */
  private delivered(p: { key: string; filter: string; t: string; p: Buffer | Uint8Array; q: number; h: number }) {
    const g = this.groups.get(p.key);
    const msg = { topic: p.t, payload: Buffer.isBuffer(p.p) ? p.p : Buffer.from(p.p ?? []), qos: p.q };
    if (g?.members.length) return this.deliverHere(g, msg);
    if (g && p.h < MAX_HOPS) return this.route(g, msg, p.h + 1, this.o.nodeId);
    this.o.log.debug("mqtt: a shared subscription's message found no member", { group: p.key.split("\u0000")[0] });
  }

  /** The member in turn, or when it has messages unacknowledged, the least loaded MQTT client
   *  here. A member in this process (a code service) acknowledges nothing, so it would always look
   *  idle: it gets its turn and no more. */
  private pick(g: Group): Member {
    const n = g.members.length;
    let best = g.turn % n;
    for (let i = 1; i < n && g.members[best]!.unacked > 0; i++) {
      const j = (g.turn + i) % n;
      const m = g.members[j]!;
      if (m.client && m.unacked < g.members[best]!.unacked) best = j;
    }
    g.turn = best + 1;
    return g.members[best]!;
  }

  private deliverHere(g: Group, msg: Message) {
    const m = this.pick(g);
    if (!m.client) return m.handler({ cmd: "publish", topic: msg.topic, payload: msg.payload, qos: msg.qos, retain: false, dup: false }, noop);
    const c = m.client as AedesClient;
    const qos = Math.min(msg.qos, m.qos);
    if (qos === 0) return c.deliver0({ cmd: "publish", topic: msg.topic, payload: msg.payload, qos: 0, retain: false, dup: false }, noop);
    // the message id is taken here, as aedes would take it, to know which PUBACK settles it
    const messageId = c._nextId;
    c._nextId = c._nextId >= 65535 ? 1 : c._nextId + 1;
    const packet: Record<string, unknown> = { cmd: "publish", topic: msg.topic, payload: msg.payload, qos, retain: false, dup: false, messageId };
    let held = this.unacked.get(c);
    if (!held) this.unacked.set(c, (held = new Map()));
    held.set(messageId, { group: g.key, msg, member: m });
    m.unacked++;
    if (c.clean) return c.deliverQoS(packet, noop);
    // a persistent session's QoS > 0 delivery must be in its queue (aedes records the message id
    // there): stamped as the broker's own publication, so the queued copy is found again
    packet.brokerId = this.aedes.id;
    packet.brokerCounter = ++(this.aedes as unknown as { counter: number }).counter;
    this.persistence.outgoingEnqueue({ clientId: c.id }, packet)
      .then(() => c.deliverQoS(packet, noop), () => this.settled(c, messageId, true));
  }

  /** A PUBACK (or PUBREC) of a client. */
  acked(client: Client, messageId: number) {
    this.settled(client, messageId, false);
  }

  private settled(client: Client, messageId: number, failed: boolean) {
    const held = this.unacked.get(client);
    const u = held?.get(messageId);
    if (!u) return;
    // the client's map stays while it is connected (gone() drops it): at QoS 1 it empties after
    // nearly every PUBACK, and making it again for the next delivery was garbage per message
    held!.delete(messageId);
    u.member.unacked--;
    if (failed) this.redeliver(u);
  }

  /** A client's connection ended: what it had not acknowledged goes to another member. */
  gone(client: Client) {
    const held = this.unacked.get(client);
    if (!held) return;
    this.unacked.delete(client);
    for (const [messageId, u] of held) {
      u.member.unacked--;
      // not sent again at the session's next connection: another member has it
      if (!(client as AedesClient).clean) this.persistence.outgoingClearMessageId(client, { messageId }).catch(noop);
      this.redeliver(u);
    }
  }

  private redeliver(u: Unacked) {
    const g = this.groups.get(u.group);
    if (!g) return this.o.log.debug("mqtt: a shared subscription's group is gone; an unacknowledged message dropped", { group: u.group.split("\u0000")[0] });
    this.redelivered++;
    this.route(g, u.msg, 0);
  }

  // ---- the cluster -----------------------------------------------------------------------------

  private tellSoon() {
    if (!this.o.clustered || this.newsDue || this.stopped) return;
    this.newsDue = true;
    setImmediate(() => { this.newsDue = false; this.tell(); });
  }

  /** Tells the other nodes every group this node has members of. */
  private tell() {
    if (this.stopped) return;
    const groups: [string, string, number][] = [];
    for (const g of this.groups.values()) if (g.members.length) groups.push([g.key, g.filter, g.members.length]);
    this.mq.emit({ topic: NEWS(this.o.nodeId), node: this.o.nodeId, groups }, () => {});
  }

  /** Another node's groups, all of them: what it no longer lists is gone. */
  private heardNews(node: string, list: [string, string, number][]) {
    if (!this.heard.has(node) && list.length === 0) return;
    if (list.length) this.heard.set(node, Date.now());
    else this.heard.delete(node);
    const listed = new Set<string>();
    for (const [key, filter, n] of list) {
      listed.add(key);
      this.group(key, filter).remote.set(node, n);
    }
    for (const g of [...this.groups.values()]) {
      if (listed.has(g.key) || !g.remote.delete(node)) continue;
      this.dropIfIdle(g);
    }
  }

  /** Forgets the groups of nodes not heard from for a while (stopped without a word). */
  private expire() {
    const before = Date.now() - 3 * NEWS_MS;
    for (const [node, at] of this.heard) if (at < before) this.heardNews(node, []);
  }

  /** Live groups, members here and on other nodes (for tests and /metrics). */
  counts() {
    let members = 0;
    for (const g of this.groups.values()) members += g.members.length;
    return { groups: this.groups.size, members };
  }
}

function noop() {}
