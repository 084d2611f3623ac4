// The import graph of src/: no cycle between files, none between folders, and every import between
// folders (and the files at the top of src/) one that the allowed-imports table of
// docs/architecture.md grants, each grant used. Type-only imports count: they are dependencies of
// the design even though the build erases them.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../../src");
const ARCHITECTURE = resolve(import.meta.dir, "../../docs/architecture.md");

const IMPORT = /(?:^|\n)[ \t]*(?:import|export)\b[^;'"]*?\bfrom\s*["']([^"']+)["']|(?:^|\n)[ \t]*import\s*["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    // the console's browser code is a separate program (its own tsconfig), built into the binary
    if (e.isDirectory()) { if (p !== join(SRC, "console/ui")) sourceFiles(p, out); }
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** file -> the src/ files it imports (relative paths such as "domain/roles.ts") */
function importGraph(): Map<string, string[]> {
  const g = new Map<string, string[]>();
  for (const f of sourceFiles(SRC)) {
    const to = new Set<string>();
    for (const m of readFileSync(f, "utf8").matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3]!;
      if (spec.startsWith(".")) to.add(relative(SRC, resolve(dirname(f), spec)));
    }
    g.set(relative(SRC, f), [...to]);
  }
  return g;
}

/** The strongly connected components with more than one member (Tarjan). */
function cycles(g: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], onStack = new Set<string>(), found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next); low.set(v, next++); stack.push(v); onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!g.has(w)) continue;
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)); }
      else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do { w = stack.pop()!; onStack.delete(w); c.push(w); } while (w !== v);
      if (c.length > 1) found.push(c.sort());
    }
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return found;
}

const folderOf = (f: string) => (f.includes("/") ? f.slice(0, f.indexOf("/")) : null);

function folderGraph(g: Map<string, string[]>) {
  const fg = new Map<string, Set<string>>();
  for (const [f, to] of g) {
    const a = folderOf(f);
    if (!a) continue;
    if (!fg.has(a)) fg.set(a, new Set());
    for (const t of to) { const b = folderOf(t); if (b && b !== a) fg.get(a)!.add(b); }
  }
  return new Map([...fg].map(([a, s]) => [a, [...s]]));
}

/** A file's part of the design: its folder, or itself at the top of src/ ("app.ts"). */
const unitOf = (f: string) => folderOf(f) ?? f;

/** unit -> the units it imports, across units (targets outside src/, such as package.json, left out) */
function unitGraph(g: Map<string, string[]>): Map<string, Set<string>> {
  const ug = new Map<string, Set<string>>();
  for (const [f, to] of g) {
    const a = unitOf(f);
    if (!ug.has(a)) ug.set(a, new Set());
    for (const t of to) { const b = unitOf(t); if (b !== a && !t.startsWith("..") && !t.startsWith("console/ui")) ug.get(a)!.add(b); }
  }
  return ug;
}

/** The table under "## Allowed imports" in the architecture document: unit -> what it may import
 *  (rows "| `domain/` | `core/`, `store/` |"; "nothing" grants nothing). */
function allowedImports(markdown: string): Map<string, Set<string>> {
  const section = markdown.split(/^## /m).find((s) => s.startsWith("Allowed imports"));
  if (!section) throw new Error("docs/architecture.md has no \"## Allowed imports\" section");
  const names = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\/$/, ""));
  const table = new Map<string, Set<string>>();
  for (const line of section.split("\n")) {
    const m = /^\|\s*`([^`]+)`\s*\|(.*)\|\s*$/.exec(line);
    if (m) table.set(m[1]!.replace(/\/$/, ""), new Set(names(m[2]!)));
  }
  return table;
}

/** What breaks the table: imports it does not grant, grants nothing uses, parts it does not list. */
function checkAllowed(units: Map<string, Set<string>>, allowed: Map<string, Set<string>>) {
  const forbidden: string[] = [], unused: string[] = [];
  for (const [a, to] of units) for (const b of to) if (!allowed.get(a)?.has(b)) forbidden.push(`${a} -> ${b}`);
  for (const [a, may] of allowed) for (const b of may) if (!units.get(a)?.has(b)) unused.push(`${a} -> ${b}`);
  const unlisted = [...units.keys()].filter((u) => !allowed.has(u));
  const gone = [...allowed.keys()].filter((u) => !units.has(u));
  return { forbidden, unused, unlisted, gone };
}

describe("imports of src/", () => {
  const graph = importGraph();

  test("the walk sees the source (every file, resolved imports)", () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get("domain/systems.ts")).toContain("store/systems.ts");
    // every relative import names a file that exists
    const missing = [...graph].flatMap(([f, to]) => to.filter((t) => t.endsWith(".ts") && !t.endsWith(".d.ts") && !graph.has(t) && !t.startsWith("console/ui")).map((t) => `${f} -> ${t}`));
    expect(missing).toEqual([]);
  });

  test("no cycle between files", () => {
    expect(cycles(graph)).toEqual([]);
  });

  test("no cycle between folders", () => {
    expect(cycles(folderGraph(graph))).toEqual([]);
  });

  test("every import between folders is one the allowed-imports table of docs/architecture.md grants, and every grant is used", () => {
    const allowed = allowedImports(readFileSync(ARCHITECTURE, "utf8"));
    expect(allowed.get("domain")?.has("store")).toBe(true);
    expect(checkAllowed(unitGraph(graph), allowed)).toEqual({ forbidden: [], unused: [], unlisted: [], gone: [] });
  });

  test("the table check finds an import it does not grant, a grant nobody uses and a folder it does not list", () => {
    const allowed = allowedImports("## Allowed imports\n\n| folder | may import |\n|---|---|\n| `core/` | nothing |\n| `store/` | `core/` |\n| `domain/` | `core/`, `store/` |\n\n## Next\n| `x/` | `y/` |\n");
    expect([...allowed.keys()]).toEqual(["core", "store", "domain"]);
    const units = unitGraph(new Map([["domain/a.ts", ["store/b.ts", "http/c.ts"]], ["store/b.ts", []], ["http/c.ts", ["domain/a.ts"]], ["core/d.ts", []]]));
    expect(checkAllowed(units, allowed)).toEqual({ forbidden: ["domain -> http", "http -> domain"], unused: ["store -> core", "domain -> core"], unlisted: ["http"], gone: [] });
  });

  test("the detector finds a cycle when there is one", () => {
    const g = new Map([["a/x.ts", ["b/y.ts"]], ["b/y.ts", ["b/z.ts"]], ["b/z.ts", ["a/x.ts"]]]);
    expect(cycles(g)).toEqual([["a/x.ts", "b/y.ts", "b/z.ts"]]);
    expect(cycles(folderGraph(g))).toEqual([["a", "b"]]);
  });
});
