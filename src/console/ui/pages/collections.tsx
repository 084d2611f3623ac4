// A system's collections: the list (create, delete), and one collection's schema (add a column)
// and rows: a grid with the query language's filters, server-side sort and paging, inline edit.
import { useState } from "preact/hooks";
import { api, caselessPattern, enc, queryParam } from "../api.ts";
import { ErrorBox, Tabs, useLoad } from "../components/bits.tsx";
import { Form } from "../components/form.tsx";
import { ListView, pageOf } from "../components/list.tsx";
import { DataTable } from "../components/table.tsx";
import { CollectionCsv } from "./collectionCsv.tsx";
import { OwnedCell, OwnedNote, usePlatformOwned, useRowsOwned } from "../components/owned.tsx";
import { href } from "../router.ts";
import { useSystemName, useSystemTrail } from "../trail.ts";

interface Collection { collectionID: string; name: string; count?: number }
interface ColumnInfo { ColumnName: string; ColumnType: string }
type Row = Record<string, unknown> & { item_id: string };

const TYPES = ["string", "int", "float", "bool", "timestamp", "bigint", "double", "jsonb"];
const OPS = [["EQ", "="], ["NEQ", "≠"], ["GT", ">"], ["GTE", "≥"], ["LT", "<"], ["LTE", "≤"], ["RE", "matches"]] as const;

export function Collections({ systemKey: sk, id }: { systemKey: string; id?: string }) {
  const name = useSystemName(sk);
  const list = useLoad(() => api<Collection[]>("GET", `/admin/allcollections?appid=${enc(sk)}`), [sk]);
  const current = id ? list.data?.find((c) => c.collectionID === id) : undefined;
  useSystemTrail(sk, name, ["Collections", href("s", sk, "collections")], ...(id ? [[current?.name ?? id, href("s", sk, "collections", id)] as [string, string]] : []));
  return <>
    <h1>{name}</h1>
    <Tabs systemKey={sk} on="Collections" />
    {id ? <CollectionDetail id={id} name={current?.name ?? id} /> : <CollectionList systemKey={sk} reload={list.reload} />}
  </>;
}

function CollectionList({ systemKey: sk, reload }: { systemKey: string; reload: () => Promise<void> }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<unknown>();
  const owned = usePlatformOwned("collection");
  const changed = async () => { setVersion((n) => n + 1); await reload(); };
  const remove = async (c: Collection) => {
    if (!confirm(`Delete the collection ${c.name} and its rows?`)) return;
    try { await api("DELETE", `/admin/collectionmanagement?id=${enc(c.collectionID)}`); await changed(); setError(undefined); } catch (e) { setError(e); }
  };
  return <>
    <h2>Collections</h2>
    <ErrorBox error={error} />
    <ListView<Collection> id="collections-table" label="Collections" reloadKey={version} initialSort={{ field: "name", desc: false }}
      load={async (q) => pageOf(await api<Collection[]>("GET", `/admin/allcollections?appid=${enc(sk)}`), q, (c) => c.name, (c, f) => String(c[f as keyof Collection] ?? ""))}
      rowKey={(c) => c.collectionID} rowAttrs={(c) => ({ "data-collection": c.name })}
      columns={[
        { label: "Name", sort: "name", cell: (c) => <a href={href("s", sk, "collections", c.collectionID)}>{c.name}</a> },
        { label: "Collection id", cell: (c) => <code>{c.collectionID}</code> },
        { label: "Actions", cell: (c) => (owned(c.name) ? <OwnedCell reason={owned(c.name)} />
          : <button type="button" class="danger" aria-label={`Delete collection ${c.name}`} onClick={() => void remove(c)}>Delete</button>) },
      ]} />
    <h2>New collection</h2>
    <Form id="new-collection" submit="Create collection" fields={[{ name: "name", label: "Name", required: true }]}
      onSubmit={async (v) => { await api("POST", "/admin/collectionmanagement", { name: v.name!.trim(), appID: sk }); await changed(); }} />
  </>;
}

/** A cell's text as the API takes it back for its column's type. */
export function parseCell(text: string, type: string): unknown {
  if (text === "") return null;
  if (["int", "bigint", "float", "double"].includes(type)) {
    const n = Number(text);
    if (!Number.isFinite(n)) throw new Error(`"${text}" is not a number`);
    return n;
  }
  if (type === "bool") return text === "true";
  if (type === "jsonb") return JSON.parse(text);
  return text;
}
const cellText = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

