// The platform's sync hub in-process, with edges played by sockets that acknowledge what they get:
// a commit wakes only the edges whose template includes what changed (the others pass over it a
// little later, in an empty batch); snapshot pages stay within their byte budget however big the
// rows; compaction drops the tombstones every edge acknowledged and keeps the horizon, so an edge
// at the compacted position is not sent a snapshot.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { App } from "../../../src/app.ts";
import type { Principal } from "../../../src/auth/principal.ts";
import { tombstonesRepo } from "../../../src/store/sync.ts";
import type { SyncHub } from "../../../src/sync/platform/hub.ts";
import { BATCH_BYTES } from "../../../src/sync/protocol.ts";
import { settle, startHubApp } from "./hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;

beforeAll(async () => ({ app, hub, dev, sk } = await startHubApp("hub")));
afterAll(() => app.stop());

/** An edge played by a socket: it answers hello's welcome and acknowledges every batch and
 *  snapshot end at once, keeping what it got. */
class FakeEdge {
  got: any[] = [];
  closed = false;
  /** `report`: the results the edge acknowledges a batch's changes with (none by default) */
  constructor(readonly name: string, readonly report: (changes: any[]) => unknown[] = () => []) {}
  readonly socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      this.got.push(m);
      if (m.t === "batch") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: this.report(m.changes) }));
      if (m.t === "snapshot_end") void hub.message(this.socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    },
    close: () => { this.closed = true; },
  };
  async connect(cursor = 0, synced = false, incarnation = "") {
    hub.open(this.socket);
    await hub.message(this.socket, JSON.stringify({ t: "hello", systemKey: sk, edge: this.name, token: `${this.name}-token`, cursor, synced, incarnation, pingMs: 600_000 }));
  }
  /** row changes received in live (not snapshot) batches */
  liveRows() { return this.got.filter((m) => m.t === "batch" && !m.snapshot).flatMap((m) => m.changes.filter((c: any) => c.type === "row")); }
  batches() { return this.got.filter((m) => m.t === "batch" && !m.snapshot); }
}

const synced = async (edge: string) => (await hub.status(sk, edge)).every((a) => a.status === "synced");

async function collection(name: string, columns: { name: string; type: string }[]) {
  const c = app.services.collections;
  const { collectionID } = await c.createCollection(dev, { name, appID: sk, columns });
  return { id: collectionID as string, col: () => c.byIdFor(dev, collectionID) };
}
async function edge(name: string, template: unknown[]) {
  await app.services.edges.create(dev, sk, name, { token: `${name}-token` });
  await app.services.edges.changeTemplate(dev, sk, name, { add: template });
  const e = new FakeEdge(name);
  await e.connect();
  await settle(() => synced(name));
  return e;
}

