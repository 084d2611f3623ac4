// Users of a system: registration, sign-in (password, refresh, anonymous), profile, password,
// roles, listing, and the developer's user administration with custom columns.
import { z } from "zod";
import { LEVEL } from "../auth/permissions.ts";
import { hashPassword, verifyPassword } from "../auth/passwords.ts";
import type { SecretBox } from "../auth/secrets.ts";
import type { Principal } from "../auth/principal.ts";
import type { ColumnType } from "../core/columns.ts";
import { TtlCache } from "../core/cache.ts";
import { fail, notFound } from "../core/errors.ts";
import { newKey, nowIso } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { email as emailSchema, knownFields, objectBody, password as passwordSchema, validate } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import type { TokenRow } from "../store/tokens.ts";
import { USER_COLUMNS, type UserRow, usersRepo } from "../store/users.ts";
import { CustomColumns, type CustomSchema } from "./customColumns.ts";
import type { DomainDeps } from "./deps.ts";
import type { Roles } from "./roles.ts";
import { ServiceAccounts, serviceTokenHash, userForEdge } from "./serviceAccounts.ts";
import { Systems } from "./systems.ts";

const MANAGE_FIELDS = new Set(["user", "changes"]);
const MANAGE_CHANGES = new Set(["password", "roles"]);
const ADMIN_UPDATE_FIELDS = new Set(["user", "user_id", "changes"]);

/** Columns every user row has besides the table's own, kept in its data document. (A phone number
 *  is a column of the developer's, as in ClearBlade's exports: a system pushed without one would
 *  have cb-cli delete it.) */
const STANDARD_DATA_COLUMNS: Record<string, ColumnType> = { cb_service_account: "bool", cb_ttl_override: "int" };
const AuthBody = z.union([
  z.object({ grant_type: z.literal("refresh_token", { error: "grant_type must be 'refresh_token'" }), refresh_token: z.string().min(1), access_token: z.string().min(1) }).strict(),
  z.object({ email: z.string().min(1).optional(), username: z.string().min(1).optional(), password: z.string() }).passthrough()
    .refine((b) => b.email || b.username, "email (or username) is required"),
]);
const PassBody = z.object({ old_password: z.string(), new_password: passwordSchema }).strict();

type Schema = CustomSchema;

// sync/kinds.ts sends users to edges through it
export { userForEdge } from "./serviceAccounts.ts";

/** Columns only a developer or a user manager sets: they decide how long tokens live. */
const PRIVILEGED_COLUMNS = ["cb_service_account", "cb_ttl_override"];
function refusePrivileged(values: Record<string, unknown>) {
  for (const k of PRIVILEGED_COLUMNS) if (k in values) throw fail("PERMISSION_DENIED", `'${k}' is set by a developer or a user manager, not by the user`);
}

/** A user's custom and standard column values (and its service account's token). */
const userData = (u: Pick<UserRow, "data">): Record<string, unknown> => JSON.parse(u.data) as Record<string, unknown>;

/** How long a node may serve a user row from memory. */
const USER_CACHE_MS = 5_000;

const USER_REF_FIELDS = new Set(["user_id", "user", "email"]);
const QUERY_UPDATE_FIELDS = new Set(["query", "changes", "$set"]);

