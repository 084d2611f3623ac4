import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { QueryParams, conditionalJson, flagParam, jsonAnswer, jsonText } from "../../../src/http/request.ts";

const get = (headers: Record<string, string> = {}) => new Request("http://x/admin/edges/k", { headers });

describe("conditional JSON answers", () => {
  test("an ETag of the body; 304 with no body for a request naming it", async () => {
    const first = await conditionalJson(get(), [{ name: "a" }]);
    expect(first.status).toBe(200);
    expect(await first.text()).toBe('[{"name":"a"}]');
    const tag = first.headers.get("etag")!;
    expect(tag).toMatch(/^"[0-9a-z]+"$/);
    const again = await conditionalJson(get({ "if-none-match": tag }), [{ name: "a" }]);
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
    expect(again.headers.get("etag")).toBe(tag);
    expect((await conditionalJson(get({ "if-none-match": `"x", W/${tag}` }), [{ name: "a" }])).status).toBe(304);
    const changed = await conditionalJson(get({ "if-none-match": tag }), [{ name: "b" }]);
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(tag);
  });

  test("a long array is written a slice at a time, the event loop given back between, to the same text", async () => {
    const rows = Array.from({ length: 1_234 }, (_, i) => ({ name: `e${i}`, n: i, nested: { a: [i, null, "x\"y"] }, none: undefined }));
    const immediate = new Promise<string>((r) => setImmediate(() => r("loop")));
    const written = jsonText(rows);
    expect(await Promise.race([immediate, written])).toBe("loop");
    expect(await written).toBe(JSON.stringify(rows));
    for (const v of [[], [1], Array(500).fill(0), Array(501).fill(0), { a: 1 }, "text", null]) expect(await jsonText(v)).toBe(JSON.stringify(v));
    const answer = await jsonAnswer(rows);
    expect(answer.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await answer.json()).toEqual(JSON.parse(JSON.stringify(rows)));
    // the ETag of a long array is its whole text's
    const tagged = await conditionalJson(get(), rows);
    expect(await tagged.text()).toBe(JSON.stringify(rows));
    expect((await conditionalJson(get({ "if-none-match": tagged.headers.get("etag")! }), rows)).status).toBe(304);
  });

  test("a flag is true, false or absent; anything else is refused", () => {
    const q = (s: string) => new QueryParams(`http://x/?${s}`);
    expect(flagParam(q("failing=true"), "failing")).toBe(true);
    expect(flagParam(q("failing=false"), "failing")).toBe(false);
    expect(flagParam(q(""), "failing")).toBeUndefined();
    for (const bad of ["failing=1", "failing=", "failing=TRUE"]) expect(() => flagParam(q(bad), "failing")).toThrow(ApiError);
  });
});
