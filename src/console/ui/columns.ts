// A user's or a device's custom columns as form fields of their types, and the form's text back as
// the API takes each type (pure: no browser state, unit-tested).

/** A form field (components/form.tsx's Field) for a column. */
export interface ColumnFieldSpec { name: string; label: string; type: "checkbox" | "number" | "textarea" | "text"; value: string }

/** A column as `GET .../columns` lists it (the built-in ones have UserDefined false). */
export interface ColumnInfo { ColumnName: string; ColumnType: string; UserDefined?: boolean }

const NUMBER_TYPES = ["int", "bigint", "float", "double"];

/** A value as a form holds it: text ("true"/"false" for a checkbox). */
export const valueText = (v: unknown) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

/** A column's field: a checkbox for a bool, a number box for numbers, a text area for JSON. */
export function columnField(c: ColumnInfo, record: Record<string, unknown>): ColumnFieldSpec {
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
    const before = columnField(c, record).value;
    const now = values[c.ColumnName] ?? before;
    if (now !== before) out[c.ColumnName] = columnValue(now, c);
  }
  return out;
}
