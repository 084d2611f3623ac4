// Collections and their items: schema management, fetch with the
// query language, insert, update, delete, count, upsert and indexes, with per-collection role
// permissions and typed domain events.
import { LEVEL, type Resource } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { LruMap, TtlCache } from "../core/cache.ts";
import { type ColumnType, checkName, fromSql, parseColumnType, toSql } from "../core/columns.ts";
import { ApiError, ErrorKinds, fail, notFound } from "../core/errors.ts";
import { newKey, newTimeUuid, nowIso } from "../core/ids.ts";
import { type ColumnMap, type Condition, type FetchResult, type Query, canonicalQuery, parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type CollectionRow, type ColumnDef, type IndexRow, type PreparedFetch, collectionColumnMap, collectionsRepo } from "../store/collections.ts";
import { type Executor, schemaMissing, type SqlValue, statementTooLarge, uniqueViolation } from "../store/db.ts";
import { tombstonesRepo } from "../store/sync.ts";
import type { RowChange } from "./changes.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

/** A collection as the rest of the code sees it: metadata, columns, indexes and the query column map. */
export interface Collection {
  row: CollectionRow;
  columns: ColumnDef[];
  indexes: IndexRow[];
  map: ColumnMap;
  types: Map<string, ColumnType>;
  /** Compiled fetch queries by the query's canonical form; lives as long as this schema snapshot. */
  compiled: LruMap<string, CompiledFetch>;
}

interface CompiledFetch {
  prepared: PreparedFetch;
  /** The last result, valid while the collection's write version is unchanged. */
  result?: FetchResult & { version: number; at: number };
}
/** Results kept per compiled query: small pages only, and never older than this. */
const RESULT_MAX_ROWS = 100;
const RESULT_MAX_MS = 30_000;
const COMPILED_MAX = 200;
/** Totals kept per collection and filter, while the collection's write version is unchanged. */
const TOTALS_MAX = 1_000;

/** A collection's name is a value, never an SQL identifier (its table is named by its id), so it
 *  may hold spaces as ClearBlade's do ("John Doe"); not at either end, where they would not show. */
const COLLECTION_NAME_RE = /^[A-Za-z0-9_](?:[A-Za-z0-9_.\- ]{0,98}[A-Za-z0-9_.-])?$/;
const META_CACHE_MS = 5_000;
/** Rows per insert request; a bigger array is a 400, not an out-of-memory. */
export const MAX_INSERT_ROWS = 100_000;

const resourceOf = (c: Collection): Resource => ({ kind: "collection", id: c.row.collection_id, name: c.row.name });
const dataError = (detail: string) => new ApiError({ ...ErrorKinds.INVALID_ARGUMENT, category: "Data" }, detail);

function collectionName(v: unknown): string {
  if (typeof v !== "string" || !COLLECTION_NAME_RE.test(v))
    throw dataError(`invalid collection name '${String(v)}': use letters, digits, '_', '-', '.' and spaces inside (max 100)`);
  return v;
}

/** Connection keys of a collection that represents an external database (a "connect" collection). */
const CONNECTION_KEYS = ["dbtype", "user", "password", "address", "port", "dbname", "tablename"] as const;
const CONNECTION_FIELDS = new Set<string>(CONNECTION_KEYS);
const CREATE_FIELDS = new Set(["name", "appID", "appId", "systemKey", "system_key", "columns", ...CONNECTION_KEYS]);
/** A schema change: the collection, and one operation. */
const SCHEMA_UPDATE_FIELDS = new Set(["id", "appID", "appId", "name", "addColumn", "deleteColumn", "renameColumn", "renameCollection", "connectionStringMap"]);
const ITEM_UPDATE_FIELDS = new Set(["query", "$set"]);

/** What a collection that is a database connection needs from the external databases. */
export interface ConnectedTables {
  sealConnection(changes: Record<string, unknown>, base?: string | null): string;
  tableFetch(row: CollectionRow, q: Query): Promise<{ rows: unknown[]; total: number }>;
  tableCount(row: CollectionRow, q: Query): Promise<number>;
  tableInsert(row: CollectionRow, items: Record<string, unknown>[]): Promise<number>;
  tableUpdate(row: CollectionRow, q: Query, set: Record<string, unknown>): Promise<number>;
  tableDelete(row: CollectionRow, q: Query): Promise<number>;
  forgetCollection(id: string): Promise<void>;
}

function build(row: CollectionRow, columns: ColumnDef[], indexes: IndexRow[]): Collection {
  const types = new Map<string, ColumnType>([["item_id", "uuid"]]);
  for (const c of columns) types.set(c.name, c.type);
  return { row, columns, indexes, map: collectionColumnMap(columns), types, compiled: new LruMap(COMPILED_MAX) };
}

