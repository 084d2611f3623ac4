// File stores (ClearBlade's newer file areas): a named store of files in a storage backend, with
// raw bytes in and out, listing with continuation, copy and move. Who may read and who may write
// is the store's own choice, each a comma list of methods, the first one whose credentials the
// request carries deciding (`no_auth` when it carries none): `clearblade_auth` (a token header), `http_basic_auth` (a user's email
// and password), `payload_auth` (a token in the `token` query parameter), `no_auth` (the caller
// acts as the Anonymous role). A caller found must then hold the role permission `filestorefiles`
// (read to read and list, create to write and copy to, delete to delete; move needs both) on the
// store, on the file ("<store>/<path>") or on all stores; a developer of the system may do everything. Developers define stores (role permission
// `filestores` for users); storage settings with credentials only to developers asking decrypt.
import { LEVEL } from "../auth/permissions.ts";
import { verifyPassword } from "../auth/passwords.ts";
import type { Principal } from "../auth/principal.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type FileStoreRow, fileStoresRepo } from "../store/fileAreas.ts";
import { checkPath, type FileBackend, type FileBody, type ListOptions } from "../store/files/backend.ts";
import { usersRepo } from "../store/users.ts";
import type { DomainDeps } from "./deps.ts";
import { checkAreaName, checkStorageKind, type FileStorage, sealedConfig, shownConfig } from "./fileStorage.ts";
import type { Roles } from "./roles.ts";
import type { Systems } from "./systems.ts";

export const AUTH_METHODS = ["clearblade_auth", "http_basic_auth", "payload_auth", "no_auth"] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];
/** Stores in a system. */
export const MAX_FILE_STORES = 1000;
/** A store's fields as ClearBlade's clients send them (a store read with decrypt also carries its
 *  system_key); anything else is refused, not dropped. */
const STORE_FIELDS = new Set(["name", "storage_type", "storage_config", "read_auth_method", "write_auth_method", "system_key"]);

/** What a request to a store's files carries to prove who it is. */
export interface FileCredentials {
  /** a token header (ClearBlade-UserToken, -DevToken, -DeviceToken) */
  token: string | null;
  /** the Authorization header */
  authorization: string | null;
  /** the `token` query parameter */
  payloadToken: string | null;
}

export type FileAccess = "read" | "write" | "delete" | "move";
const LEVEL_FOR: Record<FileAccess, number> = {
  read: LEVEL.READ, write: LEVEL.CREATE, delete: LEVEL.DELETE, move: LEVEL.CREATE | LEVEL.DELETE,
};

export function checkAuthMethods(v: unknown, what: string): string {
  if (v === undefined || v === null || v === "") return "clearblade_auth";
  if (typeof v !== "string") throw fail("INVALID_ARGUMENT", `${what} must be a comma list of ${AUTH_METHODS.join(", ")}`);
  const methods = v.split(",").map((m) => m.trim()).filter(Boolean);
  if (!methods.length) throw fail("INVALID_ARGUMENT", `${what} names no method`);
  for (const m of methods) {
    if (m === "mtls_auth") throw fail("INVALID_ARGUMENT", `${what}: mtls_auth is not supported by Outpost (${AUTH_METHODS.join(", ")})`);
    if (!(AUTH_METHODS as readonly string[]).includes(m)) throw fail("INVALID_ARGUMENT", `${what}: '${m}' is not an auth method (${AUTH_METHODS.join(", ")})`);
  }
  return [...new Set(methods)].join(",");
}

export class FileStores {
  constructor(
    private readonly d: DomainDeps, private readonly systems: Systems, private readonly roles: Roles,
    private readonly storage: FileStorage, private readonly secrets: SecretBox,
  ) {}

  private toWire(r: FileStoreRow, decrypt: boolean) {
    const out: Record<string, unknown> = { name: r.name, storage_type: r.storage_type, read_auth_method: r.read_auth_method, write_auth_method: r.write_auth_method };
    if (decrypt) { out.storage_config = shownConfig(r.storage_config, true, this.secrets); out.system_key = r.system_key; }
    return out;
  }

