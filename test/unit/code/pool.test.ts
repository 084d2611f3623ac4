// The worker pool with real worker threads: runs and their answers, host calls through the main
// thread, one system's share of the workers and its bounded queue, deadlines while queued, a worker
// stuck in code the interrupt does not reach, memory bounds and memory given back, warm sandboxes
// bounded and evicted least recently used, aborts, forgetting a service.
import { afterEach, describe, expect, test } from "bun:test";
import { defaultWorkers, GRACE_MS, type PoolOptions, type PoolOutcome, type RunSpec, WorkerPool } from "../../../src/code/pool.ts";
import { ApiError } from "../../../src/core/errors.ts";
import { createLogger } from "../../../src/core/log.ts";
import { outcomeValue } from "../../../src/code/sandbox.ts";

const pools: WorkerPool[] = [];
afterEach(async () => { for (const p of pools.splice(0)) await p.stop(); });

async function pool(o: Partial<PoolOptions> = {}): Promise<WorkerPool> {
  const p = new WorkerPool({ workers: 2, memoryMb: 256, sandboxMemoryMb: 64, sliceMs: 400, maxShare: 0.5, queueMax: 100, log: createLogger("silent"), ...o });
  pools.push(p);
  p.start();
  await p.warm();
  return p;
}

/** Resolves once `n` runs are with a worker (not queued): a run is started, not waited for. */
async function handedOut(p: WorkerPool, n: number) {
  for (const end = Date.now() + 5_000; p.stats().running < n;) {
    if (Date.now() > end) throw new Error(`${p.stats().running} of ${n} runs with a worker`);
    await Bun.sleep(2);
  }
}

const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@example.com", userid: "u", userToken: "t", isLogging: false, caller: {} });
const nothing = async () => JSON.stringify({ ok: true, data: null });

/** A run of service `name` of system `system` (code defines function `name`). */
function spec(system: string, name: string, code: string, more: Partial<RunSpec> = {}): RunSpec {
  return {
    system, key: `${system}/${name}`, version: "1.0", source: { libraries: [], service: { name, code }, meta: {} }, entry: name,
    context, params: null, timeoutMs: 10_000, logs: false, instanceId: crypto.randomUUID(), host: nothing, ...more,
  };
}
const value = (o: PoolOutcome) => (o.kind === "failed" ? o : { kind: o.kind, value: outcomeValue(o.raw) });
const run = (p: WorkerPool, s: RunSpec) => p.submit(s).done.then(value);

describe("defaultWorkers", () => {
  test("twice the cores while the memory gives each worker a sandbox's limit", () => {
    expect(defaultWorkers(2, 256, 64)).toBe(4);
    expect(defaultWorkers(1, 256, 64)).toBe(2);
    expect(defaultWorkers(2, 1024, 64)).toBe(4);
  });
  test("never fewer than the cores (at least 2), and no worker below one sandbox's limit for the extra", () => {
    // 4 cores, 256 MB: 8 workers would leave 32 MB each under 64 MB sandboxes
    expect(defaultWorkers(4, 256, 64)).toBe(4);
    expect(defaultWorkers(4, 512, 64)).toBe(8);
    expect(defaultWorkers(2, 128, 64)).toBe(2);
    expect(defaultWorkers(2, 64, 64)).toBe(2);
    // small sandboxes: the 32 MB a worker's module needs at least still counts
    expect(defaultWorkers(4, 256, 8)).toBe(8);
    expect(defaultWorkers(16, 256, 8)).toBe(16);
  });
});

