// File sync's receiving side: a part file per transfer, appended to and hashed as bytes come,
// resumed from what it holds, stored in the set in one step once whole and checked (see ../files.ts).
import { fsync, openSync } from "node:fs";
import { promisify } from "node:util";
import { rm, stat, truncate } from "node:fs/promises";
import { join } from "node:path";
import { checkPath } from "../../store/files/backend.ts";
import { type FileTransferRow, fileTransfersRepo } from "../../store/fileTransfers.ts";
import { type Check, checkFile, decodeChunk, type FileMessage, type FilePeer, type FileSyncDeps, OpenFile, PROGRESS_MS, writeAll } from "./wire.ts";

const fsyncAsync = promisify(fsync);

/** The first wait before storing a received file again after its storage failed, and the longest. */
const STORE_RETRY_MS = 1_000;
const STORE_RETRY_MAX_MS = 60_000;

/** A transfer this side is receiving. */
export interface Receiving { row: FileTransferRow; peer: FilePeer;
  /** the part file, open for appending (one chunk written at a time, in order: see `writes`) */
  part: OpenFile; offset: number; writes: Promise<void>; savedAt: number; finishing: boolean;
  /** the bytes held, checked; the check the sender said (null: not yet) */
  hash: Check; expected: string | null }

export class FileReceiver {
  /** the transfers being received, by id */
  readonly receiving = new Map<string, Receiving>();
  /** file bytes received since the process started (/metrics) */
  bytesReceived = 0;
  private readonly inDir: string;

  constructor(private readonly d: FileSyncDeps) {
    this.inDir = join(d.dir, "in");
  }

  private partOf(id: string) { return join(this.inDir, `${id}.part`); }

  /** A peer's link is gone: its parts stay, their progress written down. */
  async linkLost(peer: FilePeer) {
    for (const [id, r] of this.receiving) {
      if (r.peer !== peer) continue;
      await r.writes;
      if (!r.finishing) await fileTransfersRepo.progress(this.d.db, id, "transferring", r.offset).catch(() => {});
      if (this.receiving.get(id) === r) { this.receiving.delete(id); r.part.close(); }
    }
  }

  /** Where a file from a peer lands in its set: the platform puts an edge's files under
   *  inbox/<edge>/, an edge puts the platform's in inbox/. */
  private destination(peer: FilePeer, path: string) {
    return this.d.side === "platform" ? `inbox/${peer.edge}/${path}` : `inbox/${path}`;
  }

