// The sync hub's cost per change, not per edge: a change that wakes a fleet is read from the log
// once for all of its edges, and their acknowledgements and hellos are written together in a few
// transactions, yet what they acknowledged is what the records say once read, and a clean stop
// keeps it.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type App, start } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { loadConfig } from "../../../src/config.ts";
import { edgesRepo } from "../../../src/store/edges.ts";
import { changesRepo } from "../../../src/store/sync.ts";

const FLEET = 40;
const dir = mkdtempSync(join(tmpdir(), "outpost-hub-fleet-"));
let app: App;
let dev: Principal;
let sk: string;
let collectionID: string;

async function boot() {
  app = await start(loadConfig(["--db", `file:${join(dir, "db.sqlite")}`, "--http-port", "0", "--log-level", "silent", "--sync-compact-ms", "3600000"]));
}

beforeAll(async () => {
  await boot();
  const s = app.services;
  const reg = await s.developers.register({ email: "fleet@example.com", password: "pw" });
  dev = (await s.tokens.resolve(reg.dev_token))!;
  sk = (await s.systems.create(dev, { name: "fleet" })).system_key;
  collectionID = (await s.collections.createCollection(dev, { name: "f", appID: sk, columns: [{ name: "v", type: "int" }] })).collectionID as string;
});
afterAll(async () => { await app?.stop(); rmSync(dir, { recursive: true, force: true }); });

/** An edge played by a socket that acknowledges every batch and snapshot end at once. */
class FakeEdge {
  got: any[] = [];
  constructor(readonly name: string) {}
  readonly socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      this.got.push(m);
      const hub = app.services.sync!;
      if (m.t === "batch") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] }));
      if (m.t === "snapshot_end") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    },
    close: () => {},
  };
  async connect() {
    const hub = app.services.sync!;
    hub.open(this.socket);
    await hub.message(this.socket, JSON.stringify({ t: "hello", systemKey: sk, edge: this.name, token: `${this.name}-token`, cursor: 0, synced: false, pingMs: 600_000, version: "fake 1" }));
  }
  liveRows() { return this.got.filter((m) => m.t === "batch" && !m.snapshot).flatMap((m) => m.changes.filter((c: any) => c.type === "row")); }
}

const settle = async (pred: () => boolean | Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!(await pred())) { if (Date.now() > end) throw new Error("timed out"); await Bun.sleep(10); }
};

