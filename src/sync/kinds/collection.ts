// Collections: their schema (columns, indexes, or the external connection they stand for). Their
// rows travel as their own asset type, "row" (src/sync/assets.ts).
import { collectionsRepo, type ColumnDef, type IndexRow } from "../../store/collections.ts";
import type { Executor } from "../../store/db.ts";
import { tombstonesRepo } from "../../store/sync.ts";
import type { DefinitionKind } from "./kind.ts";

export interface CollectionBody { collection_id: string; name: string; connection: string | null; columns: ColumnDef[]; indexes: IndexRow[] }

export const collection: DefinitionKind<Awaited<ReturnType<typeof collectionsRepo.list>>[number]> = {
  type: "collection",
  list: (ex, sk) => collectionsRepo.list(ex, sk), nameOf: (c) => c.name,
  body: async (ex, _sk, c): Promise<CollectionBody> => ({
    collection_id: c.collection_id, name: c.name, connection: c.connection,
    columns: await collectionsRepo.columns(ex, c.collection_id), indexes: await collectionsRepo.indexes(ex, c.collection_id),
  }),
  apply: (ex, sk, _n, b) => applyCollection(ex, sk, b),
  remove: async (ex, _sk, _n, b: { collection_id: string }) => {
    const cur = await collectionsRepo.byId(ex, b.collection_id);
    if (cur) await collectionsRepo.drop(ex, cur.collection_id, cur.connection === null);
    await tombstonesRepo.forget(ex, b.collection_id);
  },
  deleteBody: async (ex, sk, name) => { const c = await collectionsRepo.byName(ex, sk, name); return c ? { collection_id: c.collection_id } : undefined; },
  // a collection's schema and query results are dropped by its id (the edge names the ids it changed)
  stale: [],
};

/** Makes the local collection match: created with the same id, columns added, dropped, renamed
 *  (the platform says which) and retyped in place (values kept: SQLite stores what a row holds
 *  whatever the declared type, and reads convert by the column's type), indexes kept in step;
 *  renamed when its name changed. */
async function applyCollection(ex: Executor, sk: string, b: CollectionBody & { renamed?: { from: string; to: string } }) {
  const cur = await collectionsRepo.byId(ex, b.collection_id);
  if (!cur) {
    const byName = await collectionsRepo.byName(ex, sk, b.name);
    if (byName) throw new Error(`a local collection named '${b.name}' exists with another id`);
    await collectionsRepo.create(ex, { collection_id: b.collection_id, system_key: sk, name: b.name, connection: b.connection, created_at: new Date().toISOString() }, b.columns);
  } else {
    if (cur.name !== b.name) await collectionsRepo.rename(ex, cur.collection_id, b.name);
    if (b.connection !== null) { await collectionsRepo.setConnection(ex, cur.collection_id, b.connection); return; }
    let have = await collectionsRepo.columns(ex, cur.collection_id);
    const r = b.renamed;
    if (r && have.some((x) => x.name === r.from) && !have.some((x) => x.name === r.to) && b.columns.some((x) => x.name === r.to)) {
      await collectionsRepo.renameColumn(ex, cur.collection_id, r.from, r.to);
      have = await collectionsRepo.columns(ex, cur.collection_id);
    }
    for (const c of have) if (!b.columns.some((x) => x.name === c.name)) await collectionsRepo.dropColumn(ex, cur.collection_id, c.name);
    for (const c of b.columns) {
      const h = have.find((x) => x.name === c.name);
      if (!h) await collectionsRepo.addColumn(ex, cur.collection_id, c);
      else if (h.type !== c.type) await collectionsRepo.setColumnType(ex, cur.collection_id, c.name, c.type);
    }
  }
  if (b.connection !== null) return;
  const idx = await collectionsRepo.indexes(ex, b.collection_id);
  for (const i of idx) if (!b.indexes.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.dropIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
  for (const i of b.indexes) if (!idx.some((x) => x.column_name === i.column_name && x.is_unique === i.is_unique)) await collectionsRepo.createIndex(ex, b.collection_id, i.column_name, i.is_unique === 1);
}
