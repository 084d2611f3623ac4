// Statements from code on a system's collections (ClearBlade.Database() without a name), as
// src/core/sqlStatement.ts wrote them again: only allow-listed SQL over the caller's own
// collection tables reaches here. A write returns the rows it changed, so they are stamped and
// logged for edge sync like a write through the API (domain/collectionSql.ts).
import type { Executor } from "./db.ts";

/** Columns every collection table has that are not the collection's (a SELECT * shows them). */
const PLATFORM_COLUMNS = ["_hlc", "rowid"];

export const collectionSqlRepo = {
  /** The rows a SELECT gives, without the platform's own columns. */
  async read(ex: Executor, sql: string, args: unknown[]): Promise<Record<string, unknown>[]> {
    const rows = await ex.all<Record<string, unknown>>(sql, args);
    for (const r of rows) for (const c of PLATFORM_COLUMNS) delete r[c];
    return rows;
  },

  /** Runs an INSERT, UPDATE or DELETE; the rows it wrote (their stamps before a DELETE). */
  write: (ex: Executor, sql: string, args: unknown[]) =>
    ex.all<{ item_id: string; _hlc: string | null }>(`${sql} RETURNING item_id, _hlc`, args),
};
