// Files: ClearBladeAsync.FS(set), ClearBladeAsync.File(set, path) and ClearBladeAsync.FileStore(name)
// (promises, as ClearBlade's). Host operations in library/files.ts; bytes cross as percent-escaped
// latin1 text and come back as a Uint8Array, or as a string when readFile is given an encoding.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  function escapedOf(b) {
    var parts = [];
    for (var i = 0; i < b.length; i += 8192) parts.push(escape(String.fromCharCode.apply(null, b.subarray(i, i + 8192))));
    return parts.join("");
  }
  function bytesOfEscaped(s) {
    var t = unescape(s), out = new Uint8Array(t.length);
    for (var i = 0; i < t.length; i++) out[i] = t.charCodeAt(i);
    return out;
  }
  // what a write sends: a string as text, bytes escaped
  function dataArgs(args, data) {
    if (typeof data === "string") args.text = data;
    else if (data instanceof ArrayBuffer) args.escaped = escapedOf(new Uint8Array(data));
    else if (ArrayBuffer.isView(data)) args.escaped = escapedOf(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    else args.text = String(data);
    return args;
  }
  // bytes as text in an encoding (utf8 and latin1 are what services use)
  function decoded(r, encoding) {
    if (!encoding) return bytesOfEscaped(r.escaped);
    var latin1 = unescape(r.escaped);
    var e = String(encoding).toLowerCase();
    if (e === "latin1" || e === "binary" || e === "ascii") return latin1;
    try { return decodeURIComponent(escape(latin1)); } catch (err) { throw new Error("the file is not valid UTF-8 text"); }
  }
  function nothing() { return undefined; }

  ClearBladeAsync.FS = function (set) {
    return {
      readDir: function (path) { return call("fs.readDir", { set: set, path: path || "" }); },
      readFile: function (path, encoding) { return call("fs.readFile", { set: set, path: path }).then(function (r) { return decoded(r, encoding); }); },
      writeFile: function (path, data) { return call("fs.writeFile", dataArgs({ set: set, path: path }, data)).then(nothing); },
      renameFile: function (from, to) { return call("fs.renameFile", { set: set, from: from, to: to }).then(nothing); },
      copyFile: function (from, to) { return call("fs.copyFile", { set: set, from: from, to: to }).then(nothing); },
      deleteFile: function (path) { return call("fs.deleteFile", { set: set, path: path }).then(nothing); },
      stat: function (path) { return call("fs.stat", { set: set, path: path }); },
      syncFileToEdge: function (path, edge) { return call("fs.syncFileToEdge", { set: set, path: path, edge: edge }).then(nothing); },
      createReadStream: notProvided("FS().createReadStream (read the file whole: readFile)"),
      createWriteStream: notProvided("FS().createWriteStream (write the file whole: writeFile)"),
    };
  };
  ClearBladeAsync.File = function (set, path) {
    var fs = ClearBladeAsync.FS(set);
    return {
      stat: function () { return fs.stat(path); },
      read: function (encoding) { return fs.readFile(path, encoding); },
      write: function (data) { return fs.writeFile(path, data); },
      rename: function (to) { return fs.renameFile(path, to); },
      copy: function (to) { return fs.copyFile(path, to); },
      delete: function () { return fs.deleteFile(path); },
      createReadStream: notProvided("File().createReadStream (read the file whole: read)"),
      createWriteStream: notProvided("File().createWriteStream (write the file whole: write)"),
    };
  };
  ClearBladeAsync.FileStore = function (store) {
    return {
      read: function (path, encoding) { return call("filestore.read", { store: store, path: path }).then(function (r) { return decoded(r, encoding); }); },
      write: function (path, data) { return call("filestore.write", dataArgs({ store: store, path: path }, data)).then(nothing); },
      delete: function (path) { return call("filestore.delete", { store: store, path: path }).then(nothing); },
      copy: function (from, to) { return call("filestore.copy", { store: store, from: from, to: to }).then(nothing); },
      move: function (from, to) { return call("filestore.move", { store: store, from: from, to: to }).then(nothing); },
      list: function (opts) {
        opts = opts || {};
        return call("filestore.list", { store: store, prefix: opts.prefix || opts.path || "", depth: opts.depth, limit: opts.limit, continuation_token: opts.continuation_token || opts.continuationToken || "" });
      },
      createReadStream: notProvided("FileStore().createReadStream (read the file whole: read)"),
      createWriteStream: notProvided("FileStore().createWriteStream (write the file whole: write)"),
    };
  };
`;

export const files: PreludeArea = { js: js, lazy: ["ClearBladeAsync.FS", "ClearBladeAsync.File", "ClearBladeAsync.FileStore"] };
