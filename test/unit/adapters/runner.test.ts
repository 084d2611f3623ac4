// src/adapters/runner.ts: an adapter's files as ClearBlade exports them (permissions "", names
// with '-') written into its directory.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdapterRunner, type ControlFile } from "../../../src/adapters/runner.ts";

const root = mkdtempSync(join(tmpdir(), "outpost-runner-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const file = (name: string, permissions: string, text = "echo hi\n"): ControlFile =>
  ({ name, path_name: name, owner: "", group: "", permissions, version: 1, content: Buffer.from(text).toString("base64") });
const mode = (p: string) => statSync(p).mode & 0o777;

describe("AdapterRunner.writeFiles", () => {
  test("permissions '' give the default mode, 0644, also to a file that had another", () => {
    const r = new AdapterRunner(join(root, "adapters"));
    r.writeFiles("iva-adapter", [file("start.sh", "0755")]);
    const path = join(r.dir("iva-adapter"), "start.sh");
    expect(mode(path)).toBe(0o755);
    r.writeFiles("iva-adapter", [file("start.sh", "", "echo again\n")]);
    expect(mode(path)).toBe(0o644);
    expect(readFileSync(path, "utf8")).toBe("echo again\n");
  });

  test("names with '-' inside; never a leading '-' or '.', never a '/'", () => {
    const r = new AdapterRunner(join(root, "adapters"));
    expect(r.dir("opc-ua-go-adapter")).toBe(join(root, "adapters", "opc-ua-go-adapter"));
    for (const bad of ["-rf", ".hidden", "..", "a/b", "a b", ""]) expect(() => r.dir(bad)).toThrow(/invalid adapter name/);
  });
});
