// The embedded MQTT broker (aedes): token authentication, per-system topic isolation, role
// permissions on publish and subscribe, history, live connection registry, and the TCP, WebSocket,
// TLS and secure WebSocket listeners.
//
// Isolation: every topic a client names is stored inside aedes as "<systemKey>/<topic>", and every
// client id as "<systemKey>/<client id>". Inbound packets are rewritten as they are parsed (the
// system key is the CONNECT password, checked by authenticate before aedes looks up a session or
// takes over a connection); outbound publishes lose the prefix in authorizeForward, which drops
// anything outside the client's system. So "#" in one system never sees another system's
// messages, retained messages of equal topics in two systems never collide, and a client id
// reused in another system neither resumes the session nor disconnects the client of the first.
import { randomUUID } from "node:crypto";
import net from "node:net";
import { Aedes, type AedesOptions, type Client } from "aedes";
import MQEmitter from "mqemitter";
import { Duplex } from "node:stream";
import { LEVEL, type Permissions } from "../auth/permissions.ts";
import { type Principal, principalEmail, principalId } from "../auth/principal.ts";
import type { Tokens } from "../auth/tokens.ts";
import type { Config } from "../config.ts";
import type { EventBus } from "../core/events.ts";
import type { Logger } from "../core/log.ts";
import type { ConnectionView } from "../domain/devices.ts";
import type { Deliver, Broker as MessagingBroker, Messages } from "../domain/messages.ts";
import type { Systems } from "../domain/systems.ts";
import type { Decision, Throttle } from "../throttle/throttle.ts";
import { Admission, CLIENT_ID_MAX } from "./admission.ts";
import { Grants } from "./grants.ts";
import { KeepaliveWheel, leanListeners, listenerCounts } from "./lean.ts";
import { MqttListeners } from "./listeners.ts";
import { fastPublishIn, fastPublishOut, withFrameParser } from "./publish.ts";
import { inSystem, ownTopic, type Session } from "./session.ts";
import { dollarBlocked, type Handler, parseShare, SharedSubscriptions, startsWithWildcard } from "./shared.ts";
import { coalesceWrites } from "./writes.ts";

export interface BrokerDeps {
  config: Config;
  log: Logger;
  tokens: Tokens;
  perms: Permissions;
  events: EventBus;
  systems: Systems;
  messages: Messages;
  persistence?: AedesOptions["persistence"];
  /** the MQTT Connections and MQTT Publishes throttlers */
  throttle?: Throttle;
  /** offered every publish not relayed from an edge, to relay those its topic sends on (edge: up
   *  to the platform; platform: down to edges; see sync/relay.ts) */
  relay?: (systemKey: string, topic: string, payload: Buffer, qos: number) => void;
  /** a cluster's emitter (Redis): publishes reach the subscribers of every node; and this
   *  node's id, which aedes' messages between brokers carry */
  mq?: AedesOptions["mq"];
  brokerId?: string;
}

const DECISION_MS = 5_000;
/** Longest a stop waits for publishes in flight. */
const DRAIN_MS = 2_000;
const DECISIONS_MAX = 500;
/** where a throttled publish goes: a topic outside every system, so nobody receives or keeps it */
const DROPPED_TOPIC = "$throttled";

export class MqttBroker implements ConnectionView, MessagingBroker {
  aedes!: Aedes;
  /** shared subscriptions ($share/<group>/<filter>), which aedes hands here (see start) */
  shared!: SharedSubscriptions;
  /** the client and granted QoS of each `$share/` subscription's aedes handler */
  private readonly shareMembers = new WeakMap<Handler, { client: Client; qos: number }>();
  /** wildcard-first subscriptions' handlers as given to the emitter ([MQTT-4.7.2-1], see start) */
  private readonly dollarGuards = new WeakMap<Handler, Handler>();
  private readonly sessions = new WeakMap<Client, Session>();
  /** each client's subscriptions by filter, for the QoS it was granted on a topic */
  private readonly grants = new WeakMap<Client, Grants>();
  /** who published through the REST API, by payload buffer (see publish) */
  private readonly restOrigins = new WeakMap<Buffer, Principal>();
  /** live clients by system (for connection listings and counts) */
  private readonly bySystem = new Map<string, Set<Client>>();
  /** the key and topic prefix of each system with live clients, shared by their sessions */
  private readonly keys = new Map<string, { systemKey: string; prefix: string }>();
  /** QoS 1 publishes of clients published before aedes acknowledges them */
  private readonly publishedEarly = new WeakSet<object>();
  /** client publishes authorized but not yet handed to `published` */
  private inFlight = 0;
  /** PUBLISH packets received from clients and sent to clients, by QoS (for /metrics: an
   *  increment on the per-message path, nothing more) */
  readonly messagesIn = [0, 0, 0];
  readonly messagesOut = [0, 0, 0];

