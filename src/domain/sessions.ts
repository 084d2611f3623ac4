// Sessions (ClearBlade's /admin/v/4/session routes): a session is a live token a user or device
// of a system was issued. Developers of the system list, count and revoke them. Revoking logs the
// holder out everywhere: the tokens go from the database, every node drops them from its cache
// (tokens.revoked) and closes the MQTT clients connected with them (sessions.ended); both
// signals are shared across a cluster.
import type { Principal } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { nowSeconds } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { type SessionKind, sessionsRepo } from "../store/sessions.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

export const SESSION_KINDS: readonly SessionKind[] = ["user", "device"];

export class Sessions {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems) {}

  /** `[{user_id, issued}]` or `[{device_key, issued}]` (issued: unix seconds), oldest first. */
  async list(p: Principal, systemKey: string, kind: SessionKind, query: string | null) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const q = parseQuery(query);
    const rows = await sessionsRepo.list(this.d.db, kind, s.system_key, nowSeconds(), q);
    return kind === "user"
      ? rows.map((r) => ({ user_id: r.subject_id, issued: Number(r.created_at) }))
      : rows.map((r) => ({ device_key: `${s.system_key} :: ${r.subject_id}`, issued: Number(r.created_at) }));
  }

  async count(p: Principal, systemKey: string, kind: SessionKind, query: string | null) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return { count: await sessionsRepo.count(this.d.db, kind, s.system_key, nowSeconds(), parseQuery(query).filters) };
  }

  /** Revokes the sessions a query matches. The query is required: `[]` (no filters) says "every
   *  session" on purpose, where a forgotten parameter would log a whole system out. */
  async revoke(p: Principal, systemKey: string, kind: SessionKind, query: string | null) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    if (query === null) throw fail("INVALID_ARGUMENT", `query is required: FILTERS naming the sessions to revoke (on ${kind === "user" ? "user_id" : "device_key"}, issued), or [] for every session of the system`);
    const q = parseQuery(query);
    const hashes = await this.d.db.tx((tx) => sessionsRepo.delete(tx, kind, s.system_key, nowSeconds(), q.filters));
    if (hashes.length) {
      this.d.tokens.forgetHashes(hashes);
      this.d.signals.emit("sessions.ended", { hashes });
    }
    return { count: hashes.length };
  }
}
