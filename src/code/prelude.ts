// The runtime API user code sees (the ClearBlade code library: Requests, Response, ClearBlade.*), written in JavaScript and evaluated
// inside each QuickJS context before libraries and the service. Everything it does outside the
// sandbox goes through three host functions installed by the sandbox:
//   __host(op, json) -> Promise<json>   a domain operation as the service's effective user
//   __done(kind, json)                  resp.success / resp.error / resp.send
//   __log(text)                         log and console output
// They are captured here and removed from the global object, so user code cannot call them.
export const PRELUDE = String.raw`
(function () {
  var host = globalThis.__host, finish = globalThis.__done, hostLog = globalThis.__log;
  delete globalThis.__host; delete globalThis.__done; delete globalThis.__log;

  function call(op, args) {
    return host(op, JSON.stringify(args === undefined ? null : args)).then(function (text) {
      var r = JSON.parse(text);
      if (r.ok) return r.data;
      var e = new Error(r.error && r.error.detail ? r.error.detail : String(r.error));
      e.error = r.error;
      throw e;
    });
  }
  // A callback's error (an interrupt of a loop in it included) ends the run as failed: thrown in
  // a promise reaction it would only reject a promise nobody holds, and the run would end as a
  // success with nothing.
  function withCallback(promise, cb) {
    if (typeof cb === "function") {
      promise.then(function (d) { cb(false, d); }, function (e) { cb(true, e.error || e.message); }).then(null, failRun);
    }
    return promise;
  }
  function failRun(e) { if (e !== DONE) finish("failed", JSON.stringify(e && e.message ? (e.name || "Error") + ": " + e.message : String(e))); }
  function text(args) {
    var out = [];
    for (var i = 0; i < args.length; i++) {
      var a = args[i];
      out.push(typeof a === "string" ? a : (function () { try { return JSON.stringify(a); } catch (e) { return String(a); } })());
    }
    return out.join(" ");
  }
  var log = function () { hostLog(text(arguments)); };
  globalThis.log = log;
  globalThis.console = { log: log, info: log, debug: log, warn: log, error: log };

  globalThis.newUUID = function () {
    var h = "0123456789abcdef", s = "";
    for (var i = 0; i < 36; i++) {
      if (i === 8 || i === 13 || i === 18 || i === 23) s += "-";
      else if (i === 14) s += "4";
      else if (i === 19) s += h[(Math.random() * 4 | 0) + 8];
      else s += h[Math.random() * 16 | 0];
    }
    return s;
  };

  // ---- queries --------------------------------------------------------------------------------
  function Query(opts) {
    if (!(this instanceof Query)) return new Query(opts);
    opts = opts || {};
    this.collection = collectionRef(opts);
    this.query = { FILTERS: [[]], SORT: [], PAGESIZE: 0, PAGENUM: 0 };
  }
  function add(op) {
    return function (field, value) {
      var group = this.query.FILTERS[this.query.FILTERS.length - 1];
      var cond = {}; cond[op] = [{}]; cond[op][0][field] = value;
      group.push(cond);
      return this;
    };
  }
  Query.prototype.equalTo = add("EQ");
  Query.prototype.notEqualTo = add("NEQ");
  Query.prototype.greaterThan = add("GT");
  Query.prototype.greaterThanEqualTo = add("GTE");
  Query.prototype.lessThan = add("LT");
  Query.prototype.lessThanEqualTo = add("LTE");
  Query.prototype.matches = add("RE");
  Query.prototype.ascending = function (f) { this.query.SORT.push({ ASC: f }); return this; };
  Query.prototype.descending = function (f) { this.query.SORT.push({ DESC: f }); return this; };
  Query.prototype.setPage = function (size, num) { this.query.PAGESIZE = size; this.query.PAGENUM = num; return this; };
  Query.prototype.columns = function (cols) { this.query.SELECTCOLUMNS = cols; return this; };
  Query.prototype.or = function (other) { var q = other instanceof Query ? other.query : other; for (var i = 0; i < q.FILTERS.length; i++) this.query.FILTERS.push(q.FILTERS[i]); return this; };
  Query.prototype.toJSON = function () { return plainQuery(this); };
  Query.prototype.fetch = function (cb) { return withCallback(call("collection.fetch", { collection: this.collection, query: plainQuery(this) }), cb); };
  Query.prototype.update = function (changes, cb) { return withCallback(call("collection.update", { collection: this.collection, query: plainQuery(this), changes: changes }), cb); };
  Query.prototype.remove = function (cb) { return withCallback(call("collection.remove", { collection: this.collection, query: plainQuery(this) }), cb); };

  function plainQuery(q) {
    if (!q) return { FILTERS: [] };
    var src = q instanceof Query ? q.query : q;
    if (Array.isArray(src)) return { FILTERS: src, PAGESIZE: 0, PAGENUM: 0 };
    var out = {};
    for (var k in src) out[k] = src[k];
    if (out.FILTERS) out.FILTERS = out.FILTERS.filter(function (g) { return g.length > 0; });
    return out;
  }
  function collectionRef(opts) {
    if (typeof opts === "string") return { ref: opts };
    opts = opts || {};
    return { id: opts.collectionID || opts.collectionId, name: opts.collectionName || opts.name || opts.collection };
  }

  function Collection(opts) {
    var ref = collectionRef(opts);
    return {
      fetch: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return withCallback(call("collection.fetch", { collection: ref, query: plainQuery(query) }), cb); },
      create: function (items, cb) { return withCallback(call("collection.create", { collection: ref, items: items }), cb); },
      update: function (query, changes, cb) { return withCallback(call("collection.update", { collection: ref, query: plainQuery(query), changes: changes }), cb); },
      remove: function (query, cb) { return withCallback(call("collection.remove", { collection: ref, query: plainQuery(query) }), cb); },
      count: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return withCallback(call("collection.count", { collection: ref, query: plainQuery(query) }), cb); },
      upsert: function (item, conflictColumn, cb) { return withCallback(call("collection.upsert", { collection: ref, item: item, conflictColumn: conflictColumn }), cb); },
      columns: function (cb) { return withCallback(call("collection.columns", { collection: ref }), cb); },
    };
  }

  function Messaging() {
    return {
      publish: function (topic, payload, cb) { return withCallback(call("messaging.publish", { topic: topic, payload: typeof payload === "string" ? payload : JSON.stringify(payload) }), cb); },
      subscribe: function (topic, cb) { return withCallback(call("messaging.subscribe", { topic: topic }), cb); },
      unsubscribe: function (topic, cb) { return withCallback(call("messaging.unsubscribe", { topic: topic }), cb); },
      // calls cb(false, payload, topic) for every message on the subscribed topics matching
      // topics (all of them when omitted), for as long as the run lasts
      waitForMessage: function (topics, cb) {
        if (typeof topics === "function") { cb = topics; topics = null; }
        if (typeof topics === "string") topics = [topics];
        function next() {
          call("messaging.next", { topics: topics }).then(function (m) {
            if (m === null) return; // the run is over
            if (typeof cb === "function") cb(false, m.payload, m.topic);
            next();
          }, function (e) { if (typeof cb === "function") cb(true, e.error || e.message); });
        }
        next();
      },
    };
  }

  function Code() {
    return { execute: function (name, params, loggingEnabled, cb) { if (typeof loggingEnabled === "function") cb = loggingEnabled; return withCallback(call("code.execute", { name: name, params: params || {} }), cb); } };
  }

  function Device() {
    return {
      getDeviceByName: function (name, cb) { return withCallback(call("device.get", { name: name }), cb); },
      getAllDevicesForSystem: function (cb) { return withCallback(call("device.list", { query: null }), cb); },
      fetch: function (query, cb) { return withCallback(call("device.list", { query: plainQuery(query) }), cb); },
      createDevice: function (name, data, causeTrigger, cb) { if (typeof causeTrigger === "function") cb = causeTrigger; return withCallback(call("device.create", { name: name, data: data }), cb); },
      updateDevice: function (name, data, causeTrigger, cb) { if (typeof causeTrigger === "function") { cb = causeTrigger; causeTrigger = true; } return withCallback(call("device.update", { name: name, data: data, causeTrigger: causeTrigger !== false }), cb); },
      deleteDevice: function (name, causeTrigger, cb) { if (typeof causeTrigger === "function") cb = causeTrigger; return withCallback(call("device.delete", { name: name }), cb); },
    };
  }

  function User() {
    return {
      getUser: function (cb) { return withCallback(call("user.get", null), cb); },
      setUser: function (data, cb) { return withCallback(call("user.set", { data: data }), cb); },
      allUsers: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return withCallback(call("user.list", { query: plainQuery(query) }), cb); },
      count: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return withCallback(call("user.count", { query: plainQuery(query) }), cb); },
    };
  }

  globalThis.ClearBlade = {
    init: function (opts) { if (opts && typeof opts.callback === "function") opts.callback(false, {}); },
    isEdge: function () { return globalThis.cbmeta.is_edge; },
    edgeId: function () { return globalThis.cbmeta.edge_id || ""; },
    Collection: Collection, Query: Query, Messaging: Messaging, Code: Code, Device: Device, User: User,
    getDeviceByName: function (n, cb) { return Device().getDeviceByName(n, cb); },
    getAllDevicesForSystem: function (cb) { return Device().getAllDevicesForSystem(cb); },
    createDevice: function (n, d, t, cb) { return Device().createDevice(n, d, t, cb); },
    updateDevice: function (n, d, t, cb) { return Device().updateDevice(n, d, t, cb); },
    deleteDevice: function (n, t, cb) { return Device().deleteDevice(n, t, cb); },
  };

  // ---- the promise API ------------------------------------------------------------------------
  function asyncCollection(opts) {
    var c = Collection(opts);
    return {
      fetch: function (q) { return c.fetch(q); }, create: function (items) { return c.create(items); },
      update: function (q, changes) { return c.update(q, changes); }, remove: function (q) { return c.remove(q); },
      count: function (q) { return c.count(q); }, upsert: function (item, col) { return c.upsert(item, col); },
      columns: function () { return c.columns(); },
    };
  }
  globalThis.ClearBladeAsync = {
    Collection: asyncCollection,
    Query: function (opts) { return new Query(opts); },
    Messaging: function () { var m = Messaging(); return { publish: function (t, p) { return m.publish(t, p); } }; },
    Code: function () { return { execute: function (n, p) { return call("code.execute", { name: n, params: p || {} }); } }; },
    Devices: function () {
      return {
        read: function (q) { return call("device.list", { query: plainQuery(q) }); },
        create: function (d) { return call("device.create", { name: d && d.name, data: d }); },
        update: function (q, changes, causeTrigger) { return call("device.updateByQuery", { query: plainQuery(q), changes: changes, causeTrigger: causeTrigger !== false }); },
        delete: function (q) { return call("device.deleteByQuery", { query: plainQuery(q) }); },
      };
    },
    Users: function () {
      return {
        read: function (q) { return call("user.list", { query: plainQuery(q) }); },
        count: function (q) { return call("user.count", { query: plainQuery(q) }); },
      };
    },
  };

  // ---- one run --------------------------------------------------------------------------------
  // Kept lean: this runs on every call, in an interpreter, where each object and property costs
  // (about 0.2 µs a property in wasm). resp holds its run's state itself, and its methods live on
  // a prototype, instead of a state object and five fresh closures per run.
  var DONE = {};
  var Resp = function () { this._finished = false; this._sync = true; this._early = null; };
  function end(r, kind, value) {
    if (r._finished) return;
    r._finished = true;
    // the common answer, a string ended synchronously, crosses as is: "s"/"e" then "t" and the text
    if (r._sync && typeof value === "string") { r._early = kind.charAt(0) + "t" + value; throw DONE; }
    var json;
    try { json = value === undefined ? "null" : JSON.stringify(value); } catch (e) { json = JSON.stringify(String(value)); }
    if (json === undefined) json = "null";
    if (r._sync) r._early = kind.charAt(0) + "j" + json;
    else finish(kind, json);
    throw DONE; // success and error end the service
  }
  Resp.prototype.success = function (v) { end(this, "success", v); };
  Resp.prototype.error = function (v) { end(this, "error", v); };
  Resp.prototype.send = function (v) { end(this, "success", v); };
  Resp.prototype.set = function (h) { finish("headers", JSON.stringify(h || {})); };
  Resp.prototype.status = function (code) { finish("status", JSON.stringify(code)); return this; };
  var entry = null;

  // The caller's part of req (keys, user, token) is the same run after run for one caller: it
  // crosses only when it changed, and every run gets its own copy of it.
  var context = null;

  // __run returns the outcome as text when the service ends before returning (the common case,
  // saving a host call): "s" or "e" (success, error), then "t" and a string or "j" and JSON.
  // Otherwise the outcome comes later through __done. paramsJson undefined means {}.
  globalThis.__run = function (name, contextJson, instanceId, paramsJson) {
    if (contextJson !== undefined) context = JSON.parse(contextJson);
    var c = context, cc = c.caller || {};
    var req = {
      systemKey: c.systemKey, systemSecret: c.systemSecret, userEmail: c.userEmail, userid: c.userid, userToken: c.userToken,
      params: paramsJson === undefined ? {} : JSON.parse(paramsJson), isLogging: c.isLogging, service_instance_id: instanceId,
      caller: { userid: cc.userid, userEmail: cc.userEmail, userToken: cc.userToken },
    };
    if (entry === null) {
      entry = globalThis[name];
      if (typeof entry !== "function") { entry = null; finish("missing", JSON.stringify(name)); return; }
    }
    var resp = new Resp();
    var returned;
    try {
      returned = entry(req, resp);
    } catch (e) {
      resp._sync = false;
      if (e === DONE) return resp._early;
      throw e;
    }
    resp._sync = false;
    if (resp._early !== null) return resp._early;
    // an async entry function: the run lasts until its promise settles (or its deadline)
    if (returned && typeof returned.then === "function" && !resp._finished) {
      finish("waiting", "true");
      returned.then(function (v) { if (!resp._finished) { try { end(resp, "success", v === undefined ? null : v); } catch (e) {} } },
                    function (e) { if (!resp._finished && e !== DONE) { resp._finished = true; failRun(e); } });
    }
  };
  // errors thrown from callbacks after the entry function returned are reported, not lost
  globalThis.__isDone = function (e) { return e === DONE; };
})();
`;
