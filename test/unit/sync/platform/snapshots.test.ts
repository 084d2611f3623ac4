// Full snapshots are shared (src/sync/platform/snapshots.ts): edges of one template welcomed at
// one position of the log get the same text, read once; a change between two of them makes the
// later one a fresh snapshot; edges of different templates never share one.
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import type { App } from "../../../../src/app.ts";
import type { Principal } from "../../../../src/auth/principal.ts";
import { changesRepo } from "../../../../src/store/sync.ts";
import type { SyncHub } from "../../../../src/sync/platform/hub.ts";
import { SharedSnapshot, SharedSnapshots } from "../../../../src/sync/platform/snapshots.ts";
import type { WireChange } from "../../../../src/sync/protocol.ts";
import { settle, startHubApp } from "../hubApp.ts";

let app: App;
let hub: SyncHub;
let dev: Principal;
let sk: string;
const cols: Record<string, string> = {};

beforeAll(async () => {
  ({ app, hub, dev, sk } = await startHubApp("snapshots"));
  for (const name of ["sa", "sb"]) {
    const { collectionID } = await app.services.collections.createCollection(dev, { name, appID: sk, columns: [{ name: "v", type: "int" }] });
    cols[name] = collectionID as string;
    await app.services.collections.insert(dev, await app.services.collections.byIdFor(dev, collectionID), [{ v: 1 }, { v: 2 }]);
  }
});
afterAll(() => app.stop());

/** An edge played by a socket that acknowledges at once; it keeps the texts of its snapshot, and
 *  the values of the rows live batches bring it (in `texts.live`). */
async function newEdge(name: string, collection: string) {
  await app.services.edges.create(dev, sk, name, { token: `${name}-token` });
  await app.services.edges.changeTemplate(dev, sk, name, { add: [{ def_module: "collection", def_name: collection, mode: "sync_to_edge" }] });
  const texts: string[] & { live?: number[] } = [];
  const live: number[] = texts.live = [];
  let ended = false;
  const socket = {
    send: (text: string) => {
      const m = JSON.parse(text);
      if (m.t === "batch" && m.snapshot) texts.push(text);
      if (m.t === "batch" && !m.snapshot) live.push(...m.changes.filter((c: any) => c.type === "row").map((c: any) => c.body.values.v));
      if (m.t === "snapshot_end") { texts.push(text); ended = true; }
      if (m.t === "batch") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.upTo, snapshot: m.snapshot, results: [] }));
      if (m.t === "snapshot_end") void hub.message(socket, JSON.stringify({ t: "ack", upTo: m.seq, snapshot: true, results: [] }));
    },
    close: () => {},
  };
  hub.open(socket);
  await hub.message(socket, JSON.stringify({ t: "hello", systemKey: sk, edge: name, token: `${name}-token`, cursor: 0, synced: false, pingMs: 600_000 }));
  await settle(() => ended);
  return texts;
}

/** How many snapshots were built (each reads the assets' versions once) while `fn` ran. */
async function builds<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const spy = spyOn(changesRepo, "latest");
  try { return [await fn(), spy.mock.calls.length]; } finally { spy.mockRestore(); }
}

const rowValues = (texts: string[]) => texts.flatMap((t) => JSON.parse(t).changes ?? []).filter((c: any) => c.type === "row").map((c: any) => c.body.values.v).sort();

