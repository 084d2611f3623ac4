// File sync's chunks and resumption, in process: two nodes (an edge and a platform, each with its
// database, part and copy directories and a local set) joined by a link this test carries frame by
// frame, and can cut. A cut transfer goes on from the bytes the receiver holds; the file lands
// once, whole; a transfer replaced by a newer version of the file never mixes into it.
import { afterAll, beforeEach, describe, expect, spyOn, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../../src/core/log.ts";
import { type Db, openDb } from "../../../src/store/db.ts";
import { fileTransfersRepo } from "../../../src/store/fileTransfers.ts";
import { LocalFiles } from "../../../src/store/files/local.ts";
import { migrate } from "../../../src/store/migrations.ts";
import type { FileBackend } from "../../../src/store/files/backend.ts";
import { CHUNK_BYTES, decodeChunk, encodeChunk, type FilePeer, FileSync, type FileSyncDeps } from "../../../src/sync/files.ts";
import { ChunkFrames, newCheck } from "../../../src/sync/files/wire.ts";

const base = mkdtempSync(join(tmpdir(), "outpost-filesync-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const SK = "sk1", EDGE = "gw1", SET = "logs";
let n = 0;

interface Node { files: FileSync; db: Db; set: LocalFiles; dir: string }

/** `storage`: the set's backend as the node sees it (default: the local directory itself); `db`
 *  and `shared`: a node of a clustered platform, on the database of another. */
async function node(side: "edge" | "platform", opts: { maxBytes?: number; inflight?: number; storage?: (set: LocalFiles) => FileBackend; db?: Db;
  shared?: FileSyncDeps["shared"]; set?: LocalFiles } = {}): Promise<Node> {
  const dir = join(base, `${side}${n++}`);
  const db = opts.db ?? await openDb({ url: ":memory:" });
  if (!opts.db) await migrate(db);
  const set = opts.set ?? new LocalFiles(join(dir, "set"));
  const storage = opts.storage?.(set) ?? set;
  const files = new FileSync({ db, log: createLogger("silent"), side, dir: join(dir, "filesync"), maxBytes: opts.maxBytes ?? 64 * 1024 * 1024,
    inflightBytes: opts.inflight ?? 2 * CHUNK_BYTES, backend: async (sk, name) => (sk === SK && name === SET ? storage : null), shared: opts.shared });
  return { files, db, set, dir };
}

/** A local directory as object storage is seen: kind s3, no fast paths for files of this machine,
 *  down (every call refused) while `faults.down` holds, and refusing to store the paths `refuses`. */
function objectStorage(set: LocalFiles, faults: { down: boolean; refuses?: RegExp } = { down: false }): FileBackend {
  const guard = <A extends unknown[], R>(f: (...a: A) => Promise<R>) => (...a: A): Promise<R> =>
    faults.down ? Promise.reject(new Error("object storage: Unable to connect")) : f(...a);
  return {
    kind: "s3",
    put: guard((p, b, o) => (faults.refuses?.test(p) ? Promise.reject(new Error("object storage: InvalidAccessKeyId")) : set.put(p, b, o))), get: guard((p, r) => set.get(p, r)), stream: guard((p, st) => set.stream(p, st)),
    stat: guard((p) => set.stat(p)), list: guard((o) => set.list(o)), copy: guard((a, b) => set.copy(a, b)), move: guard((a, b) => set.move(a, b)),
    delete: guard((p) => set.delete(p)), deleteAll: guard((p) => set.deleteAll(p)),
  };
}

/** A link between an edge and a platform: frames wait in a queue each way until delivered; a cut
 *  drops what waits and tells both sides. */
class Link {
  queue: { to: "edge" | "platform"; frame: unknown }[] = [];
  up = 0;
  edgePeer!: FilePeer;
  platformPeer!: FilePeer;
  constructor(readonly edge: Node, readonly platform: Node) {}
  open() {
    const carry = (to: "edge" | "platform") => ({
      send: (m: unknown) => this.queue.push({ to, frame: JSON.parse(JSON.stringify(m)) }),
      sendBinary: (b: Uint8Array) => { if (to === "platform") this.up += b.length; this.queue.push({ to, frame: new Uint8Array(b) }); },
    });
    // the platform as the edge sees it, and the edge as the platform sees it
    this.edgePeer = { systemKey: SK, edge: EDGE, ...carry("platform") };
    this.platformPeer = { systemKey: SK, edge: EDGE, ...carry("edge") };
    this.edge.files.peerUp(this.edgePeer);
    this.platform.files.peerUp(this.platformPeer);
  }
  async cut() {
    this.queue = [];
    await this.edge.files.peerLost(this.edgePeer);
    await this.platform.files.peerLost(this.platformPeer);
  }
  /** Delivers frames one at a time until `until` holds or nothing moves. */
  async run(until: () => boolean | Promise<boolean> = () => false, maxIdle = 50) {
    for (let idle = 0; idle < maxIdle;) {
      if (await until()) return true;
      const f = this.queue.shift();
      if (!f) { idle++; await Bun.sleep(5); continue; }
      idle = 0;
      const [files, peer] = f.to === "platform" ? [this.platform.files, this.platformPeer] : [this.edge.files, this.edgePeer];
      if (f.frame instanceof Uint8Array) files.chunk(peer, f.frame);
      else await files.message(peer, f.frame);
      await Bun.sleep(0);
    }
    return until();
  }
}

let edge: Node, platform: Node, link: Link;
beforeEach(async () => {
  edge = await node("edge");
  platform = await node("platform");
  link = new Link(edge, platform);
});

const status = async (x: Node, path: string) => (await x.files.status(SK, EDGE)).find((f) => f.asset_name === `${SET}/${path}`);
const landed = async (path: string) => (await platform.set.stat(`inbox/${EDGE}/${path}`)) !== null;

describe("chunk frames", () => {
  test("carry the transfer, the offset and the bytes; anything else is not one", () => {
    const bytes = randomBytes(1000);
    const f = decodeChunk(encodeChunk("abc-123", 5 * CHUNK_BYTES, bytes))!;
    expect([f.id, f.offset, sha(f.bytes)]).toEqual(["abc-123", 5 * CHUNK_BYTES, sha(bytes)]);
    expect(decodeChunk(new TextEncoder().encode('{"t":"ping"}'))).toBeNull();
    expect(decodeChunk(new Uint8Array([1, 200, 0]))).toBeNull();
    const bad = encodeChunk("x", 0, bytes);
    new DataView(bad.buffer).setFloat64(3, -1);
    expect(decodeChunk(bad)).toBeNull();
  });

  test("a transfer's frames are made in one buffer, each whole when made (sending copies it)", () => {
    const frames = new ChunkFrames("t-9", 4);
    const first = frames.frame(0, 4);
    first.set([1, 2, 3, 4], first.length - 4);
    const sent = new Uint8Array(first);
    const last = frames.frame(4, 2);
    last.set([5, 6], last.length - 2);
    expect(last.buffer).toBe(first.buffer);
    const [a, b] = [decodeChunk(sent)!, decodeChunk(last)!];
    expect([a.id, a.offset, [...a.bytes]]).toEqual(["t-9", 0, [1, 2, 3, 4]]);
    expect([b.id, b.offset, [...b.bytes]]).toEqual(["t-9", 4, [5, 6]]);
  });
});

describe("transfers", () => {
  test("a file goes in chunks, never more than the window ahead, and lands whole with its status synced on both sides", async () => {
    const bytes = randomBytes(5 * CHUNK_BYTES + 123);
    await edge.set.put("outbox/a/b.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/a/b.bin", "a/b.bin");
    let most = 0;
    expect(await link.run(async () => {
      const waiting = link.queue.filter((q) => q.frame instanceof Uint8Array).reduce((x, q) => x + (q.frame as Uint8Array).length, 0);
      most = Math.max(most, waiting);
      return landed("a/b.bin");
    })).toBe(true);
    expect(most).toBeLessThanOrEqual(2 * CHUNK_BYTES + 200);
    expect(sha(await platform.set.get(`inbox/${EDGE}/a/b.bin`))).toBe(sha(bytes));
    await link.run(async () => (await status(edge, "a/b.bin"))?.status === "synced");
    expect((await status(edge, "a/b.bin"))).toMatchObject({ status: "synced", direction: "to_platform", bytes_done: bytes.length });
    expect((await status(platform, "a/b.bin"))).toMatchObject({ status: "synced", direction: "to_platform", bytes_total: bytes.length });
    // what waited aside is gone on both sides
    expect(readdirSync(join(edge.dir, "filesync", "out"))).toEqual([]);
    expect(readdirSync(join(platform.dir, "filesync", "in"))).toEqual([]);
  });

  test("cut in the middle: the part stays, and the next link sends only the rest", async () => {
    const bytes = randomBytes(6 * CHUNK_BYTES);
    await edge.set.put("outbox/big.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/big.bin", "big.bin");
    await link.run(async () => ((await status(platform, "big.bin"))?.bytes_done ?? 0) >= 3 * CHUNK_BYTES);
    await link.cut();
    const held = (await status(platform, "big.bin"))!;
    expect(held.status).toBe("transferring");
    // (a chunk being written when the link went is held too: writes finish before the cut is written down)
    expect(held.bytes_done % CHUNK_BYTES).toBe(0);
    expect(held.bytes_done).toBeGreaterThanOrEqual(3 * CHUNK_BYTES);
    expect(held.bytes_done).toBeLessThan(bytes.length);
    expect(await landed("big.bin")).toBe(false);
    link.up = 0;
    link.open();
    expect(await link.run(() => landed("big.bin"))).toBe(true);
    // the rest and the frames' headers, not the whole file again
    expect(link.up).toBeLessThan(bytes.length - held.bytes_done + 1000);
    expect(link.up).toBeGreaterThanOrEqual(bytes.length - held.bytes_done);
    expect(sha(await platform.set.get(`inbox/${EDGE}/big.bin`))).toBe(sha(bytes));
  });

  test("a sender restarted (a new node on the same database and directories) resumes too", async () => {
    const bytes = randomBytes(4 * CHUNK_BYTES);
    await edge.set.put("outbox/r.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/r.bin", "r.bin");
    await link.run(async () => ((await status(platform, "r.bin"))?.bytes_done ?? 0) >= 2 * CHUNK_BYTES);
    await link.cut();
    const again = new FileSync({ db: edge.db, log: createLogger("silent"), side: "edge", dir: join(edge.dir, "filesync"), maxBytes: 1e9, inflightBytes: 2 * CHUNK_BYTES,
      backend: async () => edge.set });
    link.edge.files = again;
    link.up = 0;
    link.open();
    expect(await link.run(() => landed("r.bin"))).toBe(true);
    expect(link.up).toBeLessThan(2 * CHUNK_BYTES + 1000);
    expect(sha(await platform.set.get(`inbox/${EDGE}/r.bin`))).toBe(sha(bytes));
  });

  test("written again while it moves: the earlier transfer is dropped, its part too, and the last version lands", async () => {
    const v1 = randomBytes(4 * CHUNK_BYTES), v2 = randomBytes(3 * CHUNK_BYTES + 5);
    await edge.set.put("outbox/v.bin", v1);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/v.bin", "v.bin");
    await link.run(async () => ((await status(platform, "v.bin"))?.bytes_done ?? 0) >= CHUNK_BYTES);
    await edge.set.put("outbox/v.bin", v2);
    await edge.files.enqueue(SK, EDGE, SET, "outbox/v.bin", "v.bin");
    expect(await link.run(async () => (await status(edge, "v.bin"))?.status === "synced")).toBe(true);
    expect(sha(await platform.set.get(`inbox/${EDGE}/v.bin`))).toBe(sha(v2));
    expect((await platform.files.status(SK, EDGE)).map((f) => f.status)).toEqual(["synced"]);
    expect(readdirSync(join(platform.dir, "filesync", "in"))).toEqual([]);
  });

  test("a transfer dropped while it is being stored closes its part once: the next one's file, opened meanwhile, is not cut", async () => {
    // (a number closed twice may by then be the next transfer's part: its bytes would then fail)
    let release = () => {}, adopting = () => {};
    const stored = new Promise<void>((r) => { release = r; }), storing = new Promise<void>((r) => { adopting = r; });
    const slow = await node("platform", { storage: (set) => Object.assign(Object.create(set) as LocalFiles, { adopt: async (p: string, f: string) => { adopting(); await stored; return set.adopt(p, f); } }) });
    const l = new Link(edge, slow);
    l.open();
    const peer = l.platformPeer;
    const offer = (id: string, bytes: Uint8Array) => slow.files.message(peer, { t: "file_offer", id, set: SET, path: "v.bin", size: bytes.length, check: "crc32" });
    const send = (id: string, bytes: Uint8Array) => {
      for (let at = 0; at < bytes.length; at += CHUNK_BYTES) slow.files.chunk(peer, encodeChunk(id, at, bytes.subarray(at, at + CHUNK_BYTES)));
      const c = newCheck("crc32");
      c.update(bytes);
      return slow.files.message(peer, { t: "file_end", id, ...c.wire() });
    };
    const v1 = randomBytes(2 * CHUNK_BYTES), v2 = randomBytes(CHUNK_BYTES + 3);
    await offer("a", v1);
    await send("a", v1);
    await storing;
    // the sender replaced it while the receiver stores it: the cancel, then the next version's offer
    const cancelled = slow.files.message(peer, { t: "file_cancel", id: "a" });
    await offer("b", v2);
    release();
    await cancelled;
    await send("b", v2);
    let st: Awaited<ReturnType<typeof status>>;
    for (let w = 0; w < 200 && ((st = (await slow.files.status(SK, EDGE)).find((f) => f.asset_name === `${SET}/v.bin`))?.status ?? "transferring") === "transferring"; w++) await Bun.sleep(5);
    expect([st?.status, st?.last_error]).toEqual(["synced", ""]);
    expect(sha(await slow.set.get(`inbox/${EDGE}/v.bin`))).toBe(sha(v2));
  });

  test("over the limit: failed at once on the sender; over the receiver's: refused, and the next one goes", async () => {
    const small = await node("edge", { maxBytes: 1000 });
    await small.set.put("outbox/x.bin", randomBytes(1001));
    const t = (await small.files.enqueue(SK, EDGE, SET, "outbox/x.bin", "x.bin"))!;
    expect([t.status, t.error]).toEqual(["failed", "the file is 1001 bytes, over --file-sync-max-bytes (1000)"]);
    expect(readdirSync(join(small.dir, "filesync", "out"))).toEqual([]);

    platform = await node("platform", { maxBytes: 2000 });
    link = new Link(edge, platform);
    await edge.set.put("outbox/y.bin", randomBytes(3000));
    await edge.set.put("outbox/z.bin", randomBytes(10));
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/y.bin", "y.bin");
    await edge.files.enqueue(SK, EDGE, SET, "outbox/z.bin", "z.bin");
    expect(await link.run(() => landed("z.bin"))).toBe(true);
    expect(await status(edge, "y.bin")).toMatchObject({ status: "failed", last_error: "the file is 3000 bytes, over the receiver's --file-sync-max-bytes (2000)" });
    expect((await status(platform, "y.bin"))?.status).toBe("failed");
  });

  test("a set the receiver lacks, or a path that climbs out of the box, is refused with why", async () => {
    link.open();
    // offers as the edge would send them, answered to the edge
    await platform.files.message(link.platformPeer, { t: "file_offer", id: "t-1", set: "nope", path: "a.bin", size: 3 });
    await platform.files.message(link.platformPeer, { t: "file_offer", id: "t-2", set: SET, path: "../a.bin", size: 3 });
    const answers = link.queue.splice(0).map((q) => q.frame);
    expect(answers).toEqual([
      { t: "file_failed", id: "t-1", error: "no bucket set 'nope' on the platform" },
      expect.objectContaining({ t: "file_failed", id: "t-2" }),
    ]);
    expect(existsSync(join(platform.dir, "set", "inbox"))).toBe(false);
  });

  test("an edge forgotten (deleted): its transfers go on both sides, with the files kept for them", async () => {
    await edge.set.put("outbox/f.bin", randomBytes(3 * CHUNK_BYTES));
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/f.bin", "f.bin");
    await link.run(async () => ((await status(platform, "f.bin"))?.bytes_done ?? 0) >= CHUNK_BYTES);
    await link.cut();
    expect(readdirSync(join(platform.dir, "filesync", "in"))).toHaveLength(1);
    await platform.files.forget(SK, EDGE);
    await edge.files.forget(SK);
    expect(await platform.files.status(SK, EDGE)).toEqual([]);
    expect(await edge.files.status(SK, EDGE)).toEqual([]);
    expect(readdirSync(join(platform.dir, "filesync", "in"))).toEqual([]);
    expect(readdirSync(join(edge.dir, "filesync", "out"))).toEqual([]);
  });

    test("bytes that do not match the hash are not stored", async () => {
    link.open();
    await platform.files.message(link.platformPeer, { t: "file_offer", id: "t-3", set: SET, path: "h.bin", size: 4 });
    platform.files.chunk(link.platformPeer, encodeChunk("t-3", 0, new Uint8Array([1, 2, 3, 4])));
    await platform.files.message(link.platformPeer, { t: "file_end", id: "t-3", sha256: "0".repeat(64) });
    expect(await link.run(async () => (await status(platform, "h.bin"))?.status === "failed")).toBe(true);
    expect((await status(platform, "h.bin"))?.last_error).toMatch(/does not match its check/);
    expect(await landed("h.bin")).toBe(false);
    // checked with CRC-32 when the offer asks for it
    await platform.files.message(link.platformPeer, { t: "file_offer", id: "t-4", set: SET, path: "c.bin", size: 4, check: "crc32" });
    expect(link.queue.at(-1)?.frame).toEqual({ t: "file_accept", id: "t-4", offset: 0, check: "crc32" });
    platform.files.chunk(link.platformPeer, encodeChunk("t-4", 0, new Uint8Array([1, 2, 3, 4])));
    await platform.files.message(link.platformPeer, { t: "file_end", id: "t-4", crc32: (Bun.hash.crc32(new Uint8Array([1, 2, 3, 5])) as number) });
    expect(await link.run(async () => (await status(platform, "c.bin"))?.status === "failed")).toBe(true);
    expect(await landed("c.bin")).toBe(false);
  });

  test("a side of an earlier version (no check in its offer or accept): both use SHA-256, and the file lands", async () => {
    const bytes = randomBytes(2 * CHUNK_BYTES + 3);
    await edge.set.put("outbox/old.bin", bytes);
    link.open();
    // what an earlier version sends has no `check`: stripped both ways, and the end's kind noted
    const ends: string[] = [];
    for (const peer of [link.edgePeer, link.platformPeer]) {
      const send = peer.send;
      peer.send = (m) => { const { check: _, ...rest } = m as { check?: string }; if (m.t === "file_end") ends.push(Object.keys(m).join(",")); send(rest as typeof m); };
    }
    await edge.files.enqueue(SK, EDGE, SET, "outbox/old.bin", "old.bin");
    expect(await link.run(() => landed("old.bin"))).toBe(true);
    expect(sha(await platform.set.get(`inbox/${EDGE}/old.bin`))).toBe(sha(bytes));
    expect(ends).toEqual(["t,id,sha256"]);
  });

  test("between two sides of this version: checked with CRC-32", async () => {
    await edge.set.put("outbox/new.bin", randomBytes(CHUNK_BYTES + 1));
    link.open();
    const ends: unknown[] = [];
    const send = link.edgePeer.send;
    link.edgePeer.send = (m) => { if (m.t === "file_end") ends.push(m); send(m); };
    await edge.files.enqueue(SK, EDGE, SET, "outbox/new.bin", "new.bin");
    expect(await link.run(() => landed("new.bin"))).toBe(true);
    expect(ends).toEqual([{ t: "file_end", id: expect.any(String), crc32: expect.any(Number) }]);
  });

  test("the receiver's storage down: the whole part stays, both sides say why, and it is stored once storage is back", async () => {
    const faults = { down: true };
    platform = await node("platform", { storage: (set) => objectStorage(set, faults) });
    link = new Link(edge, platform);
    const bytes = randomBytes(3 * CHUNK_BYTES + 5);
    await edge.set.put("outbox/s.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/s.bin", "s.bin");
    expect(await link.run(async () => /storing the file in the platform's bucket set failed.*Unable to connect/.test((await status(edge, "s.bin"))?.last_error ?? ""))).toBe(true);
    const held = (await status(platform, "s.bin"))!;
    expect([held.status, held.bytes_done]).toEqual(["transferring", bytes.length]);
    expect(held.last_error).toMatch(/Unable to connect/);
    expect((await status(edge, "s.bin"))?.status).toBe("transferring");
    // back: the next try stores it (no byte sent again)
    const sentBefore = link.up;
    faults.down = false;
    expect(await link.run(async () => (await status(edge, "s.bin"))?.status === "synced", 600)).toBe(true);
    expect(sha(await platform.set.get(`inbox/${EDGE}/s.bin`))).toBe(sha(bytes));
    expect(link.up).toBe(sentBefore);
    expect((await status(platform, "s.bin"))?.last_error).toBe("");
  });

  test("the receiver's storage down across a cut: the next link stores what the part holds, sending no byte again", async () => {
    const faults = { down: true };
    platform = await node("platform", { storage: (set) => objectStorage(set, faults) });
    link = new Link(edge, platform);
    const bytes = randomBytes(2 * CHUNK_BYTES);
    await edge.set.put("outbox/c.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/c.bin", "c.bin");
    expect(await link.run(async () => ((await status(platform, "c.bin"))?.last_error ?? "") !== "")).toBe(true);
    await link.cut();
    faults.down = false;
    link.up = 0;
    link.open();
    expect(await link.run(async () => (await status(edge, "c.bin"))?.status === "synced")).toBe(true);
    expect(link.up).toBe(0);
    expect(sha(await platform.set.get(`inbox/${EDGE}/c.bin`))).toBe(sha(bytes));
  });

  test("the sender's storage unreadable when a file is queued: its transfer fails with why; the next goes", async () => {
    const faults = { down: false };
    edge = await node("edge", { storage: (set) => objectStorage(set, faults) });
    link = new Link(edge, platform);
    await edge.set.put("outbox/u.bin", randomBytes(100));
    await edge.set.put("outbox/v.bin", randomBytes(100));
    link.open();
    faults.down = true;
    const t = (await edge.files.enqueue(SK, EDGE, SET, "outbox/u.bin", "u.bin"))!;
    expect([t.status, t.error]).toEqual(["failed", expect.stringMatching(/reading the file from the edge's bucket set failed.*Unable to connect/)]);
    faults.down = false;
    await edge.files.enqueue(SK, EDGE, SET, "outbox/v.bin", "v.bin");
    expect(await link.run(() => landed("v.bin"))).toBe(true);
    expect((await status(edge, "u.bin"))?.status).toBe("failed");
  });

  test("a clustered platform: the version a node keeps is in the set's object storage, and the node holding the link sends it", async () => {
    const woken: string[] = [];
    const shared = { queued: (sk: string, e: string) => { woken.push(`${sk}/${e}`); void holder.files.wake(sk, e); } };
    const taker = await node("platform", { storage: (set) => objectStorage(set), shared });
    const holder = await node("platform", { storage: (set) => objectStorage(set), shared, db: taker.db, set: taker.set });
    link = new Link(edge, holder);
    link.open();
    const bytes = randomBytes(2 * CHUNK_BYTES + 9);
    await taker.set.put("sandbox/model.bin", bytes);
    const t = (await taker.files.enqueue(SK, EDGE, SET, "sandbox/model.bin", "model.bin"))!;
    expect(t.status).toBe("pending");
    expect(woken).toEqual([`${SK}/${EDGE}`]);
    // kept beside the boxes, not on the node that took it
    expect((await taker.set.stat(`.outpost-filesync/${t.id}`))?.size).toBe(bytes.length);
    expect(readdirSync(join(taker.dir, "filesync", "out"))).toEqual([]);
    expect(await link.run(async () => (await edge.set.stat("inbox/model.bin")) !== null)).toBe(true);
    expect(sha(await edge.set.get("inbox/model.bin"))).toBe(sha(bytes));
    expect(await link.run(async () => (await taker.set.stat(`.outpost-filesync/${t.id}`)) === null)).toBe(true);
    expect((await holder.files.status(SK, EDGE)).find((f) => f.asset_name === `${SET}/model.bin`)?.status).toBe("synced");
  });

  test("a clustered platform with the set on a local directory: the node holding the link says why it cannot send", async () => {
    const shared = { queued: () => {} };
    const taker = await node("platform", { shared });
    const holder = await node("platform", { shared, db: taker.db });
    await taker.set.put("sandbox/x.bin", randomBytes(10));
    await taker.files.enqueue(SK, EDGE, SET, "sandbox/x.bin", "x.bin");
    link = new Link(edge, holder);
    link.open();
    expect(await link.run(async () => (await holder.files.status(SK, EDGE))[0]?.status === "failed")).toBe(true);
    expect((await holder.files.status(SK, EDGE))[0]?.last_error).toMatch(/kept on the platform node that took the request.*S3/);
  });

  test("a file its receiver cannot store does not hold up the ones behind it; it is stored when the receiver's retry works", async () => {
    const faults = { down: false, refuses: /refused/ as RegExp | undefined };
    platform = await node("platform", { storage: (set) => objectStorage(set, faults) });
    link = new Link(edge, platform);
    await edge.set.put("outbox/refused.bin", randomBytes(CHUNK_BYTES));
    await edge.set.put("outbox/next.bin", randomBytes(100));
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/refused.bin", "refused.bin");
    await edge.files.enqueue(SK, EDGE, SET, "outbox/next.bin", "next.bin");
    expect(await link.run(() => landed("next.bin"))).toBe(true);
    const waiting = (await status(edge, "refused.bin"))!;
    expect([waiting.status, waiting.last_error]).toEqual(["transferring", expect.stringMatching(/InvalidAccessKeyId/)]);
    faults.refuses = undefined;
    expect(await link.run(async () => (await status(edge, "refused.bin"))?.status === "synced", 600)).toBe(true);
    expect(await landed("refused.bin")).toBe(true);
  });

  test("a new link up while the old one's transfer is written down: the transfer goes on on the new one", async () => {
    const bytes = randomBytes(4 * CHUNK_BYTES);
    await edge.set.put("outbox/r.bin", bytes);
    link.open();
    await edge.files.enqueue(SK, EDGE, SET, "outbox/r.bin", "r.bin");
    expect(await link.run(async () => ((await status(platform, "r.bin"))?.bytes_done ?? 0) >= CHUNK_BYTES)).toBe(true);
    // the old link's loss is still being written down when the new link comes up
    const [oldEdge, oldPlatform] = [link.edgePeer, link.platformPeer];
    link.queue = [];
    const lost = Promise.all([edge.files.peerLost(oldEdge), platform.files.peerLost(oldPlatform)]);
    link.open();
    await lost;
    expect(await link.run(() => landed("r.bin"))).toBe(true);
    expect(sha(await platform.set.get(`inbox/${EDGE}/r.bin`))).toBe(sha(bytes));
  });

  test("links coming up with nothing to send read the transfers once per system, not once per link; one recorded later is sent", async () => {
    const unfinished = spyOn(fileTransfersRepo, "unfinished"), peers = spyOn(fileTransfersRepo, "peersWithUnfinished");
    try {
      // a herd of links of edges with no transfer
      const quiet = Array.from({ length: 50 }, (_, i): FilePeer => ({ systemKey: SK, edge: `quiet-${i}`, send: () => {}, sendBinary: () => {} }));
      for (const p of quiet) platform.files.peerUp(p);
      link.open();
      const bytes = randomBytes(CHUNK_BYTES + 7);
      await platform.set.put("sandbox/cfg.bin", bytes);
      await platform.files.enqueue(SK, EDGE, SET, "sandbox/cfg.bin", "cfg.bin");
      expect(await link.run(async () => (await edge.set.stat("inbox/cfg.bin")) !== null)).toBe(true);
      expect(sha(await edge.set.get("inbox/cfg.bin"))).toBe(sha(bytes));
      expect(await link.run(async () => (await status(platform, "cfg.bin"))?.status === "synced")).toBe(true);
      const onPlatform = (calls: unknown[][]) => calls.filter((c) => c[0] === platform.db).length;
      expect(onPlatform(peers.mock.calls)).toBe(1);
      // read only for the edge that had a transfer (when it was recorded, and when it was done)
      expect(unfinished.mock.calls.filter((c) => c[0] === platform.db).every((c) => c[2] === EDGE)).toBe(true);
      // done: that edge's next link reads nothing either, nor do the others coming back
      const before = onPlatform(unfinished.mock.calls);
      await link.cut();
      for (const p of quiet) { await platform.files.peerLost(p); platform.files.peerUp(p); }
      link.open();
      expect(onPlatform(unfinished.mock.calls)).toBe(before);
      // (a file recorded after them is sent: their links' pumps ran before it, reading nothing)
      await platform.set.put("sandbox/cfg2.bin", bytes);
      await platform.files.enqueue(SK, EDGE, SET, "sandbox/cfg2.bin", "cfg2.bin");
      expect(await link.run(async () => (await edge.set.stat("inbox/cfg2.bin")) !== null)).toBe(true);
      expect(unfinished.mock.calls.filter((c) => c[0] === platform.db).every((c) => c[2] === EDGE)).toBe(true);
      expect(onPlatform(peers.mock.calls)).toBe(1);
    } finally {
      unfinished.mockRestore();
      peers.mockRestore();
    }
  });
});
