// External databases from code: ClearBlade.Database({externalDBName}) (query, exec, transaction,
// statement, performOperation, performOperationAsync) and ClearBladeAsync.Database. Statements
// and their arguments go to the database apart ($1, $2... placeholders), never spliced together,
// through the external-databases domain with the rights of its data route. ClearBlade's
// Database() without a name is raw SQL on the platform's own database: Outpost gives code no such
// thing (a statement there could read or change any system's rows), and answers that a name is needed.
import { fail } from "../../core/errors.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** The longest statement text, and the most arguments of one statement. */
const STATEMENT_MAX_CHARS = 1_000_000, ARGS_MAX = 1000;

/** The external database named in Database({externalDBName}). */
function databaseName(v: unknown): string {
  if (v === undefined || v === null || v === "")
    throw fail("INVALID_ARGUMENT", "Database() needs {externalDBName: <name>}: Outpost runs SQL from code on external databases only, not on the platform's own database (use Collection and Query for collections)");
  if (typeof v !== "string" || v.length > 128) throw fail("INVALID_ARGUMENT", "externalDBName must be the name of an external database connection");
  return v;
}

function operation(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v) || v.length === 0) throw fail("INVALID_ARGUMENT", `${what}: the statement is required`);
  if (v.length - 1 > ARGS_MAX) throw fail("INVALID_ARGUMENT", `${what}: at most ${ARGS_MAX} arguments`);
  for (const a of v) if (typeof a === "string" && a.length > STATEMENT_MAX_CHARS) throw fail("INVALID_ARGUMENT", `${what}: a statement or argument has at most ${STATEMENT_MAX_CHARS} characters`);
  return v;
}

async function run(x: HostContext, a: Record<string, any>) {
  const name = databaseName(a.db);
  const kind = a.kind === "exec" ? "exec" : a.kind === "perform" ? "performOperation" : "query";
  const op = operation(a.operation, kind);
  if (kind !== "performOperation" && typeof op[0] !== "string") throw fail("INVALID_ARGUMENT", `${kind}: the first argument is the SQL statement (a string)`);
  const r = await x.e.externalDbs.data(x.p, x.systemKey, name, { operation: op });
  return kind === "exec" ? { count: r.Total } : r.Data;
}

export const database: LibraryArea = {
  ops: {
    "database.run": run,
    "database.transaction": async (x, a) => {
      const name = databaseName(a.db);
      const list = Array.isArray(a.statements) ? a.statements.map((s: unknown, i: number) => operation(s, `statement ${i}`)) : a.statements;
      await x.e.externalDbs.transaction(x.p, x.systemKey, name, list);
      return null;
    },
  },
};
