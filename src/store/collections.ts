// Collections: metadata, and each collection's own table "c_<collection_id>".
// Table and column names reaching SQL come only from validated metadata: the table from the
// collection id (30 hex, generated here), columns from names that passed checkName.
import { type ColumnType, ident } from "../core/columns.ts";
import { fail } from "../core/errors.ts";
import { type ColumnMap, type Condition, type Continuation, type Query, compileOrder, compileWhere, continueAfter, sortExpressions } from "../core/query.ts";
import type { Executor, SqlValue } from "./db.ts";
import { inParts, MAX_PARAMS, marks } from "./sql.ts";
import type { Dialect } from "../core/dialect.ts";

export interface CollectionRow { collection_id: string; system_key: string; name: string; connection: string | null; created_at: string }
export interface ColumnDef { name: string; type: ColumnType }
export interface IndexRow { column_name: string; is_unique: number }

const ID_RE = /^[0-9a-f]{30}$/;
export function tableOf(id: string): string {
  if (!ID_RE.test(id)) throw new Error(`not a collection id: ${id}`);
  return `"c_${id}"`;
}
const indexName = (id: string, column: string, unique: boolean) => ident(`${unique ? "ux" : "ix"}_${id}_${column}`);

/** A local write's stamp (`fresh`, an SQL expression) for a row stored with `stored`: the fresh
 *  one, or when the row carries a later stamp (the clock was set back, say) the next stamp after
 *  it, so the write still wins everywhere (last writer wins on edge sync). Stamps are
 *  "<15-digit ms>-<6-digit counter>-<node>" (core/hlc.ts). */
function laterStamp(d: Dialect, stored: string, fresh: string): string {
  const node = `substr(${fresh}, 24)`;
  return `CASE WHEN ${fresh} IS NULL OR coalesce(${stored}, '') < ${fresh} THEN ${fresh}
    WHEN substr(${stored}, 17, 6) = '999999' THEN ${d.zeroPad(`CAST(substr(${stored}, 1, 15) AS BIGINT) + 1`, 15)} || '-000000-' || ${node}
    ELSE substr(${stored}, 1, 16) || ${d.zeroPad(`CAST(substr(${stored}, 17, 6) AS BIGINT) + 1`, 6)} || '-' || ${node} END`;
}
/** The query column map of a collection's table: item_id, then its columns. */
export function collectionColumnMap(columns: ColumnDef[]): ColumnMap {
  const map: ColumnMap = { item_id: { sql: `"item_id"`, type: "string" } };
  for (const c of columns) map[c.name] = { sql: `"${c.name}"`, type: c.type };
  return map;
}

/** A fetch compiled against one collection's table, made once per query and schema (the domain
 *  keeps it) and read with readPage. */
export interface PreparedFetch {
  readonly q: Query;
  /** The statements that read the page, in order, each still to be given its LIMIT (and OFFSET
   *  when the page has no PAGEAFTER); see continueAfter for when there are two. */
  readonly reads: readonly { sql: string; args: unknown[] }[];
}

/** A page of a fetch: its rows, whether more follow and, when they do, the position the next page
 *  starts after (null: JSON cannot carry it, so the next page is found by its number). */
export interface PageRead { rows: Record<string, unknown>[]; more: boolean; after: Continuation | null }

/** The position a paged row was read with (see prepareFetch), if JSON can carry it. */
function continuation(row: Record<string, unknown>, sortKeys: number): Continuation | null {
  const values: unknown[] = [];
  for (let i = 0; i < sortKeys; i++) {
    const v = row[`_k${i}`];
    if (!(v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v)))) return null;
    values.push(v);
  }
  const rowid = row._r;
  return typeof rowid === "number" && Number.isSafeInteger(rowid) ? { values, rowid } : null;
}

/** A paged row without its position columns. */
function withoutPosition(row: Record<string, unknown>, sortKeys: number): Record<string, unknown> {
  if (!("_r" in row)) return row;
  delete row._r;
  for (let i = 0; i < sortKeys; i++) delete row[`_k${i}`];
  return row;
}

