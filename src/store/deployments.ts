// Deployments: named sets of a system's assets and the edges that get them.
import { type ColumnMap, type Query, selectedColumns } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { listClauses, upsert } from "./sql.ts";

/** `assets` is a JSON array of asset entries, `edges` a JSON array of edge names. */
export interface DeploymentRow { system_key: string; name: string; description: string; assets: string; edges: string; created_at: string; updated_at: string }

/** What a query of deployments may name. */
const COLUMNS: ColumnMap = {
  name: { sql: "name", type: "string" }, description: { sql: "description", type: "string" },
  created_at: { sql: "created_at", type: "string" }, updated_at: { sql: "updated_at", type: "string" },
};

export const deploymentsRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<DeploymentRow>(`SELECT * FROM deployments WHERE system_key = ? AND name = ?`, [systemKey, name]),
  all: (ex: Executor, systemKey: string) => ex.all<DeploymentRow>(`SELECT * FROM deployments WHERE system_key = ? ORDER BY name`, [systemKey]),
  /** The deployments a parsed query selects, ordered by its SORT then name (whole rows: the caller
   *  keeps the SELECTCOLUMNS it wants). */
  list(ex: Executor, systemKey: string, q: Query) {
    // (SELECTCOLUMNS names columns of this map too: an unknown one is refused, as in FILTERS)
    selectedColumns(q, COLUMNS);
    const { where, tail } = listClauses(ex.dialect, q, COLUMNS, "name");
    return ex.all<DeploymentRow>(`SELECT * FROM deployments WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  count: async (ex: Executor, systemKey: string) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM deployments WHERE system_key = ?`, [systemKey]))!.n),
  put: (ex: Executor, r: DeploymentRow) => upsert(ex, "deployments", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM deployments WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
