// ClearBlade's execution model in the sandbox: a classic call has run its callback when it
// returns (its stack waits for the answer, which comes later and from elsewhere), waitForMessage
// hands out one message per call, sleep and timers wait, and a run blocked in a call holds only its
// own sandbox: others run meanwhile.
import { afterAll, describe, expect, test } from "bun:test";
import { needsSuspending, outcomeValue, paramsJson, publishDeadlines, type RunHooks, Sandbox } from "../../../src/code/sandbox.ts";

const LIMITS = { memoryBytes: 32 << 20, sliceMs: 500 };
const opened: Sandbox[] = [];
afterAll(() => { for (const s of opened) s.dispose(); });
const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });

/** On the asyncify build unless told otherwise: with hooks that cannot block the thread (no
 *  `block`: a sandbox run in-process), every classic call then suspends. */
async function sandbox(code: string, libraries: { name: string; code: string }[] = [], suspends = true) {
  const sb = await Sandbox.create({ libraries, service: { name: "svc", code }, meta: {}, suspends }, LIMITS);
  opened.push(sb);
  return sb;
}

/** Hooks answering each call later (a timer), as the main thread does, with `answerOf`'s value or
 *  its error; `calls` records what was asked, and whether the caller's stack waited. */
function later(answerOf: (op: string, args: any) => unknown, delayMs = 2) {
  const calls: { op: string; args: any; blocking: boolean }[] = [];
  const hooks: RunHooks = {
    host: (op, a, answer, blocking) => {
      const args = JSON.parse(a);
      calls.push({ op, args, blocking });
      setTimeout(() => {
        try { answer(JSON.stringify({ ok: true, data: answerOf(op, args) ?? null })); }
        catch (e) { answer(JSON.stringify({ ok: false, error: { detail: (e as Error).message, code: 111 } })); }
      }, typeof args?.ms === "number" ? args.ms : delayMs);
    },
    log: () => {},
  };
  return { hooks, calls };
}

async function run(sb: Sandbox, hooks: RunHooks, params: unknown = {}, timeoutMs = 5_000) {
  const o = await sb.run("svc", { context, params: paramsJson(params), instanceId: "i" }, hooks, timeoutMs);
  return o.kind === "failed" ? o : { kind: o.kind, value: outcomeValue(o.raw) };
}

