// The audit trail's batched INSERT (src/store/audit.ts): rows come back as given and in order,
// whether a chunk's rows share values (bound once on libSQL) or not, on both engines.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Db, openDb } from "../../../src/store/db.ts";
import { type AuditValues, auditRepo } from "../../../src/store/audit.ts";
import { migrate } from "../../../src/store/migrations.ts";
import { createPgDatabase, dropPgDatabase, pgReachable } from "../../pgdb.ts";
import { available } from "../services.ts";

const PG = available("PostgreSQL (the audit repository on PostgreSQL)", await pgReachable());
let pgUrl = "";
beforeAll(async () => { if (PG) pgUrl = await createPgDatabase(); });
afterAll(async () => { if (pgUrl) await dropPgDatabase(pgUrl); });

const row = (i: number, over: Partial<Record<number, string | number>> = {}): AuditValues => {
  const r: AuditValues = ["sys", new Date(1.7e12 + i).toISOString(), i % 7, "collections", "Create", "dev@example.com", "coll-1", `{"n":${i}}`, "DEV"];
  for (const [k, v] of Object.entries(over)) (r as unknown[])[Number(k)] = v;
  return r;
};
const asRow = (r: AuditValues) => ({ system_key: r[0], time: r[1], response_time: r[2], asset_class: r[3], action_type: r[4], email: r[5], asset_id: r[6], changes: r[7], user_type: r[8] });

for (const engine of ["libSQL", "PostgreSQL"] as const) {
  describe.skipIf(engine === "PostgreSQL" && !PG)(`audit rows on ${engine}`, () => {
    let db: Db;
    beforeAll(async () => {
      db = await openDb({ url: engine === "libSQL" ? ":memory:" : pgUrl });
      await migrate(db);
    });
    afterAll(async () => { await db.close(); });

    test("a batch's rows read back as given and in order: shared values, differing ones, every chunk size", async () => {
      // 200 + 50 + 10 + 1 + 1: rows sharing everything but time, response time and changes; a
      // chunk where one row differs in each shareable field; a lone row
      const rows: AuditValues[] = Array.from({ length: 262 }, (_, i) => row(i));
      rows[210] = row(210, { 0: "other-sys" });
      rows[215] = row(215, { 3: "devices", 4: "Delete", 5: "", 6: "d-1", 8: "USER" });
      rows[255] = row(255, { 6: "it's \"quoted\"" });
      await db.tx((tx) => auditRepo.insertMany(tx, rows));
      const back = await db.all<Record<string, unknown>>(`SELECT system_key, time, response_time, asset_class, action_type, email, asset_id, changes, user_type FROM audit ORDER BY id`);
      expect(back.map((r) => ({ ...r, response_time: Number(r.response_time) }))).toEqual(rows.map(asRow));
    });

    test("rows from separate batches keep the order they were written in", async () => {
      await db.run("DELETE FROM audit");
      await db.tx((tx) => auditRepo.insertMany(tx, Array.from({ length: 60 }, (_, i) => row(i))));
      await db.tx((tx) => auditRepo.insertMany(tx, Array.from({ length: 3 }, (_, i) => row(100 + i, { 0: `s${i}` }))));
      const back = await db.all<{ changes: string }>(`SELECT changes FROM audit ORDER BY id`);
      expect(back.map((r) => JSON.parse(r.changes).n)).toEqual([...Array.from({ length: 60 }, (_, i) => i), 100, 101, 102]);
    });
  });
}