  private readonly listeners: MqttListeners;
  private readonly admission: Admission;
  /** connected clients' keepalives, in place of a timer each (see lean.ts); a client silent past
   *  its keepalive ends as aedes ends it */
  private readonly keepalives = new KeepaliveWheel((client) => {
    this.aedes.emit("keepaliveTimeout", client);
    (client as unknown as import("node:events").EventEmitter).emit("error", new Error("keep alive timeout"));
  });

  constructor(private readonly d: BrokerDeps) {
    this.listeners = new MqttListeners(d.config, (stream, ip) => this.accept(stream, ip));
    this.admission = new Admission(d);
  }

  /** the port each listener took, by name (mqtt, mqtt-ws, mqtt-tls, mqtt-wss) */
  get ports(): Record<string, number> { return this.listeners.ports; }

  async start() {
    this.aedes = await Aedes.createBroker({
      mq: this.d.mq ?? MQEmitter({ concurrency: 100 }),
      ...(this.d.brokerId ? { id: this.d.brokerId } : {}),
      persistence: this.d.persistence,
      queueLimit: 200,
      // checked for MQTT 3.1 clients only, on the id in the system's space (see accept)
      maxClientsIdLength: CLIENT_ID_MAX + 64,
      authenticate: (client, username, password, done) => {
        this.admission.authenticate(this.sessions.get(client), username, password).then(() => done(null, true), (err) => done(err, false));
      },
      authorizePublish: (client, packet, cb) => {
        if (!client) return cb(null); // the broker itself (wills, REST publishes checked already)
        const allowed = packet.qos === 1 ? this.publishBeforePuback(client, packet, cb) : cb;
        const then = (ok: boolean) => (ok ? this.throttlePublish(client, packet, allowed) : cb(new Error("not allowed to publish to this topic")));
        const known = this.decided(client, packet.topic, LEVEL.CREATE);
        if (known !== undefined) return then(known);
        this.allowed(client, packet.topic, LEVEL.CREATE).then(then, cb);
      },
      authorizeSubscribe: (client, sub, cb) => {
        // "$share/" without a group name (or with a wildcard in it) and a filter is refused
        const own = ownTopic(this.sessions.get(client)?.prefix ?? "", sub.topic);
        if (own?.startsWith("$share/") && !parseShare(own)) return cb(null, null);
        this.allowed(client, sub.topic, LEVEL.READ).then((ok) => cb(null, ok ? sub : null), (err) => cb(err));
      },
      authorizeForward: (client, packet) => this.forward(client, packet),
      published: (packet, client, cb) => {
        if (client) { this.inFlight = Math.max(0, this.inFlight - 1); this.messagesIn[packet.qos]!++; }
        this.published(packet, client);
        cb(null);
      },
    });
    const a = this.aedes;
    // a QoS 1 publish already published before its PUBACK (see publishBeforePuback) is not again
    // (aedes' types give publish two arguments; handlers call it with the publishing client too)
    type Publish3 = (packet: unknown, client: unknown, done?: (err?: Error | null) => void) => void;
    const publish = (a.publish as unknown as Publish3).bind(a);
    (a as unknown as { publish: Publish3 }).publish = (packet, client, done) => {
      if (this.publishedEarly.has(packet as object)) { this.publishedEarly.delete(packet as object); return (done ?? (client as typeof done))?.(null); }
      return publish(packet, client, done);
    };
    // Subscriptions reach the emitter through aedes.subscribe (clients' and this process' own):
    // a `$share/` one joins its group instead, and one whose filter starts with a wildcard in the
    // system's space skips topics starting with "$" there ([MQTT-4.7.2-1]: aedes checks the first
    // level, which here is the system key)
    this.shared = new SharedSubscriptions(a, { nodeId: a.id, clustered: this.d.mq !== undefined, log: this.d.log });
    type Sub = (topic: string, func: Handler, done?: (err?: Error) => void) => void;
    const am = a as unknown as { subscribe: Sub; unsubscribe: Sub };
    const subscribe = am.subscribe.bind(a), unsubscribe = am.unsubscribe.bind(a);
    am.subscribe = (topic, func, done) => {
      if (topic.startsWith("$share/")) {
        const m = this.shareMembers.get(func);
        return this.shared.join(topic, m?.client ?? null, m?.qos ?? 2, func, done);
      }
      if (!startsWithWildcard(topic)) return subscribe(topic, func, done);
      const guarded: Handler = (packet, cb) => (dollarBlocked(topic, packet.topic) ? cb() : func(packet, cb));
      this.dollarGuards.set(func, guarded);
      return subscribe(topic, guarded, done);
    };
    am.unsubscribe = (topic, func, done) => {
      if (topic.startsWith("$share/")) return this.shared.leave(topic, func, done);
      return unsubscribe(topic, this.dollarGuards.get(func) ?? func, done);
    };
    this.shared.start();
    a.on("clientReady", (client) => this.connected(client));
    a.on("clientDisconnect", (client) => { this.shared.gone(client); this.disconnected(client); });
    a.on("subscribe", (subs, client) => this.subscribed(client, subs.map((s) => s.topic), "Messaging::Subscribe"));
    a.on("unsubscribe", (topics, client) => this.subscribed(client, topics, "Messaging::Unsubscribe"));
    a.on("clientError", (client, err) => {
      const s = client && this.sessions.get(client);
      if (s) s.endedBy ??= err.message;
      this.d.log.debug("mqtt client error", { client: client?.id, err });
    });
    a.on("keepaliveTimeout", (client) => { const s = this.sessions.get(client); if (s) s.endedBy ??= "keepalive timeout"; });
    await this.listeners.start();
  }

