import { describe, expect, test } from "bun:test";
import { changedColumns, type ColumnInfo, columnField, columnValue } from "../../../../src/console/ui/columns.ts";

const col = (ColumnName: string, ColumnType: string): ColumnInfo => ({ ColumnName, ColumnType, UserDefined: true });

describe("a custom column on a user's or a device's page", () => {
  test("its field fits its type: a checkbox for a bool, a number box for numbers, a text area for JSON", () => {
    const rec = { vip: true, floor: 3, meta: { a: 1 }, note: null };
    expect(columnField(col("vip", "bool"), rec)).toMatchObject({ type: "checkbox", value: "true", label: "vip (bool)" });
    expect(columnField(col("floor", "int"), rec)).toMatchObject({ type: "number", value: "3" });
    expect(columnField(col("meta", "jsonb"), rec)).toMatchObject({ type: "textarea", value: '{"a":1}' });
    expect(columnField(col("note", "string"), rec)).toMatchObject({ type: "text", value: "" });
    expect(columnField(col("vip", "bool"), {}).value).toBe("false");
  });

  test("the form's text goes back in the column's type; empty is null; a bad number or JSON is refused by name", () => {
    expect(columnValue("7", col("floor", "int"))).toBe(7);
    expect(columnValue("2.5", col("level", "double"))).toBe(2.5);
    expect(columnValue("", col("floor", "int"))).toBeNull();
    expect(columnValue("false", col("vip", "bool"))).toBe(false);
    expect(columnValue('{"a":2}', col("meta", "jsonb"))).toEqual({ a: 2 });
    expect(columnValue("B2", col("rack", "string"))).toBe("B2");
    expect(() => columnValue("seven", col("floor", "int"))).toThrow(/floor: "seven" is not a number/);
    expect(() => columnValue("{", col("meta", "jsonb"))).toThrow(/meta: not JSON/);
  });

  test("only what the form changed is sent", () => {
    const cols = [col("floor", "int"), col("vip", "bool"), col("rack", "string")];
    const rec = { floor: 3, vip: false, rack: "A1" };
    expect(changedColumns(cols, { floor: "3", vip: "false", rack: "A1" }, rec)).toEqual({});
    expect(changedColumns(cols, { floor: "4", vip: "true", rack: "" }, rec)).toEqual({ floor: 4, vip: true, rack: null });
    expect(changedColumns(cols, { rack: "B2" }, rec)).toEqual({ rack: "B2" });
  });
});
