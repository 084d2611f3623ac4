// A platform's data copied from a libSQL database into an empty PostgreSQL one (outpost
// migrate-db). Both are first brought to this version's schema; then every table of the source
// is copied row for row in one transaction of the destination, in the order the tables were made
// (parents before the tables that refer to them), collections' own tables made on the way. What
// SQLite keeps implicitly PostgreSQL gets explicitly: the insertion order of the tables listed by
// rowid (their rowid column) and the counters of generated keys, moved past the copied ones.
import { ident } from "../core/columns.ts";
import { refuse } from "../core/errors.ts";
import { type ColumnDef, collectionsRepo, type IndexRow } from "./collections.ts";
import type { Db, Executor, SqlValue } from "./db.ts";
import { MAX_PARAMS } from "./sql.ts";

export interface CopyReport { table: string; rows: number }

const COLLECTION_TABLE = /^c_[0-9a-f]{30}$/;

const columnsOf = async (ex: Executor, table: string) =>
  (await ex.all<{ column_name: string }>(`SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, [table])).map((r) => r.column_name);

/** Copies everything of `from` (libSQL) into `to` (PostgreSQL, migrated, holding no platform yet). */
export async function copyDatabase(from: Db, to: Db, onTable: (r: CopyReport) => void = () => {}): Promise<CopyReport[]> {
  if (from.dialect.name !== "sqlite" || to.dialect.name !== "postgres") throw refuse("migrate-db copies a libSQL database into a PostgreSQL one");
  const held = await to.get<{ n: number }>(`SELECT (SELECT count(*) FROM developers) + (SELECT count(*) FROM systems) AS n`);
  if (held!.n > 0) throw refuse(`the database ${to.url} already holds a platform (developers or systems): migrate-db fills an empty one`);
  // tables in the order they were made: a table's parents come before it
  const tables = (await from.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name <> 'schema_migrations' ORDER BY rowid`)).map((r) => r.name);
  const report: CopyReport[] = [];
  await to.tx(async (tx) => {
    // rows a fresh schema holds (settings made by a migration) give way to the source's
    for (const t of tables) if (!COLLECTION_TABLE.test(t) && (await columnsOf(tx, t)).length) await tx.run(`DELETE FROM ${ident(t)}`);
    for (const table of tables) {
      let target = await columnsOf(tx, table);
      if (!target.length && COLLECTION_TABLE.test(table)) {
        const id = table.slice(2);
        const columns = await collectionsRepo.columns(from, id);
        const indexes = await collectionsRepo.indexes(from, id);
        await makeCollectionTable(tx, id, columns, indexes);
        target = await columnsOf(tx, table);
      }
      if (!target.length) throw refuse(`the source has a table ${table} this version does not know: is it from a newer Outpost?`);
      const source = new Set((await from.all<{ name: string }>(`SELECT name FROM pragma_table_info(?)`, [table])).map((r) => r.name));
      // rowid: SQLite's implicit one where the destination has a column for it
      const cols = target.filter((c) => source.has(c) || c === "rowid");
      const select = cols.map((c) => (c === "rowid" && !source.has(c) ? "rowid AS rowid" : ident(c))).join(", ");
      const per = Math.max(1, Math.floor(MAX_PARAMS / cols.length));
      const head = `INSERT INTO ${ident(table)} (${cols.map(ident).join(", ")}) VALUES `;
      const tuple = `(${cols.map(() => "?").join(", ")})`;
      let rows = 0, after: number | null = null;
      for (;;) {
        // in rowid order, a page at a time (a table may be larger than memory)
        const page: Record<string, unknown>[] = await from.all(`SELECT rowid AS _copy_rowid, ${select} FROM ${ident(table)}${after === null ? "" : " WHERE rowid > ?"} ORDER BY rowid LIMIT ?`,
          after === null ? [per] : [after, per]);
        if (!page.length) break;
        const args: SqlValue[] = [];
        for (const r of page) for (const c of cols) args.push(r[c] as SqlValue);
        await tx.run(head + Array(page.length).fill(tuple).join(", "), args);
        rows += page.length;
        after = page[page.length - 1]!._copy_rowid as number;
      }
      // generated keys continue after the copied ones
      for (const { column_name } of await tx.all<{ column_name: string }>(`SELECT column_name FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ? AND is_identity = 'YES'`, [table]))
        await tx.get(`SELECT setval(pg_get_serial_sequence(?, ?), coalesce((SELECT max(${ident(column_name)}) FROM ${ident(table)}), 0) + 1, false) AS v`, [ident(table), column_name]);
      const r = { table, rows };
      report.push(r);
      onTable(r);
    }
  });
  return report;
}

/** A collection's table and indexes as its metadata describes them (the metadata is copied). */
async function makeCollectionTable(ex: Executor, id: string, columns: ColumnDef[], indexes: IndexRow[]) {
  await collectionsRepo.createTable(ex, id, columns);
  for (const ix of indexes) await collectionsRepo.createIndexOnly(ex, id, ix.column_name, ix.is_unique === 1);
}
