// Shared caches: ClearBlade.Cache (callbacks) and ClearBladeAsync.Cache (promises). The host
// checks every argument and the run's user's rights (domain/serviceCaches.ts); a value crosses as
// JSON and comes back with its JSON type. A missing key (or a whole cache that expired) reads as
// undefined.
import type { PreludeArea } from "./area.ts";

const js = String.raw`
  // get answers {found, value}: undefined stays apart from a stored null
  function cacheValue(d) { return d && d.found ? d.value : undefined; }
  function answer(text) { return function () { return text; }; }
  function nothing() { return undefined; }
  // a classic call whose callback gets what ClearBlade gives instead of the host's answer
  function classicAs(op, args, cb, as) {
    return classic(op, args, typeof cb === "function" ? function (err, d) { cb(err, err ? d : as(d)); } : cb);
  }

  ClearBlade.Cache = function (name) {
    return {
      set: function (key, value, cb) { return classicAs("cache.set", { cache: name, key: key, value: value }, cb, answer("Set done")); },
      setnx: function (key, value, cb) { return classic("cache.setnx", { cache: name, key: key, value: value }, cb); },
      setMultiple: function (data, cb) { return classicAs("cache.setMultiple", { cache: name, data: data }, cb, answer("SetMultiple done")); },
      get: function (key, cb) { return classicAs("cache.get", { cache: name, key: key }, cb, cacheValue); },
      getAll: function (cb) { return classic("cache.getAll", { cache: name }, cb); },
      delete: function (key, cb) { return classicAs("cache.delete", { cache: name, key: key }, cb, answer("Delete done")); },
      flush: function (cb) { return classicAs("cache.flush", { cache: name }, cb, answer("Flush done")); },
    };
  };
  ClearBladeAsync.Cache = function (name) {
    return {
      set: function (key, value) { return call("cache.set", { cache: name, key: key, value: value }).then(nothing); },
      setnx: function (key, value) { return call("cache.setnx", { cache: name, key: key, value: value }); },
      setMultiple: function (data) { return call("cache.setMultiple", { cache: name, data: data }).then(nothing); },
      get: function (key) { return call("cache.get", { cache: name, key: key }).then(cacheValue); },
      getAll: function () { return call("cache.getAll", { cache: name }); },
      delete: function (key) { return call("cache.delete", { cache: name, key: key }).then(nothing); },
      flush: function () { return call("cache.flush", { cache: name }).then(nothing); },
      keys: function (pattern) { return call("cache.keys", { cache: name, pattern: pattern }); },
    };
  };
`;

export const cache: PreludeArea = { js: js, lazy: ["ClearBlade.Cache", "ClearBladeAsync.Cache"] };
