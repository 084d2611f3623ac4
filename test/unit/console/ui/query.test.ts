import { describe, expect, test } from "bun:test";
import { ago } from "../../../../src/console/ui/format.ts";
import { caselessPattern, literalPattern, queryParam } from "../../../../src/console/ui/query.ts";

describe("the console's queries", () => {
  test("queryParam writes FILTERS as one AND group, SORT and the page", () => {
    const q = queryParam({ filters: [{ EQ: [{ isConnected: false }] }, { LTE: [{ last_talked: 100 }] }], sort: ["name", "DESC"], pageSize: 50, page: 3 });
    expect(JSON.parse(decodeURIComponent(q.slice("query=".length)))).toEqual({
      FILTERS: [[{ EQ: [{ isConnected: false }] }, { LTE: [{ last_talked: 100 }] }]], SORT: [{ DESC: "name" }], PAGESIZE: 50, PAGENUM: 3,
    });
    expect(queryParam({})).toBe(`query=${encodeURIComponent("{}")}`);
  });

  test("a search text is matched literally, in any case", () => {
    expect(literalPattern("a.b*(c)")).toBe("a\\.b\\*\\(c\\)");
    const p = caselessPattern("gw-A.1");
    expect(p).toBe("[gG][wW]-[aA]\\.1");
    expect(new RegExp(p).test("plant GW-a.1")).toBe(true);
    expect(new RegExp(p).test("gw-ax1")).toBe(false);
    // letters beyond ASCII are matched as typed
    expect(caselessPattern("7-é")).toBe("7-é");
  });

  test("ago reads a time as how long ago, never for none", () => {
    const now = 1_000_000_000_000;
    expect(ago(null, now)).toBe("never");
    expect(ago(now / 1000 - 30, now)).toBe("30s ago");
    expect(ago(now / 1000 - 600, now)).toBe("10m ago");
    expect(ago(now / 1000 - 3 * 86_400, now)).toBe("3d ago");
  });
});
