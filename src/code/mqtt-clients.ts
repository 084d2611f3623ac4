// The MQTT clients of one service run (MQTT.Client, library/mqtt.ts): connections to this node's
// broker through the domain (as a user or device connection would be checked) or to an external
// broker over mqtt.js, and the one queue their messages and connection events wait in until the
// sandbox asks for them (mqtt.next). Everything here lives as long as the run: closing it ends
// every subscription and connection, after the publishes already under way (bounded).
//
// Bounds: clients per run, external clients per run, topic filters per run, the queue (events and
// bytes: the oldest are dropped and counted), the size of one payload, publishes in flight to an
// external broker, the connect time and the time a closing run waits for its publishes.
import { isUtf8 } from "node:buffer";
import { isIP } from "node:net";
import net from "node:net";
import tls from "node:tls";
import type { MqttClient } from "mqtt";
import { fail } from "../core/errors.ts";
import { MQTT_LIMITS } from "./mqttLimits.ts";

export { MQTT_LIMITS };


/** What the sandbox receives: a message (`t` topic, `p` payload as text, `b` the bytes as a
 *  binary string when they are not UTF-8, `f` the filter it came through on this node's broker,
 *  `q` QoS, `r` retain, `d` duplicate, `u` user properties), or a connection event (`k`). */
export interface MqttEvent {
  /** the client's number in the run */
  c: number;
  k?: "connect" | "disconnect";
  /** a disconnect's reason */
  e?: string;
  f?: string;
  t?: string;
  p?: string;
  b?: string;
  q?: number;
  r?: boolean;
  d?: boolean;
  u?: Record<string, string>;
}

type Sink = (ev: Omit<MqttEvent, "c">, bytes: number) => void;

/** A message as the sandbox takes it: text, with the bytes alongside when they are not UTF-8. */
export function messageEvent(topic: string, payload: Buffer, qos: number, extra: Partial<MqttEvent> = {}): [Omit<MqttEvent, "c">, number] {
  const utf8 = isUtf8(payload);
  const ev: Omit<MqttEvent, "c"> = { t: topic, p: payload.toString("utf8"), q: qos, ...extra };
  if (!utf8) ev.b = payload.toString("latin1");
  return [ev, topic.length + payload.length * (utf8 ? 1 : 3)];
}

/** One connection of a run. */
export interface Conn {
  readonly external: boolean;
  /** settles once connected (own broker: once its identity is known) */
  readonly ready: Promise<void>;
  subscribe(filter: string): Promise<void>;
  unsubscribe(filter: string): Promise<void>;
  publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<void>;
  close(): Promise<void>;
}

// ---- this node's broker -------------------------------------------------------------------------

/** This node's broker as one identity in one system (the run's effective user, or the user or
 *  device a service connected as): publish and subscribe through the domain, with its checks. A
 *  `$share/<group>/<filter>` subscription joins the broker's group, with the system's devices and
 *  users and every node of a cluster. */
export interface OwnBroker {
  publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<unknown>;
  subscribe(filter: string, deliver: (topic: string, payload: Buffer, qos: number) => void): Promise<() => Promise<void>>;
}

class OwnConn implements Conn {
  readonly external = false;
  readonly ready: Promise<void>;
  private readonly subs = new Map<string, Promise<() => Promise<void>>>();

  constructor(private readonly broker: Promise<OwnBroker>, private readonly sink: Sink) {
    this.ready = broker.then(() => undefined);
  }

  async subscribe(filter: string) {
    if (this.subs.has(filter)) return;
    const b = await this.broker;
    const started = b.subscribe(filter, (topic, payload, qos) => {
      if (payload.length > MQTT_LIMITS.payloadBytes) { this.sink({}, -1); return; }
      const [ev, bytes] = messageEvent(topic, payload, qos, { f: filter });
      this.sink(ev, bytes);
    });
    this.subs.set(filter, started);
    try { await started; } catch (e) { if (this.subs.get(filter) === started) this.subs.delete(filter); throw e; }
  }

  async unsubscribe(filter: string) {
    const started = this.subs.get(filter);
    if (!started) return;
    this.subs.delete(filter);
    await started.then((end) => end(), () => undefined);
  }

  /** One publish at a time, in the order the service made them, as over one connection. (The
   *  broker's duplicate check also drops a QoS 1/2 message that a later one overtook.) */
  publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<void> {
    const p = this.last.then(async () => { await (await this.broker).publish(topic, payload, qos, retain); });
    this.last = p.catch(() => undefined);
    return p;
  }
  private last: Promise<unknown> = Promise.resolve();

  async close() {
    const all = [...this.subs.values()];
    this.subs.clear();
    await Promise.all(all.map((s) => s.then((end) => end(), () => undefined)));
  }
}

