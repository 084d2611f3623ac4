// Collections: ClearBlade.Query, ClearBlade.Collection and ClearBladeAsync.Collection/Query, with
// the schema calls (newCollection, getAllCollections, add/drop a column, indexes, delete).
import { fail, notFound } from "../../core/errors.ts";
import { type Query, fetchPage, parseQuery } from "../../core/query.ts";
import { type Collection, MAX_INSERT_ROWS } from "../../domain/collections.ts";
import type { HostContext, LibraryArea } from "./types.ts";
import { queryText } from "./types.ts";

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

/** The query of a fetch or count, parsed once the run may read the collection (as the routes do). */
async function readQuery(x: HostContext, c: Collection, query: unknown): Promise<Query> {
  await x.e.collections.mayRead(x.p, c);
  return parseQuery(queryText(query), { continuation: true });
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

/** An update answers its rows up to this many (its count past it). */
const UPDATED_ROWS_MAX = 1_000;

export const data: LibraryArea = {
  ops: {
    "collection.fetch": async (x, a) => {
      const c = await collection(x, a.collection);
      const q = await readQuery(x, c, a.query);
      // the page links of a fetch from code are relative: the query alone
      return fetchPage("", q, await x.e.collections.fetch(x.p, c, q));
    },
    "collection.create": async (x, a) => x.e.collections.insert(x.p, await collection(x, a.collection), a.items),
    "collection.update": async (x, a) => {
      const c = await collection(x, a.collection);
      if (a.rows !== true) return x.e.collections.update(x.p, c, { query: a.query ?? [], $set: a.changes });
      // ClearBladeAsync's update answers the rows as they are now, as ClearBlade's does
      const r = await x.e.collections.updateItems(x.p, c, { query: a.query ?? [], $set: a.changes });
      if (typeof r === "number") return { count: r };
      if (r.length === 0) return [];
      if (r.length > UPDATED_ROWS_MAX) return { count: r.length };
      const q = parseQuery({ FILTERS: r.map((item_id) => [{ EQ: [{ item_id }] }]), PAGESIZE: 0, PAGENUM: 0 }, { continuation: true });
      return (await x.e.collections.fetch(x.p, c, q)).rows;
    },
    "collection.remove": async (x, a) => x.e.collections.delete(x.p, await collection(x, a.collection), queryText(a.query) ?? "[]"),
    "collection.count": async (x, a) => {
      const c = await collection(x, a.collection);
      return x.e.collections.count(x.p, c, await readQuery(x, c, a.query));
    },
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
