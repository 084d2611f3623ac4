// The pure parts of webhooks: auth method names, path normalisation and matching, header names.
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../src/core/errors.ts";
import { canonicalAuthMethod, headerName, matchPath, normalisePath } from "../../../src/domain/webhooks.ts";

describe("canonicalAuthMethod", () => {
  test("spec names and client aliases map to one form", () => {
    expect(canonicalAuthMethod("no_auth")).toBe("no_auth");
    expect(canonicalAuthMethod("cb_auth")).toBe("platform_auth");
    expect(canonicalAuthMethod("ClearBlade_Auth")).toBe("platform_auth");
    expect(canonicalAuthMethod("http_auth")).toBe("http_basic_auth");
  });
  test("anything else is a 400", () => {
    for (const v of ["", "oauth", 1, null, "__proto__", "toString"]) expect(() => canonicalAuthMethod(v)).toThrow(ApiError);
  });
});

describe("normalisePath", () => {
  test("leading and trailing slashes are normalised; empty means no path", () => {
    expect(normalisePath("a/{b}/c/")).toBe("/a/{b}/c");
    expect(normalisePath("//a")).toBe("/a");
    for (const v of [undefined, null, "", "/"]) expect(normalisePath(v)).toBe("");
  });
  test("partial or repeated wildcards and empty elements are refused", () => {
    for (const v of ["/a/x{b}", "/{b}x", "/{a}/{a}", "/a//b", "/{}", "/{1a}", "/a?b", 3]) expect(() => normalisePath(v)).toThrow(ApiError);
  });
});

describe("matchPath", () => {
  test("wildcards fill values, literals must be equal, lengths must agree", () => {
    expect(matchPath("/s/{state}/d/{type}", ["s", "CA", "d", "x y"])).toEqual({ state: "CA", type: "x y" });
    expect(matchPath("", [])).toEqual({});
    expect(matchPath("", ["x"])).toBeNull();
    expect(matchPath("/s/{state}", ["s"])).toBeNull();
    expect(matchPath("/s/{state}", ["S", "CA"])).toBeNull();
    expect(matchPath("/s/{state}", ["s", ""])).toBeNull();
    expect(matchPath("/s/{state}", ["s", "CA", "more"])).toBeNull();
  });
});

test("headerName: first letter upper case, the rest lower case", () => {
  expect(headerName("MyHeader1")).toBe("Myheader1");
  expect(headerName("content-type")).toBe("Content-type");
  expect(headerName("X-API-KEY")).toBe("X-api-key");
});
