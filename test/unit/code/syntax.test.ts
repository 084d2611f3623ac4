// The compile check of uploads: it refuses what a sandbox fails to load for its syntax, and takes
// what a sandbox loads (compared with the sandbox itself, snippet by snippet), with QuickJS's own
// line and column; code nested past the host's stack is refused and the check goes on; on its own
// thread, the largest upload does not hold the event loop; its time for a usual service and for
// the largest upload.
import { afterAll, describe, expect, test } from "bun:test";
import { compileChecker, compileHere } from "../../../src/code/syntax.ts";
import { Sandbox, SourceError } from "../../../src/code/sandbox.ts";

const MEMORY = 32 << 20;
const check = compileHere(MEMORY);
const opened: Sandbox[] = [];
afterAll(() => { for (const s of opened) s.dispose(); });

/** Whether a sandbox loads the code as a service (a SourceError: it does not). */
async function loads(code: string): Promise<boolean> {
  try { opened.push(await Sandbox.create({ libraries: [], service: { name: "svc", code }, meta: {} }, { memoryBytes: MEMORY, sliceMs: 500 })); return true; }
  catch (e) { if (e instanceof SourceError) return false; throw e; }
}

const SNIPPETS = [
  "function svc(req, resp) { resp.success(1); }",
  "function svc(req, resp) {\n  resp.success( }",
  "var x = 1;\nlet y = x +;",
  "return 5",
  "await foo()",
  "let a = 1; let a = 2;",
  "import x from 'y'",
  "'use strict'; with (o) {}",
  "with (Math) { var r = max(1, 2); }",
  "class A { #p = 1; static s = 2; m() { return this.#p; } } function svc(){}",
  "var o = { a: null }; var v = o.a?.b ?? 1n ** 2n; var z = 1_000;",
  "let q = 0; q ||= 1; q &&= 2; q ??= 3;",
  "async function* g() { for await (const v of []) yield v; }",
  "var re = /(?<year>\\d{4})/u;",
  "var s = `a${",
  "function f(a, a) { 'use strict'; }",
  "var \u00e9t\u00e9 = 1;",
  "}",
];

describe("compile check", () => {
  test("refuses exactly what a sandbox cannot load", async () => {
    for (const code of SNIPPETS) expect({ code, refused: (await check(code, "service svc.js")) !== null }).toEqual({ code, refused: !(await loads(code)) });
  });

  test("QuickJS's message, line and column", async () => {
    expect(await check("function svc(req, resp) {\n  resp.success( }", "service svc.js")).toEqual({ message: "SyntaxError: unexpected token in expression: '}'", line: 2, column: 17 });
    expect(await check("var a = 1;\n\n  var s = 'open\n", "library l.js")).toEqual({ message: "SyntaxError: unexpected end of string", line: 3, column: 11 });
    expect(await check("function svc() {}", "service svc.js")).toBeNull();
  });

  test("code nested past the host's stack is refused, and the check goes on", async () => {
    const deep = await check(`${"(".repeat(50_000)}1${")".repeat(50_000)}`, "service deep.js");
    expect(deep?.message).toMatch(/nests too deeply|stack overflow/);
    for (let i = 0; i < 3; i++) expect(await check(`${"[".repeat(50_000)}${"]".repeat(50_000)}`, "service deep.js")).not.toBeNull();
    expect(await check("function svc(req, resp) { resp.success([[[1]]]); }", "service svc.js")).toBeNull();
    expect(await check("var x = (;", "service svc.js")).toMatchObject({ line: 1, column: 10 });
  });

  test("on its own thread: the largest upload does not hold the event loop; the time it takes", async () => {
    const onThread = compileChecker(64 << 20);
    const body = "function step(n) { var out = []; for (var i = 0; i < n; i++) out.push({ i: i, sq: i * i }); return out; }\n";
    const usual = `${body.repeat(100)}function svc(req, resp) { resp.success(step(3)); }`;
    expect(await onThread(usual, "service svc.js")).toBeNull();
    let t0 = performance.now();
    for (let i = 0; i < 20; i++) expect(await onThread(usual, "service svc.js")).toBeNull();
    const usualMs = (performance.now() - t0) / 20;
    expect(await onThread("function svc(req, resp) {\n  resp.success( }", "service svc.js")).toEqual({ message: "SyntaxError: unexpected token in expression: '}'", line: 2, column: 17 });
    // the largest upload (5 MB), while a timer on this thread keeps its time
    const largest = `var fns = [];\n${"fns.push(function (n) { var a = n + 1; return a * 2; });\n".repeat(Math.floor(5_000_000 / 56))}`;
    let last = performance.now(), worstGap = 0;
    const tick = setInterval(() => { const now = performance.now(); worstGap = Math.max(worstGap, now - last); last = now; }, 10);
    t0 = performance.now();
    const big = await onThread(largest, "service big.js");
    const largestMs = performance.now() - t0;
    clearInterval(tick);
    console.log(`compile check: ${Math.round(usual.length / 1024)} KB in ${usualMs.toFixed(1)} ms; ${(largest.length / 1e6).toFixed(1)} MB in ${Math.round(largestMs)} ms (${big ? big.message : "compiles"}), the event loop's longest gap meanwhile ${Math.round(worstGap)} ms`);
    expect(big).toBeNull();
    // relative bounds: on a loaded machine every time stretches, but a check on this thread would
    // hold the loop for the whole compile, and a usual service is 500 times smaller
    expect(worstGap).toBeLessThan(Math.max(250, largestMs / 3));
    expect(usualMs).toBeLessThan(Math.max(100, largestMs / 10));
    expect(await onThread("var ok = 1;", "service svc.js")).toBeNull();
  }, 60_000);
});