export class Collections {
  private readonly byId = new TtlCache<string, Collection>(META_CACHE_MS, 5_000);
  private readonly idByName = new TtlCache<string, string>(META_CACHE_MS, 5_000);
  /** Write version per collection. Query results are reused while it is unchanged, which is exact
   *  only while this process is the database's one writer (DomainDeps.writerAloneSince): results
   *  and totals from before it became so are not reused. */
  private readonly versions = new Map<string, number>();
  /** TOTAL of a filter on a collection at a write version: a client paging through a large
   *  collection counts it once, not once per page. */
  private readonly totals = new Map<string, { version: number; n: number; at: number }>();

  /** Items of collections that are database connections go through these (the external databases). */
  private tables(): ConnectedTables {
    if (!this.connected) throw fail("INVALID_ARGUMENT", "database connections are not available");
    return this.connected;
  }

  /** `connected`: the tables of external databases (none: their collections are refused) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly connected: ConnectedTables | null = null) {
    // from another node, a write's row count is not known here: its total is counted again
    d.signals.on("collection.written", ({ collectionId, added }, remote) => this.bump(collectionId, remote ? undefined : added));
    d.signals.on("collection.changed", ({ collectionId }) => this.drop(collectionId));
  }

  /** Whether a result taken at `at` may be reused. */
  private reusable(at: number): boolean {
    const since = this.d.writerAloneSince();
    return since !== null && at >= since;
  }

  private version(id: string) { return this.versions.get(id) ?? 0; }
  /** Every write to a collection's rows calls this after its transaction; `added`: the rows it
   *  added (removed: negative) when it knows them, so the TOTAL without a filter is carried over
   *  instead of counted again (a collection written to all the time still pages cheaply). */
  written(id: string, added?: number) { this.d.signals.emit("collection.written", { collectionId: id, added }); }

  private bump(id: string, added: number | undefined) {
    const v = this.version(id);
    this.versions.set(id, v + 1);
    const all = added === undefined ? undefined : this.totals.get(totalKey(id, []));
    if (all && all.version === v) { all.version = v + 1; all.n += added!; }
  }

  /** Records a collection's schema for edge sync (with a renamed column, so an edge renames it
   *  and keeps its values rather than dropping one column and adding another). */
  private async logSchema(tx: Executor, id: string, renamed?: { from: string; to: string }) {
    const row = await collectionsRepo.byId(tx, id);
    if (!row || !this.d.changes.logs(row.system_key)) return;
    await this.d.changes.record(tx, row.system_key, "collection", row.name, "upsert",
      { collection_id: id, name: row.name, connection: row.connection, columns: await collectionsRepo.columns(tx, id), indexes: await collectionsRepo.indexes(tx, id), ...(renamed ? { renamed } : {}) });
  }

  /** Records written rows for edge sync (reading them back only when someone syncs them). */
  private async logRows(tx: Executor, c: Collection, itemIds: string[], op: "upsert" | "delete", hlc: string) {
    if (!itemIds.length || !this.d.changes.wantsRows(c.row.system_key, c.row.name)) return;
    const base = { collection_id: c.row.collection_id, collection: c.row.name };
    if (op === "delete") {
      for (const id of itemIds) await tombstonesRepo.put(tx, c.row.collection_id, id, hlc);
      await this.d.changes.rows(tx, c.row.system_key, itemIds.map((item_id) => ({ ...base, item_id, op, values: null, hlc })));
      return;
    }
    const cols = ["item_id", ...c.columns.map((x) => x.name)];
    const rows: RowChange[] = [];
    for (let i = 0; i < itemIds.length; i += 500) {
      for (const r of await collectionsRepo.byIds(tx, c.row.collection_id, cols, itemIds.slice(i, i + 500))) {
        const { _hlc, ...values } = r;
        rows.push({ ...base, item_id: r.item_id as string, op, values: this.rowToWire(c, values), hlc: (_hlc as string) ?? hlc });
      }
    }
    await this.d.changes.rows(tx, c.row.system_key, rows);
  }

  /** Drops cached schema and results of a collection (sync changed it underneath). */
  forgetId(id: string) { this.d.signals.emit("collection.changed", { collectionId: id }); }

  private forget(c: CollectionRow) { this.forgetId(c.collection_id); }

  /** Drops a collection's schema (under its id and any name that led to it) and the results
   *  computed from its rows. */
  private drop(id: string) {
    const c = this.byId.get(id);
    if (c) {
      this.byId.delete(id);
      this.idByName.delete(`${c.row.system_key}/${c.row.name}`);
    }
    this.idByName.deleteWhere((v) => v === id);
    this.bump(id, undefined);
  }

  private async load(id: string): Promise<Collection | undefined> {
    return this.byId.getOr(id, async () => {
      const row = await collectionsRepo.byId(this.d.db, id);
      if (!row) return undefined;
      return build(row, await collectionsRepo.columns(this.d.db, id), await collectionsRepo.indexes(this.d.db, id));
    });
  }

