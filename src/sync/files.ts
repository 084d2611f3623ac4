// Files between an edge and its platform, over the sync link: what an edge writes to a bucket
// set's outbox lands on the platform under the set's `inbox/<edge>/`, and a file the platform
// sends an edge lands in the edge's `inbox/`. Both sides run this same code, as sender and as
// receiver.
//
// The sender keeps the file aside when it is written (a hard link to that version on local
// storage, else a copy), so a later write of the same path cannot mix into the bytes being sent
// (the later version replaces the earlier one's transfer), and keeps the transfer in its
// database: both survive a restart. It offers the file; the receiver answers with how much of it
// it already holds (a part file in its data directory, kept across link cuts and restarts), and
// the sender sends the rest in binary frames of up to CHUNK_BYTES, never more than
// --file-sync-inflight-bytes ahead of the receiver's acknowledgements, then the file's SHA-256
// (both sides hash the bytes as they pass; a resumed side hashes what it held first). Once the
// receiver holds every byte and the hashes match, it stores the file in the set's storage in one
// step (a reader sees the old file or the new one) and says done.
// A file over --file-sync-max-bytes (the sender's, or the receiver's) fails at once, with why.
import { createHash, type Hash, randomUUID } from "node:crypto";
import { closeSync, mkdirSync, openSync, readSync, writeSync } from "node:fs";
import { rm, stat, truncate } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { Logger } from "../core/log.ts";
import type { Db } from "../store/db.ts";
import { fail, notFound } from "../core/errors.ts";
import { checkBox, type EdgeFileSender } from "../domain/bucketSets.ts";
import { checkPath, type FileBackend } from "../store/files/backend.ts";
import { type FileTransferRow, fileTransfersRepo, type TransferStatus } from "../store/fileTransfers.ts";

/** The first byte of a binary frame that carries file bytes (JSON frames start with '{'). */
export const CHUNK_FRAME = 1;
/** The most file bytes one frame carries. */
export const CHUNK_BYTES = 1024 * 1024;
/** How often a transfer's progress is written down while it runs (ms). */
const PROGRESS_MS = 500;

/** The file messages, either way (the receiver's answers and the sender's offers). */
export const FILE_MESSAGES = [
  z.object({ t: z.literal("file_offer"), id: z.string().min(1).max(100), set: z.string().min(1).max(128), path: z.string().min(1).max(1024),
    size: z.number().int().min(0) }),
  // after the last bytes: the file's SHA-256, for the receiver to check what it holds
  z.object({ t: z.literal("file_end"), id: z.string().max(100), sha256: z.string().regex(/^[0-9a-f]{64}$/) }),
  z.object({ t: z.literal("file_accept"), id: z.string().max(100), offset: z.number().int().min(0) }),
  z.object({ t: z.literal("file_ack"), id: z.string().max(100), offset: z.number().int().min(0) }),
  z.object({ t: z.literal("file_done"), id: z.string().max(100) }),
  z.object({ t: z.literal("file_failed"), id: z.string().max(100), error: z.string().max(2000) }),
  z.object({ t: z.literal("file_cancel"), id: z.string().max(100) }),
] as const;
const FileMessage = z.discriminatedUnion("t", [...FILE_MESSAGES]);
export type FileMessage = z.infer<typeof FileMessage>;

/** Whether a message is one of file sync's. */
export const isFileMessage = (m: { t?: unknown }): boolean => typeof m.t === "string" && m.t.startsWith("file_");

/** A binary frame: CHUNK_FRAME, the id's length and bytes, the offset (8 bytes), the file bytes. */
export function encodeChunk(id: string, offset: number, bytes: Uint8Array): Uint8Array {
  const out = chunkFrame(id, offset, bytes.length);
  out.set(bytes, out.length - bytes.length);
  return out;
}

/** A frame with its head written and room for `n` file bytes at its end. */
function chunkFrame(id: string, offset: number, n: number): Uint8Array {
  const idBytes = Buffer.from(id);
  const out = new Uint8Array(10 + idBytes.length + n);
  out[0] = CHUNK_FRAME;
  out[1] = idBytes.length;
  out.set(idBytes, 2);
  new DataView(out.buffer).setFloat64(2 + idBytes.length, offset);
  return out;
}

