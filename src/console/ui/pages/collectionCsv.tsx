// A collection's rows as CSV, both ways, through the public data API. Export pages through every
// row (item_id first, then the columns). Import reads a CSV whose header names the collection's
// columns (item_id, if present, is left out: the rows are new), checks each cell against its
// column's type, and adds the rows in batches; a batch the API refuses is sent again row by row,
// so each refused row is reported with its line and the API's reason while the others go in.
import { useState } from "preact/hooks";
import { api, enc, queryParam } from "../api.ts";
import { download } from "../bytes.ts";
import { ErrorBox } from "../components/bits.tsx";
import { DataTable } from "../components/table.tsx";
import { csvText, parseCsv, toCsv } from "../csv.ts";
import { parseCell } from "./collections.tsx";

interface ColumnInfo { ColumnName: string; ColumnType: string }
interface Refusal { line: number; reason: string }

const BATCH = 100;
const EXPORT_PAGE = 500;

export function CollectionCsv({ id, name, columns, onImported }: { id: string; name: string; columns: ColumnInfo[]; onImported: () => void }) {
  const [file, setFile] = useState<File>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [progress, setProgress] = useState("");
  const [refused, setRefused] = useState<Refusal[]>([]);
  const names = columns.map((c) => c.ColumnName);

  const exportCsv = async () => {
    setBusy(true);
    try {
      const lines = [["item_id", ...names]];
      for (let page = 1; ; page++) {
        const r = await api<{ DATA: Record<string, unknown>[]; TOTAL: number }>("GET", `/api/v/1/data/${enc(id)}?${queryParam({ sort: ["item_id", "ASC"], pageSize: EXPORT_PAGE, page })}`);
        for (const row of r.DATA) lines.push([csvText(row.item_id), ...names.map((n) => csvText(row[n]))]);
        if (r.DATA.length < EXPORT_PAGE || lines.length - 1 >= r.TOTAL) break;
      }
      download(`${name}.csv`, new Blob([toCsv(lines)], { type: "text/csv" }));
      setProgress(`exported ${lines.length - 1} rows`);
      setError(undefined);
    } catch (e) { setError(e); } finally { setBusy(false); }
  };

  const importCsv = async (e: Event) => {
    e.preventDefault();
    if (!file) { setError(new Error("choose a CSV file to import")); return; }
    setBusy(true); setRefused([]); setError(undefined);
    try {
      const [head, ...lines] = parseCsv(await file.text());
      if (!head) throw new Error("the file is empty");
      const unknown = head.filter((h) => h !== "item_id" && !names.includes(h));
      if (unknown.length) throw new Error(`the header names columns the collection does not have: ${unknown.join(", ")}`);
      const bad: Refusal[] = [];
      const rows: { line: number; row: Record<string, unknown> }[] = [];
      lines.forEach((cells, i) => {
        const line = i + 2;
        if (cells.length !== head.length) { bad.push({ line, reason: `${cells.length} fields where the header has ${head.length}` }); return; }
        try {
          const row: Record<string, unknown> = {};
          head.forEach((h, j) => {
            if (h === "item_id" || cells[j] === "") return;
            const type = columns.find((c) => c.ColumnName === h)!.ColumnType;
            try { row[h] = parseCell(cells[j]!, type); } catch (err) { throw new Error(`${h}: ${err instanceof Error ? err.message : String(err)}`); }
          });
          rows.push({ line, row });
        } catch (err) { bad.push({ line, reason: err instanceof Error ? err.message : String(err) }); }
      });
      let added = 0;
      for (let i = 0; i < rows.length; i += BATCH) {
        const batch = rows.slice(i, i + BATCH);
        setProgress(`importing: ${i} of ${rows.length} rows sent`);
        try { await api("POST", `/api/v/1/data/${enc(id)}`, batch.map((r) => r.row)); added += batch.length; }
        catch {
          // which rows: one at a time, each refusal with its reason
          for (const r of batch) {
            try { await api("POST", `/api/v/1/data/${enc(id)}`, r.row); added++; } catch (err) { bad.push({ line: r.line, reason: err instanceof Error ? err.message : String(err) }); }
          }
        }
      }
      bad.sort((a, b) => a.line - b.line);
      setRefused(bad);
      setProgress(`imported ${added} of ${lines.length} rows${bad.length ? `; ${bad.length} refused` : ""}`);
      if (added) onImported();
    } catch (err) { setError(err); setProgress(""); } finally { setBusy(false); }
  };

  return <section class="card" id="csv" aria-labelledby="csv-title">
    <h3 id="csv-title">CSV</h3>
    <div class="row">
      <button type="button" id="export-csv" disabled={busy} onClick={() => void exportCsv()}>Export rows as CSV</button>
    </div>
    <form id="import-csv" class="row" onSubmit={importCsv} noValidate>
      <label>CSV file to import <input type="file" id="import-csv-file" accept=".csv,text/csv" onChange={(e) => setFile(e.currentTarget.files?.[0])} /></label>
      <button type="submit" disabled={busy}>Import rows</button>
    </form>
    <p class="muted">The header names columns; item_id is left out on import (the rows are added as new ones).</p>
    <ErrorBox error={error} />
    {progress ? <p id="csv-progress" role="status">{progress}</p> : null}
    {refused.length ? <DataTable<Refusal> id="csv-refused" caption="Rows refused" rows={refused} rowKey={(r) => String(r.line)} rowAttrs={(r) => ({ "data-line": String(r.line) })}
      columns={[{ label: "Line", cls: "num", cell: (r) => r.line }, { label: "Reason", cell: (r) => <span class="err">{r.reason}</span> }]} /> : null}
  </section>;
}