  /** New certificate and key for the TLS listeners (MQTT over TLS and over secure WebSocket):
   *  new connections get them; those already open keep theirs. */
  reloadTls(creds: { cert: Buffer; key: Buffer }) {
    this.listeners.reloadTls(creds);
  }
  /** Hands a connection to aedes, rewriting the client's topics into its system's space. */
  private accept(stream: net.Socket | Duplex, ip?: string): Client {
    coalesceWrites(stream);
    // the address a CONNECT's session keeps (a WebSocket's comes from its upgrade request)
    if (ip !== undefined) Object.defineProperty(stream, "remoteAddress", { value: ip });
    const before = listenerCounts(stream);
    const client = withFrameParser(() => this.aedes.handle(stream as net.Socket));
    leanListeners(client, before);
    fastPublishIn(client).prependListener("packet", this.inbound);
    fastPublishOut(client, this.grantedQoS);
    this.trackGrants(client);
    return client;
  }

  /** Every packet a client sends, before aedes sees it (`this`: the client's parser): a CONNECT
   *  makes the session; the topics of the others go into the system's space. One function for
   *  every client (a closure of each would cost memory on every idle connection). */
  private readonly inbound = ((broker: MqttBroker) => function (this: { client: unknown }, packet: Record<string, any>) {
    broker.rewriteInbound(this.client as Client, packet);
  })(this);

  private rewriteInbound(client: Client, packet: Record<string, any>) {
    if (packet.cmd === "connect") {
      const key = packet.password ? Buffer.from(packet.password).toString("utf8") : "";
      const prefix = `${key}/`;
      // aedes makes up an id for a client that sent none; this does the same, in the system's space
      const clientId: string = packet.clientId || `aedes_${randomUUID()}`;
      const remote = (client as unknown as { conn: { remoteAddress?: string } }).conn.remoteAddress ?? "";
      this.sessions.set(client, { systemKey: key, prefix, clientId, principal: null, ip: remote.startsWith("::ffff:") ? remote.slice(7) : remote, connectedAt: 0, allowed: null,
        keptWithoutId: !packet.clientId && packet.clean === false });
      packet.clientId = prefix + clientId;
      if (packet.will) packet.will.topic = prefix + packet.will.topic;
      return;
    }
    const s = this.sessions.get(client);
    if (!s) return;
    if (packet.cmd === "publish") packet.topic = s.prefix + packet.topic;
    else if (packet.cmd === "disconnect") s.endedBy ??= "DISCONNECT";
    else if (packet.cmd === "puback" || packet.cmd === "pubrec") this.shared.acked(client, packet.messageId);
    else if (packet.cmd === "subscribe") for (const sub of packet.subscriptions) sub.topic = inSystem(s.prefix, sub.topic);
    else if (packet.cmd === "unsubscribe") packet.unsubscriptions = packet.unsubscriptions.map((t: string) => inSystem(s.prefix, t));
  }