export function decodeChunk(frame: Uint8Array): { id: string; offset: number; bytes: Uint8Array } | null {
  if (frame.length < 10 || frame[0] !== CHUNK_FRAME) return null;
  const n = frame[1]!;
  if (frame.length < 10 + n) return null;
  const offset = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getFloat64(2 + n);
  if (!Number.isSafeInteger(offset) || offset < 0) return null;
  return { id: Buffer.from(frame.subarray(2, 2 + n)).toString(), offset, bytes: frame.subarray(10 + n) };
}

/** The other side of a live link. */
export interface FilePeer {
  systemKey: string;
  /** the edge (on the platform, the peer; on an edge, itself) */
  edge: string;
  send(m: FileMessage): void;
  sendBinary(frame: Uint8Array): void;
}

export interface FileSyncDeps {
  db: Db; log: Logger;
  side: "edge" | "platform";
  /** where the copies being sent and the parts being received wait */
  dir: string;
  maxBytes: number;
  inflightBytes: number;
  /** a set's storage on this node (null: no such set here) */
  backend(systemKey: string, set: string): Promise<FileBackend | null>;
}

/** A transfer this side is sending on a live link. */
interface Sending { row: FileTransferRow; peer: FilePeer; accepted: boolean; sent: number; acked: number; pushing: boolean; savedAt: number;
  /** the bytes sent so far, hashed */
  hash: Hash | null }
/** A transfer this side is receiving. */
interface Receiving { row: FileTransferRow; peer: FilePeer;
  /** the part file, open for appending (written synchronously: a chunk is one call to the page cache) */
  fd: number; offset: number; writes: Promise<void>; savedAt: number; finishing: boolean;
  /** the bytes held, hashed; the hash the sender said (null: not yet) */
  hash: Hash; expected: string | null }

/** What a transfer looks like in sync status, on either side. */
export interface FileStatus {
  asset_type: "file"; asset_name: string; status: TransferStatus; direction: "to_platform" | "to_edge";
  bytes_done: number; bytes_total: number; last_error: string; updated_at: string;
}

export class FileSync {
  private readonly peers = new Map<string, FilePeer>();
  private readonly sending = new Map<string, Sending>();
  private readonly receiving = new Map<string, Receiving>();
  /** enqueued files are copied aside one after another, so the last write of a path wins */
  private queue: Promise<unknown> = Promise.resolve();
  /** file bytes sent and received since the process started (/metrics) */
  bytesSent = 0;
  bytesReceived = 0;
  private readonly outDir: string;
  private readonly inDir: string;

  constructor(private readonly d: FileSyncDeps) {
    this.outDir = join(d.dir, "out");
    this.inDir = join(d.dir, "in");
    mkdirSync(this.outDir, { recursive: true });
    mkdirSync(this.inDir, { recursive: true });
  }

  private static key(systemKey: string, edge: string) { return `${systemKey}/${edge}`; }
  private copyOf(id: string) { return join(this.outDir, id); }
  private partOf(id: string) { return join(this.inDir, `${id}.part`); }

  // ---- the link -----------------------------------------------------------------------------------

  /** A link is up: unfinished transfers to that side go on from where its receiver is. */
  peerUp(peer: FilePeer) {
    this.peers.set(FileSync.key(peer.systemKey, peer.edge), peer);
    void this.pump(peer.systemKey, peer.edge);
  }

  /** A link is gone: transfers on it wait for the next one (what each side holds stays). */
  async peerLost(peer: FilePeer) {
    const k = FileSync.key(peer.systemKey, peer.edge);
    if (this.peers.get(k) !== peer) return;
    this.peers.delete(k);
    // each is written down before it leaves the live maps, so the status never goes back
    const s = this.sending.get(k);
    if (s?.peer === peer) {
      await fileTransfersRepo.progress(this.d.db, s.row.id, "transferring", s.acked).catch(() => {});
      if (this.sending.get(k) === s) this.sending.delete(k);
    }
    for (const [id, r] of this.receiving) {
      if (r.peer !== peer) continue;
      await r.writes;
      if (!r.finishing) await fileTransfersRepo.progress(this.d.db, id, "transferring", r.offset).catch(() => {});
      if (this.receiving.get(id) === r) { this.receiving.delete(id); closeQuietly(r.fd); }
    }
  }

