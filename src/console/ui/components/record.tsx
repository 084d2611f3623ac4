// Pieces of a user's or a device's page: its custom columns as form fields of their types, and
// the roles it holds (assigned and removed one at a time).
import { useState } from "preact/hooks";
import { DataTable } from "./table.tsx";
import { ErrorBox } from "./bits.tsx";
import type { Field } from "./form.tsx";

/** A column as `GET .../columns` lists it (the built-in ones have UserDefined false). */
export interface ColumnInfo { ColumnName: string; ColumnType: string; UserDefined?: boolean }
export interface RoleInfo { ID: string; Name: string; Description?: string }

const NUMBER_TYPES = ["int", "bigint", "float", "double"];

/** A value as a form holds it: text ("true"/"false" for a checkbox). */
export const valueText = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

/** A column's field: a checkbox for a bool, a number box for numbers, a text area for JSON. */
export function columnField(c: ColumnInfo, record: Record<string, unknown>): Field {
  const type = c.ColumnType === "bool" ? "checkbox" : NUMBER_TYPES.includes(c.ColumnType) ? "number" : c.ColumnType === "jsonb" ? "textarea" : "text";
  const v = record[c.ColumnName];
  return { name: c.ColumnName, label: `${c.ColumnName} (${c.ColumnType})`, type, value: type === "checkbox" ? String(v === true) : valueText(v) };
}

/** The form's text back as the column's type takes it; "" is null. */
export function columnValue(text: string, c: ColumnInfo): unknown {
  if (c.ColumnType === "bool") return text === "true";
  if (text === "") return null;
  if (NUMBER_TYPES.includes(c.ColumnType)) {
    const n = Number(text);
    if (!Number.isFinite(n)) throw new Error(`${c.ColumnName}: "${text}" is not a number`);
    return n;
  }
  if (c.ColumnType === "jsonb") {
    try { return JSON.parse(text); } catch { throw new Error(`${c.ColumnName}: not JSON`); }
  }
  return text;
}

/** Only what the form changed, in each column's type (a form sends no column it left alone). */
export function changedColumns(cols: ColumnInfo[], values: Record<string, string>, record: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of cols) {
    const before = columnField(c, record).value ?? "";
    const now = values[c.ColumnName] ?? before;
    if (now !== before) out[c.ColumnName] = columnValue(now, c);
  }
  return out;
}

/** The roles a user or device holds, a Remove per role and a picker of the others. `change`
 *  sends one addition or removal to the API; the page reloads what it holds after. */
export function RoleMembership({ id, who, held, all, change }: {
  id: string; who: string; held: RoleInfo[]; all: RoleInfo[];
  change: (c: { add?: string[]; delete?: string[] }) => Promise<void>;
}) {
  const others = all.filter((r) => !held.some((h) => h.ID === r.ID));
  const [pick, setPick] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const send = async (c: { add?: string[]; delete?: string[] }) => {
    setBusy(true);
    try { await change(c); setError(undefined); } catch (e) { setError(e); } finally { setBusy(false); }
  };
  const chosen = others.some((r) => r.ID === pick) ? pick : (others[0]?.ID ?? "");
  return <div id={id}>
    <DataTable<RoleInfo> id={`${id}-table`} caption={`Roles of ${who}`} rows={held} rowKey={(r) => r.ID} rowAttrs={(r) => ({ "data-role": r.Name })}
      columns={[
        { label: "Role", cell: (r) => r.Name },
        { label: "Description", cell: (r) => r.Description || "–" },
        { label: "Actions", cell: (r) => <button type="button" class="remove" aria-label={`Remove role ${r.Name} from ${who}`} disabled={busy}
            onClick={() => void send({ delete: [r.ID] })}>Remove</button> },
      ]} />
    <form class="row" id={`${id}-add`} onSubmit={(e) => { e.preventDefault(); if (chosen) void send({ add: [chosen] }); }}>
      <label>Role to assign <select id={`${id}-pick`} value={chosen} disabled={!others.length} onChange={(e) => setPick(e.currentTarget.value)}>
        {others.map((r) => <option key={r.ID} value={r.ID}>{r.Name}</option>)}
      </select></label>
      <button type="submit" class="primary" disabled={busy || !chosen}>Assign role</button>
    </form>
    <ErrorBox error={error} />
  </div>;
}
