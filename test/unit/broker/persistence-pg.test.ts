// The aedes-persistence conformance suite (node_modules/aedes-persistence/abstract.js), run against
// LibsqlPersistence on PostgreSQL (OUTPOST_TEST_PG, or the local test server): every instance in a
// schema of its own in this file's database. Skipped with a note where the server is absent.
import { afterAll } from "bun:test";
import { test } from "node:test";
// @ts-expect-error the suite ships no types
import abs from "aedes-persistence/abstract.js";
import { LibsqlPersistence } from "../../../src/broker/persistence.ts";
import { openDb } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS } from "../../../src/store/migrations.ts";
import { createPgDatabase, dropPgDatabase, pgReachable } from "../../pgdb.ts";
import { available } from "../services.ts";

if (available("PostgreSQL (the aedes-persistence suite on PostgreSQL)", await pgReachable())) {
  const url = await createPgDatabase();
  // dropping a database of 50 schemas takes seconds on a loaded machine
  afterAll(() => dropPgDatabase(url), 60_000);
  let n = 0;
  abs({
    test,
    testAsync: true,
    async persistence() {
      const schema = `p${n++}`;
      const db = await openDb({ url: `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`, poolMax: 4 });
      await db.run(`CREATE SCHEMA ${schema}`);
      await migrate(db, MIGRATIONS);
      const p = new LibsqlPersistence({ db });
      // The suite only destroys the persistence; the database is the test's to close.
      const destroy = p.destroy.bind(p);
      p.destroy = async () => { await destroy(); await db.close(); };
      return p;
    },
  });
}
