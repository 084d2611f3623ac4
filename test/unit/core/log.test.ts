// Log lines: one JSON object per line, the base fields of the logger and its children, errors as
// their name and message wherever they are, undefined and functions left out, a field that names
// a base field replacing it; levels, and enabled() telling a hot path whether to build a line.
import { describe, expect, test } from "bun:test";
import { createLogger } from "../../../src/core/log.ts";

const capture = (level: Parameters<typeof createLogger>[0] = "debug", base: Record<string, unknown> = { mode: "edge" }) => {
  const lines: string[] = [];
  return { log: createLogger(level, base, (l) => { lines.push(l); }), lines, parsed: () => lines.map((l) => JSON.parse(l)) };
};

describe("logger", () => {
  test("a JSON line with time, level, message, base fields, then the line's fields", () => {
    const c = capture();
    c.log.info("request", { method: "GET", status: 200, ms: 1.5, ok: true, none: null, text: 'a "quoted"\nline' });
    expect(c.lines[0]!.endsWith("}\n")).toBe(true);
    expect(c.lines[0]!.split("\n").length).toBe(2);
    const [line] = c.parsed();
    expect(Object.keys(line)).toEqual(["time", "level", "msg", "mode", "method", "status", "ms", "ok", "none", "text"]);
    expect(line).toMatchObject({ level: "info", msg: "request", mode: "edge", method: "GET", status: 200, ms: 1.5, ok: true, none: null, text: 'a "quoted"\nline' });
    expect(Number.isNaN(Date.parse(line.time))).toBe(false);
  });

  test("errors as name and message, at the top or nested; undefined and functions left out", () => {
    const c = capture();
    c.log.error("failed", { err: new TypeError("bad"), nested: { list: [1, new Error("inner")] }, gone: undefined, fn: () => 1 });
    expect(c.parsed()[0]).toEqual({ time: expect.any(String), level: "error", msg: "failed", mode: "edge", err: { name: "TypeError", message: "bad" }, nested: { list: [1, { name: "Error", message: "inner" }] } });
  });

  test("children add base fields; a field naming a base field replaces it", () => {
    const c = capture();
    c.log.child({ part: "sync" }).warn("x", { mode: "platform", n: 1 });
    c.log.child({ part: "sync" }).debug("y");
    const [x, y] = c.parsed();
    expect(x).toEqual({ time: expect.any(String), level: "warn", msg: "x", mode: "platform", part: "sync", n: 1 });
    expect(y).toEqual({ time: expect.any(String), level: "debug", msg: "y", mode: "edge", part: "sync" });
  });

  test("levels: lines below the level are not written; enabled says so; setLevel reaches children", () => {
    const c = capture("warn");
    const child = c.log.child({ a: 1 });
    c.log.info("no");
    child.warn("yes");
    expect([c.log.enabled("info"), c.log.enabled("warn"), child.enabled("error")]).toEqual([false, true, true]);
    c.log.setLevel("silent");
    child.error("no");
    expect(child.enabled("error")).toBe(false);
    expect(c.parsed().map((l) => l.msg)).toEqual(["yes"]);
  });
});
