// Locks in Redis (RedisLocks) on a real redis-server: the backend contract on one node; two nodes
// (two links, two RedisLocks) excluding each other in request order; a node that stops renewing
// (it died) losing its lock once the lease ran out, and not before; a held lock kept past its
// lease by renewal; the counter pattern across two nodes (no lost update).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RedisCacheValues } from "../../../src/cluster/cacheValues.ts";
import { RedisLocks } from "../../../src/cluster/locks.ts";
import { SharedRedis } from "../../../src/cluster/redis.ts";
import { createLogger } from "../../../src/core/log.ts";
import { Locks } from "../../../src/domain/locks.ts";
import { lockContract, request, until } from "../domain/lock-contract.ts";
import { startRedis, type TestRedis } from "../redis.ts";
import { available, hasCommand } from "../services.ts";

(available("redis-server", hasCommand("redis-server")) ? describe : describe.skip)("RedisLocks on redis-server", () => {
  const log = createLogger("error");
  let redis: TestRedis;
  const links: SharedRedis[] = [];
  const nodes: RedisLocks[] = [];
  /** A node: its own link to Redis and its own RedisLocks. */
  const node = async (opts: { leaseMs?: number; renewMs?: number } = {}) => {
    const link = new SharedRedis(redis.url, log);
    const locks = new RedisLocks(link, log, opts);
    await link.start();
    locks.start();
    links.push(link);
    nodes.push(locks);
    return { link, locks };
  };
  let one: RedisLocks;
  beforeAll(async () => {
    redis = await startRedis();
    one = (await node()).locks;
  });
  afterAll(async () => {
    for (const n of nodes) n.stop();
    for (const l of links) l.stop();
    await redis?.stop();
  });

  lockContract(() => one, 40);

  test("two nodes exclude each other, in request order", async () => {
    const a = (await node()).locks, b = (await node()).locks;
    const order: string[] = [];
    const x = request(a, "sys:two", "exclusive");
    expect(await until(() => x.granted)).toBe(true);
    const waiters = [];
    for (let i = 0; i < 6; i++) {
      const r = request(i % 2 ? a : b, "sys:two", "exclusive");
      r.p.then(() => order.push(`w${i}`));
      waiters.push(r);
      await Bun.sleep(20);
    }
    await Bun.sleep(100);
    expect(order).toEqual([]);
    await x.grant!.release();
    for (let i = 0; i < 6; i++) {
      expect(await until(() => order.length === i + 1)).toBe(true);
      await Bun.sleep(30);
      expect(order.length).toBe(i + 1); // one holder at a time
      await waiters[i]!.grant!.release();
    }
    expect(order).toEqual(["w0", "w1", "w2", "w3", "w4", "w5"]);
    // the queue is gone from Redis once empty
    const probe = (await node()).link;
    expect(await probe.send("EXISTS", ["outpost:lockq:sys:two", "outpost:lockm:sys:two"])).toBe(0);
  });

  test("a node that died: its lock goes when its lease runs out, not before", async () => {
    const dead = await node({ leaseMs: 600, renewMs: 100 });
    const alive = (await node({ leaseMs: 600, renewMs: 100 })).locks;
    const held = request(dead.locks, "sys:lease", "exclusive");
    expect(await until(() => held.granted)).toBe(true);
    dead.locks.stop(); // no more renewals, and it never releases
    const t0 = Date.now();
    const w = request(alive, "sys:lease", "exclusive");
    expect(await until(() => w.granted, 3_000)).toBe(true);
    const waited = Date.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(450);
    expect(waited).toBeLessThan(2_000);
    await w.grant!.release();
  });

  test("renewal keeps a held lock past its lease; its release wakes the waiter at once", async () => {
    const holder = (await node({ leaseMs: 400, renewMs: 100 })).locks;
    const other = (await node({ leaseMs: 400, renewMs: 100 })).locks;
    const h = request(holder, "sys:renew", "exclusive");
    expect(await until(() => h.granted)).toBe(true);
    const w = request(other, "sys:renew", "exclusive");
    await Bun.sleep(1_500); // several leases
    expect(w.granted).toBe(false);
    // the waiter has backed off to its longest poll; the release's message wakes it
    const t0 = Date.now();
    await h.grant!.release();
    expect(await until(() => w.granted)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(400);
    await w.grant!.release();
  });

  test("the counter pattern across two nodes: 20 runs, no lost update", async () => {
    const a = await node(), b = await node();
    const caches = [new RedisCacheValues(a.link), new RedisCacheValues(b.link)];
    const locks = [new Locks(a.locks), new Locks(b.locks)];
    const c = { systemKey: "sys", id: `counter-${Date.now()}`, ttlMs: 60_000 };
    await Promise.all(Array.from({ length: 20 }, async (_, i) => {
      const run = locks[i % 2]!.session("sys"), cache = caches[i % 2]!;
      await run.lock("counter", "svc", "exclusive");
      const v = await cache.get(c, "n");
      await Bun.sleep(2); // widen the window a lost update would need
      await cache.set(c, [["n", String((v === undefined ? 0 : Number(v)) + 1)]], false);
      await run.unlock("counter", "svc", "exclusive");
      await run.close();
    }));
    expect(await caches[0]!.get(c, "n")).toBe("20");
  });

  test("Redis out of reach: a request fails with SHARED_STORE_UNAVAILABLE", async () => {
    const n = await node();
    const port = redis.port;
    await redis.stop();
    await Bun.sleep(100);
    const r = request(n.locks, "sys:down", "exclusive");
    expect(await until(() => r.error !== null)).toBe(true);
    expect((r.error as { kind: { code: number } }).kind.code).toBe(407);
    redis = await startRedis(port);
    expect(await until(() => links.every((l) => l.available), 5_000)).toBe(true);
    const ok = request(n.locks, "sys:down", "exclusive");
    expect(await until(() => ok.granted)).toBe(true);
    await ok.grant!.release();
  });
});
