// Bucket set and file store definitions of a system (the files live in their storage backends,
// src/store/files/).
import type { Executor } from "./db.ts";

export interface BucketSetRow {
  system_key: string; name: string;
  platform_storage: string;
  /** JSON text, credentials sealed */
  platform_config: string;
  edge_storage: string;
  edge_config: string;
  created_at: string;
}

export interface FileStoreRow {
  system_key: string; name: string;
  storage_type: string;
  /** JSON text, credentials sealed */
  storage_config: string;
  read_auth_method: string;
  write_auth_method: string;
  created_at: string;
}

const repo = <R extends { system_key: string; name: string }>(table: string, columns: (keyof R & string)[]) => ({
  get: (ex: Executor, systemKey: string, name: string) => ex.get<R>(`SELECT * FROM ${table} WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<R>(`SELECT * FROM ${table} WHERE system_key = ? ORDER BY name`, [systemKey]),
  count: async (ex: Executor, systemKey: string) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE system_key = ?`, [systemKey]))!.n),
  insert: (ex: Executor, r: R) =>
    ex.run(`INSERT INTO ${table}(${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, columns.map((c) => r[c] as unknown)),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM ${table} WHERE system_key = ? AND name = ?`, [systemKey, name]),
});

export const bucketSetsRepo = repo<BucketSetRow>("bucket_sets",
  ["system_key", "name", "platform_storage", "platform_config", "edge_storage", "edge_config", "created_at"]);
export const fileStoresRepo = repo<FileStoreRow>("file_stores",
  ["system_key", "name", "storage_type", "storage_config", "read_auth_method", "write_auth_method", "created_at"]);