  /** Keeps the client's grants in step with its subscriptions (before it can subscribe). A QoS 0
   *  subscription's handler may run first for a message a QoS 1 or 2 one also matches: that
   *  message takes the QoS path, at the best grant (aedes' dedupe lets it out once; see
   *  fastPublishOut). Nothing here is a closure of the client's: on 100,000 idle connections
   *  each one costs about 100 bytes. */
  private trackGrants(client: Client) {
    const grants = new Grants();
    this.grants.set(client, grants);
    const c = client as unknown as { subscriptions: Record<string, { qos?: number }> };
    c.subscriptions = grants.track(c.subscriptions, this.shareSubscribed, client);
  }

  /** The best QoS a client was granted for a (prefixed) topic; -1 without a matching subscription. */
  private readonly grantedQoS = (client: Client, topic: string): number => this.grants.get(client)?.granted(topic) ?? -1;

  /** A `$share/` subscription's handler, with its client and QoS, for the group to find. */
  private readonly shareSubscribed = (filter: string, sub: { qos?: number; func?: Handler } | undefined, client: unknown) => {
    if (sub?.func && filter.startsWith("$share/")) this.shareMembers.set(sub.func, { client: client as Client, qos: sub.qos ?? 0 });
  };

  /** aedes writes a QoS 1 PUBACK before it publishes the message (stores it for persistent
   *  sessions, hands it to the other nodes), so a broker that dies in between has acknowledged a
   *  message nobody will get. Here an authorized QoS 1 publish is published first, and aedes then
   *  acknowledges it and skips publishing it again. */
  private publishBeforePuback(client: Client, packet: any, cb: (err: Error | null) => void) {
    return (err: Error | null) => {
      if (err) return cb(err);
      (this.aedes.publish as unknown as (p: unknown, c: Client, done: (e?: Error | null) => void) => void).call(this.aedes, packet, client, (e) => {
        if (e) return cb(e);
        this.publishedEarly.add(packet);
        cb(null);
      });
    };
  }

  /** The MQTT Publishes throttler: a refused publish is acknowledged as usual but goes nowhere
   *  (aedes closes the connection on an authorizePublish error, and a client should keep it). */
  private throttlePublish(client: Client, packet: any, cb: (err: Error | null) => void) {
    this.inFlight++; // acknowledged (or about to be) but not yet published: a stop waits for it
    const t = this.d.throttle;
    const s = this.sessions.get(client);
    if (!t?.active("MQTT Publishes") || !s?.principal || s.principal.kind === "developer") return cb(null);
    const p = s.principal;
    const apply = (d: Decision) => {
      if (!d.ok) {
        packet.topic = DROPPED_TOPIC;
        packet.retain = false;
        this.d.log.debug("mqtt publish throttled", { client: s.clientId, case: d.caseName });
      } else if (d.release) setImmediate(d.release); // in flight while the broker handles it
      cb(null);
    };
    const d = t.evaluate("MQTT Publishes", { systemKey: s.systemKey, resource: packet.topic.slice(s.prefix.length), ip: s.ip, email: () => principalEmail(p) });
    if (d instanceof Promise) d.then(apply, () => cb(null));
    else apply(d);
  }

  /** A cached publish/subscribe decision, without a promise (the per-message path). */
  private decided(client: Client, topic: string, level: number): boolean | undefined {
    const s = this.sessions.get(client);
    if (!s?.principal) return false;
    const hit = level === LEVEL.CREATE ? s.allowed?.get(topic) : undefined;
    return hit && hit.until > Date.now() ? hit.ok : undefined;
  }

