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
import { EdgeWrites } from "../../../../src/sync/platform/writes.ts";

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
