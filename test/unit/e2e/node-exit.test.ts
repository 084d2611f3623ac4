// How a Node process of the test run ends (test/node-exit.mjs, preloaded by scripts/test.ts into
// tap's runner and each black-box file): at its 'exit' event, with its exit code, after every
// 'exit' listener the process added.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { onNode, ROOT, scratchDir } from "./on-node.ts";

const dir = scratchDir("exit-");
const preload = `--import=${join(ROOT, "test/node-exit.mjs")}`;

/** A tap file whose one test passes or fails and adds an 'exit' listener, run as scripts/test.ts
 *  runs one. */
async function runFile(name: string, pass: boolean) {
  const file = join(dir, `${name}.test.mjs`);
  writeFileSync(file, `import t from "tap";
t.test("one", async (t) => {
  process.on("exit", (code) => process.stdout.write("listener added by a test ran, code " + code + "\\n"));
  t.ok(${pass}, "the assertion");
});
`);
  return onNode([preload, file]);
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

test("a file that left a handle Node never closes still ends, with its code", async () => {
  // Node 20 answers resetAndDestroy() on a socket whose shutdown is under way with EINVAL and
  // never closes its handle: without the preload the process spins after its 'exit' event
  const file = join(dir, "leaked.test.mjs");
  writeFileSync(file, `import net from "node:net";
import t from "tap";
t.test("one", async (t) => {
  const server = net.createServer((s) => { s.on("error", () => {}); s.end(); s.resetAndDestroy(); server.close(); });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  await new Promise((r) => { const c = net.connect(server.address().port, "127.0.0.1"); c.on("error", () => {}); c.on("close", r); });
  t.pass("the connection closed");
});
`);
  const r = await onNode([preload, file]);
  expect(r.out).toContain("ok 1 - one");
  expect(r.ended).toBe(true);
  expect(r.code).toBe(0);
}, 30_000);