  /** A file message from a peer. */
  async message(peer: FilePeer, raw: unknown) {
    const parsed = FileMessage.safeParse(raw);
    if (!parsed.success) return;
    const m = parsed.data;
    switch (m.t) {
      case "file_offer": return this.offered(peer, m);
      case "file_accept": return this.accepted(peer, m.id, m.offset);
      case "file_ack": return this.acked(peer, m.id, m.offset);
      case "file_end": return this.ended(peer, m.id, m.sha256);
      case "file_done": return this.finished(peer, m.id, "synced", "");
      case "file_failed": return this.finished(peer, m.id, "failed", m.error);
      case "file_cancel": return this.cancelled(peer, m.id);
    }
  }

  // ---- sending ------------------------------------------------------------------------------------

  /** Sends a set's file to the other side: copied aside now, with its hash; an unfinished transfer
   *  of the same path to the same side is replaced. `path` is where the receiver places it in its
   *  box. Resolves once the transfer is recorded (failed when the file is too large). */
  enqueue(systemKey: string, edge: string, set: string, source: string, path: string): Promise<FileTransferRow | null> {
    const next = this.queue.then(() => this.record(systemKey, edge, set, source, path));
    this.queue = next.catch(() => {});
    return next;
  }

  private async record(systemKey: string, edge: string, set: string, source: string, path: string): Promise<FileTransferRow | null> {
    const files = await this.d.backend(systemKey, set);
    if (!files) return null;
    const st = await files.stat(source);
    if (!st || st.isDir) return null;
    const now = Date.now();
    const row: FileTransferRow = { id: randomUUID(), system_key: systemKey, edge, role: "send", set_name: set, path, source, size: st.size, sha256: "",
      done: 0, status: "pending", error: "", created_ms: now, updated_ms: now };
    await this.dropSamePath(systemKey, edge, set, path);
    if (st.size > this.d.maxBytes) {
      row.status = "failed";
      row.error = `the file is ${st.size} bytes, over --file-sync-max-bytes (${this.d.maxBytes})`;
      await fileTransfersRepo.insert(this.d.db, row);
      this.d.log.warn("file not sent: too large", { set, path: source, size: st.size, max: this.d.maxBytes });
      return row;
    }
    // the version to send: linked on local storage, else copied; the transfer is what was kept
    const copy = this.copyOf(row.id);
    const started = performance.now();
    let size: number;
    try {
      size = (await files.linkOut?.(source, copy)) ? (await stat(copy)).size : await copyTo(await files.stream(source), copy);
    } catch (err) {
      await rm(copy, { force: true });
      // gone meanwhile (deleted, moved): nothing to send
      if ((err as { code?: string }).code === "NOT_FOUND") return null;
      throw err;
    }
    row.size = size;
    this.d.log.debug("file queued", { set, path: source, size, keptMs: Math.round(performance.now() - started) });
    if (size > this.d.maxBytes) { row.status = "failed"; row.error = `the file is ${size} bytes, over --file-sync-max-bytes (${this.d.maxBytes})`; await rm(copy, { force: true }); }
    await fileTransfersRepo.insert(this.d.db, row);
    await fileTransfersRepo.prune(this.d.db, systemKey, edge, "send");
    void this.pump(systemKey, edge);
    return row;
  }

  /** The unfinished transfer of a path to a side is dropped (its file was deleted, or replaced). */
  cancel(systemKey: string, edge: string, set: string, path: string): Promise<void> {
    const next = this.queue.then(() => this.dropSamePath(systemKey, edge, set, path));
    this.queue = next.catch(() => {});
    return next;
  }

