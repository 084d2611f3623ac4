// Portal and plugin records of a system (two tables of the same shape).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export type PortalKind = "portal" | "plugin";

export interface PortalRow {
  system_key: string; name: string; description: string;
  /** JSON text; null for a plugin made without one */
  config: string | null;
  /** the record's other fields, a JSON object */
  fields: string;
  updated_at: string;
}

const TABLE: Record<PortalKind, string> = { portal: "portals", plugin: "plugins" };

/** The repository of one kind. */
export const portalsRepo = (kind: PortalKind) => {
  const table = TABLE[kind];
  return {
    get: (ex: Executor, systemKey: string, name: string) => ex.get<PortalRow>(`SELECT * FROM ${table} WHERE system_key = ? AND name = ?`, [systemKey, name]),
    list: (ex: Executor, systemKey: string) => ex.all<PortalRow>(`SELECT * FROM ${table} WHERE system_key = ? ORDER BY name`, [systemKey]),
    count: async (ex: Executor, systemKey: string) =>
      Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE system_key = ?`, [systemKey]))!.n),
    put: (ex: Executor, r: PortalRow) => upsert(ex, table, r as unknown as Record<string, unknown>, ["system_key", "name"]),
    delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM ${table} WHERE system_key = ? AND name = ?`, [systemKey, name]),
  };
};
