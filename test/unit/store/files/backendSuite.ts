// The rules every file backend keeps (src/store/files/backend.ts), run by one test file per
// backend: whole and ranged reads, streamed writes with a size limit that leaves the old file,
// stat, listing by depth with continuation across pages, copy, move, delete, deleteAll, and the
// paths that are refused before any backend sees them.
import { expect, test } from "bun:test";
import { ApiError } from "../../../../src/core/errors.ts";
import type { FileBackend, FileStat } from "../../../../src/store/files/backend.ts";

const enc = new TextEncoder();
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** A stream that yields `chunks` bytes-arrays one by one. */
const streamOf = (...chunks: Uint8Array[]) => new ReadableStream<Uint8Array>({
  pull(ctl) { const c = chunks.shift(); if (c) ctl.enqueue(c); else ctl.close(); },
});

async function errorOf(p: Promise<unknown>): Promise<ApiError> {
  try { await p; } catch (e) { if (e instanceof ApiError) return e; throw e; }
  throw new Error("expected a failure");
}

const paths = (es: FileStat[]) => es.map((e) => (e.isDir ? `${e.path}/` : e.path));

async function listAll(b: FileBackend, prefix: string, depth: number, limit: number) {
  const seen: string[] = [];
  let continuation = "";
  let pages = 0;
  do {
    const page = await b.list({ prefix, depth, limit, continuation });
    expect(page.entries.length).toBeLessThanOrEqual(limit);
    seen.push(...paths(page.entries));
    continuation = page.continuation;
    if (++pages > 100) throw new Error("listing does not end");
  } while (continuation);
  return { seen, pages };
}

