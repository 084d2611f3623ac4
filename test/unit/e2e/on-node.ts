// Running a script on Node as the black-box run does, for the tests of its support code: in a
// scratch directory inside the project (git ignores .e2e-build) so that Node finds the packages
// in its node_modules, with a deadline, since what these tests look for is a process that does
// not end.
import { afterAll } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "../../..");

/** A directory for this test file's scripts, removed after its tests. */
export function scratchDir(prefix: string): string {
  mkdirSync(join(ROOT, ".e2e-build"), { recursive: true });
  const dir = mkdtempSync(join(ROOT, ".e2e-build", prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** `node ...args` from the project root: its output, whether it ended within `ms` (it is killed
 *  otherwise), and its exit code. */
export async function onNode(args: string[], ms = 20_000) {
  const p = Bun.spawn(["node", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const out = new Response(p.stdout).text();
  const ended = await Promise.race([p.exited.then(() => true), Bun.sleep(ms).then(() => false)]);
  if (!ended) p.kill("SIGKILL");
  return { out: await out, ended, code: p.exitCode };
}