describe("sync hub", () => {
  test("a commit wakes only the edges whose template includes the changed asset", async () => {
    const x = await collection("wx", [{ name: "v", type: "int" }]);
    await collection("wy", [{ name: "v", type: "int" }]);
    const a = await edge("wake-a", [{ def_module: "collection", def_name: "wx", mode: "sync_to_edge" }]);
    const b = await edge("wake-b", [{ def_module: "collection", def_name: "wy", mode: "sync_to_edge" }]);
    const before = b.got.length;
    await app.services.collections.insert(dev, await x.col(), [{ v: 1 }]);
    await settle(() => a.liveRows().length === 1);
    // the other edge is not sent anything now...
    await Bun.sleep(200);
    expect(b.got.length).toBe(before);
    // ...its position passes the change a little later, in an empty batch
    await settle(() => b.batches().some((m) => m.changes.length === 0), 3_000);
    expect(b.liveRows()).toEqual([]);
    expect(await hub.lag(sk, "wake-b")).toBe(0);
  });

  test("snapshot pages stay within the byte budget whatever the rows' size", async () => {
    const big = await collection("wbig", [{ name: "blob", type: "string" }]);
    const row = "x".repeat(100_000);
    for (let i = 0; i < 30; i++) await app.services.collections.insert(dev, await big.col(), [{ blob: row }]);
    const e = await edge("pages", [{ def_module: "collection", def_name: "wbig", mode: "sync_to_edge" }]);
    const pages = e.got.filter((m) => m.t === "batch" && m.snapshot && m.changes.some((c: any) => c.type === "row"));
    expect(pages.flatMap((p) => p.changes.filter((c: any) => c.type === "row")).length).toBe(30);
    expect(pages.length).toBeGreaterThan(2);
    for (const p of pages) expect(JSON.stringify(p).length).toBeLessThan(BATCH_BYTES + 200_000);
  });

  test("compaction drops the tombstones every edge acknowledged, and an edge at the horizon resumes without a snapshot", async () => {
    const t = await collection("wtomb", [{ name: "v", type: "int" }]);
    const e = await edge("tombs", [{ def_module: "collection", def_name: "wtomb", mode: "sync" }]);
    const c = app.services.collections;
    const ins = await c.insert(dev, await t.col(), [{ v: 1 }, { v: 2 }]);
    await c.delete(dev, await t.col(), JSON.stringify([[{ EQ: [{ v: 1 }] }]]));
    await settle(() => e.liveRows().some((r: any) => r.op === "delete"));
    await settle(() => synced("tombs"));
    expect(await tombstonesRepo.get(app.db, t.id, ins[0]!.item_id)).toBeDefined();
    // once the other edges of the system pass the entries too (in empty batches, a little later),
    // a compaction drops the tombstone
    await settle(async () => { await hub.compact(); return (await tombstonesRepo.get(app.db, t.id, ins[0]!.item_id)) === undefined; });
    // the edge comes back at its position, which the log no longer holds entries after
    const cursor = (await app.services.edges.find(app.db, sk, "tombs")).cursor;
    const incarnation = (await app.services.edges.find(app.db, sk, "tombs")).incarnation;
    e.socket.close();
    await hub.close(e.socket);
    const again = new FakeEdge("tombs");
    await again.connect(cursor, true, incarnation);
    await settle(() => again.got.some((m) => m.t === "welcome"));
    const welcome = again.got.find((m) => m.t === "welcome");
    expect(welcome.snapshot).toBe(false);
    // a later change arriving live bounds what came before it on the link: no snapshot page
    const [later] = await c.insert(dev, await t.col(), [{ v: 3 }]);
    await settle(() => again.liveRows().some((r: any) => r.item === later!.item_id && r.op === "upsert"));
    expect(again.got.filter((m) => m.t === "batch" && m.snapshot)).toEqual([]);
  });

  test("versions count each asset's changes; an edge that does not echo them is placed by the change's seq", async () => {
    const code = (n: number) => ({ code: `function vcalc(req, resp) { resp.success(${n}); }` });
    await app.services.services.create(dev, sk, "vcalc", { ...code(1), parameters: [] });
    await app.services.services.create(dev, sk, "vbad", { code: "function vbad(req, resp) {}", parameters: [] });
    await app.services.edges.create(dev, sk, "versions", { token: "versions-token" });
    await app.services.edges.changeTemplate(dev, sk, "versions", { add: [{ def_module: "service", def_name: "vcalc", mode: "sync_to_edge" }, { def_module: "service", def_name: "vbad", mode: "sync_to_edge" }] });
    // as an edge from before versions: results carry the change's seq only; vbad fails to apply
    const e = new FakeEdge("versions", (changes) => changes.map((c) => ({ type: c.type, name: c.name, seq: c.seq, ...(c.name === "vbad" ? { error: "does not apply" } : {}) })));
    await e.connect();
    const st = async (name: string) => (await hub.status(sk, "versions")).find((a) => a.asset_name === name)!;
    await settle(async () => (await st("vcalc")).status === "synced");
    // made after the system had edges: version 1, carried by the snapshot
    expect(e.got.filter((m) => m.t === "batch").flatMap((m) => m.changes).find((c: any) => c.name === "vcalc").version).toBe(1);
    for (const n of [2, 3]) await app.services.services.update(dev, sk, "vcalc", code(n));
    await settle(async () => (await st("vcalc")).applied_version === 3);
    expect(await st("vcalc")).toMatchObject({ status: "synced", desired_version: 3, applied_version: 3, source: "edge", entry: "service/vcalc" });
    const live = e.got.filter((m) => m.t === "batch" && !m.snapshot).flatMap((m) => m.changes).filter((c: any) => c.name === "vcalc");
    expect(live.map((c: any) => c.version)).toEqual([2, 3]);
    await app.services.services.update(dev, sk, "vbad", { code: "function vbad(req, resp) { resp.success(2); }" });
    await settle(async () => (await st("vbad")).desired_version === 2);
    expect(await st("vbad")).toMatchObject({ status: "failed", desired_version: 2, last_error: "does not apply" });
  });
});