describe("classic calls block", () => {
  test("the callback has run when the call returns: the next line uses what it set", async () => {
    const sb = await sandbox('function svc(req, resp){ var rows; ClearBlade.Collection({ collectionName: "c" }).fetch(function (err, data) { rows = data; }); resp.success(rows ? rows.DATA.length : "not yet") }');
    const { hooks, calls } = later(() => ({ DATA: [1, 2, 3] }));
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: 3 });
    expect(calls).toEqual([{ op: "collection.fetch", args: { collection: { name: "c" }, query: { FILTERS: [] } }, blocking: true }]);
  });

  test("calls in a loop run in order, one at a time, each answered before the next is asked", async () => {
    const sb = await sandbox('function svc(req, resp){ var out = []; for (var i = 0; i < 50; i++) ClearBlade.Collection("c").count({ FILTERS: [[{ EQ: [{ n: i }] }]] }, function (e, d) { out.push(d); }); resp.success(out) }');
    let asked = 0;
    const { hooks } = later((_op, a) => { asked++; return a.query.FILTERS[0][0].EQ[0].n * 10; }, 0);
    const o = await run(sb, hooks);
    expect(o).toEqual({ kind: "success", value: Array.from({ length: 50 }, (_, i) => i * 10) });
    expect(asked).toBe(50);
  });

  test("an error reaches the callback as (true, error) before the call returns; without a callback the call's promise rejects", async () => {
    const sb = await sandbox('function svc(req, resp){ var got; ClearBlade.Collection("c").fetch(null, function (err, d) { got = [err, d]; }); resp.success(got) }');
    expect(await run(sb, later(() => { throw new Error("no such collection"); }).hooks)).toEqual({ kind: "success", value: [true, { detail: "no such collection", code: 111 }] });
    const awaited = await sandbox('async function svc(req, resp){ try { await ClearBlade.Collection("c").fetch(null); resp.success("no error") } catch (e) { resp.success("caught " + e.message) } }');
    expect(await run(awaited, later(() => { throw new Error("boom"); }).hooks)).toEqual({ kind: "success", value: "caught boom" });
  });

  test("resp.success inside the callback ends the run there; what follows the call does not run", async () => {
    const sb = await sandbox('function svc(req, resp){ ClearBlade.Collection("c").count(null, function (e, n) { resp.success("counted " + n); }); resp.error("not reached") }');
    expect(await run(sb, later(() => 7).hooks)).toEqual({ kind: "success", value: "counted 7" });
  });

  test("a thrown error in the callback reaches the code around the call", async () => {
    const sb = await sandbox('function svc(req, resp){ try { ClearBlade.Collection("c").count(null, function () { throw new Error("in callback"); }); } catch (e) { resp.success("caught " + e.message) } }');
    expect(await run(sb, later(() => 1).hooks)).toEqual({ kind: "success", value: "caught in callback" });
  });

  test("classic and promise calls mix in one async service; the promise flavour does not block", async () => {
    const sb = await sandbox('async function svc(req, resp){ var p = ClearBladeAsync.Collection("c").count(); var b; ClearBlade.Collection("c").fetch(null, function (e, d) { b = d; }); resp.success([await p, b]) }');
    const { hooks, calls } = later((op) => op);
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: ["collection.count", "collection.fetch"] });
    expect(calls.map((c) => c.blocking)).toEqual([false, true]);
  });

  test("a library's code calls block too, and a call made while the code loads is refused, not hung", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success([loaded, helper()]) }", [{
      name: "lib", code: 'var loaded; ClearBlade.Collection("c").count(null, function (e, d) { loaded = [e, d && d.detail ? "refused" : d]; }); function helper() { var n; ClearBlade.Collection("c").count(null, function (e, d) { n = d; }); return n; }',
    }]);
    expect(await run(sb, later(() => 5).hooks)).toEqual({ kind: "success", value: [[true, "refused"], 5] });
  });

  test("a sandbox is reused after blocking runs; one left suspended (its deadline passed) is not", async () => {
    const sb = await sandbox('function svc(req, resp){ var x; ClearBlade.Collection("c").count(null, function (e, d) { x = d; }); resp.success(x) }');
    for (let i = 0; i < 3; i++) expect(await run(sb, later(() => i).hooks)).toEqual({ kind: "success", value: i });
    expect(sb.broken).toBe(false);
    expect(await run(sb, later(() => 1, 500).hooks, {}, 100)).toEqual({ kind: "failed", error: "execution timed out after 0.1 s", timedOut: true });
    expect(sb.broken).toBe(true);
  });

  test("a run blocked in a call holds only its own sandbox: another runs to its end meanwhile", async () => {
    const slow = await sandbox('function svc(req, resp){ var x; ClearBlade.Collection("c").count(null, function (e, d) { x = d; }); resp.success("slow " + x) }');
    const fast = await sandbox('function svc(req, resp){ var x; ClearBlade.Collection("c").count(null, function (e, d) { x = d; }); resp.success("fast " + x) }');
    const order: string[] = [];
    const a = run(slow, later(() => 1, 200).hooks).then((o) => { order.push("slow"); return o; });
    const b = run(fast, later(() => 2, 1).hooks).then((o) => { order.push("fast"); return o; });
    expect(await Promise.all([a, b])).toEqual([{ kind: "success", value: "slow 1" }, { kind: "success", value: "fast 2" }]);
    expect(order).toEqual(["fast", "slow"]);
  });
});

