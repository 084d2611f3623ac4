// Edge records and their template entries.
import { type ColumnMap, type Condition, type Query, compileWhere } from "../core/query.ts";
import type { Executor } from "./db.ts";
import { inParts, type ListRead, listClauses, marks } from "./sql.ts";
import { linkEventsRepo } from "./linkEvents.ts";

export interface EdgeRow {
  system_key: string; name: string; token_hash: string; description: string; template: string;
  is_connected: number; first_talked: number | null; last_talked: number | null;
  last_seen_version: string; last_seen_os: string; last_seen_architecture: string;
  cursor: number; created_date: number; data: string;
  /** this record's identity: a new one for an edge deleted and created again under its name */
  incarnation: string;
  /** the template the edge last completed a snapshot of (JSON); null: none yet; '*': synced by a
   *  version that did not record it (taken as the current template) */
  applied_template: string | null;
  /** why the platform last refused the edge's link ("" : never), and when (epoch s) */
  last_refusal: string; last_refusal_at: number | null;
}
export type EdgeChanges = Partial<Omit<EdgeRow, "system_key" | "name" | "created_date">>;
export interface TemplateEntryRow { def_module: string; def_name: string; mode: string; rows: number }

const COLS = ["system_key", "name", "token_hash", "description", "template", "is_connected", "first_talked", "last_talked",
  "last_seen_version", "last_seen_os", "last_seen_architecture", "cursor", "created_date", "data", "incarnation", "applied_template", "last_refusal", "last_refusal_at"] as const;

/** The edges table's own columns, for queries (custom columns read the data document). */
export const EDGE_COLUMNS: ColumnMap = {
  name: { sql: "name", type: "string" }, description: { sql: "description", type: "string" },
  template: { sql: "template", type: "string" }, isConnected: { sql: "is_connected", type: "bool" },
  first_talked: { sql: "first_talked", type: "int" }, last_talked: { sql: "last_talked", type: "int" },
  last_seen_version: { sql: "last_seen_version", type: "string" }, created_date: { sql: "created_date", type: "int" },
  last_seen_os: { sql: "last_seen_os", type: "string" }, last_seen_architecture: { sql: "last_seen_architecture", type: "string" },
};

/** An edge (a row of edges) with an asset whose sync failed. */
const FAILING = `EXISTS (SELECT 1 FROM sync_status f WHERE f.system_key = edges.system_key AND f.edge_name = edges.name AND f.status = 'failed')`;
/** The condition `failing` adds to a WHERE: only the edges with (true) or without (false) such an
 *  asset; nothing when undefined. */
const failingClause = (failing: boolean | undefined) => (failing === undefined ? "" : ` AND ${failing ? "" : "NOT "}${FAILING}`);

