// Code services, libraries (with their versions) and failed-run records.
import type { ColumnMap, Query } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { listClauses, upsert } from "./sql.ts";

export interface ServiceRow {
  system_key: string; name: string; code: string; params: string; dependencies: string; run_user: string;
  execution_timeout: number; concurrency: number; logging_enabled: number; auto_restart: number; auto_balance: number;
  log_ttl_minutes: number; run_on_edge: number; run_on_platform: number; version: number; created_at: string; updated_at: string;
}
export interface LibraryRow {
  system_key: string; name: string; code: string; dependencies: string; description: string; api: string;
  visibility: string; version: number; created_at: string; updated_at: string;
}
export interface FailedRunRow {
  id: string; system_key: string; service_name: string; params: string; error: string;
  user_id: string; user_type: string; trigger: string; created_at: string;
}

const SERVICE_COLS = ["system_key", "name", "code", "params", "dependencies", "run_user", "execution_timeout", "concurrency", "logging_enabled",
  "auto_restart", "auto_balance", "log_ttl_minutes", "run_on_edge", "run_on_platform", "version", "created_at", "updated_at"] as const;
const LIBRARY_COLS = ["system_key", "name", "code", "dependencies", "description", "api", "visibility", "version", "created_at", "updated_at"] as const;

const insertSql = (table: string, cols: readonly string[]) => `INSERT INTO ${table}(${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`;
const updateSql = (table: string, cols: readonly string[]) => `UPDATE ${table} SET ${cols.filter((c) => c !== "system_key" && c !== "name" && c !== "created_at").map((c) => `${c} = ?`).join(", ")} WHERE system_key = ? AND name = ?`;
const updateArgs = <T extends Record<string, unknown>>(cols: readonly string[], row: T) =>
  [...cols.filter((c) => c !== "system_key" && c !== "name" && c !== "created_at").map((c) => row[c]), row.system_key, row.name];

export const servicesRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<ServiceRow>(`SELECT * FROM services WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<ServiceRow>(`SELECT * FROM services WHERE system_key = ? ORDER BY name`, [systemKey]),
  insert: (ex: Executor, r: ServiceRow) => ex.run(insertSql("services", SERVICE_COLS), SERVICE_COLS.map((c) => r[c])),
  update: (ex: Executor, r: ServiceRow) => ex.run(updateSql("services", SERVICE_COLS), updateArgs(SERVICE_COLS, r as unknown as Record<string, unknown>)),
  delete: (ex: Executor, systemKey: string, name: string) => ex.run(`DELETE FROM services WHERE system_key = ? AND name = ?`, [systemKey, name]),
  put: (ex: Executor, r: ServiceRow) => upsert(ex, "services", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  /** Stream services (execution_timeout -1) that restart by themselves. */
  streamServices: (ex: Executor) => ex.all<{ system_key: string; name: string }>(`SELECT system_key, name FROM services WHERE execution_timeout = -1 AND auto_restart = 1`),
};

export const librariesRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<LibraryRow>(`SELECT * FROM libraries WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) => ex.all<LibraryRow>(`SELECT * FROM libraries WHERE system_key = ? ORDER BY name`, [systemKey]),
  insert: (ex: Executor, r: LibraryRow) => ex.run(insertSql("libraries", LIBRARY_COLS), LIBRARY_COLS.map((c) => r[c])),
  update: (ex: Executor, r: LibraryRow) => ex.run(updateSql("libraries", LIBRARY_COLS), updateArgs(LIBRARY_COLS, r as unknown as Record<string, unknown>)),
  delete: async (ex: Executor, systemKey: string, name: string) => {
    await ex.run(`DELETE FROM library_versions WHERE system_key = ? AND name = ?`, [systemKey, name]);
    return ex.run(`DELETE FROM libraries WHERE system_key = ? AND name = ?`, [systemKey, name]);
  },
  put: (ex: Executor, r: LibraryRow) => upsert(ex, "libraries", r as unknown as Record<string, unknown>, ["system_key", "name"]),
  addVersion: (ex: Executor, r: LibraryRow) =>
    ex.run(`INSERT INTO library_versions(system_key, name, version, code, dependencies, description, created_at) VALUES (?,?,?,?,?,?,?)`,
      [r.system_key, r.name, r.version, r.code, r.dependencies, r.description, r.updated_at]),
  versions: (ex: Executor, systemKey: string, name: string) =>
    ex.all<{ version: number; code: string; dependencies: string; description: string; created_at: string }>(
      `SELECT version, code, dependencies, description, created_at FROM library_versions WHERE system_key = ? AND name = ? ORDER BY version`, [systemKey, name]),
};

