// bench/cache.ts: shared caches from code services. Requests/s of a service that does OPS pairs of
// ClearBlade.Cache(name).set + get (the classic callback calls) against the same service doing no
// cache call, on the same node in the same run (target ratio >= 0.7); the same with
// ClearBladeAsync.Cache (promises); a service that only reads (OPS gets of a value set before:
// its run's first call is a get, answered by its worker when the rights of the caller's roles are
// remembered there); and what one cache call costs the server (CPU µs per call, from the
// difference in server CPU per run).
// Runs are POSTs over HTTP as a user with the services and the cache in its role, as a device or a
// web app would start them; wrk keeps 64 in flight.
import { alternate, cpuMicros, fmt, json, loadPost, median, report, setupSystem, startOutpost, verdict } from "./lib.ts";

/** What each run is sent. */
const BODY = '{"n":41}';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** set + get pairs per run */
const OPS = Number(process.env.BENCH_CACHE_OPS ?? 1);
const CACHE = "benchcache";

/** The three services' code: the same body with OPS set/get pairs, or none. */
const services = {
  idle: `function idle(req, resp){ var n = req.params.n || 0; resp.success(n + 1) }`,
  classic: `function classic(req, resp){
    var c = ClearBlade.Cache("${CACHE}"), n = req.params.n || 0, got = 0;
    for (var i = 0; i < ${OPS}; i++) {
      c.set("k" + i, { n: n, i: i }, function (err) { if (err) resp.error(err) });
      c.get("k" + i, function (err, v) { if (err) resp.error(err); got += v.i; });
    }
    resp.success(n + 1 + got * 0)
  }`,
  promised: `function promised(req, resp){
    var c = ClearBladeAsync.Cache("${CACHE}"), n = req.params.n || 0, got = 0, i = 0;
    function next() {
      if (i === ${OPS}) return resp.success(n + 1 + got * 0);
      var k = "k" + i;
      return c.set(k, { n: n, i: i }).then(function () { return c.get(k) }).then(function (v) { got += v.i; i++; return next() });
    }
    next().catch(function (e) { resp.error(String(e)) });
  }`,
  reader: `function reader(req, resp){
    var c = ClearBlade.Cache("${CACHE}"), n = req.params.n || 0, got = 0;
    for (var i = 0; i < ${OPS}; i++) c.get("k" + i, function (err, v) { if (err) resp.error(err); got += v.i; });
    resp.success(n + 1 + got * 0)
  }`,
};

export async function benchCache() {
  const o = await startOutpost();
  try {
    const s = await setupSystem(o.url);
    const dev = { "ClearBlade-DevToken": s.devToken };
    await json(`${o.url}/admin/v/4/service_caches/${s.systemKey}/${CACHE}`, "POST", { name: CACHE, ttl: 3600 }, dev);
    for (const [name, code] of Object.entries(services)) await json(`${o.url}/admin/code/v/1/${s.systemKey}/${name}`, "POST", { code }, dev);
    const { role_id } = await json(`${o.url}/admin/user/${s.systemKey}/roles`, "POST", {
      name: "runner", services: Object.keys(services).map((name) => ({ itemInfo: { name }, permissions: 1 })),
      servicecaches: [{ itemInfo: { name: CACHE }, permissions: 1 | 2 | 4 }],
    }, dev);
    await json(`${o.url}/admin/user/${s.systemKey}`, "PUT", { user: "u@example.com", changes: { roles: { add: [role_id] } } }, dev);
    const headers = { "ClearBlade-UserToken": s.userToken };
    const url = (name: string) => `${o.url}/api/v/1/code/${s.systemKey}/${name}`;
    for (const name of Object.keys(services)) {
      const check = await json(url(name), "POST", JSON.parse(BODY), headers);
      if (check.success !== true || check.results !== 42) throw new Error(`${name}: ${JSON.stringify(check)}`);
    }
    // steady state: JIT, sandboxes, the caches of rights and definitions
    for (const name of Object.keys(services)) await loadPost(url(name), headers, 2, BODY);
    const cpu: Record<string, number[]> = { idle: [], classic: [], promised: [], reader: [] };
    const measured = (name: keyof typeof services) => async () => {
      const c0 = cpuMicros(o.pid);
      const rps = await loadPost(url(name), headers, SECONDS, BODY);
      cpu[name]!.push((cpuMicros(o.pid) - c0) / Math.max(1, rps * SECONDS));
      return rps;
    };
    const [classic, idle, classicRatio] = await alternate(measured("classic"), measured("idle"), ROUNDS);
    const [promised, idle2, promisedRatio] = await alternate(measured("promised"), measured("idle"), ROUNDS);
    const [reader, idle3, readerRatio] = await alternate(measured("reader"), measured("idle"), ROUNDS);
    const perCall = (name: string, calls = 2) => (median(cpu[name]!) - median(cpu.idle!)) / (calls * OPS);
    report(`Cache: a service doing ${OPS} set + get per run vs the same service without cache calls (POST over HTTP, 64 in flight)`, [
      ["runs/s: ClearBlade.Cache (callbacks) / no cache calls", `${fmt(classic)} / ${fmt(idle)}`],
      ["ratio (median of the rounds' ratios)", `${fmt(classicRatio, 2)}  ${verdict(classicRatio, 0.7)}`],
      ["runs/s: ClearBladeAsync.Cache (promises) / no cache calls", `${fmt(promised)} / ${fmt(idle2)}`],
      ["ratio (median of the rounds' ratios)", `${fmt(promisedRatio, 2)}  ${verdict(promisedRatio, 0.7)}`],
      ["runs/s: ClearBlade.Cache gets only / no cache calls", `${fmt(reader)} / ${fmt(idle3)}`],
      ["ratio (median of the rounds' ratios)", `${fmt(readerRatio, 2)}  ${verdict(readerRatio, 0.7)}`],
      ["server CPU µs per run: none / callbacks / promises / gets only", `${fmt(median(cpu.idle!), 1)} / ${fmt(median(cpu.classic!), 1)} / ${fmt(median(cpu.promised!), 1)} / ${fmt(median(cpu.reader!), 1)}`],
      ["server CPU µs per cache call: callbacks / promises / gets only", `${fmt(perCall("classic"), 1)} / ${fmt(perCall("promised"), 1)} / ${fmt(perCall("reader", 1), 1)}`],
    ]);
  } finally {
    await o.stop();
  }
}



/** POST load with wrk (a JSON body {"n": 41}): requests/s; a failed run fails the bench. */
if (import.meta.main) await benchCache();
