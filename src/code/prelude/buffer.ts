// Node's Buffer, the part services use: ClearBlade's engine has one, and code written for it builds
// Basic-auth headers with `new Buffer(s).toString("base64")`, decodes payloads from hex or base64
// and reads Modbus registers with readUInt16BE. A Uint8Array of its own kind, with Node's
// encodings (utf8, base64, base64url, hex, latin1/binary, ascii, utf16le), from/alloc/concat/
// byteLength/compare, and the fixed-width reads and writes. Compiled on first use; runs in the
// sandbox only (no host operation).
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  var ENCODINGS = { utf8: "utf8", "utf-8": "utf8", hex: "hex", base64: "base64", base64url: "base64url", latin1: "latin1", binary: "latin1", ascii: "ascii", ucs2: "utf16le", "ucs-2": "utf16le", utf16le: "utf16le", "utf-16le": "utf16le" };
  function encodingOf(e) {
    if (e === undefined || e === null) return "utf8";
    var n = ENCODINGS[String(e).toLowerCase()];
    if (!n) throw new TypeError("Unknown encoding: " + e);
    return n;
  }
  var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  function bytesOf(s, enc) {
    var i, out;
    switch (enc) {
      case "utf8": return new TextEncoder().encode(s);
      case "hex":
        // as Node: stops at the first pair that is not hex
        out = [];
        for (i = 0; i + 1 < s.length; i += 2) { var v = parseInt(s.substr(i, 2), 16); if (!/^[0-9a-fA-F]{2}$/.test(s.substr(i, 2))) break; out.push(v); }
        return out;
      case "base64": case "base64url":
        s = s.replace(/-/g, "+").replace(/_/g, "/").replace(/[^A-Za-z0-9+\/]/g, "");
        out = [];
        for (i = 0; i < s.length; i += 4) {
          var n = (B64.indexOf(s.charAt(i)) << 18) | (B64.indexOf(s.charAt(i + 1)) << 12) | ((B64.indexOf(s.charAt(i + 2)) & 63) << 6) | (B64.indexOf(s.charAt(i + 3)) & 63);
          if (i + 1 < s.length) out.push(n >> 16 & 255);
          if (i + 2 < s.length) out.push(n >> 8 & 255);
          if (i + 3 < s.length) out.push(n & 255);
        }
        return out;
      case "utf16le":
        out = [];
        for (i = 0; i < s.length; i++) { var c = s.charCodeAt(i); out.push(c & 255, c >> 8); }
        return out;
      default: // latin1, ascii
        out = [];
        for (i = 0; i < s.length; i++) out.push(s.charCodeAt(i) & (enc === "ascii" ? 127 : 255));
        return out;
    }
  }
  function textOf(b, enc) {
    var i, s = "";
    switch (enc) {
      case "utf8": return new TextDecoder().decode(b);
      case "hex": for (i = 0; i < b.length; i++) s += (b[i] < 16 ? "0" : "") + b[i].toString(16); return s;
      case "base64": case "base64url":
        for (i = 0; i < b.length; i += 3) {
          var n = (b[i] << 16) | ((b[i + 1] || 0) << 8) | (b[i + 2] || 0);
          s += B64.charAt(n >> 18 & 63) + B64.charAt(n >> 12 & 63) + (i + 1 < b.length ? B64.charAt(n >> 6 & 63) : "=") + (i + 2 < b.length ? B64.charAt(n & 63) : "=");
        }
        return enc === "base64" ? s : s.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
      case "utf16le": for (i = 0; i + 1 < b.length; i += 2) s += String.fromCharCode(b[i] | b[i + 1] << 8); return s;
      default: for (i = 0; i < b.length; i++) s += String.fromCharCode(enc === "ascii" ? b[i] & 127 : b[i]); return s;
    }
  }

  class Buffer extends Uint8Array {
    // new Buffer(size | string | array | buffer), Node's old constructor, as Buffer.from/alloc;
    // Uint8Array's own methods (subarray, map) call it with (arrayBuffer, offset, length) or a size
    constructor(a, b, c) {
      if (typeof a === "number") { super(a); return; }
      if (a instanceof ArrayBuffer) { super(a, b === undefined ? 0 : b, c === undefined ? a.byteLength - (b || 0) : c); return; }
      var bytes = typeof a === "string" ? bytesOf(a, encodingOf(b))
        : a && a.type === "Buffer" && Array.isArray(a.data) ? a.data
        : a;
      if (bytes === undefined || bytes === null || typeof bytes !== "object") throw new TypeError("The first argument must be a string, Buffer, ArrayBuffer, Array or array-like object");
      super(bytes.length);
      for (var i = 0; i < bytes.length; i++) this[i] = bytes[i];
    }
    static from(a, b, c) {
      if (a instanceof ArrayBuffer) return new Buffer(a, b, c);
      if (ArrayBuffer.isView(a) && !(a instanceof Uint8Array)) return new Buffer(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
      return new Buffer(a, b);
    }
    static alloc(n, fill, enc) { var b = new Buffer(n); if (fill !== undefined) b.fill(fill, 0, n, enc); return b; }
    static allocUnsafe(n) { return new Buffer(n); }
    static isBuffer(b) { return b instanceof Buffer; }
    static isEncoding(e) { return typeof e === "string" && ENCODINGS[e.toLowerCase()] !== undefined; }
    static byteLength(s, enc) { return typeof s === "string" ? bytesOf(s, encodingOf(enc)).length : s.byteLength; }
    static concat(list, total) {
      if (total === undefined) { total = 0; for (var i = 0; i < list.length; i++) total += list[i].length; }
      var out = new Buffer(total), at = 0;
      for (var j = 0; j < list.length && at < total; j++) { var p = list[j].subarray(0, total - at); out.set(p, at); at += p.length; }
      return out;
    }
    static compare(a, b) { return a.compare(b); }
    toString(enc, start, end) { return textOf(this.subarray(start || 0, end === undefined ? this.length : end), encodingOf(enc)); }
    toJSON() { return { type: "Buffer", data: Array.prototype.slice.call(this) }; }
    equals(o) { return this.compare(o) === 0; }
    compare(o) {
      for (var i = 0; i < this.length && i < o.length; i++) if (this[i] !== o[i]) return this[i] < o[i] ? -1 : 1;
      return this.length === o.length ? 0 : this.length < o.length ? -1 : 1;
    }
    // Node's slice shares the bytes, as subarray does
    slice(start, end) { return this.subarray(start, end); }
    write(s, offset, length, enc) {
      if (typeof offset === "string") { enc = offset; offset = 0; length = undefined; }
      else if (typeof length === "string") { enc = length; length = undefined; }
      offset = offset || 0;
      var bytes = bytesOf(String(s), encodingOf(enc)), n = Math.min(bytes.length, this.length - offset, length === undefined ? Infinity : length);
      for (var i = 0; i < n; i++) this[offset + i] = bytes[i];
      return n;
    }
    fill(v, start, end, enc) {
      if (typeof start === "string") { enc = start; start = 0; end = this.length; }
      start = start || 0; end = end === undefined ? this.length : end;
      if (typeof v === "number") return Uint8Array.prototype.fill.call(this, v & 255, start, end);
      var bytes = typeof v === "string" ? bytesOf(v, encodingOf(enc)) : v;
      if (!bytes.length) return Uint8Array.prototype.fill.call(this, 0, start, end);
      for (var i = start, j = 0; i < end; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
      return this;
    }
    copy(target, at, start, end) {
      start = start || 0; end = end === undefined ? this.length : end; at = at || 0;
      var part = this.subarray(start, Math.min(end, start + target.length - at));
      target.set(part, at);
      return part.length;
    }
    view() { return new DataView(this.buffer, this.byteOffset, this.byteLength); }
  }
  // the fixed-width reads and writes: readUInt16BE(offset), writeInt32LE(value, offset), ...
  [["UInt8", "Uint8", 1], ["Int8", "Int8", 1], ["UInt16", "Uint16", 2], ["Int16", "Int16", 2], ["UInt32", "Uint32", 4], ["Int32", "Int32", 4],
   ["Float", "Float32", 4], ["Double", "Float64", 8], ["BigUInt64", "BigUint64", 8], ["BigInt64", "BigInt64", 8]].forEach(function (t) {
    var name = t[0], dv = t[1], size = t[2];
    var ends = size === 1 ? [""] : ["LE", "BE"];
    ends.forEach(function (e) {
      var little = e === "LE";
      function check(b, o) { if (o < 0 || o + size > b.length || o !== Math.floor(o)) throw new RangeError("The value of \"offset\" is out of range. It must be >= 0 and <= " + (b.length - size) + ". Received " + o); }
      Buffer.prototype["read" + name + e] = function (o) { o = o === undefined ? 0 : o; check(this, o); return this.view()["get" + dv](o, little); };
      Buffer.prototype["write" + name + e] = function (v, o) { o = o === undefined ? 0 : o; check(this, o); this.view()["set" + dv](o, v, little); return o + size; };
      if (name.indexOf("UInt") === 0) {
        Buffer.prototype["readUint" + name.slice(4) + e] = Buffer.prototype["read" + name + e];
        Buffer.prototype["writeUint" + name.slice(4) + e] = Buffer.prototype["write" + name + e];
      }
    });
  });
  globalThis.Buffer = Buffer;
`;

export const buffer: PreludeArea = { js: js, lazy: ["Buffer"] };
