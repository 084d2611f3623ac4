// File sync's wire and shared parts: the messages either way, the binary frames that carry file
// bytes, what a side is given, what its status shows, and file helpers (see ../files.ts).
import { createHash } from "node:crypto";
import { closeSync, readSync, write } from "node:fs";
import { z } from "zod";
import type { Logger } from "../../core/log.ts";
import type { Db } from "../../store/db.ts";
import type { FileBackend } from "../../store/files/backend.ts";
import type { TransferStatus } from "../../store/fileTransfers.ts";

/** The first byte of a binary frame that carries file bytes (JSON frames start with '{'). */
export const CHUNK_FRAME = 1;
/** The most file bytes one frame carries. */
export const CHUNK_BYTES = 1024 * 1024;
/** How often a transfer's progress is written down while it runs (ms). */
export const PROGRESS_MS = 500;

/** The file messages, either way (the receiver's answers and the sender's offers). */
export const FILE_MESSAGES = [
  // `check`: the sender checks with CRC-32 when the receiver says it does too (in its accept);
  // without it (a side of an earlier version) both use SHA-256
  z.object({ t: z.literal("file_offer"), id: z.string().min(1).max(100), set: z.string().min(1).max(128), path: z.string().min(1).max(1024),
    size: z.number().int().min(0), check: z.literal("crc32").optional() }),
  // after the last bytes: the file's check, for the receiver to check what it holds
  z.object({ t: z.literal("file_end"), id: z.string().max(100), sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
    crc32: z.number().int().min(0).max(0xffffffff).optional() }),
  z.object({ t: z.literal("file_accept"), id: z.string().max(100), offset: z.number().int().min(0), check: z.literal("crc32").optional() }),
  z.object({ t: z.literal("file_ack"), id: z.string().max(100), offset: z.number().int().min(0) }),
  z.object({ t: z.literal("file_done"), id: z.string().max(100) }),
  z.object({ t: z.literal("file_failed"), id: z.string().max(100), error: z.string().max(2000) }),
  z.object({ t: z.literal("file_cancel"), id: z.string().max(100) }),
  // the receiver holds every byte but its storage refused the file for now: it tries again
  z.object({ t: z.literal("file_store_failed"), id: z.string().max(100), error: z.string().max(2000) }),
] as const;
export const FileMessage = z.discriminatedUnion("t", [...FILE_MESSAGES]);
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
export function chunkFrame(id: string, offset: number, n: number): Uint8Array {
  return new ChunkFrames(id, n).frame(offset, n);
}

/** The frames of one transfer, written into one buffer again and again: sending a frame copies
 *  it (into the socket, or the socket's own buffer), so a sender needs no fresh megabyte per
 *  chunk (a fresh one is zeroed and faulted in page by page, twice the copying of its bytes). */
export class ChunkFrames {
  private readonly buf: Uint8Array;
  private readonly head: number;

  constructor(id: string, maxBytes: number) {
    const idBytes = Buffer.from(id);
    this.head = 10 + idBytes.length;
    this.buf = Buffer.allocUnsafe(this.head + maxBytes);
    this.buf[0] = CHUNK_FRAME;
    this.buf[1] = idBytes.length;
    this.buf.set(idBytes, 2);
  }

  /** The frame for `n` (at most maxBytes) file bytes at `offset`, its head written: the bytes go
   *  in its last `n` bytes. Valid until the next call. */
  frame(offset: number, n: number): Uint8Array {
    new DataView(this.buf.buffer, this.buf.byteOffset, this.head).setFloat64(this.head - 8, offset);
    return this.buf.subarray(0, this.head + n);
  }
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
  /** a clustered platform: the version of a file kept for sending goes where every node reads it
   *  (the set's own object storage), and the node holding the edge's link is told (`queued`) */
  shared?: { queued(systemKey: string, edge: string): void };
}

/** Where a clustered platform keeps the version of a file it sends, in the set's object storage:
 *  beside the boxes, so no listing of a box shows it. */
export const sharedKeptKey = (id: string) => `.outpost-filesync/${id}`;

/** What a transfer looks like in sync status, on either side. */
export interface FileStatus {
  asset_type: "file"; asset_name: string; status: TransferStatus; direction: "to_platform" | "to_edge";
  bytes_done: number; bytes_total: number; last_error: string; updated_at: string;
}

/** A peer's key: its system and edge. */
export const peerKey = (systemKey: string, edge: string) => `${systemKey}/${edge}`;

/** Reads `into.length` bytes of a file from `position` (fewer only at its end); how many. */
export function readAll(fd: number, into: Uint8Array, position: number): number {
  let got = 0;
  while (got < into.length) {
    const n = readSync(fd, into, got, into.length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/** Writes every byte at the end of a file opened for appending, on the runtime's I/O threads: the
 *  copy into the page cache (most of what receiving a file costs) runs while the event loop takes
 *  the next frames. */
export async function writeAll(fd: number, bytes: Uint8Array) {
  for (let done = 0; done < bytes.length;) {
    done += await new Promise<number>((resolve, reject) => write(fd, bytes, done, bytes.length - done, null, (err, n) => (err ? reject(err) : resolve(n))));
  }
}

/** A file open by its number, closed once: a number closed a second time may by then be another
 *  file's or socket's (opened meanwhile anywhere in the process), which that close would cut. */
export class OpenFile {
  private open = true;
  constructor(readonly fd: number) {}
  close() {
    if (!this.open) return;
    this.open = false;
    try { closeSync(this.fd); } catch { /* (the number is this file's until now: nothing else to do) */ }
  }
}

/** Writes a stream to a file; its size. */
export async function copyTo(from: ReadableStream<Uint8Array>, to: string): Promise<number> {
  const sink = Bun.file(to).writer();
  let size = 0;
  try { for await (const chunk of from) { sink.write(chunk); size += chunk.byteLength; } }
  finally { await sink.end(); }
  return size;
}

/** How a transfer's bytes are checked end to end, both sides computing it as they pass: CRC-32
 *  when both sides know it (it catches what corrupts bytes on a disk or a link at about a
 *  hundredth of SHA-256's CPU, which was most of a transfer's), SHA-256 with a side of an earlier
 *  version. */
export type CheckKind = "crc32" | "sha256";
export interface Check {
  update(bytes: Uint8Array): void;
  /** the check as a transfer records it, and as file_end carries it */
  digest(): string;
  wire(): { sha256: string } | { crc32: number };
}

export const crc32Digest = (n: number) => `crc32:${n.toString(16).padStart(8, "0")}`;

export function newCheck(kind: CheckKind): Check {
  if (kind === "sha256") {
    const h = createHash("sha256");
    let hex = "";
    return { update: (b) => { h.update(b); }, digest: () => (hex ||= h.digest("hex")), wire() { return { sha256: this.digest() }; } };
  }
  let crc = 0;
  return { update: (b) => { crc = Bun.hash.crc32(b, crc); }, digest: () => crc32Digest(crc), wire: () => ({ crc32: crc }) };
}

/** The first `upTo` bytes of a file, checked (what a resumed side held). */
export async function checkFile(kind: CheckKind, path: string, upTo: number): Promise<Check> {
  const check = newCheck(kind);
  if (upTo > 0) for await (const chunk of Bun.file(path).slice(0, upTo).stream()) check.update(chunk);
  return check;
}