function CollectionDetail({ id, name }: { id: string; name: string }) {
  const cols = useLoad(() => api<ColumnInfo[]>("GET", `/api/v/1/data/${enc(id)}/columns`), [id]);
  const own = (cols.data ?? []).filter((c) => c.ColumnName !== "item_id");
  const [field, setField] = useState("");
  const [op, setOp] = useState("EQ");
  const [version, setVersion] = useState(0);
  const [editing, setEditing] = useState<{ row: string; col: string; text: string }>();
  const [error, setError] = useState<unknown>();
  // on an edge: the schema of a collection the platform sent is its own, and so are the rows of
  // one whose rows only come down
  const owned = usePlatformOwned("collection")(name);
  const rowsOwned = useRowsOwned(name);
  const typeOf = (c: string) => own.find((x) => x.ColumnName === c)?.ColumnType ?? "string";
  const save = async () => {
    if (!editing) return;
    try {
      await api("PUT", `/api/v/1/data/${enc(id)}`, { query: [[{ EQ: [{ item_id: editing.row }] }]], $set: { [editing.col]: parseCell(editing.text, typeOf(editing.col)) } });
      setEditing(undefined); setError(undefined); setVersion((n) => n + 1);
    } catch (e) { setError(e); }
  };
  const remove = async (r: Row) => {
    try { await api("DELETE", `/api/v/1/data/${enc(id)}?${queryParam({ filters: [{ EQ: [{ item_id: r.item_id }] }] })}`); setVersion((n) => n + 1); setError(undefined); } catch (e) { setError(e); }
  };
  const cell = (c: ColumnInfo) => (r: Row) => {
    if (rowsOwned) return cellText(r[c.ColumnName]) || "–";
    const on = editing?.row === r.item_id && editing.col === c.ColumnName;
    if (on) return <form class="inline" onSubmit={(e) => { e.preventDefault(); void save(); }}>
      <input aria-label={`${c.ColumnName} of row ${r.item_id}`} autoFocus value={editing.text} onInput={(e) => setEditing({ ...editing, text: e.currentTarget.value })}
        onKeyDown={(e) => { if (e.key === "Escape") setEditing(undefined); }} />
      <button type="submit">Save</button>
    </form>;
    return <button type="button" class="cell" aria-label={`Edit ${c.ColumnName} of row ${r.item_id}: ${cellText(r[c.ColumnName]) || "empty"}`}
      onClick={() => setEditing({ row: r.item_id, col: c.ColumnName, text: cellText(r[c.ColumnName]) })}>{cellText(r[c.ColumnName]) || "–"}</button>;
  };
  return <>
    <h2>Collection {name}</h2>
    <OwnedNote reason={owned ? `${owned}${rowsOwned ? " Its rows come down from the platform too." : " Its rows are this edge's to write."}` : ""} />
    <ErrorBox error={cols.error ?? error} />
    <h3>Schema</h3>
    <DataTable<ColumnInfo> id="columns-table" caption="Columns" rows={cols.data ?? []} rowKey={(c) => c.ColumnName} rowAttrs={(c) => ({ "data-column": c.ColumnName })}
      columns={[{ label: "Column", cell: (c) => c.ColumnName }, { label: "Type", cell: (c) => c.ColumnType }]} />
    {owned ? null : <Form id="new-column" cls="card form inline-form" submit="Add column" fields={[{ name: "name", label: "Column name", required: true }, { name: "type", label: "Type", type: "select", options: TYPES }]}
      onSubmit={async (v) => { await api("PUT", "/admin/collectionmanagement", { id, addColumn: { name: v.name!.trim(), type: v.type } }); await cols.reload(); }} />}
    <h3>Rows</h3>
    {cols.data ? <ListView<Row> id="rows-table" label="Rows" reloadKey={`${version}/${field}/${op}/${own.length}`} initialSort={{ field: "item_id", desc: false }}
      filters={<>
        <label>Where <select id="rows-filter-column" value={field} onChange={(e) => setField(e.currentTarget.value)}>
          <option value="">any column (text)</option>{own.map((c) => <option key={c.ColumnName} value={c.ColumnName}>{c.ColumnName}</option>)}</select></label>
        <label>is <select id="rows-filter-op" value={op} onChange={(e) => setOp(e.currentTarget.value)}>{OPS.map(([o, t]) => <option key={o} value={o}>{t}</option>)}</select></label>
      </>}
      load={async (q) => {
        const filters: Record<string, unknown>[] = [];
        if (q.search) {
          if (field) filters.push({ [op]: [{ [field]: op === "RE" ? q.search : parseCell(q.search, typeOf(field)) }] });
          else {
            // any string column containing the text: one group per column (OR)
            const strings = own.filter((c) => c.ColumnType === "string");
            const groups = strings.map((c) => [{ RE: [{ [c.ColumnName]: caselessPattern(q.search) }] }]);
            const r = await api<{ DATA: Row[]; TOTAL: number }>("GET", `/api/v/1/data/${enc(id)}?query=${enc(JSON.stringify({ FILTERS: groups, SORT: [{ [q.sorting.desc ? "DESC" : "ASC"]: q.sorting.field }], PAGESIZE: q.pageSize, PAGENUM: q.page }))}`);
            return { rows: r.DATA, total: r.TOTAL };
          }
        }
        const r = await api<{ DATA: Row[]; TOTAL: number }>("GET", `/api/v/1/data/${enc(id)}?${queryParam({ filters, sort: [q.sorting.field, q.sorting.desc ? "DESC" : "ASC"], pageSize: q.pageSize, page: q.page })}`);
        return { rows: r.DATA, total: r.TOTAL };
      }}
      rowKey={(r) => r.item_id} rowAttrs={(r) => ({ "data-item": r.item_id })}
      columns={[
        ...own.map((c) => ({ label: c.ColumnName, sort: c.ColumnName, cls: `col-${c.ColumnName}`, cell: cell(c) })),
        ...(rowsOwned ? [] : [{ label: "Actions", cell: (r: Row) => <button type="button" class="danger" aria-label={`Delete row ${r.item_id}`} onClick={() => void remove(r)}>Delete</button> }]),
      ]} /> : null}
    {own.length && !rowsOwned ? <CollectionCsv id={id} name={name} columns={own} onImported={() => setVersion((n) => n + 1)} /> : null}
    {own.length && !rowsOwned ? <>
      <h3>New row</h3>
      <Form id="new-row" submit="Add row" fields={own.map((c) => ({ name: c.ColumnName, label: `${c.ColumnName} (${c.ColumnType})` }))}
        onSubmit={async (v) => {
          const row: Record<string, unknown> = {};
          for (const c of own) if (v[c.ColumnName] !== "") row[c.ColumnName] = parseCell(v[c.ColumnName]!, c.ColumnType);
          await api("POST", `/api/v/1/data/${enc(id)}`, row);
          setVersion((n) => n + 1);
        }} />
    </> : null}
  </>;
}
