// Custom columns that developers add to the users, devices and edges tables of a system.
// Values live in each row's `data` JSON document; this table is their schema.
import type { ColumnType } from "../core/columns.ts";
import type { ColumnMap } from "../core/query.ts";
import type { Executor } from "./db.ts";
import type { Dialect } from "../core/dialect.ts";

export type CustomTable = "users" | "devices" | "edges";
export interface CustomColumnRow { name: string; type: ColumnType }

export const customColumnsRepo = {
  list: (ex: Executor, systemKey: string, tbl: CustomTable) =>
    ex.all<CustomColumnRow>(`SELECT name, type FROM custom_columns WHERE system_key = ? AND tbl = ? ORDER BY rowid`, [systemKey, tbl]),
  add: (ex: Executor, systemKey: string, tbl: CustomTable, name: string, type: ColumnType) =>
    ex.run(`INSERT INTO custom_columns(system_key, tbl, name, type) VALUES (?,?,?,?)`, [systemKey, tbl, name, type]),
  remove: (ex: Executor, systemKey: string, tbl: CustomTable, name: string) =>
    ex.run(`DELETE FROM custom_columns WHERE system_key = ? AND tbl = ? AND name = ?`, [systemKey, tbl, name]),
};

/** SQL expression reading a custom column of type `type` out of a row's JSON document. The name
 *  passed checkName (letters, digits, _), so it is safe inside the JSON path literal. */
export const customColumnSql = (d: Dialect, name: string, type: ColumnType, alias = "") => d.jsonField(`${alias}data`, name, type);

/** The query column map of a table with custom columns: its own columns (`fixed`), then each custom
 *  one read out of the data document. Keyed by names from requests: no prototype, so 'constructor'
 *  or '__proto__' is no column. */
export function customColumnMap(d: Dialect, fixed: ColumnMap, custom: Record<string, ColumnType>): ColumnMap {
  const map: ColumnMap = Object.create(null);
  for (const [n, f] of Object.entries(fixed)) map[n] = { sql: f.sql, type: f.type };
  for (const [n, t] of Object.entries(custom)) map[n] = { sql: customColumnSql(d, n, t), type: t };
  return map;
}
