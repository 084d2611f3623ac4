// The composition stays readable: app.ts and the files of src/compose are made of functions a
// reader takes in at once, none over 80 lines (a nested function counts in its enclosing one too).
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";

const SRC = resolve(import.meta.dir, "../../../src");
const MAX_LINES = 80;

/** "name: lines" of each function of `text` longer than `max` lines. */
function longFunctions(fileName: string, text: string, max: number): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.ESNext, true);
  const lineOf = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const lines = lineOf(node.getEnd()) - lineOf(node.getStart(sf)) + 1;
      if (lines > max) found.push(`${fileName}:${nameOf(node, sf)}: ${lines}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** The function's own name, or the name it is bound to (`const f = () => ...`, `{ f: () => ... }`). */
function nameOf(node: ts.Node, sf: ts.SourceFile): string {
  const own = (node as ts.FunctionLikeDeclaration).name;
  if (own) return own.getText(sf);
  const p = node.parent;
  if (p && (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p))) return p.name.getText(sf);
  return `(anonymous, line ${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1})`;
}

const compositionFiles = () => ["app.ts", ...readdirSync(join(SRC, "compose")).filter((f) => f.endsWith(".ts")).map((f) => `compose/${f}`)];

describe("composition size", () => {
  test("app.ts and one file per part: common, platform, edge", () => {
    expect(compositionFiles().sort()).toEqual(["app.ts", "compose/common.ts", "compose/edge.ts", "compose/platform.ts"]);
  });

  test(`no function of app.ts or src/compose over ${MAX_LINES} lines`, () => {
    const found = compositionFiles().flatMap((f) => longFunctions(f, readFileSync(join(SRC, f), "utf8"), MAX_LINES));
    expect(found).toEqual([]);
  });

  test("the check finds a long function, declared, bound to a name or in an object, and counts its lines", () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  call${i}();`).join("\n");
    const text = [
      `export function long() {\n${body(80)}\n}`, // 82 lines
      `const short = () => {\n${body(78)}\n};`, // 80 lines: allowed
      `const bound = async () => {\n${body(79)}\n};`, // 81
      `const parts = { start: (x: number) => {\n${body(79)}\n} };`, // 81
      `class C { method() {\n${body(79)}\n} }`, // 81
    ].join("\n");
    expect(longFunctions("x.ts", text, MAX_LINES)).toEqual(["x.ts:long: 82", "x.ts:bound: 81", "x.ts:start: 81", "x.ts:method: 81"]);
  });
});
