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
import type { Messages } from "../../domain/messages.ts";
import { type Egress, externalConn, MQTT_LIMITS, type OwnBroker, ownConn, RunMqtt, SharedGroups } from "../mqtt-clients.ts";
import type { HostContext, LibraryArea } from "./types.ts";

const js = String.raw`
  var MQTT = globalThis.MQTT = {};
  // a message's bytes, kept with the payload text they belong to ({p, b: Uint8Array, raw: binary
  // string}): payload_bytes is made from the text only when asked for, and again if the text changed
  var mqttBytes = new WeakMap();
  var mqttClientSeq = 0;
  // clients with subscriptions, by number; the event loop runs while the run has any
  var mqttListening = {};
  var mqttFilters = 0;
  var mqttLooping = false;
  var MQTT_PAYLOAD_MAX = ${MQTT_LIMITS.payloadBytes};

  // bytes cross to the host as binary strings (one char per byte)
  function mqttBinaryOf(u8) {
    var s = "";
    for (var i = 0; i < u8.length; i += 8192) s += String.fromCharCode.apply(null, u8.subarray(i, i + 8192));
    return s;
  }
  function mqttBytesOfBinary(s) {
    var u = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return u;
  }
  function mqttAsBytes(v) {
    if (v instanceof Uint8Array) return v;
    if (v instanceof ArrayBuffer) return new Uint8Array(v);
    if (v && ArrayBuffer.isView && ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    return null;
  }
  // UTF-8 as a binary string (lone surrogates become U+FFFD, as a TextEncoder does)
  function mqttUtf8(text) {
    try { return unescape(encodeURIComponent(text)); } catch (e) {
      var out = "";
      for (var i = 0; i < text.length; i++) {
        var c = text.charCodeAt(i);
        if (c >= 0xD800 && c <= 0xDBFF && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xFC00) === 0xDC00) { out += text.charAt(i) + text.charAt(i + 1); i++; }
        else out += c >= 0xD800 && c <= 0xDFFF ? "\uFFFD" : text.charAt(i);
      }
      return unescape(encodeURIComponent(out));
    }
  }
  // text of UTF-8 bytes (a binary string); invalid sequences become U+FFFD, as a TextDecoder does
  function mqttText(bin) {
    try { return decodeURIComponent(escape(bin)); } catch (e) {
      var out = "", i = 0;
      while (i < bin.length) {
        var b = bin.charCodeAt(i), n = b < 0x80 ? 0 : b >= 0xC2 && b < 0xE0 ? 1 : b >= 0xE0 && b < 0xF0 ? 2 : b >= 0xF0 && b < 0xF5 ? 3 : -1;
        if (n < 0) { out += "\uFFFD"; i++; continue; }
        var ok = i + n < bin.length;
        for (var j = 1; ok && j <= n; j++) ok = (bin.charCodeAt(i + j) & 0xC0) === 0x80;
        if (ok && n > 0) { try { out += decodeURIComponent(escape(bin.substr(i, n + 1))); } catch (e2) { ok = false; } }
        else if (ok) out += bin.charAt(i);
        if (!ok) { out += "\uFFFD"; i++; continue; }
        i += n + 1;
      }
      return out;
    }
  }
  function mqttPayloadText(v) {
    if (typeof v === "string") return v;
    if (v === undefined || v === null || typeof v === "function" || typeof v === "symbol") throw new TypeError("an MQTT payload must be a string, a Uint8Array, an MQTT.Message or a JSON value");
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  function MqttMessage(payload) {
    if (!(this instanceof MqttMessage)) return new MqttMessage(payload);
    this.payload = "";
    this.topic = "";
    this.qos = 0;
    this.retain = false;
    this.duplicate = false;
    this.user_properties = {};
    if (payload !== undefined && payload !== null) mqttSetPayload(this, payload);
  }
  function mqttSetPayload(m, v) {
    var u8 = mqttAsBytes(v);
    if (u8) {
      var bin = mqttBinaryOf(u8);
      m.payload = mqttText(bin);
      mqttBytes.set(m, { p: m.payload, b: null, raw: bin });
    } else {
      m.payload = mqttPayloadText(v);
      mqttBytes.delete(m);
    }
  }
  Object.defineProperty(MqttMessage.prototype, "payload_bytes", {
    configurable: true,
    get: function () {
      var k = mqttBytes.get(this);
      if (!k || k.p !== this.payload) mqttBytes.set(this, (k = { p: this.payload, b: null, raw: mqttUtf8(String(this.payload)) }));
      if (k.b === null) { k.b = mqttBytesOfBinary(k.raw); k.raw = null; }
      return k.b;
    },
    set: function (v) { mqttSetPayload(this, v); },
  });
  // what crosses to the host: the text, or the bytes when they are not (only) the text
  function mqttWire(v, args) {
    if (v instanceof MqttMessage) {
      var k = mqttBytes.get(v);
      if (k && k.p === v.payload) args.bytes = k.raw !== null ? k.raw : mqttBinaryOf(k.b);
      else args.payload = mqttPayloadText(v.payload);
    } else {
      var u8 = mqttAsBytes(v);
      if (u8) {
        if (u8.length > MQTT_PAYLOAD_MAX) throw new RangeError("an MQTT payload may have at most " + MQTT_PAYLOAD_MAX + " bytes");
        args.bytes = mqttBinaryOf(u8);
      } else args.payload = mqttPayloadText(v);
    }
  }
  function mqttReceived(ev) {
    var m = new MqttMessage();
    m.payload = ev.p;
    m.topic = ev.t;
    m.qos = ev.q || 0;
    m.retain = !!ev.r;
    m.duplicate = !!ev.d;
    m.user_properties = ev.u || {};
    if (ev.b !== undefined) mqttBytes.set(m, { p: ev.p, b: null, raw: ev.b });
    return m;
  }
  function mqttCall(op, args) {
    try { return call(op, args); } catch (e) { return Promise.reject(e); }
  }
  function mqttNothing() { return undefined; }
  // a service callback: its error (or its resp.success) ends the run, and nothing more is dispatched
  function mqttCallback(fn, args) {
    try { fn.apply(null, args); return true; } catch (e) { failRun(e); return false; }
  }
  function mqttMatches(filter, topic) {
    if (filter.indexOf("$share/") === 0) { var s = filter.indexOf("/", 7); filter = s < 0 ? "" : filter.slice(s + 1); }
    if (filter === topic || filter === "#") return true;
    var f = filter.split("/"), t = topic.split("/");
    for (var i = 0; i < f.length; i++) {
      if (f[i] === "#") return true;
      if (i >= t.length || (f[i] !== "+" && f[i] !== t[i])) return false;
    }
    return f.length === t.length;
  }
  function mqttDispatch(ev) {
    var c = mqttListening[ev.c];
    if (!c) return true;
    if (ev.k === "connect") return c._onConnect ? mqttCallback(c._onConnect, []) : true;
    if (ev.k === "disconnect") return c._onDisconnect ? mqttCallback(c._onDisconnect, [ev.e]) : true;
    var m = mqttReceived(ev);
    // this node's broker says which subscription a message came through; an external broker does not
    if (ev.f !== undefined) return c._handlers[ev.f] ? mqttCallback(c._handlers[ev.f], [ev.t, m]) : true;
    for (var f in c._handlers) if (mqttMatches(f, ev.t) && !mqttCallback(c._handlers[f], [ev.t, m])) return false;
    return true;
  }
  function mqttLoop() {
    if (mqttLooping || mqttFilters <= 0) return;
    mqttLooping = true;
    call("mqtt.next", null).then(function (events) {
      mqttLooping = false;
      for (var i = 0; i < events.length; i++) if (!mqttDispatch(events[i])) return;
      mqttLoop();
    }, function (e) { mqttLooping = false; failRun(e); });
  }
  function mqttTopics(topics, what) {
    var list = typeof topics === "string" ? [topics] : topics;
    if (!Array.isArray(list) || list.length === 0) throw new TypeError(what + ": the topic must be a string or a non-empty array of strings");
    for (var i = 0; i < list.length; i++) if (typeof list[i] !== "string") throw new TypeError(what + ": the topic must be a string or a non-empty array of strings");
    return list;
  }

  function MqttClient(options) {
    if (!(this instanceof MqttClient)) throw new TypeError("MQTT.Client is a constructor: new MQTT.Client(options)");
    if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options))) throw new TypeError("MQTT.Client: options must be an object");
    var o = options || {}, plain = {};
    for (var key in o) if (typeof o[key] !== "function") plain[key] = o[key];
    this._n = ++mqttClientSeq;
    this._handlers = Object.create(null);
    this._count = 0;
    this._closed = false;
    this._onConnect = typeof o.on_connect === "function" ? o.on_connect : null;
    this._onDisconnect = typeof o.on_disconnect === "function" ? o.on_disconnect : null;
    var self = this;
    // opened now: the calls that follow reach the host after it, in order
    this._ready = call("mqtt.open", { client: this._n, options: plain });
    this._ready.then(function () { if (self._onConnect) mqttCallback(self._onConnect, []); }, mqttNothing);
  }
  MqttClient.prototype.subscribe = function (topics, onMessage) {
    var list, self = this, added = [];
    try { list = mqttTopics(topics, "subscribe"); } catch (e) { return Promise.reject(e); }
    if (typeof onMessage !== "function") return Promise.reject(new TypeError("subscribe: onMessage must be a function"));
    if (this._closed) return Promise.reject(new Error("the MQTT client is disconnected"));
    // one handler per filter (a second subscribe replaces it), there before any message can come
    for (var i = 0; i < list.length; i++) {
      if (!(list[i] in this._handlers)) { added.push(list[i]); this._count++; mqttFilters++; }
      this._handlers[list[i]] = onMessage;
    }
    mqttListening[this._n] = this;
    var p = mqttCall("mqtt.subscribe", { client: this._n, topics: list });
    mqttLoop();
    return p.then(mqttNothing, function (e) {
      for (var j = 0; j < added.length; j++) if (added[j] in self._handlers) { delete self._handlers[added[j]]; self._count--; mqttFilters--; }
      if (self._count === 0) delete mqttListening[self._n];
      throw e;
    });
  };
  MqttClient.prototype.unsubscribe = function (topics) {
    var list;
    try { list = mqttTopics(topics, "unsubscribe"); } catch (e) { return Promise.reject(e); }
    for (var i = 0; i < list.length; i++) if (list[i] in this._handlers) { delete this._handlers[list[i]]; this._count--; mqttFilters--; }
    if (this._count === 0) delete mqttListening[this._n];
    return mqttCall("mqtt.unsubscribe", { client: this._n, topics: list }).then(mqttNothing);
  };
  MqttClient.prototype.publish = function (topic, payload, qos, retain) {
    if (payload instanceof MqttMessage) {
      if (topic === undefined || topic === null || topic === "") topic = payload.topic;
      if (qos === undefined || qos === null) qos = payload.qos;
      if (retain === undefined || retain === null) retain = payload.retain;
    }
    var args = { client: this._n, topic: topic, qos: qos === undefined || qos === null ? 0 : qos, retain: retain === undefined || retain === null ? false : retain };
    try { mqttWire(payload, args); } catch (e) { return Promise.reject(e); }
    return mqttCall("mqtt.publish", args).then(mqttNothing);
  };
  // a WritableStream-like sink: what is written is the payload, published when it is closed
  MqttClient.prototype.createPublishStream = function (topic, qos, retain) {
    var client = this, chunks = [], size = 0, state = "writable", settleClosed;
    var closed = new Promise(function (res, rej) { settleClosed = { res: res, rej: rej }; });
    closed.then(null, mqttNothing);
    function write(chunk) {
      if (state !== "writable") return Promise.reject(new TypeError("the publish stream is " + state));
      var u8 = mqttAsBytes(chunk), bin = u8 ? mqttBinaryOf(u8) : typeof chunk === "string" ? mqttUtf8(chunk) : null;
      if (bin === null) return Promise.reject(new TypeError("write: a chunk must be a string or a Uint8Array"));
      size += bin.length;
      if (size > MQTT_PAYLOAD_MAX) { var err = new RangeError("an MQTT payload may have at most " + MQTT_PAYLOAD_MAX + " bytes"); abort(err); return Promise.reject(err); }
      chunks.push(bin);
      return Promise.resolve();
    }
    function close() {
      if (state !== "writable") return Promise.reject(new TypeError("the publish stream is " + state));
      state = "closed";
      var bytes = chunks.join("");
      chunks = [];
      return mqttCall("mqtt.publish", { client: client._n, topic: topic, qos: qos === undefined || qos === null ? 0 : qos, retain: retain === undefined || retain === null ? false : retain, bytes: bytes })
        .then(function () { settleClosed.res(); }, function (e) { settleClosed.rej(e); throw e; });
    }
    function abort(reason) {
      if (state === "writable") { state = "errored"; chunks = []; settleClosed.rej(reason); }
      return Promise.resolve();
    }
    var stream = { locked: false, close: close, abort: abort };
    var writer = { write: write, close: close, abort: abort, closed: closed, ready: Promise.resolve(), desiredSize: 1, releaseLock: function () { stream.locked = false; } };
    stream.getWriter = function () {
      if (stream.locked) throw new TypeError("the publish stream is locked to a writer");
      stream.locked = true;
      return writer;
    };
    return stream;
  };
  // ends the client's subscriptions and connection (the run's end does it for every client)
  MqttClient.prototype.disconnect = function () {
    if (this._closed) return Promise.resolve();
    this._closed = true;
    mqttFilters -= this._count;
    this._count = 0;
    this._handlers = Object.create(null);
    delete mqttListening[this._n];
    return mqttCall("mqtt.close", { client: this._n }).then(mqttNothing);
  };
  MQTT.Client = MqttClient;
  MQTT.Message = MqttMessage;
`;

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
    systemKey,
    publish: (topic, payload, qos, retain) => m.publish(p, systemKey, { topic, body: payload, qos, retain }),
    subscribe: (filter, deliver) => m.subscribe(p, systemKey, filter, deliver),
    maySubscribe: (filter) => m.maySubscribe(p, systemKey, filter),
    groups: groupsOf(m),
  };
}

/** Shared subscriptions are grouped per node (per broker). */
const groups = new WeakMap<Messages, SharedGroups>();
const groupsOf = (m: Messages) => { let g = groups.get(m); if (!g) groups.set(m, (g = new SharedGroups())); return g; };

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
  js,
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