  private async dropSamePath(systemKey: string, edge: string, set: string, path: string) {
    const k = FileSync.key(systemKey, edge);
    for (const old of await fileTransfersRepo.samePath(this.d.db, systemKey, edge, "send", set, path)) {
      const s = this.sending.get(k);
      if (s?.row.id === old.id) { this.sending.delete(k); s.peer.send({ t: "file_cancel", id: old.id }); }
      else this.peers.get(k)?.send({ t: "file_cancel", id: old.id });
      await fileTransfersRepo.delete(this.d.db, old.id);
      await rm(this.copyOf(old.id), { force: true });
    }
    void this.pump(systemKey, edge);
  }

  /** Offers the oldest unfinished transfer to a side, when its link is up and none is running. */
  private async pump(systemKey: string, edge: string) {
    const k = FileSync.key(systemKey, edge);
    const peer = this.peers.get(k);
    if (!peer || this.sending.has(k)) return;
    const next = (await fileTransfersRepo.unfinished(this.d.db, systemKey, edge, "send"))[0];
    if (!next || this.sending.has(k) || this.peers.get(k) !== peer) return;
    this.sending.set(k, { row: next, peer, accepted: false, sent: 0, acked: 0, pushing: false, savedAt: 0, hash: null });
    peer.send({ t: "file_offer", id: next.id, set: next.set_name, path: next.path, size: next.size });
  }

  private current(peer: FilePeer, id: string): Sending | null {
    const s = this.sending.get(FileSync.key(peer.systemKey, peer.edge));
    return s && s.peer === peer && s.row.id === id ? s : null;
  }

  /** The receiver holds `offset` bytes: the rest goes from there. */
  private async accepted(peer: FilePeer, id: string, offset: number) {
    const s = this.current(peer, id);
    if (!s) return;
    s.sent = s.acked = Math.min(offset, s.row.size);
    // the bytes the receiver holds count in the hash: read again from the kept version
    s.hash = s.sent > 0 ? await hashFile(this.copyOf(id), s.sent) : createHash("sha256");
    if (this.current(peer, id) !== s) return;
    s.accepted = true;
    if (offset > 0) this.d.log.info("file transfer resumed", { set: s.row.set_name, path: s.row.source, offset, size: s.row.size });
    await fileTransfersRepo.progress(this.d.db, id, "transferring", s.acked);
    await this.push(s);
  }

  private async acked(peer: FilePeer, id: string, offset: number) {
    const s = this.current(peer, id);
    if (!s) return;
    s.acked = Math.max(s.acked, Math.min(offset, s.row.size));
    if (Date.now() - s.savedAt >= PROGRESS_MS) {
      s.savedAt = Date.now();
      await fileTransfersRepo.progress(this.d.db, id, "transferring", s.acked);
    }
    await this.push(s);
  }

  /** Sends chunks while fewer than --file-sync-inflight-bytes wait for the receiver. */
  private async push(s: Sending) {
    if (s.pushing) return;
    s.pushing = true;
    try {
      const fd = openSync(this.copyOf(s.row.id), "r");
      try {
        while (s.accepted && s.sent < s.row.size && s.sent - s.acked < this.d.inflightBytes && this.current(s.peer, s.row.id) === s) {
          const n = Math.min(CHUNK_BYTES, s.row.size - s.sent, Math.max(1, this.d.inflightBytes - (s.sent - s.acked)));
          // read straight into the frame, after its head
          const frame = chunkFrame(s.row.id, s.sent, n);
          const bytes = frame.subarray(frame.length - n);
          if (readAll(fd, bytes, s.sent) !== n) throw new Error(`the version of ${s.row.source} being sent is shorter than it was`);
          s.hash!.update(bytes);
          s.peer.sendBinary(frame);
          s.sent += n;
          this.bytesSent += n;
        }
      } finally {
        closeQuietly(fd);
      }
      if (s.accepted && s.sent === s.row.size && s.hash && this.current(s.peer, s.row.id) === s) {
        const sha256 = s.hash.digest("hex");
        s.hash = null;
        s.peer.send({ t: "file_end", id: s.row.id, sha256 });
        if (!s.row.sha256) { s.row.sha256 = sha256; await fileTransfersRepo.hashed(this.d.db, s.row.id, sha256); }
      }
    } catch (err) {
      this.d.log.warn("file transfer failed", { set: s.row.set_name, path: s.row.source, err });
      await this.finished(s.peer, s.row.id, "failed", String((err as Error)?.message ?? err));
      s.peer.send({ t: "file_cancel", id: s.row.id });
    } finally {
      s.pushing = false;
    }
  }

