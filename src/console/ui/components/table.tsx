// A table that stays readable on a phone: below 640 px each row becomes a stacked card whose
// cells carry their column's name (data-label, shown by the stylesheet); wider, it scrolls inside
// its own box rather than widening the page. Rows are keyed: a row whose record did not change
// keeps its element, so a click on its link or button is not lost to a refresh.
import type { ComponentChildren } from "preact";

export interface Column<R> {
  label: string;
  /** the cell's class (num: numbers, right-aligned) */
  cls?: string;
  cell: (row: R) => ComponentChildren;
  /** a sortable column's field, as the API sorts by it */
  sort?: string;
}

export interface Sorting { field: string; desc: boolean }

export function DataTable<R>({ id, columns, rows, rowKey, rowAttrs, sorting, onSort, caption }: {
  id?: string; columns: Column<R>[]; rows: R[]; rowKey: (r: R) => string;
  rowAttrs?: (r: R) => Record<string, string>; sorting?: Sorting; onSort?: (s: Sorting) => void; caption?: string;
}) {
  const head = (c: Column<R>) => {
    if (!c.sort || !onSort) return <th key={c.label} class={c.cls} scope="col">{c.label}</th>;
    const on = sorting?.field === c.sort;
    const aria = on ? (sorting!.desc ? "descending" : "ascending") : "none";
    return <th key={c.label} class={c.cls} scope="col" aria-sort={aria}>
      <button type="button" class="sort" onClick={() => onSort({ field: c.sort!, desc: on ? !sorting!.desc : false })}>
        {c.label}<span aria-hidden="true">{on ? (sorting!.desc ? " ▼" : " ▲") : ""}</span>
      </button>
    </th>;
  };
  return <div class="table-box">
    <table id={id} class="stack">
      {caption ? <caption class="sr-only">{caption}</caption> : null}
      <thead><tr>{columns.map(head)}</tr></thead>
      <tbody>
        {rows.length ? rows.map((r) => <tr key={rowKey(r)} {...rowAttrs?.(r)}>
          {columns.map((c) => <td key={c.label} class={c.cls} data-label={c.label}>{c.cell(r)}</td>)}
        </tr>) : <tr><td colSpan={columns.length} class="muted">nothing to show</td></tr>}
      </tbody>
    </table>
  </div>;
}
