// External database connections: the credentials are stored sealed (src/auth/secrets.ts).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface ExternalDbRow { system_key: string; name: string; id: string; db_type: string; credentials: string; created_at: string; updated_at: string }

export const externalDbsRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<ExternalDbRow>(`SELECT * FROM external_dbs WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<ExternalDbRow>(`SELECT * FROM external_dbs WHERE system_key = ? ORDER BY name`, [systemKey]),
  put: (ex: Executor, r: ExternalDbRow) => upsert(ex, "external_dbs", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM external_dbs WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
