// What every lock backend (LocalLocks, RedisLocks) must do: exclusive and shared grants, first
// come first served with shared requests granted together, no writer starved, a bounded wait,
// a request given up leaving the queue. Used by domain/locks.test.ts and cluster/locks.test.ts.
import { expect, test } from "bun:test";
import type { LockBackend, LockGrant, LockMode } from "../../../src/domain/locks.ts";

let seq = 0;

/** A request: its promise, whether it was granted yet, how to give it up. */
export function request(b: LockBackend, key: string, mode: LockMode, waitMs = 10_000) {
  const ac = new AbortController();
  const r = { granted: false, grant: null as LockGrant | null, error: null as unknown, ac, p: null as unknown as Promise<LockGrant> };
  r.p = b.acquire({ key, mode, waitMs, signal: ac.signal, what: `lock '${key}'` });
  r.p.then((g) => { r.granted = true; r.grant = g; }, (e) => { r.error = e; });
  return r;
}

/** Until `pred` holds (true) or `ms` passed (false). */
export async function until(pred: () => boolean, ms = 3_000) {
  const end = Date.now() + ms;
  while (!pred()) { if (Date.now() > end) return false; await Bun.sleep(5); }
  return true;
}

/** `settleMs`: how long a backend may take to answer a request it can grant (a round trip). */
export function lockContract(backend: () => LockBackend, settleMs: number) {
  const key = () => `sys:lock${seq++}-${Date.now()}`;
  const settle = () => Bun.sleep(settleMs);

  test("exclusive: one holder at a time", async () => {
    const b = backend(), k = key();
    const a = request(b, k, "exclusive");
    expect(await until(() => a.granted)).toBe(true);
    const c = request(b, k, "exclusive");
    await settle();
    expect(c.granted).toBe(false);
    await a.grant!.release();
    expect(await until(() => c.granted)).toBe(true);
    await c.grant!.release();
    await c.grant!.release(); // twice: nothing more
  });

  test("shared holders together; an exclusive request waits for all of them", async () => {
    const b = backend(), k = key();
    const s1 = request(b, k, "shared"), s2 = request(b, k, "shared");
    expect(await until(() => s1.granted && s2.granted)).toBe(true);
    const x = request(b, k, "exclusive");
    await settle();
    expect(x.granted).toBe(false);
    await s1.grant!.release();
    await settle();
    expect(x.granted).toBe(false);
    await s2.grant!.release();
    expect(await until(() => x.granted)).toBe(true);
    await x.grant!.release();
  });

  test("first come first served: shared requests in a row granted together, a waiting writer not passed", async () => {
    const b = backend(), k = key();
    const order: string[] = [];
    const x1 = request(b, k, "exclusive");
    expect(await until(() => x1.granted)).toBe(true);
    const queue: [string, ReturnType<typeof request>][] = [];
    for (const [name, mode] of [["x2", "exclusive"], ["s3", "shared"], ["s4", "shared"], ["x5", "exclusive"], ["s6", "shared"]] as const) {
      const r = request(b, k, mode);
      r.p.then(() => order.push(name), () => {});
      queue.push([name, r]);
      await settle(); // each request reaches the queue before the next
    }
    const r = Object.fromEntries(queue);
    expect(order).toEqual([]);
    await x1.grant!.release();
    expect(await until(() => order.length === 1)).toBe(true);
    await settle();
    expect(order).toEqual(["x2"]);
    await r.x2!.grant!.release();
    expect(await until(() => order.length === 3)).toBe(true);
    await settle();
    expect(order.slice(1).sort()).toEqual(["s3", "s4"]); // together, and s6 not with them (x5 is ahead)
    await r.s3!.grant!.release();
    await settle();
    expect(order.length).toBe(3);
    await r.s4!.grant!.release();
    expect(await until(() => order.length === 4)).toBe(true);
    expect(order[3]).toBe("x5");
    await r.x5!.grant!.release();
    expect(await until(() => order.length === 5)).toBe(true);
    await r.s6!.grant!.release();
  });

  test("a shared request behind a waiting writer waits, though readers hold the lock", async () => {
    const b = backend(), k = key();
    const s1 = request(b, k, "shared");
    expect(await until(() => s1.granted)).toBe(true);
    const x = request(b, k, "exclusive");
    await settle();
    const s2 = request(b, k, "shared");
    await settle();
    expect([x.granted, s2.granted]).toEqual([false, false]);
    await s1.grant!.release();
    expect(await until(() => x.granted)).toBe(true);
    await settle();
    expect(s2.granted).toBe(false);
    await x.grant!.release();
    expect(await until(() => s2.granted)).toBe(true);
    await s2.grant!.release();
  });

  test("a wait ends with LOCK_TIMEOUT and leaves the queue", async () => {
    const b = backend(), k = key();
    const a = request(b, k, "exclusive");
    expect(await until(() => a.granted)).toBe(true);
    const t0 = Date.now();
    const late = request(b, k, "exclusive", 300);
    expect(await until(() => late.error !== null)).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect((late.error as { kind: { code: number } }).kind.code).toBe(406);
    expect(String((late.error as Error).message)).toContain("was not granted within");
    const next = request(b, k, "exclusive");
    await a.grant!.release();
    expect(await until(() => next.granted)).toBe(true); // the one that gave up is not in the way
    expect(late.granted).toBe(false);
    await next.grant!.release();
  });

  test("a request given up (its run ended) leaves the queue", async () => {
    const b = backend(), k = key();
    const a = request(b, k, "exclusive");
    expect(await until(() => a.granted)).toBe(true);
    const gone = request(b, k, "exclusive");
    const next = request(b, k, "shared");
    await settle();
    gone.ac.abort();
    expect(await until(() => gone.error !== null)).toBe(true);
    await a.grant!.release();
    expect(await until(() => next.granted)).toBe(true);
    expect(gone.granted).toBe(false);
    await next.grant!.release();
    // given up before it was asked: refused at once
    const ac = new AbortController();
    ac.abort();
    await expect(b.acquire({ key: k, mode: "exclusive", waitMs: 1000, signal: ac.signal, what: "x" })).rejects.toThrow();
  });

  test("locks are apart by key", async () => {
    const b = backend(), k1 = key(), k2 = key();
    const a = request(b, k1, "exclusive"), c = request(b, k2, "exclusive");
    expect(await until(() => a.granted && c.granted)).toBe(true);
    await a.grant!.release();
    await c.grant!.release();
  });
}