  private async mustGet(systemKey: string, name: string): Promise<FileStoreRow> {
    const r = await fileStoresRepo.get(this.d.db, systemKey, name);
    if (!r) throw notFound("file store", name);
    return r;
  }

  backendOf(r: FileStoreRow): FileBackend {
    return this.storage.backend(r.system_key, "filestores", r.name, r.storage_type, r.storage_config);
  }

  /** decrypt (storage settings with credentials) is for developers only. */
  private async readable(p: Principal, systemKey: string, decrypt: boolean) {
    const s = await this.systems.access(p, systemKey);
    if (decrypt && p.kind !== "developer") throw fail("DEVELOPER_ONLY", "decrypt=true (storage settings with credentials) needs a developer token");
    await this.d.perms.require(p, { kind: "filestores" }, LEVEL.READ, "file stores");
    return s;
  }

  async list(p: Principal, systemKey: string, decrypt: boolean) {
    const s = await this.readable(p, systemKey, decrypt);
    return (await fileStoresRepo.list(this.d.db, s.system_key)).map((r) => this.toWire(r, decrypt));
  }

  async get(p: Principal, systemKey: string, name: string, decrypt: boolean) {
    const s = await this.readable(p, systemKey, decrypt);
    return this.toWire(await this.mustGet(s.system_key, name), decrypt);
  }