// ---- an external broker -------------------------------------------------------------------------

export interface ExternalOptions {
  host: string;
  port: number;
  username?: string;
  password?: string;
  clientId: string;
  keepalive: number;
  tls?: { ca?: string; cert?: string; key?: string };
}

/** Where a connection may go: the address to connect to, or a refusal (the egress policy). */
export type Egress = (host: string, port: number) => Promise<string>;

class ExternalConn implements Conn {
  readonly external = true;
  readonly ready: Promise<void>;
  private client: MqttClient | null = null;
  private closed = false;
  private inFlight = 0;
  /** the connection's last error, said when an operation finds it down */
  private lastError = "";

  constructor(private readonly o: ExternalOptions, egress: Egress, private readonly sink: Sink) {
    this.ready = this.connect(egress);
  }

  private async connect(egress: Egress) {
    const address = await egress(this.o.host, this.o.port);
    if (this.closed) throw fail("INVALID_ARGUMENT", "the MQTT client was closed");
    const { o } = this;
    // the address checked is the address connected to (a name is not looked up again)
    const stream = () => o.tls
      ? tls.connect({ host: address, port: o.port, servername: isIP(o.host) ? undefined : o.host, ca: o.tls.ca, cert: o.tls.cert, key: o.tls.key })
      : net.connect({ host: address, port: o.port });
    // the client's code loads with the first connection out (most nodes never make one)
    const { MqttClient } = await import("mqtt");
    if (this.closed) throw fail("INVALID_ARGUMENT", "the MQTT client was closed");
    const client = new MqttClient(stream as never, {
      clientId: o.clientId, username: o.username, password: o.password, keepalive: o.keepalive, protocolVersion: 4, clean: true,
      reconnectPeriod: 0, connectTimeout: MQTT_LIMITS.connectMs, queueQoSZero: false, resubscribe: true,
    });
    this.client = client;
    await new Promise<void>((res, rej) => {
      const timer = setTimeout(() => done(new Error(`no answer from ${o.host}:${o.port} within ${MQTT_LIMITS.connectMs / 1000} s`)), MQTT_LIMITS.connectMs);
      const done = (err?: Error) => {
        clearTimeout(timer);
        client.off("connect", onConnect); client.off("error", done); client.off("close", onClose);
        if (err) { client.end(true); rej(fail("INVALID_ARGUMENT", `could not connect to the MQTT broker at ${o.host}:${o.port}: ${err.message}`)); }
        else res();
      };
      const onConnect = () => done();
      const onClose = () => done(new Error("the connection closed before the broker accepted it"));
      client.once("connect", onConnect);
      client.once("error", done);
      client.once("close", onClose);
    });
    if (this.closed) { client.end(true); throw fail("INVALID_ARGUMENT", "the MQTT client was closed"); }
    // connected once: from now on it comes back by itself when the connection drops
    client.options.reconnectPeriod = MQTT_LIMITS.reconnectMs;
    // the service hears of a lost connection once, and of each time it comes back
    let up = true;
    client.on("error", (err) => { this.lastError = err.message; });
    client.on("close", () => { if (up && !this.closed) { up = false; this.sink({ k: "disconnect", e: this.lastError || "connection lost" }, 64); } });
    client.on("connect", () => { up = true; this.lastError = ""; this.sink({ k: "connect" }, 16); });
    client.on("message", (topic, payload, packet) => {
      if (payload.length > MQTT_LIMITS.payloadBytes) { this.sink({}, -1); return; }
      const props = packet.properties?.userProperties;
      const [ev, bytes] = messageEvent(topic, payload, packet.qos, { r: packet.retain, d: packet.dup, ...(props ? { u: flatProps(props) } : {}) });
      this.sink(ev, bytes);
    });
  }

  private live(): MqttClient {
    const c = this.client;
    if (this.closed || !c) throw fail("INVALID_ARGUMENT", "the MQTT client was closed");
    if (!c.connected) throw fail("INVALID_ARGUMENT", `not connected to the MQTT broker at ${this.o.host}:${this.o.port}${this.lastError ? ` (${this.lastError})` : ""}`);
    return c;
  }

  async subscribe(filter: string) {
    await this.ready;
    const c = this.live();
    await new Promise<void>((res, rej) => c.subscribe(filter, { qos: 1 }, (err, granted) => {
      if (err) return rej(fail("INVALID_ARGUMENT", `subscribe to '${filter}': ${err.message}`));
      if (granted?.some((g) => g.qos === 128)) return rej(fail("INVALID_ARGUMENT", `the broker refused the subscription to '${filter}'`));
      res();
    }));
  }

