// Roles of a system and their members (users and devices).
import { type ColumnMap, type Condition, type Query, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { type ListRead, listClauses, upsert } from "./sql.ts";

export interface RoleRow { role_id: string; system_key: string; name: string; description: string; permissions: string }
export type MemberKind = "user" | "device";

/** What a query of roles may name (the wire spells them several ways). */
const ROLE_COLUMNS: ColumnMap = {
  name: { sql: "name", type: "string" }, Name: { sql: "name", type: "string" },
  description: { sql: "description", type: "string" }, Description: { sql: "description", type: "string" },
  role_id: { sql: "role_id", type: "string" }, ID: { sql: "role_id", type: "string" }, id: { sql: "role_id", type: "string" },
};

export const rolesRepo = {
  byId: (ex: Executor, systemKey: string, id: string) =>
    ex.get<RoleRow>(`SELECT * FROM roles WHERE system_key = ? AND role_id = ?`, [systemKey, id]),
  byName: (ex: Executor, systemKey: string, name: string) =>
    ex.get<RoleRow>(`SELECT * FROM roles WHERE system_key = ? AND name = ?`, [systemKey, name]),
  all: (ex: Executor, systemKey: string) =>
    ex.all<RoleRow>(`SELECT * FROM roles WHERE system_key = ? ORDER BY rowid`, [systemKey]),
  /** The rows a parsed query selects, ordered by its SORT then rowid. */
  list(ex: Executor, systemKey: string, q: Query, read?: ListRead) {
    const { where, tail } = listClauses(ex.dialect, q, ROLE_COLUMNS, "rowid", read);
    return ex.all<RoleRow>(`SELECT * FROM roles WHERE system_key = ? AND (${where.sql})${tail}`, [systemKey, ...where.args]);
  },
  /** The number of rows `filters` match. */
  async count(ex: Executor, systemKey: string, filters: Condition[][]) {
    const where = compileWhere(filters, ROLE_COLUMNS, ex.dialect);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM roles WHERE system_key = ? AND (${where.sql})`, [systemKey, ...where.args]))!.n;
  },
  put: (ex: Executor, r: RoleRow) => upsert(ex, "roles", r as unknown as Record<string, unknown>, ["system_key", "role_id"]),
  /** Sets a subject's roles to exactly `roleIds`. */
  async setMembers(ex: Executor, systemKey: string, kind: MemberKind, subjectId: string, roleIds: string[]) {
    await ex.run(`DELETE FROM role_members WHERE system_key = ? AND subject_kind = ? AND subject_id = ?`, [systemKey, kind, subjectId]);
    for (const r of roleIds) await ex.run(`INSERT INTO role_members(system_key, subject_kind, subject_id, role_id) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`, [systemKey, kind, subjectId, r]);
  },
  insert: (ex: Executor, r: RoleRow) =>
    ex.run(`INSERT INTO roles(role_id, system_key, name, description, permissions) VALUES (?,?,?,?,?)`, [r.role_id, r.system_key, r.name, r.description, r.permissions]),
  update: (ex: Executor, systemKey: string, id: string, name: string, description: string, permissions: string) =>
    ex.run(`UPDATE roles SET name = ?, description = ?, permissions = ? WHERE system_key = ? AND role_id = ?`, [name, description, permissions, systemKey, id]),
  async delete(ex: Executor, systemKey: string, id: string) {
    await ex.run(`DELETE FROM role_members WHERE system_key = ? AND role_id = ?`, [systemKey, id]);
    return ex.run(`DELETE FROM roles WHERE system_key = ? AND role_id = ?`, [systemKey, id]);
  },
  rolesOf: async (ex: Executor, systemKey: string, kind: MemberKind, subjectId: string) =>
    (await ex.all<{ role_id: string }>(`SELECT role_id FROM role_members WHERE system_key = ? AND subject_kind = ? AND subject_id = ? ORDER BY role_id`, [systemKey, kind, subjectId])).map((r) => r.role_id),
  addMember: (ex: Executor, systemKey: string, kind: MemberKind, subjectId: string, roleId: string) =>
    ex.run(`INSERT INTO role_members(system_key, subject_kind, subject_id, role_id) VALUES (?,?,?,?) ON CONFLICT DO NOTHING`, [systemKey, kind, subjectId, roleId]),
  removeMember: (ex: Executor, systemKey: string, kind: MemberKind, subjectId: string, roleId: string) =>
    ex.run(`DELETE FROM role_members WHERE system_key = ? AND subject_kind = ? AND subject_id = ? AND role_id = ?`, [systemKey, kind, subjectId, roleId]),
  removeSubject: (ex: Executor, systemKey: string, kind: MemberKind, subjectId: string) =>
    ex.run(`DELETE FROM role_members WHERE system_key = ? AND subject_kind = ? AND subject_id = ?`, [systemKey, kind, subjectId]),
  members: (ex: Executor, systemKey: string, roleId: string) =>
    ex.all<{ subject_kind: MemberKind; subject_id: string }>(`SELECT subject_kind, subject_id FROM role_members WHERE system_key = ? AND role_id = ?`, [systemKey, roleId]),
};
