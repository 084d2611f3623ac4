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
  // A get or set the worker's own copy answers (cacheLocal): the value crosses as its JSON alone,
  // with no call envelope to make and read. undefined: the call goes the usual way, which checks
  // and answers everything else.
  function localGet(name, key) {
    return typeof name === "string" && typeof key === "string" ? cacheLocal("get", name, key) : undefined;
  }
  function localSet(name, key, value) {
    if (typeof name !== "string" || typeof key !== "string" || value === undefined) return undefined;
    var json = JSON.stringify(value);
    return json === undefined ? undefined : cacheLocal("set", name, key, json);
  }

  // A cache's methods are made once per name (seven closures a call were a few µs of every run
  // that names its cache); each call still answers an object of its own, whose prototype holds
  // them (an object of seven properties was 1.4 µs of QuickJS, one made on a prototype 0.2 µs):
  // a method changed on a handle changes no other.
  var classicByName = new Map(), asyncByName = new Map();
  function methodsOf(byName, name, make) {
    if (typeof name !== "string") return make(name);
    var m = byName.get(name);
    if (m === undefined) {
      if (byName.size >= 64) byName.clear();
      byName.set(name, (m = make(name)));
    }
    return m;
  }
  ClearBlade.Cache = function (name) { return Object.create(methodsOf(classicByName, name, classicMethods)); };
  ClearBladeAsync.Cache = function (name) { return Object.create(methodsOf(asyncByName, name, asyncMethods)); };
  function classicMethods(name) {
    return {
      set: function (key, value, cb) {
        if (localSet(name, key, value) === undefined) return classicAs("cache.set", { cache: name, key: key, value: value }, cb, answer("Set done"));
        if (typeof cb === "function") cb(false, "Set done");
        return new Settled(null);
      },
      setnx: function (key, value, cb) { return classic("cache.setnx", { cache: name, key: key, value: value }, cb); },
      setMultiple: function (data, cb) { return classicAs("cache.setMultiple", { cache: name, data: data }, cb, answer("SetMultiple done")); },
      get: function (key, cb) {
        var json = localGet(name, key);
        if (json === undefined) return classicAs("cache.get", { cache: name, key: key }, cb, cacheValue);
        // (the settled promise holds what the host's answer would: {found, value})
        var d = json === "" ? { found: false } : { found: true, value: JSON.parse(json) };
        if (typeof cb === "function") cb(false, d.value);
        return new Settled(d);
      },
      getAll: function (cb) { return classic("cache.getAll", { cache: name }, cb); },
      delete: function (key, cb) { return classicAs("cache.delete", { cache: name, key: key }, cb, answer("Delete done")); },
      flush: function (cb) { return classicAs("cache.flush", { cache: name }, cb, answer("Flush done")); },
    };
  }
  function asyncMethods(name) {
    return {
      set: function (key, value) {
        return localSet(name, key, value) === undefined ? call("cache.set", { cache: name, key: key, value: value }).then(nothing) : Promise.resolve(undefined);
      },
      setnx: function (key, value) { return call("cache.setnx", { cache: name, key: key, value: value }); },
      setMultiple: function (data) { return call("cache.setMultiple", { cache: name, data: data }).then(nothing); },
      get: function (key) {
        var json = localGet(name, key);
        if (json === undefined) return call("cache.get", { cache: name, key: key }).then(cacheValue);
        return Promise.resolve(json === "" ? undefined : JSON.parse(json));
      },
      getAll: function () { return call("cache.getAll", { cache: name }); },
      delete: function (key) { return call("cache.delete", { cache: name, key: key }).then(nothing); },
      flush: function () { return call("cache.flush", { cache: name }).then(nothing); },
      keys: function (pattern) { return call("cache.keys", { cache: name, pattern: pattern }); },
    };
  }
`;

export const cache: PreludeArea = { js: js, lazy: ["ClearBlade.Cache", "ClearBladeAsync.Cache"] };
