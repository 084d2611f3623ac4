// Chosen device keys waiting for their argon2id hash (domain/deviceKeyHashes.ts computes it after
// the request that set the key): the key sealed, and the stand-in hash its device row holds.
import type { Executor } from "./db.ts";
import { inParts, marks } from "./sql.ts";

export interface DeviceKeyJobRow { pending_hash: string; system_key: string; name: string; sealed_key: string; created_ms: number }

const COLUMNS = ["pending_hash", "system_key", "name", "sealed_key", "created_ms"] as const;

export const deviceKeyJobsRepo = {
  async insertMany(ex: Executor, rows: DeviceKeyJobRow[]) {
    const tuple = `(${marks(COLUMNS.length)})`;
    for (const chunk of inParts(rows))
      await ex.run(`INSERT INTO device_key_jobs(${COLUMNS.join(", ")}) VALUES ${chunk.map(() => tuple).join(", ")}`, chunk.flatMap((r) => COLUMNS.map((c) => r[c])));
  },
  /** The oldest `limit` jobs. */
  oldest: (ex: Executor, limit: number) =>
    ex.all<DeviceKeyJobRow>(`SELECT * FROM device_key_jobs ORDER BY created_ms, pending_hash LIMIT ?`, [limit]),
  count: async (ex: Executor) => Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM device_key_jobs`))!.n),
  remove: (ex: Executor, pendingHash: string) => ex.run(`DELETE FROM device_key_jobs WHERE pending_hash = ?`, [pendingHash]),
  /** A device's jobs (it was deleted, or given another key). */
  removeDevice: (ex: Executor, systemKey: string, name: string) =>
    ex.run(`DELETE FROM device_key_jobs WHERE system_key = ? AND name = ?`, [systemKey, name]),
};