/** `make` gives a fresh, empty backend for each test. */
export function backendContract(make: () => Promise<FileBackend>) {
  test("put and get whole, ranged and streamed; put replaces; stat", async () => {
    const b = await make();
    const st = await b.put("a/b/c.txt", "hello world");
    expect(st).toMatchObject({ path: "a/b/c.txt", size: 11, isDir: false });
    expect(st.modified).toBeInstanceOf(Date);
    expect(text(await b.get("a/b/c.txt"))).toBe("hello world");
    expect(text(await b.get("a/b/c.txt", { start: 6 }))).toBe("world");
    expect(text(await b.get("a/b/c.txt", { start: 0, end: 5 }))).toBe("hello");
    expect(text(await b.get("a/b/c.txt", { start: 6, end: 1000 }))).toBe("world");
    expect(text(await new Response(await b.stream("a/b/c.txt")).bytes())).toBe("hello world");
    expect(text(await new Response(await b.stream("a/b/c.txt", 6)).bytes())).toBe("world");
    await b.put("a/b/c.txt", enc.encode("bye"));
    expect(text(await b.get("a/b/c.txt"))).toBe("bye");
    expect(await b.stat("a/b/c.txt")).toMatchObject({ size: 3, isDir: false });
    expect(await b.stat("a/b")).toMatchObject({ path: "a/b", isDir: true });
    expect(await b.stat("a/nothing")).toBeNull();
    const empty = await b.put("empty", new Uint8Array(0));
    expect(empty.size).toBe(0);
    expect((await b.get("empty")).byteLength).toBe(0);
  });

  test("binary bytes and unicode paths round-trip", async () => {
    const b = await make();
    const bytes = new Uint8Array(256).map((_, i) => i);
    await b.put("bïn/ü 1.bin", bytes);
    expect(await b.get("bïn/ü 1.bin")).toEqual(bytes);
    expect(paths((await b.list({ prefix: "bïn" })).entries)).toEqual(["bïn/ü 1.bin"]);
  });

  test("a streamed put stores every chunk; over maxBytes it is refused (413) and the old file stays", async () => {
    const b = await make();
    const big = new Uint8Array(300_000).fill(7);
    const st = await b.put("s/big.bin", streamOf(big.subarray(0, 100_000), big.subarray(100_000)), { maxBytes: 300_000 });
    expect(st.size).toBe(300_000);
    expect(await b.get("s/big.bin")).toEqual(big);
    const e = await errorOf(b.put("s/big.bin", streamOf(new Uint8Array(200_000), new Uint8Array(200_000)), { maxBytes: 300_000 }));
    expect(e.kind.status).toBe(413);
    expect(await b.get("s/big.bin")).toEqual(big);
    expect((await errorOf(b.put("s/small", "0123456789", { maxBytes: 5 }))).kind.status).toBe(413);
    expect(await b.stat("s/small")).toBeNull();
    // nothing half-written shows in a listing
    expect(paths((await b.list({ prefix: "s" })).entries)).toEqual(["s/big.bin"]);
  });

  test("missing files: get and stream NOT_FOUND, delete false, copy/move NOT_FOUND", async () => {
    const b = await make();
    expect((await errorOf(b.get("no/such"))).kind.status).toBe(404);
    expect((await errorOf(b.stream("no/such"))).kind.status).toBe(404);
    expect(await b.delete("no/such")).toBe(false);
    expect((await errorOf(b.copy("no/such", "x"))).kind.status).toBe(404);
    expect((await errorOf(b.move("no/such", "x"))).kind.status).toBe(404);
    await b.put("d/f", "x");
    // a directory is not a file
    expect((await errorOf(b.get("d"))).kind.status).toBe(404);
  });

  test("paths that are not keys are refused before any backend sees them", async () => {
    const b = await make();
    for (const bad of ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "", "a\u0000b", "a\\..\\b"]) {
      expect((await errorOf(b.put(bad, "x"))).kind.status).toBe(400);
      expect((await errorOf(b.get(bad))).kind.status).toBe(400);
      expect((await errorOf(b.stat(bad))).kind.status).toBe(400);
      expect((await errorOf(b.delete(bad))).kind.status).toBe(400);
    }
    await b.put("ok", "x");
    expect((await errorOf(b.copy("ok", "../escape"))).kind.status).toBe(400);
    expect((await errorOf(b.move("ok", "/abs"))).kind.status).toBe(400);
    expect((await errorOf(b.list({ prefix: "../" }))).kind.status).toBe(400);
    expect((await errorOf(b.deleteAll("a/../.."))).kind.status).toBe(400);
    expect(text(await b.get("ok"))).toBe("x");
  });

  test("list: depth 1 shows files and directories directly under the prefix, in key order", async () => {
    const b = await make();
    for (const p of ["r/a.txt", "r/b/1", "r/b/2/x", "r/c", "r/b.txt", "top"]) await b.put(p, p);
    const page = await b.list({ prefix: "r" });
    expect(paths(page.entries)).toEqual(["r/a.txt", "r/b.txt", "r/b/", "r/c"]);
    expect(page.continuation).toBe("");
    const f = page.entries.find((e) => e.path === "r/a.txt")!;
    expect(f.size).toBe(7);
    expect(paths((await b.list({})).entries)).toEqual(["r/", "top"]);
    expect(paths((await b.list({ prefix: "r/b/" })).entries)).toEqual(["r/b/1", "r/b/2/"]);
    expect(paths((await b.list({ prefix: "r", depth: 2 })).entries)).toEqual(["r/a.txt", "r/b.txt", "r/b/", "r/b/1", "r/b/2/", "r/c"]);
    expect(paths((await b.list({ prefix: "r", depth: -1 })).entries)).toEqual(["r/a.txt", "r/b.txt", "r/b/", "r/b/1", "r/b/2/", "r/b/2/x", "r/c"]);
    expect((await b.list({ prefix: "nothing" })).entries).toEqual([]);
    expect((await b.list({ prefix: "top" })).entries).toEqual([]);
  });

  test("list: pages of every size give every entry once, at any depth", async () => {
    const b = await make();
    const files = ["p/a", "p/b/c", "p/b/d/e", "p/b/d/f", "p/b/g", "p/h/i", "p/j", "p/k/l/m/n"];
    for (const p of files) await b.put(p, "x");
    for (const depth of [1, 2, -1]) {
      const whole = paths((await b.list({ prefix: "p", depth, limit: 1000 })).entries);
      for (const limit of [1, 2, 3, 5]) {
        const { seen, pages } = await listAll(b, "p", depth, limit);
        expect(seen).toEqual(whole);
        expect(pages).toBe(Math.max(1, Math.ceil(whole.length / limit)));
      }
    }
    expect(paths((await b.list({ prefix: "p", depth: -1, limit: 1000 })).entries).filter((p) => !p.endsWith("/"))).toEqual(files);
  });

  test("list refuses a bad depth, limit or foreign continuation", async () => {
    const b = await make();
    await b.put("q/a", "x");
    expect((await errorOf(b.list({ depth: 0 }))).kind.status).toBe(400);
    expect((await errorOf(b.list({ depth: 1.5 }))).kind.status).toBe(400);
    expect((await errorOf(b.list({ limit: 0 }))).kind.status).toBe(400);
    expect((await errorOf(b.list({ continuation: "!!not-a-token" }))).kind.status).toBe(400);
    const tokenForOtherPrefix = Buffer.from("z/").toString("base64url");
    expect((await errorOf(b.list({ prefix: "q", continuation: tokenForOtherPrefix }))).kind.status).toBe(400);
  });

  test("copy and move replace the destination; move leaves no empty directory behind", async () => {
    const b = await make();
    await b.put("m/src/one", "1");
    await b.put("m/dst", "old");
    await b.copy("m/src/one", "m/dst");
    expect(text(await b.get("m/dst"))).toBe("1");
    expect(text(await b.get("m/src/one"))).toBe("1");
    await b.copy("m/src/one", "m/deep/er/copy");
    expect(text(await b.get("m/deep/er/copy"))).toBe("1");
    await b.move("m/src/one", "m/moved");
    expect(await b.stat("m/src/one")).toBeNull();
    expect(await b.stat("m/src")).toBeNull();
    expect(text(await b.get("m/moved"))).toBe("1");
    expect(paths((await b.list({ prefix: "m" })).entries)).toEqual(["m/deep/", "m/dst", "m/moved"]);
  });

  test("delete removes a file and directories it leaves empty; deleteAll removes a subtree or everything", async () => {
    const b = await make();
    for (const p of ["x/1", "x/y/2", "x/y/z/3", "w/4"]) await b.put(p, "x");
    expect(await b.delete("x/y/z/3")).toBe(true);
    expect(await b.stat("x/y/z")).toBeNull();
    expect(await b.stat("x/y")).toMatchObject({ isDir: true });
    expect(await b.deleteAll("x/y")).toBe(1);
    expect(paths((await b.list({ depth: -1 })).entries)).toEqual(["w/", "w/4", "x/", "x/1"]);
    expect(await b.deleteAll("nothing/here")).toBe(0);
    expect(await b.deleteAll("")).toBe(2);
    expect((await b.list({ depth: -1 })).entries).toEqual([]);
  });
}
