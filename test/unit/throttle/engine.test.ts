// The throttling engine with a real in-memory database: cases of one system with an exact, a `?`
// and a `*` system key together (the per-system index must merge them by priority, so a system's
// own cases never hide the built-in ones), and the built-in sign-in cases.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { loadConfig } from "../../../src/config.ts";
import { createLogger } from "../../../src/core/log.ts";
import { Metrics } from "../../../src/core/metrics.ts";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { casesRepo } from "../../../src/store/throttle.ts";
import { BUILT_IN_CASES, parseCase, type Subject } from "../../../src/throttle/cases.ts";
import { Throttle } from "../../../src/throttle/throttle.ts";

const HTTP = "HTTP Requests";
const SYS = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", OTHER = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
const AUTH = "/api/v/1/user/auth";

let db: Db;
let throttle: Throttle;

async function start(args: string[] = []) {
  throttle = new Throttle({ db, config: loadConfig(args, {}), log: createLogger("silent"), metrics: new Metrics(), nodeId: "n1" });
  await throttle.start();
}
beforeEach(async () => {
  db = await openDb({ url: ":memory:" });
  await migrate(db);
  await start();
});
afterEach(async () => { throttle.stop(); await db.close(); });

/** Stores a case and reloads, as the administration does. */
async function put(fields: Record<string, unknown>) {
  await casesRepo.put(db, parseCase(HTTP, { consumer: "?", limiter_type: "frequency", max_num: 1000, duration: 60, ...fields }));
  await throttle.reload();
}
const subject = (s: { systemKey?: string; resource?: string; email?: string; signIn?: boolean } = {}): Subject =>
  ({ systemKey: s.systemKey ?? SYS, resource: s.resource ?? AUTH, ip: "10.0.0.1", email: () => s.email ?? "a@b.co", signIn: s.signIn });
const winner = (s: Subject) => throttle.find(HTTP, s)?.c.row.case_name ?? null;
const ok = (s: Subject) => { const d = throttle.evaluate(HTTP, s); if (d instanceof Promise) throw new Error("no shared store here"); return d; };

describe("covers: whether any case can match a path", () => {
  test("the built-in cases name the sign-in routes only; a system's own case names its path; a reload changes the answer", async () => {
    expect(throttle.covers(HTTP, AUTH)).toBe(true);
    expect(throttle.covers(HTTP, "/admin/auth")).toBe(true);
    expect(throttle.covers(HTTP, `/api/v/2/devices/${SYS}/auth`)).toBe(true);
    expect(throttle.covers(HTTP, "/api/v/1/user/info")).toBe(false);
    await put({ case_name: "mine", system_key: SYS, resource: "/api/v/1/user/info", priority: 1 });
    // a case of one system: the path is covered for every caller, the system is decided later
    expect(throttle.covers(HTTP, "/api/v/1/user/info")).toBe(true);
    expect(winner(subject({ systemKey: OTHER, resource: "/api/v/1/user/info" }))).toBeNull();
    await put({ case_name: "everything", system_key: "*", resource: "*", priority: 2 });
    expect(throttle.covers(HTTP, "/api/v/1/anything/at/all")).toBe(true);
  });
});

describe("exact, ? and * cases of one system", () => {
  test("an exact case on another resource does not hide the built-in sign-in case", async () => {
    await put({ case_name: "mine", system_key: SYS, resource: "/api/v/1/user/info", priority: 1 });
    expect(winner(subject())).toBe("Block brute force auth");
    expect(winner(subject({ resource: "/api/v/1/user/info" }))).toBe("mine");
    expect([1, 2, 3, 4].map(() => ok(subject()).ok)).toEqual([true, true, true, false]);
  });

  test("an exact case on the sign-in resource: priority decides against the built-in ? case", async () => {
    await put({ case_name: "generous", system_key: SYS, resource: AUTH, priority: 300 });
    expect(winner(subject())).toBe("Block brute force auth");
    expect([1, 2, 3, 4].map(() => ok(subject()).ok)).toEqual([true, true, true, false]);
    await put({ case_name: "generous", system_key: SYS, resource: AUTH, priority: 100 });
    expect(winner(subject())).toBe("generous");
    expect(winner(subject({ systemKey: OTHER }))).toBe("Block brute force auth");
  });

  test("exact, ? and * cases together: the lowest priority number wins, whichever kind it is", async () => {
    const orders: [number, number, number, string, string][] = [
      // priorities of the exact, ? and * cases; the winner for the system, and for another system
      [10, 20, 30, "exact", "each"], [20, 10, 30, "each", "each"], [30, 20, 10, "all", "all"],
      [250, 240, 230, "Block brute force auth", "Block brute force auth"], [150, 240, 230, "exact", "Block brute force auth"],
    ];
    for (const [exact, each, all, mine, other] of orders) {
      await put({ case_name: "exact", system_key: SYS, resource: AUTH, priority: exact });
      await put({ case_name: "each", system_key: "?", resource: AUTH, priority: each });
      await put({ case_name: "all", system_key: "*", resource: AUTH, priority: all });
      expect(winner(subject())).toBe(mine);
      expect(winner(subject({ systemKey: OTHER }))).toBe(other); // never the exact case
    }
  });

  test("a case that does not match the consumer lets the next one, the built-in, decide", async () => {
    await put({ case_name: "vip", system_key: SYS, resource: AUTH, consumer: "email=vip@b.co", max_num: -1, priority: 1 });
    await put({ case_name: "each", system_key: "?", resource: AUTH, consumer: "ip_address=10.9.9.9", max_num: 0, priority: 2 });
    expect(winner(subject({ email: "vip@b.co" }))).toBe("vip");
    expect(winner(subject())).toBe("Block brute force auth");
  });

  test("without the built-in cases the generic ones still apply to a system with exact cases", async () => {
    throttle.stop();
    await start(["--enable-default-throttlers", "false"]);
    await put({ case_name: "mine", system_key: SYS, resource: "/elsewhere", priority: 1 });
    expect(winner(subject())).toBeNull();
    await put({ case_name: "each", system_key: "?", resource: AUTH, priority: 500 });
    expect(winner(subject())).toBe("each");
  });
});

