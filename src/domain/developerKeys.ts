// Developer keys: long-lived developer access for tools and monitors (`outpost status`, a
// Prometheus job, a CI script), so they need neither a password nor a session that expires. A key
// is scoped (some systems, or reads only), listed without its token, revocable, and its token is
// shown once, at creation. A key never carries a platform admin's powers and cannot make keys.
import { z } from "zod";
import { type DeveloperPrincipal, developerOnly, type Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { newKey, nowIso } from "../core/ids.ts";
import { validate } from "../core/validate.ts";
import { developerKeysRepo, type DeveloperKeyRow } from "../store/developerKeys.ts";
import { developersRepo } from "../store/developers.ts";
import { systemsRepo } from "../store/systems.ts";
import type { TokenRow } from "../store/tokens.ts";
import type { DomainDeps } from "./deps.ts";

/** Keys one developer may hold at once. */
export const KEYS_MAX = 100;

const CreateBody = z.object({
  name: z.string().trim().min(1, "name is required").max(100),
  /** system keys the key reaches; omitted or null: every system of the developer */
  systems: z.array(z.string().min(1)).min(1, "systems, when given, names at least one system").max(1000).nullish(),
  read_only: z.boolean().optional(),
  /** seconds the key lives; omitted or 0: until revoked */
  expires_in: z.number().int().min(0).max(10 * 365 * 86_400).optional(),
}).strict();

export function developerKeyToWire(k: DeveloperKeyRow) {
  return {
    id: k.id, name: k.name, systems: k.systems ? (JSON.parse(k.systems) as string[]) : null, read_only: k.read_only === 1,
    created_at: k.created_at, expires_at: k.expires_at === 0 ? -1 : k.expires_at,
  };
}

export class DeveloperKeys {
  constructor(private readonly d: DomainDeps) {
    d.tokens.registerLoader("devkey", async (row: TokenRow): Promise<Principal | null> => {
      const key = await developerKeysRepo.byId(d.db, row.subject_id);
      const dev = key && (await developersRepo.byId(d.db, key.developer_id));
      if (!key || !dev) return null;
      return {
        kind: "developer", id: dev.id, email: dev.email, admin: false, tokenHash: row.token_hash,
        key: { id: key.id, systems: key.systems ? (JSON.parse(key.systems) as string[]) : null, readOnly: key.read_only === 1 },
      };
    });
  }

  /** Only a developer's own sign-in manages keys: a leaked key must not make more of itself. */
  private owner(p: Principal): DeveloperPrincipal {
    const dev = developerOnly(p, "managing developer keys");
    if (dev.key) throw fail("FORBIDDEN", "a developer key cannot manage developer keys: sign in as the developer");
    return dev;
  }

  async create(p: Principal, body: unknown) {
    const dev = this.owner(p);
    const b = validate(CreateBody, body);
    const systems = b.systems ? [...new Set(b.systems)] : null;
    if (systems) {
      const own = new Set((await systemsRepo.byOwner(this.d.db, dev.id)).map((s) => s.system_key));
      const foreign = systems.filter((k) => !own.has(k));
      if (foreign.length) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", `not your system: ${foreign.slice(0, 5).join(", ")}`);
    }
    return this.d.db.tx(async (tx) => {
      if ((await developerKeysRepo.count(tx, dev.id)) >= KEYS_MAX) throw fail("INVALID_ARGUMENT", `a developer holds at most ${KEYS_MAX} keys: revoke one first`);
      const id = newKey();
      const issued = await this.d.tokens.issue(tx, "devkey", id, null, b.expires_in ?? 0);
      const row: DeveloperKeyRow = {
        id, developer_id: dev.id, name: b.name, token_hash: issued.hash, systems: systems ? JSON.stringify(systems) : null,
        read_only: b.read_only ? 1 : 0, created_at: nowIso(), expires_at: issued.expiresAt === -1 ? 0 : issued.expiresAt,
      };
      await developerKeysRepo.insert(tx, row);
      this.d.log.info("developer key created", { developer: dev.id, key: id, read_only: row.read_only === 1, systems: systems?.length ?? "all" });
      // the token is shown here only: it is stored hashed
      return { ...developerKeyToWire(row), token: issued.token };
    });
  }

  async list(p: Principal) {
    const dev = this.owner(p);
    return (await developerKeysRepo.forDeveloper(this.d.db, dev.id)).map(developerKeyToWire);
  }

  async revoke(p: Principal, id: string) {
    const dev = this.owner(p);
    await this.d.db.tx(async (tx) => {
      const key = await developerKeysRepo.byId(tx, id);
      if (!key || key.developer_id !== dev.id) throw notFound("developer key", id);
      await developerKeysRepo.delete(tx, id);
      await this.d.tokens.revoke(tx, key.token_hash);
    });
    this.d.log.info("developer key revoked", { developer: dev.id, key: id });
    return {};
  }
}
