// The row-apply step of edge sync decides who wins, on every node alike: these tests assert the
// winner, not only that two nodes agree. Last writer wins on the hybrid clock's stamp; a delete
// leaves a tombstone an older write cannot get past; equal stamps cannot come from two writers
// (the node id is part of the stamp), so ties are ordered by node id, the same way everywhere.
import { beforeEach, describe, expect, test } from "bun:test";
import { type Db, openDb } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { collectionsRepo } from "../../../src/store/collections.ts";
import { tombstonesRepo } from "../../../src/store/sync.ts";
import { applyRows } from "../../../src/sync/assets.ts";
import type { RowChange } from "../../../src/domain/changes.ts";

const ID = "0123456789abcdef0123456789abcd";
const COLUMNS = [{ name: "v", type: "string" as const }];

async function node(): Promise<Db> {
  const db = await openDb({ url: ":memory:" });
  await migrate(db);
  await db.run("PRAGMA foreign_keys=OFF"); // a collection without its system: only its rows matter here
  await collectionsRepo.create(db, { collection_id: ID, system_key: "sk", name: "c", connection: null, created_at: "" }, COLUMNS);
  return db;
}

/** A stamp at `ms` with a counter, written by `by`. */
const stamp = (ms: number, by: string, counter = 0) => `${String(ms).padStart(15, "0")}-${String(counter).padStart(6, "0")}-${by}`;
const up = (item: string, v: string, hlc: string): RowChange => ({ collection_id: ID, collection: "c", item_id: item, op: "upsert", values: { item_id: item, v }, hlc });
const del = (item: string, hlc: string): RowChange => ({ collection_id: ID, collection: "c", item_id: item, op: "delete", values: null, hlc });
const apply = (db: Db, changes: RowChange[], opts?: { ties?: boolean }) => db.tx((tx) => applyRows(tx, ID, COLUMNS, changes, opts));
const row = async (db: Db, item: string) => (await db.get<{ v: string; _hlc: string }>(`SELECT v, _hlc FROM "c_${ID}" WHERE item_id = ?`, [item])) ?? null;

let db: Db;
beforeEach(async () => { db = await node(); });

