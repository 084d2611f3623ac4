// Collections: ClearBlade.Query, ClearBlade.Collection and ClearBladeAsync.Collection/Query, with
// the schema calls (newCollection, getAllCollections, add/drop a column, indexes, delete).
import type { PreludeArea } from "./area.ts";

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
  Query.prototype.rawQuery = notProvided("Query().rawQuery (build the query with its methods, or use ClearBlade.Database)");
  Query.prototype.andFilter = function (op, field, value) { return add(op).call(this, field, value); };
  // the query helpers ClearBlade's library has beside Query's methods
  ClearBlade.addFilterToQuery = function (q, condition, key, value) { add(condition).call(q, key, value); };
  ClearBlade.addSortToQuery = function (q, direction, column) { var s = {}; s[direction] = column; (q.query.SORT = q.query.SORT || []).push(s); };
  ClearBlade.addToQuery = function (q, key, value) { q.query[key] = value; };
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

  // Collections and queries are made on every run, in an interpreter where each fresh closure
  // costs about 2 µs: their methods live on prototypes.
  function Collection(opts) {
    if (!(this instanceof Collection)) return new Collection(opts);
    this.ref = collectionRef(opts);
  }
  Collection.prototype.fetch = function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("collection.fetch", { collection: this.ref, query: plainQuery(query) }, cb); };
  Collection.prototype.create = function (items, cb) { return classic("collection.create", { collection: this.ref, items: items }, cb); };
  Collection.prototype.update = function (query, changes, cb) { return classic("collection.update", { collection: this.ref, query: plainQuery(query), changes: changes }, cb); };
  Collection.prototype.remove = function (query, cb) { return classic("collection.remove", { collection: this.ref, query: plainQuery(query) }, cb); };
  Collection.prototype.count = function (query, cb) { if (typeof query === "function") { cb = query; query = null; } return classic("collection.count", { collection: this.ref, query: plainQuery(query) }, cb); };
  Collection.prototype.upsert = function (item, conflictColumn, cb) { return classic("collection.upsert", { collection: this.ref, item: item, conflictColumn: conflictColumn }, cb); };
  Collection.prototype.columns = function (cb) { return classic("collection.columns", { collection: this.ref }, cb); };
  Collection.prototype.addColumn = function (column, cb) { return classic("collection.addColumn", { collection: this.ref, column: column }, cb); };
  Collection.prototype.dropColumn = function (name, cb) { return classic("collection.dropColumn", { collection: this.ref, name: name }, cb); };
  Collection.prototype.createIndex = function (column, cb) { return classic("collection.createIndex", { collection: this.ref, column: column, unique: false }, cb); };
  Collection.prototype.createUniqueIndex = function (column, cb) { return classic("collection.createIndex", { collection: this.ref, column: column, unique: true }, cb); };
  Collection.prototype.deleteCollection = function (cb) { return classic("collection.drop", { collection: this.ref }, cb); };
  ClearBlade.Collection = Collection;
  ClearBlade.Query = Query;
  ClearBlade.newCollection = function (name, cb) { return classic("collections.create", { name: name }, cb); };
  ClearBlade.getAllCollections = function (cb) { return classic("collections.list", null, cb); };

  function AsyncCollection(opts) {
    if (!(this instanceof AsyncCollection)) return new AsyncCollection(opts);
    this.ref = collectionRef(opts);
  }
  AsyncCollection.prototype.fetch = function (q) { return call("collection.fetch", { collection: this.ref, query: plainQuery(q) }); };
  AsyncCollection.prototype.create = function (items) { return call("collection.create", { collection: this.ref, items: items }); };
  AsyncCollection.prototype.update = function (q, changes) { return call("collection.update", { collection: this.ref, query: plainQuery(q), changes: changes, rows: true }); };
  AsyncCollection.prototype.remove = function (q) { return call("collection.remove", { collection: this.ref, query: plainQuery(q) }); };
  AsyncCollection.prototype.count = function (q) { return call("collection.count", { collection: this.ref, query: plainQuery(q) }); };
  AsyncCollection.prototype.upsert = function (item, col) { return call("collection.upsert", { collection: this.ref, item: item, conflictColumn: col }); };
  AsyncCollection.prototype.columns = function () { return call("collection.columns", { collection: this.ref }); };
  AsyncCollection.prototype.bulkCreate = function (columns, rows) { return call("collection.bulkCreate", { collection: this.ref, columns: columns, rows: rows }).then(nothing); };
  AsyncCollection.prototype.addColumn = function (column) { return call("collection.addColumn", { collection: this.ref, column: column }).then(nothing); };
  AsyncCollection.prototype.dropColumn = function (name) { return call("collection.dropColumn", { collection: this.ref, name: name }).then(nothing); };
  AsyncCollection.prototype.createIndex = function (column) { return call("collection.createIndex", { collection: this.ref, column: column, unique: false }).then(nothing); };
  AsyncCollection.prototype.createUniqueIndex = function (column) { return call("collection.createIndex", { collection: this.ref, column: column, unique: true }).then(nothing); };
  AsyncCollection.prototype.deleteCollection = function () { return call("collection.drop", { collection: this.ref }).then(nothing); };
  ClearBladeAsync.Collection = AsyncCollection;
  function nothing() {}
  // the same query, whose fetch/update/remove answer promises (never blocking)
  function AsyncQuery(opts) {
    if (!(this instanceof AsyncQuery)) return new AsyncQuery(opts);
    Query.call(this, opts);
  }
  AsyncQuery.prototype = Object.create(Query.prototype);
  AsyncQuery.prototype.constructor = AsyncQuery;
  AsyncQuery.prototype.fetch = function () { return call("collection.fetch", { collection: this.collection, query: plainQuery(this) }); };
  AsyncQuery.prototype.update = function (changes) { return call("collection.update", { collection: this.collection, query: plainQuery(this), changes: changes, rows: true }); };
  AsyncQuery.prototype.remove = function () { return call("collection.remove", { collection: this.collection, query: plainQuery(this) }); };
  ClearBladeAsync.Query = AsyncQuery;
  ClearBladeAsync.newCollection = function (name) { return call("collections.create", { name: name }).then(function (r) { return { name: name, id: r.collectionID }; }); };
`;

export const data: PreludeArea = { js: js };