describe("stream services", () => {
  test("waitForMessage hands out one message per call, in the order they came", async () => {
    const sb = await sandbox('function svc(req, resp){ var m = ClearBlade.Messaging(); m.subscribe("in/#", function () {}); var got = []; while (got.length < 5) { m.waitForMessage(["in/#"], function (err, msg, topic) { got.push(topic + ":" + msg); }); } resp.success(got) }');
    let n = 0;
    const { hooks, calls } = later((op) => (op === "messaging.next" ? { payload: `m${n}`, topic: `in/${n++}` } : null), 1);
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: ["in/0:m0", "in/1:m1", "in/2:m2", "in/3:m3", "in/4:m4"] });
    expect(calls.filter((c) => c.op === "messaging.next")).toHaveLength(5);
    expect(calls.every((c) => c.blocking)).toBe(true);
  });

  test("a waitForMessage that the host answers with null (the run is over) returns without calling back", async () => {
    const sb = await sandbox('function svc(req, resp){ var called = false; ClearBlade.Messaging().waitForMessage(["t"], function () { called = true; }); resp.success(called) }');
    expect(await run(sb, later(() => null).hooks)).toEqual({ kind: "success", value: false });
  });
});

describe("sleep, timers and globals", () => {
  test("sleep blocks for its time; setTimeout and setInterval call back later; clearTimeout cancels", async () => {
    const sb = await sandbox("function svc(req, resp){ var t = Date.now(); sleep(60); var slept = Date.now() - t; var ticks = 0; var iv = setInterval(function () { ticks++; if (ticks === 3) { clearInterval(iv); setTimeout(function () { resp.success([slept >= 55, ticks]); }, 10); } }, 5); var never = setTimeout(function () { resp.error('cancelled timer ran') }, 1); clearTimeout(never); }");
    const { hooks, calls } = later(() => null);
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: [true, 3] });
    expect(calls.filter((c) => c.op === "timer.wait" && c.blocking)).toHaveLength(1);
  });

  test("crypto, atob/btoa and TextEncoder/TextDecoder answer as Node and ClearBlade do", async () => {
    const sb = await sandbox(`function svc(req, resp){
      resp.success([
        crypto.createHash("sha256").update("abc").digest("hex"),
        crypto.createHash("sha1").update("Hello ").update("World").digest("base64"),
        crypto.createHmac("sha256", "key").update("data").digest("hex"),
        crypto.hmac("data", "key", "sha256").toString("hex"),
        crypto.encode("base64", "hello"), crypto.decode("base64", "aGVsbG8=").toString(), crypto.encode("hex", "hi"),
        btoa("hi"), atob("aGk="), new TextDecoder().decode(new TextEncoder().encode("héllo ✓ 日本")),
        crypto.randomBytes(16).toString("hex").length, /^[0-9a-f-]{36}$/.test(crypto.randomUUID()),
        crypto.create_jwt({ sub: "x" }, "HS256", "secret").split(".").length,
      ]);
    }`);
    const { createHash, createHmac } = await import("node:crypto");
    expect(await run(sb, later(() => null).hooks)).toEqual({
      kind: "success",
      value: [
        createHash("sha256").update("abc").digest("hex"), createHash("sha1").update("Hello World").digest("base64"),
        createHmac("sha256", "key").update("data").digest("hex"), createHmac("sha256", "key").update("data").digest("hex"),
        "aGVsbG8=", "hello", "6869", "aGk=", "hi", "héllo ✓ 日本", 32, true, 3,
      ],
    });
  });

  test("bad crypto input is an error the code can catch, naming what is wrong", async () => {
    const sb = await sandbox('function svc(req, resp){ var out = []; [function () { crypto.createHash("nope").update("x").digest("hex") }, function () { crypto.randomBytes(1e9) }, function () { crypto.create_jwt({}, "XX256", "k") }, function () { atob("%%") }].forEach(function (f) { try { f(); out.push("no error") } catch (e) { out.push(e.message) } }); resp.success(out) }');
    const o = await run(sb, later(() => null).hooks);
    expect(o.kind).toBe("success");
    expect((o as { value: string[] }).value).toEqual([
      expect.stringContaining("unknown hash algorithm 'nope'"), expect.stringContaining("up to 1 MiB"), expect.stringContaining("unsupported algorithm 'XX256'"), expect.stringContaining("not base64"),
    ]);
  });
});

