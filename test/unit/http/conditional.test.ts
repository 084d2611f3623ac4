import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { QueryParams, conditionalJson, flagParam } from "../../../src/http/request.ts";

const get = (headers: Record<string, string> = {}) => new Request("http://x/admin/edges/k", { headers });

describe("conditional JSON answers", () => {
  test("an ETag of the body; 304 with no body for a request naming it", async () => {
    const first = conditionalJson(get(), [{ name: "a" }]);
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('[{"name":"a"}]');
    const tag = first.headers.get("etag")!;
    expect(tag).toMatch(/^"[0-9a-z]+"$/);
    const again = conditionalJson(get({ "if-none-match": tag }), [{ name: "a" }]);
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
    expect(again.headers.get("etag")).toBe(tag);
    expect(conditionalJson(get({ "if-none-match": `"x", W/${tag}` }), [{ name: "a" }]).status).toBe(304);
    const changed = conditionalJson(get({ "if-none-match": tag }), [{ name: "b" }]);
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(tag);
  });

  test("a flag is true, false or absent; anything else is refused", () => {
    const q = (s: string) => new QueryParams(`http://x/?${s}`);
    expect(flagParam(q("failing=true"), "failing")).toBe(true);
    expect(flagParam(q("failing=false"), "failing")).toBe(false);
    expect(flagParam(q(""), "failing")).toBeUndefined();
    for (const bad of ["failing=1", "failing=", "failing=TRUE"]) expect(() => flagParam(q(bad), "failing")).toThrow(ApiError);
  });
});
