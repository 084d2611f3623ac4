// MQTT: the in-engine client, MQTT.Client and MQTT.Message (ClearBlade's `mqtt` library).
//
// Without an address (or with this node's own address and MQTT port) a client talks to this
// node's broker through the domain, as the run's effective user (or as the token it was given),
// with the checks a user or device connection gets: topic permissions and the system's own topic
// space. With another address it connects to that broker over the network (mqtt.js), if the
// egress policy lets it (the engine's, shared with outbound HTTP). Messages wait on the main thread (RunMqtt) until the
// sandbox's event loop asks for them (mqtt.next); the loop runs while the run has subscriptions,
// so a run with subscriptions lasts until it ends itself or reaches its execution timeout.
import type { PreludeArea } from "./area.ts";
import { MQTT_LIMITS } from "../mqttLimits.ts";

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

export const mqtt: PreludeArea = { js: js, lazy: ["MQTT"] };
