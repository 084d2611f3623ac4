// Small SQL builders shared by repositories. Table and column names passed here are literals of
// the repositories, never request text.
import type { Dialect } from "../core/dialect.ts";
import { type ColumnMap, type CompiledWhere, type Query, compileLimit, compileOrder, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";

/** The most parameters one statement binds: a write of many rows is cut to stay under it
 *  (PostgreSQL takes at most 65,535 a statement). */
export const MAX_PARAMS = 30_000;

/** `items` in consecutive parts of at most `size` (a list bound as `IN (?, ...)` or as VALUES
 *  rows is one statement per part, well under both engines' parameter limits). */
export function* inParts<T>(items: T[], size = 500): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

/** The placeholders of a list of `n` values: `?, ?, ?`. */
export const marks = (n: number) => Array(n).fill("?").join(", ");

/** INSERT, or UPDATE every other column when the key exists. */
export function upsert<T extends Record<string, unknown>>(ex: Executor, table: string, row: T, key: (keyof T & string)[]) {
  const cols = Object.keys(row);
  const set = cols.filter((c) => !key.includes(c)).map((c) => `${c} = excluded.${c}`).join(", ");
  return ex.run(`INSERT INTO ${table}(${cols.join(", ")}) VALUES (${marks(cols.length)})
    ON CONFLICT(${key.join(", ")}) DO ${set ? `UPDATE SET ${set}` : "NOTHING"}`, cols.map((c) => row[c]));
}

/** How a list reads a parsed query: in the query's SORT order, then the repository's own
 *  (`ordered`), and cut to the query's page (`paged`); both unless set false. */
export interface ListRead { ordered?: boolean; paged?: boolean }

/** A parsed query over `columns` as the WHERE of a statement, and the tail that ends it: ORDER BY
 *  its SORT then `fallback`, and its LIMIT, as `read` asks. */
export function listClauses(d: Dialect, q: Query, columns: ColumnMap, fallback: string | undefined, read: ListRead = {}): { where: CompiledWhere; tail: string } {
  const order = read.ordered === false ? "" : compileOrder(q.sort, columns, fallback, d);
  return { where: compileWhere(q.filters, columns, d), tail: order + (read.paged === false ? "" : compileLimit(q)) };
}
