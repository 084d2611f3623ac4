// User secrets (/api/v/4/user_secrets): named values of a system (any JSON: a password, a key, a
// service account's whole JSON file) that code services read, kept sealed at rest with the node's
// secret box. The value never leaves this module but to a caller allowed to read it: not in the
// change log (sealed there too), the audit trail (the route's rule redacts it) or a log line.
// Developers manage them; users and devices through the role permission `usersecrets`, level by level.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import type { Executor } from "../store/db.ts";
import { type UserSecretRow, userSecretsRepo } from "../store/userSecrets.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

export const SECRET_NAME_MAX = 256;
/** A value's JSON text: at most this many bytes. */
export const SECRET_VALUE_MAX = 1024 * 1024;
/** Secrets in a system. */
export const MAX_SECRETS = 1000;

function checkName(v: unknown): string {
  if (typeof v !== "string" || !v.length || v.length > SECRET_NAME_MAX) throw fail("INVALID_ARGUMENT", `a secret's name must be a string of 1 to ${SECRET_NAME_MAX} characters`);
  if (/[\u0000-\u001f\u007f/]/.test(v)) throw fail("INVALID_ARGUMENT", "a secret's name may not hold control characters or '/'");
  return v;
}

/** The value's JSON text: any JSON value but null (a body that is missing or null sets nothing). */
function valueText(v: unknown): string {
  if (v === undefined || v === null) throw fail("INVALID_ARGUMENT", "the body is the secret's value: any JSON value but null");
  const text = JSON.stringify(v);
  if (text.length > SECRET_VALUE_MAX) throw fail("INVALID_ARGUMENT", `a secret's value is at most ${SECRET_VALUE_MAX} bytes of JSON`);
  return text;
}

/** What a change of a secret carries in the change log: its value sealed. */
export interface UserSecretChange { name: string; sealed: string }

export class UserSecrets {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly box: SecretBox) {}

  /** The caller's system, if it may act on its secrets at `level` (developers always). */
  private async allowed(p: Principal, systemKey: string, level: number) {
    const s = await this.systems.access(p, systemKey);
    if (p.kind !== "developer") await this.d.perms.require(p, { kind: "usersecrets" }, level, "user secrets");
    return s.system_key;
  }

  private open(r: UserSecretRow): unknown { return JSON.parse(this.box.open(r.sealed)); }

  /** The rows a query (by name) matches: every row without one. */
  private async matching(ex: Executor, sk: string, query: unknown): Promise<UserSecretRow[]> {
    if (query === undefined || query === null || query === "") return userSecretsRepo.list(ex, sk);
    return userSecretsRepo.find(ex, sk, parseQuery(query).filters);
  }

  /** Name -> value of the secrets a query matches (all without one). */
  async list(p: Principal, systemKey: string, query?: unknown): Promise<Record<string, unknown>> {
    const sk = await this.allowed(p, systemKey, LEVEL.READ);
    const out: Record<string, unknown> = {};
    for (const r of await this.matching(this.d.db, sk, query)) out[r.name] = this.open(r);
    return out;
  }

  /** The secrets a query matches as {name, data} (the code library's readWithQuery). */
  async find(p: Principal, systemKey: string, query?: unknown): Promise<{ name: string; data: unknown }[]> {
    return Object.entries(await this.list(p, systemKey, query)).map(([name, data]) => ({ name, data }));
  }

  async get(p: Principal, systemKey: string, name: string): Promise<unknown> {
    const sk = await this.allowed(p, systemKey, LEVEL.READ);
    const r = await userSecretsRepo.get(this.d.db, sk, name);
    if (!r) throw notFound("user secret", name);
    return this.open(r);
  }

  async create(p: Principal, systemKey: string, name: unknown, value: unknown): Promise<string> {
    const sk = await this.allowed(p, systemKey, LEVEL.CREATE);
    const n = checkName(name);
    const r: UserSecretRow = { system_key: sk, name: n, sealed: this.box.seal(valueText(value)), updated_at: nowIso() };
    await this.d.db.tx(async (tx) => {
      if (await userSecretsRepo.get(tx, sk, n)) throw fail("ALREADY_EXISTS", `user secret '${n}' already exists`);
      if ((await userSecretsRepo.count(tx, sk)) >= MAX_SECRETS) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_SECRETS} user secrets`);
      await this.write(tx, r);
    });
    return `user secret '${n}' created`;
  }

  async update(p: Principal, systemKey: string, name: string, value: unknown): Promise<string> {
    const sk = await this.allowed(p, systemKey, LEVEL.UPDATE);
    const r: UserSecretRow = { system_key: sk, name, sealed: this.box.seal(valueText(value)), updated_at: nowIso() };
    await this.d.db.tx(async (tx) => {
      if (!(await userSecretsRepo.get(tx, sk, name))) throw notFound("user secret", name);
      await this.write(tx, r);
    });
    return `user secret '${name}' updated`;
  }

  async remove(p: Principal, systemKey: string, name: string): Promise<string> {
    const sk = await this.allowed(p, systemKey, LEVEL.DELETE);
    await this.d.db.tx(async (tx) => {
      if (!(await userSecretsRepo.get(tx, sk, name))) throw notFound("user secret", name);
      await this.drop(tx, sk, name);
    });
    return `user secret '${name}' deleted`;
  }

  /** Deletes the secrets a query matches (all without one); answers how many went. */
  async removeMatching(p: Principal, systemKey: string, query?: unknown): Promise<string> {
    const sk = await this.allowed(p, systemKey, LEVEL.DELETE);
    const n = await this.d.db.tx(async (tx) => {
      const rows = await this.matching(tx, sk, query);
      for (const r of rows) await this.drop(tx, sk, r.name);
      return rows.length;
    });
    return `${n} user secret${n === 1 ? "" : "s"} deleted`;
  }

  private async write(tx: Executor, r: UserSecretRow) {
    await userSecretsRepo.put(tx, r);
    const change: UserSecretChange = { name: r.name, sealed: r.sealed };
    await this.d.changes.record(tx, r.system_key, "usersecret", r.name, "upsert", change);
  }

  private async drop(tx: Executor, sk: string, name: string) {
    await userSecretsRepo.delete(tx, sk, name);
    await this.d.changes.record(tx, sk, "usersecret", name, "delete", { name });
  }
}
