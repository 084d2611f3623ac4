// ClearBlade's execution model in the sandbox: a classic call has run its callback when it
// returns (its stack waits for the answer, which comes later and from elsewhere), waitForMessage
// hands out one message per call, sleep and timers wait, and a run blocked in a call holds only its
// own sandbox: others run meanwhile.
import { afterAll, describe, expect, test } from "bun:test";
import { needsBlocking, outcomeValue, paramsJson, type RunHooks, Sandbox } from "../../../src/code/sandbox.ts";

const LIMITS = { memoryBytes: 32 << 20, sliceMs: 500 };
const opened: Sandbox[] = [];
afterAll(() => { for (const s of opened) s.dispose(); });
const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@x", userid: "u", userToken: "t", isLogging: false, caller: {} });

async function sandbox(code: string, libraries: { name: string; code: string }[] = []) {
  const sb = await Sandbox.create({ libraries, service: { name: "svc", code }, meta: {} }, LIMITS);
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

describe("the plain build", () => {
  test("a service naming no blocking call runs on the plain build; one that reaches a blocking call anyway is told why", async () => {
    expect([
      { service: { name: "a", code: "function a(req, resp){ resp.success(1) }" }, libraries: [] },
      { service: { name: "b", code: "function b(req, resp){ ClearBlade.init({}) }" }, libraries: [] },
      { service: { name: "c", code: "function c(req, resp){ helper() }" }, libraries: [{ name: "l", code: "function helper(){ sleep(1) }" }] },
      { service: { name: "d", code: "async function d(req, resp){ await ClearBladeAsync.Collection('x').fetch() }" }, libraries: [] },
    ].map((s) => needsBlocking(s))).toEqual([false, true, true, false]);
    const plain = await Sandbox.create({ libraries: [], service: { name: "svc", code: 'function svc(req, resp){ var cb = globalThis["Clear" + "Blade"]; var got; cb.Collection("c").count(null, function (e, d) { got = [e, d && d.detail]; }); resp.success(got) }' }, meta: {}, blocking: false }, LIMITS);
    opened.push(plain);
    const o = await run(plain, later(() => 1).hooks);
    expect(o.kind).toBe("success");
    expect((o as { value: [boolean, string] }).value[0]).toBe(true);
    expect((o as { value: [boolean, string] }).value[1]).toMatch(/names no blocking call/);
    const async = await sandbox("async function svc(req, resp){ var n = await ClearBladeAsync.Collection('c').count(); resp.success(n) }");
    expect(await run(async, later(() => 7).hooks)).toEqual({ kind: "success", value: 7 });
  });
});
