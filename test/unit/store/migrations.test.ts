// src/store/migrations.ts: a new SQLite database is given the schema the migrations end with at
// once (migrations/sqliteSchema.ts); one part-way through is migrated one migration at a time.
import { describe, expect, test } from "bun:test";
import { openDb, type Db } from "../../../src/store/db.ts";
import { MIGRATIONS, migrate, sqliteSchemaOf } from "../../../src/store/migrations.ts";
import { SQLITE_SCHEMA } from "../../../src/store/migrations/sqliteSchema.ts";

const ALL = MIGRATIONS.map((m) => m.version);

async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await openDb({ url: ":memory:" });
  try { return await fn(db); } finally { await db.close(); }
}

/** The schema the migrations make run one at a time. */
const stepByStep = () => withDb(async (db) => { await migrate(db, MIGRATIONS, { oneByOne: true }); return sqliteSchemaOf(db); });

describe("the schema of a new SQLite database", () => {
  test("migrations/sqliteSchema.ts is what the migrations make (after adding one: bun scripts/sqlite-schema.ts)", async () => {
    expect(SQLITE_SCHEMA.versions).toEqual(ALL);
    expect(SQLITE_SCHEMA.statements).toEqual(await stepByStep());
  });

  test("a new database is given it whole, every migration recorded, and has nothing left to apply", async () => {
    const expected = await stepByStep();
    await withDb(async (db) => {
      // in one transaction after the one that makes schema_migrations (one by one: one each)
      let transactions = 0;
      const tx = db.tx.bind(db);
      db.tx = (fn) => { transactions++; return tx(fn); };
      expect(await migrate(db)).toEqual(ALL);
      expect(transactions).toBe(2);
      expect(await sqliteSchemaOf(db)).toEqual(expected);
      const recorded = await db.all<{ version: number; name: string }>(`SELECT version, name FROM schema_migrations ORDER BY version`);
      expect(recorded).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
      expect(await migrate(db)).toEqual([]);
      // and works: a foreign key of the schema is enforced
      await expect(db.run(`INSERT INTO systems(system_key, system_secret, name, owner_id, created_at) VALUES ('k', 's', 'n', 'nobody', 'now')`)).rejects.toThrow(/FOREIGN KEY/);
    });
  });

  test("a database part-way through is migrated one migration at a time, to the same schema", async () => {
    const expected = await stepByStep();
    await withDb(async (db) => {
      const first = MIGRATIONS.filter((m) => m.version <= 12);
      await migrate(db, first);
      expect(await migrate(db)).toEqual(ALL.filter((v) => v > 12));
      expect(await sqliteSchemaOf(db)).toEqual(expected);
    });
  });

  test("a schema of other migrations is not given: a list of its own runs one by one", async () => {
    await withDb(async (db) => {
      const first = MIGRATIONS.filter((m) => m.version <= 3);
      expect(await migrate(db, first)).toEqual(first.map((m) => m.version));
      // the tables of later migrations were not made
      expect(await db.get(`SELECT 1 AS x FROM sqlite_master WHERE name = 'edge_link_events'`)).toBeUndefined();
    });
  });
});
