// Collections: ClearBlade.Query, ClearBlade.Collection and ClearBladeAsync.Collection/Query, with
// the schema calls (newCollection, getAllCollections, add/drop a column, indexes, delete).
import { fail, notFound } from "../../core/errors.ts";
import { MAX_INSERT_ROWS } from "../../domain/collections.ts";
import type { HostContext, LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

const js = String.raw`
  function Query(opts) {
    if (!(this instanceof Query)) return new Query(opts);
    opts = opts || {};
    this.collection = collectionRef(opts);
    this.query = { FILTERS: [[]], SORT: [], PAGESIZE: 0, PAGENUM: 0 };
  }
  function add(op) {
    return function (field, value) {
      var group = this.query.FILTERS[this.query.FILTERS.length - 1];
      var cond = {}; cond[op] = [{}]; cond[op][0][field] = value;
      group.push(cond);
      return this;
    };
  }
  Query.prototype.equalTo = add("EQ");
  Query.prototype.notEqualTo = add("NEQ");
  Query.prototype.greaterThan = add("GT");
  Query.prototype.greaterThanEqualTo = add("GTE");
  Query.prototype.lessThan = add("LT");
  Query.prototype.lessThanEqualTo = add("LTE");
  Query.prototype.matches = add("RE");
  Query.prototype.ascending = function (f) { this.query.SORT.push({ ASC: f }); return this; };
  Query.prototype.descending = function (f) { this.query.SORT.push({ DESC: f }); return this; };
  Query.prototype.setPage = function (size, num) { this.query.PAGESIZE = size; this.query.PAGENUM = num; return this; };
  Query.prototype.columns = function (cols) { this.query.SELECTCOLUMNS = cols; return this; };
  Query.prototype.or = function (other) { var q = other instanceof Query ? other.query : other; for (var i = 0; i < q.FILTERS.length; i++) this.query.FILTERS.push(q.FILTERS[i]); return this; };
  Query.prototype.toJSON = function () { return plainQuery(this); };
  Query.prototype.fetch = function (cb) { return classic("collection.fetch", { collection: this.collection, query: plainQuery(this) }, cb); };
  Query.prototype.update = function (changes, cb) { return classic("collection.update", { collection: this.collection, query: plainQuery(this), changes: changes }, cb); };
  Query.prototype.remove = function (cb) { return classic("collection.remove", { collection: this.collection, query: plainQuery(this) }, cb); };

  function collectionRef(opts) {
    if (typeof opts === "string") return { ref: opts };
    opts = opts || {};
    return { id: opts.collectionID || opts.collectionId, name: opts.collectionName || opts.name || opts.collection };
  }

  function Collection(opts) {
    var ref = collectionRef(opts);
    return {
      fetch: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("collection.fetch", { collection: ref, query: plainQuery(query) }, cb); },
      create: function (items, cb) { return classic("collection.create", { collection: ref, items: items }, cb); },
      update: function (query, changes, cb) { return classic("collection.update", { collection: ref, query: plainQuery(query), changes: changes }, cb); },
      remove: function (query, cb) { return classic("collection.remove", { collection: ref, query: plainQuery(query) }, cb); },
      count: function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("collection.count", { collection: ref, query: plainQuery(query) }, cb); },
      upsert: function (item, conflictColumn, cb) { return classic("collection.upsert", { collection: ref, item: item, conflictColumn: conflictColumn }, cb); },
      columns: function (cb) { return classic("collection.columns", { collection: ref }, cb); },
      addColumn: function (column, cb) { return classic("collection.addColumn", { collection: ref, column: column }, cb); },
      dropColumn: function (name, cb) { return classic("collection.dropColumn", { collection: ref, name: name }, cb); },
      createIndex: function (column, cb) { return classic("collection.createIndex", { collection: ref, column: column, unique: false }, cb); },
      createUniqueIndex: function (column, cb) { return classic("collection.createIndex", { collection: ref, column: column, unique: true }, cb); },
      deleteCollection: function (cb) { return classic("collection.drop", { collection: ref }, cb); },
    };
  }
  ClearBlade.Collection = Collection;
  ClearBlade.Query = Query;
  ClearBlade.newCollection = function (name, cb) { return classic("collections.create", { name: name }, cb); };
  ClearBlade.getAllCollections = function (cb) { return classic("collections.list", null, cb); };

  ClearBladeAsync.Collection = function (opts) {
    var ref = collectionRef(opts);
    return {
      fetch: function (q) { return call("collection.fetch", { collection: ref, query: plainQuery(q) }); },
      create: function (items) { return call("collection.create", { collection: ref, items: items }); },
      update: function (q, changes) { return call("collection.update", { collection: ref, query: plainQuery(q), changes: changes }); },
      remove: function (q) { return call("collection.remove", { collection: ref, query: plainQuery(q) }); },
      count: function (q) { return call("collection.count", { collection: ref, query: plainQuery(q) }); },
      upsert: function (item, col) { return call("collection.upsert", { collection: ref, item: item, conflictColumn: col }); },
      columns: function () { return call("collection.columns", { collection: ref }); },
      bulkCreate: function (columns, rows) { return call("collection.bulkCreate", { collection: ref, columns: columns, rows: rows }).then(nothing); },
      addColumn: function (column) { return call("collection.addColumn", { collection: ref, column: column }).then(nothing); },
      dropColumn: function (name) { return call("collection.dropColumn", { collection: ref, name: name }).then(nothing); },
      createIndex: function (column) { return call("collection.createIndex", { collection: ref, column: column, unique: false }).then(nothing); },
      createUniqueIndex: function (column) { return call("collection.createIndex", { collection: ref, column: column, unique: true }).then(nothing); },
      deleteCollection: function () { return call("collection.drop", { collection: ref }).then(nothing); },
    };
  };
  function nothing() {}
  ClearBladeAsync.Query = function (opts) { return new Query(opts); };
  ClearBladeAsync.newCollection = function (name) { return call("collections.create", { name: name }).then(function (r) { return { name: name, id: r.collectionID }; }); };
`;

/** The collection code names, of the run's own system only (an id of another system's
 *  collection is not found here, even for a developer who owns both). */
async function collection(x: HostContext, ref: { id?: string; name?: string; ref?: string }) {
  if (!ref || typeof ref !== "object") throw fail("INVALID_ARGUMENT", "a collection (collectionName or collectionID) is required");
  const c = x.e.collections;
  const id = typeof ref.id === "string" && ref.id ? ref.id : typeof ref.ref === "string" && /^[0-9a-f]{30}$/.test(ref.ref) ? ref.ref : undefined;
  const name = typeof ref.name === "string" && ref.name ? ref.name : typeof ref.ref === "string" && ref.ref ? ref.ref : undefined;
  if (id) {
    const found = await c.byIdFor(x.p, id);
    if (found.row.system_key !== x.systemKey) throw notFound("collection", id, "Data");
    return found;
  }
  if (name) return c.byNameFor(x.p, x.systemKey, name);
  throw fail("INVALID_ARGUMENT", "a collection (collectionName or collectionID) is required");
}

/** A column name argument. */
const columnArg = (v: unknown): string => {
  if (typeof v !== "string" || !v || v.length > 256) throw fail("INVALID_ARGUMENT", "a column name is required");
  return v;
};

/** bulkCreate's rows: arrays of values in the order of `columns`, as the items insert takes. */
function bulkItems(columns: unknown, rows: unknown): Record<string, unknown>[] {
  if (!Array.isArray(columns) || !columns.length || columns.length > 1000 || !columns.every((c) => typeof c === "string" && c))
    throw fail("INVALID_ARGUMENT", "bulkCreate(columns, rows): columns must be a list of 1 to 1000 column names");
  if (!Array.isArray(rows)) throw fail("INVALID_ARGUMENT", "bulkCreate(columns, rows): rows must be a list of rows, each a list of values");
  if (rows.length > MAX_INSERT_ROWS) throw fail("INVALID_ARGUMENT", `bulkCreate: at most ${MAX_INSERT_ROWS} rows at once`);
  return rows.map((r, i) => {
    if (!Array.isArray(r) || r.length !== columns.length) throw fail("INVALID_ARGUMENT", `bulkCreate: row ${i} must be a list of ${columns.length} values (one per column)`);
    const item: Record<string, unknown> = {};
    columns.forEach((c: string, j) => { item[c] = r[j]; });
    return item;
  });
}

export const data: LibraryArea = {
  js,
  ops: {
    "collection.fetch": async (x, a) => x.e.collections.fetch(x.p, await collection(x, a.collection), queryText(a.query), ""),
    "collection.create": async (x, a) => x.e.collections.insert(x.p, await collection(x, a.collection), a.items),
    "collection.update": async (x, a) => x.e.collections.update(x.p, await collection(x, a.collection), { query: a.query ?? [], $set: a.changes }),
    "collection.remove": async (x, a) => x.e.collections.delete(x.p, await collection(x, a.collection), queryText(a.query) ?? "[]"),
    "collection.count": async (x, a) => x.e.collections.count(x.p, await collection(x, a.collection), queryText(a.query)),
    "collection.upsert": async (x, a) => x.e.collections.upsert(x.p, await collection(x, a.collection), a.conflictColumn ?? null, a.item),
    "collection.columns": async (x, a) => x.e.collections.columns(x.p, await collection(x, a.collection)),
    // schema administration: the rights of the collectionmanagement and index routes
    "collections.create": (x, a) => x.e.collections.createCollection(x.p, { name: a.name, appID: x.systemKey }),
    "collections.list": (x) => x.e.collections.list(x.p, x.systemKey),
    "collection.addColumn": async (x, a) => {
      const c = await collection(x, a.collection);
      return x.e.collections.updateCollection(x.p, { id: c.row.collection_id, addColumn: a.column });
    },
    "collection.dropColumn": async (x, a) => {
      const c = await collection(x, a.collection);
      return x.e.collections.updateCollection(x.p, { id: c.row.collection_id, deleteColumn: columnArg(a.name) });
    },
    "collection.createIndex": async (x, a) => x.e.collections.createIndex(x.p, await collection(x, a.collection), columnArg(a.column), a.unique === true),
    "collection.drop": async (x, a) => x.e.collections.removeCollection(x.p, (await collection(x, a.collection)).row.collection_id),
    "collection.bulkCreate": async (x, a) => {
      const c = await collection(x, a.collection);
      await x.e.collections.insert(x.p, c, bulkItems(a.columns, a.rows));
      return null;
    },
  },
};
