import { describe, expect, test } from "bun:test";
import { csvText, parseCsv, toCsv } from "../../../../src/console/ui/csv.ts";

describe("console CSV", () => {
  test("fields with commas, quotes, line breaks and edge spaces are quoted, and read back as they were", () => {
    const lines = [["item_id", "site", "note"], ["1", "north, west", 'say "hi"'], ["2", "two\nlines", " padded "], ["3", "", "plain"]];
    const text = toCsv(lines);
    expect(text).toBe('item_id,site,note\r\n1,"north, west","say ""hi"""\r\n2,"two\nlines"," padded "\r\n3,,plain\r\n');
    expect(parseCsv(text)).toEqual(lines);
  });

  test("LF or CRLF lines, a last line without a newline, a byte-order mark and blank lines", () => {
    expect(parseCsv("\ufeffa,b\n1,2\r\n\r\n3,4")).toEqual([["a", "b"], ["1", "2"], ["3", "4"]]);
    expect(parseCsv("a,b\n1,")).toEqual([["a", "b"], ["1", ""]]);
    expect(parseCsv('a\n""')).toEqual([["a"], [""]]);
    expect(parseCsv(toCsv([["a"], [""]]))).toEqual([["a"], [""]]);
    expect(parseCsv("")).toEqual([]);
  });

  test("a quote left open is an error, not a silently merged row", () => {
    expect(() => parseCsv('a,b\n1,"open\n2,3')).toThrow(/quote/);
  });

  test("cells: objects as JSON, nothing as empty", () => {
    expect([csvText(null), csvText(undefined), csvText(2.5), csvText(true), csvText({ a: [1] })]).toEqual(["", "", "2.5", "true", '{"a":[1]}']);
  });
});