export const edgesRepo = {
  get: (ex: Executor, systemKey: string, name: string) => ex.get<EdgeRow>(`SELECT * FROM edges WHERE system_key = ? AND name = ?`, [systemKey, name]),
  /** The records of the edges of a system named (those there; 500 names a statement). */
  async some(ex: Executor, systemKey: string, names: string[]): Promise<EdgeRow[]> {
    const rows: EdgeRow[] = [];
    for (const part of inParts(names))
      rows.push(...(await ex.all<EdgeRow>(`SELECT * FROM edges WHERE system_key = ? AND name IN (${marks(part.length)})`, [systemKey, ...part])));
    return rows;
  },
  all: (ex: Executor, systemKey: string) => ex.all<EdgeRow>(`SELECT * FROM edges WHERE system_key = ? ORDER BY name`, [systemKey]),
  /** The rows a parsed query selects over `columns` (its own and custom columns), ordered by its SORT then name;
   *  `failing`: only the edges with (true) or without (false) an asset whose sync failed. */
  list(ex: Executor, systemKey: string, q: Query, columns: ColumnMap, read?: ListRead, failing?: boolean) {
    const { where, tail } = listClauses(ex.dialect, q, columns, "name", read);
    const also = failingClause(failing);
    return ex.all<EdgeRow>(`SELECT * FROM edges WHERE system_key = ? AND (${where.sql})${also}${tail}`, [systemKey, ...where.args]);
  },
  /** What list answers for a query without SORT or page, `size` rows at a time in name order:
   *  the next part after the name `after` (null: the first). */
  listPart(ex: Executor, systemKey: string, q: Query, columns: ColumnMap, after: string | null, size: number, failing?: boolean) {
    const { where } = listClauses(ex.dialect, q, columns, undefined, { ordered: false, paged: false });
    const also = failingClause(failing);
    const from = after === null ? "" : " AND name > ?";
    return ex.all<EdgeRow>(`SELECT * FROM edges WHERE system_key = ? AND (${where.sql})${also}${from} ORDER BY name LIMIT ${size}`,
      [systemKey, ...where.args, ...(after === null ? [] : [after])]);
  },
  /** A fleet's edges by link state, in one pass: never connected (no contact yet), disconnected
   *  (had contact, not connected now), failing (an asset whose sync failed). */
  async stateCounts(ex: Executor, systemKey: string) {
    const r = await ex.get<Record<string, number | string | null>>(`SELECT count(*) AS total,
      sum(CASE WHEN is_connected = 1 THEN 1 ELSE 0 END) AS connected,
      sum(CASE WHEN is_connected = 0 AND last_talked IS NULL THEN 1 ELSE 0 END) AS never_connected,
      sum(CASE WHEN is_connected = 0 AND last_talked IS NOT NULL THEN 1 ELSE 0 END) AS disconnected,
      sum(CASE WHEN ${FAILING} THEN 1 ELSE 0 END) AS failing
      FROM edges WHERE system_key = ?`, [systemKey]);
    // PostgreSQL answers sums as text (bigint)
    const n = (k: string) => Number(r?.[k] ?? 0);
    return { total: n("total"), connected: n("connected"), never_connected: n("never_connected"), disconnected: n("disconnected"), failing: n("failing") };
  },
  /** The number of rows `filters` match (and `failing`, as in list). */
  async count(ex: Executor, systemKey: string, filters: Condition[][], columns: ColumnMap, failing?: boolean) {
    const where = compileWhere(filters, columns, ex.dialect);
    const also = failingClause(failing);
    return (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM edges WHERE system_key = ? AND (${where.sql})${also}`, [systemKey, ...where.args]))!.n;
  },
  insert: (ex: Executor, e: EdgeRow) => ex.run(`INSERT INTO edges(${COLS.join(", ")}) VALUES (${COLS.map(() => "?").join(", ")})`, COLS.map((c) => e[c])),
  update: (ex: Executor, systemKey: string, name: string, changes: EdgeChanges) => edgesRepo.updateMany(ex, systemKey, [name], changes),
  /** The same changes to several edges of a system, in one statement (a herd's hellos after a
   *  restart say the same build, OS and position for most of a fleet). `heldBy`: and that node
   *  holds their links (connected, its id as their node_id), in the same statement: a second
   *  UPDATE of the same rows was a third of a herd's database time. */
  async updateMany(ex: Executor, systemKey: string, names: string[], changes: EdgeChanges, heldBy?: string) {
    const keys = Object.keys(changes).filter((k) => (COLS as readonly string[]).includes(k) && (heldBy === undefined || k !== "is_connected")) as (keyof EdgeChanges)[];
    if ((!keys.length && heldBy === undefined) || !names.length) return;
    const sets = [...keys.map((k) => `${k} = ?`), ...(heldBy === undefined ? [] : ["node_id = ?", "is_connected = 1"])];
    await ex.run(`UPDATE edges SET ${sets.join(", ")} WHERE system_key = ? AND name IN (${names.map(() => "?").join(", ")})`,
      [...keys.map((k) => changes[k]), ...(heldBy === undefined ? [] : [heldBy]), systemKey, ...names]);
  },
  /** When edges of a system were heard from, and the positions of those given one: one statement
   *  per position (a fleet's acknowledgements of one change are at one, written together). A
   *  CASE of a WHEN per edge was compared name by name for each row: 500 edges held the event
   *  loop about 18 ms, most of a fan-out's database time. */
  /*  `heldBy`: the node whose live links these are marks them connected to it again where no node
   *  holds them: another node that took this one for dead (its heartbeat late behind a herd's
   *  work) freed them while their links went on here. */
  async talked(ex: Executor, systemKey: string, lastTalked: number, edges: { name: string; cursor: number | null }[], heldBy?: string) {
    const at = new Map<number | null, string[]>();
    for (const e of edges) {
      const names = at.get(e.cursor);
      if (names) names.push(e.name); else at.set(e.cursor, [e.name]);
    }
    const held = heldBy === undefined ? "" : ", is_connected = CASE WHEN node_id IN (?, '') THEN 1 ELSE is_connected END, node_id = CASE WHEN node_id = '' THEN ? ELSE node_id END";
    for (const [cursor, names] of at) {
      const set = cursor === null ? "" : ", cursor = ?";
      await ex.run(`UPDATE edges SET last_talked = ?${set}${held} WHERE system_key = ? AND name IN (${names.map(() => "?").join(", ")})`,
        [lastTalked, ...(cursor === null ? [] : [cursor]), ...(heldBy === undefined ? [] : [heldBy, heldBy]), systemKey, ...names]);
    }
  },
  async delete(ex: Executor, systemKey: string, name: string) {
    await ex.run(`DELETE FROM edge_template_entries WHERE system_key = ? AND edge_name = ?`, [systemKey, name]);
    await ex.run(`DELETE FROM sync_status WHERE system_key = ? AND edge_name = ?`, [systemKey, name]);
    await linkEventsRepo.deleteEdge(ex, systemKey, name);
    return ex.run(`DELETE FROM edges WHERE system_key = ? AND name = ?`, [systemKey, name]);
  },
  dropDataKey: (ex: Executor, systemKey: string, name: string) =>
    ex.run(`UPDATE edges SET data = ${ex.dialect.jsonRemove("data", "?")} WHERE system_key = ?`, [name, systemKey]),
  /** The edge completed a snapshot of `template` ending at `cursor`. */
  snapshotDone: (ex: Executor, systemKey: string, name: string, incarnation: string, template: string, cursor: number | null) =>
    ex.run(`UPDATE edges SET applied_template = ?, cursor = coalesce(?, cursor) WHERE system_key = ? AND name = ? AND incarnation = ?`, [template, cursor, systemKey, name, incarnation]),
  /** Every edge was disconnected by a platform restart. */
  markAllDisconnected: (ex: Executor) => ex.run(`UPDATE edges SET is_connected = 0 WHERE is_connected = 1`),

  entries: (ex: Executor, systemKey: string, edge: string) =>
    ex.all<TemplateEntryRow>(`SELECT def_module, def_name, mode, rows FROM edge_template_entries WHERE system_key = ? AND edge_name = ? ORDER BY rowid`, [systemKey, edge]),
  /** The own entries of every edge of a system, each edge's in their order. */
  allEntries: (ex: Executor, systemKey: string) =>
    ex.all<TemplateEntryRow & { edge_name: string }>(`SELECT edge_name, def_module, def_name, mode, rows FROM edge_template_entries WHERE system_key = ? ORDER BY edge_name, rowid`, [systemKey]),
  putEntry: (ex: Executor, systemKey: string, edge: string, e: TemplateEntryRow) =>
    ex.run(`INSERT INTO edge_template_entries(system_key, edge_name, def_module, def_name, mode, rows) VALUES (?,?,?,?,?,?)
      ON CONFLICT(system_key, edge_name, def_module, def_name) DO UPDATE SET mode = excluded.mode, rows = excluded.rows`,
      [systemKey, edge, e.def_module, e.def_name, e.mode, e.rows]),
  removeEntry: (ex: Executor, systemKey: string, edge: string, module: string, name: string) =>
    ex.run(`DELETE FROM edge_template_entries WHERE system_key = ? AND edge_name = ? AND def_module = ? AND def_name = ?`, [systemKey, edge, module, name]),
};
