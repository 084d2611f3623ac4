// MQTT: the in-engine client, MQTT.Client and MQTT.Message (ClearBlade's `mqtt` library).
//
// Without an address (or with this node's own address and MQTT port) a client talks to this
// node's broker through the domain, as the run's effective user (or as the token it was given),
// with the checks a user or device connection gets: topic permissions and the system's own topic
// space. With another address it connects to that broker over the network (mqtt.js), if the
// egress policy lets it (the engine's, shared with outbound HTTP). Messages wait on the main thread (RunMqtt) until the
// sandbox's event loop asks for them (mqtt.next); the loop runs while the run has subscriptions,
// so a run with subscriptions lasts until it ends itself or reaches its execution timeout.
import type { Config } from "../../config.ts";
import type { Counter, Metrics } from "../../core/metrics.ts";
import { fail } from "../../core/errors.ts";
import { type Egress, externalConn, MQTT_LIMITS, type OwnBroker, ownConn, RunMqtt } from "../mqtt-clients.ts";
import type { HostContext, LibraryArea } from "./types.ts";

// ---- arguments ----------------------------------------------------------------------------------

const TOPIC_MAX = 1024;
const TEXT_MAX = 4096;
const PEM_MAX = 64 << 10;

const clientOf = (a: Record<string, any>): number => {
  if (!Number.isSafeInteger(a.client) || a.client < 1) throw fail("INVALID_ARGUMENT", "client must be an MQTT client's number");
  return a.client;
};

/** A topic to publish to: no wildcards, no NUL. */
function topicOf(v: unknown): string {
  if (typeof v !== "string" || !v || v.length > TOPIC_MAX || /[+#\u0000]/.test(v)) throw fail("INVALID_ARGUMENT", `the topic must be a topic name of 1 to ${TOPIC_MAX} characters without wildcards`);
  return v;
}

/** An MQTT topic filter: '+' alone in its level, '#' alone and last; `$share/<group>/` in front. */
export function validFilter(f: string): boolean {
  if (!f || f.length > TOPIC_MAX || f.includes("\u0000")) return false;
  if (f.startsWith("$share/")) {
    const i = f.indexOf("/", 7);
    if (i < 0) return false;
    const group = f.slice(7, i);
    if (!group || /[+#]/.test(group)) return false;
    f = f.slice(i + 1);
    if (!f) return false;
  }
  const levels = f.split("/");
  return levels.every((l, i) => (l.includes("+") ? l === "+" : true) && (l.includes("#") ? l === "#" && i === levels.length - 1 : true));
}

function filtersOf(v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0 || v.length > MQTT_LIMITS.filters) throw fail("INVALID_ARGUMENT", `topics must be 1 to ${MQTT_LIMITS.filters} topic filters`);
  for (const f of v) if (typeof f !== "string" || !validFilter(f)) throw fail("INVALID_ARGUMENT", `'${String(f).slice(0, 100)}' is not a topic filter ('+' for one level, '#' last for the rest)`);
  return v;
}

function payloadOf(a: Record<string, any>): Buffer {
  let b: Buffer;
  if (typeof a.bytes === "string") {
    // one char per byte: anything above 0xFF did not come from mqttBinaryOf
    if (/[^\u0000-\u00ff]/.test(a.bytes)) throw fail("INVALID_ARGUMENT", "bytes must be a binary string");
    b = Buffer.from(a.bytes, "latin1");
  } else if (typeof a.payload === "string") b = Buffer.from(a.payload, "utf8");
  else throw fail("INVALID_ARGUMENT", "the payload must be a string, a Uint8Array or an MQTT.Message");
  if (b.length > MQTT_LIMITS.payloadBytes) throw fail("INVALID_ARGUMENT", `an MQTT payload may have at most ${MQTT_LIMITS.payloadBytes} bytes (this one has ${b.length})`);
  return b;
}

function qosOf(v: unknown): 0 | 1 | 2 {
  if (v !== 0 && v !== 1 && v !== 2) throw fail("INVALID_ARGUMENT", "qos must be 0, 1 or 2");
  return v;
}

const optText = (o: Record<string, unknown>, k: string, max = TEXT_MAX): string | undefined => {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.length > max) throw fail("INVALID_ARGUMENT", `options.${k} must be a string of at most ${max} characters`);
  return v;
};
const optInt = (o: Record<string, unknown>, k: string, min: number, max: number): number | undefined => {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || (v as number) < min || (v as number) > max) throw fail("INVALID_ARGUMENT", `options.${k} must be an integer from ${min} to ${max}`);
  return v as number;
};

interface ClientOptions {
  address?: string;
  port: number;
  username?: string;
  password?: string;
  clientId?: string;
  keepalive: number;
  tls?: { ca?: string; cert?: string; key?: string };
}

function optionsOf(v: unknown): ClientOptions {
  if (v === undefined || v === null) v = {};
  if (typeof v !== "object" || Array.isArray(v)) throw fail("INVALID_ARGUMENT", "MQTT.Client options must be an object");
  const o = v as Record<string, unknown>;
  const address = optText(o, "address", 253) || undefined;
  if (address !== undefined && !/^[A-Za-z0-9.:[\]_-]+$/.test(address)) throw fail("INVALID_ARGUMENT", "options.address must be a host name or an IP address");
  if (o.use_tls !== undefined && o.use_tls !== null && typeof o.use_tls !== "boolean") throw fail("INVALID_ARGUMENT", "options.use_tls must be a boolean");
  let tls: ClientOptions["tls"];
  if (o.use_tls === true) {
    const t = o.tls_config ?? {};
    if (typeof t !== "object" || Array.isArray(t)) throw fail("INVALID_ARGUMENT", "options.tls_config must be an object");
    const tc = t as Record<string, unknown>;
    tls = { ca: optText(tc, "ca_cert", PEM_MAX) || undefined, cert: optText(tc, "client_cert", PEM_MAX) || undefined, key: optText(tc, "client_key", PEM_MAX) || undefined };
  }
  return {
    address: address?.replace(/^\[(.*)\]$/, "$1"),
    port: optInt(o, "port", 1, 65535) ?? 1883,
    username: optText(o, "username"),
    password: optText(o, "password"),
    clientId: optText(o, "client_id", 128),
    keepalive: optInt(o, "keepalive", 0, 65535) ?? 30,
    tls,
  };
}

// ---- where a client goes ------------------------------------------------------------------------

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "::1"]);

