// Limiters: the local token bucket and in-flight counter, and the shared
// fixed window on a real redis-server (started here on a free port), including its fallback.
import { afterAll, describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { createLogger } from "../../../src/core/log.ts";
import { InFlight, LOCKOUT_BASE_MS, Lockouts, SharedStore, TokenBuckets } from "../../../src/throttle/limiters.ts";
import { available, hasCommand } from "../services.ts";

describe("Lockouts", () => {
  const W = 600_000; // the window, and the longest lockout
  const fail = (l: Lockouts, key: string, now: number) => { expect(l.attempt(key, 3, now)).toBe(0); return l.settle(key, "failed", 3, W, now); };
  test("only failures count: good sign-ins never lock out, and clear the failures before them", () => {
    const l = new Lockouts();
    for (let i = 0; i < 50; i++) { expect(l.attempt("k", 3, i)).toBe(0); l.settle("k", "succeeded", 3, W, i); }
    expect([fail(l, "k", 100), fail(l, "k", 101)]).toEqual([0, 0]);
    expect(l.attempt("k", 3, 102)).toBe(0);
    l.settle("k", "succeeded", 3, W, 102); // clears the two failures
    expect([fail(l, "k", 103), fail(l, "k", 104)]).toEqual([0, 0]);
    expect(fail(l, "k", 105)).toBe(LOCKOUT_BASE_MS); // the third failure in a row locks out
    expect(l.attempt("k", 3, 106)).toBe(60); // right key or not: seconds to wait
    expect(l.attempt("other", 3, 106)).toBe(0);
  });
  test("each lockout doubles, up to the window; a quiet window forgets", () => {
    const l = new Lockouts();
    let t = 0;
    const lockout = () => { fail(l, "k", t); fail(l, "k", t); const ms = fail(l, "k", t); t += ms; return ms; };
    expect([lockout(), lockout(), lockout(), lockout(), lockout(), lockout()]).toEqual([60_000, 120_000, 240_000, 480_000, W, W]);
    t += W + 1; // a quiet window after the lockout ended
    expect(lockout()).toBe(60_000);
    expect([fail(l, "k", t), fail(l, "k", t + W + 1)]).toEqual([0, 0]); // failures a window apart do not add up
    expect(fail(l, "k", t + W + 2)).toBe(0);
  });
  test("attempts under way count until answered: parallel guesses cannot pass the limit", () => {
    const l = new Lockouts();
    expect([l.attempt("k", 3, 0), l.attempt("k", 3, 0), l.attempt("k", 3, 0)]).toEqual([0, 0, 0]);
    expect(l.attempt("k", 3, 0)).toBe(1);
    l.settle("k", "other", 3, W, 1); // a bad body: neither failure nor success
    expect(l.attempt("k", 3, 1)).toBe(0);
    for (let i = 0; i < 3; i++) l.settle("k", "failed", 3, W, 2);
    expect(l.attempt("k", 3, 3)).toBe(60);
  });
});

describe("TokenBuckets", () => {
  test("starts full, refills one token every duration/capacity", () => {
    const b = new TokenBuckets();
    const t0 = 1_000_000;
    expect([1, 2, 3, 4].map(() => b.take("k", 3, 30, t0).ok)).toEqual([true, true, true, false]);
    expect(b.take("k", 3, 30, t0).retryAfterS).toBe(10);
    expect(b.take("k", 3, 30, t0 + 9_999).ok).toBe(false);
    expect(b.take("k", 3, 30, t0 + 10_000).ok).toBe(true);
    expect(b.take("k", 3, 30, t0 + 10_000).ok).toBe(false);
    expect(b.take("k", 3, 30, t0 + 1_000_000).ok).toBe(true); // never more than capacity
    expect(b.take("k", 3, 30, t0 + 1_000_000).ok).toBe(true);
    expect(b.take("k", 3, 30, t0 + 1_000_000).ok).toBe(true);
    expect(b.take("k", 3, 30, t0 + 1_000_000).ok).toBe(false);
  });
  test("bounded: the oldest key goes, and comes back full", () => {
    const b = new TokenBuckets(2);
    b.take("a", 1, 60, 0); b.take("b", 1, 60, 0); b.take("c", 1, 60, 0);
    expect(b.size).toBe(2);
    expect(b.take("b", 1, 60, 0).ok).toBe(false); // kept, still empty
    expect(b.take("a", 1, 60, 0).ok).toBe(true); // forgotten, so full again
  });
});

describe("InFlight", () => {
  test("refuses above max, gives back once", () => {
    const f = new InFlight();
    const r1 = f.acquire("k", 2)!, r2 = f.acquire("k", 2)!;
    expect(f.acquire("k", 2)).toBeNull();
    expect(f.count("k")).toBe(2);
    r1(); r1();
    expect(f.count("k")).toBe(1);
    expect(f.acquire("k", 2)).not.toBeNull();
    r2();
  });
});

async function freePort(): Promise<number> {
  return new Promise((res) => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = (s.address() as { port: number }).port; s.close(() => res(p)); }); });
}

