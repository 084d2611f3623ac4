// Cache sets a code worker makes itself (cacheMirror.ts), with real worker threads: they reach
// the main thread with the worker's next message (before what that message carries: a run's end,
// a blocking call), and a run that goes on computing after its set does not hold them longer than
// a few ms (calls on the main thread wait for their tickets).
import { afterEach, expect, test } from "bun:test";
import { type PoolOptions, type RunSpec, WorkerPool } from "../../../src/code/pool.ts";
import { SETS_HELD_MS } from "../../../src/code/protocol.ts";
import { outcomeValue } from "../../../src/code/sandbox.ts";
import { createLogger } from "../../../src/core/log.ts";
import { CacheVersions, type PostedSet } from "../../../src/domain/cacheVersions.ts";

const pools: WorkerPool[] = [];
afterEach(async () => { for (const p of pools.splice(0)) await p.stop(); });

const context = JSON.stringify({ systemKey: "sk", systemSecret: "s", userEmail: "u@example.com", userid: "u", userToken: "t", isLogging: false, caller: {} });

/** One worker, the main thread's versions, and what happened, in order: sets applied ("set k=j"),
 *  other host calls (their op), runs ended ("ended"). */
async function setUp() {
  const versions = new CacheVersions();
  const slot = versions.slotOf("sk", "id1");
  const seen: string[] = [];
  const times: Record<string, number> = {};
  const cacheWrites = (m: PostedSet) => {
    seen.push(`set ${m.k}=${m.j}`);
    times[`set ${m.k}`] = Date.now();
    versions.posted(m.s, m.n, async () => {});
  };
  const o: PoolOptions = { workers: 1, memoryMb: 256, sandboxMemoryMb: 64, sliceMs: 400, maxShare: 1, queueMax: 100, log: createLogger("silent"), cacheVersions: versions.buffer, cacheWrites };
  const p = new WorkerPool(o);
  pools.push(p);
  p.start();
  await p.warm();
  // the main thread's answers: a set made here teaches the worker its right to write, for its rights key
  const host = async (op: string) => {
    seen.push(op);
    if (op !== "cache.set") return JSON.stringify({ ok: true, data: 1 });
    const before = versions.current(slot);
    return JSON.stringify({ ok: true, data: { _m: { id: "id1", s: slot, lv: 15, v: versions.bump(slot, before), x: Date.now() + 60_000, sk: "sk", ttl: 60_000 } } });
  };
  const run = async (name: string, code: string) => {
    const s: RunSpec = {
      system: "sk", key: `sk/${name}`, version: "1.0", source: { libraries: [], service: { name, code }, meta: {} }, entry: name,
      context, params: null, timeoutMs: 10_000, logs: false, instanceId: crypto.randomUUID(), host, cacheRights: "user/sk/r1",
    };
    const out = await p.submit(s).done;
    seen.push("ended");
    times.ended = Date.now();
    return out.kind === "failed" ? out : outcomeValue(out.raw);
  };
  return { run, seen, times };
}

test("a worker's sets go with its next message, applied before what it carries: a run's end, a blocking call", async () => {
  const t = await setUp();
  expect(await t.run("first", `function first(req, resp){ ClearBlade.Cache("c").set("k", 1, function () {}); resp.success(1) }`)).toBe(1);
  expect(t.seen).toEqual(["cache.set", "ended"]); // asked: the right was not known yet
  t.seen.length = 0;
  expect(await t.run("again", `function again(req, resp){ ClearBlade.Cache("c").set("k", 2, function () {}); ClearBlade.Cache("c").set("k2", "b", function () {}); resp.success(2) }`)).toBe(2);
  expect(t.seen).toEqual(["set k=2", "set k2=\"b\"", "ended"]);
  t.seen.length = 0;
  expect(await t.run("then", `function then(req, resp){ ClearBlade.Cache("c").set("k", 3, function () {}); ClearBlade.Collection("x").count(null, function () {}); resp.success(3) }`)).toBe(3);
  expect(t.seen).toEqual(["set k=3", "collection.count", "ended"]);
});

test("a run computing without calls after its set does not hold the set: it is posted within a few ms", async () => {
  const t = await setUp();
  await t.run("first", `function first(req, resp){ ClearBlade.Cache("c").set("k", 1, function () {}); resp.success(1) }`);
  t.seen.length = 0;
  const busy = `function busy(req, resp){ ClearBlade.Cache("c").set("late", 4, function () {}); var t = Date.now(); while (Date.now() - t < 400) {} resp.success(4) }`;
  expect(await t.run("busy", busy)).toBe(4);
  expect(t.seen).toEqual(["set late=4", "ended"]);
  // held about SETS_HELD_MS (the interrupt hands them over), not until the run's end
  expect(t.times.ended! - t.times["set late"]!).toBeGreaterThan(300 - SETS_HELD_MS);
});