describe("a fleet on the sync hub", () => {
  const edges: FakeEdge[] = [];
  let acknowledged = 0;

  test("a fleet's snapshot ends are written together, a few transactions for all, and the records show them once read", async () => {
    for (let i = 0; i < FLEET; i++) {
      await app.services.edges.create(dev, sk, `e${i}`, { token: `e${i}-token` });
      await app.services.edges.changeTemplate(dev, sk, `e${i}`, { add: [{ def_module: "collection", def_name: "f", mode: "sync_to_edge" }] });
      edges.push(new FakeEdge(`e${i}`));
    }
    const done = spyOn(edgesRepo, "snapshotDone");
    const txs = spyOn(app.db as unknown as { tx: (...a: unknown[]) => unknown }, "tx");
    try {
      await Promise.all(edges.map((e) => e.connect()));
      await settle(() => edges.every((e) => e.got.some((m) => m.t === "snapshot_end")));
      await app.services.edges.list(dev, sk, null); // (writes what waits first)
      // every edge's snapshot end recorded, in far fewer transactions than edges
      expect(new Set(done.mock.calls.map((c) => c[1] === sk && c[2])).size).toBe(FLEET);
      expect(txs.mock.calls.length).toBeLessThanOrEqual(FLEET / 4);
    } finally {
      done.mockRestore();
      txs.mockRestore();
    }
    await settle(async () => (await Promise.all(edges.map(async (e) => (await app.services.sync!.status(sk, e.name)).every((a) => a.status === "synced")))).every(Boolean));
    const list = await app.services.edges.list(dev, sk, null) as { name: string }[];
    expect(list.length).toBe(FLEET);
    for (const e of await edgesRepo.all(app.db, sk)) expect(JSON.parse(e.applied_template ?? "null")).toMatchObject([{ def_module: "collection", def_name: "f", mode: "sync_to_edge" }]);
  });

  test("a change reaching every edge of a fleet is read from the log once, not once per edge", async () => {
    const reads = spyOn(changesRepo, "after");
    try {
      const col = await app.services.collections.byIdFor(dev, collectionID);
      await app.services.collections.insert(dev, col, [{ v: 7 }]);
      await settle(() => edges.every((e) => e.liveRows().length === 1));
      // every edge acknowledged it (its position moved), then looked for more: both shared
      await settle(async () => (await app.services.sync!.lag(sk, edges.at(-1)!.name)) === 0);
      expect(reads.mock.calls.length).toBeLessThanOrEqual(4);
    } finally {
      reads.mockRestore();
    }
    acknowledged = edges[0]!.got.filter((m) => m.t === "batch" && !m.snapshot).at(-1).upTo;
    expect(acknowledged).toBeGreaterThan(0);
  });

  test("acknowledgements are written together, and the records show them once read", async () => {
    const writes = spyOn(edgesRepo, "update");
    const talked = spyOn(edgesRepo, "talked");
    const db = app.db as unknown as { tx: (...a: unknown[]) => unknown };
    const txs = spyOn(db, "tx");
    try {
      const col = await app.services.collections.insert(dev, await app.services.collections.byIdFor(dev, collectionID), [{ v: 8 }]);
      expect(col.length).toBe(1);
      await settle(() => edges.every((e) => e.liveRows().length === 2));
      // the records, read through the API, show every edge's new position
      const list = await app.services.edges.list(dev, sk, null) as { name: string; cursor: number; sync_lag: number }[];
      const head = edges[0]!.got.filter((m) => m.t === "batch" && !m.snapshot).at(-1).upTo;
      expect(head).toBeGreaterThan(acknowledged);
      for (const e of list) { expect(e.cursor).toBe(head); expect(e.sync_lag).toBe(0); }
      // FLEET acknowledgements in a few transactions (the insert's own included), not one each,
      // and in one statement per batch of writes, not one per edge
      expect(writes.mock.calls.length).toBe(0);
      expect(talked.mock.calls.length).toBeGreaterThanOrEqual(1);
      expect(talked.mock.calls.length).toBeLessThanOrEqual(3);
      expect(talked.mock.calls.reduce((n, c) => n + c[3].filter((e) => e.cursor === head).length, 0)).toBe(FLEET);
      expect(txs.mock.calls.length).toBeLessThanOrEqual(4);
    } finally {
      writes.mockRestore();
      talked.mockRestore();
      txs.mockRestore();
    }
  });

  test("a hello's record (build, connected) is written with the next batch and shows when read", async () => {
    const rec = await app.services.edges.get(dev, sk, "e0") as { last_seen_version: string; isConnected: boolean };
    expect(rec.last_seen_version).toBe("fake 1");
    expect(rec.isConnected).toBe(true);
    expect((await edgesRepo.get(app.db, sk, "e0"))!.is_connected).toBe(1);
  });

  test("a clean stop writes the positions acknowledged just before it", async () => {
    const col = await app.services.collections.byIdFor(dev, collectionID);
    await app.services.collections.insert(dev, col, [{ v: 9 }]);
    await settle(() => edges.every((e) => e.liveRows().length === 3));
    // the last acknowledgement is in; no read of the records came after it
    await settle(() => edges.every((e) => e.got.filter((m) => m.t === "batch" && !m.snapshot).length >= 3));
    await Bun.sleep(0);
    const head = edges[0]!.got.filter((m) => m.t === "batch" && !m.snapshot).at(-1).upTo;
    await app.stop();
    await boot();
    for (const e of edges) expect((await edgesRepo.get(app.db, sk, e.name))!.cursor).toBe(head);
  });
});