  /** A collection by id, if the caller may act in its system. */
  async byIdFor(p: Principal, id: string): Promise<Collection> {
    const c = /^[0-9a-f]{30}$/.test(id) ? await this.load(id) : undefined;
    if (!c) throw notFound("collection", id, "Data");
    await this.systems.access(p, c.row.system_key);
    return c;
  }

  /** byIdFor() without waiting: the collection when it and its system are cached. */
  byIdNow(p: Principal, id: string): Collection | undefined {
    const c = this.byId.get(id);
    return c && this.systems.accessNow(p, c.row.system_key) ? c : undefined;
  }

  /** byNameFor() without waiting: the collection when it and its system are cached. */
  byNameNow(p: Principal, systemKey: string, name: string): Collection | undefined {
    if (!this.systems.accessNow(p, systemKey)) return undefined;
    const id = this.idByName.get(`${systemKey}/${name}`);
    return id === undefined ? undefined : this.byId.get(id);
  }

  /** A collection by system key and name, if the caller may act in that system. */
  async byNameFor(p: Principal, systemKey: string, name: string): Promise<Collection> {
    await this.systems.access(p, systemKey);
    const key = `${systemKey}/${name}`;
    const id = this.idByName.get(key) ?? (await this.idByName.getOr(key, async () => (await collectionsRepo.byName(this.d.db, systemKey, name))?.collection_id));
    const c = id ? (this.byId.get(id) ?? (await this.load(id))) : undefined;
    if (!c) throw notFound("collection", name, "Data");
    return c;
  }

  private async require(p: Principal, c: Collection, level: number) {
    await this.d.perms.require(p, resourceOf(c), level);
  }

  private async requireSchema(p: Principal, level: number) {
    await this.d.perms.require(p, { kind: "allcollections" }, level, "collections");
  }

  private assertTable(c: Collection) {
    if (c.row.connection !== null)
      throw dataError(`collection '${c.row.name}' is a database connection: it has no indexes or upserts here`);
  }

  // ---- management -----------------------------------------------------------------------------

