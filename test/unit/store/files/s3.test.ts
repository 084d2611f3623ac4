// The file backend contract on S3-compatible object storage: Bun's S3 client against a real
// S3-API server (s3rver) started here, one key prefix per test in one bucket, plus a second
// backend in the same bucket that must not see the first one's files.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import { S3Files } from "../../../../src/store/files/s3.ts";
import { backendContract } from "./backendSuite.ts";

const dir = mkdtempSync(join(tmpdir(), "outpost-s3rver-"));
const server = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: dir, configureBuckets: [{ name: "outpost-test", configs: [] }] });
let endpoint = "";
let n = 0;
beforeAll(async () => { endpoint = `http://127.0.0.1:${(await server.run()).port}`; });
afterAll(async () => { await server.close(); rmSync(dir, { recursive: true, force: true }); });

const backend = (root: string) => new S3Files({ endpoint, bucket: "outpost-test", accessKeyId: "S3RVER", secretAccessKey: "S3RVER", root });

describe("S3 backend", () => {
  backendContract(async () => backend(`t${n++}/files`));

  test("backends with different roots in one bucket do not see each other's files", async () => {
    const a = backend(`iso${n++}`), b = backend(`iso${n++}`);
    await a.put("x/1", "a");
    expect((await b.list({ depth: -1 })).entries).toEqual([]);
    expect(await b.stat("x/1")).toBeNull();
    expect(await b.deleteAll("")).toBe(0);
    expect(new TextDecoder().decode(await a.get("x/1"))).toBe("a");
  });

  test("a streamed put larger than one part is a multipart upload that reads back whole", async () => {
    const b = backend(`big${n++}`);
    const chunk = new Uint8Array(1024 * 1024).map((_, i) => i % 251);
    let left = 9;
    const st = await b.put("big.bin", new ReadableStream<Uint8Array>({ pull(c) { if (left-- > 0) c.enqueue(chunk); else c.close(); } }));
    expect(st.size).toBe(9 * chunk.byteLength);
    const back = await b.get("big.bin", { start: 8 * chunk.byteLength });
    expect(back).toEqual(chunk);
  });

  test("an unreachable service is an error, not a missing file", async () => {
    const b = new S3Files({ endpoint: "http://127.0.0.1:9", bucket: "x", accessKeyId: "a", secretAccessKey: "b" });
    const e = await b.stat("f").then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(Error);
  });
});
