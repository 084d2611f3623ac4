// Edge sync is cut by step (src/sync/platform/, src/sync/edge/, one file per kind in
// src/sync/kinds/): no file of src/sync grows past 300 lines, and the kinds' names stand in one
// file (src/core/syncKinds.ts), never in another literal list.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { DEFINITION_TYPES } from "../../../src/core/syncKinds.ts";

const SRC = resolve(import.meta.dir, "../../../src");
const MAX_LINES = 300;

function files(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) files(p, out);
    else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

describe("sync layout", () => {
  test(`no file in src/sync is over ${MAX_LINES} lines`, () => {
    const sync = files(join(SRC, "sync"));
    expect(sync.length).toBeGreaterThan(10);
    const long = sync.map((f) => ({ file: relative(SRC, f), lines: readFileSync(f, "utf8").split("\n").length - 1 })).filter((x) => x.lines > MAX_LINES);
    expect(long).toEqual([]);
  });

  test("no list of three or more kind names outside src/core/syncKinds.ts", () => {
    const name = `["'](?:${DEFINITION_TYPES.join("|")})["']`;
    const list = new RegExp(`${name}\\s*,\\s*${name}\\s*,\\s*${name}`);
    // the check itself sees such a list
    expect(list.test(`const KINDS = ["service", "library", "trigger"];`)).toBe(true);
    const found = files(SRC).filter((f) => relative(SRC, f) !== "core/syncKinds.ts" && list.test(readFileSync(f, "utf8"))).map((f) => relative(SRC, f));
    expect(found).toEqual([]);
  });
});
