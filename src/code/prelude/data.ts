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
      update: function (q, changes) { return call("collection.update", { collection: ref, query: plainQuery(q), changes: changes, rows: true }); },
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
  // the same query, whose fetch/update/remove answer promises (never blocking)
  ClearBladeAsync.Query = function (opts) {
    var q = new Query(opts);
    q.fetch = function () { return call("collection.fetch", { collection: q.collection, query: plainQuery(q) }); };
    q.update = function (changes) { return call("collection.update", { collection: q.collection, query: plainQuery(q), changes: changes, rows: true }); };
    q.remove = function () { return call("collection.remove", { collection: q.collection, query: plainQuery(q) }); };
    return q;
  };
  ClearBladeAsync.newCollection = function (name) { return call("collections.create", { name: name }).then(function (r) { return { name: name, id: r.collectionID }; }); };
`;

export const data: PreludeArea = { js: js };
