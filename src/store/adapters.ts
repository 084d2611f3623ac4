// Adapters: definitions, every version of every file, and file
// contents stored once by their hash however many versions or adapters share them.
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface AdapterRow {
  system_key: string; name: string; description: string; protocol: string; architecture: string; os: string;
  deploy_command: string; start_command: string; stop_command: string; status_command: string; undeploy_command: string; logs_command: string;
  run_stop_on_deploy: number; run_start_on_deploy: number; run_deploy_on_deploy: number;
  version: number; created_at: string; updated_at: string;
}

export interface AdapterFileRow {
  system_key: string; adapter_name: string; name: string; version: number; path_name: string;
  owner: string; group_name: string; permissions: string; hash: string; size: number; created_at: string;
}

export const adaptersRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<AdapterRow>(`SELECT * FROM adapters WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<AdapterRow>(`SELECT * FROM adapters WHERE system_key = ? ORDER BY name`, [systemKey]),
  put: (ex: Executor, r: AdapterRow) => upsert(ex, "adapters", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  /** The adapter with every file of it. */
  delete: async (ex: Executor, systemKey: string, name: string) => {
    await ex.run(`DELETE FROM adapter_files WHERE system_key = ? AND adapter_name = ?`, [systemKey, name]);
    return ex.run(`DELETE FROM adapters WHERE system_key = ? AND name = ?`, [systemKey, name]);
  },
};

export const adapterFilesRepo = {
  /** Every version of every file, oldest first. */
  versions: (ex: Executor, systemKey: string, adapter: string) =>
    ex.all<AdapterFileRow>(`SELECT * FROM adapter_files WHERE system_key = ? AND adapter_name = ? ORDER BY name, version`, [systemKey, adapter]),
  /** The newest version of each file with its content (null: the content is missing), read in
   *  one statement: a file and its content as they were at one moment. */
  currentWithContent: (ex: Executor, systemKey: string, adapter: string) =>
    ex.all<AdapterFileRow & { content: Uint8Array | null }>(`SELECT f.*, b.content FROM adapter_files f LEFT JOIN blobs b ON b.hash = f.hash
      WHERE f.system_key = ? AND f.adapter_name = ?
      AND f.version = (SELECT MAX(version) FROM adapter_files g WHERE g.system_key = f.system_key AND g.adapter_name = f.adapter_name AND g.name = f.name)
      ORDER BY f.name`, [systemKey, adapter]),
  get: (ex: Executor, systemKey: string, adapter: string, name: string, version?: number) =>
    version === undefined
      ? ex.get<AdapterFileRow>(`SELECT * FROM adapter_files WHERE system_key = ? AND adapter_name = ? AND name = ? ORDER BY version DESC LIMIT 1`, [systemKey, adapter, name])
      : ex.get<AdapterFileRow>(`SELECT * FROM adapter_files WHERE system_key = ? AND adapter_name = ? AND name = ? AND version = ?`, [systemKey, adapter, name, version]),
  insert: (ex: Executor, r: AdapterFileRow) => upsert(ex, "adapter_files", r as unknown as Record<string, unknown>, ["system_key", "adapter_name", "name", "version"]),
  delete: (ex: Executor, systemKey: string, adapter: string, name: string) =>
    ex.run(`DELETE FROM adapter_files WHERE system_key = ? AND adapter_name = ? AND name = ?`, [systemKey, adapter, name]),
  /** An edge keeps the current versions only: what the platform sent replaces what it had. */
  replaceAll: async (ex: Executor, systemKey: string, adapter: string, rows: AdapterFileRow[]) => {
    await ex.run(`DELETE FROM adapter_files WHERE system_key = ? AND adapter_name = ?`, [systemKey, adapter]);
    for (const r of rows) await upsert(ex, "adapter_files", r as unknown as Record<string, unknown>, ["system_key", "adapter_name", "name", "version"]);
  },
};

export const blobsRepo = {
  put: (ex: Executor, hash: string, content: Uint8Array) => ex.run(`INSERT INTO blobs(hash, content) VALUES (?, ?) ON CONFLICT(hash) DO NOTHING`, [hash, content]),
  get: async (ex: Executor, hash: string): Promise<Uint8Array | null> => (await ex.get<{ content: Uint8Array }>(`SELECT content FROM blobs WHERE hash = ?`, [hash]))?.content ?? null,
  /** Contents no file version refers to any more. */
  collect: (ex: Executor) => ex.run(`DELETE FROM blobs WHERE hash NOT IN (SELECT DISTINCT hash FROM adapter_files)`),
};
