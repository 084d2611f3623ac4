// Systems and their settings.
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface SystemRow {
  system_key: string; system_secret: string; name: string; description: string; owner_id: string;
  token_ttl: number; token_ttl_user: number | null; token_ttl_device: number | null;
  auth_required: number; registration: number; created_at: string;
}
export type SystemChanges = Partial<Pick<SystemRow, "name" | "description" | "token_ttl" | "token_ttl_user" | "token_ttl_device" | "auth_required" | "registration" | "system_secret">>;

export const systemsRepo = {
  byKey: (ex: Executor, key: string) => ex.get<SystemRow>(`SELECT * FROM systems WHERE system_key = ?`, [key]),
  byOwner: (ex: Executor, ownerId: string) => ex.all<SystemRow>(`SELECT * FROM systems WHERE owner_id = ? ORDER BY created_at, system_key`, [ownerId]),
  all: (ex: Executor) => ex.all<SystemRow>(`SELECT * FROM systems ORDER BY created_at, system_key`),
  async insert(ex: Executor, s: SystemRow) {
    await ex.run(
      `INSERT INTO systems(system_key, system_secret, name, description, owner_id, token_ttl, token_ttl_user, token_ttl_device, auth_required, registration, created_at)
       VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
      [s.system_key, s.system_secret, s.name, s.description, s.owner_id, s.token_ttl, s.token_ttl_user, s.token_ttl_device, s.auth_required, s.registration, s.created_at],
    );
  },
  async update(ex: Executor, key: string, changes: SystemChanges) {
    const keys = Object.keys(changes) as (keyof SystemChanges)[];
    if (!keys.length) return;
    await ex.run(`UPDATE systems SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE system_key = ?`, [...keys.map((k) => changes[k]), key]);
  },
  delete: (ex: Executor, key: string) => ex.run(`DELETE FROM systems WHERE system_key = ?`, [key]),
  put: (ex: Executor, s: SystemRow) => upsert(ex, "systems", s as unknown as Record<string, unknown>, ["system_key"]),
};
