// Developer accounts (platform level).
import type { Executor } from "./db.ts";
import { upsert } from "./sql.ts";

export interface DeveloperRow {
  id: string; email: string; email_lower: string; password_hash: string;
  fname: string; lname: string; org: string; phone: string; admin: number;
  two_factor_enabled: number; two_factor_method: string; creation_date: string; last_login: string | null;
}

/** What an edge learns of its system's developer. */
export type DeveloperProfile = Pick<DeveloperRow, "id" | "email" | "fname" | "lname" | "org" | "phone" | "creation_date">;
export const developerProfile = (d: DeveloperRow): DeveloperProfile =>
  ({ id: d.id, email: d.email, fname: d.fname, lname: d.lname, org: d.org, phone: d.phone, creation_date: d.creation_date });

/** Columns a developer may change about themselves (PUT /admin/userinfo). */
export type DeveloperChanges = Partial<Pick<DeveloperRow, "fname" | "lname" | "org" | "phone" | "two_factor_enabled" | "two_factor_method" | "email" | "email_lower">>;

export const developersRepo = {
  byId: (ex: Executor, id: string) => ex.get<DeveloperRow>(`SELECT * FROM developers WHERE id = ?`, [id]),
  byEmail: (ex: Executor, email: string) => ex.get<DeveloperRow>(`SELECT * FROM developers WHERE email_lower = ?`, [email.toLowerCase()]),
  count: async (ex: Executor) => (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM developers`))!.n,
  async insert(ex: Executor, d: Omit<DeveloperRow, "last_login" | "two_factor_enabled" | "two_factor_method" | "phone"> & { phone?: string }) {
    await ex.run(
      `INSERT INTO developers(id, email, email_lower, password_hash, fname, lname, org, phone, admin, creation_date) VALUES (?,?,?,?,?,?,?,?,?,?)`,
      [d.id, d.email, d.email_lower, d.password_hash, d.fname, d.lname, d.org, d.phone ?? "", d.admin, d.creation_date],
    );
  },
  async update(ex: Executor, id: string, changes: DeveloperChanges) {
    const keys = Object.keys(changes) as (keyof DeveloperChanges)[];
    if (!keys.length) return;
    // keys come from the DeveloperChanges type, validated by the domain layer, never from request text
    await ex.run(`UPDATE developers SET ${keys.map((k) => `${k} = ?`).join(", ")} WHERE id = ?`, [...keys.map((k) => changes[k]), id]);
  },
  put: (ex: Executor, d: DeveloperRow) => upsert(ex, "developers", d as unknown as Record<string, unknown>, ["id"]),
  /** An edge's copy of its system's developer, as the platform describes it: the profile only. A
   *  new row has no password hash and no admin right; an existing one keeps its hash (see
   *  Developers.authenticate). */
  putProfile: (ex: Executor, d: DeveloperProfile) =>
    ex.run(`INSERT INTO developers(id, email, email_lower, password_hash, fname, lname, org, phone, admin, creation_date) VALUES (?, ?, ?, '', ?, ?, ?, ?, 0, ?)
      ON CONFLICT(id) DO UPDATE SET email = excluded.email, email_lower = excluded.email_lower, fname = excluded.fname, lname = excluded.lname,
      org = excluded.org, phone = excluded.phone`, [d.id, d.email, d.email.toLowerCase(), d.fname, d.lname, d.org, d.phone, d.creation_date]),
  setPassword: (ex: Executor, id: string, hash: string) => ex.run(`UPDATE developers SET password_hash = ? WHERE id = ?`, [hash, id]),
  setAdmin: (ex: Executor, id: string, admin: boolean) => ex.run(`UPDATE developers SET admin = ? WHERE id = ?`, [admin ? 1 : 0, id]),
  touchLogin: (ex: Executor, id: string, at: string) => ex.run(`UPDATE developers SET last_login = ? WHERE id = ?`, [at, id]),
};