  async create(p: Principal, systemKey: string, body: unknown) {
    const s = await this.systems.access(p, systemKey);
    await this.d.perms.require(p, { kind: "filestores" }, LEVEL.CREATE, "file stores");
    const b = knownFields(objectBody(body), STORE_FIELDS);
    if (b.system_key !== undefined && b.system_key !== s.system_key) throw fail("INVALID_ARGUMENT", "system_key, when sent, must be the path's system key");
    const name = checkAreaName(b.name, "file store");
    const kind = checkStorageKind(b.storage_type === undefined ? "" : b.storage_type, "storage_type");
    const row: FileStoreRow = {
      system_key: s.system_key, name, storage_type: kind,
      storage_config: sealedConfig(kind, b.storage_config, "storage_config", this.secrets),
      read_auth_method: checkAuthMethods(b.read_auth_method, "read_auth_method"),
      write_auth_method: checkAuthMethods(b.write_auth_method, "write_auth_method"),
      created_at: nowIso(),
    };
    await this.d.db.tx(async (tx) => {
      if (await fileStoresRepo.get(tx, s.system_key, name)) throw fail("ALREADY_EXISTS", `file store '${name}' already exists`);
      if ((await fileStoresRepo.count(tx, s.system_key)) >= MAX_FILE_STORES) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_FILE_STORES} file stores`);
      await fileStoresRepo.insert(tx, row);
    });
    return this.toWire(row, false);
  }

  /** Deletes the store and, on local storage, its files; files in S3 stay (the bucket is the operator's). */
  async remove(p: Principal, systemKey: string, name: unknown) {
    const s = await this.systems.access(p, systemKey);
    await this.d.perms.require(p, { kind: "filestores" }, LEVEL.DELETE, "file stores");
    if (typeof name !== "string" || !name) throw fail("INVALID_ARGUMENT", "the store's name is required (?name=)");
    const r = await this.mustGet(s.system_key, name);
    await fileStoresRepo.delete(this.d.db, s.system_key, name);
    await this.storage.removeArea(s.system_key, "filestores", name, r.storage_type);
    return {};
  }

  // ---- files ----------------------------------------------------------------------------------

  /** Who the request is by the store's methods for this access; AUTH_REQUIRED when it carries
   *  credentials of none of them. */
  private async caller(systemKey: string, r: FileStoreRow, access: FileAccess, c: FileCredentials): Promise<Principal> {
    const methods = (access === "read" ? r.read_auth_method : r.write_auth_method).split(",") as AuthMethod[];
    for (const m of methods) {
      if (m === "clearblade_auth" && c.token) return this.byToken(c.token);
      if (m === "payload_auth" && c.payloadToken) return this.byToken(c.payloadToken);
      if (m === "http_basic_auth" && c.authorization?.toLowerCase().startsWith("basic ")) return this.byPassword(systemKey, c.authorization.slice(6).trim());
    }
    // (no credentials of the other methods: only then the Anonymous role)
    if (methods.includes("no_auth")) return { kind: "anonymous", systemKey, id: "anon", email: "anon", roles: ["Anonymous"], tokenHash: "" };
    throw fail("AUTH_REQUIRED", `file store '${r.name}' takes ${methods.join(" or ")} to ${access === "read" ? "read" : "write"}`);
  }

  private async byToken(token: string): Promise<Principal> {
    const p = await this.d.tokens.resolve(token);
    if (!p) throw fail("INVALID_TOKEN", "the token is invalid, expired or logged out");
    return p;
  }

  private async byPassword(systemKey: string, basic: string): Promise<Principal> {
    const text = Buffer.from(basic, "base64").toString();
    const at = text.indexOf(":");
    if (at < 0) throw fail("BAD_CREDENTIALS", "Authorization: Basic must carry email:password");
    const u = await usersRepo.byEmail(this.d.db, systemKey, text.slice(0, at));
    if (!u || !(await verifyPassword(text.slice(at + 1), u.password_hash))) throw fail("BAD_CREDENTIALS", "invalid email or password");
    return { kind: "user", systemKey, id: u.user_id, email: u.email, roles: await this.roles.rolesOf(this.d.db, systemKey, "user", u.user_id), tokenHash: "" };
  }

  /** A store's backend, for a caller the store's methods let in with the rights `access` needs. */
  async open(systemKey: string, name: string, access: FileAccess, c: FileCredentials, path?: string): Promise<FileBackend> {
    const s = await this.systems.find(systemKey);
    if (!s) throw fail("SYSTEM_NOT_FOUND", `system '${systemKey}' does not exist`);
    const r = await this.mustGet(s.system_key, name);
    const p = await this.caller(s.system_key, r, access, c);
    return this.openAs(p, r, access, path);
  }

  /** As open(), for a caller already known (code running as it). */
  async openFor(p: Principal, systemKey: string, name: string, access: FileAccess, path?: string): Promise<FileBackend> {
    const s = await this.systems.access(p, systemKey);
    return this.openAs(p, await this.mustGet(s.system_key, name), access, path);
  }

  /** The caller's rights on the store's files: a grant on the store, on the file ("<store>/<path>"),
   *  or on every store's files. */
  private async openAs(p: Principal, r: FileStoreRow, access: FileAccess, path?: string): Promise<FileBackend> {
    await this.systems.access(p, r.system_key);
    const need = LEVEL_FOR[access];
    let held = await this.d.perms.level(p, { kind: "item", itemKind: "filestorefiles", name: r.name });
    if ((held & need) !== need && path) held |= await this.d.perms.level(p, { kind: "item", itemKind: "filestorefiles", name: `${r.name}/${path}` });
    if ((held & need) !== need) throw fail("PERMISSION_DENIED", `not allowed to ${access} the files of file store '${r.name}' (the role permission filestorefiles)`);
    return this.backendOf(r);
  }

  get maxFileBytes() { return this.storage.maxFileBytes; }

  async read(files: FileBackend, path: string) {
    return files.stream(checkPath(path));
  }

  async write(files: FileBackend, path: string, body: FileBody) {
    return files.put(checkPath(path), body, { maxBytes: this.storage.maxFileBytes });
  }

  async removeFile(files: FileBackend, path: string) {
    if (!(await files.delete(checkPath(path)))) throw notFound("file", path);
    return {};
  }

  /** A page of the listing, as ClearBlade answers it. */
  async listFiles(files: FileBackend, opts: ListOptions) {
    const page = await files.list(opts);
    return {
      files: page.entries.map((e) => ({
        full_path: e.isDir ? `${e.path}/` : e.path, size_bytes: e.size, permissions: e.isDir ? "drwxrwxrwx" : "-rw-rw-rw-",
        updated_at: Math.floor(e.modified.getTime() / 1000), is_dir: e.isDir,
      })),
      continuation_token: page.continuation,
    };
  }
}