export class Users {
  private readonly columnsOf: CustomColumns;
  private readonly serviceAccounts: ServiceAccounts;
  /** key: systemKey + "/" + user_id */
  private readonly rows = new TtlCache<string, UserRow>(USER_CACHE_MS, 20_000);
  /** A cached row's answer to user info under the schema it was made with: a row or a schema that
   *  changes is a new object, so nothing stale is found (a fifth of the hot path was parsing the
   *  row's custom columns again). */
  private readonly infos = new WeakMap<UserRow, { schema: CustomSchema; info: Readonly<Record<string, unknown>> }>();

  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly roles: Roles, box: SecretBox | null = null) {
    this.serviceAccounts = new ServiceAccounts(d.tokens, box);
    this.columnsOf = new CustomColumns(d.db, "users", USER_COLUMNS, STANDARD_DATA_COLUMNS, ["password", "roles", "user_token", "cb_token"], "user_id", PRIVILEGED_COLUMNS);
    d.tokens.registerLoader("user", async (row: TokenRow): Promise<Principal | null> => {
      const u = await usersRepo.byId(d.db, row.system_key!, row.subject_id);
      if (!u) return null;
      return { kind: "user", systemKey: u.system_key, id: u.user_id, email: u.email, roles: await roles.rolesOf(d.db, u.system_key, "user", u.user_id), tokenHash: row.token_hash };
    });
    d.tokens.registerLoader("anon", async (row: TokenRow): Promise<Principal | null> =>
      (await systems.find(row.system_key!)) ? { kind: "anonymous", systemKey: row.system_key!, id: "anon", email: "anon", roles: ["Anonymous"], tokenHash: row.token_hash } : null);
  }

  // ---- schema ---------------------------------------------------------------------------------

  private schema(ex: Executor, systemKey: string): Promise<Schema> { return this.columnsOf.schema(ex, systemKey); }

  private toWire(u: UserRow, schema: Schema): Record<string, unknown> {
    return this.columnsOf.wire(schema, u.data, { user_id: u.user_id, email: u.email, creation_date: u.creation_date });
  }

  /** The developer's view: a service account's token as cb_token. */
  private toDeveloperWire(u: UserRow, schema: Schema): Record<string, unknown> {
    const out = this.toWire(u, schema);
    const token = this.serviceAccounts.tokenOf(userData(u));
    if (token !== undefined) out.cb_token = token;
    return out;
  }

  private columnValues(schema: Schema, values: Record<string, unknown>, data?: Record<string, unknown>) {
    return this.columnsOf.values(schema, values, data);
  }

  /** Logs a user for edge sync: the row (with its password hash, so the user signs in on edges
   *  too) and its roles. */
  private async logUser(tx: Executor, systemKey: string, userId: string) {
    if (!this.d.changes.logs(systemKey)) return;
    const row = await usersRepo.byId(tx, systemKey, userId);
    if (!row) return;
    await this.d.changes.record(tx, systemKey, "user", row.email, "upsert", { user: userForEdge(row), roles: await this.roles.rolesOf(tx, systemKey, "user", userId) });
  }

  /** The principal a service runs as when its run_user is this user. */
  async principalFor(systemKey: string, userId: string): Promise<Principal> {
    const u = await usersRepo.byId(this.d.db, systemKey, userId) ?? await usersRepo.byEmail(this.d.db, systemKey, userId);
    if (!u) throw fail("INVALID_ARGUMENT", `run_user '${userId}' is not a user of this system`);
    return this.principalOfRow(systemKey, u);
  }

  private async principalOfRow(systemKey: string, u: { user_id: string; email: string }): Promise<Principal> {
    return { kind: "user", systemKey, id: u.user_id, email: u.email, roles: await this.roles.rolesOf(this.d.db, systemKey, "user", u.user_id), tokenHash: "" };
  }

  /** A user of the system by email and password, without issuing a token (HTTP Basic on webhooks). */
  async principalByPassword(systemKey: string, email: string, password: string): Promise<Principal | null> {
    const u = await usersRepo.byEmail(this.d.db, systemKey, email);
    if (!(await verifyPassword(password, u?.password_hash)) || !u) return null;
    return this.principalOfRow(systemKey, u);
  }

  // ---- sessions -------------------------------------------------------------------------------

  private async session(ex: Executor, systemKey: string, u: Pick<UserRow, "user_id" | "data">) {
    const s = await this.systems.get(systemKey);
    const t = await this.d.tokens.issue(ex, "user", u.user_id, systemKey, Systems.ttlFor(s, "user", userData(u)));
    return { user_token: t.token, user_id: u.user_id, refresh_token: t.refreshToken, expires_at: t.expiresAt };
  }

  private async insertUser(tx: Executor, systemKey: string, body: Record<string, unknown>, roles: unknown[] = ["Authenticated"]) {
    const { email, password, roles: _r, ...rest } = body;
    const e = emailSchema.safeParse(email);
    if (!e.success) throw fail("INVALID_ARGUMENT", "email: a valid email address is required");
    const pw = passwordSchema.safeParse(password);
    if (!pw.success) throw fail("INVALID_ARGUMENT", "password: must be a non-empty string");
    const schema = await this.schema(tx, systemKey);
    const data = this.columnValues(schema, rest);
    if (await usersRepo.byEmail(tx, systemKey, e.data)) throw fail("ALREADY_EXISTS", `user '${e.data}' already exists`);
    const userId = newKey();
    await this.serviceAccounts.sync(tx, systemKey, userId, data);
    const row: UserRow = {
      user_id: userId, system_key: systemKey, email: e.data, email_lower: e.data.toLowerCase(),
      password_hash: await hashPassword(pw.data), creation_date: nowIso(), data: JSON.stringify(data),
    };
    await usersRepo.insert(tx, row);
    for (const r of roles) await this.roles.changeMembership(tx, systemKey, "user", row.user_id, { add: [r] });
    await this.logUser(tx, systemKey, row.user_id);
    return row;
  }

  /** POST /api/v/1/user/reg: needs the system key and secret (and, if sent, a token of that system). */
  async register(key: string | null, secret: string | null, caller: Principal | null, body: unknown) {
    const s = await this.systems.checkSecret(key, secret);
    if (caller && caller.kind !== "developer" && caller.systemKey !== s.system_key) throw fail("NOT_AUTHORIZED_FOR_SYSTEM", "the token does not belong to this system");
    if (!s.registration && caller?.kind !== "developer") throw fail("PERMISSION_DENIED", "user registration is closed in this system");
    const b = objectBody(body);
    if (caller?.kind !== "developer") refusePrivileged(b);
    const row = await this.d.db.tx((tx) => this.insertUser(tx, s.system_key, b));
    const sess = await this.session(this.d.db, s.system_key, row);
    this.d.events.emit("User::UserCreated", s.system_key, { user: { email: row.email, user_id: row.user_id, creation_date: row.creation_date } });
    return { ...sess, email: row.email, creation_date: row.creation_date, options: {} };
  }

  async authenticate(key: string | null, secret: string | null, body: unknown) {
    const s = await this.systems.checkSecret(key, secret);
    const b = validate(AuthBody, body);
    if ("grant_type" in b) {
      const { issued, row } = await this.d.tokens.refresh("user", b.refresh_token, b.access_token, async (r) => {
        const u = await usersRepo.byId(this.d.db, s.system_key, r.subject_id);
        return Systems.ttlFor(s, "user", u ? userData(u) : {});
      }, (r) => r.system_key === s.system_key);
      return { user_token: issued.token, user_id: row.subject_id, refresh_token: issued.refreshToken, expires_at: issued.expiresAt };
    }
    const login = ((b.email ?? b.username) as string);
    const u = await usersRepo.byEmail(this.d.db, s.system_key, login);
    const ok = await verifyPassword(b.password, u?.password_hash);
    this.d.events.emit("User::UserAuth", s.system_key, { email: login, is_error: !ok || !u, error: ok && u ? "" : "invalid credentials" });
    if (!ok || !u) throw fail("BAD_CREDENTIALS", "invalid email or password");
    return this.session(this.d.db, s.system_key, u);
  }

  async anonymous(key: string | null, secret: string | null) {
    const s = await this.systems.checkSecret(key, secret);
    const t = await this.d.tokens.issue(this.d.db, "anon", "anon", s.system_key, Systems.ttlFor(s, "user"));
    return { user_token: t.token, expires_at: t.expiresAt, refresh_token: t.refreshToken };
  }

  async checkAuth(p: Principal, systemKey: string | null) {
    if (systemKey && p.kind !== "developer" && p.systemKey !== systemKey) throw fail("INVALID_TOKEN", "not authenticated with this system");
    return { is_authenticated: true };
  }

  async logout(p: Principal) {
    await this.d.tokens.revoke(this.d.db, p.tokenHash);
    return {};
  }

  // ---- the caller's own record ----------------------------------------------------------------

  private async self(p: Principal): Promise<UserRow> {
    if (p.kind !== "user") throw fail("INVALID_ARGUMENT", p.kind === "anonymous" ? "an anonymous session has no user record" : "this operation needs a user token");
    const u = await this.rows.getOr(`${p.systemKey}/${p.id}`, () => usersRepo.byId(this.d.db, p.systemKey, p.id));
    if (!u) throw fail("INVALID_TOKEN", "user no longer exists");
    return u;
  }

  info(p: Principal): Record<string, unknown> | Promise<Record<string, unknown>> {
    // the hot path answers from caches without waiting; a miss takes the ordinary way
    const u = p.kind === "user" ? this.rows.get(`${p.systemKey}/${p.id}`) : undefined;
    const schema = u && this.columnsOf.schemaNow(u.system_key);
    if (u && schema) {
      const known = this.infos.get(u);
      if (known?.schema === schema) return known.info;
      const info = Object.freeze(this.toWire(u, schema));
      this.infos.set(u, { schema, info });
      return info;
    }
    return this.self(p).then(async (row) => this.toWire(row, await this.schema(this.d.db, row.system_key)));
  }

  async updateInfo(p: Principal, body: unknown) {
    const u = await this.self(p);
    return this.applyChanges(p, u, objectBody(body), { allowRoles: false, allowPassword: false });
  }

  async changePassword(p: Principal, body: unknown) {
    const u = await this.self(p);
    const b = validate(PassBody, body);
    if (!(await verifyPassword(b.old_password, u.password_hash))) throw fail("BAD_CREDENTIALS", "old_password is wrong");
    const hash = await hashPassword(b.new_password);
    await this.d.db.tx(async (tx) => {
      await usersRepo.setPassword(tx, u.system_key, u.user_id, hash);
      await this.d.tokens.revokeSubject(tx, "user", u.user_id, [p.tokenHash, ...serviceTokenHash(userData(u))]);
      await this.logUser(tx, u.system_key, u.user_id);
    });
    this.rows.delete(`${u.system_key}/${u.user_id}`);
    return "Success";
  }

  // ---- managing other users -------------------------------------------------------------------

  private async findUser(ex: Executor, systemKey: string, ref: unknown): Promise<UserRow> {
    if (typeof ref !== "string" || !ref) throw fail("INVALID_ARGUMENT", "user: a user id or email is required");
    const u = (await usersRepo.byId(ex, systemKey, ref)) ?? (await usersRepo.byEmail(ex, systemKey, ref));
    if (!u) throw notFound("user", ref, "User");
    return u;
  }

  /** Applies column, email, password and role changes to a user in one transaction. */
  private async applyChanges(p: Principal, u: UserRow, changes: Record<string, unknown>, opts: { allowRoles: boolean; allowPassword: boolean }) {
    const { password, roles, email, user_id: _id, creation_date: _cd, ...cols } = changes;
    if (_id !== undefined && _id !== u.user_id) throw fail("INVALID_ARGUMENT", "user_id cannot be changed");
    if (password !== undefined && !opts.allowPassword) throw fail("INVALID_ARGUMENT", "password cannot be changed here (use PUT /api/v/1/user/pass)");
    if (roles !== undefined && !opts.allowRoles) throw fail("INVALID_ARGUMENT", "roles cannot be changed here");
    if (!opts.allowRoles) refusePrivileged(cols);
    let newEmail = u.email;
    if (email !== undefined) {
      const e = emailSchema.safeParse(email);
      if (!e.success) throw fail("INVALID_ARGUMENT", "email: must be an email address");
      newEmail = e.data;
    }
    let pwHash: string | undefined;
    if (password !== undefined) {
      const pw = passwordSchema.safeParse(password);
      if (!pw.success) throw fail("INVALID_ARGUMENT", "password: must be a non-empty string");
      pwHash = await hashPassword(pw.data);
    }
    let roleChange = { added: [] as string[], removed: [] as string[] };
    const out = await this.d.db.tx(async (tx) => {
      const schema = await this.schema(tx, u.system_key);
      const data = this.columnValues(schema, cols, userData(u));
      await this.serviceAccounts.sync(tx, u.system_key, u.user_id, data);
      if (newEmail.toLowerCase() !== u.email_lower) {
        const other = await usersRepo.byEmail(tx, u.system_key, newEmail);
        if (other) throw fail("ALREADY_EXISTS", `user '${newEmail}' already exists`);
      }
      await usersRepo.update(tx, u.system_key, u.user_id, newEmail, JSON.stringify(data));
      if (pwHash) {
        await usersRepo.setPassword(tx, u.system_key, u.user_id, pwHash);
        const keep = [...(p.kind === "user" && p.id === u.user_id ? [p.tokenHash] : []), ...serviceTokenHash(data)];
        await this.d.tokens.revokeSubject(tx, "user", u.user_id, keep);
      }
      if (roles !== undefined) roleChange = await this.roles.changeMembership(tx, u.system_key, "user", u.user_id, roles);
      await this.logUser(tx, u.system_key, u.user_id);
      const updated = (await usersRepo.byId(tx, u.system_key, u.user_id))!;
      return p.kind === "developer" ? this.toDeveloperWire(updated, schema) : this.toWire(updated, schema);
    });
    this.rows.delete(`${u.system_key}/${u.user_id}`);
    this.d.tokens.forgetSubject("user", u.user_id);
    this.d.events.emit("User::UserUpdated", u.system_key, { user: { email: newEmail, user_id: u.user_id }, userId: u.user_id, changes: { ...cols, ...(email !== undefined ? { email } : {}) } });
    if (roleChange.added.length || roleChange.removed.length) {
      const current = await this.roles.rolesOf(this.d.db, u.system_key, "user", u.user_id);
      for (const r of roleChange.added) this.d.events.emit("UserRoles::UserRoleAdded", u.system_key, { userID: u.user_id, roleID: r, roles: current });
      for (const r of roleChange.removed) this.d.events.emit("UserRoles::UserRoleRemoved", u.system_key, { userID: u.user_id, roleID: r, roles: current });
    }
    return out;
  }

  /** PUT /api/v/4/user/manage: roles and password of another user; needs the Manage Users permission. */
  async manage(p: Principal, body: unknown, headerSystemKey?: string | null) {
    const systemKey = await this.systemOf(p, headerSystemKey);
    await this.d.perms.require(p, { kind: "manageusers" }, LEVEL.UPDATE, "manage users");
    const b = objectBody(body);
    knownFields(b, MANAGE_FIELDS);
    const changes = objectBody(b.changes, "changes");
    knownFields(changes, MANAGE_CHANGES, "changes");
    const u = await this.findUser(this.d.db, systemKey, b.user);
    await this.applyChanges(p, u, changes, { allowRoles: true, allowPassword: true });
    return {};
  }

  /** The system a request acts in: the token's own, or for a developer the ClearBlade-SystemKey header. */
  private async systemOf(p: Principal, headerSystemKey?: string | null): Promise<string> {
    if (p.kind !== "developer") return p.systemKey;
    if (!headerSystemKey) throw fail("INVALID_ARGUMENT", "a developer token needs the ClearBlade-SystemKey header here");
    return (await this.systems.access(p, headerSystemKey)).system_key;
  }

  /** GET /api/v/1/user: users the caller may see (needs read on the users list, else 403). */
  async list(p: Principal, query: string | null, systemKeyHint?: string | null) {
    const systemKey = await this.systemOf(p, systemKeyHint);
    if (!(await this.d.perms.can(p, { kind: "users" }, LEVEL.READ))) throw fail("FORBIDDEN", "not allowed to list users");
    return this.query(systemKey, query);
  }

  async count(p: Principal, query: string | null, systemKeyHint?: string | null) {
    const systemKey = await this.systemOf(p, systemKeyHint);
    if (!(await this.d.perms.can(p, { kind: "users" }, LEVEL.READ))) throw fail("FORBIDDEN", "not allowed to count users");
    const schema = await this.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined);
    return { count: await usersRepo.count(this.d.db, systemKey, q.filters, schema.map) };
  }

  private async query(systemKey: string, query: string | null | undefined, developer = false) {
    const schema = await this.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined);
    const rows = await usersRepo.list(this.d.db, systemKey, q, schema.map);
    const total = await usersRepo.count(this.d.db, systemKey, q.filters, schema.map);
    const data = rows.map((r) => (developer ? this.toDeveloperWire(r, schema) : this.toWire(r, schema)));
    return { Data: this.columnsOf.selected(schema, q, data), Total: total };
  }

  /** DELETE /api/v/1/user/info: deletes the user named in the body; needs delete on the users list. */
  async deleteBySecret(p: Principal, key: string | null, secret: string | null, body: unknown) {
    const s = await this.systems.checkSecret(key, secret);
    await this.systems.access(p, s.system_key);
    await this.d.perms.require(p, { kind: "users" }, LEVEL.DELETE, "users");
    const b = knownFields(objectBody(body), USER_REF_FIELDS);
    const u = await this.findUser(this.d.db, s.system_key, b.user_id ?? b.user ?? b.email);
    await this.deleteUser(s.system_key, u);
    return {};
  }

  /** Deletes every user a query matches (delete on the users list): `{count}`. */
  async deleteByQuery(p: Principal, query: unknown, headerSystemKey?: string | null) {
    const systemKey = await this.systemOf(p, headerSystemKey);
    await this.d.perms.require(p, { kind: "users" }, LEVEL.DELETE, "users");
    if (query === undefined || query === null) throw fail("INVALID_ARGUMENT", "query is required (an empty query matches every user)");
    const schema = await this.schema(this.d.db, systemKey);
    const q = parseQuery(query, { defaultPageSize: 0 });
    const rows = await usersRepo.list(this.d.db, systemKey, q, schema.map, { ordered: false });
    for (const u of rows) await this.deleteUser(systemKey, u);
    return { count: rows.length };
  }

  /** Whether `ref` (a user id or email) is a user of the system: what a "device name or user id"
   *  argument means. */
  async has(systemKey: string, ref: string): Promise<boolean> {
    return !!((await usersRepo.byId(this.d.db, systemKey, ref)) ?? (await usersRepo.byEmail(this.d.db, systemKey, ref)));
  }

  /** A new session of a user, without its password: for the system's developer only (who may set
   *  the user's password anyway). */
  async impersonate(p: Principal, systemKey: string, ref: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    return this.session(this.d.db, systemKey, await this.findUser(this.d.db, systemKey, ref));
  }

  private async deleteUser(systemKey: string, u: UserRow) {
    await this.d.db.tx(async (tx) => {
      await this.d.tokens.revokeSubject(tx, "user", u.user_id);
      await this.roles.removeSubject(tx, systemKey, "user", u.user_id);
      await usersRepo.delete(tx, systemKey, u.user_id);
      await this.d.changes.record(tx, systemKey, "user", u.email, "delete", { user_id: u.user_id });
    });
    this.rows.delete(`${systemKey}/${u.user_id}`);
    this.d.tokens.forgetSubject("user", u.user_id);
    this.d.events.emit("User::UserDeleted", systemKey, { user: { email: u.email, user_id: u.user_id }, userId: u.user_id });
  }

  /** POST /api/v/1/user/info: a user with the create permission on the users list adds a user. */
  async createAsUser(p: Principal, body: unknown, headerSystemKey?: string | null) {
    const systemKey = await this.systemOf(p, headerSystemKey);
    await this.d.perms.require(p, { kind: "users" }, LEVEL.CREATE, "users");
    return this.createIn(systemKey, body, false);
  }

  /** PUT /api/v/2/user/info: `{query, changes}` applied to every matching user (update on the users list). */
  async updateByQuery(p: Principal, body: unknown, headerSystemKey?: string | null) {
    const systemKey = await this.systemOf(p, headerSystemKey);
    await this.d.perms.require(p, { kind: "users" }, LEVEL.UPDATE, "users");
    const b = objectBody(body);
    if (b.query === undefined) return this.updateInfo(p, b);
    knownFields(b, QUERY_UPDATE_FIELDS);
    const changes = objectBody(b.changes !== undefined ? b.changes : b.$set, "changes");
    const schema = await this.schema(this.d.db, systemKey);
    const q = parseQuery(b.query, { defaultPageSize: 0 });
    const rows = await usersRepo.list(this.d.db, systemKey, q, schema.map, { ordered: false, paged: false });
    for (const u of rows) await this.applyChanges(p, u, changes, { allowRoles: false, allowPassword: false });
    return { count: rows.length };
  }

  // ---- developer administration (/admin/user/{systemKey}) -------------------------------------

  async adminList(p: Principal, systemKey: string, query: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const r = await this.query(systemKey, query, true);
    // Go's GetUsersWithQuery wants a bare array, GetAllUsers an object
    return query !== null ? r.Data : r;
  }

  async adminCount(p: Principal, systemKey: string, query: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const schema = await this.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined);
    return { count: await usersRepo.count(this.d.db, systemKey, q.filters, schema.map) };
  }

  async adminCreate(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    return this.createIn(systemKey, body, true);
  }

  private async createIn(systemKey: string, body: unknown, allowRoles: boolean) {
    const b = objectBody(body);
    if (!allowRoles) refusePrivileged(b);
    let roles: unknown[] = ["Authenticated"];
    if (b.roles !== undefined) {
      if (!allowRoles) throw fail("INVALID_ARGUMENT", "roles cannot be set here");
      if (!Array.isArray(b.roles)) throw fail("INVALID_ARGUMENT", "roles must be an array of role ids or names");
      roles = b.roles;
    }
    const row = await this.d.db.tx((tx) => this.insertUser(tx, systemKey, b, roles));
    const sess = await this.session(this.d.db, systemKey, row);
    this.d.events.emit("User::UserCreated", systemKey, { user: { email: row.email, user_id: row.user_id, creation_date: row.creation_date } });
    return { ...sess, email: row.email, creation_date: row.creation_date };
  }

  async adminUpdate(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    knownFields(b, ADMIN_UPDATE_FIELDS);
    const u = await this.findUser(this.d.db, systemKey, b.user ?? b.user_id);
    return this.applyChanges(p, u, objectBody(b.changes, "changes"), { allowRoles: true, allowPassword: true });
  }

  async adminDelete(p: Principal, systemKey: string, ref: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const u = await this.findUser(this.d.db, systemKey, ref);
    await this.deleteUser(systemKey, u);
    return {};
  }

  // ---- columns --------------------------------------------------------------------------------

  async columns(p: Principal, systemKey?: string | null) {
    return this.columnsOf.list(await this.systemOf(p, systemKey));
  }

  async addColumn(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.add(systemKey, body);
    return {};
  }

  async deleteColumn(p: Principal, systemKey: string, name: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.remove(systemKey, name, (tx, n) => usersRepo.dropDataKey(tx, systemKey, n));
    this.rows.deleteWhere((r) => r.system_key === systemKey);
    return {};
  }
}
