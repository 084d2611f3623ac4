// Edge sync: the change log, per-asset sync status, tombstones of deleted rows, and (on an edge)
// the outbox and sync bookkeeping.
import type { Executor, RunResult } from "./db.ts";
import { tableOf } from "./collections.ts";
import { inParts, marks } from "./sql.ts";
import { DEFINITION_KINDS } from "../core/syncKinds.ts";

export interface ChangeRow {
  seq: number; system_key: string; asset_type: string; asset_name: string; item_id: string | null;
  op: "upsert" | "delete"; version: number; hlc: string; origin: string; body: string | null;
}
export interface StatusRow {
  system_key: string; edge_name: string; asset_type: string; asset_name: string;
  desired_version: number; applied_version: number; status: string; last_error: string; attempts: number; updated_at: string;
}

export const changesRepo = {
  /** Appends a change, in the transaction of the write it records; `lastInsertRowid` is its seq.
   *  Readers take a system's changes in seq order from a cursor, so a seq must never become
   *  visible after a higher one: with writers on several nodes (PostgreSQL), a transaction could
   *  draw seq 10, another 11 and commit first, and a reader at 11 would skip 10 for good. The
   *  appending transaction therefore first takes the system's change-log lock (dialect), held to
   *  its commit: seqs are drawn in commit order, at the price of one appender per system at a time
   *  across nodes (their other work runs alongside until they reach the log). */
  /*  An entry's version is its asset's next one (see noteLatest, which counts it), read under
   *  that same lock. */
  async append(ex: Executor, c: Omit<ChangeRow, "seq" | "version">): Promise<RunResult> {
    if (ex.dialect.changeLogLock) await ex.get(ex.dialect.changeLogLock, [c.system_key]);
    const row = await ex.get<{ seq: number }>(`INSERT INTO changes(system_key, asset_type, asset_name, item_id, op, version, hlc, origin, body) VALUES (?,?,?,?,?,${NEXT_VERSION},?,?,?) RETURNING seq`,
      [c.system_key, c.asset_type, c.asset_name, c.item_id, c.op, c.system_key, c.asset_type, c.asset_name, c.hlc, c.origin, c.body]);
    return { changes: 1, lastInsertRowid: row!.seq };
  },
  /** Appends changes as append does, several per statement (a write of many rows is one round
   *  trip per few hundred of them, not per row); their seqs, in order. */
  async appendMany(ex: Executor, cs: Omit<ChangeRow, "seq" | "version">[]): Promise<number[]> {
    if (!cs.length) return [];
    if (ex.dialect.changeLogLock) await ex.get(ex.dialect.changeLogLock, [cs[0]!.system_key]);
    const seqs: number[] = [];
    for (const chunk of inParts(cs)) {
      const args: unknown[] = [];
      for (const c of chunk) args.push(c.system_key, c.asset_type, c.asset_name, c.item_id, c.op, c.system_key, c.asset_type, c.asset_name, c.hlc, c.origin, c.body);
      const rows = await ex.all<{ seq: number }>(`INSERT INTO changes(system_key, asset_type, asset_name, item_id, op, version, hlc, origin, body) VALUES
        ${chunk.map(() => `(?,?,?,?,?,${NEXT_VERSION},?,?,?)`).join(", ")} RETURNING seq`, args);
      // the statement's rows in the order of its VALUES (both engines number them in that order)
      for (const r of rows) seqs.push(r.seq);
    }
    return seqs;
  },
  after: (ex: Executor, systemKey: string, seq: number, limit: number) =>
    ex.all<ChangeRow>(`SELECT * FROM changes WHERE system_key = ? AND seq > ? ORDER BY seq LIMIT ?`, [systemKey, seq, limit]),
  maxSeq: async (ex: Executor, systemKey: string) =>
    (await ex.get<{ n: number | null }>(`SELECT max(seq) AS n FROM changes WHERE system_key = ?`, [systemKey]))!.n ?? 0,
  minSeq: async (ex: Executor, systemKey: string) =>
    (await ex.get<{ n: number | null }>(`SELECT min(seq) AS n FROM changes WHERE system_key = ?`, [systemKey]))!.n ?? 0,
  /** Drops the entries up to `upTo` (every edge acknowledged them), the tombstones of the deletes
   *  among them (no edge needs them any more), and moves the system's horizon. */
  async compact(ex: Executor, systemKey: string, upTo: number) {
    await ex.run(`DELETE FROM tombstones WHERE (collection_id, item_id, hlc) IN (SELECT ${ex.dialect.jsonText("body", "collection_id")}, item_id, hlc FROM changes
      WHERE system_key = ? AND seq <= ? AND asset_type = 'row' AND op = 'delete')`, [systemKey, upTo]);
    await ex.run(`DELETE FROM changes WHERE system_key = ? AND seq <= ?`, [systemKey, upTo]);
    await ex.run(`INSERT INTO sync_horizons(system_key, compacted_through) VALUES (?, ?)
      ON CONFLICT(system_key) DO UPDATE SET compacted_through = ${ex.dialect.greatest("sync_horizons.compacted_through", "excluded.compacted_through")}`, [systemKey, upTo]);
  },
  /** Up to where the log was compacted (an edge whose cursor is older needs a snapshot); null when
   *  it never was since the horizon is recorded. */
  horizon: async (ex: Executor, systemKey: string) =>
    (await ex.get<{ n: number }>(`SELECT compacted_through AS n FROM sync_horizons WHERE system_key = ?`, [systemKey]))?.n ?? null,
  /** Notes an asset's latest change (rows: their collection's), and counts it: an asset's version
   *  goes up by one per change (a write of many rows of a collection is one change of its rows),
   *  the number its entries in the log carry. Called once per change, after its entries. */
  noteLatest: (ex: Executor, systemKey: string, type: string, name: string, seq: number) =>
    ex.run(`INSERT INTO sync_asset_seqs(system_key, asset_type, asset_name, seq, version) VALUES (?,?,?,?,1)
      ON CONFLICT(system_key, asset_type, asset_name) DO UPDATE SET seq = ${ex.dialect.greatest("sync_asset_seqs.seq", "excluded.seq")}, version = sync_asset_seqs.version + 1`, [systemKey, type, name, seq]),
  /** Each asset's latest change: an edge whose cursor is before it is owed it; and its version. */
  latest: (ex: Executor, systemKey: string) =>
    ex.all<{ asset_type: string; asset_name: string; seq: number; version: number }>(`SELECT asset_type, asset_name, seq, version FROM sync_asset_seqs WHERE system_key = ?`, [systemKey]),
  /** An asset's current version (0: none counted, as for the rows of a collection never written). */
  versionOf: async (ex: Executor, systemKey: string, type: string, name: string) =>
    (await ex.get<{ version: number }>(`SELECT version FROM sync_asset_seqs WHERE system_key = ? AND asset_type = ? AND asset_name = ?`, [systemKey, type, name]))?.version ?? 0,
  /** The version the log entry at `seq` carries if it is one of this asset's (0: none, gone, or
   *  from before versions were counted). */
  versionAt: async (ex: Executor, systemKey: string, seq: number, type: string, name: string) =>
    (await ex.get<{ version: number }>(`SELECT version FROM changes WHERE system_key = ? AND seq = ? AND asset_type = ? AND asset_name = ?`, [systemKey, seq, type, name]))?.version ?? 0,
  /** Every asset of a system counted at its first version, unless counted already: done when a
   *  system gets its first edge (changes are counted only while a system has edges, so what was
   *  made before is at its first version then). */
  countAssets: (ex: Executor, systemKey: string) =>
    ex.run(`INSERT INTO sync_asset_seqs(system_key, asset_type, asset_name, seq, version) SELECT ?1, t, name, 0, 1 FROM (${ASSET_NAMES_SQL}
      UNION ALL SELECT 'row' AS t, name FROM collections WHERE system_key = ?1) a WHERE true ON CONFLICT DO NOTHING`, [systemKey]),
  /** How many changes follow `seq` (an index range: the log's tail only). */
  countAfter: async (ex: Executor, systemKey: string, seq: number) =>
    (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM changes WHERE system_key = ? AND seq > ?`, [systemKey, seq]))!.n,
};

/** The version the next change of an asset takes: its counted one plus one (three parameters:
 *  system key, asset type, asset name). */
const NEXT_VERSION = `coalesce((SELECT v.version FROM sync_asset_seqs v WHERE v.system_key = ? AND v.asset_type = ? AND v.asset_name = ?), 0) + 1`;

/** Where each kind of definition edge sync moves keeps its assets' names (src/core/syncKinds.ts). */
export const ASSET_NAME_COLUMNS: Readonly<Record<string, { table: string; column: string }>> =
  Object.fromEntries(Object.entries(DEFINITION_KINDS).map(([type, k]) => [type, { table: k.table, column: k.nameColumn }]));
const ASSET_NAMES_SQL = Object.entries(ASSET_NAME_COLUMNS)
  .map(([t, s]) => `SELECT '${t}' AS t, ${s.column} AS name FROM ${s.table} WHERE system_key = ?1`).join(" UNION ALL ");

/** The names of a system's assets of every kind: one query, names only (sync status, what a template covers). */
export const assetNames = (ex: Executor, systemKey: string) => ex.all<{ t: string; name: string }>(ASSET_NAMES_SQL, [systemKey]);

/** Per system with edges heard from since `since` (epoch s), the lowest cursor among those that
 *  can resume from the log (null: none can; the others need a snapshot whatever the log holds). */
export const lowestCursors = (ex: Executor, since: number) =>
  ex.all<{ system_key: string; low: number | null }>(
    `SELECT e.system_key, min(CASE WHEN e.applied_template IS NOT NULL AND e.cursor >= coalesce(h.compacted_through, 0) THEN e.cursor END) AS low
     FROM edges e LEFT JOIN sync_horizons h ON h.system_key = e.system_key
     WHERE e.last_talked IS NOT NULL AND e.last_talked > ? GROUP BY e.system_key`, [since]);

export const statusRepo = {
  forEdge: (ex: Executor, systemKey: string, edge: string) =>
    ex.all<StatusRow>(`SELECT * FROM sync_status WHERE system_key = ? AND edge_name = ? ORDER BY asset_type, asset_name`, [systemKey, edge]),
  forSystem: (ex: Executor, systemKey: string) =>
    ex.all<StatusRow>(`SELECT * FROM sync_status WHERE system_key = ? ORDER BY edge_name, asset_type, asset_name`, [systemKey]),
  /** The asset's wanted version went up: pending until the edge reports it applied. */
  desire: (ex: Executor, systemKey: string, edge: string, type: string, name: string, version: number, at: string) =>
    ex.run(`INSERT INTO sync_status(system_key, edge_name, asset_type, asset_name, desired_version, applied_version, status, updated_at)
      VALUES (?,?,?,?,?,0,'pending',?)
      ON CONFLICT(system_key, edge_name, asset_type, asset_name) DO UPDATE SET desired_version = ${ex.dialect.greatest("sync_status.desired_version", "excluded.desired_version")},
      status = CASE WHEN sync_status.applied_version >= ${ex.dialect.greatest("sync_status.desired_version", "excluded.desired_version")} THEN sync_status.status ELSE 'pending' END, updated_at = excluded.updated_at`,
      [systemKey, edge, type, name, version, at]),
  applied: (ex: Executor, systemKey: string, edge: string, type: string, name: string, version: number, at: string) =>
    ex.run(`INSERT INTO sync_status(system_key, edge_name, asset_type, asset_name, desired_version, applied_version, status, updated_at)
      VALUES (?,?,?,?,?,?,'synced',?)
      ON CONFLICT(system_key, edge_name, asset_type, asset_name) DO UPDATE SET applied_version = ${ex.dialect.greatest("sync_status.applied_version", "excluded.applied_version")},
      status = CASE WHEN ${ex.dialect.greatest("sync_status.applied_version", "excluded.applied_version")} >= sync_status.desired_version THEN 'synced' ELSE 'pending' END,
      last_error = '', updated_at = excluded.updated_at`,
      [systemKey, edge, type, name, version, version, at]),
  failed: (ex: Executor, systemKey: string, edge: string, type: string, name: string, version: number, error: string, at: string) =>
    ex.run(`INSERT INTO sync_status(system_key, edge_name, asset_type, asset_name, desired_version, applied_version, status, last_error, attempts, updated_at)
      VALUES (?,?,?,?,?,0,'failed',?,1,?)
      ON CONFLICT(system_key, edge_name, asset_type, asset_name) DO UPDATE SET status = 'failed', last_error = excluded.last_error,
      attempts = sync_status.attempts + 1, desired_version = ${ex.dialect.greatest("sync_status.desired_version", "excluded.desired_version")}, updated_at = excluded.updated_at`,
      [systemKey, edge, type, name, version, error, at]),
  /** Failed assets of every edge, by asset type (for /metrics). */
  failedByType: (ex: Executor) =>
    ex.all<{ asset_type: string; n: number }>(`SELECT asset_type, count(*) AS n FROM sync_status WHERE status = 'failed' GROUP BY asset_type`),
  failedFor: (ex: Executor, systemKey: string, edge: string) =>
    ex.all<StatusRow>(`SELECT * FROM sync_status WHERE system_key = ? AND edge_name = ? AND status = 'failed'`, [systemKey, edge]),
  remove: (ex: Executor, systemKey: string, edge: string, type: string, name: string) =>
    ex.run(`DELETE FROM sync_status WHERE system_key = ? AND edge_name = ? AND asset_type = ? AND asset_name = ?`, [systemKey, edge, type, name]),
};

export const tombstonesRepo = {
  get: async (ex: Executor, collectionId: string, itemId: string) =>
    (await ex.get<{ hlc: string }>(`SELECT hlc FROM tombstones WHERE collection_id = ? AND item_id = ?`, [collectionId, itemId]))?.hlc,
  put: (ex: Executor, collectionId: string, itemId: string, hlc: string) =>
    ex.run(`INSERT INTO tombstones(collection_id, item_id, hlc) VALUES (?,?,?) ON CONFLICT(collection_id, item_id) DO UPDATE SET hlc = ${ex.dialect.greatest("tombstones.hlc", "excluded.hlc")}`, [collectionId, itemId, hlc]),
  forget: (ex: Executor, collectionId: string) => ex.run(`DELETE FROM tombstones WHERE collection_id = ?`, [collectionId]),
  /** Replaces a tombstone's stamp when it is `replaced` (the platform stamped that delete again). */
  restamp: (ex: Executor, collectionId: string, itemId: string, replaced: string, hlc: string) =>
    ex.run(`UPDATE tombstones SET hlc = ? WHERE collection_id = ? AND item_id = ? AND hlc = ?`, [hlc, collectionId, itemId, replaced]),
  /** A page of a collection's tombstones, by item id after `after` (snapshots carry them). */
  page: (ex: Executor, collectionId: string, after: string, limit: number) =>
    ex.all<{ item_id: string; hlc: string }>(`SELECT item_id, hlc FROM tombstones WHERE collection_id = ? AND item_id > ? ORDER BY item_id LIMIT ?`, [collectionId, after, limit]),
  forItems: async (ex: Executor, collectionId: string, itemIds: string[]) => {
    const out = new Map<string, string>();
    for (const ids of inParts(itemIds))
      for (const r of await ex.all<{ item_id: string; hlc: string }>(`SELECT item_id, hlc FROM tombstones WHERE collection_id = ? AND item_id IN (${marks(ids.length)})`, [collectionId, ...ids])) out.set(r.item_id, r.hlc);
    return out;
  },
};

export const outboxRepo = {
  add: (ex: Executor, kind: string, body: string) => ex.run(`INSERT INTO outbox(kind, body, created_at) VALUES (?,?,?)`, [kind, body, Date.now()]),
  next: (ex: Executor, limit: number) => ex.all<{ id: number; kind: string; body: string }>(`SELECT id, kind, body FROM outbox ORDER BY id LIMIT ?`, [limit]),
  after: (ex: Executor, id: number, limit: number) => ex.all<{ id: number; kind: string; body: string }>(`SELECT id, kind, body FROM outbox WHERE id > ? ORDER BY id LIMIT ?`, [id, limit]),
  remove: (ex: Executor, ids: number[]) => ex.run(`DELETE FROM outbox WHERE id IN (${ids.map(() => "?").join(",")})`, ids),
  ackUpTo: (ex: Executor, id: number) => ex.run(`DELETE FROM outbox WHERE id <= ?`, [id]),
  count: async (ex: Executor) => (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM outbox`))!.n,
  /** The bytes of every body waiting (a scan: only when a running tally says a limit may be passed). */
  bytes: async (ex: Executor) => (await ex.get<{ n: number | null }>(`SELECT sum(length(body)) AS n FROM outbox`))!.n ?? 0,
  /** When the oldest item waiting was written (ms), null when none waits. */
  oldest: async (ex: Executor) => (await ex.get<{ t: number }>(`SELECT created_at AS t FROM outbox ORDER BY id LIMIT 1`))?.t ?? null,
  /** Items after `id` with their size, oldest first (to find how many to drop). */
  sizesAfter: (ex: Executor, id: number, limit: number) =>
    ex.all<{ id: number; n: number }>(`SELECT id, length(body) AS n FROM outbox WHERE id > ? ORDER BY id LIMIT ?`, [id, limit]),
  /** The newest item written before `ms` (items are written in id order). */
  lastBefore: async (ex: Executor, ms: number) => (await ex.get<{ id: number | null }>(`SELECT max(id) AS id FROM outbox WHERE created_at < ?`, [ms]))!.id ?? 0,
  countThrough: async (ex: Executor, id: number) => (await ex.get<{ n: number }>(`SELECT count(*) AS n FROM outbox WHERE id <= ?`, [id]))!.n,
};

