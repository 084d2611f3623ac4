// The test runner's bundling of black-box tests: a file that does not compile is reported as a
// failure with its message, the run goes on to its closing line (a thrown build error ended it).
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleE2E } from "../../../scripts/bundle-e2e.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-bundle-e2e-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a file with a name declared twice is an answer, not a throw", async () => {
  const bad = join(dir, "bad.test.ts");
  writeFileSync(bad, "const dup = 1;\nconst dup = 2;\nexport {};\n");
  const r = await bundleE2E([bad], join(dir, "out-bad"), dir);
  expect(r.ok).toBe(false);
  expect(String(r.logs.map((l) => (l as Error).message ?? l).join("\n"))).toMatch(/dup/);
});

test("files that compile are bundled to .mjs under their path", async () => {
  writeFileSync(join(dir, "good.test.ts"), "const n: number = 1;\nconsole.log(n);\n");
  const r = await bundleE2E([join(dir, "good.test.ts")], join(dir, "out-good"), dir);
  expect(r.ok).toBe(true);
  expect(existsSync(join(dir, "out-good", "good.test.mjs"))).toBe(true);
});
