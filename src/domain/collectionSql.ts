// SQL from code on the caller's own collections: ClearBlade.Database() without an external
// database's name, table name = collection name, $1, $2... parameters. The statement is checked
// and written again by src/core/sqlStatement.ts; here each collection it names is looked up in the
// run's system with the rights the REST API asks (read for what it reads, create, update or delete
// for what it writes), and a write is kept whole for the platform as an API write is: its rows
// stamped and logged for edge sync, the collection's cached results dropped, its item events sent.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { ApiError } from "../core/errors.ts";
import { newTimeUuid } from "../core/ids.ts";
import { checkStatement, loadSqlParser } from "../core/sqlStatement.ts";
import { collectionSqlRepo } from "../store/collectionSql.ts";
import { collectionsRepo, tableOf } from "../store/collections.ts";
import { uniqueViolation } from "../store/db.ts";
import { type Collection, dataError, resourceOf } from "./collectionCatalog.ts";
import type { Collections } from "./collections.ts";
import type { DomainDeps } from "./deps.ts";

/** The most arguments one statement takes. */
const PARAMS_MAX = 1000;
const WRITE_LEVEL = { insert: LEVEL.CREATE, update: LEVEL.UPDATE, delete: LEVEL.DELETE } as const;

/** A statement's arguments: plain values (a document or list is passed as its JSON text). */
function argsOf(params: unknown[], used: number): unknown[] {
  if (params.length > PARAMS_MAX) throw dataError(`at most ${PARAMS_MAX} arguments`);
  if (params.length !== used) throw dataError(`the statement uses ${used ? `$1 to $${used}` : "no parameters"} and was given ${params.length} argument${params.length === 1 ? "" : "s"}`);
  return params.map((v) => (v === undefined ? null : v !== null && typeof v === "object" ? JSON.stringify(v) : v));
}

/** A database error as the caller may see it: the collections under their names, never their tables. */
function sqlError(e: unknown, names: Map<string, string>): unknown {
  if (e instanceof ApiError) return e;
  const unique = uniqueViolation(e);
  if (unique) return dataError(unique.column === "item_id" ? "an item with this item_id already exists" : `duplicate value for unique column '${unique.column ?? "?"}'`);
  let msg = String((e as { message?: unknown })?.message ?? e).split("\n")[0]!.replace(/^SQLITE_\w+: |^SqliteError: /, "");
  msg = msg.replace(/"?c_([0-9a-f]{30})"?/g, (_, id: string) => `"${names.get(id) ?? "?"}"`);
  return dataError(`SQL error: ${msg.slice(0, 500)}`);
}

/** A statement checked, its collections resolved and its rights granted, ready to run. */
interface Prepared {
  kind: "select" | "insert" | "update" | "delete";
  /** the statement as written again, over the collections' tables */
  text: string;
  args: unknown[];
  /** the collection it writes (none for a SELECT) */
  target: Collection | null;
  /** the statement as the caller wrote it (a write's events carry it) */
  source: string;
  /** collection ids to names, for errors */
  names: Map<string, string>;
}

/** A transaction's statements at most. */
const TRANSACTION_MAX = 100;

export class CollectionSql {
  constructor(private readonly d: DomainDeps, private readonly collections: Collections) {}

  /** Runs one statement as `p` in `systemKey`: a SELECT's rows, or a write's row count. */
  async run(p: Principal, systemKey: string, sql: unknown, params: unknown[]): Promise<{ rows: Record<string, unknown>[]; count: number }> {
    const s = await this.prepare(p, systemKey, sql, params);
    if (s.kind === "select") {
      try {
        const rows = await collectionSqlRepo.read(this.d.db, s.text, s.args);
        return { rows, count: rows.length };
      } catch (e) { throw sqlError(e, s.names); }
    }
    const [ids] = await this.writeAll([s]);
    return { rows: [], count: ids!.length };
  }

  /** Runs statements as one: every one is checked (and its rights asked) before any runs, and
   *  they are written together or not at all (Database().transaction on the system's collections). */
  async transaction(p: Principal, systemKey: string, statements: { sql: unknown; params: unknown[] }[]): Promise<void> {
    if (statements.length === 0 || statements.length > TRANSACTION_MAX) throw dataError(`a transaction has 1 to ${TRANSACTION_MAX} statements`);
    const prepared: Prepared[] = [];
    for (const st of statements) prepared.push(await this.prepare(p, systemKey, st.sql, st.params));
    await this.writeAll(prepared);
  }

