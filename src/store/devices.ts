// Devices of a system.
import { type ColumnMap, type Condition, type Query, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { inParts, type ListRead, listClauses, marks, upsert } from "./sql.ts";

export interface DeviceRow {
  system_key: string; name: string; type: string; state: string; description: string;
  enabled: number; allow_key_auth: number; allow_certificate_auth: number;
  active_key_hash: string | null; key_hashes: string; certificate: string;
  created_date: number; last_active_date: number; data: string;
  /** JSON array: fast verifiers of the keys a client chose (auth/deviceKeys.ts) */
  key_verifiers: string;
}

/** Columns a device update may set (validated by the domain layer). */
export type DeviceChanges = Partial<Omit<DeviceRow, "system_key" | "name" | "created_date">>;

const COLUMNS = ["system_key", "name", "type", "state", "description", "enabled", "allow_key_auth", "allow_certificate_auth",
  "active_key_hash", "key_hashes", "certificate", "created_date", "last_active_date", "data", "key_verifiers"] as const;

/** The devices table's own columns, for queries (custom columns read the data document). */
export const DEVICE_COLUMNS: ColumnMap = {
  name: { sql: "name", type: "string" }, type: { sql: "type", type: "string" }, state: { sql: "state", type: "string" },
  description: { sql: "description", type: "string" }, enabled: { sql: "enabled", type: "bool" },
  allow_key_auth: { sql: "allow_key_auth", type: "bool" }, allow_certificate_auth: { sql: "allow_certificate_auth", type: "bool" },
  certificate: { sql: "certificate", type: "string" },
  created_date: { sql: "created_date", type: "int" }, last_active_date: { sql: "last_active_date", type: "int" },
};

export const devicesRepo = {
  byName: (ex: Executor, systemKey: string, name: string) =>
    ex.get<DeviceRow>(`SELECT * FROM devices WHERE system_key = ? AND name = ?`, [systemKey, name]),
  put: (ex: Executor, d: DeviceRow) => upsert(ex, "devices", d as unknown as Record<string, unknown>, ["system_key", "name"]),
  all: (ex: Executor, systemKey: string) => ex.all<DeviceRow>(`SELECT * FROM devices WHERE system_key = ? ORDER BY name`, [systemKey]),
  insert: (ex: Executor, d: DeviceRow) =>
    ex.run(`INSERT INTO devices(${COLUMNS.join(", ")}) VALUES (${COLUMNS.map(() => "?").join(", ")})`, COLUMNS.map((c) => d[c])),
  async insertMany(ex: Executor, rows: DeviceRow[]) {
    const tuple = `(${marks(COLUMNS.length)})`;
    for (const chunk of inParts(rows))
      await ex.run(`INSERT INTO devices(${COLUMNS.join(", ")}) VALUES ${chunk.map(() => tuple).join(", ")}`, chunk.flatMap((d) => COLUMNS.map((c) => d[c])));
  },
  /** Which of `names` are devices of the system. */
  async existing(ex: Executor, systemKey: string, names: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const chunk of inParts(names))
      for (const r of await ex.all<{ name: string }>(`SELECT name FROM devices WHERE system_key = ? AND name IN (${marks(chunk.length)})`, [systemKey, ...chunk])) out.push(r.name);
    return out;
  },
  /** The rows a parsed query selects over `columns` (its own and custom columns), ordered by its SORT then created_date, name. */
  list(ex: Executor, systemKey: string, q: Query, columns: ColumnMap, read?: ListRead) {
    const { where, tail } = listClauses(ex.dialect, q, columns, "created_date, name", read);
    return ex.all<DeviceRow>(`SELECT * FROM devices WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  /** The number of rows `filters` match. */
  async count(ex: Executor, systemKey: string, filters: Condition[][], columns: ColumnMap) {
    const where = compileWhere(filters, columns, ex.dialect);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM devices WHERE system_key = ? AND (${where.sql})`, [systemKey, ...where.args]))!.n;
  },
  async update(ex: Executor, systemKey: string, name: string, changes: DeviceChanges) {
    const keys = Object.keys(changes).filter((k) => (COLUMNS as readonly string[]).includes(k)) as (keyof DeviceChanges)[];
    if (!keys.length) return;
    await ex.run(`UPDATE devices SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE system_key = ? AND name = ?`,
      [...keys.map((k) => changes[k]), systemKey, name]);
  },
  /** Puts the real hash of a chosen key in place of its stand-in (deviceKeyJobs.ts), with the
   *  verifiers to keep; false when the device no longer holds the stand-in (deleted, or given
   *  another key meanwhile). */
  replaceKeyHash: async (ex: Executor, systemKey: string, name: string, standIn: string, hash: string, verifiers: string) =>
    (await ex.run(`UPDATE devices SET active_key_hash = ?, key_verifiers = ? WHERE system_key = ? AND name = ? AND active_key_hash = ?`,
      [hash, verifiers, systemKey, name, standIn])).changes > 0,
  touch: (ex: Executor, systemKey: string, name: string, at: number) =>
    ex.run(`UPDATE devices SET last_active_date = ? WHERE system_key = ? AND name = ?`, [at, systemKey, name]),
  delete: (ex: Executor, systemKey: string, name: string) =>
    ex.run(`DELETE FROM devices WHERE system_key = ? AND name = ?`, [systemKey, name]),
  countAll: async (ex: Executor, systemKey: string) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM devices WHERE system_key = ?`, [systemKey]))!.n,
  dropDataKey: (ex: Executor, systemKey: string, name: string) =>
    ex.run(`UPDATE devices SET data = ${ex.dialect.jsonRemove("data", "?")} WHERE system_key = ?`, [name, systemKey]),
};
