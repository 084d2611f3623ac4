// The file backend contract on a local directory, and what only a directory has: symbolic links
// that lead out of the root are neither followed nor listed, and part files never show.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError } from "../../../../src/core/errors.ts";
import { LocalFiles } from "../../../../src/store/files/local.ts";
import { backendContract } from "./backendSuite.ts";

const base = mkdtempSync(join(tmpdir(), "outpost-files-"));
let n = 0;
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("local directory backend", () => {
  backendContract(async () => new LocalFiles(join(base, `root${n++}`)));

  test("symbolic links out of the root are refused and not listed; links inside still work", async () => {
    const outside = join(base, `outside${n++}`);
    mkdirSync(outside);
    writeFileSync(join(outside, "secret"), "s3cret");
    const root = join(base, `root${n++}`);
    const b = new LocalFiles(root);
    await b.put("in/file", "inside");
    symlinkSync(outside, join(root, "out"));
    symlinkSync(join(outside, "secret"), join(root, "in", "secretlink"));
    symlinkSync(join(root, "in", "file"), join(root, "inlink"));
    for (const p of ["out/secret", "in/secretlink"]) {
      const e = await b.get(p).then(() => null, (x: unknown) => x);
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).kind.status).toBe(400);
    }
    const w = await b.put("out/new", "x").then(() => null, (x: unknown) => x);
    expect((w as ApiError).kind.status).toBe(400);
    expect(readdirSync(outside)).toEqual(["secret"]);
    expect(new TextDecoder().decode(await b.get("inlink"))).toBe("inside");
    expect((await b.list({ depth: -1 })).entries.map((e) => e.path)).toEqual(["in", "in/file"]);
  });

  test("moves and copies of a file a concurrent move took: not found (404), never a raw fs error", async () => {
    const b = new LocalFiles(join(base, `root${n++}`));
    await b.put("race/one", "x");
    const ops = Array.from({ length: 8 }, (_, i) => (i % 2 ? b.copy("race/one", `copy/${i}`) : b.move("race/one", `moved/${i}`)));
    const outcomes = await Promise.all(ops.map((op) => op.then(() => 200, (e: unknown) => (e instanceof ApiError ? e.kind.status : String(e)))));
    expect(outcomes.every((x) => x === 200 || x === 404)).toBe(true);
    expect((await b.list({ prefix: "moved/", depth: -1 })).entries.length).toBe(1);
  });
});
