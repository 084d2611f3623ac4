// bun scripts/sqlite-schema.ts: writes src/store/migrations/sqliteSchema.ts, the schema every
// migration makes on SQLite, which a new database is given at once (src/store/migrations.ts,
// createdWhole). Run it after adding a migration: test/unit/store/migrations.test.ts fails until
// the file matches the migrations.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openDb } from "../src/store/db.ts";
import { MIGRATIONS, migrate, sqliteSchemaOf } from "../src/store/migrations.ts";

const db = await openDb({ url: ":memory:" });
await migrate(db, MIGRATIONS, { oneByOne: true });
const statements = await sqliteSchemaOf(db);
await db.close();
const file = join(import.meta.dir, "..", "src", "store", "migrations", "sqliteSchema.ts");
writeFileSync(file, `// Made by scripts/sqlite-schema.ts from the migrations (do not edit): the schema they end with on
// SQLite, given at once to a new database (src/store/migrations.ts, createdWhole).
export const SQLITE_SCHEMA: { versions: number[]; statements: string[] } = {
  versions: ${JSON.stringify(MIGRATIONS.map((m) => m.version)).replaceAll(",", ", ")},
  statements: [
${statements.map((sql) => `    ${JSON.stringify(sql)},\n`).join("")}  ],
};
`);
console.log(`wrote ${file}: ${statements.length} statements for migrations ${MIGRATIONS[0]!.version}-${MIGRATIONS.at(-1)!.version}`);
