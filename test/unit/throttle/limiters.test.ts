// Limiters: the local token bucket and in-flight counter, and the shared
// fixed window on a real redis-server (started here on a free port), including its fallback.
import { afterAll, describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { createLogger } from "../../../src/core/log.ts";
import { InFlight, SharedStore, TokenBuckets } from "../../../src/throttle/limiters.ts";
import { available, hasCommand } from "../services.ts";

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
  test("a token given back is there again, never above capacity", () => {
    const b = new TokenBuckets();
    const t0 = 1_000_000;
    expect([1, 2].map(() => b.take("k", 2, 600, t0).ok)).toEqual([true, true]);
    b.give("k", 2);
    expect(b.take("k", 2, 600, t0).ok).toBe(true);
    expect(b.take("k", 2, 600, t0).ok).toBe(false);
    b.give("k", 2); b.give("k", 2); b.give("k", 2);
    expect([1, 2, 3].map(() => b.take("k", 2, 600, t0).ok)).toEqual([true, true, false]);
    b.give("unknown", 2);
    expect(b.size).toBe(1);
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
    expect([await a.hit(key, 3, 1), await b.hit(key, 3, 1), await a.hit(key, 3, 1)]).toEqual([true, true, true]);
    await b.refund(key);
    expect([await a.hit(key, 3, 1), await b.hit(key, 3, 1)]).toEqual([true, false]); // one hit given back
    await Bun.sleep(1100);
    await b.refund(key); // the window ended: nothing to give back, no credit for the next one
    expect([await a.hit(key, 3, 1), await a.hit(key, 3, 1), await a.hit(key, 3, 1), await a.hit(key, 3, 1)]).toEqual([true, true, true, false]);
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
});
