// src/store/sql.ts: the shared builders; a list longer than one part reaches every row of a real
// database through the repositories that cut it (snapshotSeenRepo.add, tombstonesRepo.forItems).
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { inParts, marks } from "../../../src/store/sql.ts";
import { snapshotSeenRepo, tombstonesRepo } from "../../../src/store/sync.ts";

describe("inParts", () => {
  test("cuts a list into consecutive parts of at most the size, in order, nothing lost", () => {
    const items = Array.from({ length: 1203 }, (_, i) => i);
    const parts = [...inParts(items)];
    expect(parts.map((p) => p.length)).toEqual([500, 500, 203]);
    expect(parts.flat()).toEqual(items);
    expect([...inParts(items, 1000)].map((p) => p.length)).toEqual([1000, 203]);
  });
  test("an empty list has no parts; a list of exactly one part has one", () => {
    expect([...inParts([])]).toEqual([]);
    expect([...inParts([1, 2, 3], 3)]).toEqual([[1, 2, 3]]);
  });
  test("marks are one placeholder per value", () => {
    expect(marks(3)).toBe("?, ?, ?");
    expect(marks(1)).toBe("?");
  });
});

describe("repositories over lists longer than one part", () => {
  let db: Db;
  beforeEach(async () => { db = await openDb({ url: ":memory:" }); await migrate(db); });
  afterEach(async () => { await db.close(); });
  const ids = Array.from({ length: 1203 }, (_, i) => `item-${i}`);

  test("snapshotSeenRepo.add stores every id once", async () => {
    await snapshotSeenRepo.ensure(db);
    await snapshotSeenRepo.add(db, "c1", ids);
    await snapshotSeenRepo.add(db, "c1", ids.slice(0, 600));
    expect((await db.get<{ n: number }>(`SELECT count(*) AS n FROM sync_snapshot_seen WHERE collection_id = 'c1'`))!.n).toBe(1203);
  });

  test("tombstonesRepo.forItems finds the tombstones of every part, and only those asked", async () => {
    for (const id of ids) await db.run(`INSERT INTO tombstones(collection_id, item_id, hlc) VALUES ('c1', ?, ?)`, [id, `h-${id}`]);
    const asked = [...ids.filter((_, i) => i % 2 === 0), "absent"];
    const found = await tombstonesRepo.forItems(db, "c1", asked);
    expect(found.size).toBe(602);
    expect(found.get("item-1202")).toBe("h-item-1202");
    expect(found.has("item-1")).toBe(false);
  });
});
