// The links' events in the sync hub's batched writes: nothing is written before a flush, a flush
// writes them all in order, each edge's log keeps its newest LINK_EVENTS_KEPT (trimmed as they are
// written), an event of an edge deleted meanwhile is dropped, and deleting an edge or its system
// deletes its events. Then the hub's own events: connected, refused, replaced, closed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, start } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import { loadConfig } from "../../../../src/config.ts";
import { LINK_EVENTS_KEPT, linkEventsRepo } from "../../../../src/store/linkEvents.ts";
import type { HubDeps } from "../../../../src/sync/platform/types.ts";
import type { EdgeSession } from "../../../../src/sync/platform/session.ts";
import { EdgeWrites } from "../../../../src/sync/platform/writes.ts";
import type { Executor } from "../../../../src/store/db.ts";

let app: App;
let dev: Principal;
let sk: string;

beforeAll(async () => {
  app = await start(loadConfig(["--db", ":memory:", "--http-port", "0", "--log-level", "silent"]));
  const s = app.services;
  dev = (await s.tokens.resolve((await s.developers.register({ email: "links@example.com", password: "pw" })).dev_token))!;
  sk = (await s.systems.create(dev, { name: "links" })).system_key;
});
afterAll(() => app.stop());

const count = async (sys: string, edge: string) => Number((await app.db.get<{ n: number }>(`SELECT count(*) AS n FROM edge_link_events WHERE system_key = ? AND edge_name = ?`, [sys, edge]))!.n);
const writes = () => new EdgeWrites({ db: app.db, log: { warn() {} } } as unknown as HubDeps);

