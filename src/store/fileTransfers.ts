// Files moving between an edge and its platform (src/sync/files.ts), as each side keeps them, and
// the bucket set definitions an edge receives from its platform.
import type { Executor } from "./db.ts";
import type { BucketSetRow } from "./fileAreas.ts";

export type TransferRole = "send" | "receive";
export type TransferStatus = "pending" | "transferring" | "synced" | "failed";

export interface FileTransferRow {
  id: string; system_key: string;
  /** on the platform the edge at the other end; on an edge, the edge itself */
  edge: string;
  role: TransferRole;
  set_name: string;
  /** the file's path as the receiver places it (relative to the box it lands in) */
  path: string;
  /** the sender: the file's key in its set; the receiver: where it lands */
  source: string;
  size: number;
  /** the file's SHA-256 ('' until its last bytes were sent) */
  sha256: string;
  /** bytes the receiver holds (as last recorded) */
  done: number;
  status: TransferStatus; error: string;
  created_ms: number; updated_ms: number;
}

/** Finished transfers kept per edge and role (the oldest beyond go). */
const KEPT_FINISHED = 1000;

const num = (r: FileTransferRow | undefined): FileTransferRow | undefined =>
  r && { ...r, size: Number(r.size), done: Number(r.done), created_ms: Number(r.created_ms), updated_ms: Number(r.updated_ms) };

export const fileTransfersRepo = {
  get: async (ex: Executor, id: string) => num(await ex.get<FileTransferRow>(`SELECT * FROM file_transfers WHERE id = ?`, [id])),
  insert: (ex: Executor, r: FileTransferRow) =>
    ex.run(`INSERT INTO file_transfers(id, system_key, edge, role, set_name, path, source, size, sha256, done, status, error, created_ms, updated_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
      [r.id, r.system_key, r.edge, r.role, r.set_name, r.path, r.source, r.size, r.sha256, r.done, r.status, r.error, r.created_ms, r.updated_ms]),
  progress: (ex: Executor, id: string, status: TransferStatus, done: number, error = "") =>
    ex.run(`UPDATE file_transfers SET status = ?, done = ?, error = ?, updated_ms = ? WHERE id = ?`, [status, done, error.slice(0, 2000), Date.now(), id]),
  /** The file's SHA-256, once known (after its last bytes). */
  hashed: (ex: Executor, id: string, sha256: string) => ex.run(`UPDATE file_transfers SET sha256 = ? WHERE id = ?`, [sha256, id]),
  delete: (ex: Executor, id: string) => ex.run(`DELETE FROM file_transfers WHERE id = ?`, [id]),
  /** The unfinished transfers of one side and peer, oldest first. */
  unfinished: async (ex: Executor, systemKey: string, edge: string, role: TransferRole) =>
    (await ex.all<FileTransferRow>(`SELECT * FROM file_transfers WHERE system_key = ? AND edge = ? AND role = ? AND status IN ('pending', 'transferring') ORDER BY created_ms, id`,
      [systemKey, edge, role])).map((r) => num(r)!),
  /** The peers of a system that one side has unfinished transfers with. */
  peersWithUnfinished: async (ex: Executor, systemKey: string, role: TransferRole) =>
    (await ex.all<{ edge: string }>(`SELECT DISTINCT edge FROM file_transfers WHERE system_key = ? AND role = ? AND status IN ('pending', 'transferring')`, [systemKey, role])).map((r) => r.edge),
  /** The unfinished transfers of one side and peer to or from the same place. */
  samePath: async (ex: Executor, systemKey: string, edge: string, role: TransferRole, set: string, path: string) =>
    (await ex.all<FileTransferRow>(`SELECT * FROM file_transfers WHERE system_key = ? AND edge = ? AND role = ? AND set_name = ? AND path = ? AND status IN ('pending', 'transferring')`,
      [systemKey, edge, role, set, path])).map((r) => num(r)!),
  /** Every transfer with an edge, both ways, newest first (its status). */
  forEdge: async (ex: Executor, systemKey: string, edge: string) =>
    (await ex.all<FileTransferRow>(`SELECT * FROM file_transfers WHERE system_key = ? AND edge = ? ORDER BY created_ms DESC, id LIMIT ?`, [systemKey, edge, 2 * KEPT_FINISHED + 200])).map((r) => num(r)!),
  /** Drops every transfer with an edge (of every edge of the system with none named); their ids. */
  async forget(ex: Executor, systemKey: string, edge?: string): Promise<string[]> {
    const where = edge === undefined ? `system_key = ?` : `system_key = ? AND edge = ?`;
    const args = edge === undefined ? [systemKey] : [systemKey, edge];
    const ids = (await ex.all<{ id: string }>(`SELECT id FROM file_transfers WHERE ${where}`, args)).map((r) => r.id);
    await ex.run(`DELETE FROM file_transfers WHERE ${where}`, args);
    return ids;
  },
  /** Drops the oldest finished transfers of a peer and role beyond the number kept. */
  async prune(ex: Executor, systemKey: string, edge: string, role: TransferRole) {
    const cut = await ex.get<{ created_ms: number }>(`SELECT created_ms FROM file_transfers WHERE system_key = ? AND edge = ? AND role = ? AND status IN ('synced', 'failed') ORDER BY created_ms DESC LIMIT 1 OFFSET ?`,
      [systemKey, edge, role, KEPT_FINISHED]);
    if (cut) await ex.run(`DELETE FROM file_transfers WHERE system_key = ? AND edge = ? AND role = ? AND status IN ('synced', 'failed') AND created_ms <= ?`, [systemKey, edge, role, Number(cut.created_ms)]);
  },
};

/** Bucket set definitions as edge sync writes them on an edge (create or replace). */
export const syncedBucketSetsRepo = {
  put: (ex: Executor, r: BucketSetRow) =>
    ex.run(`INSERT INTO bucket_sets(system_key, name, platform_storage, platform_config, edge_storage, edge_config, created_at) VALUES (?,?,?,?,?,?,?)
      ON CONFLICT (system_key, name) DO UPDATE SET platform_storage = excluded.platform_storage, platform_config = excluded.platform_config,
      edge_storage = excluded.edge_storage, edge_config = excluded.edge_config, created_at = excluded.created_at`,
      [r.system_key, r.name, r.platform_storage, r.platform_config, r.edge_storage, r.edge_config, r.created_at]),
};