  /** POST collectionmanagement: `{name, appID}` (or a connection with `dbtype`). */
  async createCollection(p: Principal, body: unknown, headerSystemKey?: string | null) {
    const b = objectBody(body);
    const systemKey = (b.appID ?? b.appId ?? b.systemKey ?? b.system_key ?? headerSystemKey) as unknown;
    if (typeof systemKey !== "string" || !systemKey) throw fail("INVALID_ARGUMENT", "appID: the system key is required");
    await this.systems.access(p, systemKey);
    await this.requireSchema(p, LEVEL.CREATE);
    const name = collectionName(b.name);
    let connection: string | null = null;
    const columns: ColumnDef[] = [];
    knownFields(b, CREATE_FIELDS);
    if (b.dbtype !== undefined) {
      if (typeof b.dbtype !== "string" || !b.dbtype) throw fail("INVALID_ARGUMENT", "dbtype must be a database type name");
      const conn: Record<string, unknown> = {};
      for (const k of CONNECTION_KEYS) if (b[k] !== undefined) conn[k] = b[k];
      connection = this.tables().sealConnection(conn);
    } else if (b.columns !== undefined) {
      if (!Array.isArray(b.columns)) throw fail("INVALID_ARGUMENT", "columns must be an array of {name, type}");
      for (const c of b.columns) columns.push(this.columnDef(c, columns));
    }
    const row: CollectionRow = { collection_id: newKey(), system_key: systemKey, name, connection, created_at: nowIso() };
    await this.d.db.tx(async (tx) => {
      if (await collectionsRepo.byName(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `collection '${name}' already exists`);
      await collectionsRepo.create(tx, row, columns);
      await this.logSchema(tx, row.collection_id);
    });
    this.idByName.delete(`${systemKey}/${name}`);
    this.d.events.emit("Data::CollectionCreated", systemKey, { collectionId: row.collection_id, collectionName: name });
    return { collectionID: row.collection_id };
  }

  private columnDef(v: unknown, existing: { name: string }[]): ColumnDef {
    const o = objectBody(v, "column");
    const name = checkName(o.name ?? o.column_name, "column");
    if (name === "item_id" || name.startsWith("_")) throw dataError(`column '${name}' is reserved`);
    if (existing.some((c) => c.name === name)) throw fail("ALREADY_EXISTS", `column '${name}' already exists`);
    return { name, type: parseColumnType(o.type, name) };
  }

  /** PUT collectionmanagement: add, delete or rename a column, rename the collection, or change a connection. */
  async updateCollection(p: Principal, body: unknown) {
    const b = objectBody(body);
    let c: Collection;
    if (typeof b.id === "string") c = await this.byIdFor(p, b.id);
    else if (typeof (b.appID ?? b.appId) === "string" && typeof b.name === "string") c = await this.byNameFor(p, (b.appID ?? b.appId) as string, b.name);
    else throw fail("INVALID_ARGUMENT", "id: the collection id is required");
    await this.requireSchema(p, LEVEL.UPDATE);
    const ops = ["addColumn", "deleteColumn", "renameColumn", "renameCollection", "connectionStringMap"].filter((k) => b[k] !== undefined);
    knownFields(b, SCHEMA_UPDATE_FIELDS);
    if (ops.length !== 1) throw fail("INVALID_ARGUMENT", "body needs exactly one of addColumn, deleteColumn, renameColumn, renameCollection, connectionStringMap");
    const id = c.row.collection_id;
    const op = ops[0]!;
    if (op !== "renameCollection" && op !== "connectionStringMap") this.assertTable(c);
    let renamed: { from: string; to: string } | undefined;
    await this.d.db.tx(async (tx) => {
      const columns = await collectionsRepo.columns(tx, id);
      switch (op) {
        case "addColumn": {
          const add = objectBody(b.addColumn, "addColumn");
          const { id: _ignored, ...def } = add; // Python clients repeat the id inside
          await collectionsRepo.addColumn(tx, id, this.columnDef(def, columns));
          break;
        }
        case "deleteColumn": {
          const name = typeof b.deleteColumn === "string" ? b.deleteColumn : objectBody(b.deleteColumn, "deleteColumn").name;
          if (name === "item_id") throw dataError("item_id cannot be deleted");
          if (typeof name !== "string" || !columns.some((x) => x.name === name)) throw notFound("column", String(name), "Data");
          await collectionsRepo.dropColumn(tx, id, name);
          break;
        }
        case "renameColumn": {
          const r = objectBody(b.renameColumn, "renameColumn");
          if (r.from === "item_id") throw dataError("item_id cannot be renamed");
          if (typeof r.from !== "string" || !columns.some((x) => x.name === r.from)) throw notFound("column", String(r.from), "Data");
          const to = checkName(r.to, "column");
          if (to === "item_id" || to.startsWith("_")) throw dataError(`column '${to}' is reserved`);
          if (columns.some((x) => x.name === to)) throw fail("ALREADY_EXISTS", `column '${to}' already exists`);
          await collectionsRepo.renameColumn(tx, id, r.from, to);
          renamed = { from: r.from, to };
          break;
        }
        case "renameCollection": {
          const name = collectionName(b.renameCollection);
          if (name !== c.row.name && (await collectionsRepo.byName(tx, c.row.system_key, name))) throw fail("ALREADY_EXISTS", `collection '${name}' already exists`);
          await collectionsRepo.rename(tx, id, name);
          break;
        }
        case "connectionStringMap": {
          if (c.row.connection === null) throw dataError(`collection '${c.row.name}' is not a database connection`);
          const m = objectBody(b.connectionStringMap, "connectionStringMap");
          knownFields(m, CONNECTION_FIELDS, "connectionStringMap");
          await collectionsRepo.setConnection(tx, id, this.tables().sealConnection(m, c.row.connection));
          break;
        }
      }
      await this.logSchema(tx, id, renamed);
    });
    this.forget(c.row);
    if (c.row.connection !== null) await this.connected?.forgetCollection(id);
    this.d.events.emit("Data::CollectionUpdated", c.row.system_key, { collectionId: id, collectionName: op === "renameCollection" ? (b.renameCollection as string) : c.row.name });
    return {};
  }

  async removeCollection(p: Principal, id: string | null) {
    if (!id) throw fail("INVALID_ARGUMENT", "id: the collection id is required");
    const c = await this.byIdFor(p, id);
    await this.requireSchema(p, LEVEL.DELETE);
    await this.d.db.tx(async (tx) => {
      await collectionsRepo.drop(tx, id, c.row.connection === null);
      await tombstonesRepo.forget(tx, id);
      await this.d.changes.record(tx, c.row.system_key, "collection", c.row.name, "delete", { collection_id: id });
    });
    this.forget(c.row);
    if (c.row.connection !== null) await this.connected?.forgetCollection(id);
    this.d.events.emit("Data::CollectionDeleted", c.row.system_key, { collectionId: id, collectionName: c.row.name });
    return {};
  }

  static toWire(c: CollectionRow) {
    const base: Record<string, unknown> = { name: c.name, collectionID: c.collection_id, appID: c.system_key, isConnect: c.connection !== null, created_at: c.created_at };
    if (c.connection !== null) {
      const conn = JSON.parse(c.connection) as Record<string, unknown>;
      // connection collections carry dbtype (clients skip those when exporting); never the password
      for (const k of CONNECTION_KEYS) if (k !== "password" && conn[k] !== undefined) base[k] = conn[k];
    }
    return base;
  }

  async describe(p: Principal, id: string | null) {
    if (!id) throw fail("INVALID_ARGUMENT", "id: the collection id is required");
    const c = await this.byIdFor(p, id);
    // as the listing shows it: to those who may read it
    if (p.kind !== "developer") await this.require(p, c, LEVEL.READ);
    return Collections.toWire(c.row);
  }

  async list(p: Principal, systemKey: string | null) {
    const s = await this.systems.access(p, systemKey);
    const rows = await collectionsRepo.list(this.d.db, s.system_key);
    if (p.kind === "developer") return rows.map(Collections.toWire);
    const visible: Record<string, unknown>[] = [];
    for (const r of rows) if (await this.d.perms.can(p, { kind: "collection", id: r.collection_id, name: r.name }, LEVEL.READ)) visible.push(Collections.toWire(r));
    return visible;
  }

  columnsOf(c: Collection) {
    return [{ ColumnName: "item_id", ColumnType: "uuid", PK: true }, ...c.columns.map((x) => ({ ColumnName: x.name, ColumnType: x.type, PK: false }))];
  }

  async columns(p: Principal, c: Collection) {
    await this.require(p, c, LEVEL.READ);
    return this.columnsOf(c);
  }

  // ---- items ----------------------------------------------------------------------------------

  private rowToWire(c: Collection, r: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const k in r) { const t = c.types.get(k); out[k] = t ? fromSql(t, r[k]) : r[k]; }
    return out;
  }