describe("last writer wins", () => {
  test("a later write replaces an earlier one", async () => {
    await apply(db, [up("x", "old", stamp(1, "edge:a"))]);
    const r = await apply(db, [up("x", "new", stamp(2, "platform"))]);
    expect(r.applied.map((c) => c.values!.v)).toEqual(["new"]);
    expect(await row(db, "x")).toEqual({ v: "new", _hlc: stamp(2, "platform") });
  });

  test("an older change arriving late never overwrites, and is reported lost", async () => {
    await apply(db, [up("x", "new", stamp(2, "platform"))]);
    const r = await apply(db, [up("x", "old", stamp(1, "edge:a"))]);
    expect(r.applied).toEqual([]);
    expect(r.lost.map((c) => c.values!.v)).toEqual(["old"]);
    expect((await row(db, "x"))!.v).toBe("new");
  });

  test("in one batch, the latest change of an item counts whatever its place", async () => {
    await apply(db, [up("x", "second", stamp(2, "a")), up("x", "first", stamp(1, "a"))]);
    expect((await row(db, "x"))!.v).toBe("second");
  });

  test("delete then a later update: the update wins, in either order of arrival", async () => {
    for (const order of [[del("x", stamp(1, "a")), up("x", "back", stamp(2, "b"))], [up("x", "back", stamp(2, "b")), del("x", stamp(1, "a"))]]) {
      const n = await node();
      await apply(n, [up("x", "orig", stamp(0, "a"))]);
      for (const c of order) await apply(n, [c]);
      expect((await row(n, "x"))!.v).toBe("back");
    }
  });

  test("an update then a later delete: the row is gone, in either order of arrival", async () => {
    for (const order of [[up("x", "upd", stamp(1, "a")), del("x", stamp(2, "b"))], [del("x", stamp(2, "b")), up("x", "upd", stamp(1, "a"))]]) {
      const n = await node();
      for (const c of order) await apply(n, [c]);
      expect(await row(n, "x")).toBeNull();
      expect(await tombstonesRepo.get(n, ID, "x")).toBe(stamp(2, "b"));
    }
  });

  test("a tombstone stops an older write of a row the node never held", async () => {
    await apply(db, [del("x", stamp(5, "platform"))]);
    const r = await apply(db, [up("x", "zombie", stamp(4, "edge:a"))]);
    expect(r.lost.length).toBe(1);
    expect(await row(db, "x")).toBeNull();
    // and a later write gets past it
    await apply(db, [up("x", "alive", stamp(6, "edge:a"))]);
    expect((await row(db, "x"))!.v).toBe("alive");
  });

  test("an older delete does not remove a newer row", async () => {
    await apply(db, [up("x", "keep", stamp(3, "a"))]);
    const r = await apply(db, [del("x", stamp(2, "b"))]);
    expect(r.lost.length).toBe(1);
    expect((await row(db, "x"))!.v).toBe("keep");
  });

  test("equal times are broken by the node id, the same way on every node", async () => {
    const fromA = up("x", "by edge:a", stamp(7, "edge:a", 3)), fromP = up("x", "by platform", stamp(7, "platform", 3));
    const n1 = await node(), n2 = await node();
    await apply(n1, [fromA]); await apply(n1, [fromP]);
    await apply(n2, [fromP]); await apply(n2, [fromA]);
    expect((await row(n1, "x"))!.v).toBe("by platform");
    expect((await row(n2, "x"))!.v).toBe("by platform");
  });

  test("the same stamp again: kept, unless the platform's copy is taken as the reference (ties)", async () => {
    await apply(db, [up("x", "edge copy", stamp(9, "p"))]);
    expect((await apply(db, [up("x", "platform copy", stamp(9, "p"))])).lost.length).toBe(1);
    expect((await row(db, "x"))!.v).toBe("edge copy");
    await apply(db, [up("x", "platform copy", stamp(9, "p"))], { ties: true });
    expect((await row(db, "x"))!.v).toBe("platform copy");
  });

  test("a write the platform stamped again replaces the writer's stamp, and only that one", async () => {
    const future = stamp(9_000_000, "edge:a");
    await apply(db, [up("x", "mine", future)]);
    const again = { ...up("x", "mine", stamp(100, "platform")), replaces: future };
    expect((await apply(db, [again])).applied.length).toBe(1);
    expect((await row(db, "x"))!._hlc).toBe(stamp(100, "platform"));
    // once replaced, the old stamp names nothing: an older write does not get in by it
    expect((await apply(db, [{ ...up("x", "other", stamp(50, "platform")), replaces: future }])).lost.length).toBe(1);
    // a delete stamped again replaces the tombstone's stamp too
    await apply(db, [del("y", future)]);
    await apply(db, [{ ...del("y", stamp(100, "platform")), replaces: future }]);
    expect(await tombstonesRepo.get(db, ID, "y")).toBe(stamp(100, "platform"));
  });

  test("a stamp given again and a later write of the item in one batch: the later write wins on the writer's node", async () => {
    // an edge whose clock is far ahead wrote x and deleted y; the platform stamped both again and
    // then wrote each itself, and both changes reached the edge in one batch
    const future = stamp(9_000_000, "edge:a");
    await apply(db, [up("x", "mine", future), up("y", "mine", stamp(1, "edge:a"))]);
    await apply(db, [del("y", future)]);
    const r = await apply(db, [
      { ...up("x", "mine", stamp(100, "platform")), replaces: future }, up("x", "platform's", stamp(150, "platform")),
      { ...del("y", stamp(100, "platform")), replaces: future }, up("y", "platform's", stamp(150, "platform")),
    ]);
    expect(r.lost).toEqual([]);
    expect(r.applied.map((c) => [c.item_id, c.values?.v])).toEqual([["x", "platform's"], ["y", "platform's"]]);
    expect(await row(db, "x")).toEqual({ v: "platform's", _hlc: stamp(150, "platform") });
    expect(await row(db, "y")).toEqual({ v: "platform's", _hlc: stamp(150, "platform") });
    // the tombstone took the platform's stamp: it no longer hides the row's later write
    expect(await tombstonesRepo.get(db, ID, "y")).toBe(stamp(100, "platform"));
    // and an older write still loses
    expect((await apply(db, [up("x", "late", stamp(120, "platform"))])).lost.length).toBe(1);
  });
});

describe("a local write over a row stored with a later stamp", () => {
  test("an update gets the next stamp after the stored one (so it still wins everywhere)", async () => {
    await apply(db, [up("x", "from the future", stamp(9_000, "platform", 4))]);
    const { ids, stamp: s } = await db.tx((tx) => collectionsRepo.update(tx, ID, [["v", "local"]], {}, [], stamp(1_000, "edge:a")));
    expect(ids).toEqual(["x"]);
    expect(s).toBe(stamp(9_000, "edge:a", 5));
    expect(await row(db, "x")).toEqual({ v: "local", _hlc: stamp(9_000, "edge:a", 5) });
  });

  test("an update with a later stamp than the stored one keeps it", async () => {
    await apply(db, [up("x", "old", stamp(1, "platform"))]);
    const { stamp: s } = await db.tx((tx) => collectionsRepo.update(tx, ID, [["v", "new"]], {}, [], stamp(5, "edge:a")));
    expect(s).toBe(stamp(5, "edge:a"));
  });

  test("the counter at its end moves the time on", async () => {
    await apply(db, [up("x", "old", stamp(9_000, "platform", 999_999))]);
    const { stamp: s } = await db.tx((tx) => collectionsRepo.update(tx, ID, [["v", "new"]], {}, [], stamp(1, "edge:a")));
    expect(s).toBe(stamp(9_001, "edge:a", 0));
  });

  test("a delete reports the latest stamp it removed", async () => {
    await apply(db, [up("x", "a", stamp(9_000, "platform")), up("y", "b", stamp(3, "platform"))]);
    const { ids, stamp: s } = await db.tx((tx) => collectionsRepo.delete(tx, ID, {}, []));
    expect(ids.sort()).toEqual(["x", "y"]);
    expect(s).toBe(stamp(9_000, "platform"));
  });
});
