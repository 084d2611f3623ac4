// A list of records with server-side search, sort and paging: the page asks `load` for one page
// of what matches, and the server answers the page and how many match in all.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { ErrorBox, useLoad } from "./bits.tsx";
import { type Column, DataTable, type Sorting } from "./table.tsx";

export interface ListQuery { search: string; sorting: Sorting; page: number; pageSize: number }
export interface ListPage<R> { rows: R[]; total: number }

export function ListView<R>({ id, label, columns, rowKey, rowAttrs, load, initialSort, pageSize = 25, filters, reloadKey }: {
  id: string; label: string; columns: Column<R>[]; rowKey: (r: R) => string; rowAttrs?: (r: R) => Record<string, string>;
  load: (q: ListQuery) => Promise<ListPage<R>>; initialSort: Sorting; pageSize?: number;
  /** more filters, shown beside the search box */
  filters?: ComponentChildren;
  /** a change reloads the list (a record added or removed elsewhere on the page) */
  reloadKey?: unknown;
}) {
  const [search, setSearch] = useState("");
  const [typed, setTyped] = useState("");
  const [sorting, setSorting] = useState(initialSort);
  const [page, setPage] = useState(1);
  const { data, error } = useLoad(() => load({ search, sorting, page, pageSize }), [search, sorting.field, sorting.desc, page, reloadKey]);
  const pages = data ? Math.max(1, Math.ceil(data.total / pageSize)) : 1;
  return <section class="list" aria-label={label}>
    <form class="row" role="search" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(typed.trim()); }}>
      <label>Search {label.toLowerCase()} <input type="search" id={`${id}-search`} value={typed} onInput={(e) => setTyped(e.currentTarget.value)} /></label>
      <button type="submit">Search</button>
      {filters}
    </form>
    <ErrorBox error={error} />
    <DataTable id={id} caption={label} columns={columns} rows={data?.rows ?? []} rowKey={rowKey} rowAttrs={rowAttrs} sorting={sorting}
      onSort={(s) => { setPage(1); setSorting(s); }} />
    <Pager id={id} page={page} pages={pages} total={data?.total} onPage={setPage} />
  </section>;
}

export function Pager({ id, page, pages, total, onPage }: { id: string; page: number; pages: number; total?: number; onPage: (p: number) => void }) {
  return <nav class="row pager" aria-label="Pages">
    <button type="button" id={`${id}-prev`} disabled={page <= 1} onClick={() => onPage(page - 1)}>Previous page</button>
    <span id={`${id}-page`} aria-live="polite">page {page} of {pages}{total !== undefined ? ` · ${total} in all` : ""}</span>
    <button type="button" id={`${id}-next`} disabled={page >= pages} onClick={() => onPage(page + 1)}>Next page</button>
  </nav>;
}

/** One page of an answer the API gives whole (a list without paging of its own), searched and
 *  sorted here. */
export function pageOf<R>(all: R[], q: ListQuery, text: (r: R) => string, field: (r: R, f: string) => string | number): ListPage<R> {
  const s = q.search.toLowerCase();
  const hits = s ? all.filter((r) => text(r).toLowerCase().includes(s)) : all.slice();
  hits.sort((a, b) => {
    const x = field(a, q.sorting.field), y = field(b, q.sorting.field);
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return q.sorting.desc ? -c : c;
  });
  return { rows: hits.slice((q.page - 1) * q.pageSize, q.page * q.pageSize), total: hits.length };
}