describe("shared full snapshots", () => {
  test("edges of one template at one position get the same snapshot, built once", async () => {
    const [[a, b], n] = await builds(async () => [await newEdge("share-a", "sa"), await newEdge("share-b", "sa")]);
    expect(n).toBe(1);
    expect(a.length).toBeGreaterThan(1);
    expect(b).toEqual(a);
    expect(rowValues(a)).toEqual([1, 2]);
  });

  test("a change between two builds gives the later edge a fresh snapshot", async () => {
    const before = await newEdge("fresh-a", "sa");
    await app.services.collections.insert(dev, await app.services.collections.byIdFor(dev, cols.sa!), [{ v: 3 }]);
    // (the platform has seen the commit: it went out to the edge before)
    await settle(() => before.live!.includes(3));
    const [after, n] = await builds(() => newEdge("fresh-b", "sa"));
    expect(n).toBe(1);
    expect(rowValues(before)).toEqual([1, 2]);
    expect(rowValues(after)).toEqual([1, 2, 3]);
    expect(JSON.parse(after.at(-1)!).seq).toBeGreaterThan(JSON.parse(before.at(-1)!).seq);
  });

  test("edges with different templates never share a snapshot", async () => {
    const [[a, b], n] = await builds(async () => [await newEdge("tpl-a", "sa"), await newEdge("tpl-b", "sb")]);
    // (tpl-a joins the snapshot of the test before: same template, same position)
    expect(n).toBe(1);
    const names = (texts: string[]) => [...new Set(texts.flatMap((t) => JSON.parse(t).changes ?? []).map((c: any) => c.name))];
    expect(names(a)).toEqual(["sa"]);
    expect(names(b)).toEqual(["sb"]);
    expect(JSON.parse(a.at(-1)!).rows).toEqual([cols.sa]);
    expect(JSON.parse(b.at(-1)!).rows).toEqual([cols.sb]);
  });
});

describe("a shared snapshot's pages", () => {
  async function* pages(n: number, fail = false): AsyncGenerator<WireChange[]> {
    for (let i = 0; i < n; i++) yield [{ seq: 7, type: "row", name: "x", item: `i${i}`, op: "upsert", hlc: "h", body: { v: i }, version: 0 }];
    if (fail) throw new Error("read failed");
  }
  const template = [{ def_module: "collection", def_name: "x", mode: "sync_to_edge" }] as any;

  test("a reader that joins late gets every page from the first; a withdrawn one keeps only what its readers still need", async () => {
    const s = new SharedSnapshot(pages(3), 7, async () => "end", () => {});
    const first = s.join();
    expect(await s.next(first)).toContain('"i0"');
    const late = s.join();
    expect(await s.next(late)).toContain('"i0"');
    s.withdraw();
    s.leave(late);
    expect(await s.next(first)).toContain('"i1"');
    expect(await s.next(first)).toContain('"i2"');
    expect(await s.next(first)).toBeNull();
    expect(await s.end()).toBe("end");
  });

  test("a snapshot whose read failed fails its readers, never ends as if whole, and is made again", async () => {
    const kept = new SharedSnapshots();
    let made = 0;
    const build = () => { made++; return { gen: pages(1, made === 1), end: async () => "end" }; };
    const s = kept.full("sys", template, 7, build);
    const r = s.join();
    expect(await s.next(r)).toContain('"i0"');
    await expect(s.next(r)).rejects.toThrow("read failed");
    await expect(s.next(r)).rejects.toThrow("read failed");
    const again = kept.full("sys", template, 7, build);
    expect(again).not.toBe(s);
    expect(made).toBe(2);
  });

  test("a snapshot past the shared size is not offered to later edges; the log moving drops the kept ones", async () => {
    const kept = new SharedSnapshots();
    const big = "x".repeat(33 * 1024 * 1024);
    async function* huge(): AsyncGenerator<WireChange[]> { yield [{ seq: 7, type: "row", name: "x", item: "i", op: "upsert", hlc: "h", body: { big }, version: 0 }]; }
    const s = kept.full("sys", template, 7, () => ({ gen: huge(), end: async () => "end" }));
    expect(await s.next(s.join())).not.toBeNull();
    expect(kept.full("sys", template, 7, () => ({ gen: pages(1), end: async () => "end" }))).not.toBe(s);
    const t = kept.full("sys", template, 8, () => ({ gen: pages(1), end: async () => "end" }));
    expect(kept.full("sys", template, 8, () => ({ gen: pages(1), end: async () => "end" }))).toBe(t);
    kept.logMoved("sys");
    expect(kept.full("sys", template, 8, () => ({ gen: pages(1), end: async () => "end" }))).not.toBe(t);
  });
});
