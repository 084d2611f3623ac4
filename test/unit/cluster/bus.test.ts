// The nodes' bus (ClusterBus) on a real redis-server: requests and replies between two nodes,
// messages for every node, and large messages (relayed bodies of MBs), which are parked under a
// key of their own: the channel carries only their names, nothing is left behind, the order of a
// node's messages is kept, and a subscriber whose pub/sub buffer is bounded far below the bodies'
// size keeps its link.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { CLUSTER_CHANNEL, ClusterBus, INLINE_MAX } from "../../../src/cluster/bus.ts";
import { createLogger } from "../../../src/core/log.ts";
import { startRedis, type TestRedis } from "../redis.ts";
import { available, hasCommand } from "../services.ts";

(available("redis-server", hasCommand("redis-server")) ? describe : describe.skip)("ClusterBus on redis-server", () => {
  let redis: TestRedis;
  let raw: Redis;
  let watcher: Redis;
  /** the length of every publish on the channel, as another subscriber sees it */
  const published: number[] = [];
  const logs: string[] = [];
  const buses: ClusterBus[] = [];
  const node = async (id: string) => {
    const bus = new ClusterBus(redis.url, id, createLogger("info", { node: id }, (line) => logs.push(line)));
    await bus.start();
    buses.push(bus);
    return bus;
  };
  let a: ClusterBus;
  let b: ClusterBus;
  let c: ClusterBus;

  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
    // far below the bodies sent here: a subscriber sent them through the channel would be dropped
    await raw.config("SET", "client-output-buffer-limit", "pubsub 2mb 1mb 60");
    watcher = new Redis(redis.url);
    await watcher.subscribe(CLUSTER_CHANNEL);
    watcher.on("message", (_ch: string, text: string) => published.push(text.length));
    a = await node("a");
    b = await node("b");
    c = await node("c");
  });
  afterAll(async () => {
    for (const bus of buses) bus.stop();
    raw?.disconnect();
    watcher?.disconnect();
    await redis?.stop();
  });

  test("a request and its reply, small and large, between two nodes", async () => {
    b.serve("echo", async (body: { text: string; answer: number }) => ({ got: body.text.length, big: "r".repeat(body.answer) }));
    expect(await a.request("b", "echo", { text: "hi", answer: 3 }, 5_000)).toEqual({ got: 2, big: "rrr" });
    published.length = 0;
    const big = await a.request<{ got: number; big: string }>("b", "echo", { text: "q".repeat(3 * 1024 * 1024), answer: 4 * 1024 * 1024 }, 10_000);
    expect(big.got).toBe(3 * 1024 * 1024);
    expect(big.big.length).toBe(4 * 1024 * 1024);
    await Bun.sleep(50);
    expect(published.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...published)).toBeLessThan(INLINE_MAX);
    expect(await raw.keys("outpost:cluster:parked:*")).toEqual([]);
  });

  test("a node that answers with an error: the asker's promise fails with it", async () => {
    b.serve("fails", async () => { throw new Error("no such thing"); });
    await expect(a.request("b", "fails", {}, 5_000)).rejects.toThrow("no such thing");
    await expect(a.request("nobody", "echo", { text: "", answer: 0 }, 200)).rejects.toThrow(/did not answer/);
  });

  test("several large messages at once, mixed with small ones: all arrive, in order, and the links stay up", async () => {
    const got: number[] = [];
    b.on("seq", (body: { n: number }) => got.push(body.n));
    for (let n = 0; n < 12; n++) a.send({ kind: "seq", to: "b", body: { n, pad: n % 3 === 1 ? "p".repeat(3 * 1024 * 1024) : "" } });
    // and in later turns of the event loop, between and after them
    await Bun.sleep(0);
    for (let n = 12; n < 16; n++) { a.send({ kind: "seq", to: "b", body: { n, pad: n === 13 ? "p".repeat(2 * 1024 * 1024) : "" } }); await Bun.sleep(0); }
    const t0 = Date.now();
    while (got.length < 16 && Date.now() - t0 < 10_000) await Bun.sleep(20);
    expect(got).toEqual([...Array(16).keys()]);
    expect(a.available && b.available).toBe(true);
    expect(logs.join("\n")).not.toMatch(/Redis link lost/);
    expect(await raw.keys("outpost:cluster:parked:*")).toEqual([]);
  });

  test("a large message for every node reaches each of the others, and not its sender", async () => {
    const seen: string[] = [];
    for (const [name, bus] of [["a", a], ["b", b], ["c", c]] as const) bus.on("all", (body: { pad: string }) => seen.push(`${name}:${body.pad.length}`));
    a.send({ kind: "all", body: { pad: "z".repeat(INLINE_MAX * 2) } });
    const t0 = Date.now();
    while (seen.length < 2 && Date.now() - t0 < 5_000) await Bun.sleep(20);
    await Bun.sleep(50);
    expect(seen.sort()).toEqual([`b:${INLINE_MAX * 2}`, `c:${INLINE_MAX * 2}`]);
  });

  test("a parked message that expired before it was read is dropped with a warning; the messages after it still arrive", async () => {
    const got: number[] = [];
    c.on("gone", (body: { n: number }) => got.push(body.n));
    // what another node publishes for a message parked under a key that has since expired
    await raw.publish(CLUSTER_CHANNEL, JSON.stringify([{ kind: "gone", from: "x", to: "c", parked: "outpost:cluster:parked:expired" }]));
    a.send({ kind: "gone", to: "c", body: { n: 2 } });
    const t0 = Date.now();
    while (!got.includes(2) && Date.now() - t0 < 5_000) await Bun.sleep(20);
    expect(got).toEqual([2]);
    expect(logs.join("\n")).toMatch(/parked message expired before it was read/);
  });
});
