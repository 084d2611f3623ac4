// How a Node process of the test run ends (test/node-exit.mjs, preloaded by scripts/test.ts into
// tap's runner and each black-box file): at its 'exit' event, with its exit code, after every
// 'exit' listener the process added.
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../../..");
// inside the project (git ignores .e2e-build), so that Node finds tap in its node_modules
mkdirSync(join(ROOT, ".e2e-build"), { recursive: true });
const dir = mkdtempSync(join(ROOT, ".e2e-build", "exit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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
  const p = Bun.spawn(["node", `--import=${join(ROOT, "test/node-exit.mjs")}`, file], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
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
  const p = Bun.spawn(["node", `--import=${join(ROOT, "test/node-exit.mjs")}`, file], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const ended = await Promise.race([p.exited.then(() => true), Bun.sleep(20_000).then(() => false)]);
  if (!ended) p.kill("SIGKILL");
  expect(await new Response(p.stdout).text()).toContain("ok 1 - one");
  expect(ended).toBe(true);
  expect(p.exitCode).toBe(0);
}, 30_000);