/** This node's own broker, named by an address: a loopback name (or the address it listens on)
 *  and its MQTT port (its TLS port with use_tls). */
function isOwnBroker(config: Config, o: ClientOptions): boolean {
  const a = o.address!.toLowerCase();
  const here = LOOPBACK_NAMES.has(a) || a.startsWith("127.") || (config.httpHost !== "0.0.0.0" && config.httpHost !== "::" && a === config.httpHost.toLowerCase());
  return here && o.port === (o.tls ? config.mqttTlsPort : config.mqttPort);
}

/** This node's broker as the run's effective user, or as the token (username) for the system
 *  (password) a service gave: checked as a connection with them would be. */
async function ownBroker(x: HostContext, o: ClientOptions): Promise<OwnBroker> {
  let p = x.p, systemKey = x.systemKey;
  if (o.username !== undefined) {
    const who = await x.e.d.tokens.resolve(o.username);
    if (!who || !o.password) throw fail("BAD_CREDENTIALS", "the username must be a valid token and the password its system's key");
    await x.e.systems.access(who, o.password);
    p = who;
    systemKey = o.password;
  }
  const m = x.e.messages;
  return {
    publish: (topic, payload, qos, retain) => m.publish(p, systemKey, { topic, body: payload, qos, retain }),
    subscribe: (filter, deliver) => m.subscribe(p, systemKey, filter, deliver),
  };
}

const dropCounters = new WeakMap<Metrics, Counter>();
const dropCounter = (m: Metrics) => {
  let c = dropCounters.get(m);
  if (!c) dropCounters.set(m, (c = m.counter("outpost_code_mqtt_dropped_total", "Messages MQTT.Client runs dropped: their queue was full, or a payload too large")));
  return c;
};

/** The run's MQTT clients: they end with the run. */
const clientsOf = (x: HostContext) =>
  x.run.resource("mqtt", () => {
    const metrics = x.e.metrics;
    const clients = new RunMqtt(metrics ? (n) => dropCounter(metrics).inc({}, n) : undefined);
    return {
      value: clients,
      close: async () => {
        await clients.close();
        if (clients.dropped) x.e.d.log.warn("an MQTT.Client run dropped messages", { systemKey: x.systemKey, dropped: clients.dropped });
      },
    };
  });

export const mqtt: LibraryArea = {
  ops: {
    "mqtt.open": (x, a) => {
      const id = clientOf(a);
      const clients = clientsOf(x);
      let o: ClientOptions;
      try { o = optionsOf(a.options); } catch (err) { clients.refuse(id, err); throw err; }
      const own = o.address === undefined || isOwnBroker(x.e.d.config, o);
      const egress: Egress = async (host) => (await x.e.egress.resolve(host))[0]!;
      const conn = own
        ? clients.open(id, ownConn(ownBroker(x, o)), false)
        : clients.open(id, externalConn({
          host: o.address!, port: o.port, username: o.username, password: o.password, keepalive: o.keepalive, tls: o.tls,
          clientId: o.clientId || `outpost-${crypto.randomUUID()}`,
        }, egress), true);
      return conn.ready.then(() => null);
    },
    "mqtt.subscribe": async (x, a) => {
      const id = clientOf(a);
      const filters = filtersOf(a.topics);
      await clientsOf(x).subscribe(id, filters);
      return null;
    },
    "mqtt.unsubscribe": async (x, a) => {
      const id = clientOf(a);
      const filters = filtersOf(a.topics);
      await clientsOf(x).unsubscribe(id, filters);
      return null;
    },
    "mqtt.publish": async (x, a) => {
      const id = clientOf(a);
      const topic = topicOf(a.topic);
      const qos = qosOf(a.qos);
      if (typeof a.retain !== "boolean") throw fail("INVALID_ARGUMENT", "retain must be a boolean");
      await clientsOf(x).publish(id, topic, payloadOf(a), qos, a.retain);
      return null;
    },
    "mqtt.close": async (x, a) => {
      await x.run.peek<RunMqtt>("mqtt")?.closeClient(clientOf(a));
      return null;
    },
    "mqtt.next": (x) => x.run.peek<RunMqtt>("mqtt")?.next() ?? [],
  },
};
