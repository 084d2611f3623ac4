// A system's user secrets: one row per name, the value sealed (the domain seals and opens it).
import { type ColumnMap, type Condition, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface UserSecretRow { system_key: string; name: string; sealed: string; updated_at: string }

/** What a query may filter on: the name only (values are sealed). */
const COLUMNS: ColumnMap = { name: { sql: "name", type: "string" } };

function matching(ex: Executor, systemKey: string, filters: Condition[][]) {
  const where = compileWhere(filters, COLUMNS, ex.dialect);
  return { sql: `system_key = ? AND (${where.sql})`, args: [systemKey, ...where.args] };
}

export const userSecretsRepo = {
  get: (ex: Executor, systemKey: string, name: string) =>
    ex.get<UserSecretRow>(`SELECT * FROM user_secrets WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) =>
    ex.all<UserSecretRow>(`SELECT * FROM user_secrets WHERE system_key = ? ORDER BY name`, [systemKey]),
  find: (ex: Executor, systemKey: string, filters: Condition[][]) => {
    const w = matching(ex, systemKey, filters);
    return ex.all<UserSecretRow>(`SELECT * FROM user_secrets WHERE ${w.sql} ORDER BY name`, w.args);
  },
  count: async (ex: Executor, systemKey: string) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM user_secrets WHERE system_key = ?`, [systemKey]))!.n),
  put: (ex: Executor, r: UserSecretRow) => upsert(ex, "user_secrets", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM user_secrets WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
