// How a black-box test file's process ends (test/e2e/harness.ts endAtExit): at its 'exit' event,
// with tap's exit code, after every 'exit' listener the tests added. The file runs on Node as the
// test runner runs it (bundled, then tap's root test in a plain node process).
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { bundleE2E } from "../../../scripts/bundle-e2e.ts";

const ROOT = resolve(import.meta.dir, "../../..");
// inside the project (git ignores .e2e-build), so that Node finds tap in its node_modules
mkdirSync(join(ROOT, ".e2e-build"), { recursive: true });
const dir = mkdtempSync(join(ROOT, ".e2e-build", "exit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A tap file importing the harness, whose one test passes or fails and adds an 'exit' listener. */
async function runFile(name: string, pass: boolean) {
  const file = join(dir, `${name}.test.ts`);
  writeFileSync(file, `import t from "tap";
import { endAtExit } from ${JSON.stringify(join(ROOT, "test/e2e/harness.ts"))};
void endAtExit;
t.test("one", async (t) => {
  process.on("exit", (code) => process.stdout.write("listener added by a test ran, code " + code + "\\n"));
  t.ok(${pass}, "the assertion");
});
`);
  const built = await bundleE2E([file], join(dir, "out"), dir);
  expect(built.ok).toBe(true);
  const p = Bun.spawn(["node", join(dir, "out", `${name}.test.mjs`)], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  return { out, code };
}

test("a file whose tests pass ends with 0, its tests' 'exit' listeners run", async () => {
  const r = await runFile("passing", true);
  expect(r.out).toContain("ok 1 - one");
  expect(r.out).toContain("listener added by a test ran, code 0");
  expect(r.code).toBe(0);
});

test("a file with a failed test ends with 1", async () => {
  const r = await runFile("failing", false);
  expect(r.out).toContain("not ok 1 - one");
  expect(r.out).toContain("listener added by a test ran, code 1");
  expect(r.code).toBe(1);
});