  async offered(peer: FilePeer, m: Extract<FileMessage, { t: "file_offer" }>) {
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
    if (prev) { this.receiving.delete(m.id); await prev.writes; prev.part.close(); }
    const part = this.partOf(m.id);
    let offset = (await stat(part).catch(() => null))?.size ?? 0;
    if (offset > m.size) { await truncate(part, 0); offset = 0; }
    // what was held counts in the check
    const hash = await checkFile(m.check ?? "sha256", part, offset);
    const r: Receiving = { row, peer, part: new OpenFile(openSync(part, "a")), offset, writes: Promise.resolve(), savedAt: 0, finishing: false, hash, expected: null };
    this.receiving.set(m.id, r);
    this.d.log.debug("file accepted", { edge: peer.edge, path: dest, offset, size: m.size });
    peer.send({ t: "file_accept", id: m.id, offset, ...(m.check ? { check: m.check } : {}) });
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
      // (checked while the bytes are written)
      const written = writeAll(r.part.fd, bytes);
      r.hash.update(bytes);
      await written;
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
  ended(peer: FilePeer, id: string, digest: string) {
    const r = this.receiving.get(id);
    if (!r || r.peer !== peer || r.finishing) return;
    r.expected = digest;
    r.writes = r.writes.then(() => (r.offset === r.row.size && !r.finishing ? this.complete(r) : undefined))
      .catch((err) => this.fail(r, String((err as Error)?.message ?? err)));
  }

  /** Every byte is here: checked against the hash, stored in the set in one step, said done. */
  private async complete(r: Receiving) {
    r.finishing = true;
    const started = performance.now();
    // on disk before the sender is told the file is stored: the sender then drops its copy, so a
    // power cut here must not lose what was acknowledged (on the I/O threads: the loop goes on)
    await fsyncAsync(r.part.fd);
    r.part.close();
    const part = this.partOf(r.row.id);
    if (r.hash.digest() !== r.expected) {
      // what was received is not the file: it goes, and the sender starts over when it offers again
      await rm(part, { force: true });
      this.receiving.delete(r.row.id);
      await fileTransfersRepo.progress(this.d.db, r.row.id, "failed", 0, "the file received does not match its check");
      r.peer.send({ t: "file_failed", id: r.row.id, error: "the file received does not match its check" });
      return;
    }
    await fileTransfersRepo.hashed(this.d.db, r.row.id, r.expected);
    await this.store(r, started, 0);
  }

  /** Stores a whole, checked part in the set. When the set's storage fails (object storage down,
   *  credentials refused) the part stays and storing is tried again, later and later, while the
   *  link lasts (and again when the sender offers the file on its next link); the transfer says why
   *  it waits, on both sides. */
  private async store(r: Receiving, started: number, tries: number) {
    if (this.receiving.get(r.row.id) !== r) return;
    const part = this.partOf(r.row.id);
    const files = await this.d.backend(r.row.system_key, r.row.set_name);
    if (!files) return this.fail(r, `no bucket set '${r.row.set_name}' on the ${this.d.side}`);
    try {
      // moved into place when the set's storage is on this machine, else its bytes are stored
      if (!(await files.adopt?.(r.row.source, part))) await files.put(r.row.source, Bun.file(part).stream());
    } catch (err) {
      const waitMs = Math.min(STORE_RETRY_MS * 2 ** tries, STORE_RETRY_MAX_MS);
      const error = `storing the file in the ${this.d.side}'s bucket set failed (tried again in ${Math.round(waitMs / 1000)} s): ${String((err as Error)?.message ?? err)}`;
      await fileTransfersRepo.progress(this.d.db, r.row.id, "transferring", r.row.size, error).catch(() => {});
      this.d.log.warn("file not stored yet", { edge: r.peer.edge, set: r.row.set_name, path: r.row.source, error });
      r.peer.send({ t: "file_store_failed", id: r.row.id, error });
      setTimeout(() => { void this.store(r, started, tries + 1).catch((e) => this.fail(r, String((e as Error)?.message ?? e))); }, waitMs).unref();
      return;
    }
    await fileTransfersRepo.progress(this.d.db, r.row.id, "synced", r.row.size);
    this.d.log.debug("file stored", { path: r.row.source, storeMs: Math.round(performance.now() - started) });
    await rm(part, { force: true });
    this.receiving.delete(r.row.id);
    this.d.log.info("file received", { edge: r.peer.edge, set: r.row.set_name, path: r.row.source, size: r.row.size });
    r.peer.send({ t: "file_done", id: r.row.id });
  }

  private async fail(r: Receiving, error: string) {
    this.receiving.delete(r.row.id);
    r.part.close();
    await rm(this.partOf(r.row.id), { force: true });
    await fileTransfersRepo.progress(this.d.db, r.row.id, "failed", r.offset, error).catch(() => {});
    this.d.log.warn("file not received", { edge: r.peer.edge, set: r.row.set_name, path: r.row.source, error });
    r.peer.send({ t: "file_failed", id: r.row.id, error });
  }

  /** The sender dropped a transfer (its file was replaced or deleted): its part goes. */
  async cancelled(peer: FilePeer, id: string) {
    const row = await fileTransfersRepo.get(this.d.db, id);
    if (!row || row.role !== "receive" || row.system_key !== peer.systemKey || row.edge !== peer.edge || row.status === "synced") return;
    await this.dropReceiving(id);
  }

  async dropReceiving(id: string) {
    const r = this.receiving.get(id);
    if (r) { this.receiving.delete(id); r.finishing = true; await r.writes.catch(() => {}); r.part.close(); }
    await fileTransfersRepo.delete(this.d.db, id);
    await rm(this.partOf(id), { force: true });
  }

}