  /** Publish/subscribe permission on a (prefixed) topic. Publish decisions (every message asks)
   *  are cached per client for a few seconds; a SUBSCRIBE asks once, and a cache made for it
   *  would stay on every idle connection. */
  private async allowed(client: Client, topic: string, level: number): Promise<boolean> {
    const s = this.sessions.get(client);
    if (!s?.principal) return false;
    const own = ownTopic(s.prefix, topic);
    if (own === null) return false;
    // a shared subscription needs the right to subscribe to its filter
    const name = (level === LEVEL.READ ? parseShare(own)?.filter : undefined) ?? own;
    if (level !== LEVEL.CREATE) return this.d.perms.can(s.principal, { kind: "topic", name }, level);
    const hit = s.allowed?.get(topic);
    const now = Date.now();
    if (hit && hit.until > now) return hit.ok;
    const ok = await this.d.perms.can(s.principal, { kind: "topic", name }, level);
    s.allowed ??= new Map();
    if (s.allowed.size >= DECISIONS_MAX) s.allowed.clear();
    s.allowed.set(topic, { ok, until: now + DECISION_MS });
    return ok;
  }

  /** Outbound: the client's own topic. A topic in the system's space loses its prefix (aedes
   *  hands each delivery its own copy of the packet, so it is changed in place; a queued packet
   *  keeps its stored topic, as the persistence updates only its message id). Anything else
   *  never reaches the client: every subscription and every queued packet of a client lies in
   *  its system's space, so a packet outside it is a fault, and dropping it is what keeps a fault
   *  from crossing systems. */
  private forward(client: Client, packet: any) {
    const s = this.sessions.get(client);
    if (!s?.principal || typeof packet.topic !== "string" || !packet.topic.startsWith(s.prefix)) return null;
    if (packet.qos > 0) {
      // at most at the QoS of the best matching subscription
      const max = this.grants.get(client)?.granted(packet.topic) ?? -1;
      if (max >= 0 && max < packet.qos) packet.qos = max;
    }
    this.messagesOut[packet.qos]!++;
    packet.topic = packet.topic.slice(s.prefix.length);
    return packet;
  }

  private published(packet: any, client: Client | null) {
    const topic: string = packet.topic;
    const slash = topic.indexOf("/");
    if (slash <= 0 || topic.charCodeAt(0) === 36 /* $SYS */) return;
    const systemKey = topic.slice(0, slash);
    const own = topic.slice(slash + 1);
    const s = client ? this.sessions.get(client) : undefined;
    const payload: Buffer = packet.payload ?? Buffer.alloc(0);
    const origin = this.restOrigins.get(payload) ?? s?.principal ?? null;
    const userId = origin ? principalId(origin) : "";
    this.d.messages.record(systemKey, own, payload, userId, s?.ip ?? "", packet.qos ?? 0);
    if (this.d.relay && origin?.kind !== "edge") this.d.relay(systemKey, own, payload, packet.qos ?? 0);
    if (this.d.events.listening("Messaging::Publish")) this.d.events.emit("Messaging::Publish", systemKey, { topic: own, body: payload.toString("utf8"), userId });
  }

  private connected(client: Client) {
    this.keepalives.adopt(client);
    const s = this.sessions.get(client);
    if (!s?.principal) return;
    let set = this.bySystem.get(s.systemKey);
    if (!set) this.bySystem.set(s.systemKey, (set = new Set()));
    // one copy of the system's key and prefix for all its connections (each CONNECT made its own)
    const key = this.keys.get(s.systemKey);
    if (key) { s.systemKey = key.systemKey; s.prefix = key.prefix; }
    else this.keys.set(s.systemKey, { systemKey: s.systemKey, prefix: s.prefix });
    set.add(client);
    const p = s.principal;
    this.d.log.info("mqtt connected", { clientId: s.clientId, systemKey: s.systemKey, principal: p.kind, who: principalEmail(p), ip: s.ip });
    if (p.kind === "device") this.d.events.emit("Messaging::MQTTDeviceConnected", s.systemKey, { deviceName: p.name, clientId: s.clientId });
    else this.d.events.emit("Messaging::MQTTUserConnected", s.systemKey, { email: principalEmail(p), userId: principalId(p), clientId: s.clientId });
  }

