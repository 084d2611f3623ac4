// The core of the prelude: the host functions captured and hidden, the two ways to call the host
// (a promise, and ClearBlade's classic callback call), log and console, and one run's machinery
// (req, resp, __run). Every area of the library (library/*.ts) is evaluated after it, in the same
// closure.
//
// The sandbox installs these host functions (sandbox.ts):
//   __host(op, json) -> Promise<json>   a host operation as the service's effective user
//   __hostSync(op, json) -> json        the same, blocking: the run's stack waits for the answer
//   __local(op, json) -> json           a computation done by the worker itself (crypto)
//   __cache(op, name, key, json) -> json a cache get or set the worker answers itself, or undefined
//   __done(kind, json)                  resp.success / resp.error / resp.send
//   __log(text)                         log and console output
// They are captured here and removed from the global object, so user code cannot call them.
export const CORE_JS = String.raw`
  var host = globalThis.__host, hostSync = globalThis.__hostSync, local = globalThis.__local, cacheLocal = globalThis.__cache, finish = globalThis.__done, hostLog = globalThis.__log;
  delete globalThis.__host; delete globalThis.__hostSync; delete globalThis.__local; delete globalThis.__cache; delete globalThis.__done; delete globalThis.__log;

  function replyOf(text) {
    var r = JSON.parse(text);
    if (r.ok) return r.data;
    var e = new Error(r.error && r.error.detail ? r.error.detail : String(r.error));
    e.error = r.error;
    throw e;
  }
  // the promise flavour (ClearBladeAsync, fetch): resolves with the operation's answer
  function call(op, args) {
    return host(op, JSON.stringify(args === undefined ? null : args)).then(replyOf);
  }
  // the blocking flavour: the operation's answer, or its error thrown
  function callSync(op, args) {
    return replyOf(hostSync(op, JSON.stringify(args === undefined ? null : args)));
  }
  // What a classic call answers for code that awaits it or chains on it: its value, already there.
  // It is made a promise only when code asks for one (then, catch, finally): Promise.resolve on
  // every call was about 2 µs of QuickJS, a third of a cache get answered on the worker.
  // (its prototype is a Promise's, so that it is still instanceof Promise)
  function Settled(value) { this._value = value; }
  Settled.prototype = Object.create(Promise.prototype);
  Settled.prototype.constructor = Promise;
  Settled.prototype.then = function (onValue, onError) { return Promise.resolve(this._value).then(onValue, onError); };
  Settled.prototype["catch"] = function (onError) { return Promise.resolve(this._value)["catch"](onError); };
  Settled.prototype["finally"] = function (onEnd) { return Promise.resolve(this._value)["finally"](onEnd); };
  // ClearBlade's classic call: it blocks, and its callback has run before it returns, with
  // (false, data) or (true, the error). It answers a settled thenable too, for code that awaits it.
  function classic(op, args, cb) {
    var r = JSON.parse(hostSync(op, JSON.stringify(args === undefined ? null : args)));
    if (r.ok) {
      if (typeof cb === "function") cb(false, r.data);
      return new Settled(r.data);
    }
    if (typeof cb === "function") { cb(true, r.error); return new Settled(undefined); }
    return Promise.reject(errorOf(r.error));
  }
  // the host's error as code catches it: its detail the message, the error itself on .error
  function errorOf(error) {
    var e = new Error(error && error.detail ? error.detail : String(error));
    e.error = error;
    return e;
  }
  // a classic call refused before the host is asked: (true, error) to the callback, or thrown
  // without one
  function refused(cb, detail) {
    var error = { detail: detail };
    if (typeof cb === "function") { cb(true, error); return new Settled(undefined); }
    throw errorOf(error);
  }
  // a call ClearBlade documents that this runtime does not provide: an error that names it (a
  // missing method would say only "not a function")
  function notProvided(what) {
    return function () { throw new Error(what + " is not provided by Outpost's code runtime (its runtime docs list what differs from ClearBlade)"); };
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

  // a query as the host takes it: a Query, its .query, or bare FILTERS
  function plainQuery(q) {
    if (!q) return { FILTERS: [] };
    var src = q instanceof Query ? q.query : q;
    if (Array.isArray(src)) return { FILTERS: src, PAGESIZE: 0, PAGENUM: 0 };
    var out = {};
    for (var k in src) out[k] = src[k];
    if (out.FILTERS) out.FILTERS = out.FILTERS.filter(function (g) { return g.length > 0; });
    return out;
  }

  // Areas compiled on first use (library/index.ts): each of their names is a getter that compiles
  // the area's code, given the core helpers, and hands on to what it defined. QuickJS compiles a
  // whole script as it loads it, and most services use a few areas: a new sandbox then pays only
  // for those.
  var lazyHelpers = null;
  function lazyArea(paths, source) {
    var loaded = false;
    function load() {
      if (loaded) return;
      loaded = true;
      paths.forEach(function (p) { var at = place(p); delete at.obj[at.key]; });
      lazyHelpers = lazyHelpers || { notProvided: notProvided, call: call, classic: classic, Settled: Settled, callSync: callSync, replyOf: replyOf, hostSync: hostSync, local: local, cacheLocal: cacheLocal, plainQuery: plainQuery, ClearBlade: ClearBlade, ClearBladeAsync: ClearBladeAsync, log: log, Query: Query, failRun: failRun };
      new Function("h", "var notProvided = h.notProvided, call = h.call, classic = h.classic, Settled = h.Settled, callSync = h.callSync, replyOf = h.replyOf, hostSync = h.hostSync, local = h.local, cacheLocal = h.cacheLocal, plainQuery = h.plainQuery, ClearBlade = h.ClearBlade, ClearBladeAsync = h.ClearBladeAsync, log = h.log, Query = h.Query, failRun = h.failRun;\n" + source)(lazyHelpers);
    }
    function place(p) { var parts = p.split("."); return parts.length === 1 ? { obj: globalThis, key: p } : { obj: globalThis[parts[0]], key: parts[1] }; }
    paths.forEach(function (p) {
      var at = place(p);
      Object.defineProperty(at.obj, at.key, {
        configurable: true, enumerable: true,
        get: function () { load(); return at.obj[at.key]; },
        set: function (v) { load(); at.obj[at.key] = v; },
      });
    });
  }

  var ClearBlade = globalThis.ClearBlade = {
    // (init is the users area's: it may sign in)
    isEdge: function () { return globalThis.cbmeta.is_edge; },
    edgeId: function () { return globalThis.cbmeta.edge_id || ""; },
  };
  var ClearBladeAsync = globalThis.ClearBladeAsync = {};

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
  // resp's methods also work detached (promise.then(resp.success)): without a Resp for this, they
  // answer the run under way
  var current = null, currentReq = null;
  function own(r) { return r instanceof Resp ? r : current; }
  Resp.prototype.success = function (v) { end(own(this), "success", v); };
  Resp.prototype.error = function (v) { end(own(this), "error", v); };
  Resp.prototype.send = function (v) { end(own(this), "success", v); };
  Resp.prototype.set = function (h) { finish("headers", JSON.stringify(h || {})); };
  Resp.prototype.status = function (code) { finish("status", JSON.stringify(code)); return this; };
  var entry = null;

  // The caller's part of req (keys, user, token) is the same run after run for one caller: it
  // crosses only when it changed, and every run gets its own copy of it.
  var context = null;

  // __run returns the outcome as text when the service ends before returning (the common case,
  // saving a host call): "s" or "e" (success, error), then "t" and a string or "j" and JSON.
  // Otherwise the outcome comes later through __done. paramsJson undefined means {}; name is
  // undefined once the entry function is known (a sandbox holds one service).
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
    currentReq = req;
    var resp = current = new Resp();
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
      returned.then(function (v) { if (!resp._finished && !resp._listening) { try { end(resp, "success", v === undefined ? null : v); } catch (e) {} } },
                    function (e) { if (!resp._finished && e !== DONE) { resp._finished = true; failRun(e); } });
    }
  };
  // ClearBladeAsync.Preloader().listen(onRequest): ClearBlade keeps such a service loaded and
  // hands it each call. Here every call runs the service, so the listener gets this run's req and
  // resp; the run ends when it answers through resp (not when the entry function's promise
  // settles). An answer given at once ends the run there, as resp does anywhere; listen's promise
  // rejects when the listener throws.
  ClearBladeAsync.Preloader = function () {
    return {
      listen: function (onRequest) {
        var resp = current, r;
        resp._listening = true;
        try { r = onRequest(currentReq, resp); } catch (e) { if (e === DONE) throw e; return Promise.reject(e); }
        return Promise.resolve(r).then(undefined, function (e) { if (e !== DONE) throw e; });
      },
    };
  };
  // errors thrown from callbacks after the entry function returned are reported, not lost
  globalThis.__isDone = function (e) { return e === DONE; };
`;