  private async prepare(p: Principal, systemKey: string, sql: unknown, params: unknown[]): Promise<Prepared> {
    await loadSqlParser();
    const st = checkStatement(sql);
    const args = argsOf(params, st.params);
    const byName = new Map<string, Collection>();
    for (const name of new Set([...st.reads, ...(st.target === null ? [] : [st.target])])) {
      const c = await this.collections.byNameFor(p, systemKey, name);
      if (c.row.connection !== null) throw dataError(`collection '${name}' is a database connection: use Database({externalDBName}) for its database`);
      byName.set(name, c);
    }
    for (const name of st.reads) await this.d.perms.require(p, resourceOf(byName.get(name)!), LEVEL.READ);
    if (st.kind !== "select") await this.d.perms.require(p, resourceOf(byName.get(st.target!)!), WRITE_LEVEL[st.kind]);
    if (st.kind === "insert") {
      const c = byName.get(st.target!)!;
      for (const col of st.columns) if (!c.types.has(col)) throw dataError(`unknown column '${col}' in collection '${c.row.name}'`);
    }
    return {
      kind: st.kind, text: st.write((name) => tableOf(byName.get(name)!.row.collection_id), newTimeUuid), args,
      target: st.target === null ? null : byName.get(st.target)!, source: sql as string,
      names: new Map([...byName.values()].map((c) => [c.row.collection_id, c.row.name])),
    };
  }

  /** Runs the statements in one transaction, each write's rows stamped and logged for edge sync;
   *  then, once it committed, their item events. The ids each wrote (none for a SELECT). */
  private async writeAll(list: Prepared[]): Promise<string[][]> {
    const clock = this.d.changes.clock;
    let written: string[][] = [];
    try {
      written = await this.d.db.tx(async (tx) => {
        const out: string[][] = [];
        for (const s of list) {
          if (s.kind === "select") { await collectionSqlRepo.read(tx, s.text, s.args); out.push([]); continue; }
          const c = s.target!, hlc = clock.now();
          const rows = await collectionSqlRepo.write(tx, s.text, s.args);
          const ids = rows.map((r) => r.item_id);
          if (s.kind === "delete") {
            // the delete must be later than every row it removes, or sync would bring them back
            const stamp = rows.reduce<string | null>((m, r) => (r._hlc !== null && (m === null || r._hlc > m) ? r._hlc : m), null);
            let at = hlc;
            if (stamp !== null && stamp >= hlc) { clock.restore(stamp); at = clock.now(); }
            await this.collections.logRows(tx, c, ids, "delete", at);
          } else {
            // a row stored with a later stamp than the clock's got the next one after it
            clock.restore(await collectionsRepo.restamp(tx, c.row.collection_id, ids, hlc));
            await this.collections.logRows(tx, c, ids, "upsert", hlc);
          }
          out.push(ids);
        }
        return out;
      });
    } catch (e) {
      throw sqlError(e, new Map(list.flatMap((s) => [...s.names])));
    } finally {
      // a failed write must not leave a stale result either (as upsert does)
      list.forEach((s, i) => {
        if (s.kind === "select") return;
        const n = written[i]?.length ?? 0;
        this.collections.written(s.target!.row.collection_id, s.kind === "insert" ? n : s.kind === "delete" ? -n : 0);
      });
    }
    list.forEach((s, i) => {
      const ids = written[i]!;
      if (s.kind === "select" || !ids.length) return;
      const c = s.target!;
      const base = { collectionId: c.row.collection_id, collectionName: c.row.name, items: ids.map((item_id) => ({ item_id })) };
      // the query of an event from a statement is the statement itself
      if (s.kind === "insert") this.d.events.emit("Data::ItemCreated", c.row.system_key, base);
      else this.d.events.emit(s.kind === "update" ? "Data::ItemUpdated" : "Data::ItemDeleted", c.row.system_key, { ...base, query: s.source });
    });
    return written;
  }
}