describe("resp", () => {
  test("resp.success and resp.error passed detached answer every run, not only the first", async () => {
    const sb = await sandbox("function svc(req, resp){ var f = req.params.err ? resp.error : resp.success; Promise.resolve(req.params.n).then(f); }");
    for (let n = 0; n < 4; n++) {
      expect(await run(sb, later(() => null).hooks, { n, err: n % 2 === 1 })).toEqual({ kind: n % 2 === 1 ? "error" : "success", value: n });
    }
  });
});

describe("ClearBladeAsync.Preloader", () => {
  // ClearBlade's preloaded services: the entry function (often async) registers a listener and
  // returns at once; each call reaches the listener with its own req and resp
  test("the listener answers each call with its params, after the async entry function returned", async () => {
    const sb = await sandbox(`async function svc(req, resp){
      ClearBladeAsync.Preloader().listen(async function (r, s) {
        var n = await ClearBladeAsync.Collection("c").count();
        if (r.params.fail) { s.status(500); s.send("failed " + r.params.x); return; }
        s.success({ x: r.params.x, n: n });
      }).catch(function (e) { resp.error("listen: " + e) });
    }`);
    for (let x = 0; x < 3; x++) {
      expect(await run(sb, later(() => 7).hooks, { x })).toEqual({ kind: "success", value: { x, n: 7 } });
    }
    expect(await run(sb, later(() => 7).hooks, { x: "y", fail: true })).toMatchObject({ value: "failed y" });
  });

  test("a listener that answers at once ends the run there; one that throws rejects listen's promise", async () => {
    const sb = await sandbox(`function svc(req, resp){
      var p = ClearBladeAsync.Preloader().listen(function (r, s) {
        if (r.params.boom) throw new Error("boom " + r.params.boom);
        s.success("at once " + r.params.v);
      });
      p.catch(function (e) { resp.error("caught: " + e.message) });
    }`);
    expect(await run(sb, later(() => null).hooks, { v: 1 })).toEqual({ kind: "success", value: "at once 1" });
    expect(await run(sb, later(() => null).hooks, { boom: 2 })).toEqual({ kind: "error", value: "caught: boom 2" });
  });
});

describe("the plain build", () => {
  test("a service that names no call that waits runs on the plain build; one that reaches one anyway is told why", async () => {
    expect([
      { service: { name: "a", code: "function a(req, resp){ resp.success(1) }" }, libraries: [] },
      { service: { name: "b", code: "function b(req, resp){ ClearBlade.Collection('x').fetch(null, function () {}) }" }, libraries: [] },
      { service: { name: "c", code: "function c(req, resp){ helper() }" }, libraries: [{ name: "l", code: "function helper(){ sleep(1) }" }] },
      { service: { name: "d", code: "function d(req, resp){ ClearBlade.Messaging().waitForMessage(['t'], function () {}) }" }, libraries: [] },
      { service: { name: "e", code: "function e(req, resp){ ClearBlade.Code().execute('x', {}, function () {}) }" }, libraries: [] },
      { service: { name: "f", code: "function f(req, resp){ Requests().get({ uri: 'http://x' }, function () {}) }" }, libraries: [] },
      { service: { name: "g", code: "function g(req, resp){ ClearBlade.Lock('l', 'me').lock(function () {}); ClearBlade.Database({}).query('select 1', function () {}) }" }, libraries: [] },
      { service: { name: "h", code: "async function h(req, resp){ await ClearBladeAsync.Lock('l', 'me').lock(); await ClearBladeAsync.Code().execute('x', {}) }" }, libraries: [] },
    ].map((s) => needsSuspending(s))).toEqual([false, false, true, true, true, true, true, false]);
    const plain = await sandbox('function svc(req, resp){ var s = globalThis["sl" + "eep"]; try { s(5); resp.success("slept") } catch (e) { resp.success(e.message) } }', [], false);
    const { hooks, calls } = later(() => null);
    const o = await run(plain, { ...hooks, block: () => "unused" });
    expect(o.kind).toBe("success");
    expect((o as { value: string }).value).toMatch(/names no call that waits/);
    expect(calls).toEqual([]);
    const async = await sandbox("async function svc(req, resp){ var n = await ClearBladeAsync.Collection('c').count(); resp.success(n) }", [], false);
    expect(await run(async, later(() => 7).hooks)).toEqual({ kind: "success", value: 7 });
  });
});

