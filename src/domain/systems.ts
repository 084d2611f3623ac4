// Systems: created and owned by a developer; every other resource lives inside one.
import { z } from "zod";
import { developerReaches, type Principal } from "../auth/principal.ts";
import { TtlCache } from "../core/cache.ts";
import { ApiError, fail } from "../core/errors.ts";
import { newSystemKey, newSystemSecret, nowIso } from "../core/ids.ts";
import { validate } from "../core/validate.ts";
import { type SystemChanges, type SystemRow, systemsRepo } from "../store/systems.ts";
import type { DomainDeps } from "./deps.ts";
import { seedBuiltinRoles } from "./roles.ts";

const SYSTEM_CACHE_MS = 5_000;
const DEFAULT_TOKEN_TTL = 432_000;

const ttl = z.number().int().refine((n) => n === -1 || n > 0, "must be -1 (never expires) or a positive number of seconds");
const CreateBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(200),
  description: z.string().max(10_000).default(""),
  auth_required: z.boolean().optional(),
  token_ttl: ttl.optional(),
}).strict();
const UpdateBody = z.object({
  id: z.string().min(1),
  name: z.string().trim().min(1).max(200).optional(),
  description: z.string().max(10_000).optional(),
  auth_required: z.boolean().optional(),
  registration: z.boolean().optional(),
  token_ttl: ttl.optional(),
  token_ttl_user: ttl.optional(),
  token_ttl_device: ttl.optional(),
}).strict();

/** The settings object clients read (the Go SDK asserts appID, appSecret, name, description, numeric token_ttl). */
export function systemToWire(s: SystemRow) {
  return {
    appID: s.system_key,
    appId: s.system_key,
    appSecret: s.system_secret,
    systemKey: s.system_key,
    systemSecret: s.system_secret,
    name: s.name,
    description: s.description,
    Dev: s.owner_id,
    token_ttl: s.token_ttl,
    token_ttl_user: s.token_ttl_user ?? s.token_ttl,
    token_ttl_device: s.token_ttl_device ?? s.token_ttl,
    auth_required: s.auth_required === 1,
    registration: s.registration === 1,
    created_at: s.created_at,
  };
}

export class Systems {
  private readonly cache = new TtlCache<string, SystemRow>(SYSTEM_CACHE_MS);
  constructor(private readonly d: DomainDeps) {
    d.signals.on("system.changed", ({ systemKey }) => { this.cache.delete(systemKey); });
  }

  /** A system by key (cached briefly: every request looks its system up). */
  find(key: string): Promise<SystemRow | undefined> {
    return this.cache.getOr(key, () => systemsRepo.byKey(this.d.db, key));
  }

  async get(key: unknown): Promise<SystemRow> {
    if (typeof key !== "string" || !key) throw fail("INVALID_ARGUMENT", "system key is required");
    const row = await this.find(key);
    if (!row) throw fail("SYSTEM_NOT_FOUND", `system '${key}' does not exist`);
    return row;
  }

  /** access() without waiting, when the system is cached; undefined otherwise. */
  accessNow(p: Principal, key: string): SystemRow | undefined {
    const row = this.cache.get(key);
    if (!row) return undefined;
    if (p.kind === "developer" ? !developerReaches(p, row) : p.systemKey !== key) return undefined; // let access() say why
    return row;
  }

  /** The system, if the caller may act in it: its owner (or a platform admin), or a token of that system. */
  async access(p: Principal, key: unknown): Promise<SystemRow> {
    if (typeof key !== "string" || !key) throw fail("INVALID_ARGUMENT", "system key is required");
    const row = this.cache.get(key) ?? (await this.find(key));
    if (p.kind === "developer") {
      if (!row) throw fail("SYSTEM_NOT_FOUND", `system '${key}' does not exist`);
      if (row.owner_id !== p.id && !p.admin) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", `system '${key}' belongs to another developer`);
      if (!developerReaches(p, row)) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", `this developer key does not reach system '${key}'`);
      return row;
    }
    if (p.systemKey !== key) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", "the token does not belong to this system");
    if (!row) throw fail("SYSTEM_NOT_FOUND", `system '${key}' does not exist`);
    return row;
  }

  /** Developer-only access: the caller must be the system's developer (or a platform admin). */
  async accessAsDeveloper(p: Principal, key: unknown): Promise<SystemRow> {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    return this.access(p, key);
  }

  /** Checks a key/secret pair (user auth, registration, anonymous login). */
  async checkSecret(key: string | null, secret: string | null): Promise<SystemRow> {
    if (!key || !secret) throw fail("INVALID_SECRET", "system key and system secret headers are required");
    const row = await this.find(key);
    if (!row || row.system_secret !== secret) throw fail("INVALID_SECRET", "invalid system key or secret");
    return row;
  }