  /** Runs an operation on a collection's rows as the collection was read; when its table or a
   *  column the operation names has gone meanwhile (sync or another request changed the schema
   *  since: an edge starting over drops what its new template lacks), once more on the
   *  collection as it is now, or not found when it is gone. */
  private async onCurrent<T>(c: Collection, op: (c: Collection) => Promise<T>): Promise<T> {
    try { return await op(c); } catch (e) {
      if (c.row.connection !== null || !schemaMissing(e)) throw e;
      this.forgetId(c.row.collection_id);
      const now = await this.load(c.row.collection_id);
      if (!now) throw notFound("collection", c.row.name, "Data");
      return op(now);
    }
  }

  /** Refuses a caller that may not read the collection's rows: a route checks it before it parses
   *  the query of a fetch or count, so a caller without rights learns nothing of the query's faults. */
  async mayRead(p: Principal, c: Collection): Promise<void> {
    await this.require(p, c, LEVEL.READ);
  }

  /** fetch() without waiting: the result when the caller's rights, the compiled query and a result
   *  still valid are all cached (a client polling the same query); undefined: ask fetch(). */
  fetchNow(p: Principal, c: Collection, q: Query): FetchResult | undefined {
    if (c.row.connection !== null) return undefined;
    if (!this.d.perms.checkedNow(p, resourceOf(c), LEVEL.READ)) return undefined;
    const compiled = c.compiled.get(canonicalQuery(q));
    return compiled ? this.reused(c, compiled, Date.now()) : undefined;
  }

  /** The last result of a compiled query, if it may be answered again. */
  private reused(c: Collection, f: CompiledFetch, now: number): CompiledFetch["result"] {
    const hit = f.result;
    return hit && hit.version === this.version(c.row.collection_id) && now - hit.at < RESULT_MAX_MS && this.reusable(hit.at) ? hit : undefined;
  }

  /** GET items: one page of the rows a query (parsed with PAGEAFTER allowed) matches, their total,
   *  and whether and where a next page follows. */
  fetch(p: Principal, c: Collection, q: Query): Promise<FetchResult> {
    return this.onCurrent(c, (c) => this.fetchFrom(p, c, q));
  }

  private async fetchFrom(p: Principal, c: Collection, q: Query): Promise<FetchResult> {
    await this.require(p, c, LEVEL.READ);
    if (c.row.connection !== null) {
      // a database connection pages by number only
      if (q.after) throw fail("BAD_QUERY", "unknown query key 'PAGEAFTER'");
      const { rows, total } = await this.tables().tableFetch(c.row, q);
      return { rows: rows as Record<string, unknown>[], total, more: q.pageNum * q.pageSize < total, after: null };
    }
    const key = canonicalQuery(q);
    const compiled = this.compileFetch(c, key, q);
    const id = c.row.collection_id;
    const version = this.version(id);
    const now = Date.now();
    const hit = this.reused(c, compiled, now);
    if (hit) return hit;
    const { rows, more, after } = await collectionsRepo.readPage(this.d.db, compiled.prepared);
    // A page that is not full tells the total without a second query.
    const offset = q.pageSize ? (q.pageNum - 1) * q.pageSize : 0;
    const total = q.pageSize === 0 || (!more && (rows.length > 0 || offset === 0))
      ? offset + rows.length
      : await this.total(c, q.filters, version);
    const data = rows.map((r) => this.rowToWire(c, r));
    if (data.length <= RESULT_MAX_ROWS && c.compiled.peek(key) === compiled && this.reusable(now))
      compiled.result = { version, rows: data, total, more, after, at: now };
    return { rows: data, total, more, after };
  }

