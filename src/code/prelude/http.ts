// Outbound HTTP: ClearBlade's Requests() (classic callbacks) and fetch (promises), with a small
// AbortController/AbortSignal for fetch's signal. One host operation, http.request, sends every
// request through the egress policy (outbound.ts); its arguments come from user code and are
// checked here, type by type.
//
// Bodies cross the sandbox boundary as JSON text: a response as its text when it is valid UTF-8,
// else (fetch only) as its bytes percent-escaped (see escapedOf), which fetch's body, text() and
// arrayBuffer() decode only when asked; a binary request body (a typed array) escaped the same way.
import type { PreludeArea } from "./area.ts";

// The library itself: compiled on first use (see js below), given call and classic.
const LIB = String.raw`
  // ---- bytes cross as percent-escaped latin1 text (escape/unescape of one char a byte): plain
  // ASCII that JSON copies as is, made and read at C speed in QuickJS, which has no base64
  function escapedOf(b) {
    var parts = [];
    for (var i = 0; i < b.length; i += 8192) parts.push(escape(String.fromCharCode.apply(null, b.subarray(i, i + 8192))));
    return parts.join("");
  }
  function bytesOfLatin1(s) {
    var out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function utf8Bytes(s) { return bytesOfLatin1(unescape(encodeURIComponent(s))); }
  // bytes that are not valid UTF-8 as text, each bad sequence a U+FFFD
  function lossyText(b) {
    var parts = [], codes = [], i = 0;
    while (i < b.length) {
      var c = b[i], n = c < 0x80 ? 0 : c >= 0xc2 && c < 0xe0 ? 1 : c >= 0xe0 && c < 0xf0 ? 2 : c >= 0xf0 && c < 0xf5 ? 3 : -1;
      var cp = n > 0 ? c & (0x3f >> n) : c, ok = n >= 0 && i + n < b.length;
      for (var k = 1; ok && k <= n; k++) { if ((b[i + k] & 0xc0) !== 0x80) ok = false; else cp = (cp << 6) | (b[i + k] & 0x3f); }
      if (ok && ((n === 2 && cp < 0x800) || (n === 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
      if (!ok) { codes.push(0xfffd); i++; }
      else if (cp > 0xffff) { cp -= 0x10000; codes.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff)); i += n + 1; }
      else { codes.push(cp); i += n + 1; }
      if (codes.length >= 8192) { parts.push(String.fromCharCode.apply(null, codes)); codes = []; }
    }
    parts.push(String.fromCharCode.apply(null, codes));
    return parts.join("");
  }
  function bytesOf(v) {
    if (v instanceof ArrayBuffer) return new Uint8Array(v);
    if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    return null;
  }
  // "Content-Type" for "content-type", as ClearBlade's full answers name headers
  function canonicalName(k) { return k.replace(/(^|-)([a-z])/g, function (m, d, c) { return d + c.toUpperCase(); }); }

  // ---- Requests() ----------------------------------------------------------------------------
  // options: {uri|url, qs, body, json, form, headers, timeout, auth: {user, pass}, strictSSL,
  // followRedirect, full}; cb(err, body): err false for 2xx and 3xx answers, true with the body
  // for others and with the error text when there was no answer
  function Requests() {
    function verb(method) {
      return function (options, cb) {
        if (typeof options === "string") options = { uri: options };
        if (!options || typeof options !== "object") {
          if (typeof cb === "function") cb(true, "the options must be an object (or a URL)");
          return;
        }
        var o = options;
        var args = { from: "requests", method: method, url: o.uri !== undefined ? o.uri : o.url, qs: o.qs, headers: o.headers, body: o.body,
          form: o.form, json: o.json, auth: o.auth, timeout: o.timeout, strictSSL: o.strictSSL, followRedirect: o.followRedirect };
        return classic("http.request", args, function (err, r) {
          if (typeof cb !== "function") return;
          if (err) { cb(true, r && r.detail !== undefined ? r.detail : r); return; }
          var body = r.text;
          if (o.json) { try { body = JSON.parse(body); } catch (e) { /* not JSON: the text */ } }
          if (o.full) {
            var headers = {}, Header = {};
            for (var i = 0; i < r.headers.length; i++) {
              var k = r.headers[i][0], v = r.headers[i][1];
              headers[k] = headers[k] === undefined ? v : headers[k] + ", " + v;
              (Header[canonicalName(k)] = Header[canonicalName(k)] || []).push(v);
            }
            body = { statusCode: r.status, headers: headers, body: body, Status: r.status, Header: Header, Body: body };
          }
          cb(!(r.status >= 200 && r.status < 400), body);
        });
      };
    }
    return { get: verb("GET"), post: verb("POST"), put: verb("PUT"), delete: verb("DELETE"), patch: verb("PATCH") };
  }

  // ---- fetch ---------------------------------------------------------------------------------
  function FetchHeaders(pairs) {
    this.headers = {};
    for (var i = 0; i < pairs.length; i++) (this.headers[canonicalName(pairs[i][0])] = this.headers[canonicalName(pairs[i][0])] || []).push(pairs[i][1]);
  }
  // the first value, as ClearBlade's; a repeated header's others are in .headers
  FetchHeaders.prototype.get = function (name) { var v = this.headers[canonicalName(String(name).toLowerCase())]; return v ? v[0] : null; };
  FetchHeaders.prototype.has = function (name) { return this.headers[canonicalName(String(name).toLowerCase())] !== undefined; };
  FetchHeaders.prototype.forEach = function (fn) { for (var k in this.headers) fn(this.headers[k].join(", "), k.toLowerCase(), this); };

  function FetchResponse(r) {
    this.status = r.status;
    this.ok = r.status >= 200 && r.status < 300;
    this.url = r.url;
    this.redirected = !!r.redirected;
    // "200 OK", as ClearBlade's; also callable, as one public service calls it
    var text = r.status + " " + r.statusText;
    var statusText = function () { return text; };
    statusText.toString = statusText.valueOf = statusText;
    this.statusText = statusText;
    this.headers = new FetchHeaders(r.headers);
    this._text = r.text;
    this._escaped = r.escaped;
    this._bytes = null;
  }
  Object.defineProperty(FetchResponse.prototype, "body", {
    get: function () { return this._bytes || (this._bytes = typeof this._escaped === "string" ? bytesOfLatin1(unescape(this._escaped)) : utf8Bytes(this._text)); },
  });
  // the values themselves, not promises (as ClearBlade's); await takes them as they are
  FetchResponse.prototype.text = function () { return typeof this._text === "string" ? this._text : (this._text = lossyText(this.body)); };
  FetchResponse.prototype.json = function () { return JSON.parse(this.text()); };
  FetchResponse.prototype.arrayBuffer = function () { var b = this.body; return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength); };
  FetchResponse.prototype.bytes = function () { return this.body; };

  function headerPairs(h) {
    if (h === undefined || h === null) return undefined;
    if (Array.isArray(h)) return h;
    if (typeof Map === "function" && h instanceof Map) { var m = []; h.forEach(function (v, k) { m.push([k, v]); }); return m; }
    if (h instanceof FetchHeaders) { var f = []; h.forEach(function (v, k) { f.push([k, v]); }); return f; }
    return h;
  }

  function abortError(signal) { return signal.reason !== undefined ? signal.reason : namedError("AbortError", "the operation was aborted"); }
  function namedError(name, message) { var e = new Error(message); e.name = name; return e; }

  function fetch(url, init) {
    init = init || {};
    var signal = init.signal;
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    var args = { from: "fetch", method: init.method === undefined ? "GET" : init.method, url: url && typeof url === "object" && typeof url.href === "string" ? url.href : url,
      headers: headerPairs(init.headers), followRedirect: init.redirect === "manual" ? 0 : true };
    if (signal && typeof signal._timeoutMs === "number") args.timeout = signal._timeoutMs;
    var body = init.body;
    if (body !== undefined && body !== null) {
      var bytes = bytesOf(body);
      if (bytes) args.bodyEscaped = escapedOf(bytes);
      else args.body = body;
    }
    var answer = call("http.request", args).then(function (r) { return new FetchResponse(r); });
    if (!signal || typeof signal.addEventListener !== "function") return answer;
    // an abort rejects at once; the request itself ends at its own deadline at the latest
    return new Promise(function (resolve, reject) {
      signal.addEventListener("abort", function () { reject(abortError(signal)); });
      answer.then(resolve, reject);
    });
  };

  // ---- AbortController / AbortSignal (for fetch's signal) ------------------------------------
  function AbortSignal() { this.aborted = false; this.reason = undefined; this.onabort = null; this._listeners = []; }
  AbortSignal.prototype.addEventListener = function (type, fn) { if (type === "abort" && typeof fn === "function") this._listeners.push(fn); };
  AbortSignal.prototype.removeEventListener = function (type, fn) { var i = this._listeners.indexOf(fn); if (i >= 0) this._listeners.splice(i, 1); };
  AbortSignal.prototype.throwIfAborted = function () { if (this.aborted) throw this.reason; };
  function abortWith(signal, reason) {
    if (signal.aborted) return;
    signal.aborted = true;
    signal.reason = reason === undefined ? namedError("AbortError", "the operation was aborted") : reason;
    var all = signal._listeners.slice();
    if (typeof signal.onabort === "function") all.unshift(signal.onabort);
    for (var i = 0; i < all.length; i++) all[i].call(signal, { type: "abort", target: signal });
  }
  AbortSignal.abort = function (reason) { var s = new AbortSignal(); abortWith(s, reason); return s; };
  // the sandbox has no timers: fetch gives the time to the request as its timeout
  AbortSignal.timeout = function (ms) { var s = new AbortSignal(); s._timeoutMs = ms; return s; };
  function AbortController() { this.signal = new AbortSignal(); }
  AbortController.prototype.abort = function (reason) { abortWith(this.signal, reason); };
  return { Requests: Requests, fetch: fetch, AbortController: AbortController, AbortSignal: AbortSignal };
`;

// What the prelude holds: stubs that compile the library the first time a run uses it. QuickJS
// compiles every function of a script as it loads it, and most services never call out: in the
// prelude the library made every new sandbox about 1 ms slower to open; the stubs cost 0.05 ms.
const js = String.raw`
  var httpLib = null;
  function http() { return httpLib || (httpLib = new Function("call", "classic", ${JSON.stringify(LIB)})(call, classic)); }
  globalThis.Requests = function () { return http().Requests(); };
  globalThis.fetch = function fetch(url, init) { return http().fetch(url, init); };
  if (typeof globalThis.AbortController !== "function") {
    globalThis.AbortController = function AbortController() { return new (http().AbortController)(); };
    var AbortSignal = globalThis.AbortSignal = function AbortSignal() { throw new TypeError("use AbortController, AbortSignal.abort() or AbortSignal.timeout()"); };
    AbortSignal.abort = function (reason) { return http().AbortSignal.abort(reason); };
    AbortSignal.timeout = function (ms) { return http().AbortSignal.timeout(ms); };
  }
`;

export const http: PreludeArea = { js: js };
