// A collection's schema as an edge applies it: a column whose type changed keeps its values, a
// column the platform renamed keeps them under the new name; a column dropped and another added
// (the platform dropped the data) is empty on the edge too.
import { beforeEach, describe, expect, test } from "bun:test";
import { type Db, openDb } from "../../../src/store/db.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { collectionsRepo } from "../../../src/store/collections.ts";
import { applyDefinition, applyRows } from "../../../src/sync/assets.ts";
import type { WireChange } from "../../../src/sync/protocol.ts";

const ID = "abcdefabcdefabcdefabcdefabcdef";
let db: Db;

const schema = (columns: { name: string; type: string }[], renamed?: { from: string; to: string }): WireChange =>
  ({ seq: 1, type: "collection", name: "c", op: "upsert", hlc: "", body: { collection_id: ID, name: "c", connection: null, columns, indexes: [], ...(renamed ? { renamed } : {}) } });
const apply = (ch: WireChange) => db.tx((tx) => applyDefinition(tx, "sk", ch));
const read = () => db.all<Record<string, unknown>>(`SELECT * FROM "c_${ID}" ORDER BY item_id`);

beforeEach(async () => {
  db = await openDb({ url: ":memory:" });
  await migrate(db);
  await db.run("PRAGMA foreign_keys=OFF"); // a collection without its system: only the schema matters here
  await apply(schema([{ name: "reading", type: "int" }, { name: "label", type: "string" }]));
  const cols = await collectionsRepo.columns(db, ID);
  await db.tx((tx) => applyRows(tx, ID, cols, [
    { collection_id: ID, collection: "c", item_id: "a", op: "upsert", values: { item_id: "a", reading: 42, label: "x" }, hlc: "000000000000001-000000-platform" },
    { collection_id: ID, collection: "c", item_id: "b", op: "upsert", values: { item_id: "b", reading: 7, label: "y" }, hlc: "000000000000001-000000-platform" },
  ]));
});

describe("schema changes on an edge", () => {
  test("a column whose type changed keeps its values", async () => {
    await apply(schema([{ name: "reading", type: "float" }, { name: "label", type: "string" }]));
    expect((await collectionsRepo.columns(db, ID)).find((c) => c.name === "reading")?.type).toBe("float");
    expect((await read()).map((r) => r.reading)).toEqual([42, 7]);
  });

  test("a renamed column keeps its values under the new name", async () => {
    await apply(schema([{ name: "value", type: "int" }, { name: "label", type: "string" }], { from: "reading", to: "value" }));
    expect((await collectionsRepo.columns(db, ID)).map((c) => c.name).sort()).toEqual(["label", "value"]);
    expect((await read()).map((r) => r.value)).toEqual([42, 7]);
  });

  test("a column dropped and another added (no rename) starts empty, as on the platform", async () => {
    await apply(schema([{ name: "value", type: "int" }, { name: "label", type: "string" }]));
    expect((await read()).map((r) => r.value)).toEqual([null, null]);
    expect((await read()).map((r) => r.label)).toEqual(["x", "y"]);
  });
});
