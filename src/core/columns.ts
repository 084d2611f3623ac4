// Column types shared by collections, users, devices and edges: one place that decides what a
// value of a type looks like on the wire and in SQLite, and rejects what does not fit.
import { ApiError, ErrorKinds } from "./errors.ts";

export const COLUMN_TYPES = ["string", "int", "bigint", "float", "double", "bool", "timestamp", "jsonb", "blob", "uuid"] as const;
export type ColumnType = (typeof COLUMN_TYPES)[number];

/** Names accepted from clients for each type (ClearBlade consoles send a few spellings). */
const TYPE_ALIASES: Record<string, ColumnType> = {
  string: "string", text: "string", varchar: "string",
  int: "int", integer: "int", bigint: "bigint",
  float: "float", double: "double", number: "double",
  bool: "bool", boolean: "bool",
  timestamp: "timestamp", timestamptz: "timestamp", datetime: "timestamp",
  jsonb: "jsonb", json: "jsonb", object: "jsonb",
  blob: "blob", bytea: "blob", uuid: "uuid",
};

export function parseColumnType(t: unknown, column: string): ColumnType {
  const ct = typeof t === "string" && Object.hasOwn(TYPE_ALIASES, t.toLowerCase()) ? TYPE_ALIASES[t.toLowerCase()] : undefined;
  if (!ct) throw new ApiError("INVALID_ARGUMENT", `column '${column}': unknown type '${String(t)}' (one of ${COLUMN_TYPES.join(", ")})`);
  return ct;
}

/** SQLite storage class for a column type. */
export function sqlType(t: ColumnType): string {
  switch (t) {
    case "int": case "bigint": case "bool": return "INTEGER";
    case "float": case "double": return "REAL";
    case "blob": return "BLOB";
    default: return "TEXT";
  }
}

/** Identifiers that may become SQL identifiers (always quoted as well). */
const NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
export function checkName(name: unknown, what: string): string {
  if (typeof name !== "string" || !NAME_RE.test(name))
    throw new ApiError("INVALID_ARGUMENT", `invalid ${what} name '${String(name)}': use letters, digits and _ (max 63), starting with a letter or _`);
  return name;
}

/** Quote an identifier that already passed checkName (or comes from our own schema). */
export const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const badValue = (column: string, type: ColumnType, v: unknown) =>
  new ApiError({ ...ErrorKinds.INVALID_ARGUMENT, category: "Data" },
    `column '${column}' expects ${type}, got ${v === null ? "null" : Array.isArray(v) ? "array" : typeof v}${typeof v === "string" || typeof v === "number" ? ` (${JSON.stringify(v).slice(0, 40)})` : ""}`);

/** Wire value -> SQLite value. Throws a 400 naming the column when the value does not fit. */
export function toSql(type: ColumnType, v: unknown, column: string): string | number | bigint | Uint8Array | null {
  if (v === null || v === undefined) return null;
  switch (type) {
    case "string":
      if (typeof v === "string") return v;
      throw badValue(column, type, v);
    case "uuid":
      if (typeof v === "string" && UUID_RE.test(v)) return v.toLowerCase();
      throw badValue(column, type, v);
    case "int":
    case "bigint":
      // numbers beyond 2^53 are not exact in JSON; such values must come as digit strings
      if (typeof v === "number" && Number.isSafeInteger(v)) return v;
      if (typeof v === "string" && /^-?\d{1,19}$/.test(v)) {
        const b = BigInt(v);
        if (b >= -(2n ** 63n) && b < 2n ** 63n) return Number.isSafeInteger(Number(b)) ? Number(b) : b;
      }
      throw badValue(column, type, v);
    case "float":
    case "double":
      if (typeof v === "number" && Number.isFinite(v)) return v;
      throw badValue(column, type, v);
    case "bool":
      if (typeof v === "boolean") return v ? 1 : 0;
      if (v === "true") return 1;
      if (v === "false") return 0;
      throw badValue(column, type, v);
    case "timestamp": {
      if (typeof v === "number" && Number.isFinite(v)) return new Date(v > 1e11 ? v : v * 1000).toISOString();
      if (typeof v === "string") {
        const m = /^(\d{4})-(\d{2})-(\d{2})/.exec(v);
        const ms = Date.parse(v);
        // Date.parse rolls impossible days over (Feb 30 -> Mar 1): check the calendar date itself
        if (m && !Number.isNaN(ms)) {
          const day = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!));
          if (day.getUTCFullYear() === +m[1]! && day.getUTCMonth() === +m[2]! - 1 && day.getUTCDate() === +m[3]!) return new Date(ms).toISOString();
        }
      }
      throw badValue(column, type, v);
    }
    case "jsonb":
      return JSON.stringify(v);
    case "blob":
      if (typeof v === "string" && /^[A-Za-z0-9+/]*={0,2}$/.test(v) && v.length % 4 === 0) return Buffer.from(v, "base64");
      throw badValue(column, type, v);
  }
}

/** SQLite value -> wire value. */
export function fromSql(type: ColumnType, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  switch (type) {
    case "bool": return v === 1 || v === 1n || v === true;
    case "jsonb":
      if (typeof v !== "string") return v;
      try { return JSON.parse(v); } catch { return v; }
    case "blob":
      if (v instanceof Uint8Array || v instanceof ArrayBuffer) return Buffer.from(v as Uint8Array).toString("base64");
      return v;
    case "int": case "bigint":
      return typeof v === "bigint" ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v;
    default: return v;
  }
}

/** A value checked against its type, in the form kept inside a JSON document (custom columns of
 *  users, devices and edges): booleans stay booleans, blobs stay base64, timestamps ISO text. */
export function toJsonValue(type: ColumnType, v: unknown, column: string): unknown {
  const s = toSql(type, v, column);
  if (s === null) return null;
  switch (type) {
    case "bool": return s === 1;
    case "blob": return v;
    case "jsonb": return v;
    case "int": case "bigint": return typeof s === "bigint" ? s.toString() : s;
    default: return s;
  }
}