  private disconnected(client: Client) {
    const s = this.sessions.get(client);
    if (!s?.principal) return;
    s.release?.();
    const set = this.bySystem.get(s.systemKey);
    if (set?.delete(client) && set.size === 0) { this.bySystem.delete(s.systemKey); this.keys.delete(s.systemKey); }
    const p = s.principal;
    this.d.log.info("mqtt disconnected", { clientId: s.clientId, systemKey: s.systemKey, principal: p.kind, who: principalEmail(p), reason: s.endedBy ?? "connection closed" });
    if (p.kind === "device") this.d.events.emit("Messaging::MQTTDeviceDisconnected", s.systemKey, { deviceName: p.name, clientId: s.clientId });
    else this.d.events.emit("Messaging::MQTTUserDisconnected", s.systemKey, { email: principalEmail(p), userId: principalId(p), clientId: s.clientId });
  }

  private subscribed(client: Client, topics: string[], type: "Messaging::Subscribe" | "Messaging::Unsubscribe") {
    const s = this.sessions.get(client);
    if (!s?.principal) return;
    for (const t of topics) {
      const own = ownTopic(s.prefix, t);
      if (own !== null) this.d.events.emit(type, s.systemKey, { topic: own, userId: principalId(s.principal) });
    }
  }

  // ---- for the domain -------------------------------------------------------------------------

  publish(systemKey: string, topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean, origin: Principal | null): Promise<void> {
    return new Promise((res, rej) => {
      // aedes copies the packet; the payload buffer travels as is, so it carries the origin
      if (origin) this.restOrigins.set(payload, origin);
      const packet = { cmd: "publish" as const, topic: `${systemKey}/${topic}`, payload, qos, retain, dup: false };
      this.aedes.publish(packet as any, (err) => (err ? rej(err) : res()));
    });
  }

  subscribe(systemKey: string, filter: string, deliver: Deliver): Promise<() => Promise<void>> {
    const prefix = `${systemKey}/`;
    const full = inSystem(prefix, filter);
    const handler = (packet: any, cb: () => void) => {
      const own = ownTopic(prefix, packet.topic);
      if (own !== null) deliver(own, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload ?? ""), packet.qos ?? 0);
      cb();
    };
    const end = () => new Promise<void>((res) => this.aedes.unsubscribe(full, handler as any, () => res()));
    return new Promise((res) => this.aedes.subscribe(full, handler as any, () => res(end)));
  }

  subscriptions(systemKey: string): Map<string, number> {
    const out = new Map<string, number>();
    const prefix = `${systemKey}/`;
    for (const client of this.bySystem.get(systemKey) ?? []) {
      for (const t of Object.keys((client as any).subscriptions ?? {})) {
        const own = ownTopic(prefix, t);
        if (own !== null) out.set(own, (out.get(own) ?? 0) + 1);
      }
    }
    return out;
  }

  deviceConnections(systemKey: string) {
    const out = new Map<string, { client_id: string; time_connected: string }[]>();
    for (const client of this.bySystem.get(systemKey) ?? []) {
      const s = this.sessions.get(client);
      if (s?.principal?.kind !== "device") continue;
      const list = out.get(s.principal.name) ?? [];
      list.push({ client_id: s.clientId, time_connected: new Date(s.connectedAt).toISOString() });
      out.set(s.principal.name, list);
    }
    return out;
  }

  /** Closes the clients connected with these tokens (their sessions were revoked). */
  endSessions(hashes: readonly string[]) {
    const gone = new Set(hashes);
    for (const set of this.bySystem.values()) {
      for (const client of set) {
        const s = this.sessions.get(client);
        if (!s?.principal || !gone.has(s.principal.tokenHash)) continue;
        s.endedBy ??= "session revoked";
        client.close();
      }
    }
  }

  /** Clients connected per system (for /metrics). */
  connectionsBySystem(): [string, number][] {
    return [...this.bySystem].map(([k, set]) => [k, set.size]);
  }

  clientCount(systemKey?: string) {
    return systemKey ? (this.bySystem.get(systemKey)?.size ?? 0) : this.aedes.connectedClients;
  }

  async stop() {
    this.listeners.stopWebSockets();
    // publishes a client already has its PUBACK for are published (history, relay) before the
    // broker closes; bounded, so a publish that failed on its way cannot hold the stop
    const deadline = Date.now() + DRAIN_MS;
    while (this.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    this.shared?.stop();
    this.keepalives.stop();
    await new Promise<void>((r) => (this.aedes ? this.aedes.close(() => r()) : r()));
    await this.listeners.close();
  }
}
