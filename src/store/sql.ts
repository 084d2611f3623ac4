// Small SQL builders shared by repositories. Table and column names passed here are literals of
// the repositories, never request text.
import type { Executor } from "./db.ts";

/** INSERT, or UPDATE every other column when the key exists. */
export function upsert<T extends Record<string, unknown>>(ex: Executor, table: string, row: T, key: (keyof T & string)[]) {
  const cols = Object.keys(row);
  const set = cols.filter((c) => !key.includes(c)).map((c) => `${c} = excluded.${c}`).join(", ");
  return ex.run(`INSERT INTO ${table}(${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})
    ON CONFLICT(${key.join(", ")}) DO ${set ? `UPDATE SET ${set}` : "NOTHING"}`, cols.map((c) => row[c]));
}
