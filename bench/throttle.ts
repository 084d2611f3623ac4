// bench/throttle.ts: (1) the cost of one throttling evaluation with 1, 100 and 1,000 cases, in
// process, for a request that matches the last case (the whole linear scan) and one that matches
// none; (2) authenticated HTTP requests per second with a realistic set of cases against the same
// server with throttling off (no cases, built-ins disabled): target ratio >= 0.9.
import { createLogger } from "../src/core/log.ts";
import { Metrics } from "../src/core/metrics.ts";
import type { Config } from "../src/config.ts";
import { openDb } from "../src/store/db.ts";
import { migrate } from "../src/store/migrations.ts";
import { casesRepo } from "../src/store/throttle.ts";
import type { Subject } from "../src/throttle/cases.ts";
import { Throttle } from "../src/throttle/throttle.ts";
import { alternate, fmt, json, load, report, setupSystem, startOutpost, verdict } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const hex = (i: number) => i.toString(16).padStart(30, "0");

/** Cases for other systems, other consumers and other routes, in front of the one that matches. */
function caseSet(n: number, systemKey: string, email: string, path: string) {
  const rows = [];
  for (let i = 0; i < n - 1; i++) {
    const kind = i % 4;
    rows.push({
      case_name: `c${i}`, priority: 10 + i, limiter_type: "frequency", max_num: 100, duration: 60,
      system_key: kind === 0 ? hex(i) : "?",
      consumer: kind === 1 ? `email=user${i}@example.com` : kind === 2 ? `10.0.${i >> 8 & 255}.${i & 255}` : "?",
      resource: kind === 3 ? `/api/v/1/code/{systemKey}/svc${i}` : "/api/v/1/data/*",
    });
  }
  rows.push({ case_name: "match", priority: 10 + n, limiter_type: "frequency", max_num: 1_000_000_000, duration: 1, system_key: systemKey, consumer: `email=${email}`, resource: path });
  return rows;
}

async function evaluationCost(n: number): Promise<{ hitUs: number; missUs: number }> {
  const db = await openDb({ url: ":memory:" });
  await migrate(db);
  const now = new Date().toISOString();
  for (const c of caseSet(n, "sys".padEnd(30, "0"), "bench@example.com", "/api/v/1/user/info"))
    await casesRepo.put(db, { throttler_name: "HTTP Requests", ...c, created_at: now, updated_at: now });
  const config = { enableDefaultThrottlers: false, developmentMode: false, enableGlobalThrottlers: false } as Config;
  const t = new Throttle({ db, config, log: createLogger("error"), metrics: new Metrics(), nodeId: "bench" });
  await t.reload();
  const hit: Subject = { systemKey: "sys".padEnd(30, "0"), resource: "/api/v/1/user/info", ip: "127.0.0.1", email: () => "bench@example.com" };
  const miss: Subject = { systemKey: "f".repeat(30), resource: "/api/v/1/messaging/x", ip: "127.0.0.2", email: () => "nobody@example.com" };
  const time = (s: Subject) => {
    const iters = Math.max(2_000, Math.floor(2_000_000 / n));
    for (let i = 0; i < iters / 10; i++) t.evaluate("HTTP Requests", s);
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) t.evaluate("HTTP Requests", s);
    return ((performance.now() - t0) * 1000) / iters;
  };
  const out = { hitUs: time(hit), missUs: time(miss) };
  await db.close();
  return out;
}

export async function benchThrottle() {
  const rows: [string, string][] = [];
  for (const n of [1, 100, 1000]) {
    const c = await evaluationCost(n);
    rows.push([`${fmt(n)} case(s): match in the last case / no match`, `${fmt(c.hitUs, 2)} µs / ${fmt(c.missUs, 2)} µs`]);
  }
  report("Throttling: one evaluation (in process)", rows);

  const admin = { email: "bench-admin@example.com", password: "pw" };
  const on = await startOutpost(["--enable-default-throttlers", "true", "--admin-email", admin.email, "--admin-password", admin.password]);
  const off = await startOutpost(["--enable-default-throttlers", "false"]);
  try {
    const path = "/api/v/1/user/info";
    const sOn = await setupSystem(on.url), sOff = await setupSystem(off.url);
    // cases for other systems and for every system are a platform admin's to make
    const asAdmin = { "ClearBlade-DevToken": (await json(`${on.url}/admin/auth`, "POST", admin)).dev_token as string };
    // a realistic set: the built-ins plus 50 cases for other systems, consumers and routes,
    // and one generous case that every benchmark request matches (so its bucket is exercised)
    for (const c of caseSet(51, sOn.systemKey, "u@example.com", path))
      await json(`${on.url}/admin/throttlers/HTTP%20Requests/cases`, "POST", c, asAdmin);
    const cases = (await json(`${on.url}/admin/throttlers/HTTP%20Requests`, "GET", undefined, asAdmin)).cases.length;
    await load(on.url + path, { "ClearBlade-UserToken": sOn.userToken }, 1);
    await load(off.url + path, { "ClearBlade-UserToken": sOff.userToken }, 1);
    // the median of paired rounds' ratios: a round's two runs see the same neighbours
    const [withCases, without, ratio] = await alternate(
      () => load(on.url + path, { "ClearBlade-UserToken": sOn.userToken }, SECONDS),
      () => load(off.url + path, { "ClearBlade-UserToken": sOff.userToken }, SECONDS),
      5,
    );
    report(`Throttling: GET ${path}, ${cases} cases vs throttling off`, [
      ["with cases req/s", fmt(withCases)],
      ["throttling off req/s", fmt(without)],
      ["ratio (median of 5 paired rounds)", `${fmt(ratio, 2)}  ${verdict(ratio, 0.9)}`],
    ]);
  } finally {
    await on.stop();
    await off.stop();
  }
}

if (import.meta.main) await benchThrottle();
