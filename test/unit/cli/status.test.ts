// `outpost status` given an edge's own flags passes them on to the edge's configuration with their
// values, whatever those start with: an edge token is random URL-safe base64, and one in 64 starts
// with "-" (one with a "_" or a digit after that was taken for a word out of place, and the command
// refused its own command line with exit 2).
import { describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { statusCommand } from "../../../src/cli/status.ts";

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

async function run(argv: string[]) {
  let out = "", err = "";
  const code = await statusCommand(argv, { stdout: { write: (t: string) => { out += t; return true; } }, stderr: { write: (t: string) => { err += t; return true; } }, env: {} } as never);
  return { code, out, err };
}

describe("outpost status with an edge's own flags", () => {
  const edge = (token: string, port: number) => ["--mode", "edge", "--platform-url", "http://127.0.0.1:9", "--system-key", "0".repeat(30), "--edge-name", "gw-1", "--edge-token", token, "--http-port", String(port)];

  for (const token of ["-Zx3_tokenStartingWithADash", "-9digitAfterTheDash", "_underscoreToken", "plainToken", "--not_a_flag"]) {
    test(`an edge token '${token}' is the token's value: the edge is asked (exit 4: nothing listens)`, async () => {
      const r = await run(edge(token, await closedPort()));
      expect(r.err).toContain("cannot reach");
      expect(r.code).toBe(4);
    });
  }

  test("a status flag after an edge flag given no value is still the status flag", async () => {
    const r = await run(["--mode", "edge", "--edge-token", "--failed"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("edge-token");
  });

  test("an unknown word where a flag belongs is refused with exit 2", async () => {
    const r = await run(["--mode", "edge", "stray"]);
    expect(r.code).toBe(2);
  });
});
