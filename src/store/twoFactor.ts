// Developers' pending second sign-in steps (domain/twoFactor.ts).
import type { Executor } from "./db.ts";

export interface ChallengeRow {
  otp_id: string; developer_id: string; token_hash: string; code_hash: string; method: string;
  issued_at: number; expires_at: number; attempts: number; used: number;
}

export const challengesRepo = {
  insert: (ex: Executor, c: ChallengeRow) =>
    ex.run(`INSERT INTO two_factor_challenges(otp_id, developer_id, token_hash, code_hash, method, issued_at, expires_at, attempts, used)
      VALUES (?,?,?,?,?,?,?,?,?)`, [c.otp_id, c.developer_id, c.token_hash, c.code_hash, c.method, c.issued_at, c.expires_at, c.attempts, c.used]),
  get: (ex: Executor, otpId: string) => ex.get<ChallengeRow>(`SELECT * FROM two_factor_challenges WHERE otp_id = ?`, [otpId]),
  /** Counts one attempt at the code, if the challenge is still alive: whether it was. Counted
   *  before the code is checked, so concurrent guesses share the bound. */
  async takeAttempt(ex: Executor, otpId: string, maxAttempts: number, now: number): Promise<boolean> {
    const r = await ex.run(`UPDATE two_factor_challenges SET attempts = attempts + 1
      WHERE otp_id = ? AND used = 0 AND attempts < ? AND expires_at > ?`, [otpId, maxAttempts, now]);
    return r.changes === 1;
  },
  /** Marks the challenge used: false when another request used it first. */
  async use(ex: Executor, otpId: string): Promise<boolean> {
    return (await ex.run(`UPDATE two_factor_challenges SET used = 1 WHERE otp_id = ? AND used = 0`, [otpId])).changes === 1;
  },
  issuedSince: async (ex: Executor, developerId: string, since: number) =>
    Number((await ex.get<{ n: number }>(`SELECT count(*) AS n FROM two_factor_challenges WHERE developer_id = ? AND issued_at > ?`, [developerId, since]))!.n),
  purge: (ex: Executor, before: number) => ex.run(`DELETE FROM two_factor_challenges WHERE expires_at < ?`, [before]),
};
