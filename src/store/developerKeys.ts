// Developer keys: long-lived, scoped developer access (the token is a tokens row of kind devkey).
import type { Executor } from "./db.ts";

export interface DeveloperKeyRow {
  id: string; developer_id: string; name: string; token_hash: string;
  /** JSON array of system keys, or null for every system of the developer */
  systems: string | null;
  read_only: number; created_at: string;
  /** unix seconds; 0 = never */
  expires_at: number;
}

export const developerKeysRepo = {
  byId: (ex: Executor, id: string) => ex.get<DeveloperKeyRow>(`SELECT * FROM developer_keys WHERE id = ?`, [id]),
  forDeveloper: (ex: Executor, developerId: string) =>
    ex.all<DeveloperKeyRow>(`SELECT * FROM developer_keys WHERE developer_id = ? ORDER BY created_at, id`, [developerId]),
  count: async (ex: Executor, developerId: string) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM developer_keys WHERE developer_id = ?`, [developerId]))!.n),
  insert: (ex: Executor, k: DeveloperKeyRow) =>
    ex.run(`INSERT INTO developer_keys(id, developer_id, name, token_hash, systems, read_only, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?)`,
      [k.id, k.developer_id, k.name, k.token_hash, k.systems, k.read_only, k.created_at, k.expires_at]),
  delete: (ex: Executor, id: string) => ex.run(`DELETE FROM developer_keys WHERE id = ?`, [id]),
};