const maxOf = (rows: { _hlc: string | null }[]) => rows.reduce<string | null>((m, r) => (r._hlc !== null && (m === null || r._hlc > m) ? r._hlc : m), null);

export const collectionsRepo = {
  byId: (ex: Executor, id: string) => ex.get<CollectionRow>(`SELECT * FROM collections WHERE collection_id = ?`, [id]),
  byName: (ex: Executor, systemKey: string, name: string) =>
    ex.get<CollectionRow>(`SELECT * FROM collections WHERE system_key = ? AND name = ?`, [systemKey, name]),
  list: (ex: Executor, systemKey: string) =>
    ex.all<CollectionRow>(`SELECT * FROM collections WHERE system_key = ? ORDER BY created_at, name`, [systemKey]),
  listIds: async (ex: Executor, systemKey: string) =>
    (await ex.all<{ collection_id: string; connection: string | null }>(`SELECT collection_id, connection FROM collections WHERE system_key = ?`, [systemKey])),

  columns: (ex: Executor, id: string) =>
    ex.all<ColumnDef>(`SELECT name, type FROM collection_columns WHERE collection_id = ? ORDER BY position`, [id]),
  indexes: (ex: Executor, id: string) =>
    ex.all<IndexRow>(`SELECT column_name, is_unique FROM collection_indexes WHERE collection_id = ? ORDER BY rowid`, [id]),

  /** Creates the metadata and, unless it is a database connection, the table. */
  async create(ex: Executor, c: CollectionRow, columns: ColumnDef[]) {
    await ex.run(`INSERT INTO collections(collection_id, system_key, name, connection, created_at) VALUES (?,?,?,?,?)`,
      [c.collection_id, c.system_key, c.name, c.connection, c.created_at]);
    if (c.connection !== null) return;
    await collectionsRepo.createTable(ex, c.collection_id, columns);
    for (const [i, col] of columns.entries())
      await ex.run(`INSERT INTO collection_columns(collection_id, name, type, position) VALUES (?,?,?,?)`, [c.collection_id, col.name, col.type, i + 1]);
  },

  /** A collection's table alone (create makes its metadata too). */
  async createTable(ex: Executor, id: string, columns: ColumnDef[]) {
    const d = ex.dialect, text = d.columnType("string");
    const cols = columns.map((col) => `, ${ident(col.name)} ${d.columnType(col.type)}`).join("");
    // _hlc: hybrid logical clock of the row's last write (edge sync, last writer wins)
    await ex.run(`CREATE TABLE ${tableOf(id)} (item_id ${text} PRIMARY KEY NOT NULL${cols}, _hlc ${text}${d.rowidColumn})`);
  },

  setConnection: (ex: Executor, id: string, connection: string) =>
    ex.run(`UPDATE collections SET connection = ? WHERE collection_id = ?`, [connection, id]),
  rename: (ex: Executor, id: string, name: string) => ex.run(`UPDATE collections SET name = ? WHERE collection_id = ?`, [name, id]),

  async drop(ex: Executor, id: string, hasTable: boolean) {
    if (hasTable) await ex.run(`DROP TABLE IF EXISTS ${tableOf(id)}`);
    await ex.run(`DELETE FROM collections WHERE collection_id = ?`, [id]);
  },

  async addColumn(ex: Executor, id: string, col: ColumnDef) {
    await ex.run(`ALTER TABLE ${tableOf(id)} ADD COLUMN ${ident(col.name)} ${ex.dialect.columnType(col.type)}`);
    await ex.run(`INSERT INTO collection_columns(collection_id, name, type, position)
      VALUES (?, ?, ?, (SELECT coalesce(max(position), 0) + 1 FROM collection_columns WHERE collection_id = ?))`, [id, col.name, col.type, id]);
  },

  async dropColumn(ex: Executor, id: string, name: string) {
    for (const u of [0, 1]) await ex.run(`DROP INDEX IF EXISTS ${indexName(id, name, u === 1)}`);
    await ex.run(`DELETE FROM collection_indexes WHERE collection_id = ? AND column_name = ?`, [id, name]);
    await ex.run(`ALTER TABLE ${tableOf(id)} DROP COLUMN ${ident(name)}`);
    await ex.run(`DELETE FROM collection_columns WHERE collection_id = ? AND name = ?`, [id, name]);
  },

  async renameColumn(ex: Executor, id: string, from: string, to: string) {
    await ex.run(`ALTER TABLE ${tableOf(id)} RENAME COLUMN ${ident(from)} TO ${ident(to)}`);
    await ex.run(`UPDATE collection_columns SET name = ? WHERE collection_id = ? AND name = ?`, [to, id, from]);
    // keep index names derived from their column
    for (const ix of await ex.all<IndexRow>(`SELECT column_name, is_unique FROM collection_indexes WHERE collection_id = ? AND column_name = ?`, [id, from])) {
      const u = ix.is_unique === 1;
      await ex.run(`DROP INDEX IF EXISTS ${indexName(id, from, u)}`);
      await ex.run(`CREATE ${u ? "UNIQUE " : ""}INDEX ${indexName(id, to, u)} ON ${tableOf(id)}(${ex.dialect.indexColumn(ident(to))})`);
    }
    await ex.run(`UPDATE collection_indexes SET column_name = ? WHERE collection_id = ? AND column_name = ?`, [to, id, from]);
  },

  async createIndex(ex: Executor, id: string, column: string, unique: boolean) {
    await collectionsRepo.createIndexOnly(ex, id, column, unique);
    await ex.run(`INSERT INTO collection_indexes(collection_id, column_name, is_unique) VALUES (?,?,?)`, [id, column, unique ? 1 : 0]);
  },

  /** An index alone (createIndex records it too). */
  createIndexOnly: (ex: Executor, id: string, column: string, unique: boolean) =>
    ex.run(`CREATE ${unique ? "UNIQUE " : ""}INDEX ${indexName(id, column, unique)} ON ${tableOf(id)}(${ex.dialect.indexColumn(ident(column))})`),

  async dropIndex(ex: Executor, id: string, column: string, unique: boolean) {
    await ex.run(`DROP INDEX IF EXISTS ${indexName(id, column, unique)}`);
    return ex.run(`DELETE FROM collection_indexes WHERE collection_id = ? AND column_name = ? AND is_unique = ?`, [id, column, unique ? 1 : 0]);
  },

  // ---- items ----------------------------------------------------------------------------------

  /** Inserts rows (values in `columns` order), several per statement. */
  async insertRows(ex: Executor, id: string, columns: string[], rows: SqlValue[][], hlc: string | null) {
    const width = columns.length + 1;
    const per = Math.max(1, Math.min(500, Math.floor(MAX_PARAMS / width)));
    const head = `INSERT INTO ${tableOf(id)} (${[...columns.map(ident), "_hlc"].join(", ")}) VALUES `;
    const tuple = `(${marks(width)})`;
    for (const chunk of inParts(rows, per)) {
      const args: SqlValue[] = [];
      for (const r of chunk) { for (const v of r) args.push(v); args.push(hlc); }
      await ex.run(head + Array(chunk.length).fill(tuple).join(", "), args);
    }
  },

  /** Compiles a fetch for the engine `d` over the columns of `map` (collectionColumnMap): FILTERS,
   *  SELECTCOLUMNS (all columns without), SORT then rowid, and for a paged query each row's position
   *  (rowid and sort values), which the next page starts after. */
  prepareFetch(d: Dialect, id: string, map: ColumnMap, q: Query): PreparedFetch {
    const where = compileWhere(q.filters, map, d);
    const select = q.select ? q.select.map((s) => { if (!map[s]) throw fail("BAD_QUERY", `unknown column '${s}'`); return s; }) : Object.keys(map);
    const order = compileOrder(q.sort, map, "rowid", d);
    const head = (extra: string[]) => `SELECT ${[...select.map(ident), ...extra].join(", ")} FROM ${tableOf(id)} WHERE `;
    if (q.pageSize === 0) return { q, reads: [{ sql: `${head([])}${where.sql}${order}`, args: where.args }] };
    const position = ["rowid AS _r", ...sortExpressions(q.sort, map, d).map((e, i) => `${e} AS _k${i}`)];
    const reads: { sql: string; args: unknown[] }[] = [];
    for (const part of q.after ? continueAfter(q.sort, map, q.after, "rowid", d) : [null]) {
      const w = part ? { sql: `(${where.sql}) AND (${part.sql})`, args: [...where.args, ...part.args] } : where;
      reads.push({ sql: `${head(position)}${w.sql}${order}${q.after ? " LIMIT ?" : " LIMIT ? OFFSET ?"}`, args: w.args });
    }
    return { q, reads };
  },

  /** The page a prepared fetch reads (everything when it is not paged). */
  async readPage(ex: Executor, f: PreparedFetch): Promise<PageRead> {
    const { q } = f;
    if (q.pageSize === 0) return { rows: await ex.all<Record<string, unknown>>(f.reads[0]!.sql, f.reads[0]!.args), more: false, after: null };
    // one row beyond the page tells whether another page follows
    const want = q.pageSize + 1;
    const rows: Record<string, unknown>[] = [];
    for (const r of f.reads) {
      const limit = q.after ? [want - rows.length] : [want, (q.pageNum - 1) * q.pageSize];
      for (const row of await ex.all<Record<string, unknown>>(r.sql, [...r.args, ...limit])) rows.push(row);
      if (rows.length >= want) break;
    }
    const more = rows.length > q.pageSize;
    if (more) rows.length = q.pageSize;
    const sortKeys = q.sort.length;
    const after = more ? continuation(rows[rows.length - 1]!, sortKeys) : null;
    for (const row of rows) withoutPosition(row, sortKeys);
    return { rows, more, after };
  },

  /** Rows by item id (all columns), for recording what a write left behind. */
  byIds: (ex: Executor, id: string, columns: string[], itemIds: string[]) =>
    ex.all<Record<string, unknown>>(`SELECT ${columns.map(ident).join(", ")}, _hlc FROM ${tableOf(id)} WHERE item_id IN (${itemIds.map(() => "?").join(", ")})`, itemIds),

  /** The number of rows `filters` match. */
  async count(ex: Executor, id: string, map: ColumnMap, filters: Condition[][]) {
    const where = compileWhere(filters, map, ex.dialect);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM ${tableOf(id)} WHERE ${where.sql}`, where.args))!.n;
  },

  /** Updates matching rows; returns their item ids and the latest stamp written. */
  async update(ex: Executor, id: string, set: [string, SqlValue][], map: ColumnMap, filters: Condition[][], hlc: string | null): Promise<{ ids: string[]; stamp: string | null }> {
    const where = compileWhere(filters, map, ex.dialect);
    // the stamp is used several times: numbered, it is bound once (the WHERE's ? follow it)
    const assignments = [...set.map(([c]) => `${ident(c)} = ?`), `_hlc = ${laterStamp(ex.dialect, "_hlc", `CAST(?${set.length + 1} AS TEXT)`)}`].join(", ");
    const rows = await ex.all<{ item_id: string; _hlc: string | null }>(`UPDATE ${tableOf(id)} SET ${assignments} WHERE ${where.sql} RETURNING item_id, _hlc`,
      [...set.map(([, v]) => v), hlc, ...where.args]);
    return { ids: rows.map((r) => r.item_id), stamp: maxOf(rows) };
  },

  /** Deletes matching rows; returns their item ids and the latest stamp they carried. */
  async delete(ex: Executor, id: string, map: ColumnMap, filters: Condition[][]): Promise<{ ids: string[]; stamp: string | null }> {
    const where = compileWhere(filters, map, ex.dialect);
    const rows = await ex.all<{ item_id: string; _hlc: string | null }>(`DELETE FROM ${tableOf(id)} WHERE ${where.sql} RETURNING item_id, _hlc`, where.args);
    return { ids: rows.map((r) => r.item_id), stamp: maxOf(rows) };
  },

  /** A page of rows in storage order after `afterRowid` (snapshots read a collection this way). */
  rowsPage: (ex: Executor, id: string, columns: string[], afterRowid: number, limit: number) =>
    ex.all<Record<string, unknown>>(`SELECT rowid AS _rowid, ${columns.map(ident).join(", ")}, _hlc FROM ${tableOf(id)} WHERE rowid > ? ORDER BY rowid LIMIT ?`, [afterRowid, limit]),

  /** The stored stamps of rows by item id (edge sync decides which write wins from them). */
  async stamps(ex: Executor, id: string, itemIds: string[]): Promise<Map<string, string | null>> {
    const out = new Map<string, string | null>();
    for (const ids of inParts(itemIds))
      for (const r of await ex.all<{ item_id: string; _hlc: string | null }>(`SELECT item_id, _hlc FROM ${tableOf(id)} WHERE item_id IN (${marks(ids.length)})`, ids))
        out.set(r.item_id, r._hlc);
    return out;
  },

  /** Writes rows that won (edge sync): inserts them, or replaces the stored ones. */
  async applyRows(ex: Executor, id: string, columns: string[], rows: SqlValue[][], stamps: string[]) {
    const all = [...columns, "_hlc"];
    const per = Math.max(1, Math.min(400, Math.floor(MAX_PARAMS / all.length)));
    const upd = [...columns.filter((c) => c !== "item_id"), "_hlc"].map((c) => `${ident(c)} = excluded.${ident(c)}`).join(", ");
    for (let i = 0; i < rows.length; i += per) {
      const args: SqlValue[] = [];
      const chunk = rows.slice(i, i + per);
      chunk.forEach((r, j) => { for (const v of r) args.push(v); args.push(stamps[i + j]!); });
      await ex.run(`INSERT INTO ${tableOf(id)} (${all.map(ident).join(", ")}) VALUES ${Array(chunk.length).fill(`(${all.map(() => "?").join(", ")})`).join(", ")}
        ON CONFLICT(item_id) DO UPDATE SET ${upd}`, args);
    }
  },

  /** Stamps rows a statement from code just wrote (store/collectionSql.ts) as an update through
   *  the API stamps them; returns the latest stamp written. */
  async restamp(ex: Executor, id: string, itemIds: string[], hlc: string): Promise<string | null> {
    let latest: string | null = null;
    for (const ids of inParts(itemIds)) {
      const rows = await ex.all<{ _hlc: string | null }>(`UPDATE ${tableOf(id)} SET _hlc = ${laterStamp(ex.dialect, "_hlc", `CAST(?${ids.length + 1} AS TEXT)`)}
        WHERE item_id IN (${ids.map((_, j) => `?${j + 1}`).join(", ")}) RETURNING _hlc`, [...ids, hlc]);
      const m = maxOf(rows);
      if (m !== null && (latest === null || m > latest)) latest = m;
    }
    return latest;
  },

  /** Deletes a row a delete won over (edge sync). */
  deleteRow: (ex: Executor, id: string, itemId: string) => ex.run(`DELETE FROM ${tableOf(id)} WHERE item_id = ?`, [itemId]),

  /** Changes a column's declared type in place, its values kept (edge sync: the platform's schema). */
  setColumnType: (ex: Executor, id: string, name: string, type: ColumnType) =>
    ex.run(`UPDATE collection_columns SET type = ? WHERE collection_id = ? AND name = ?`, [type, id, name]),

  /** Inserts a row or, when `conflict` collides with a unique index, updates the given columns. */
  async upsert(ex: Executor, id: string, columns: string[], values: SqlValue[], conflict: string, updateColumns: string[], hlc: string | null, returning: string[]) {
    const all = [...columns, "_hlc"];
    const upd = [...updateColumns.map((c) => `${ident(c)} = excluded.${ident(c)}`), `_hlc = ${laterStamp(ex.dialect, `${tableOf(id)}._hlc`, "excluded._hlc")}`].join(", ");
    return ex.all<Record<string, unknown>>(
      `INSERT INTO ${tableOf(id)} (${all.map(ident).join(", ")}) VALUES (${all.map(() => "?").join(", ")})
       ON CONFLICT(${ident(conflict)}) DO UPDATE SET ${upd} RETURNING ${returning.map(ident).join(", ")}`,
      [...values, hlc]);
  },
};