/** Hooks whose short calls block the thread, as a worker's do: `answerOf` answers at once (a
 *  worker waits for the main thread's answer meanwhile), or says how the wait ended. */
function blockingHooks(answerOf: (op: string, args: any, deadline: number) => unknown) {
  const { hooks, calls } = later(() => null);
  const blocked: string[] = [];
  hooks.block = (op, a, deadline) => {
    blocked.push(op);
    const r = answerOf(op, JSON.parse(a), deadline);
    if (r === null || (r && typeof r === "object" && "stopped" in r)) return r as null | { stopped: string };
    return JSON.stringify(r instanceof Error ? { ok: false, error: { detail: r.message } } : { ok: true, data: r });
  };
  return { hooks, calls, blocked };
}

describe("classic calls that block the thread", () => {
  test("on the plain build, a short call blocks through the hook: its callback has run when it returns, errors included", async () => {
    const sb = await sandbox('function svc(req, resp){ var out = []; for (var i = 0; i < 3; i++) ClearBlade.Collection("c").count(null, function (e, n) { out.push(n); }); ClearBlade.Device().getDeviceByName("x", function (e, v) { out.push([e, v]); }); resp.success(out) }', [], false);
    let n = 0;
    const { hooks, calls, blocked } = blockingHooks((op) => (op === "device.get" ? new Error("no device x") : n++));
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: [0, 1, 2, [true, { detail: "no device x" }]] });
    expect(blocked).toEqual(["collection.count", "collection.count", "collection.count", "device.get"]);
    expect(calls).toEqual([]);
    expect(sb.broken).toBe(false);
  });

  test("on the asyncify build, short calls block and calls that wait suspend", async () => {
    const sb = await sandbox('function svc(req, resp){ var a, b; ClearBlade.Collection("c").count(null, function (e, n) { a = n; }); sleep(5); ClearBlade.Collection("c").count(null, function (e, n) { b = n; }); resp.success([a, b]) }');
    let n = 10;
    const { hooks, calls, blocked } = blockingHooks(() => n++);
    expect(await run(sb, hooks)).toEqual({ kind: "success", value: [10, 11] });
    expect(blocked).toEqual(["collection.count", "collection.count"]);
    expect(calls.map((c) => [c.op, c.blocking])).toEqual([["timer.wait", true]]);
  });

  test("a blocked call whose deadline passes ends the run as timed out: nothing after it runs, and the sandbox is not reused", async () => {
    const sb = await sandbox('function svc(req, resp){ var got = "none"; ClearBlade.Collection("c").fetch(null, function (e, d) { got = [e, d]; }); resp.success(got) }', [], false);
    const deadlines: number[] = [];
    const { hooks } = blockingHooks((_op, _a, deadline) => { deadlines.push(deadline); return null; });
    const t0 = Date.now();
    expect(await run(sb, hooks, {}, 300)).toEqual({ kind: "failed", error: "execution timed out after 0.3 s", timedOut: true });
    expect(deadlines[0]).toBeGreaterThanOrEqual(t0 + 300);
    expect(deadlines[0]).toBeLessThan(t0 + 400);
    expect(sb.broken).toBe(true);
  });

  test("a run stopped while blocked ends with the reason; code that catches the call's error cannot go on", async () => {
    const sb = await sandbox('function svc(req, resp){ for (;;) { try { ClearBlade.Collection("c").fetch(null, function () {}); } catch (e) {} } }', [], false);
    let calls = 0;
    const { hooks } = blockingHooks(() => (++calls === 3 ? { stopped: "the service was stopped" } : []));
    expect(await run(sb, hooks, {}, 5_000)).toEqual({ kind: "failed", error: "the service was stopped" });
    expect(calls).toBe(3);
  });

  test("past its slice while other systems wait: on the asyncify build a short call suspends instead, on the plain build it blocks and the run goes on (a call starts the slice again)", async () => {
    const contention = new Int32Array(1);
    publishDeadlines(new Float64Array(1), contention);
    try {
      const limits = { memoryBytes: 32 << 20, sliceMs: 40 };
      const code = 'function svc(req, resp){ var n = 0; for (var i = 0; i < 20; i++) ClearBlade.Collection("c").count(null, function (e, d) { n += d; }); resp.success(n) }';
      const slow = (): number => { const t = Date.now(); while (Date.now() - t < 5); return 1; };
      const asyncify = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: true }, limits);
      const plain = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends: false }, limits);
      opened.push(asyncify, plain);
      // uncontended, both block all the way
      for (const sb of [asyncify, plain]) {
        const { hooks, blocked } = blockingHooks(slow);
        expect(await run(sb, hooks)).toEqual({ kind: "success", value: 20 });
        expect(blocked).toHaveLength(20);
      }
      contention[0] = 1;
      const a = blockingHooks(slow);
      const answered = later(() => 1, 0);
      a.hooks.host = answered.hooks.host;
      expect(await run(asyncify, a.hooks)).toEqual({ kind: "success", value: 20 });
      expect(a.blocked.length).toBeLessThan(20);
      expect(answered.calls.length).toBe(20 - a.blocked.length);
      const p = blockingHooks(slow);
      expect(await run(plain, p.hooks)).toEqual({ kind: "success", value: 20 });
      expect(p.blocked).toHaveLength(20);
    } finally { publishDeadlines(new Float64Array(1)); }
  });
});

