// The collections of a system and their schemas: looking them up (cached), creating, changing and
// removing them, with the schema permission and typed domain events; src/domain/collections.ts
// adds their items.
import { LEVEL, type Resource } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { LruMap, TtlCache } from "../core/cache.ts";
import { type ColumnType, checkName, parseColumnType } from "../core/columns.ts";
import { ApiError, ErrorKinds, fail, notFound } from "../core/errors.ts";
import { newKey, nowIso } from "../core/ids.ts";
import type { ColumnMap, Query } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type CollectionRow, type ColumnDef, type IndexRow, collectionColumnMap, collectionsRepo } from "../store/collections.ts";
import type { Executor } from "../store/db.ts";
import { tombstonesRepo } from "../store/sync.ts";
import { CollectionResults, type CompiledFetch } from "./collectionResults.ts";
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

const COMPILED_MAX = 200;

/** A collection's name is a value, never an SQL identifier (its table is named by its id), so it
 *  may hold spaces as ClearBlade's do ("John Doe"); not at either end, where they would not show. */
const COLLECTION_NAME_RE = /^[A-Za-z0-9_](?:[A-Za-z0-9_.\- ]{0,98}[A-Za-z0-9_.-])?$/;
const META_CACHE_MS = 5_000;

export const resourceOf = (c: Collection): Resource => ({ kind: "collection", id: c.row.collection_id, name: c.row.name });
export const dataError = (detail: string) => new ApiError({ ...ErrorKinds.INVALID_ARGUMENT, category: "Data" }, detail);

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

export class CollectionCatalog {
  private readonly byId = new TtlCache<string, Collection>(META_CACHE_MS, 5_000);
  private readonly idByName = new TtlCache<string, string>(META_CACHE_MS, 5_000);
  /** Results of fetches and totals, kept while a collection is unchanged. */
  protected readonly results: CollectionResults;

  /** Items of collections that are database connections go through these (the external databases). */
  protected tables(): ConnectedTables {
    if (!this.connected) throw fail("INVALID_ARGUMENT", "database connections are not available");
    return this.connected;
  }

  /** `connected`: the tables of external databases (none: their collections are refused) */
  constructor(protected readonly d: DomainDeps, protected readonly systems: Systems, private readonly connected: ConnectedTables | null = null) {
    this.results = new CollectionResults(d);
    // from another node, a write's row count is not known here: its total is counted again
    d.signals.on("collection.written", ({ collectionId, added }, remote) => this.results.bump(collectionId, remote ? undefined : added));
    d.signals.on("collection.changed", ({ collectionId }) => this.drop(collectionId));
  }

  /** Every write to a collection's rows calls this after its transaction; `added`: the rows it
   *  added (removed: negative) when it knows them, so the TOTAL without a filter is carried over
   *  instead of counted again (a collection written to all the time still pages cheaply). */
  written(id: string, added?: number) { this.d.signals.emit("collection.written", { collectionId: id, added }); }

  /** Records a collection's schema for edge sync (with a renamed column, so an edge renames it
   *  and keeps its values rather than dropping one column and adding another). */
  protected async logSchema(tx: Executor, id: string, renamed?: { from: string; to: string }) {
    const row = await collectionsRepo.byId(tx, id);
    if (!row) return;
    // an edge logs nothing, but refuses a change of a collection its platform sent
    if (this.d.changes.mode === "edge") return this.d.changes.refuseIfPlatformOwned(tx, "collection", row.name);
    if (!this.d.changes.logs(row.system_key)) return;
    await this.d.changes.record(tx, row.system_key, "collection", row.name, "upsert",
      { collection_id: id, name: row.name, connection: row.connection, columns: await collectionsRepo.columns(tx, id), indexes: await collectionsRepo.indexes(tx, id), ...(renamed ? { renamed } : {}) });
  }

  /** Drops cached schema and results of a collection (sync changed it underneath). */
  forgetId(id: string) { this.d.signals.emit("collection.changed", { collectionId: id }); }

  protected forget(c: CollectionRow) { this.forgetId(c.collection_id); }

  /** Drops a collection's schema (under its id and any name that led to it) and the results
   *  computed from its rows. */
  private drop(id: string) {
    const c = this.byId.get(id);
    if (c) {
      this.byId.delete(id);
      this.idByName.delete(`${c.row.system_key}/${c.row.name}`);
    }
    this.idByName.deleteWhere((v) => v === id);
    this.results.bump(id, undefined);
  }

  protected async load(id: string): Promise<Collection | undefined> {
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

  protected async require(p: Principal, c: Collection, level: number) {
    await this.d.perms.require(p, resourceOf(c), level);
  }

  protected async requireSchema(p: Principal, level: number) {
    await this.d.perms.require(p, { kind: "allcollections" }, level, "collections");
  }

  protected assertTable(c: Collection) {
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
      // before a rename, under the name the platform sent it by
      await this.d.changes.refuseIfPlatformOwned(tx, "collection", c.row.name);
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
    return CollectionCatalog.toWire(c.row);
  }

  async list(p: Principal, systemKey: string | null) {
    const s = await this.systems.access(p, systemKey);
    const rows = await collectionsRepo.list(this.d.db, s.system_key);
    if (p.kind === "developer") return rows.map(CollectionCatalog.toWire);
    const visible: Record<string, unknown>[] = [];
    for (const r of rows) if (await this.d.perms.can(p, { kind: "collection", id: r.collection_id, name: r.name }, LEVEL.READ)) visible.push(CollectionCatalog.toWire(r));
    return visible;
  }

  columnsOf(c: Collection) {
    return [{ ColumnName: "item_id", ColumnType: "uuid", PK: true }, ...c.columns.map((x) => ({ ColumnName: x.name, ColumnType: x.type, PK: false }))];
  }

  async columns(p: Principal, c: Collection) {
    await this.require(p, c, LEVEL.READ);
    return this.columnsOf(c);
  }
}
