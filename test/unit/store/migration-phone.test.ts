// src/store/migrations.ts, migration 22: a phone number was a column of every user; a system whose
// users hold one gets it as a column of its own, so no number is hidden. On every driver.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { openDb, type Db } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS } from "../../../src/store/migrations.ts";
import { createPgDatabase, dropPgDatabase, pgReachable } from "../../pgdb.ts";
import { available } from "../services.ts";

const PG = available("PostgreSQL (migration 22 on PostgreSQL)", await pgReachable());
let pgUrl = "";
beforeAll(async () => { if (PG) pgUrl = await createPgDatabase(); });
afterAll(async () => { if (pgUrl) await dropPgDatabase(pgUrl); });

const now = new Date().toISOString();
async function systemWithUsers(db: Db, key: string, data: string[]) {
  await db.run(`INSERT INTO systems(system_key, system_secret, name, description, owner_id, token_ttl, auth_required, registration, created_at) VALUES (?,?,?,?,?,?,?,?,?)`,
    [key, key.toUpperCase(), key, "", "dev1", 3600, 1, 1, now]);
  for (const [i, d] of data.entries())
    await db.run(`INSERT INTO users(user_id, system_key, email, email_lower, password_hash, creation_date, data) VALUES (?,?,?,?,?,?,?)`, [`${key}-u${i}`, key, `u${i}@x`, `u${i}@x`, "h", now, d]);
}

for (const [name, open] of [["libSQL", () => openDb({ url: ":memory:" })], ...(PG ? [["PostgreSQL", () => openDb({ url: pgUrl })] as const] : [])] as const) {
  describe(`migration 22 on ${name}`, () => {
    test("the systems whose users hold a phone number get the phone column; the others do not", async () => {
      const db = await open();
      try {
        await migrate(db, MIGRATIONS.filter((m) => m.version < 22));
        await db.run(`INSERT INTO developers(id, email, email_lower, password_hash, fname, lname, org, admin, creation_date) VALUES (?,?,?,?,?,?,?,?,?)`, ["dev1", "d@x", "d@x", "h", "", "", "", 0, now]);
        await systemWithUsers(db, "withphone", [JSON.stringify({ phone: "555" }), JSON.stringify({})]);
        await systemWithUsers(db, "nophone", [JSON.stringify({ shoe: 42 })]);
        await systemWithUsers(db, "nousers", []);
        await db.run(`INSERT INTO custom_columns(system_key, tbl, name, type) VALUES ('nophone', 'users', 'shoe', 'int')`);
        expect(await migrate(db, MIGRATIONS.filter((m) => m.version <= 22))).toEqual([22]);
        const cols = await db.all<{ system_key: string; name: string; type: string }>(`SELECT system_key, name, type FROM custom_columns WHERE tbl = 'users' ORDER BY system_key, name`);
        expect(cols).toEqual([{ system_key: "nophone", name: "shoe", type: "int" }, { system_key: "withphone", name: "phone", type: "string" }]);
      } finally { await db.close(); }
    });
  });
}