  async unsubscribe(filter: string) {
    await this.ready;
    const c = this.live();
    await new Promise<void>((res, rej) => c.unsubscribe(filter, (err) => (err ? rej(fail("INVALID_ARGUMENT", `unsubscribe from '${filter}': ${err.message}`)) : res())));
  }

  async publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean) {
    await this.ready;
    const c = this.live();
    if (this.inFlight >= MQTT_LIMITS.inFlight) throw fail("INVALID_ARGUMENT", `too many publishes under way to ${this.o.host} (${MQTT_LIMITS.inFlight})`);
    this.inFlight++;
    try {
      await new Promise<void>((res, rej) => c.publish(topic, payload, { qos, retain }, (err) => (err ? rej(fail("INVALID_ARGUMENT", `publish to '${topic}': ${err.message}`)) : res())));
    } finally { this.inFlight--; }
  }

  async close() {
    this.closed = true;
    const c = this.client;
    if (!c) return;
    // what is still in flight gets a moment to be acknowledged, then the socket goes
    await new Promise<void>((res) => {
      const timer = setTimeout(() => { c.end(true); res(); }, MQTT_LIMITS.closeMs);
      c.end(false, {}, () => { clearTimeout(timer); res(); });
    });
  }
}

function flatProps(p: Record<string, string | string[]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(p)) { const v = p[k]; out[k] = Array.isArray(v) ? v.join(",") : String(v); }
  return out;
}

// ---- the run's clients ----------------------------------------------------------------------------

export class RunMqtt {
  private readonly conns = new Map<number, { conn: Conn; filters: Set<string> }>();
  /** clients whose opening was refused, with why (what their calls answer) */
  private readonly refused = new Map<number, unknown>();
  private created = 0;
  private filters = 0;
  /** subscribe calls under way (a run with one starting still waits for messages) */
  private subscribing = 0;
  private readonly queue: MqttEvent[] = [];
  private queuedBytes = 0;
  private waiter: ((events: MqttEvent[]) => void) | null = null;
  private flushing = false;
  /** publishes under way: a closing run lets them finish (bounded) */
  private readonly publishing = new Set<Promise<unknown>>();
  private closed = false;
  /** messages dropped: the queue was full, or a payload too large */
  dropped = 0;

  constructor(private readonly onDrop?: (n: number) => void) {}

  /** Registers client `id` (at once, so calls that follow it find it) and starts connecting it.
   *  `make` throws for options it refuses; that refusal is also the answer to the client's calls. */
  open(id: number, make: (sink: Sink) => Conn, external: boolean): Conn {
    if (this.closed) throw fail("INVALID_ARGUMENT", "the run is over");
    if (this.conns.has(id) || this.refused.has(id)) throw fail("INVALID_ARGUMENT", `MQTT client ${id} is already open`);
    let conn: Conn;
    try {
      if (++this.created > MQTT_LIMITS.created) throw fail("INVALID_ARGUMENT", `too many MQTT clients created in one run (${MQTT_LIMITS.created})`);
      if (this.conns.size >= MQTT_LIMITS.clients) throw fail("INVALID_ARGUMENT", `too many MQTT clients open in one run (${MQTT_LIMITS.clients})`);
      if (external && [...this.conns.values()].filter((c) => c.conn.external).length >= MQTT_LIMITS.external)
        throw fail("INVALID_ARGUMENT", `too many connections to external MQTT brokers in one run (${MQTT_LIMITS.external})`);
      conn = make((ev, bytes) => this.push({ c: id, ...ev }, bytes));
    } catch (err) {
      this.refuse(id, err);
      throw err;
    }
    // a failed connection is not waited for by anyone else: its error is said by each call
    conn.ready.catch(() => undefined);
    this.conns.set(id, { conn, filters: new Set() });
    return conn;
  }

  /** Client `id` could not be opened: its calls answer `err`. */
  refuse(id: number, err: unknown) {
    if (this.refused.size < MQTT_LIMITS.created && !this.conns.has(id)) this.refused.set(id, err);
  }

  private entry(id: number) {
    const e = this.conns.get(id);
    if (e) return e;
    const refused = this.refused.get(id);
    if (refused) throw refused;
    if (this.created > MQTT_LIMITS.created) throw fail("INVALID_ARGUMENT", `MQTT client ${id} is not open: too many MQTT clients created in one run (${MQTT_LIMITS.created})`);
    throw fail("INVALID_ARGUMENT", `MQTT client ${id} is not open (it was disconnected)`);
  }

