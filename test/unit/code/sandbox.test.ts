// The sandbox on its own: what crosses into a run (req from a cached caller context and fresh
// parameters) and what comes back (text, JSON, errors), through the direct C-API call path.
import { afterAll, describe, expect, test } from "bun:test";
import { outcomeValue, paramsJson, publishDeadlines, type RunHooks, type RunOutcome, type RunRequest, Sandbox } from "../../../src/code/sandbox.ts";

const LIMITS = { memoryBytes: 32 << 20, sliceMs: 500 };
const hooks: RunHooks = { host: (_op, _a, answer) => answer('{"ok":true,"data":null}'), log: () => {} };
const opened: Sandbox[] = [];

/** An outcome with its answer decoded, as the engine answers it. */
async function run(sb: Sandbox, r: RunRequest, h: RunHooks = hooks, timeoutMs = 5_000): Promise<Record<string, unknown>> {
  const o: RunOutcome = await sb.run("svc", r, h, timeoutMs);
  if (o.kind === "failed") return { ...o };
  const { raw, ...rest } = o;
  return { ...rest, value: outcomeValue(raw) };
}

/** (`suspends`: on the asyncify build, where classic calls suspend when the hooks cannot block) */
async function sandbox(code: string, suspends?: boolean): Promise<Sandbox> {
  const sb = await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {}, suspends }, LIMITS);
  opened.push(sb);
  return sb;
}
afterAll(() => { for (const s of opened) s.dispose(); });

const context = (user: string) => ({
  systemKey: "sk", systemSecret: "secret", userEmail: `${user}@example.com`, userid: user, userToken: `tok-${user}`, isLogging: false,
  caller: { userid: user, userEmail: `${user}@example.com`, userToken: `tok-${user}` },
});
const req = (user: string, params: unknown = {}): RunRequest => ({ context: JSON.stringify(context(user)), params: paramsJson(params), instanceId: crypto.randomUUID() });

