// The schema of a table with fixed columns plus developer-defined custom columns whose values
// live in each row's `data` JSON document: users, devices and edges share it.
import { type ColumnType, checkName, fromSql, parseColumnType, toJsonValue } from "../core/columns.ts";
import { TtlCache } from "../core/cache.ts";
import { ApiError, fail } from "../core/errors.ts";
import type { ColumnMap, Query } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import { type CustomTable, customColumnMap, customColumnsRepo } from "../store/customColumns.ts";
import type { Db, Executor } from "../store/db.ts";

const ADD_FIELDS = new Set(["column_name", "name", "type"]);

export interface CustomSchema {
  /** every queryable column, for the repository's queries */
  map: ColumnMap;
  /** the columns kept in the data document (standard ones first, then the developer's) */
  custom: Record<string, ColumnType>;
  /** the same as pairs, made once: every row on the wire walks them */
  customList: [string, ColumnType][];
}

const SCHEMA_CACHE_MS = 5_000;

export class CustomColumns {
  private readonly cache = new TtlCache<string, CustomSchema>(SCHEMA_CACHE_MS, 1_000);
  private readonly reserved: Set<string>;
  private readonly unlisted: Set<string>;

  /**
   * @param fixed    real table columns (the repository's column map)
   * @param standard columns every row has, kept in the data document
   * @param reserved names that may not become custom columns besides those two
   * @param unlisted built-in columns that are a row's settings or its record's fields rather than
   *                 its data: left out of the column listing, as ClearBlade's exports leave them
   *                 out (cb-cli would take them for columns of the developer's and delete them)
   */
  constructor(
    private readonly db: Db,
    readonly table: CustomTable,
    private readonly fixed: ColumnMap,
    private readonly standard: Record<string, ColumnType>,
    reserved: string[] = [],
    private readonly pk = "",
    unlisted: string[] = [],
  ) {
    this.reserved = new Set([...reserved, ...Object.keys(fixed), ...Object.keys(standard)]);
    this.unlisted = new Set(unlisted);
  }

  async schema(ex: Executor, systemKey: string): Promise<CustomSchema> {
    // inside a transaction read fresh: the schema may be changing in it
    if (ex !== this.db) return this.load(ex, systemKey);
    return this.cache.get(systemKey) ?? (await this.cache.getOr(systemKey, () => this.load(ex, systemKey)))!;
  }

  /** The cached schema, without waiting, or undefined. */
  schemaNow(systemKey: string): CustomSchema | undefined { return this.cache.get(systemKey); }

  private async load(ex: Executor, systemKey: string): Promise<CustomSchema> {
    // keyed by names from requests: no prototype, so 'constructor' or '__proto__' is no column
    const custom: Record<string, ColumnType> = Object.assign(Object.create(null), this.standard);
    for (const c of await customColumnsRepo.list(ex, systemKey, this.table)) custom[c.name] = c.type;
    return { map: customColumnMap(ex.dialect, this.fixed, custom), custom, customList: Object.entries(custom) };
  }

  /** Checks custom column values; unknown keys are a 400 naming them. Returns the updated document. */
  values(schema: CustomSchema, input: Record<string, unknown>, data: Record<string, unknown> = {}): Record<string, unknown> {
    for (const [k, v] of Object.entries(input)) {
      const t = schema.custom[k];
      if (!t) throw fail("INVALID_ARGUMENT", `unknown ${this.table.slice(0, -1)} column '${k}'`);
      data[k] = toJsonValue(t, v, k);
    }
    return data;
  }

  /** The custom part of a row on the wire (absent values are null). */
  wire(schema: CustomSchema, dataJson: string, out: Record<string, unknown>): Record<string, unknown> {
    const data = JSON.parse(dataJson) as Record<string, unknown>;
    for (const [n, t] of schema.customList) out[n] = n in data ? fromSql(t, data[n]) : null;
    return out;
  }

  /** Rows on the wire cut to the query's SELECTCOLUMNS (each a known column), or as they are. */
  selected<T extends Record<string, unknown>>(schema: CustomSchema, q: Query, rows: T[]): Record<string, unknown>[] {
    if (!q.select) return rows;
    for (const c of q.select) if (!schema.map[c]) throw fail("BAD_QUERY", `unknown column '${c}'`);
    return rows.map((r) => Object.fromEntries(q.select!.map((c) => [c, r[c]])));
  }

  /** The type of a fixed or standard column. */
  private builtinType(name: string): ColumnType | undefined {
    if (Object.hasOwn(this.fixed, name)) return this.fixed[name]!.type;
    return Object.hasOwn(this.standard, name) ? this.standard[name] : undefined;
  }

  /** `[{ColumnName, ColumnType, PK, UserDefined}]` */
  async list(systemKey: string) {
    const s = await this.schema(this.db, systemKey);
    const builtins = new Set([...Object.keys(this.fixed), ...Object.keys(this.standard)]);
    return [...Object.entries(this.fixed).map(([n, f]) => [n, f.type] as const), ...Object.entries(s.custom)]
      .filter(([n]) => !this.unlisted.has(n))
      .map(([n, t]) => ({ ColumnName: n, ColumnType: t, PK: n === this.pk, UserDefined: !builtins.has(n) }));
  }

  /** `{column_name, type}` (also `name`). A built-in column asked for with its own type exists as
   *  asked: nothing to do (a system exported elsewhere may list it among its columns, and an import
   *  creates every one of those). */
  async add(systemKey: string, body: unknown) {
    const b = objectBody(body);
    knownFields(b, ADD_FIELDS);
    const name = checkName(b.column_name ?? b.name, "column");
    const type = parseColumnType(b.type, name);
    if (this.builtinType(name) === type) return;
    if (this.reserved.has(name)) throw fail("ALREADY_EXISTS", `column '${name}' is a built-in column`);
    await this.db.tx(async (tx) => {
      if ((await customColumnsRepo.list(tx, systemKey, this.table)).some((c) => c.name === name)) throw fail("ALREADY_EXISTS", `column '${name}' already exists`);
      await customColumnsRepo.add(tx, systemKey, this.table, name, type);
    });
    this.cache.delete(systemKey);
  }

  /** Removes a column; `dropValues` clears its values from the rows in the same transaction. */
  async remove(systemKey: string, name: string | null, dropValues: (tx: Executor, name: string) => Promise<unknown>) {
    if (!name) throw fail("INVALID_ARGUMENT", "column: the column name is required");
    if (this.reserved.has(name)) throw fail("INVALID_ARGUMENT", `column '${name}' is a built-in column and cannot be deleted`);
    await this.db.tx(async (tx) => {
      if (!(await customColumnsRepo.list(tx, systemKey, this.table)).some((c) => c.name === name))
        throw new ApiError("NOT_FOUND", `column '${name}' does not exist`);
      await customColumnsRepo.remove(tx, systemKey, this.table, name);
      await dropValues(tx, name);
    });
    this.cache.delete(systemKey);
  }
}
