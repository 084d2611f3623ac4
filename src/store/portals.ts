// Portal and plugin records of a system (one table, told apart by kind).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export type PortalKind = "portal" | "plugin";

export interface PortalRow {
  system_key: string; kind: PortalKind; name: string; description: string;
  /** JSON text; null for a plugin made without one */
  config: string | null;
  /** the record's other fields, a JSON object */
  fields: string;
  updated_at: string;
}

export const portalsRepo = {
  get: (ex: Executor, systemKey: string, kind: PortalKind, name: string) =>
    ex.get<PortalRow>(`SELECT * FROM portals WHERE system_key = ? AND kind = ? AND name = ?`, [systemKey, kind, name]),
  list: (ex: Executor, systemKey: string, kind: PortalKind) =>
    ex.all<PortalRow>(`SELECT * FROM portals WHERE system_key = ? AND kind = ? ORDER BY name`, [systemKey, kind]),
  count: async (ex: Executor, systemKey: string, kind: PortalKind) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM portals WHERE system_key = ? AND kind = ?`, [systemKey, kind]))!.n),
  put: (ex: Executor, r: PortalRow) => upsert(ex, "portals", r as unknown as Record<string, unknown>, ["system_key", "kind", "name"]),
  delete: (ex: Executor, systemKey: string, kind: PortalKind, name: string) =>
    ex.run(`DELETE FROM portals WHERE system_key = ? AND kind = ? AND name = ?`, [systemKey, kind, name]),
};