  /** The number of rows `filters` match, counted once per write version where results may be
   *  reused (this process is the database's one writer). */
  private async total(c: Collection, filters: Condition[][], version: number): Promise<number> {
    const id = c.row.collection_id;
    const key = totalKey(id, filters);
    const hit = this.totals.get(key);
    if (hit && hit.version === version && this.reusable(hit.at)) return hit.n;
    const at = Date.now();
    const n = await collectionsRepo.count(this.d.db, id, c.map, filters);
    if (!this.reusable(at)) return n;
    if (this.totals.size >= TOTALS_MAX) this.totals.clear();
    this.totals.set(key, { version, n, at });
    return n;
  }

  /** The compiled fetch of `q` (`key`: its canonical form), from the collection's cache or made now. */
  private compileFetch(c: Collection, key: string, q: Query): CompiledFetch {
    const hit = c.compiled.get(key);
    if (hit) return hit;
    const out: CompiledFetch = { prepared: collectionsRepo.prepareFetch(this.d.db.dialect, c.row.collection_id, c.map, q) };
    c.compiled.set(key, out);
    return out;
  }

  /** The number of rows a query matches. */
  count(p: Principal, c: Collection, q: Query) {
    return this.onCurrent(c, (c) => this.countIn(p, c, q));
  }

  private async countIn(p: Principal, c: Collection, q: Query) {
    await this.require(p, c, LEVEL.READ);
    if (c.row.connection !== null) return { count: await this.tables().tableCount(c.row, q) };
    return { count: await collectionsRepo.count(this.d.db, c.row.collection_id, c.map, q.filters) };
  }

  /** Checks one row of an insert against the columns; returns its values in column order. */
  private rowValues(c: Collection, item: unknown, index: number): { itemId: string; values: SqlValue[] } {
    if (!item || typeof item !== "object" || Array.isArray(item)) throw dataError(`item ${index}: must be an object of column values`);
    const o = item as Record<string, unknown>;
    for (const k in o) if (!c.types.has(k)) throw dataError(`item ${index}: unknown column '${k}'`);
    // time-ordered: a growing table takes new rows at the end of its item_id index
    let itemId: string = newTimeUuid();
    if (o.item_id !== undefined && o.item_id !== null) itemId = toSql("uuid", o.item_id, "item_id") as string;
    const values: SqlValue[] = [itemId];
    for (const col of c.columns) values.push(toSql(col.type, o[col.name], col.name));
    return { itemId, values };
  }

  insert(p: Principal, c: Collection, body: unknown) {
    return this.onCurrent(c, (c) => this.insertInto(p, c, body));
  }

  private async insertInto(p: Principal, c: Collection, body: unknown) {
    await this.require(p, c, LEVEL.CREATE);
    // a missing body is a mistake, not an empty row ({} is an empty row)
    if (body === undefined) throw fail("BODY_REQUIRED", "the body is required: an item (object of column values) or an array of items");
    const items = Array.isArray(body) ? body : [body];
    if (items.length > MAX_INSERT_ROWS) throw dataError(`at most ${MAX_INSERT_ROWS} items per request`);
    if (c.row.connection !== null) {
      const objs = items.map((it, i) => {
        if (!it || typeof it !== "object" || Array.isArray(it)) throw dataError(`item ${i}: must be an object of column values`);
        // the database's columns hold plain values: a document or list is a mistake, not text to store
        for (const [k, v] of Object.entries(it)) if (v !== null && typeof v === "object") throw dataError(`item ${i}: column '${k}' must be a plain value (text, number, boolean or null)`);
        return it as Record<string, unknown>;
      });
      await this.tables().tableInsert(c.row, objs);
      return objs.map((o) => ({ item_id: typeof o.item_id === "string" ? o.item_id : "" }));
    }
    const rows = items.map((it, i) => this.rowValues(c, it, i));
    const cols = ["item_id", ...c.columns.map((x) => x.name)];
    try {
      const hlc = this.d.changes.clock.now();
      await this.d.db.tx(async (tx) => {
        await collectionsRepo.insertRows(tx, c.row.collection_id, cols, rows.map((r) => r.values), hlc);
        await this.logRows(tx, c, rows.map((r) => r.itemId), "upsert", hlc);
      });
    } catch (e) { throw sqlToApi(e); }
    this.written(c.row.collection_id, rows.length);
    const out = rows.map((r) => ({ item_id: r.itemId }));
    this.d.events.emit("Data::ItemCreated", c.row.system_key, { collectionId: c.row.collection_id, collectionName: c.row.name, items: out });
    return out;
  }

