// Collections and their items: fetch with the query language (results and totals kept while a
// collection is unchanged), insert, update, delete, count, upsert and indexes, with per-collection
// role permissions and typed domain events. Looking collections up and managing their schemas is
// src/domain/collectionCatalog.ts, which this extends.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { fromSql, toSql } from "../core/columns.ts";
import { fail, notFound } from "../core/errors.ts";
import { newTimeUuid } from "../core/ids.ts";
import { type FetchResult, type Query, canonicalQuery, parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { collectionsRepo } from "../store/collections.ts";
import { type Executor, schemaMissing, type SqlValue, statementTooLarge, uniqueViolation } from "../store/db.ts";
import { tombstonesRepo } from "../store/sync.ts";
import type { RowChange } from "./changes.ts";
import { type Collection, CollectionCatalog, dataError, resourceOf } from "./collectionCatalog.ts";
import type { CompiledFetch } from "./collectionResults.ts";

export type { Collection, ConnectedTables } from "./collectionCatalog.ts";

/** Rows per insert request; a bigger array is a 400, not an out-of-memory. */
export const MAX_INSERT_ROWS = 100_000;
const ITEM_UPDATE_FIELDS = new Set(["query", "$set"]);

export class Collections extends CollectionCatalog {
  /** Records written rows for edge sync (reading them back only when someone syncs them); also
   *  for statements from code (domain/collectionSql.ts). */
  async logRows(tx: Executor, c: Collection, itemIds: string[], op: "upsert" | "delete", hlc: string) {
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
    return compiled ? this.results.reused(c.row.collection_id, compiled, Date.now()) : undefined;
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
    const version = this.results.version(id);
    const now = Date.now();
    const hit = this.results.reused(id, compiled, now);
    if (hit) return hit;
    const { rows, more, after } = await collectionsRepo.readPage(this.d.db, compiled.prepared);
    // A page that is not full tells the total without a second query.
    const offset = q.pageSize ? (q.pageNum - 1) * q.pageSize : 0;
    const total = q.pageSize === 0 || (!more && (rows.length > 0 || offset === 0))
      ? offset + rows.length
      : await this.results.total(id, c.map, q.filters, version);
    const data = rows.map((r) => this.rowToWire(c, r));
    this.results.keep(c.compiled, key, compiled, { version, rows: data, total, more, after }, now);
    return { rows: data, total, more, after };
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