/** What a query of failed runs may name. */
const FAILED_RUN_COLUMNS: ColumnMap = {
  id: { sql: "id", type: "string" }, service_name: { sql: "service_name", type: "string" },
  user_id: { sql: "user_id", type: "string" }, created_at: { sql: "created_at", type: "string" },
  error: { sql: "error", type: "string" }, trigger: { sql: "trigger", type: "string" },
};

export const failedRunsRepo = {
  insert: (ex: Executor, r: FailedRunRow) =>
    ex.run(`INSERT INTO failed_runs(id, system_key, service_name, params, error, user_id, user_type, trigger, created_at) VALUES (?,?,?,?,?,?,?,?,?)`,
      [r.id, r.system_key, r.service_name, r.params, r.error, r.user_id, r.user_type, r.trigger, r.created_at]),
  /** The failed runs a parsed query selects, in its SORT order (newest first without one). */
  list(ex: Executor, systemKey: string, q: Query) {
    const sort = q.sort.length ? q.sort : [{ field: "created_at", desc: true }];
    const { where, tail } = listClauses(ex.dialect, { ...q, sort }, FAILED_RUN_COLUMNS, undefined);
    return ex.all<FailedRunRow>(`SELECT * FROM failed_runs WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  byIds: (ex: Executor, systemKey: string, ids: string[]) =>
    ex.all<FailedRunRow>(`SELECT * FROM failed_runs WHERE system_key = ? AND id IN (${ids.map(() => "?").join(",")})`, [systemKey, ...ids]),
  delete: (ex: Executor, systemKey: string, ids: string[]) =>
    ex.run(`DELETE FROM failed_runs WHERE system_key = ? AND id IN (${ids.map(() => "?").join(",")})`, [systemKey, ...ids]),
  /** Keeps the newest `keep` failures of a service. */
  trim: (ex: Executor, systemKey: string, service: string, keep: number) =>
    ex.run(`DELETE FROM failed_runs WHERE system_key = ? AND service_name = ? AND id NOT IN (SELECT id FROM failed_runs WHERE system_key = ? AND service_name = ? ORDER BY created_at DESC LIMIT ?)`,
      [systemKey, service, systemKey, service, keep]),
};

export interface CodeLogRow { id: string; system_key: string; service_name: string; started_at: string; duration_ms: number; success: number; log: string }

export const codeLogsRepo = {
  insert: (ex: Executor, r: CodeLogRow) =>
    ex.run(`INSERT INTO code_logs(id, system_key, service_name, started_at, duration_ms, success, log) VALUES (?,?,?,?,?,?,?)`,
      [r.id, r.system_key, r.service_name, r.started_at, r.duration_ms, r.success, r.log]),
  list: (ex: Executor, systemKey: string, service: string, limit: number) =>
    ex.all<CodeLogRow>(`SELECT * FROM code_logs WHERE system_key = ? AND service_name = ? ORDER BY started_at DESC, id LIMIT ?`, [systemKey, service, limit]),
  get: (ex: Executor, systemKey: string, service: string, id: string) =>
    ex.get<CodeLogRow>(`SELECT * FROM code_logs WHERE system_key = ? AND service_name = ? AND id = ?`, [systemKey, service, id]),
  /** Keeps a service's newest `keep` logs, none older than `since` (ISO). */
  trim: (ex: Executor, systemKey: string, service: string, keep: number, since: string) =>
    ex.run(`DELETE FROM code_logs WHERE system_key = ? AND service_name = ? AND (started_at < ? OR id NOT IN (SELECT id FROM code_logs WHERE system_key = ? AND service_name = ? ORDER BY started_at DESC, id LIMIT ?))`,
      [systemKey, service, since, systemKey, service, keep]),
  deleteService: (ex: Executor, systemKey: string, service: string) => ex.run(`DELETE FROM code_logs WHERE system_key = ? AND service_name = ?`, [systemKey, service]),
  setLogging: (ex: Executor, systemKey: string, service: string, on: boolean) =>
    ex.run(`UPDATE services SET logging_enabled = ? WHERE system_key = ? AND name = ?`, [on ? 1 : 0, systemKey, service]),
};
