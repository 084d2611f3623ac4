// External databases from code: ClearBlade.Database({externalDBName}) (query, exec, transaction,
// statement, performOperation, performOperationAsync) and ClearBladeAsync.Database. Statements
// and their arguments go to the database apart ($1, $2... placeholders), never spliced together,
// through the external-databases domain with the rights of its data route. Database() without a
// name runs statements on the system's own collections (query, exec, and transaction: all or
// none), checked and rewritten so they reach nothing else (domain/collectionSql.ts).
import { fail } from "../../core/errors.ts";
import { CollectionSql } from "../../domain/collectionSql.ts";
import type { HostContext, LibraryArea } from "./types.ts";

/** The longest statement text, and the most arguments of one statement. */
const STATEMENT_MAX_CHARS = 1_000_000, ARGS_MAX = 1000;

const ownCollections = (v: unknown) => v === undefined || v === null || v === "";

/** The external database named in Database({externalDBName}). */
function databaseName(v: unknown, what: string): string {
  if (ownCollections(v))
    throw fail("INVALID_ARGUMENT", `${what} needs Database({externalDBName: <name>}): Database() without a name runs query, exec and transaction (SELECT, INSERT, UPDATE or DELETE) on the system's collections`);
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
  const kind = a.kind === "exec" ? "exec" : a.kind === "perform" ? "performOperation" : "query";
  const name = kind === "performOperation" || !ownCollections(a.db) ? databaseName(a.db, kind) : null;
  const op = operation(a.operation, kind);
  if (kind !== "performOperation" && typeof op[0] !== "string") throw fail("INVALID_ARGUMENT", `${kind}: the first argument is the SQL statement (a string)`);
  if (name === null) {
    // the arguments one by one, or (as the promise form takes them) in one array
    const params = op.length === 2 && Array.isArray(op[1]) ? op[1] : op.slice(1);
    const r = await new CollectionSql(x.e.d, x.e.collections).run(x.p, x.systemKey, op[0], params);
    return kind === "exec" ? { count: r.count } : r.rows;
  }
  const r = await x.e.externalDbs.data(x.p, x.systemKey, name, { operation: op });
  return kind === "exec" ? { count: r.Total } : r.Data;
}

export const database: LibraryArea = {
  ops: {
    "database.run": run,
    "database.transaction": async (x, a) => {
      const list = Array.isArray(a.statements) ? a.statements.map((s: unknown, i: number) => operation(s, `statement ${i}`)) : a.statements;
      if (ownCollections(a.db)) {
        if (!Array.isArray(list)) throw fail("INVALID_ARGUMENT", "transaction: a list of statements is required");
        for (const [i, op] of (list as unknown[][]).entries()) if (typeof op[0] !== "string") throw fail("INVALID_ARGUMENT", `statement ${i}: the SQL statement (a string) comes first`);
        await new CollectionSql(x.e.d, x.e.collections).transaction(x.p, x.systemKey, (list as unknown[][]).map((op) => ({ sql: op[0], params: op.slice(1) })));
        return null;
      }
      await x.e.externalDbs.transaction(x.p, x.systemKey, databaseName(a.db, "transaction"), list);
      return null;
    },
  },
};
