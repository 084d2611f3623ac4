// Adapters from code: ClearBladeAsync.Adapters() with create(options), list(), read(name),
// update(name, changes), delete(name); ClearBladeAsync.Adapter(name) with read(), update(changes),
// delete(), createFile(options), readFile(filename[, encoding]), listFiles(),
// updateFile(filename, changes[, encoding]), deleteFile(filename) and control(command, edges).
// A file's content is given as text or bytes; it is read back as bytes (a Uint8Array), or as text
// when an encoding is given. Host operations in library/adapters.ts.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  // a file's meta with its content as base64, as the host takes it
  function adapterFileOut(meta) {
    if (!meta || typeof meta !== "object") return meta;
    var out = {};
    for (var k in meta) out[k] = meta[k];
    var f = meta.file;
    if (typeof f === "string") out.file = Buffer.from(f, "utf8").toString("base64");
    else if (f instanceof ArrayBuffer || ArrayBuffer.isView(f)) out.file = Buffer.from(f instanceof ArrayBuffer ? new Uint8Array(f) : new Uint8Array(f.buffer, f.byteOffset, f.byteLength)).toString("base64");
    return out;
  }
  // and as the host answers it: bytes, or text in the encoding asked for
  function adapterFileIn(encoding) {
    return function (meta) {
      if (meta && typeof meta.file === "string") {
        var bytes = Buffer.from(meta.file, "base64");
        meta.file = encoding ? bytes.toString(encoding) : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
      return meta;
    };
  }
  var nothing = function () {};
  ClearBladeAsync.Adapters = function () {
    return {
      create: function (options) { return call("adapters.create", { options: options }); },
      list: function () { return call("adapters.list", {}); },
      read: function (name) { return call("adapters.read", { name: name }); },
      update: function (name, changes) { return call("adapters.update", { name: name, changes: changes }); },
      delete: function (name) { return call("adapters.delete", { name: name }).then(nothing); },
    };
  };
  ClearBladeAsync.Adapter = function (name) {
    return {
      read: function () { return call("adapters.read", { name: name }); },
      update: function (changes) { return call("adapters.update", { name: name, changes: changes }); },
      delete: function () { return call("adapters.delete", { name: name }).then(nothing); },
      createFile: function (options) { return call("adapters.createFile", { name: name, options: adapterFileOut(options) }).then(nothing); },
      readFile: function (file, encoding) { return call("adapters.readFile", { name: name, file: file }).then(adapterFileIn(encoding)); },
      listFiles: function () { return call("adapters.listFiles", { name: name }); },
      updateFile: function (file, changes, encoding) { return call("adapters.updateFile", { name: name, file: file, changes: adapterFileOut(changes) }).then(adapterFileIn(encoding)); },
      deleteFile: function (file) { return call("adapters.deleteFile", { name: name, file: file }).then(nothing); },
      control: function (command, edges) { return call("adapters.control", { name: name, command: command, edges: edges }); },
    };
  };
`;

export const adapters: PreludeArea = { js: js, lazy: ["ClearBladeAsync.Adapters", "ClearBladeAsync.Adapter"] };