describe("WorkerPool", () => {
  test("runs answer with their values, logs when asked, status and headers; a burst is carried in batches", async () => {
    const p = await pool();
    expect(await run(p, spec("a", "hello", "function hello(req, resp){ resp.success('hi ' + req.params.n) }", { params: '{"n":1}' }))).toEqual({ kind: "success", value: "hi 1" });
    const o = await p.submit(spec("a", "talk", "function talk(req, resp){ log('one'); console.log({ two: 2 }); resp.status(201); resp.set({ 'x-a': 'b' }); resp.error({ e: true }) }", { logs: true })).done;
    expect(o).toEqual({ kind: "error", raw: 'j{"e":true}', status: 201, headers: { "x-a": "b" }, logs: ["one", '{"two":2}'] });
    const quiet = await p.submit(spec("a", "talk2", "function talk2(req, resp){ log('kept back'); resp.success(1) }")).done;
    expect(quiet.logs).toBeUndefined();
    const many = await Promise.all(Array.from({ length: 300 }, (_, i) => run(p, spec(`s${i % 3}`, "echo", "function echo(req, resp){ resp.success(req.params.i) }", { params: JSON.stringify({ i }) }))));
    expect(many).toEqual(Array.from({ length: 300 }, (_, i) => ({ kind: "success", value: i })));
  });

  test("runs submitted in one turn of the event loop go to a worker in one batch; the queue's bound counts what waits behind another in a batch, not what a free worker takes", async () => {
    const p = await pool({ workers: 3, maxShare: 1 });
    const quick = (i: number) => spec("a", "quick", "function quick(req, resp){ resp.success(req.params.i) }", { params: JSON.stringify({ i }) });
    expect(await run(p, quick(-1))).toEqual({ kind: "success", value: -1 }); // (its sandbox is warm)
    const before = p.stats().batches;
    const burst = Array.from({ length: 5 }, (_, i) => run(p, quick(i)));
    expect(p.stats()).toMatchObject({ queued: 5 }); // none handed out yet
    expect(await Promise.all(burst)).toEqual([0, 1, 2, 3, 4].map((i) => ({ kind: "success", value: i })));
    // one post for the five (handed out one by one as they came, they took four)
    expect(p.stats().batches - before).toBe(1);
    // a burst past the bound while workers are free: what they take is not waiting
    const small = await pool({ workers: 3, maxShare: 1, queueMax: 2 });
    expect(await Promise.all(Array.from({ length: 5 }, (_, i) => run(small, quick(i))))).toEqual([0, 1, 2, 3, 4].map((i) => ({ kind: "success", value: i })));
    // with one worker, busy: one runs, one waits behind it in its batch, one in the queue; the next is refused
    const one = await pool({ workers: 1, queueMax: 2, sliceMs: 300 });
    const loop = () => spec("a", "loop", "function loop(req, resp){ while (true) {} }", { timeoutMs: 300 });
    const held = [one.submit(loop()), one.submit(loop()), one.submit(loop())];
    let refused: unknown;
    try { one.submit(loop()); } catch (e) { refused = e; }
    expect((refused as ApiError).kind.status).toBe(429);
    await Promise.all(held.map((h) => h.done));
  });

  test("host calls go to the main thread with their arguments and come back as the run's answers", async () => {
    const p = await pool();
    const seen: [string, unknown][] = [];
    const host = async (op: string, a: string) => {
      seen.push([op, JSON.parse(a)]);
      await Bun.sleep(2);
      return op === "user.count" ? JSON.stringify({ ok: true, data: { count: seen.length } }) : JSON.stringify({ ok: false, error: { detail: "refused" } });
    };
    const code = `async function calls(req, resp) {
      var a = await ClearBladeAsync.Users().count({ x: 1 });
      var b = await ClearBladeAsync.Users().count();
      try { await ClearBladeAsync.Devices().read() } catch (e) { resp.success([a.count, b.count, e.message]) }
    }`;
    expect(await run(p, spec("a", "calls", code, { host }))).toEqual({ kind: "success", value: [1, 2, "refused"] });
    expect(seen).toEqual([["user.count", { query: { x: 1 } }], ["user.count", { query: { FILTERS: [] } }], ["device.list", { query: { FILTERS: [] } }]]);
  });

  test("one system holds at most its share of the workers: another system's run passes its busy loops", async () => {
    const p = await pool({ sliceMs: 400 });
    expect(p.maxHold).toBe(1);
    const ended: string[] = [];
    const loops = [1, 2, 3].map((i) => p.submit(spec("a", "loop", "function loop(req, resp){ while (true) {} }", { timeoutMs: 600 })).done.then((o) => { ended.push(`loop${i}`); return o; }));
    await handedOut(p, 1);
    const t0 = performance.now();
    const b = await run(p, spec("b", "quick", "function quick(req, resp){ resp.success('b') }"));
    const bMs = performance.now() - t0;
    ended.push("b");
    expect(b).toEqual({ kind: "success", value: "b" });
    const outs = await Promise.all(loops);
    // the first ran to its deadline; the others waited for a's one worker past theirs
    for (const o of outs) expect(o).toEqual({ kind: "failed", error: "execution timed out after 0.6 s", timedOut: true });
    // b did not wait for a's loops
    expect(ended[0]).toBe("b");
    expect(bMs).toBeLessThan(400);
  });

  test("a system alone borrows the idle workers past its share while its batches are short; once they run long it keeps to its share", async () => {
    const p = await pool();
    expect(p.maxHold).toBe(1);
    const quick = spec("a", "quick", "function quick(req, resp){ resp.success(1) }");
    const busy = spec("a", "busy", "function busy(req, resp){ var t = Date.now(); while (Date.now() - t < 150) {} resp.success(2) }");
    // a new system is not known to be quick: its second run waits for its one worker
    const first = [p.submit(busy)];
    await handedOut(p, 1);
    first.push(p.submit(busy));
    expect(p.stats()).toMatchObject({ running: 1, queued: 1 });
    await Promise.all(first.map((r) => r.done));
    // many short batches later it borrows the second worker
    for (let i = 0; i < 40; i++) expect(await run(p, quick)).toEqual({ kind: "success", value: 1 });
    const borrowed = [p.submit(busy)];
    await handedOut(p, 1);
    borrowed.push(p.submit(busy));
    await handedOut(p, 2);
    expect(p.stats()).toMatchObject({ running: 2, queued: 0, busy: 2 });
    for (const r of borrowed) expect(value(await r.done)).toEqual({ kind: "success", value: 2 });
    // its batches ran long: back to its share
    const after = [p.submit(busy)];
    await handedOut(p, 1);
    after.push(p.submit(busy));
    expect(p.stats()).toMatchObject({ running: 1, queued: 1 });
    await Promise.all(after.map((r) => r.done));
  });

  test("a batch hands back what it has not started once it has run a while: another system waits one step, not the whole burst", async () => {
    const p = await pool({ workers: 1 });
    const ended: string[] = [];
    const busy = (i: number) => p.submit(spec("a", "busy", "function busy(req, resp){ var t = Date.now(); while (Date.now() - t < 100) {} resp.success(1) }")).done.then(() => ended.push(`a${i}`));
    const burst = [busy(1)];
    await handedOut(p, 1);
    burst.push(...[2, 3, 4, 5].map(busy)); // queued behind a1: they go out as one batch
    while (!ended.includes("a1")) await Bun.sleep(5);
    await Bun.sleep(30);
    await run(p, spec("b", "quick", "function quick(req, resp){ resp.success(1) }")).then(() => ended.push("b"));
    await Promise.all(burst);
    // without the budget b would wait for a2..a5
    expect(ended.indexOf("b")).toBeLessThanOrEqual(3);
    expect(ended.filter((x) => x !== "b")).toEqual(["a1", "a2", "a3", "a4", "a5"]);
  });

  test("a system's queue is bounded: past it, submit refuses with THROTTLED and a Retry-After", async () => {
    const p = await pool({ queueMax: 2, sliceMs: 300 });
    const loop = () => spec("a", "loop", "function loop(req, resp){ while (true) {} }", { timeoutMs: 300 });
    const held = [p.submit(loop())];
    await handedOut(p, 1);
    held.push(p.submit(loop()), p.submit(loop())); // one runs, two wait
    let refused: unknown;
    try { p.submit(loop()); } catch (e) { refused = e; }
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).kind.status).toBe(429);
    expect((refused as ApiError).retryAfterS).toBe(1);
    expect(await run(p, spec("b", "other", "function other(req, resp){ resp.success(1) }"))).toEqual({ kind: "success", value: 1 });
    await Promise.all(held.map((h) => h.done));
  });

  test("a run whose deadline passes while it waits for a worker answers at its deadline, without running", async () => {
    const p = await pool({ sliceMs: 1_000 });
    const loop = p.submit(spec("a", "loop", "function loop(req, resp){ while (true) {} }", { timeoutMs: 1_000 }));
    await handedOut(p, 1);
    let ran = false;
    const t0 = performance.now();
    const late = await p.submit(spec("a", "late", "function late(req, resp){ log('ran'); resp.success(1) }", { timeoutMs: 200, logs: true, host: async () => { ran = true; return "{}"; } })).done;
    expect(late).toEqual({ kind: "failed", error: "execution timed out after 0.2 s", timedOut: true });
    expect(performance.now() - t0).toBeLessThan(700);
    expect(ran).toBe(false);
    await loop.done;
  });

  test("a worker stuck past its deadline in code the interrupt does not reach is terminated and replaced; the runs behind it run elsewhere", async () => {
    const p = await pool({ memoryMb: 1024, sandboxMemoryMb: 256 });
    // a naive substring search runs in C and never checks the interrupt: a needle of 150,000 'a's and
    // a 'b' in 300,000 'a's is ~2e10 comparisons, tens of seconds on any machine, in under 1 MB
    const stuck = p.submit(spec("a", "sorter", "function sorter(req, resp){ var h = 'a'.repeat(3e5), n = 'a'.repeat(1.5e5) + 'b'; resp.success(h.indexOf(n)) }", { timeoutMs: 1_000 }));
    const behind = p.submit(spec("a", "after", "function after(req, resp){ resp.success('after') }"));
    const t0 = performance.now();
    const o = await stuck.done;
    expect(o).toMatchObject({ kind: "failed", timedOut: true, killed: true });
    expect((o as { error: string }).error).toMatch(/timed out after 1 s .*stopped/);
    expect(performance.now() - t0).toBeLessThan(1_000 + GRACE_MS + 1_500);
    expect(value(await behind.done)).toEqual({ kind: "success", value: "after" });
    expect(p.killed).toBe(1);
    await p.ready();
    expect(p.stats().workers).toBe(2);
    expect(await run(p, spec("a", "again", "function again(req, resp){ resp.success(2) }"))).toEqual({ kind: "success", value: 2 });
  });

  test("a sandbox's memory is bounded: past it the run fails, its sandbox goes, and the worker takes the next runs", async () => {
    const p = await pool({ workers: 1, memoryMb: 64, sandboxMemoryMb: 256 });
    expect(p.shareBytes).toBe(64 << 20);
    const bomb = await run(p, spec("a", "bomb", "function bomb(req, resp){ var a = []; for (;;) a.push(new Uint8Array(1 << 20)) }"));
    expect(bomb).toMatchObject({ kind: "failed" });
    expect((bomb as { error: string }).error).toMatch(/out of memory/);
    expect(await run(p, spec("a", "after", "function after(req, resp){ resp.success(1) }"))).toEqual({ kind: "success", value: 1 });
    expect(p.stats().heaps[0]).toBeLessThanOrEqual(8 << 20);
  });

  test("runs that fail give their sandbox's memory back: the worker's heap stays where it started", async () => {
    const p = await pool({ workers: 1, memoryMb: 256 });
    const start = p.stats().heaps[0]!;
    const failing = spec("a", "cbfail", 'function cbfail(req, resp){ var a = []; for (var i = 0; i < 100; i++) a.push({ i: i }); ClearBlade.Collection({ collectionName: "c" }).fetch(function () { null.x; }); }');
    for (let i = 0; i < 100; i++) expect(await run(p, failing)).toEqual({ kind: "failed", error: "TypeError: cannot read property 'x' of null" });
    expect(p.stats().heaps[0]!).toBeLessThan(start + (8 << 20));
  }, 30_000);

  test("a sandbox whose heap grew is not kept warm: its memory goes when its run ends", async () => {
    const p = await pool({ workers: 1, memoryMb: 256 });
    const keeper = spec("a", "keeper", "var keep; function keeper(req, resp){ keep = new Uint8Array(40 << 20); resp.success(keep.length) }");
    expect(await run(p, keeper)).toEqual({ kind: "success", value: 40 << 20 });
    expect(p.stats().heaps[0]).toBeLessThanOrEqual(8 << 20);
    expect(p.stats().warm).toBe(0);
    expect(await run(p, keeper)).toEqual({ kind: "success", value: 40 << 20 });
  }, 20_000);

  test("warm sandboxes are bounded over the pool, least recently used go first", async () => {
    const p = await pool({ workers: 1, warmMax: 8 });
    const counter = (i: number) => spec("a", `c${i}`, `var n = 0; function c${i}(req, resp){ resp.success(++n) }`);
    expect(await run(p, counter(0))).toEqual({ kind: "success", value: 1 });
    expect(await run(p, counter(0))).toEqual({ kind: "success", value: 2 }); // warm
    for (let i = 1; i <= 8; i++) await run(p, counter(i));
    expect(p.stats().warm).toBe(8);
    expect(await run(p, counter(8))).toEqual({ kind: "success", value: 2 }); // recent: still warm
    expect(await run(p, counter(0))).toEqual({ kind: "success", value: 1 }); // oldest: was evicted
  });

  test("abort ends a waiting run (a stream service stopped), queued or started", async () => {
    const p = await pool();
    const never = () => new Promise<string>(() => {});
    let called!: () => void;
    const inHost = new Promise<void>((r) => (called = r));
    const stream = p.submit(spec("a", "stream", "async function stream(req, resp){ await ClearBladeAsync.Users().count(); }", { timeoutMs: 0, host: () => { called(); return never(); } }));
    await inHost; // started: it waits on its host call
    p.abort(stream.id, "the stream service was stopped");
    expect(await stream.done).toEqual({ kind: "failed", error: "the stream service was stopped" });
    const p1 = await pool({ workers: 1, sliceMs: 300 });
    const loop = p1.submit(spec("a", "loop", "function loop(req, resp){ while (true) {} }", { timeoutMs: 300 }));
    const queued = p1.submit(spec("a", "q", "function q(req, resp){ resp.success(1) }"));
    p1.abort(queued.id, "not now");
    expect(await queued.done).toEqual({ kind: "failed", error: "not now" });
    await loop.done;
  });

  test("a new version of a service gets a new sandbox; forgetting a service drops its warm sandboxes", async () => {
    const p = await pool({ workers: 1 });
    const v = (version: string, code: string) => spec("a", "svc", code, { version });
    const count = "var n = 0; function svc(req, resp){ resp.success('v1 ' + (++n)) }";
    expect(await run(p, v("1.0", count))).toEqual({ kind: "success", value: "v1 1" });
    expect(await run(p, v("1.0", count))).toEqual({ kind: "success", value: "v1 2" });
    expect(await run(p, v("2.0", "function svc(req, resp){ resp.success('v2') }"))).toEqual({ kind: "success", value: "v2" });
    expect(await run(p, v("3.0", count))).toEqual({ kind: "success", value: "v1 1" });
    p.forget("a/svc");
    expect(await run(p, v("3.0", count))).toEqual({ kind: "success", value: "v1 1" });
    p.forget("a/");
    expect(await run(p, v("3.0", count))).toEqual({ kind: "success", value: "v1 1" });
  });

  test("stop answers every run it still holds", async () => {
    const p = await pool({ workers: 1, sliceMs: 2_000 });
    const loop = p.submit(spec("a", "loop", "function loop(req, resp){ while (true) {} }"));
    const queued = p.submit(spec("a", "q", "function q(req, resp){ resp.success(1) }"));
    await handedOut(p, 1);
    await p.stop();
    expect(await loop.done).toEqual({ kind: "failed", error: "the server is stopping" });
    expect(await queued.done).toEqual({ kind: "failed", error: "the server is stopping" });
  });

  test("no worker starts before the first run (an idle node holds none); the first run starts them", async () => {
    const p = new WorkerPool({ workers: 2, memoryMb: 256, sandboxMemoryMb: 64, sliceMs: 400, maxShare: 0.5, queueMax: 100, log: createLogger("silent") });
    pools.push(p);
    p.start();
    await p.ready();
    expect(p.stats().workers).toBe(0);
    expect(await run(p, spec("a", "first", "function first(req, resp){ resp.success(1) }"))).toEqual({ kind: "success", value: 1 });
    expect(p.stats().workers).toBe(2);
  });
});