  async create(p: Principal, body: unknown): Promise<SystemRow> {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "only developers create systems");
    if (p.key?.systems) throw fail("FORBIDDEN", "a developer key limited to some systems cannot create one");
    const b = validate(CreateBody, body);
    const row: SystemRow = {
      system_key: newSystemKey(), system_secret: newSystemSecret(), name: b.name, description: b.description,
      owner_id: p.id, token_ttl: b.token_ttl ?? DEFAULT_TOKEN_TTL, token_ttl_user: null, token_ttl_device: null,
      auth_required: b.auth_required === false ? 0 : 1, registration: 1, created_at: nowIso(),
    };
    await this.d.db.tx(async (tx) => {
      await systemsRepo.insert(tx, row);
      await seedBuiltinRoles(tx, row.system_key);
    });
    this.d.log.info("system created", { systemKey: row.system_key, owner: p.id });
    return row;
  }

  async update(p: Principal, body: unknown): Promise<SystemRow> {
    const b = validate(UpdateBody, body);
    const current = await this.accessAsDeveloper(p, b.id);
    const changes: SystemChanges = {};
    if (b.name !== undefined) changes.name = b.name;
    if (b.description !== undefined) changes.description = b.description;
    if (b.auth_required !== undefined) changes.auth_required = b.auth_required ? 1 : 0;
    if (b.registration !== undefined) changes.registration = b.registration ? 1 : 0;
    if (b.token_ttl !== undefined) changes.token_ttl = b.token_ttl;
    if (b.token_ttl_user !== undefined) changes.token_ttl_user = b.token_ttl_user;
    if (b.token_ttl_device !== undefined) changes.token_ttl_device = b.token_ttl_device;
    await systemsRepo.update(this.d.db, current.system_key, changes);
    this.forget(current.system_key);
    return (await this.find(current.system_key))!;
  }

  async remove(p: Principal, key: unknown): Promise<void> {
    const s = await this.accessAsDeveloper(p, key);
    await this.d.db.tx(async (tx) => {
      await this.d.tokens.revokeSystem(tx, s.system_key);
      await systemsRepo.delete(tx, s.system_key);
    });
    this.forget(s.system_key);
    this.d.tokens.forgetSystem(s.system_key);
    this.d.perms.invalidate(s.system_key);
    // what lives outside its database rows (cache values, timers, connections)
    try { await this.d.signals.emit("system.removed", { systemKey: s.system_key }); } catch (err) { this.d.log.warn("could not drop what a deleted system left", { systemKey: s.system_key, err }); }
    this.d.log.info("system deleted", { systemKey: s.system_key });
  }

  async list(p: Principal): Promise<SystemRow[]> {
    if (p.kind !== "developer") throw fail("DEVELOPER_ONLY", "this operation needs a developer token");
    const own = await systemsRepo.byOwner(this.d.db, p.id);
    const reach = p.key?.systems;
    return reach ? own.filter((s) => reach.includes(s.system_key)) : own;
  }

  /** New secret; the old one stops working at once. Issued tokens stay valid. */
  async regenerateSecret(p: Principal, body: unknown): Promise<SystemRow> {
    const b = validate(z.object({ id: z.string().min(1).optional(), systemKey: z.string().min(1).optional(), system_key: z.string().min(1).optional() }).strict(), body);
    const key = b.id ?? b.systemKey ?? b.system_key;
    if (!key) throw new ApiError("INVALID_ARGUMENT", "body: id (the system key) is required");
    const s = await this.accessAsDeveloper(p, key);
    await systemsRepo.update(this.d.db, s.system_key, { system_secret: newSystemSecret() });
    this.forget(s.system_key);
    return (await this.find(s.system_key))!;
  }

  /** A token lifetime in seconds (0: never expires): the row's cb_ttl_override when it has one
   *  (seconds when positive, -1 for never), else the system's setting for the kind. */
  static ttlFor(s: SystemRow, kind: "user" | "device", row: Record<string, unknown> = {}): number {
    const o = row.cb_ttl_override;
    if (typeof o === "number" && Number.isInteger(o) && (o > 0 || o === -1)) return o === -1 ? 0 : o;
    return (kind === "user" ? s.token_ttl_user : s.token_ttl_device) ?? s.token_ttl;
  }

  forget(key: string) { this.d.signals.emit("system.changed", { systemKey: key }); }

  async keys(): Promise<string[]> { return (await systemsRepo.all(this.d.db)).map((s) => s.system_key); }
}