  /** PUT items: `{query, $set}` where query is a full query object or a bare FILTERS array. */
  async update(p: Principal, c: Collection, body: unknown) {
    const r = await this.updateItems(p, c, body);
    return { count: typeof r === "number" ? r : r.length };
  }

  /** Updates the items a query matches: their ids (the count, for an external table, which has
   *  none to give). */
  updateItems(p: Principal, c: Collection, body: unknown): Promise<string[] | number> {
    return this.onCurrent(c, (c) => this.updateIn(p, c, body));
  }

  private async updateIn(p: Principal, c: Collection, body: unknown): Promise<string[] | number> {
    await this.require(p, c, LEVEL.UPDATE);
    const b = objectBody(body);
    knownFields(b, ITEM_UPDATE_FIELDS);
    if (b.query === undefined) throw fail("INVALID_ARGUMENT", "query is required (use [] to match every row)");
    const set = objectBody(b.$set, "$set");
    if (c.row.connection !== null) return this.tables().tableUpdate(c.row, parseQuery(b.query), set);
    const pairs: [string, SqlValue][] = [];
    // a client writing back a whole row sends its own item_id along (cb-cli does): that is no
    // change, so it is accepted for the rows that have it; any other row refuses the update
    let ownId: string | undefined;
    for (const [k, v] of Object.entries(set)) {
      if (k === "item_id") {
        if (typeof v !== "string") throw dataError("item_id cannot be changed");
        ownId = v;
        continue;
      }
      const t = c.types.get(k);
      if (!t) throw dataError(`unknown column '${k}'`);
      pairs.push([k, toSql(t, v, k)]);
    }
    if (!pairs.length) throw fail("INVALID_ARGUMENT", `$set needs at least one column${ownId === undefined ? "" : " besides item_id"}`);
    const q = parseQuery(b.query);
    let ids: string[];
    const hlc = this.d.changes.clock.now();
    try {
      ids = await this.d.db.tx(async (tx) => {
        const { ids, stamp } = await collectionsRepo.update(tx, c.row.collection_id, pairs, c.map, q.filters, hlc);
        if (ownId !== undefined && ids.some((id) => id !== ownId)) throw dataError("item_id cannot be changed: the query matches a row whose item_id differs from $set.item_id");
        // a row stored with a later stamp than the clock's got the next one after it
        this.d.changes.clock.restore(stamp);
        await this.logRows(tx, c, ids, "upsert", hlc);
        return ids;
      });
    }
    catch (e) { throw sqlToApi(e); }
    this.written(c.row.collection_id, 0);
    if (ids.length) this.d.events.emit("Data::ItemUpdated", c.row.system_key, { collectionId: c.row.collection_id, collectionName: c.row.name, items: ids.map((item_id) => ({ item_id })), query: b.query });
    return ids;
  }

  /** DELETE items: the query is required (an empty FILTERS list deletes everything, on purpose). */
  delete(p: Principal, c: Collection, queryParam: unknown) {
    return this.onCurrent(c, (c) => this.deleteFrom(p, c, queryParam));
  }

  private async deleteFrom(p: Principal, c: Collection, queryParam: unknown) {
    await this.require(p, c, LEVEL.DELETE);
    if (queryParam === undefined || queryParam === null || queryParam === "") throw fail("INVALID_ARGUMENT", "query is required (use [] to delete every row)");
    const q = parseQuery(queryParam);
    if (c.row.connection !== null) return { count: await this.tables().tableDelete(c.row, q) };
    const hlc = this.d.changes.clock.now();
    const ids = await this.d.db.tx(async (tx) => {
      const { ids, stamp } = await collectionsRepo.delete(tx, c.row.collection_id, c.map, q.filters);
      // the delete must be later than every row it removes, or sync would bring them back
      let at = hlc;
      if (stamp !== null && stamp >= hlc) { this.d.changes.clock.restore(stamp); at = this.d.changes.clock.now(); }
      await this.logRows(tx, c, ids, "delete", at);
      return ids;
    });
    this.written(c.row.collection_id, -ids.length);
    if (ids.length) this.d.events.emit("Data::ItemDeleted", c.row.system_key, { collectionId: c.row.collection_id, collectionName: c.row.name, items: ids.map((item_id) => ({ item_id })), query: queryParam });
    return { count: ids.length };
  }

  /** PUT upsert?conflictColumn=: needs a unique index on that column (an upsert without one is refused). */
  upsert(p: Principal, c: Collection, conflictColumn: string | null, body: unknown) {
    return this.onCurrent(c, (c) => this.upsertInto(p, c, conflictColumn, body));
  }