(available("redis-server", hasCommand("redis-server")) ? describe : describe.skip)("SharedStore on redis-server", () => {
  const log = createLogger("error");
  let proc: ReturnType<typeof Bun.spawn> | null = null;
  let port = 0;
  const startRedis = async () => {
    proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore", stderr: "ignore" });
    for (let i = 0; i < 200; i++) {
      try { const s = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }); s.end(); return; } catch { await Bun.sleep(25); }
    }
    throw new Error("redis-server did not start");
  };
  const stopRedis = async () => { proc?.kill(9); await proc?.exited; proc = null; };
  afterAll(stopRedis);

  test("fixed window across two stores, unavailable while Redis is down, back after", async () => {
    port = await freePort();
    await startRedis();
    const news: string[] = [];
    const a = new SharedStore(`redis://127.0.0.1:${port}`, log, (from) => news.push(`a:${from}`), "node-a");
    const b = new SharedStore(`redis://127.0.0.1:${port}`, log, (from) => news.push(`b:${from}`), "node-b");
    await a.start(); await b.start();
    expect(a.available && b.available).toBe(true);
    const key = `k${Date.now()}`;
    expect([await a.hit(key, 3, 1), await b.hit(key, 3, 1), await a.hit(key, 3, 1), await b.hit(key, 3, 1)]).toEqual([true, true, true, false]);
    await Bun.sleep(1100);
    expect(await a.hit(key, 3, 1)).toBe(true); // a new window

    await a.announce();
    for (let i = 0; i < 50 && !news.includes("b:node-a"); i++) await Bun.sleep(20);
    expect(news).toContain("b:node-a");
    expect(news).not.toContain("a:node-a"); // a node ignores its own news

    await stopRedis();
    expect(await a.hit(key, 3, 1)).toBeNull();
    expect(a.available).toBe(false);
    await startRedis();
    for (let i = 0; i < 100 && !a.available; i++) await Bun.sleep(50);
    expect(a.available).toBe(true);
    expect(await a.hit(`${key}x`, 1, 10)).toBe(true);
    a.stop(); b.stop();
  }, 20_000);

  test("lockouts shared by two stores: failures add up across nodes, a good sign-in clears them", async () => {
    if (!proc) { port = await freePort(); await startRedis(); }
    const a = new SharedStore(`redis://127.0.0.1:${port}`, log, () => {}, "node-a");
    const b = new SharedStore(`redis://127.0.0.1:${port}`, log, () => {}, "node-b");
    await a.start(); await b.start();
    const key = `lock${Date.now()}`;
    expect([await a.failed(key, 3, 1000), await b.failed(key, 3, 1000)]).toEqual([0, 0]);
    await a.succeeded(key);
    expect([await b.failed(key, 3, 1000), await a.failed(key, 3, 1000)]).toEqual([0, 0]); // counted afresh
    expect(await b.failed(key, 3, 1000)).toBe(1000); // the lockout is capped by the window here
    expect(await a.lockedFor(key)).toBeGreaterThan(0);
    expect(await a.lockedFor(`${key}-other`)).toBe(0);
    await Bun.sleep(1100);
    expect(await b.lockedFor(key)).toBe(0);
    a.stop(); b.stop();
  }, 20_000);
});