  /** The receiver holds the file (or refused it): the transfer ends, the next one starts. */
  private async finished(peer: FilePeer, id: string, status: "synced" | "failed", error: string) {
    const k = FileSync.key(peer.systemKey, peer.edge);
    const s = this.current(peer, id);
    if (s) this.sending.delete(k);
    const row = await fileTransfersRepo.get(this.d.db, id);
    if (row && row.role === "send" && (row.status === "pending" || row.status === "transferring")) {
      await fileTransfersRepo.progress(this.d.db, id, status, status === "synced" ? row.size : s?.acked ?? row.done, error);
      await rm(this.copyOf(id), { force: true });
      if (status === "failed") this.d.log.warn("file not delivered", { set: row.set_name, path: row.source, error });
      else this.d.log.info("file delivered", { set: row.set_name, path: row.source, size: row.size });
    }
    void this.pump(peer.systemKey, peer.edge);
  }

  // ---- receiving ----------------------------------------------------------------------------------

  /** Where a file from a peer lands in its set: the platform puts an edge's files under
   *  inbox/<edge>/, an edge puts the platform's in inbox/. */
  private destination(peer: FilePeer, path: string) {
    return this.d.side === "platform" ? `inbox/${peer.edge}/${path}` : `inbox/${path}`;
  }

  private async offered(peer: FilePeer, m: Extract<FileMessage, { t: "file_offer" }>) {
    const had = await fileTransfersRepo.get(this.d.db, m.id);
    if (had && (had.role !== "receive" || had.system_key !== peer.systemKey || had.edge !== peer.edge)) return peer.send({ t: "file_failed", id: m.id, error: "transfer id already in use" });
    if (had?.status === "synced") return peer.send({ t: "file_done", id: m.id });
    if (had?.status === "failed") return peer.send({ t: "file_failed", id: m.id, error: had.error });
    const now = Date.now();
    const row: FileTransferRow = had ?? { id: m.id, system_key: peer.systemKey, edge: peer.edge, role: "receive", set_name: m.set, path: m.path, source: "",
      size: m.size, sha256: "", done: 0, status: "transferring", error: "", created_ms: now, updated_ms: now };
    const refuse = async (error: string) => {
      if (had) await fileTransfersRepo.progress(this.d.db, m.id, "failed", 0, error);
      else await fileTransfersRepo.insert(this.d.db, { ...row, status: "failed", error });
      await rm(this.partOf(m.id), { force: true });
      this.d.log.warn("file refused", { edge: peer.edge, set: m.set, path: m.path, error });
      peer.send({ t: "file_failed", id: m.id, error });
    };
    let dest: string;
    try { dest = this.destination(peer, checkPath(m.path)); } catch (err) { return refuse((err as Error).message); }
    row.source = dest;
    if (m.size > this.d.maxBytes) return refuse(`the file is ${m.size} bytes, over the receiver's --file-sync-max-bytes (${this.d.maxBytes})`);
    if (!(await this.d.backend(peer.systemKey, m.set))) return refuse(`no bucket set '${m.set}' on the ${this.d.side}`);
    if (!had) {
      // an unfinished earlier version of the same file from the same side: the new one replaces it
      for (const old of await fileTransfersRepo.samePath(this.d.db, peer.systemKey, peer.edge, "receive", m.set, m.path)) await this.dropReceiving(old.id);
      await fileTransfersRepo.insert(this.d.db, row);
      await fileTransfersRepo.prune(this.d.db, peer.systemKey, peer.edge, "receive");
    }
    const prev = this.receiving.get(m.id);
    if (prev) { this.receiving.delete(m.id); await prev.writes; closeQuietly(prev.fd); }
    const part = this.partOf(m.id);
    let offset = (await stat(part).catch(() => null))?.size ?? 0;
    if (offset > m.size) { await truncate(part, 0); offset = 0; }
    // what was held counts in the hash
    const hash = offset > 0 ? await hashFile(part, offset) : createHash("sha256");
    const r: Receiving = { row, peer, fd: openSync(part, "a"), offset, writes: Promise.resolve(), savedAt: 0, finishing: false, hash, expected: null };
    this.receiving.set(m.id, r);
    this.d.log.debug("file accepted", { edge: peer.edge, path: dest, offset, size: m.size });
    peer.send({ t: "file_accept", id: m.id, offset });
  }