describe("link events in the batched writes", () => {
  test("written at the flush, in order, each edge trimmed to its newest", async () => {
    await app.services.edges.create(dev, sk, "trim-a", { token: "trim-a-token" });
    await app.services.edges.create(dev, sk, "trim-b", { token: "trim-b-token" });
    const w = writes();
    for (let i = 0; i < LINK_EVENTS_KEPT + 30; i++) w.linkEvent(sk, "trim-a", "connected", { n: i });
    for (let i = 0; i < 3; i++) w.linkEvent(sk, "trim-b", "refused", { n: i });
    expect(await count(sk, "trim-a")).toBe(0);
    await w.flush();
    expect(await count(sk, "trim-a")).toBe(LINK_EVENTS_KEPT);
    expect(await count(sk, "trim-b")).toBe(3);
    const a = await linkEventsRepo.latest(app.db, sk, "trim-a", 200);
    expect(a.map((e) => JSON.parse(e.detail).n)).toEqual(Array.from({ length: LINK_EVENTS_KEPT }, (_, i) => LINK_EVENTS_KEPT + 29 - i));
    expect(a[0]!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    // a second batch trims again
    w.linkEvent(sk, "trim-a", "disconnected", { n: "last" });
    await w.flush();
    expect(await count(sk, "trim-a")).toBe(LINK_EVENTS_KEPT);
    expect(JSON.parse((await linkEventsRepo.latest(app.db, sk, "trim-a", 1))[0]!.detail)).toEqual({ n: "last" });
  });

  test("an unknown or forgotten edge's events are not written; deleting the edge or its system deletes them", async () => {
    const w = writes();
    w.linkEvent(sk, "no-such-edge", "refused", {});
    await app.services.edges.create(dev, sk, "gone", { token: "gone-token" });
    w.linkEvent(sk, "gone", "connected", {});
    w.forget(sk, "gone");
    await w.flush();
    expect(await count(sk, "no-such-edge")).toBe(0);
    expect(await count(sk, "gone")).toBe(0);
    w.linkEvent(sk, "gone", "connected", {});
    await w.flush();
    expect(await count(sk, "gone")).toBe(1);
    await app.services.edges.remove(dev, sk, "gone");
    expect(await count(sk, "gone")).toBe(0);

    const other = (await app.services.systems.create(dev, { name: "links-2" })).system_key;
    await app.services.edges.create(dev, other, "e", { token: "e-token-1" });
    w.linkEvent(other, "e", "connected", {});
    await w.flush();
    expect(await count(other, "e")).toBe(1);
    await app.services.systems.remove(dev, other);
    expect(await count(other, "e")).toBe(0);
  });
});

describe("a herd's hellos in the batched writes", () => {
  test("each edge's record as its hello said, in one statement per system and the same changes", async () => {
    const names = Array.from({ length: 6 }, (_, i) => `herd-${i}`);
    for (const n of names) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    await app.db.run(`UPDATE edges SET first_talked = 1000 WHERE system_key = ? AND name = ?`, [sk, "herd-0"]);
    // the statements the writes run, counted
    const updates: string[] = [];
    const counted = (tx: Executor) => new Proxy(tx, { get(t, k) {
      if (k === "run") return (sql: string, args: unknown[]) => { if (sql.startsWith("UPDATE edges")) updates.push(sql); return t.run(sql, args); };
      const v = (t as unknown as Record<string | symbol, unknown>)[k];
      return typeof v === "function" ? v.bind(t) : v;
    } });
    let txs = 0;
    const db = { tx: <T>(fn: (tx: Executor) => Promise<T>) => { txs++; return app.db.tx((tx) => fn(counted(tx))); } };
    const w = new EdgeWrites({ db, log: { warn() {} } } as unknown as HubDeps);
    const session = (name: string, cursor: number) => ({ edge: { system_key: sk, name }, cursor }) as unknown as EdgeSession;
    const said = (version: string) => ({ is_connected: 1, last_seen_version: version, last_seen_os: "linux", last_seen_architecture: "arm64" });
    names.forEach((n, i) => w.welcomed(session(n, 7), { ...said(i < 4 ? "1.0" : "2.0"), ...(i ? { first_talked: 2000 } : {}) }, "node-a", true));
    // an edge's replaced link and its new one: the later counts
    w.welcomed(session("herd-5", 9), { ...said("3.0"), first_talked: 2000 }, "node-b", true);
    for (const n of names) w.linkEvent(sk, n, "connected", {});
    await w.flush();
    const rows = await app.db.all<{ name: string; last_seen_version: string; cursor: number; node_id: string; is_connected: number; first_talked: number; last_talked: number }>(
      `SELECT name, last_seen_version, cursor, node_id, is_connected, first_talked, last_talked FROM edges WHERE system_key = ? AND name LIKE 'herd-%' ORDER BY name`, [sk]);
    expect(rows.map((r) => [r.name, r.last_seen_version, r.cursor, r.node_id, r.is_connected, r.first_talked])).toEqual([
      ["herd-0", "1.0", 7, "node-a", 1, 1000], ["herd-1", "1.0", 7, "node-a", 1, 2000], ["herd-2", "1.0", 7, "node-a", 1, 2000],
      ["herd-3", "1.0", 7, "node-a", 1, 2000], ["herd-4", "2.0", 7, "node-a", 1, 2000], ["herd-5", "3.0", 9, "node-b", 1, 2000]]);
    expect(rows.every((r) => r.last_talked > 0)).toBe(true);
    // herd-0 (its first contact kept), herd-1..3, herd-4, herd-5's new link: the record and its
    // holder in one statement each
    expect(updates.length).toBe(4);
    expect(updates.every((u) => u.includes("node_id = ?, is_connected = 1"))).toBe(true);
    // and their link events in the same transaction
    expect(txs).toBe(1);
    expect(await count(sk, "herd-3")).toBe(1);
  });

  test("a transaction that held the loop long makes the next ones smaller; everything is written, in order", async () => {
    const names = Array.from({ length: 8 }, (_, i) => `slow-${i}`);
    for (const n of names) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    // each transaction holds the loop 30 ms more than its statements (a commit on a slow disk)
    const sizes: number[] = [];
    const db = { driver: "native", tx: <T>(fn: (tx: Executor) => Promise<T>) => app.db.tx(async (tx) => {
      let events = 0;
      const out = await fn(new Proxy(tx, { get(t, k) {
        if (k === "run") return (sql: string, args: unknown[]) => { if (sql.startsWith("INSERT INTO edge_link_events")) events++; return t.run(sql, args); };
        const v = (t as unknown as Record<string | symbol, unknown>)[k];
        return typeof v === "function" ? v.bind(t) : v;
      } }));
      sizes.push(events);
      for (const until = performance.now() + 30; performance.now() < until;) { /* held */ }
      return out;
    }) };
    const w = new EdgeWrites({ db, log: { warn() {} } } as unknown as HubDeps);
    for (let i = 0; i < LINK_EVENTS_KEPT; i++) for (const n of names) w.linkEvent(sk, n, "connected", { n: i });
    await w.flush();
    // 800 events: 500 at first, then what fits TX_TURN_MS
    expect(sizes[0]).toBe(500);
    expect(sizes.length).toBeGreaterThan(3);
    expect(Math.max(...sizes.slice(1))).toBeLessThan(500);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(names.length * LINK_EVENTS_KEPT);
    for (const n of names) {
      const got = await linkEventsRepo.latest(app.db, sk, n, 200);
      expect(got.map((e) => JSON.parse(e.detail).n)).toEqual(Array.from({ length: LINK_EVENTS_KEPT }, (_, i) => LINK_EVENTS_KEPT - 1 - i));
    }
  });
});

describe("a write that fails", () => {
  test("is tried again: nothing it held is lost, and what came meanwhile follows it", async () => {
    for (const n of ["retry-a", "retry-b"]) await app.services.edges.create(dev, sk, n, { token: `${n}-token` });
    // the database refuses the first two transactions (out of reach), then answers
    let refusals = 2, txs = 0;
    const db = { tx: <T>(fn: (tx: Executor) => Promise<T>) => { txs++; return refusals-- > 0 ? Promise.reject(new Error("connect timeout")) : app.db.tx(fn); } };
    const warned: unknown[] = [];
    const w = new EdgeWrites({ db, log: { warn(_m: string, f: unknown) { warned.push(f); } } } as unknown as HubDeps);
    const a = { edge: { system_key: sk, name: "retry-a" }, cursor: 4 } as unknown as EdgeSession;
    const b = { edge: { system_key: sk, name: "retry-b" }, cursor: 0 } as unknown as EdgeSession;
    w.acknowledged(a, true, [], "");
    w.linkEvent(sk, "retry-a", "connected", { n: 1 });
    await expect(w.flush()).rejects.toThrow("connect timeout");
    // meanwhile: a moves on, b is heard from, another event
    (a as { cursor: number }).cursor = 9;
    w.acknowledged(a, false, [], "");
    w.talked(b);
    w.linkEvent(sk, "retry-a", "disconnected", { n: 2 });
    const cursor = async (name: string) => Number((await app.db.get<{ cursor: number }>(`SELECT cursor FROM edges WHERE system_key = ? AND name = ?`, [sk, name]))!.cursor);
    // tried again by itself (the second try refused too, then a longer wait)
    const until = Date.now() + 5_000;
    while (Date.now() < until && (await cursor("retry-a")) !== 9) await new Promise((r) => setTimeout(r, 50));
    expect(await cursor("retry-a")).toBe(9);
    expect(txs).toBeGreaterThanOrEqual(3);
    expect(warned.length).toBeGreaterThanOrEqual(1);
    const talked = await app.db.get<{ last_talked: number }>(`SELECT last_talked FROM edges WHERE system_key = ? AND name = ?`, [sk, "retry-b"]);
    expect(Number(talked!.last_talked)).toBeGreaterThan(0);
    expect((await linkEventsRepo.latest(app.db, sk, "retry-a", 10)).map((e) => JSON.parse(e.detail).n)).toEqual([2, 1]);
  });
});

describe("the hub's link events", () => {
  const socket = (closed: { code?: number; reason?: string }[]) => ({ send() {}, close(code?: number, reason?: string) { closed.push({ code, reason }); } });
  const hello = (name: string, token: string, cursor = 0) => JSON.stringify({ t: "hello", systemKey: sk, edge: name, token, cursor, synced: false, incarnation: "", pingMs: 600_000, version: "9.9.9", os: "linux", arch: "arm64" });

  test("connected, refused, replaced by a newer link, closed by the edge", async () => {
    const hub = app.services.sync!;
    await app.services.edges.create(dev, sk, "live", { token: "live-token" });
    const closes: { code?: number; reason?: string }[] = [];
    const bad = socket(closes);
    hub.open(bad);
    await hub.message(bad, hello("live", "wrong-token"));
    expect(closes).toEqual([{ code: 4000, reason: "unknown edge or wrong token" }]);
    const first = socket([]), second = socket(closes);
    hub.open(first);
    await hub.message(first, hello("live", "live-token"));
    hub.open(second);
    await hub.message(second, hello("live", "live-token"));
    await hub.close(first, 4002, "replaced by a new connection");
    await hub.close(second, 1000, "edge stopping");
    const log = await hub.linkLog(sk, "live", 10);
    expect(log.map((e) => e.event)).toEqual(["disconnected", "connected", "disconnected", "connected", "refused"]);
    expect(log[4]!.detail).toEqual({ reason: "wrong token" });
    expect(log[3]!.detail).toMatchObject({ version: "9.9.9", os: "linux", arch: "arm64", snapshot: true });
    expect(typeof log[3]!.detail.node).toBe("string");
    expect(log[2]!.detail).toMatchObject({ cause: "replaced by a newer link", lasted_s: 0 });
    expect(log[0]!.detail).toMatchObject({ cause: "closed by the edge (edge stopping)" });
    // the limit counts from the newest
    expect((await hub.linkLog(sk, "live", 2)).map((e) => e.event)).toEqual(["disconnected", "connected"]);
  });
});
