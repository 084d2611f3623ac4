// bench/sandboxCalls.ts: what a library call costs a code worker, in-process. Warm sandboxes of
// bench/cache.ts's services and a blocking collection fetch, run in this thread through a
// worker's cache copy (cacheMirror.ts) with the host answering at once: CPU µs per run, the
// least of the rounds (the machine is shared: the least is what the code costs, the rest is
// others' load). No server, no main thread: the sandbox's side of a call alone.
import { CacheMirror } from "../src/code/cacheMirror.ts";
import { paramsJson, type RunHooks, Sandbox } from "../src/code/sandbox.ts";
import { BOUND_BASE, CacheVersions, type PostedSet } from "../src/domain/cacheVersions.ts";
import { fmt, report } from "./lib.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const CACHE = "benchcache";
const CONTEXT = JSON.stringify({
  systemKey: "9b79a67844ac845e38a1141c5b1486", systemSecret: "22F1FA1176DD928BAE64CC04842210", userEmail: "u@example.com", userid: "3b8a1cc577d55408937d39664c67cc",
  userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE", isLogging: false,
  caller: { userid: "3b8a1cc577d55408937d39664c67cc", userEmail: "u@example.com", userToken: "99X_uMSHL4ayIG9GsZcn2Issw7wbullYZKPNBX4gliE" },
});
const FETCHED = JSON.stringify({ ok: true, data: { CURRENTPAGE: 1, NEXTPAGEURL: null, PREVPAGEURL: null, TOTAL: 3, DATA: [{ item_id: "a" }, { item_id: "b" }, { item_id: "c" }] } });

/** bench/cache.ts's services (one set + get, or one get) and bench/code.ts's blocking fetch. */
const services: Record<string, string> = {
  idle: `function idle(req, resp){ var n = req.params.n || 0; resp.success(n + 1) }`,
  reader: `function reader(req, resp){ var c = ClearBlade.Cache("${CACHE}"), n = req.params.n || 0, got = 0;
    c.get("k0", function (err, v) { if (err) resp.error(err); got += v.i; }); resp.success(n + 1 + got * 0) }`,
  classic: `function classic(req, resp){ var c = ClearBlade.Cache("${CACHE}"), n = req.params.n || 0, got = 0;
    c.set("k0", { n: n, i: 0 }, function (err) { if (err) resp.error(err) });
    c.get("k0", function (err, v) { if (err) resp.error(err); got += v.i; }); resp.success(n + 1 + got * 0) }`,
  promised: `function promised(req, resp){ var c = ClearBladeAsync.Cache("${CACHE}"), n = req.params.n || 0;
    c.set("k0", { n: n, i: 0 }).then(function () { return c.get("k0") }).then(function (v) { resp.success(n + 1 + v.i * 0) }).catch(function (e) { resp.error(String(e)) }); }`,
  blocking: `function blocking(req, resp){ var rows; ClearBlade.Collection({ collectionName: "readings" }).fetch(ClearBlade.Query({ collectionName: "readings" }), function (err, d) { rows = d; }); resp.success(rows.DATA.length) }`,
};

/** The main thread's part, answering at once: the cache's notes (rights, version, expiry), so
 *  the worker's copy answers gets and makes sets, and posted sets given back their bytes. */
function mainThread() {
  const versions = new CacheVersions();
  const shared = new Int32Array(versions.buffer);
  const slot = versions.slotOf("sk", "id1");
  const note = (v: number) => ({ id: "id1", s: slot, lv: 7, sk: "sk", ttl: 3_600_000, v, x: Date.now() + 3_600_000 });
  const answer = (op: string): string => {
    if (op === "collection.fetch") return FETCHED;
    if (op === "cache.get") return JSON.stringify({ ok: true, data: { found: true, value: { n: 1, i: 0 }, _m: note(versions.current(slot)) } });
    if (op === "cache.set") return JSON.stringify({ ok: true, data: { _m: note(versions.bump(slot, versions.current(slot))!) } });
    return '{"ok":true,"data":null}';
  };
  const hooks: RunHooks = { host: (op, _a, reply) => reply(answer(op)), block: (op) => answer(op), log: () => {} };
  const applied = (m: PostedSet) => { if (m.r) Atomics.sub(shared, BOUND_BASE + m.s, m.r); };
  return { versions, hooks, applied };
}

export async function benchSandboxCalls() {
  const main = mainThread();
  const mirror = new CacheMirror(new Int32Array(main.versions.buffer), Date.now, main.applied);
  const limits = { memoryBytes: 64 << 20, sliceMs: 500 };
  const sandboxes = new Map<string, Sandbox>();
  for (const [name, code] of Object.entries(services)) sandboxes.set(name, await Sandbox.create({ libraries: [], service: { name, code }, meta: {} }, limits));
  const req = { context: CONTEXT, params: paramsJson({ n: 41 }), instanceId: "bench" };
  const runs = async (name: string, n: number) => {
    const sb = sandboxes.get(name)!;
    for (let i = 0; i < n; i++) {
      const o = await sb.run(name, req, mirror.hooks(main.hooks, "rk"), 60_000);
      if (o.kind !== "success") throw new Error(`${name}: ${JSON.stringify(o)}`);
    }
  };
  for (const name of sandboxes.keys()) await runs(name, RUNS);
  const least: Record<string, number> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const name of sandboxes.keys()) {
      const c0 = process.cpuUsage();
      await runs(name, RUNS);
      const c = process.cpuUsage(c0);
      least[name] = Math.min(least[name] ?? Infinity, (c.user + c.system) / RUNS);
    }
  }
  for (const sb of sandboxes.values()) sb.dispose();
  const over = (name: string) => fmt(least[name]! - least.idle!, 1);
  report(`A library call in a warm sandbox, in-process (host answering at once; least CPU µs of ${ROUNDS} rounds of ${RUNS} runs)`, [
    ["per run: no call / one get / set + get / ClearBladeAsync set + get / blocking fetch",
      ["idle", "reader", "classic", "promised", "blocking"].map((n) => fmt(least[n]!, 1)).join(" / ")],
    ["over a run without calls: one get / set + get / ClearBladeAsync set + get / blocking fetch",
      ["reader", "classic", "promised", "blocking"].map(over).join(" / ")],
  ]);
}

if (import.meta.main) await benchSandboxCalls();