  /** File bytes from a peer: written at the end of the part file, acknowledged. Bytes that are not
   *  the next ones (left from an earlier link) are passed over. */
  chunk(peer: FilePeer, frame: Uint8Array) {
    const c = decodeChunk(frame);
    if (!c) return;
    const r = this.receiving.get(c.id);
    if (!r || r.peer !== peer || r.finishing) return;
    const bytes = c.bytes;
    r.writes = r.writes.then(async () => {
      if (this.receiving.get(c.id) !== r || c.offset !== r.offset || r.finishing) return;
      if (r.offset + bytes.length > r.row.size) { await this.fail(r, "the sender sent more bytes than the file has"); return; }
      r.hash.update(bytes);
      writeAll(r.fd, bytes);
      r.offset += bytes.length;
      this.bytesReceived += bytes.length;
      peer.send({ t: "file_ack", id: c.id, offset: r.offset });
      if (r.offset === r.row.size) { if (r.expected) await this.complete(r); }
      else if (Date.now() - r.savedAt >= PROGRESS_MS) {
        r.savedAt = Date.now();
        await fileTransfersRepo.progress(this.d.db, r.row.id, "transferring", r.offset);
      }
    }).catch((err) => this.fail(r, String((err as Error)?.message ?? err)));
  }

  /** The sender's hash of the file: checked once every byte is here. */
  private ended(peer: FilePeer, id: string, sha256: string) {
    const r = this.receiving.get(id);
    if (!r || r.peer !== peer || r.finishing) return;
    r.expected = sha256;
    r.writes = r.writes.then(() => (r.offset === r.row.size && !r.finishing ? this.complete(r) : undefined))
      .catch((err) => this.fail(r, String((err as Error)?.message ?? err)));
  }

  /** Every byte is here: checked against the hash, stored in the set in one step, said done. */
  private async complete(r: Receiving) {
    r.finishing = true;
    const started = performance.now();
    closeQuietly(r.fd);
    const part = this.partOf(r.row.id);
    if (r.hash.digest("hex") !== r.expected) {
      // what was received is not the file: it goes, and the sender starts over when it offers again
      await rm(part, { force: true });
      this.receiving.delete(r.row.id);
      await fileTransfersRepo.progress(this.d.db, r.row.id, "failed", 0, "the file received does not match its SHA-256");
      r.peer.send({ t: "file_failed", id: r.row.id, error: "the file received does not match its SHA-256" });
      return;
    }
    await fileTransfersRepo.hashed(this.d.db, r.row.id, r.expected);
    const files = await this.d.backend(r.row.system_key, r.row.set_name);
    if (!files) return this.fail(r, `no bucket set '${r.row.set_name}' on the ${this.d.side}`);
    // moved into place when the set's storage is on this machine, else its bytes are stored
    if (!(await files.adopt?.(r.row.source, part))) await files.put(r.row.source, Bun.file(part).stream());
    await fileTransfersRepo.progress(this.d.db, r.row.id, "synced", r.row.size);
    this.d.log.debug("file stored", { path: r.row.source, storeMs: Math.round(performance.now() - started) });
    await rm(part, { force: true });
    this.receiving.delete(r.row.id);
    this.d.log.info("file received", { edge: r.peer.edge, set: r.row.set_name, path: r.row.source, size: r.row.size });
    r.peer.send({ t: "file_done", id: r.row.id });
  }

  private async fail(r: Receiving, error: string) {
    this.receiving.delete(r.row.id);
    closeQuietly(r.fd);
    await rm(this.partOf(r.row.id), { force: true });
    await fileTransfersRepo.progress(this.d.db, r.row.id, "failed", r.offset, error).catch(() => {});
    this.d.log.warn("file not received", { edge: r.peer.edge, set: r.row.set_name, path: r.row.source, error });
    r.peer.send({ t: "file_failed", id: r.row.id, error });
  }

