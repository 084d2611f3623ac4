// Collections: ClearBlade.Query, ClearBlade.Collection and ClearBladeAsync.Collection/Query.
import { fail } from "../../core/errors.ts";
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
    };
  }
  ClearBlade.Collection = Collection;
  ClearBlade.Query = Query;

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
    };
  };
  ClearBladeAsync.Query = function (opts) { return new Query(opts); };
`;

async function collection(x: HostContext, ref: { id?: string; name?: string; ref?: string }) {
  if (!ref || typeof ref !== "object") throw fail("INVALID_ARGUMENT", "a collection (collectionName or collectionID) is required");
  const c = x.e.collections;
  if (ref.id) return c.byIdFor(x.p, ref.id);
  if (ref.name) return c.byNameFor(x.p, x.systemKey, ref.name);
  if (ref.ref) return /^[0-9a-f]{30}$/.test(ref.ref) ? c.byIdFor(x.p, ref.ref) : c.byNameFor(x.p, x.systemKey, ref.ref);
  throw fail("INVALID_ARGUMENT", "a collection (collectionName or collectionID) is required");
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
  },
};