describe("classic calls that block the worker thread", () => {
  const fetchRows = (name: string) => `function ${name}(req, resp){ var rows; ClearBlade.Collection("c").fetch(null, function (err, d) { rows = err ? "error: " + d.detail : d; }); resp.success(rows) }`;

  test("a short call's answer comes back through shared memory, large answers included; errors reach the callback", async () => {
    const p = await pool();
    const big = "x".repeat(300_000);
    let n = 0;
    const host = async (op: string, a: string) => {
      if (op !== "collection.fetch" || JSON.parse(a).collection.ref !== "c") return JSON.stringify({ ok: false, error: { detail: "unexpected " + op } });
      n++;
      if (n === 2) return JSON.stringify({ ok: true, data: { big, text: "héllo ✓" } });
      if (n === 3) return JSON.stringify({ ok: false, error: { detail: "no such collection" } });
      return JSON.stringify({ ok: true, data: { DATA: [1, 2, 3] } });
    };
    const s = spec("a", "rows", fetchRows("rows"), { host });
    expect(await run(p, s)).toEqual({ kind: "success", value: { DATA: [1, 2, 3] } });
    expect(await run(p, { ...s, instanceId: "2" })).toEqual({ kind: "success", value: { big, text: "héllo ✓" } });
    expect(await run(p, { ...s, instanceId: "3" })).toEqual({ kind: "success", value: "error: no such collection" });
    // many at once, over both workers, each answered with its own call's answer
    const host2 = async (_op: string, a: string) => { await Bun.sleep(1); return JSON.stringify({ ok: true, data: JSON.parse(a).collection.ref }); };
    const many = await Promise.all(Array.from({ length: 60 }, (_, i) => run(p, spec(`s${i % 3}`, "own", `function own(req, resp){ var got; ClearBlade.Collection("c" + req.params.i).fetch(null, function (e, d) { got = d; }); resp.success(got) }`, { host: host2, params: JSON.stringify({ i }) }))));
    expect(many).toEqual(Array.from({ length: 60 }, (_, i) => ({ kind: "success", value: `c${i}` })));
  });

  test("a call never answered ends its run at its execution timeout; the worker is not terminated and takes the next runs", async () => {
    const p = await pool({ workers: 1, maxShare: 1 });
    const never = () => new Promise<string>(() => {});
    const t0 = Date.now();
    expect(await run(p, spec("a", "stuck", fetchRows("stuck"), { host: never, timeoutMs: 300 }))).toEqual({ kind: "failed", error: "execution timed out after 0.3 s", timedOut: true });
    expect(Date.now() - t0).toBeLessThan(300 + GRACE_MS);
    // the watchdog looked several times meanwhile (every 100 ms)
    expect(p.stats().killed).toBe(0);
    expect(await run(p, spec("a", "rows", fetchRows("rows"), { host: async () => JSON.stringify({ ok: true, data: 5 }) }))).toEqual({ kind: "success", value: 5 });
    expect(p.stats().killed).toBe(0);
  });

  test("abort reaches a run blocked in a call: it ends with the reason, and the worker goes on", async () => {
    const p = await pool({ workers: 1, maxShare: 1 });
    let asked!: () => void;
    const calling = new Promise<void>((r) => (asked = r));
    const { id, done } = p.submit(spec("a", "stuck", fetchRows("stuck"), { host: () => { asked(); return new Promise<string>(() => {}); }, timeoutMs: 0 }));
    await calling;
    p.abort(id, "the service was stopped");
    expect(await done).toEqual({ kind: "failed", error: "the service was stopped" });
    expect(await run(p, spec("a", "rows", fetchRows("rows"), { host: async () => JSON.stringify({ ok: true, data: 6 }) }))).toEqual({ kind: "success", value: 6 });
    expect(p.stats().killed).toBe(0);
  });

  test("a stream service looping over blocking calls, stopped between two calls, is stopped at its next call", async () => {
    const p = await pool({ workers: 1, maxShare: 1 });
    let calls = 0;
    let third!: () => void;
    const answered = new Promise<void>((r) => (third = r));
    const host = async () => { if (++calls === 3) setTimeout(third, 10); return JSON.stringify({ ok: true, data: 1 }); };
    // each call is followed by 40 ms of code: the stop comes while the worker runs that, not in a call
    const { id, done } = p.submit(spec("a", "loop", "function loop(req, resp){ for (;;) { ClearBlade.Collection('c').count(null, function () {}); var t = Date.now(); while (Date.now() - t < 40) {} } }", { host, timeoutMs: 0 }));
    await answered;
    p.abort(id, "the stream service was stopped");
    expect(await done).toEqual({ kind: "failed", error: "the stream service was stopped" });
    expect(calls).toBe(3);
    expect(await run(p, spec("a", "after", "function after(req, resp){ resp.success('free') }"))).toEqual({ kind: "success", value: "free" });
    expect(p.stats().killed).toBe(0);
  });

  test("a run blocking its worker and a suspended run on the same worker: the suspended one's answer waits its turn, both end", async () => {
    const p = await pool({ workers: 1, maxShare: 1 });
    const order: string[] = [];
    const host = async (op: string, a: string) => {
      const args = JSON.parse(a);
      await Bun.sleep(op === "timer.wait" ? args.ms : 5);
      order.push(op);
      return JSON.stringify({ ok: true, data: 1 });
    };
    const looper = spec("a", "looper", "function looper(req, resp){ var n = 0; for (var i = 0; i < 30; i++) ClearBlade.Collection('c').count(null, function (e, d) { n += d; }); resp.success(n) }", { host });
    expect(await run(p, looper)).toEqual({ kind: "success", value: 30 }); // its sandbox is warm
    order.length = 0;
    const ended: string[] = [];
    const sleeper = run(p, spec("a", "sleeper", "function sleeper(req, resp){ sleep(5); resp.success('woke') }", { host })).then((o) => { ended.push("sleeper"); return o; });
    const looping = run(p, { ...looper, instanceId: "2" }).then((o) => { ended.push("looper"); return o; });
    expect(await Promise.all([sleeper, looping])).toEqual([{ kind: "success", value: "woke" }, { kind: "success", value: 30 }]);
    // the sleep was answered while the other run held the worker with its calls, and went on after
    expect(order.indexOf("timer.wait")).toBeLessThan(order.length - 1);
    expect(ended).toEqual(["looper", "sleeper"]);
    expect(p.stats().killed).toBe(0);
  });

  test("a service calling another through the host suspends, so a callee that needs the caller's worker still runs", async () => {
    const p = await pool({ workers: 1, maxShare: 1 });
    const callee = spec("a", "callee", "function callee(req, resp){ var n; ClearBlade.Collection('c').count(null, function (e, d) { n = d; }); resp.success(n + 1) }", { host: async () => JSON.stringify({ ok: true, data: 41 }) });
    const host = async (op: string) => {
      if (op !== "code.execute") return JSON.stringify({ ok: false, error: { detail: op } });
      const o = await p.submit(callee).done;
      return JSON.stringify({ ok: true, data: o.kind === "success" ? outcomeValue(o.raw) : o });
    };
    expect(await run(p, spec("a", "caller", "function caller(req, resp){ var got; ClearBlade.Code().execute('callee', {}, function (e, d) { got = d; }); resp.success(got) }", { host, timeoutMs: 5_000 }))).toEqual({ kind: "success", value: 42 });
  });
});