  private async upsertInto(p: Principal, c: Collection, conflictColumn: string | null, body: unknown) {
    await this.require(p, c, LEVEL.CREATE | LEVEL.UPDATE);
    this.assertTable(c);
    if (!conflictColumn) throw fail("INVALID_ARGUMENT", "conflictColumn is required");
    if (conflictColumn !== "item_id" && !c.types.has(conflictColumn)) throw dataError(`unknown column '${conflictColumn}'`);
    if (conflictColumn !== "item_id" && !c.indexes.some((i) => i.column_name === conflictColumn && i.is_unique === 1))
      throw dataError(`upsert needs a unique index on '${conflictColumn}' (a non-unique index does not serve it)`);
    const items = Array.isArray(body) ? body : [body];
    if (!items.length) throw fail("INVALID_ARGUMENT", "body: a row to upsert is required");
    const out: Record<string, unknown>[] = [];
    const all = ["item_id", ...c.columns.map((x) => x.name)];
    // bumped whether the transaction commits or not: a failed upsert must not leave a stale result
    const hlc = this.d.changes.clock.now();
    try { await this.d.db.tx(async (tx) => {
      for (const [i, item] of items.entries()) {
        const o = objectBody(item, `item ${i}`);
        if (o[conflictColumn] === undefined || o[conflictColumn] === null) throw dataError(`item ${i}: the conflict column '${conflictColumn}' needs a value`);
        const { values } = this.rowValues(c, o, i);
        // on conflict, change only the columns the caller sent (never the row's item_id)
        const update = Object.keys(o).filter((k) => k !== "item_id" && k !== conflictColumn);
        try {
          const rows = await collectionsRepo.upsert(tx, c.row.collection_id, all, values, conflictColumn, update, hlc, all);
          out.push(this.rowToWire(c, rows[0]!));
        } catch (e) { throw sqlToApi(e); }
      }
      await this.logRows(tx, c, out.map((r) => r.item_id as string), "upsert", hlc);
    }); } finally { this.written(c.row.collection_id); }
    this.d.events.emit("Data::ItemUpserted", c.row.system_key, { collectionId: c.row.collection_id, collectionName: c.row.name, items: out.map((r) => ({ item_id: r.item_id as string })) });
    return { DATA: out, TOTAL: out.length, count: out.length };
  }

  // ---- indexes --------------------------------------------------------------------------------

  private async requireIndexAdmin(p: Principal) {
    if (p.kind !== "developer") await this.requireSchema(p, LEVEL.UPDATE);
  }

  async createIndex(p: Principal, c: Collection, column: string | null, unique: boolean) {
    await this.requireIndexAdmin(p);
    this.assertTable(c);
    if (!column) throw fail("INVALID_ARGUMENT", "columnName is required");
    if (!c.types.has(column) || column === "item_id") throw dataError(column === "item_id" ? "item_id is the primary key and already indexed" : `unknown column '${column}'`);
    if (c.indexes.some((i) => i.column_name === column && i.is_unique === (unique ? 1 : 0)))
      throw dataError(`a ${unique ? "unique" : "non-unique"} index on '${column}' already exists`);
    try {
      await this.d.db.tx(async (tx) => {
        await collectionsRepo.createIndex(tx, c.row.collection_id, column, unique);
        await this.logSchema(tx, c.row.collection_id);
      });
    }
    catch (e) { throw sqlToApi(e, `cannot create a unique index on '${column}': it holds duplicate values`); }
    this.forget(c.row);
    return { success: true };
  }

  async dropIndex(p: Principal, c: Collection, column: string | null, unique: boolean) {
    await this.requireIndexAdmin(p);
    this.assertTable(c);
    if (!column) throw fail("INVALID_ARGUMENT", "columnName is required");
    const r = await this.d.db.tx(async (tx) => {
      const r = await collectionsRepo.dropIndex(tx, c.row.collection_id, column, unique);
      await this.logSchema(tx, c.row.collection_id);
      return r;
    });
    if (!r.changes) throw notFound(`${unique ? "unique" : "non-unique"} index on column`, column, "Data");
    this.forget(c.row);
    return { success: true };
  }

  async listIndexes(p: Principal, c: Collection) {
    await this.requireIndexAdmin(p);
    const data = c.indexes.map((i) => ({ name: i.column_name, type: i.is_unique ? "Unique Index" : "Nonunique Index" }));
    return { Total: data.length, Data: data };
  }
}

/** Where a collection's TOTAL for a filter is kept (FILTERS as parsed: equal filters, one key). */
const totalKey = (id: string, filters: Condition[][]) => `${id}\u0000${JSON.stringify(filters)}`;

/** Constraint failures from the database become 400s that say what collided. */
function sqlToApi(e: unknown, uniqueDetail?: string): unknown {
  const unique = uniqueViolation(e);
  if (unique) {
    const col = unique.column;
    return dataError(uniqueDetail ?? (col === "item_id" ? "an item with this item_id already exists" : `duplicate value for unique column '${col ?? "?"}'`));
  }
  if (statementTooLarge(e)) return dataError("request too large for one statement");
  return e;
}
