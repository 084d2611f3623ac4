// Users of a system.
import { type ColumnMap, type Condition, type Query, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { type ListRead, listClauses, upsert } from "./sql.ts";

export interface UserRow {
  user_id: string; system_key: string; email: string; email_lower: string;
  password_hash: string; creation_date: string; data: string;
}

/** The users table's own columns, for queries (custom columns read the data document). */
export const USER_COLUMNS: ColumnMap = { user_id: { sql: "user_id", type: "string" }, email: { sql: "email", type: "string" }, creation_date: { sql: "creation_date", type: "timestamp" } };

export const usersRepo = {
  byId: (ex: Executor, systemKey: string, id: string) =>
    ex.get<UserRow>(`SELECT * FROM users WHERE user_id = ? AND system_key = ?`, [id, systemKey]),
  byEmail: (ex: Executor, systemKey: string, email: string) =>
    ex.get<UserRow>(`SELECT * FROM users WHERE system_key = ? AND email_lower = ?`, [systemKey, email.toLowerCase()]),
  put: (ex: Executor, u: UserRow) => upsert(ex, "users", u as unknown as Record<string, unknown>, ["user_id"]),
  all: (ex: Executor, systemKey: string) => ex.all<UserRow>(`SELECT * FROM users WHERE system_key = ? ORDER BY creation_date, user_id`, [systemKey]),
  async insert(ex: Executor, u: UserRow) {
    await ex.run(`INSERT INTO users(user_id, system_key, email, email_lower, password_hash, creation_date, data) VALUES (?,?,?,?,?,?,?)`,
      [u.user_id, u.system_key, u.email, u.email_lower, u.password_hash, u.creation_date, u.data]);
  },
  /** The rows a parsed query selects over `columns` (its own and custom columns), ordered by its SORT then creation_date, user_id. */
  list(ex: Executor, systemKey: string, q: Query, columns: ColumnMap, read?: ListRead) {
    const { where, tail } = listClauses(ex.dialect, q, columns, "creation_date, user_id", read);
    return ex.all<UserRow>(`SELECT * FROM users WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  /** The number of rows `filters` match. */
  async count(ex: Executor, systemKey: string, filters: Condition[][], columns: ColumnMap) {
    const where = compileWhere(filters, columns, ex.dialect);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM users WHERE system_key = ? AND (${where.sql})`, [systemKey, ...where.args]))!.n;
  },
  update: (ex: Executor, systemKey: string, id: string, email: string, data: string) =>
    ex.run(`UPDATE users SET email = ?, email_lower = ?, data = ? WHERE user_id = ? AND system_key = ?`, [email, email.toLowerCase(), data, id, systemKey]),
  setPassword: (ex: Executor, systemKey: string, id: string, hash: string) =>
    ex.run(`UPDATE users SET password_hash = ? WHERE user_id = ? AND system_key = ?`, [hash, id, systemKey]),
  delete: (ex: Executor, systemKey: string, id: string) =>
    ex.run(`DELETE FROM users WHERE user_id = ? AND system_key = ?`, [id, systemKey]),
  /** Drops a custom column's values from every user of the system. */
  dropDataKey: (ex: Executor, systemKey: string, name: string) =>
    ex.run(`UPDATE users SET data = ${ex.dialect.jsonRemove("data", "?")} WHERE system_key = ?`, [name, systemKey]),
};
