// Globals services use beyond ClearBlade's objects: sleep, JavaScript timers within a run,
// atob/btoa, TextEncoder/TextDecoder, and ClearBlade's crypto module (hashes, HMAC, encode/decode,
// JWTs) with random bytes and UUIDs. Timers wait on the main thread; crypto runs in the worker
// itself (code/local.ts), with no round trip.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  function localCall(op, args) { return replyOf(local(op, JSON.stringify(args))); }

  // ---- sleep and timers -------------------------------------------------------------------
  // sleep blocks the run; a timer's callback runs later, while the run lasts (a pending timer
  // keeps it going until resp.success/error or its deadline, as a pending promise does)
  globalThis.sleep = function (ms) { callSync("timer.wait", { ms: Number(ms) || 0 }); };
  var timers = {}, nextTimer = 1;
  var pendingTimers = 0, TIMERS_MAX = 1000;
  function startTimer(fn, ms, args, repeat) {
    if (typeof fn !== "function") throw new TypeError("the timer's callback must be a function");
    if (pendingTimers >= TIMERS_MAX) throw new RangeError("a run has at most " + TIMERS_MAX + " timers waiting at once");
    var id = nextTimer++;
    timers[id] = true;
    pendingTimers++;
    (function tick() {
      call("timer.wait", { ms: Number(ms) || 0, id: id }).then(function () {
        if (!timers[id]) { pendingTimers--; return; }
        if (!repeat) { delete timers[id]; pendingTimers--; }
        fn.apply(null, args);
        if (repeat) { if (timers[id]) tick(); else pendingTimers--; }
      });
    })();
    return id;
  }
  function stopTimer(id) { if (timers[id]) { delete timers[id]; call("timer.cancel", { id: id }); } }
  globalThis.setTimeout = function (fn, ms) { return startTimer(fn, ms, Array.prototype.slice.call(arguments, 2), false); };
  globalThis.setInterval = function (fn, ms) { return startTimer(fn, Math.max(1, Number(ms) || 0), Array.prototype.slice.call(arguments, 2), true); };
  globalThis.clearTimeout = stopTimer;
  globalThis.clearInterval = stopTimer;

  // ---- bytes and text ---------------------------------------------------------------------
  var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  globalThis.btoa = function (s) {
    s = String(s);
    var out = "";
    for (var i = 0; i < s.length; i += 3) {
      var a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new Error("btoa: the string has characters outside Latin1");
      var n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64.charAt(n >> 18 & 63) + B64.charAt(n >> 12 & 63) + (i + 1 < s.length ? B64.charAt(n >> 6 & 63) : "=") + (i + 2 < s.length ? B64.charAt(n & 63) : "=");
    }
    return out;
  };
  globalThis.atob = function (s) {
    s = String(s).replace(/[\s=]/g, "").replace(/-/g, "+").replace(/_/g, "/");
    if (/[^A-Za-z0-9+\/]/.test(s) || s.length % 4 === 1) throw new Error("atob: not base64");
    var out = "";
    for (var i = 0; i < s.length; i += 4) {
      var n = (B64.indexOf(s.charAt(i)) << 18) | (B64.indexOf(s.charAt(i + 1)) << 12) | ((B64.indexOf(s.charAt(i + 2)) & 63) << 6) | (B64.indexOf(s.charAt(i + 3)) & 63);
      out += String.fromCharCode(n >> 16 & 255);
      if (i + 2 < s.length) out += String.fromCharCode(n >> 8 & 255);
      if (i + 3 < s.length) out += String.fromCharCode(n & 255);
    }
    return out;
  };
  function utf8Encode(s) {
    s = String(s);
    var out = [];
    for (var i = 0; i < s.length; i++) {
      var c = s.charCodeAt(i);
      if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
        var d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; } else c = 0xfffd;
      } else if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | c >> 6, 0x80 | c & 63);
      else if (c < 0x10000) out.push(0xe0 | c >> 12, 0x80 | c >> 6 & 63, 0x80 | c & 63);
      else out.push(0xf0 | c >> 18, 0x80 | c >> 12 & 63, 0x80 | c >> 6 & 63, 0x80 | c & 63);
    }
    return new Uint8Array(out);
  }
  function utf8Decode(bytes) {
    var out = "", i = 0, n = bytes.length;
    while (i < n) {
      var b = bytes[i++], c;
      if (b < 0x80) c = b;
      else if (b >= 0xc2 && b < 0xe0 && i < n && (bytes[i] & 0xc0) === 0x80) c = (b & 31) << 6 | bytes[i++] & 63;
      else if (b >= 0xe0 && b < 0xf0 && i + 1 < n && (bytes[i] & 0xc0) === 0x80 && (bytes[i + 1] & 0xc0) === 0x80) { c = (b & 15) << 12 | (bytes[i] & 63) << 6 | bytes[i + 1] & 63; i += 2; }
      else if (b >= 0xf0 && b < 0xf5 && i + 2 < n && (bytes[i] & 0xc0) === 0x80 && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80) { c = (b & 7) << 18 | (bytes[i] & 63) << 12 | (bytes[i + 1] & 63) << 6 | bytes[i + 2] & 63; i += 3; }
      else c = 0xfffd;
      if (c >= 0x10000) { c -= 0x10000; out += String.fromCharCode(0xd800 + (c >> 10), 0xdc00 + (c & 1023)); }
      else out += String.fromCharCode(c);
    }
    return out;
  }
  globalThis.TextEncoder = function TextEncoder() { this.encoding = "utf-8"; };
  globalThis.TextEncoder.prototype.encode = function (s) { return utf8Encode(s === undefined ? "" : s); };
  globalThis.TextDecoder = function TextDecoder(label) {
    if (label !== undefined && !/^utf-?8$/i.test(String(label))) throw new RangeError("TextDecoder: only utf-8 is supported");
    this.encoding = "utf-8";
  };
  globalThis.TextDecoder.prototype.decode = function (b) {
    if (b === undefined) return "";
    if (b instanceof ArrayBuffer) b = new Uint8Array(b);
    else if (ArrayBuffer.isView(b) && !(b instanceof Uint8Array)) b = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    return utf8Decode(b);
  };

  var HEX = "0123456789abcdef";
  function toHex(bytes) { var s = ""; for (var i = 0; i < bytes.length; i++) s += HEX.charAt(bytes[i] >> 4) + HEX.charAt(bytes[i] & 15); return s; }
  function fromHex(h) {
    if (h.length % 2 || /[^0-9a-fA-F]/.test(h)) throw new Error("not hex");
    var out = new Uint8Array(h.length / 2);
    for (var i = 0; i < out.length; i++) out[i] = parseInt(h.substr(i * 2, 2), 16);
    return out;
  }
  // data given as a string (UTF-8) or bytes, as hex for the worker
  // what one call hashes, encodes or signs at most (checked before the text is turned into bytes)
  var BYTES_MAX = 8 * 1024 * 1024;
  function hexOf(data) {
    var n = typeof data === "string" ? data.length : data && data.byteLength;
    if (n > BYTES_MAX) throw new RangeError("the data is longer than " + BYTES_MAX + " bytes");
    if (typeof data === "string") return toHex(utf8Encode(data));
    if (data instanceof ArrayBuffer) return toHex(new Uint8Array(data));
    if (ArrayBuffer.isView(data)) return toHex(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    throw new TypeError("data must be a string or a Uint8Array");
  }
  function latin1Of(bytes) { var s = ""; for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]); return s; }
  // bytes that print as hex, base64 or text like a Node Buffer's toString
  function byteResult(hex) {
    var b = fromHex(hex);
    b.toString = function (enc) { return enc === "hex" ? hex : enc === "base64" ? btoa(latin1Of(b)) : enc === "binary" || enc === "latin1" ? latin1Of(b) : utf8Decode(b); };
    return b;
  }

  // ---- crypto -------------------------------------------------------------------------------
  function Digest(kind, algorithm, keyHex) { this._kind = kind; this._alg = algorithm; this._key = keyHex; this._parts = []; }
  Digest.prototype.update = function (data) {
    this._size = (this._size || 0) + (typeof data === "string" ? data.length : (data && data.byteLength) || 0);
    if (this._size > BYTES_MAX) throw new RangeError("the data is longer than " + BYTES_MAX + " bytes");
    this._parts.push(hexOf(data));
    return this;
  };
  Digest.prototype.digest = function (encoding) {
    var enc = encoding === "binary" || encoding === "latin1" ? "latin1" : encoding === "base64" ? "base64" : encoding === undefined ? "bytes" : "hex";
    var args = { algorithm: this._alg, data: this._parts.join(""), inputEncoding: "hex", encoding: enc === "bytes" ? "hex" : enc };
    if (this._kind === "hmac") { args.key = this._key; args.keyEncoding = "hex"; }
    var out = localCall(this._kind, args);
    return enc === "bytes" ? byteResult(out) : out;
  };
  globalThis.crypto = {
    createHash: function (algorithm) { return new Digest("hash", algorithm); },
    createHmac: function (algorithm, key) { return new Digest("hmac", algorithm, hexOf(key)); },
    // ClearBlade's: the HMAC of data with key, as bytes
    hmac: function (data, key, hashType) { return byteResult(localCall("hmac", { algorithm: hashType || "sha256", key: hexOf(key), keyEncoding: "hex", data: hexOf(data), inputEncoding: "hex", encoding: "hex" })); },
    encode: function (type, data) {
      var hex = hexOf(data);
      if (type === "hex") return hex;
      if (type === "base64") return btoa(latin1Of(fromHex(hex)));
      throw new Error("crypto.encode: unsupported encoding '" + type + "' (base64, hex)");
    },
    decode: function (type, data) {
      if (typeof data !== "string") data = utf8Decode(fromHex(hexOf(data)));
      if (type === "hex") return byteResult(data.toLowerCase());
      if (type === "base64") {
        var bin = atob(data), b = new Uint8Array(bin.length);
        for (var i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
        return byteResult(toHex(b));
      }
      throw new Error("crypto.decode: unsupported encoding '" + type + "' (base64, hex)");
    },
    create_jwt: function (claims, algorithm, key) { return localCall("jwt", { claims: claims, algorithm: algorithm, key: key }); },
    randomBytes: function (size) { return byteResult(localCall("random", { size: size, encoding: "hex" })); },
    randomUUID: function () { return localCall("uuid", {}); },
    getRandomValues: function (arr) {
      if (!ArrayBuffer.isView(arr)) throw new TypeError("getRandomValues needs a typed array");
      var b = fromHex(localCall("random", { size: arr.byteLength, encoding: "hex" }));
      new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength).set(b);
      return arr;
    },
  };
`;

export const globals: PreludeArea = { js: js };
