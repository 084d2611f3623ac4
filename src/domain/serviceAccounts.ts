// Service accounts: a user whose cb_service_account column is set holds a token that never
// expires, kept in the user's data document (src/domain/users.ts keeps it in step with the flag).
import type { SecretBox } from "../auth/secrets.ts";
import type { Tokens } from "../auth/tokens.ts";
import { fail } from "../core/errors.ts";
import type { Executor } from "../store/db.ts";
import type { UserRow } from "../store/users.ts";

/** Where a service account's token is kept in the user's data document: sealed (developers read
 *  it back as cb_token) and hashed (to revoke it). Not a column, so no other read shows it. */
const SERVICE_TOKEN = "__service_token";
interface ServiceToken { sealed: string; hash: string }

/** A user's row as an edge receives it: a service account's token stays on the platform (an edge
 *  receives no tokens). The password hash goes along: the template chose to let the system's users
 *  sign in on the edge, offline too. */
export function userForEdge(row: UserRow): UserRow {
  if (!row.data.includes(SERVICE_TOKEN)) return row;
  const data = JSON.parse(row.data) as Record<string, unknown>;
  delete data[SERVICE_TOKEN];
  return { ...row, data: JSON.stringify(data) };
}

/** The hash of a user's service account token, if it has one (kept when other tokens go). */
export const serviceTokenHash = (data: Record<string, unknown>): string[] => {
  const t = data[SERVICE_TOKEN] as ServiceToken | undefined;
  return t ? [t.hash] : [];
};

export class ServiceAccounts {
  constructor(private readonly tokens: Tokens, private readonly box: SecretBox | null) {}

  /** The service account's token as the developer reads it back (cb_token), if the user has one. */
  tokenOf(data: Record<string, unknown>): string | undefined {
    const t = data[SERVICE_TOKEN] as ServiceToken | undefined;
    if (t && this.box) { try { return this.box.open(t.sealed); } catch { /* sealed under another key */ } }
    return undefined;
  }

  /** Keeps data's service token in step with its cb_service_account flag: issues a token that
   *  never expires when the flag is set, revokes it when cleared (a developer rotates it by
   *  clearing and setting the flag; a password change keeps it). */
  async sync(tx: Executor, systemKey: string, userId: string, data: Record<string, unknown>) {
    const held = data[SERVICE_TOKEN] as ServiceToken | undefined;
    const wanted = data.cb_service_account === true;
    if (held && !wanted) {
      await this.tokens.revoke(tx, held.hash);
      delete data[SERVICE_TOKEN];
    }
    if (wanted && !held) {
      if (!this.box) throw fail("INTERNAL", "service accounts need the node's secret key");
      const t = await this.tokens.issue(tx, "user", userId, systemKey, 0);
      data[SERVICE_TOKEN] = { sealed: this.box.seal(t.token), hash: t.hash } satisfies ServiceToken;
    }
  }
}