/** Edge: the definitions the platform sent (by type and name). */
export const syncedAssetsRepo = {
  add: (ex: Executor, type: string, name: string) => ex.run(`INSERT INTO synced_assets(asset_type, asset_name) VALUES (?,?) ON CONFLICT DO NOTHING`, [type, name]),
  remove: (ex: Executor, type: string, name: string) => ex.run(`DELETE FROM synced_assets WHERE asset_type = ? AND asset_name = ?`, [type, name]),
  has: async (ex: Executor, type: string, name: string) => (await ex.get(`SELECT 1 AS one FROM synced_assets WHERE asset_type = ? AND asset_name = ?`, [type, name])) !== undefined,
  ofType: async (ex: Executor, type: string) => (await ex.all<{ asset_name: string }>(`SELECT asset_name FROM synced_assets WHERE asset_type = ?`, [type])).map((r) => r.asset_name),
};

export const syncStateRepo = {
  get: async (ex: Executor, key: string) => (await ex.get<{ value: string }>(`SELECT value FROM sync_state WHERE key = ?`, [key]))?.value,
  set: (ex: Executor, key: string, value: string) =>
    ex.run(`INSERT INTO sync_state(key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, [key, value]),
};

/** Edge: the rows a full snapshot brought, by collection, so that at its end the rows it did not
 *  bring (deleted on the platform, their tombstones perhaps gone) go too. A scratch table the edge
 *  makes at start (an edge database only). */
export const snapshotSeenRepo = {
  ensure: (ex: Executor) => ex.run(`CREATE TABLE IF NOT EXISTS sync_snapshot_seen (collection_id TEXT NOT NULL, item_id TEXT NOT NULL, PRIMARY KEY (collection_id, item_id)) WITHOUT ROWID`),
  clear: (ex: Executor) => ex.run(`DELETE FROM sync_snapshot_seen`),
  async add(ex: Executor, collectionId: string, itemIds: string[]) {
    for (const ids of inParts(itemIds))
      await ex.run(`INSERT INTO sync_snapshot_seen (collection_id, item_id) VALUES ${ids.map(() => "(?, ?)").join(", ")} ON CONFLICT DO NOTHING`, ids.flatMap((id) => [collectionId, id]));
  },
  /** Rows of a collection the snapshot did not bring, stamped before `before` (a later stamp is a
   *  write made here since), with no write of theirs waiting in the outbox. */
  unseen: async (ex: Executor, collectionId: string, before: string) =>
    (await ex.all<{ item_id: string }>(`SELECT item_id FROM ${tableOf(collectionId)} t WHERE (t._hlc IS NULL OR t._hlc < ?)
      AND NOT EXISTS (SELECT 1 FROM sync_snapshot_seen s WHERE s.collection_id = ? AND s.item_id = t.item_id)
      AND t.item_id NOT IN (SELECT json_extract(body, '$.item_id') FROM outbox WHERE kind = 'row' AND json_extract(body, '$.collection_id') = ?)`,
      [before, collectionId, collectionId])).map((r) => r.item_id),
};
