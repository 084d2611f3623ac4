// Bearer tokens, stored by hash only.
import type { Executor } from "./db.ts";

export type TokenKind = "dev" | "devkey" | "user" | "anon" | "device" | "edge";
export interface TokenRow {
  token_hash: string; kind: TokenKind; subject_id: string; system_key: string | null;
  expires_at: number; refresh_hash: string | null; refresh_expires_at: number | null; created_at: number;
}

export const tokensRepo = {
  byHash: (ex: Executor, hash: string) => ex.get<TokenRow>(`SELECT * FROM tokens WHERE token_hash = ?`, [hash]),
  byRefreshHash: (ex: Executor, hash: string) => ex.get<TokenRow>(`SELECT * FROM tokens WHERE refresh_hash = ?`, [hash]),
  async insert(ex: Executor, t: TokenRow) {
    await ex.run(
      `INSERT INTO tokens(token_hash, kind, subject_id, system_key, expires_at, refresh_hash, refresh_expires_at, created_at) VALUES (?,?,?,?,?,?,?,?)`,
      [t.token_hash, t.kind, t.subject_id, t.system_key, t.expires_at, t.refresh_hash, t.refresh_expires_at, t.created_at],
    );
  },
  delete: (ex: Executor, hash: string) => ex.run(`DELETE FROM tokens WHERE token_hash = ?`, [hash]),
  /** Hashes of the subject's tokens, so caches can drop them too. */
  /** `systemKey` scopes subjects whose ids repeat across systems (device names). */
  async deleteForSubject(ex: Executor, kind: TokenKind, subjectId: string, except: string[], systemKey?: string): Promise<string[]> {
    const keep = except.length ? ` AND token_hash NOT IN (${except.map(() => "?").join(",")})` : "";
    const scope = systemKey === undefined ? "" : " AND system_key = ?";
    const args = [kind, subjectId, ...except, ...(systemKey === undefined ? [] : [systemKey])];
    const rows = await ex.all<{ token_hash: string }>(`SELECT token_hash FROM tokens WHERE kind = ? AND subject_id = ?${keep}${scope}`, args);
    await ex.run(`DELETE FROM tokens WHERE kind = ? AND subject_id = ?${keep}${scope}`, args);
    return rows.map((r) => r.token_hash);
  },
  async deleteForSystem(ex: Executor, systemKey: string): Promise<string[]> {
    const rows = await ex.all<{ token_hash: string }>(`SELECT token_hash FROM tokens WHERE system_key = ?`, [systemKey]);
    await ex.run(`DELETE FROM tokens WHERE system_key = ?`, [systemKey]);
    return rows.map((r) => r.token_hash);
  },
  /** Removes tokens whose access and refresh lifetimes are both over. */
  purgeExpired: (ex: Executor, now: number) =>
    ex.run(`DELETE FROM tokens WHERE expires_at > 0 AND expires_at < ? AND (refresh_expires_at IS NULL OR (refresh_expires_at > 0 AND refresh_expires_at < ?))`, [now, now]),
};