describe("built-in sign-in cases", () => {
  test("one bucket per system and consumer; other consumers unaffected", () => {
    expect([1, 2, 3, 4].map(() => ok(subject()).ok)).toEqual([true, true, true, false]);
    expect(ok(subject({ email: "other@b.co" })).ok).toBe(true);
    expect(ok(subject({ systemKey: OTHER })).ok).toBe(true);
  });

  test("device, developer and webhook cases match sign-ins only", () => {
    const device = `/api/v/2/devices/${SYS}/auth`;
    expect(winner(subject({ resource: device }))).toBeNull();
    expect(winner(subject({ resource: device, signIn: true }))).toBe("Block brute force device auth");
    expect(winner(subject({ resource: "/admin/auth", systemKey: "", signIn: true }))).toBe("Block brute force developer auth");
    expect(winner(subject({ resource: `/api/v/4/webhook/execute/${SYS}/hook`, signIn: true }))).toBe("Block brute force webhook basic auth");
    expect(winner(subject({ resource: `/api/v/4/webhook/execute/${SYS}/hook/more/path`, signIn: true }))).toBe("Block brute force webhook basic auth");
    expect(winner(subject({ resource: `/api/v/4/webhook/execute/${SYS}/hook` }))).toBeNull();
    // developers sign in to the platform: one bucket per email whatever the system
    const dev = (systemKey: string) => subject({ resource: "/admin/auth", systemKey, email: "dev@b.co", signIn: true });
    expect([ok(dev("")), ok(dev(SYS)), ok(dev(OTHER)), ok(dev(""))].map((d) => d.ok)).toEqual([true, true, true, false]);
  });

  test("device, developer and webhook cases count failures only; a good sign-in clears them", () => {
    for (const resource of [`/api/v/2/devices/${SYS}/auth`, "/admin/auth", `/api/v/4/webhook/execute/${SYS}/hook`]) {
      const attempt = (email: string) => subject({ resource, email, signIn: true });
      for (let i = 0; i < 20; i++) {
        const d = ok(attempt("good@b.co"));
        expect(d.ok).toBe(true);
        d.settle!("succeeded");
      }
      const fail = () => { const d = ok(attempt("bad@b.co")); if (d.ok) d.settle!("failed"); return d; };
      expect([fail(), fail()].map((d) => d.ok)).toEqual([true, true]);
      const good = ok(attempt("bad@b.co"));
      good.settle!("succeeded"); // forgets the two failures
      expect([fail(), fail(), fail(), fail()].map((d) => d.ok)).toEqual([true, true, true, false]);
      const refused = ok(attempt("bad@b.co"));
      expect(refused).toMatchObject({ ok: false, retryAfterS: 60 });
      expect(ok(attempt("good@b.co")).ok).toBe(true);
    }
    // the user sign-in case of the spec counts every attempt
    expect(ok(subject()).settle).toBeUndefined();
  });

  test("listed rows carry only case fields", () => {
    expect(throttle.builtInRows().map((r) => r.case_name)).toEqual(BUILT_IN_CASES.map((c) => c.case_name));
    for (const r of throttle.builtInRows()) expect(Object.keys(r)).not.toContain("counts");
  });
});

describe("refusals in the log", () => {
  test("a refusal is logged at warn with throttler, case, system and address; a loop of them once a minute", async () => {
    const lines: Record<string, unknown>[] = [];
    throttle.stop();
    throttle = new Throttle({ db, config: loadConfig([], {}), log: createLogger("info", {}, (l) => lines.push(JSON.parse(l))), metrics: new Metrics(), nodeId: "n1" });
    await throttle.start();
    await put({ case_name: "none", system_key: SYS, resource: "/api/v/1/user/info", max_num: 0, priority: 1 });
    expect(ok(subject({ resource: "/api/v/1/user/info" })).ok).toBe(false);
    expect(ok(subject({ resource: "/api/v/1/user/info" })).ok).toBe(false);
    expect(ok(subject({ resource: "/api/v/1/user/info", systemKey: OTHER })).ok).toBe(true);
    expect(ok(subject({ resource: "/api/v/1/user/info" })).ok).toBe(false);
    const throttled = lines.filter((l) => l.msg === "throttled");
    expect(throttled).toEqual([expect.objectContaining({ level: "warn", throttler: HTTP, case: "none", systemKey: SYS, ip: "10.0.0.1", resource: "/api/v/1/user/info" })]);
    expect(JSON.stringify(lines)).not.toContain("a@b.co");
  });
});