  /** The sender dropped a transfer (its file was replaced or deleted): its part goes. */
  private async cancelled(peer: FilePeer, id: string) {
    const row = await fileTransfersRepo.get(this.d.db, id);
    if (!row || row.role !== "receive" || row.system_key !== peer.systemKey || row.edge !== peer.edge || row.status === "synced") return;
    await this.dropReceiving(id);
  }

  private async dropReceiving(id: string) {
    const r = this.receiving.get(id);
    if (r) { this.receiving.delete(id); r.finishing = true; await r.writes.catch(() => {}); closeQuietly(r.fd); }
    await fileTransfersRepo.delete(this.d.db, id);
    await rm(this.partOf(id), { force: true });
  }

  // ---- status -------------------------------------------------------------------------------------

  /** Every transfer with an edge, as its sync status shows them (newest first). */
  async status(systemKey: string, edge: string): Promise<FileStatus[]> {
    const rows = await fileTransfersRepo.forEdge(this.d.db, systemKey, edge);
    const live = (r: FileTransferRow) => {
      const s = this.sending.get(FileSync.key(systemKey, edge));
      if (s?.row.id === r.id) return s.acked;
      return this.receiving.get(r.id)?.offset ?? r.done;
    };
    return rows.map((r) => {
      const toPlatform = (r.role === "send") === (this.d.side === "edge");
      return {
        asset_type: "file", asset_name: `${r.set_name}/${r.path}`, status: r.status,
        direction: toPlatform ? "to_platform" : "to_edge",
        bytes_done: r.status === "synced" ? r.size : live(r), bytes_total: r.size, last_error: r.error, updated_at: new Date(r.updated_ms).toISOString(),
      };
    });
  }
}

/** Reads `into.length` bytes of a file from `position` (fewer only at its end); how many. */
function readAll(fd: number, into: Uint8Array, position: number): number {
  let got = 0;
  while (got < into.length) {
    const n = readSync(fd, into, got, into.length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

function writeAll(fd: number, bytes: Uint8Array) {
  for (let done = 0; done < bytes.length;) done += writeSync(fd, bytes, done, bytes.length - done);
}

function closeQuietly(fd: number) { try { closeSync(fd); } catch { /* closed already */ } }

/** Writes a stream to a file; its size. */
async function copyTo(from: ReadableStream<Uint8Array>, to: string): Promise<number> {
  const sink = Bun.file(to).writer();
  let size = 0;
  try { for await (const chunk of from) { sink.write(chunk); size += chunk.byteLength; } }
  finally { await sink.end(); }
  return size;
}

/** The first `upTo` bytes of a file, hashed (what a resumed side held). */
async function hashFile(path: string, upTo: number): Promise<Hash> {
  const hash = createHash("sha256");
  for await (const chunk of Bun.file(path).slice(0, upTo).stream()) hash.update(chunk);
  return hash;
}

/** How the platform puts a set's file (`<box>/<path in the box>`) into an edge's inbox
 *  (syncFileToEdge): recorded at once, sent while the edge is linked. The answer is the transfer. */
export function edgeFileSender(files: FileSync, requireEdge: (systemKey: string, edge: string) => Promise<unknown>): EdgeFileSender {
  return {
    async sendToEdge(systemKey, set, path, edge) {
      if (typeof edge !== "string" || !edge) throw fail("INVALID_ARGUMENT", "edge must name an edge of the system");
      await requireEdge(systemKey, edge);
      checkPath(path);
      const [box = "", ...rest] = path.split("/");
      checkBox(box);
      if (!rest.length) throw fail("INVALID_ARGUMENT", "path must be <box>/<path in the box>");
      const t = await files.enqueue(systemKey, edge, set, path, rest.join("/"));
      if (!t) throw notFound("file", path);
      return { id: t.id, edge, path: `inbox/${t.path}`, size: t.size, status: t.status, error: t.error };
    },
  };
}
