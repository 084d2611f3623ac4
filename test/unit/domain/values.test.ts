// The domain speaks values: no SQL text in src/domain (statements, clauses, executor calls, the
// query compiler, column maps' SQL) and no page URLs (routes build those from a fetch's result).
// A grep over the source with comments left out, as the imports test walks the imports.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../../../src");

/** What SQL looks like in TypeScript source: upper-case statement words and clauses (as every
 *  repository writes them), calls of an executor, the query compiler, a column map's SQL. */
const SQL = [
  /\b(SELECT|INSERT INTO|DELETE FROM|UPDATE \S+ SET|CREATE (UNIQUE )?(TABLE|INDEX)|DROP (TABLE|INDEX)|ALTER TABLE)\b/,
  /\b(WHERE|ORDER BY|GROUP BY|LIMIT|OFFSET|RETURNING|ON CONFLICT|IS (NOT )?NULL|COUNT\(\*\)|count\(\*\))\W/,
  /\b(ex|tx|db|this\.d\.db|d\.db)\.(all|get|run|batch)\s*[<(]\s*[`"']/,
  /\b(compileWhere|compileOrder|compileLimit|continueAfter|sortExpressions|EVERY_ROW_SQL)\b/,
  /\bsql\s*:\s*[`"']/,
];
/** What building a page link looks like. */
const PAGE_URL = [/\b(NEXTPAGEURL|PREVPAGEURL|serializeQuery|fetchPage)\b/, /\?query=/];

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) sourceFiles(p, out);
    else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** The source without its comments (a `//` after a colon, as in a URL, is kept). */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:\\])\/\/.*$/gm, "$1");

/** `file:line: text` of each line of the files under `dir` that one of `patterns` matches. */
function findings(dir: string, patterns: RegExp[]): string[] {
  const out: string[] = [];
  for (const f of sourceFiles(dir)) {
    withoutComments(readFileSync(f, "utf8")).split("\n").forEach((line, i) => {
      if (patterns.some((p) => p.test(line))) out.push(`${relative(SRC, f)}:${i + 1}: ${line.trim()}`);
    });
  }
  return out;
}

describe("src/domain speaks values", () => {
  test("no SQL text", () => {
    expect(findings(join(SRC, "domain"), SQL)).toEqual([]);
  });

  test("no page URLs", () => {
    expect(findings(join(SRC, "domain"), PAGE_URL)).toEqual([]);
  });

  test("the greps find what they look for where it is (the repositories, the query language)", () => {
    const store = findings(join(SRC, "store"), SQL);
    for (const kind of ["SELECT", "INSERT INTO", "WHERE", "ex.all<", "compileWhere", "sql: \""])
      expect(store.some((l) => l.includes(kind))).toBe(true);
    expect(findings(join(SRC, "core"), PAGE_URL).some((l) => l.includes("?query="))).toBe(true);
    // comments are not code: a comment naming SQL is no finding
    expect(withoutComments("const a = 1; // SELECT * FROM t\n/* WHERE x */ const b = \"http://h/p\";")).toBe("const a = 1; \n const b = \"http://h/p\";");
  });
});