  async subscribe(id: number, filters: string[]) {
    const e = this.entry(id);
    const fresh = filters.filter((f, i) => !e.filters.has(f) && filters.indexOf(f) === i);
    if (this.filters + fresh.length > MQTT_LIMITS.filters) throw fail("INVALID_ARGUMENT", `too many topic subscriptions in one run (${MQTT_LIMITS.filters})`);
    this.filters += fresh.length;
    for (const f of fresh) e.filters.add(f);
    this.subscribing++;
    const done: string[] = [];
    try {
      for (const f of fresh) { await e.conn.subscribe(f); done.push(f); }
    } catch (err) {
      // all or nothing: the filters subscribed before the failure are taken back
      for (const f of fresh) { if (e.filters.delete(f)) this.filters--; }
      await Promise.all(done.map((f) => e.conn.unsubscribe(f).catch(() => undefined)));
      throw err;
    } finally {
      this.subscribing--;
      this.wakeIfIdle();
    }
  }

  async unsubscribe(id: number, filters: string[]) {
    const e = this.entry(id);
    try {
      for (const f of filters) {
        if (!e.filters.delete(f)) continue;
        this.filters--;
        await e.conn.unsubscribe(f);
      }
    } finally { this.wakeIfIdle(); }
  }

  publish(id: number, topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<unknown> {
    const e = this.entry(id);
    const p = e.conn.publish(topic, payload, qos, retain);
    this.publishing.add(p);
    const forget = () => { this.publishing.delete(p); };
    p.then(forget, forget);
    return p;
  }

  /** Ends client `id`: its subscriptions and its connection. */
  async closeClient(id: number) {
    const e = this.conns.get(id);
    if (!e) return;
    this.conns.delete(id);
    this.filters -= e.filters.size;
    this.wakeIfIdle();
    await e.conn.close();
  }

  /** The next events (a batch), waiting for one if none is queued; [] at once when the run has
   *  no subscription and none starting (nothing could come), and when it is over. */
  next(): Promise<MqttEvent[]> {
    if (this.closed) return Promise.resolve([]);
    if (this.queue.length) return Promise.resolve(this.take());
    if (this.filters === 0 && this.subscribing === 0) return Promise.resolve([]);
    // one loop asks per run: an earlier question still open is let go
    this.waiter?.([]);
    return new Promise((res) => (this.waiter = res));
  }

  private take(): MqttEvent[] {
    let n = 0, bytes = 0;
    while (n < this.queue.length && n < MQTT_LIMITS.batch && (n === 0 || bytes < MQTT_LIMITS.batchBytes)) bytes += sizeOf(this.queue[n++]!);
    this.queuedBytes -= bytes;
    return this.queue.splice(0, n);
  }

  /** An event from a connection; `bytes` -1: a message too large, counted as dropped. */
  private push(ev: MqttEvent, bytes: number) {
    if (this.closed) return;
    if (bytes < 0) { this.drop(1); return; }
    let dropped = 0;
    while (this.queue.length > 0 && (this.queue.length >= MQTT_LIMITS.queue || this.queuedBytes + bytes > MQTT_LIMITS.queueBytes)) {
      this.queuedBytes -= sizeOf(this.queue.shift()!);
      dropped++;
    }
    if (dropped) this.drop(dropped);
    sizes.set(ev, bytes);
    this.queue.push(ev);
    this.queuedBytes += bytes;
    // answered a moment later, so that what arrives together goes in one answer
    if (this.waiter && !this.flushing) {
      this.flushing = true;
      queueMicrotask(() => {
        this.flushing = false;
        const w = this.waiter;
        if (!w || !this.queue.length) return;
        this.waiter = null;
        w(this.take());
      });
    }
  }

  private drop(n: number) {
    this.dropped += n;
    this.onDrop?.(n);
  }

  private wakeIfIdle() {
    if (this.waiter && this.filters === 0 && this.subscribing === 0 && this.queue.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w([]);
    }
  }

  /** Ends everything: publishes under way get a moment (bounded), then every connection closes. */
  async close() {
    if (this.closed) return;
    this.closed = true;
    this.waiter?.([]);
    this.waiter = null;
    this.queue.length = 0;
    this.queuedBytes = 0;
    if (this.publishing.size) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...this.publishing]),
        new Promise<void>((r) => { timer = setTimeout(r, MQTT_LIMITS.closeMs); }),
      ]);
      clearTimeout(timer);
    }
    const all = [...this.conns.values()];
    this.conns.clear();
    this.filters = 0;
    await Promise.all(all.map((e) => e.conn.close().catch(() => undefined)));
  }
}

/** An event's size as counted when it was queued. */
const sizes = new WeakMap<MqttEvent, number>();
const sizeOf = (ev: MqttEvent) => sizes.get(ev) ?? 0;

/** A connection to this node's broker. */
export const ownConn = (broker: Promise<OwnBroker>) => (sink: Sink): Conn => new OwnConn(broker, sink);
/** A connection to an external broker, once `egress` lets it. */
export const externalConn = (o: ExternalOptions, egress: Egress) => (sink: Sink): Conn => new ExternalConn(o, egress, sink);
