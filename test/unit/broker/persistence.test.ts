// The aedes-persistence conformance suite (node_modules/aedes-persistence/abstract.js), run against
// LibsqlPersistence; each instance gets its own fresh database.
import { test } from "node:test";
// @ts-expect-error the suite ships no types
import abs from "aedes-persistence/abstract.js";
import { LibsqlPersistence } from "../../../src/broker/persistence.ts";
import { openDb } from "../../../src/store/db.ts";
import { migrate, MIGRATIONS } from "../../../src/store/migrations.ts";

abs({
  test,
  testAsync: true,
  async persistence() {
    const db = await openDb({ url: ":memory:" });
    await migrate(db, MIGRATIONS);
    const p = new LibsqlPersistence({ db });
    // The suite only destroys the persistence; the database is the test's to close.
    const destroy = p.destroy.bind(p);
    p.destroy = async () => { await destroy(); await db.close(); };
    return p;
  },
});
