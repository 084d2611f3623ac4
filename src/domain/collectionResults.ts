// What a collection's fetches keep between requests: the last small result of each compiled query
// (the compiled queries themselves are kept by the collection's schema, Collection.compiled) and
// the TOTAL of a filter, both while the collection's write version is unchanged.
import type { LruMap } from "../core/cache.ts";
import type { ColumnMap, Condition, FetchResult } from "../core/query.ts";
import { collectionsRepo, type PreparedFetch } from "../store/collections.ts";
import type { DomainDeps } from "./deps.ts";

export interface CompiledFetch {
  prepared: PreparedFetch;
  /** The last result, valid while the collection's write version is unchanged. */
  result?: FetchResult & { version: number; at: number };
}
/** Results kept per compiled query: small pages only, and never older than this. */
const RESULT_MAX_ROWS = 100;
const RESULT_MAX_MS = 30_000;
/** Totals kept per collection and filter, while the collection's write version is unchanged. */
const TOTALS_MAX = 1_000;

export class CollectionResults {
  /** Write version per collection. Query results are reused while it is unchanged, which is exact
   *  only while this process is the database's one writer (DomainDeps.writerAloneSince): results
   *  and totals from before it became so are not reused. */
  private readonly versions = new Map<string, number>();
  /** TOTAL of a filter on a collection at a write version: a client paging through a large
   *  collection counts it once, not once per page. */
  private readonly totals = new Map<string, { version: number; n: number; at: number }>();

  constructor(private readonly d: DomainDeps) {}

  /** Whether a result taken at `at` may be reused. */
  reusable(at: number): boolean {
    const since = this.d.writerAloneSince();
    return since !== null && at >= since;
  }

  version(id: string) { return this.versions.get(id) ?? 0; }

  /** Makes the collection's kept results stale: a write (with the rows it `added` when known,
   *  so the TOTAL without a filter is carried over) or a schema change (`added` undefined). */
  bump(id: string, added: number | undefined) {
    const v = this.version(id);
    this.versions.set(id, v + 1);
    const all = added === undefined ? undefined : this.totals.get(totalKey(id, []));
    if (all && all.version === v) { all.version = v + 1; all.n += added!; }
  }

  /** The last result of a compiled query, if it may be answered again. */
  reused(id: string, f: CompiledFetch, now: number): CompiledFetch["result"] {
    const hit = f.result;
    return hit && hit.version === this.version(id) && now - hit.at < RESULT_MAX_MS && this.reusable(hit.at) ? hit : undefined;
  }

  /** Keeps a fetch's result for the next identical query when it is small and may be reused
   *  (`key`: the query's canonical form, which must still name `f` in the collection's cache). */
  keep(compiled: LruMap<string, CompiledFetch>, key: string, f: CompiledFetch, result: FetchResult & { version: number }, now: number) {
    if (result.rows.length <= RESULT_MAX_ROWS && compiled.peek(key) === f && this.reusable(now))
      f.result = { ...result, at: now };
  }

  /** The number of rows `filters` match, counted once per write version where results may be
   *  reused (this process is the database's one writer). */
  async total(id: string, map: ColumnMap, filters: Condition[][], version: number): Promise<number> {
    const key = totalKey(id, filters);
    const hit = this.totals.get(key);
    if (hit && hit.version === version && this.reusable(hit.at)) return hit.n;
    const at = Date.now();
    const n = await collectionsRepo.count(this.d.db, id, map, filters);
    if (!this.reusable(at)) return n;
    if (this.totals.size >= TOTALS_MAX) this.totals.clear();
    this.totals.set(key, { version, n, at });
    return n;
  }
}

/** Where a collection's TOTAL for a filter is kept (FILTERS as parsed: equal filters, one key). */
const totalKey = (id: string, filters: Condition[][]) => `${id}\u0000${JSON.stringify(filters)}`;
