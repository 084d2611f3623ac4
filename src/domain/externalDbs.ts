// External database connections: developers create and list
// them; users with permission read (password masked, and only if they may update), change,
// delete and run data operations. Credentials are sealed at rest; one pooled connector per
// connection, closed when it changes or goes.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import type { SecretBox } from "../auth/secrets.ts";
import { fail, notFound } from "../core/errors.ts";
import { newUuid, nowIso } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type Credentials, type DataResult, type DbType, dbTypeOf, maskCredentials, operationOf, parseCredentials } from "../external/connector.ts";
import { tableIdent } from "../external/tables.ts";
import type { Query } from "../core/query.ts";
import type { CollectionRow } from "../store/collections.ts";
import type { ConnectorPool } from "../external/pool.ts";
import { type ExternalDbRow, externalDbsRepo } from "../store/externalDbs.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const KNOWN = new Set(["name", "db_type", "dbtype", "credentials", "id", "system_key"]);
const TRANSACTION_STATEMENTS_MAX = 1000;

export class ExternalDbs {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly box: SecretBox, private readonly pool: ConnectorPool) {}

  private credentialsOf(r: ExternalDbRow): Credentials { return JSON.parse(this.box.open(r.credentials)) as Credentials; }
  private key(systemKey: string, name: string) { return `${systemKey}/${name}`; }

  /** The body's credentials: under `credentials`, or (as some clients send them) at the top level. */
  private rawCredentials(b: Record<string, unknown>): Record<string, unknown> {
    if (b.credentials !== undefined) {
      knownFields(b, KNOWN);
      return objectBody(b.credentials, "credentials");
    }
    const { name: _n, db_type: _t, dbtype: _d, id: _i, system_key: _s, ...rest } = b;
    return rest;
  }

  private async guard(p: Principal, systemKey: string, name: string, level: number, what: string) {
    const s = await this.systems.access(p, systemKey);
    if (p.kind !== "developer") await this.d.perms.require(p, { kind: "item", itemKind: "externaldatabases", name }, level, what);
    const r = await externalDbsRepo.get(this.d.db, s.system_key, name);
    if (!r) throw notFound("external database connection", name, "External Database");
    return { s, r };
  }

  async list(p: Principal, systemKey: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await externalDbsRepo.list(this.d.db, s.system_key)).map((r) => ({ name: r.name, dbtype: r.db_type, db_type: r.db_type }));
  }

  async create(p: Principal, systemKey: string, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    if (typeof b.name !== "string" || !NAME_RE.test(b.name)) throw fail("INVALID_ARGUMENT", "name is required: letters, digits, _ . and -");
    const type = dbTypeOf(b.db_type ?? b.dbtype);
    const creds = parseCredentials(type, this.rawCredentials(b));
    const now = nowIso();
    const row: ExternalDbRow = { system_key: s.system_key, name: b.name, id: newUuid(), db_type: type, credentials: this.box.seal(JSON.stringify(creds)), created_at: now, updated_at: now };
    await this.d.db.tx(async (tx) => {
      if (await externalDbsRepo.get(tx, s.system_key, row.name)) throw fail("ALREADY_EXISTS", `external database connection '${row.name}' already exists`);
      await externalDbsRepo.put(tx, row);
    });
    return { success: true };
  }

  /** Name, type and credentials (password masked); only for callers allowed to update it. */
  async get(p: Principal, systemKey: string, name: string) {
    const { s, r } = await this.guard(p, systemKey, name, LEVEL.UPDATE, `read the credentials of external database '${name}' (needs update permission)`);
    return { id: r.id, name: r.name, dbtype: r.db_type, db_type: r.db_type, system_key: s.system_key, credentials: maskCredentials(this.credentialsOf(r)) };
  }

  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    const { s, r } = await this.guard(p, systemKey, name, LEVEL.UPDATE, `update external database '${name}'`);
    const b = objectBody(body);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "a connection cannot be renamed");
    const type = r.db_type as DbType;
    if ((b.db_type ?? b.dbtype) !== undefined && dbTypeOf(b.db_type ?? b.dbtype) !== type) throw fail("INVALID_ARGUMENT", "db_type cannot change (delete the connection and create it again)");
    const raw = this.rawCredentials(b);
    // a masked password sent back unchanged keeps the stored one
    if (raw.password === "********") delete raw.password;
    const creds = parseCredentials(type, raw, this.credentialsOf(r));
    await externalDbsRepo.put(this.d.db, { ...r, credentials: this.box.seal(JSON.stringify(creds)), updated_at: nowIso() });
    await this.pool.drop(this.key(s.system_key, name));
    return maskCredentials(creds);
  }

  async remove(p: Principal, systemKey: string, name: string) {
    const { s } = await this.guard(p, systemKey, name, LEVEL.DELETE, `delete external database '${name}'`);
    await externalDbsRepo.delete(this.d.db, s.system_key, name);
    await this.pool.drop(this.key(s.system_key, name));
    return { success: true };
  }

  /** `{operation: [statement, ...args]}` on the connection: `{Data, Total}`. */
  async data(p: Principal, systemKey: string, name: string, body: unknown): Promise<DataResult> {
    const op = operationOf(body);
    const { s, r } = await this.guard(p, systemKey, name, LEVEL.READ, `use external database '${name}'`);
    const b = objectBody(body);
    let timeoutMs = this.d.config.externalDbTimeoutMs;
    if (b.timeout !== undefined) {
      if (typeof b.timeout !== "number" || !Number.isInteger(b.timeout) || b.timeout < 1 || b.timeout * 1000 > this.d.config.externalDbTimeoutMs)
        throw fail("INVALID_ARGUMENT", `timeout must be 1 to ${this.d.config.externalDbTimeoutMs / 1000} seconds`);
      timeoutMs = b.timeout * 1000;
    }
    return this.pool.get(this.key(s.system_key, name), r.db_type as DbType, this.credentialsOf(r)).perform(op, timeoutMs);
  }

  /** Statements (each `[statement, ...args]`) in one transaction, all or none, on a SQL
   *  connection: the rights of a data operation. */
  async transaction(p: Principal, systemKey: string, name: string, statements: unknown): Promise<void> {
    if (!Array.isArray(statements) || statements.length === 0 || statements.length > TRANSACTION_STATEMENTS_MAX)
      throw fail("INVALID_ARGUMENT", `a transaction is a list of 1 to ${TRANSACTION_STATEMENTS_MAX} statements`);
    for (const [i, st] of statements.entries())
      if (!Array.isArray(st) || st.length === 0) throw fail("INVALID_ARGUMENT", `statement ${i} must be a list: the SQL first, then its arguments`);
    const { s, r } = await this.guard(p, systemKey, name, LEVEL.READ, `use external database '${name}'`);
    const c = this.pool.get(this.key(s.system_key, name), r.db_type as DbType, this.credentialsOf(r));
    if (!c.transaction) throw fail("INVALID_ARGUMENT", `transactions need a SQL database: '${name}' is ${r.db_type}`);
    await c.transaction(statements as unknown[][], this.d.config.externalDbTimeoutMs);
  }

  /** Connectors of a deleted system's connections. */
  forgetSystem(systemKey: string) { return this.pool.dropWhere((k) => k.startsWith(`${systemKey}/`)); }

  // ---- collections that are database connections ------------------------------------------------

  /** The stored form of a connection collection: what listings show, and the sealed credentials.
   *  `changes` go over the current connection (`base`) when there is one. */
  sealConnection(changes: Record<string, unknown>, base?: string | null): string {
    const cur = base ? this.openConnection(base) : null;
    const type = dbTypeOf(changes.dbtype ?? cur?.type);
    if (cur && type !== cur.type) throw fail("INVALID_ARGUMENT", "dbtype cannot change (delete the collection and create it again)");
    const { dbtype: _t, tablename, ...raw } = changes;
    if (raw.password === "********") delete raw.password;
    const creds = parseCredentials(type, raw, cur?.creds);
    // the table (SQL) or collection (MongoDB); a CouchDB connection is its database
    const table = tablename ?? cur?.table ?? "";
    if (typeof table !== "string" || (!table && type !== "couchdb")) throw fail("INVALID_ARGUMENT", "tablename is required");
    if (table) tableIdent("postgres", table);
    return JSON.stringify({ dbtype: type, user: creds.user, address: creds.address, port: creds.port, dbname: creds.dbname, tablename: table, sealed: this.box.seal(JSON.stringify(creds)) });
  }

  private openConnection(json: string): { type: DbType; creds: Credentials; table: string } {
    const c = JSON.parse(json) as Record<string, unknown>;
    const type = dbTypeOf(c.dbtype);
    const creds = typeof c.sealed === "string" ? (JSON.parse(this.box.open(c.sealed)) as Credentials) : parseCredentials(type, { user: c.user, password: c.password, address: c.address, port: c.port, dbname: c.dbname });
    return { type, creds, table: String(c.tablename ?? "") };
  }

  /** The connection's table operations, bound to its table and the time limit. */
  private table(row: CollectionRow) {
    const { type, creds, table } = this.openConnection(row.connection!);
    if (!table && type !== "couchdb") throw fail("INVALID_ARGUMENT", `collection '${row.name}' has no tablename`);
    const ops = this.pool.get(`collection:${row.collection_id}`, type, creds).table;
    const ms = this.d.config.externalDbTimeoutMs;
    return {
      fetch: (q: Query) => ops.fetch(table, q, ms), count: (q: Query) => ops.count(table, q, ms),
      insert: (items: Record<string, unknown>[]) => ops.insert(table, items, ms),
      update: (q: Query, set: Record<string, unknown>) => ops.update(table, q, set, ms), delete: (q: Query) => ops.delete(table, q, ms),
    };
  }

  async tableFetch(row: CollectionRow, q: Query): Promise<{ rows: unknown[]; total: number }> {
    const t = this.table(row);
    const rows = await t.fetch(q);
    // a page that is not full tells the total without a second query
    const total = q.pageSize && (rows.length === q.pageSize || (rows.length === 0 && q.pageNum > 1)) ? await t.count(q) : (q.pageNum - 1) * q.pageSize + rows.length;
    return { rows, total };
  }

  tableCount(row: CollectionRow, q: Query) { return this.table(row).count(q); }
  tableInsert(row: CollectionRow, items: Record<string, unknown>[]) { return this.table(row).insert(items); }
  tableUpdate(row: CollectionRow, q: Query, set: Record<string, unknown>) { return this.table(row).update(q, set); }
  tableDelete(row: CollectionRow, q: Query) { return this.table(row).delete(q); }

  /** A connection collection changed or went: its connector closes. */
  forgetCollection(id: string) { return this.pool.drop(`collection:${id}`); }
}