describe("Buffer", () => {
  test("Node's encodings, constructors and fixed-width reads and writes, as ClearBlade services use them", async () => {
    const sb = await sandbox(`function svc(req, resp){
      var b = new Buffer("maxadmin:r3g1Ty$@3"), out = [];
      out.push(b.toString("base64"), Buffer.from("aGVsbG8gd8O2cmxk", "base64").toString(), Buffer.from("héllo ✓", "utf8").toString("hex"));
      out.push(Buffer.from("68656c6c6f", "hex").toString("latin1"), Buffer.from("_-8", "base64url").toString("hex"), Buffer.from([255, 1]).toString("base64url"));
      var r = Buffer.alloc(10);
      r.writeUInt16BE(0xbeef, 0); r.writeInt32LE(-2, 2); r.writeFloatBE(1.5, 6);
      out.push(r.readUInt16BE(0), r.readUInt16LE(0), r.readInt32LE(2), r.readFloatBE(6), r.toString("hex"));
      out.push(Buffer.concat([Buffer.from("ab"), Buffer.from("cd")]).toString(), Buffer.byteLength("✓"), Buffer.isBuffer(r), Buffer.isBuffer(new Uint8Array(1)));
      var s = r.slice(0, 2); s[0] = 0; out.push(r[0], s instanceof Buffer, JSON.stringify(Buffer.from("hi")), Buffer.from({ type: "Buffer", data: [104, 105] }).toString());
      try { r.readUInt32BE(8); out.push("no error") } catch (e) { out.push(e instanceof RangeError) }
      try { Buffer.from("x", "nope"); out.push("no error") } catch (e) { out.push(e.message) }
      resp.success(out);
    }`);
    const o = await run(sb, later(() => null).hooks);
    expect(o).toEqual({ kind: "success", value: [
      Buffer.from("maxadmin:r3g1Ty$@3").toString("base64"), "hello wörld", Buffer.from("héllo ✓").toString("hex"),
      "hello", Buffer.from("_-8", "base64url").toString("hex"), Buffer.from([255, 1]).toString("base64url"),
      0xbeef, 0xefbe, -2, 1.5, "beeffeffffff3fc00000",
      "abcd", 3, true, false,
      0, true, '{"type":"Buffer","data":[104,105]}', "hi",
      true, "Unknown encoding: nope",
    ] });
  });
});
