// Custom columns that developers add to the users, devices and edges tables of a system.
// Values live in each row's `data` JSON document; this table is their schema.
import type { ColumnType } from "../core/columns.ts";
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