describe("Sandbox runs", () => {
  test("req carries the caller's context, the parameters and the instance id, in the wire order", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req) }");
    const r = req("alice", { n: 1 });
    const o = await run(sb, r);
    expect(o.kind).toBe("success");
    const value = o.value as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(["systemKey", "systemSecret", "userEmail", "userid", "userToken", "params", "isLogging", "service_instance_id", "caller"]);
    expect(value).toEqual({ ...context("alice"), params: { n: 1 }, service_instance_id: r.instanceId });
  });

  test("each run sees its own caller when callers alternate, and a run's changes to req do not reach the next run", async () => {
    const sb = await sandbox("function svc(req, resp){ var seen = req.userid + '/' + req.caller.userEmail + '/' + req.params.i; req.userid = 'changed'; req.caller.userEmail = 'changed'; delete req.systemKey; resp.success(seen + '/' + typeof req.systemKey) }");
    for (let i = 0; i < 6; i++) {
      const user = i % 3 === 2 ? "bob" : "alice"; // same caller twice in a row, then another
      const o = await run(sb, req(user, { i }));
      expect(o).toMatchObject({ kind: "success", value: `${user}/${user}@example.com/${i}/undefined` });
    }
  });

  test("on either build, a warm sandbox's runs answer at once, run after run, with the entry function named once; a run that waits ends later", async () => {
    for (const suspends of [false, true]) {
      const sb = await sandbox("function svc(req, resp){ if (req.params.wait) { Promise.resolve().then(function () { resp.success('later ' + req.params.i) }) } else resp.success('now ' + req.params.i) }", suspends);
      for (let i = 0; i < 4; i++) {
        const o = sb.run("svc", req("alice", { i }), hooks, 5_000);
        // an answer given before the call returned is the outcome itself, and no code of the run is left
        expect(o).toEqual({ kind: "success", raw: `t${"now " + i}`, status: undefined, headers: undefined });
        expect(sb.settled()).toBeNull();
      }
      expect(await run(sb, req("alice", { i: 4, wait: true }))).toMatchObject({ kind: "success", value: "later 4" });
      expect(await run(sb, req("bob", { i: 5 }))).toMatchObject({ kind: "success", value: "now 5" });
    }
  });

  test("strings come back as text, other values as JSON, resp.error as an error", async () => {
    const sb = await sandbox("function svc(req, resp){ var p = req.params; if (p.err) resp.error(p.v); resp.success(p.v) }");
    for (const v of ["plain", "", "j{not json", "s", "ünïcødé ✓ 日本", 42, 0, null, true, { a: [1, "x"] }, ["t", "j"]]) {
      expect(await run(sb, req("u", { v }))).toMatchObject({ kind: "success", value: v });
      expect(await run(sb, req("u", { v, err: true }))).toMatchObject({ kind: "error", value: v });
    }
  });

  test("text results of every length around the short-text read come back intact, ASCII or not", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req.params.v) }");
    for (const n of [0, 1, 62, 63, 64, 65, 66, 200, 5_000]) {
      for (const v of ["a".repeat(n), "a".repeat(n) + "é", "ü" + "a".repeat(n), "a".repeat(Math.max(0, n - 1)) + "✓" + "b".repeat(3)]) {
        expect(await run(sb, req("u", { v }))).toMatchObject({ kind: "success", value: v });
      }
    }
  });

  test("missing or empty parameters are a fresh {} each run; other parameters cross as they are", async () => {
    const sb = await sandbox("function svc(req, resp){ var seen = JSON.stringify(req.params); req.params.mark = 1; resp.success(seen) }");
    for (const [params, seen] of [[undefined, "{}"], [null, "{}"], [{}, "{}"], [{}, "{}"], [[1, 2], "[1,2]"], [{ a: null }, '{"a":null}'], [Object.create(null), "{}"]] as const) {
      expect(await run(sb, { context: JSON.stringify(context("u")), params: paramsJson(params), instanceId: crypto.randomUUID() })).toMatchObject({ kind: "success", value: seen });
    }
  });

  test("a service that returns without answering succeeds with null; a string it returns is not an answer", async () => {
    const sb = await sandbox("function svc(req, resp){ return 'st-not-an-answer' }");
    expect(await run(sb, req("u"))).toMatchObject({ kind: "success", value: null });
  });

  test("large and multi-byte parameters cross intact (the scratch buffer grows)", async () => {
    const sb = await sandbox("function svc(req, resp){ resp.success(req.params.s.length + ':' + req.params.s.slice(-3)) }");
    for (const s of ["é".repeat(3_000), "日本語".repeat(20_000), "x".repeat(200_000)]) {
      expect(await run(sb, req("u", { s }))).toMatchObject({ kind: "success", value: `${s.length}:${s.slice(-3)}` });
    }
  });

  test("runs keep working after the wasm memory grew", async () => {
    const sb = await sandbox("var keep = []; function svc(req, resp){ if (req.params.grow) { for (var i = 0; i < 20; i++) keep.push(new Uint8Array(1 << 20)) } resp.success(keep.length) }");
    expect(await run(sb, req("u", { grow: true }))).toMatchObject({ kind: "success", value: 20 });
    expect(await run(sb, req("v", {}))).toMatchObject({ kind: "success", value: 20 });
  });

  test("a thrown error is a failed run with its message; an async answer still arrives", async () => {
    const bad = await sandbox("function svc(req, resp){ throw new TypeError('sensor ' + req.params.id + ' offline') }");
    expect(await run(bad, req("u", { id: 7 }))).toEqual({ kind: "failed", error: "TypeError: sensor 7 offline" });
    expect(bad.broken).toBe(true);
    const later = await sandbox("async function svc(req, resp){ await null; resp.success('later ' + req.userid) }");
    expect(await run(later, req("carol"))).toMatchObject({ kind: "success", value: "later carol" });
    expect(await run(later, req("dave"))).toMatchObject({ kind: "success", value: "later dave" });
  });

  test("a run takes until its deadline: a stretch of code past its slice runs on while nobody waits, and times out at the deadline", async () => {
    const sb = await sandbox("function svc(req, resp){ while (true) {} }");
    const t0 = Date.now();
    expect(await run(sb, req("u"), hooks, 100)).toEqual({ kind: "failed", error: "execution timed out after 0.1 s", timedOut: true });
    expect(Date.now() - t0).toBeLessThan(450);
    const busy = await sandbox("function svc(req, resp){ var t = Date.now(); while (Date.now() - t < 800) {} resp.success('done after ' + (Date.now() - t >= 800)) }");
    expect(await run(busy, req("u"), hooks, 5_000)).toMatchObject({ kind: "success", value: "done after true" });
    const later = await sandbox("async function svc(req, resp){ await null; var t = Date.now(); while (Date.now() - t < 700) {} resp.success('async done') }");
    expect(await run(later, req("u"), hooks, 5_000)).toMatchObject({ kind: "success", value: "async done" });
    const deadline = await sandbox("async function svc(req, resp){ await null; try { while (true) {} } finally { null.x } }");
    expect(await run(deadline, req("u"), hooks, 100)).toEqual({ kind: "failed", error: "execution timed out after 0.1 s", timedOut: true });
  });

  test("a run its promise jobs end at once arms no deadline timer; one left waiting for an answer still times out at its deadline", async () => {
    const sb = await sandbox("function svc(req, resp){ ClearBladeAsync.Cache('c').get('k').catch(function () {}); Promise.resolve(req.params.n).then(function (v) { resp.success(v + 1) }) }");
    const waits = await sandbox("function svc(req, resp){ ClearBladeAsync.Cache('c').get('k').then(function () { resp.success('answered') }) }");
    const real = globalThis.setTimeout;
    let armed = 0;
    globalThis.setTimeout = ((fn: () => void, ms?: number) => { armed++; return real(fn, ms); }) as typeof setTimeout;
    try {
      const o = sb.run("svc", req("u", { n: 1 }), hooks, 5_000);
      expect(o).toEqual({ kind: "success", raw: "j2", status: undefined, headers: undefined });
      expect(armed).toBe(0);
      // (the host never answers: only the timer ends the run)
      const silent: RunHooks = { host: () => {}, log: () => {} };
      const t0 = Date.now();
      expect(await run(waits, req("u"), silent, 100)).toEqual({ kind: "failed", error: "execution timed out after 0.1 s", timedOut: true });
      expect(armed).toBe(1);
      expect(Date.now() - t0).toBeLessThan(2_000);
    } finally {
      globalThis.setTimeout = real;
    }
  }, 15_000);

  test("while code of other systems waits for the worker, a stretch past its slice is stopped, and says why", async () => {
    const contention = new Int32Array(1);
    publishDeadlines(new Float64Array(1), contention);
    try {
      contention[0] = 1;
      const sb = await sandbox("function svc(req, resp){ while (true) {} }");
      const t0 = Date.now();
      const o = await run(sb, req("u"), hooks, 5_000);
      expect(o).toEqual({ kind: "failed", error: "stopped: it ran longer than 500 ms without a call while other systems' code waited for its worker (--code-slice-ms)" });
      expect(Date.now() - t0).toBeLessThan(1_500);
      contention[0] = 0;
      const calm = await sandbox("function svc(req, resp){ var t = Date.now(); while (Date.now() - t < 700) {} resp.success(1) }");
      expect(await run(calm, req("u"), hooks, 5_000)).toMatchObject({ kind: "success", value: 1 });
    } finally { publishDeadlines(new Float64Array(1)); }
  });

  test("an error thrown in a host call's callback fails the run; a callback looping past the deadline times out", async () => {
    const thrown = await sandbox('function svc(req, resp){ ClearBlade.Collection({ collectionName: "c" }).fetch(function (err, d) { null.x; }) }', true);
    expect(await run(thrown, req("u"))).toEqual({ kind: "failed", error: "TypeError: cannot read property 'x' of null" });
    const looping = await sandbox('function svc(req, resp){ ClearBlade.Collection({ collectionName: "c" }).fetch(function (err, d) { while (true) {} }) }', true);
    expect(await run(looping, req("u"), hooks, 300)).toEqual({ kind: "failed", error: "execution timed out after 0.3 s", timedOut: true });
    const answered = await sandbox('function svc(req, resp){ ClearBlade.Collection({ collectionName: "c" }).fetch(function (err, d) { resp.success([err, d]) }) }', true);
    expect(await run(answered, req("u"))).toEqual({ kind: "success", value: [false, null] });
  });

  test("a sandbox handed on and disposed as its run ends, as a worker does with a failed one, ends cleanly", async () => {
    for (const code of ["function svc(req, resp){ throw new Error('x') }", "function svc(req, resp){ while (true) {} }", "async function svc(req, resp){ await null; throw new Error('y') }",
      'function svc(req, resp){ ClearBlade.Collection("c").fetch(null, function () {}); }']) {
      const sb = await sandbox(code, true);
      const never: RunHooks = { host: () => {}, log: () => {} }; // a blocking call that is never answered
      const o = await sb.run("svc", req("u"), never, 200, () => sb.dispose());
      expect(o.kind).toBe("failed");
    }
  });

  test("host calls carry JSON text both ways; an answer given during the call still arrives", async () => {
    const sb = await sandbox("async function svc(req, resp){ var a = await ClearBladeAsync.Users().count({ q: 1 }); var b = await ClearBladeAsync.Users().count(); resp.success([a, b]) }");
    const seen: [string, string][] = [];
    const later: RunHooks = {
      host: (op, a, answer) => { seen.push([op, a]); if (seen.length === 1) setTimeout(() => answer('{"ok":true,"data":{"n":1}}'), 5); else answer('{"ok":true,"data":2}'); },
      log: () => {},
    };
    expect(await run(sb, req("u"), later)).toMatchObject({ kind: "success", value: [{ n: 1 }, 2] });
    expect(seen.map(([op, a]) => [op, JSON.parse(a)])).toEqual([["user.count", { query: { q: 1 } }], ["user.count", { query: { FILTERS: [] } }]]);
    const failing: RunHooks = { host: (_op, _a, answer) => setTimeout(() => answer('{"ok":false,"error":{"detail":"no such thing"}}'), 1), log: () => {} };
    const sb2 = await sandbox("async function svc(req, resp){ try { await ClearBladeAsync.Users().count() } catch (e) { resp.error(e.message) } }");
    expect(await run(sb2, req("u"), failing)).toMatchObject({ kind: "error", value: "no such thing" });
  });

  test("onFinish gets the outcome when the run ends, before the caller sees it", async () => {
    const sb = await sandbox("async function svc(req, resp){ await ClearBladeAsync.Users().count(); resp.success('late') }");
    const order: string[] = [];
    const slow: RunHooks = { host: (_op, _a, answer) => setTimeout(() => answer('{"ok":true,"data":0}'), 1), log: () => {} };
    const p = sb.run("svc", req("u"), slow, 5_000, (o) => order.push(`finish ${o.kind}`));
    expect(p).toBeInstanceOf(Promise);
    await p;
    order.push("caller");
    expect(order).toEqual(["finish success", "caller"]);
    const sync = await sandbox("function svc(req, resp){ resp.success('now') }");
    let got: RunOutcome | null = null;
    const o = sync.run("svc", req("u"), hooks, 5_000, (x) => (got = x));
    expect(o).toEqual({ kind: "success", raw: "tnow", status: undefined, headers: undefined });
    expect(got!).toBe(o as RunOutcome);
  });

  test("the deadline of the code running now is published while it runs and cleared after; a run without one publishes none", async () => {
    const view = new Float64Array(1);
    publishDeadlines(view);
    const sb = await sandbox("function svc(req, resp){ log('x'); resp.success(1) }");
    let during = 0;
    const t0 = Date.now();
    await sb.run("svc", req("u"), { host: hooks.host, log: () => (during = view[0]!) }, 10_000);
    expect(during).toBeGreaterThanOrEqual(t0 + 10_000);
    expect(during).toBeLessThanOrEqual(Date.now() + 10_000);
    expect(view[0]).toBe(0);
    await sb.run("svc", req("u"), { host: hooks.host, log: () => (during = view[0]!) }, 0);
    expect(during).toBe(0);
  });
});