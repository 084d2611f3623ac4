// Service cache definitions: name, TTL and description per system (the values are elsewhere:
// store/cacheValues.ts).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface ServiceCacheRow { system_key: string; name: string; id: string; ttl: number; description: string; created_at: string; updated_at: string }

export const serviceCachesRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<ServiceCacheRow>(`SELECT * FROM service_caches WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<ServiceCacheRow>(`SELECT * FROM service_caches WHERE system_key = ? ORDER BY name`, [systemKey]),
  count: async (ex: Executor, systemKey: string) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM service_caches WHERE system_key = ?`, [systemKey]))!.n),
  put: (ex: Executor, r: ServiceCacheRow) => upsert(ex, "service_caches", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM service_caches WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
