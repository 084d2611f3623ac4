// File sync's sending side: keeps each file's version aside, offers it, sends its bytes within
// the window from where the receiver is, then its hash (see ../files.ts).
import { randomUUID } from "node:crypto";
import { existsSync, openSync } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ApiError, ErrorKinds } from "../../core/errors.ts";
import { type FileTransferRow, fileTransfersRepo } from "../../store/fileTransfers.ts";
import type { FileBackend } from "../../store/files/backend.ts";
import { UnfinishedSends } from "./unfinished.ts";
import { type Check, type CheckKind, checkFile, CHUNK_BYTES, ChunkFrames, copyTo, type FilePeer, type FileSyncDeps, newCheck, OpenFile, peerKey, PROGRESS_MS, readAll, sharedKeptKey } from "./wire.ts";

/** A transfer this side is sending on a live link. */
export interface Sending { row: FileTransferRow; peer: FilePeer; accepted: boolean; sent: number; acked: number; pushing: boolean; savedAt: number;
  /** the bytes sent so far, checked */
  hash: Check | null;
  /** the version being sent, open (once the receiver accepted) */
  kept?: KeptVersion;
  /** the buffer its frames are read into (made at its first chunk) */
  frames?: ChunkFrames }

/** The version of a file kept for sending, open for reading: bytes at a position (fewer only at
 *  its end), the first bytes hashed. A local copy reads synchronously (one call per chunk). */
interface KeptVersion { read(into: Uint8Array, at: number): number | Promise<number>; hash(kind: CheckKind, upTo: number): Promise<Check>; close(): void }

export class FileSender {
  /** the transfer running on each peer's link */
  readonly sending = new Map<string, Sending>();
  /** per peer's link, transfers whose every byte the receiver holds but could not store yet: the
   *  receiver tries again by itself, the next ones go meanwhile */
  private readonly parked = new Map<string, Set<string>>();
  /** enqueued files are kept aside one after another, so the last write of a path wins */
  private queue: Promise<unknown> = Promise.resolve();
  /** file bytes sent since the process started (/metrics) */
  bytesSent = 0;
  private readonly outDir: string;

  constructor(private readonly d: FileSyncDeps, private readonly peers: ReadonlyMap<string, FilePeer>) {
    this.outDir = join(d.dir, "out");
    this.unfinished = new UnfinishedSends(d.db, !!d.shared);
  }

  private copyOf(id: string) { return join(this.outDir, id); }

  /** the peers known to have unfinished transfers, per system */
  readonly unfinished: UnfinishedSends;

  /** A peer's link is gone: its running transfer waits for the next one, its progress written down. */
  async linkLost(peer: FilePeer) {
    const k = peerKey(peer.systemKey, peer.edge);
    this.parked.delete(k);
    const s = this.sending.get(k);
    if (s?.peer !== peer) return;
    await fileTransfersRepo.progress(this.d.db, s.row.id, "transferring", s.acked).catch(() => {});
    if (this.sending.get(k) === s) { this.sending.delete(k); s.kept?.close(); }
    // a new link that came up while this was written down found the transfer still running
    await this.pump(peer.systemKey, peer.edge);
  }

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
    const now = Date.now();
    const row: FileTransferRow = { id: randomUUID(), system_key: systemKey, edge, role: "send", set_name: set, path, source, size: 0, sha256: "",
      done: 0, status: "pending", error: "", created_ms: now, updated_ms: now };
    // the set's storage failing (object storage down, credentials refused) fails this transfer
    // with why: writing the file again sends it
    const unreadable = async (err: unknown) => {
      await rm(this.copyOf(row.id), { force: true });
      row.status = "failed";
      row.error = `reading the file from the ${this.d.side}'s bucket set failed: ${String((err as Error)?.message ?? err)}`;
      await fileTransfersRepo.insert(this.d.db, row);
      this.d.log.warn("file not sent: unreadable", { set, path: source, error: row.error });
      return row;
    };
    const st = await files.stat(source).catch((err: unknown) => err as Error);
    if (st instanceof Error) { await this.dropSamePath(systemKey, edge, set, path); return unreadable(st); }
    if (!st || st.isDir) return null;
    row.size = st.size;
    await this.dropSamePath(systemKey, edge, set, path);
    if (st.size > this.d.maxBytes) {
      row.status = "failed";
      row.error = `the file is ${st.size} bytes, over --file-sync-max-bytes (${this.d.maxBytes})`;
      await fileTransfersRepo.insert(this.d.db, row);
      this.d.log.warn("file not sent: too large", { set, path: source, size: st.size, max: this.d.maxBytes });
      return row;
    }
    // the version to send: linked on local storage, else copied (on a clustered platform, into
    // the set's object storage, where the node holding the edge's link reads it); the transfer is
    // what was kept
    const copy = this.copyOf(row.id);
    const started = performance.now();
    let size: number;
    try {
      if (this.keptShared(files)) { await files.copy(source, sharedKeptKey(row.id)); size = (await files.stat(sharedKeptKey(row.id)))?.size ?? 0; }
      else size = (await files.linkOut?.(source, copy)) ? (await stat(copy)).size : await copyTo(await files.stream(source), copy);
    } catch (err) {
      await this.dropKept(row);
      // gone meanwhile (deleted, moved): nothing to send
      if (err instanceof ApiError && err.code === ErrorKinds.NOT_FOUND.code) return null;
      return unreadable(err);
    }
    row.size = size;
    this.d.log.debug("file queued", { set, path: source, size, keptMs: Math.round(performance.now() - started) });
    if (size > this.d.maxBytes) { row.status = "failed"; row.error = `the file is ${size} bytes, over --file-sync-max-bytes (${this.d.maxBytes})`; await this.dropKept(row); }
    await fileTransfersRepo.insert(this.d.db, row);
    if (row.status === "pending") this.unfinished.recorded(systemKey, edge);
    await fileTransfersRepo.prune(this.d.db, systemKey, edge, "send");
    void this.pump(systemKey, edge);
    if (row.status === "pending") this.d.shared?.queued(systemKey, edge);
    return row;
  }

  /** Whether a set's kept versions go in its own storage (a clustered platform's object storage). */
  private keptShared(files: FileBackend) { return !!this.d.shared && files.kind === "s3"; }

  /** The kept version of a transfer to read from: this node's copy, or on a clustered platform the
   *  set's object storage. */
  private async openKept(row: FileTransferRow): Promise<KeptVersion> {
    const copy = this.copyOf(row.id);
    if (existsSync(copy)) {
      const file = new OpenFile(openSync(copy, "r"));
      return { read: (into, at) => readAll(file.fd, into, at), hash: (kind, upTo) => checkFile(kind, copy, upTo), close: () => file.close() };
    }
    const files = this.d.shared ? await this.d.backend(row.system_key, row.set_name) : null;
    if (!files || !this.keptShared(files)) {
      throw new Error(this.d.shared
        ? "the version to send is kept on the platform node that took the request, and the edge is linked to another one: on a cluster, send files to edges from bucket sets on S3"
        : "the version of the file kept for sending is gone");
    }
    const key = sharedKeptKey(row.id);
    return {
      read: async (into, at) => { const b = await files.get(key, { start: at, end: at + into.length }); into.set(b); return b.length; },
      hash: async (kind, upTo) => { const c = newCheck(kind); if (upTo > 0) c.update(await files.get(key, { start: 0, end: upTo })); return c; },
      close: () => {},
    };
  }

  /** A transfer's kept version goes (wherever it is). */
  async dropKept(row: FileTransferRow) {
    await rm(this.copyOf(row.id), { force: true });
    if (!this.d.shared) return;
    const files = await this.d.backend(row.system_key, row.set_name).catch(() => null);
    if (files && this.keptShared(files)) await files.delete(sharedKeptKey(row.id)).catch((err) => this.d.log.warn("kept version of a file not deleted", { id: row.id, err }));
  }

  /** The unfinished transfer of a path to a side is dropped (its file was deleted, or replaced). */
  cancel(systemKey: string, edge: string, set: string, path: string): Promise<void> {
    const next = this.queue.then(() => this.dropSamePath(systemKey, edge, set, path));
    this.queue = next.catch(() => {});
    return next;
  }

  private async dropSamePath(systemKey: string, edge: string, set: string, path: string) {
    const k = peerKey(systemKey, edge);
    for (const old of await fileTransfersRepo.samePath(this.d.db, systemKey, edge, "send", set, path)) {
      const s = this.sending.get(k);
      if (s?.row.id === old.id) { this.sending.delete(k); s.kept?.close(); s.peer.send({ t: "file_cancel", id: old.id }); }
      else this.peers.get(k)?.send({ t: "file_cancel", id: old.id });
      await fileTransfersRepo.delete(this.d.db, old.id);
      await this.dropKept(old);
    }
    void this.pump(systemKey, edge);
  }

  /** Offers the oldest unfinished transfer to a side, when its link is up and none is running. */
  async pump(systemKey: string, edge: string) {
    const k = peerKey(systemKey, edge);
    const peer = this.peers.get(k);
    if (!peer || this.sending.has(k)) return;
    const known = await this.unfinished.of(systemKey, edge);
    if (!known.maybe) return;
    const parked = this.parked.get(k);
    const unfinished = await fileTransfersRepo.unfinished(this.d.db, systemKey, edge, "send");
    if (!unfinished.length) known.none();
    const next = unfinished.find((r) => !parked?.has(r.id));
    if (!next || this.sending.has(k) || this.peers.get(k) !== peer) return;
    this.sending.set(k, { row: next, peer, accepted: false, sent: 0, acked: 0, pushing: false, savedAt: 0, hash: null });
    peer.send({ t: "file_offer", id: next.id, set: next.set_name, path: next.path, size: next.size, check: "crc32" });
  }

  private current(peer: FilePeer, id: string): Sending | null {
    const s = this.sending.get(peerKey(peer.systemKey, peer.edge));
    return s && s.peer === peer && s.row.id === id ? s : null;
  }

  /** The receiver holds `offset` bytes: the rest goes from there. */
  async accepted(peer: FilePeer, id: string, offset: number, check: CheckKind) {
    const s = this.current(peer, id);
    if (!s) return;
    s.sent = s.acked = Math.min(offset, s.row.size);
    // the bytes the receiver holds count in the hash: read again from the kept version
    try {
      s.kept ??= await this.openKept(s.row);
      s.hash = await s.kept.hash(check, s.sent);
    } catch (err) { return this.failSending(s, err); }
    // (a transfer dropped meanwhile closed what it had open; one opened after that closes here)
    if (this.current(peer, id) !== s) { s.kept?.close(); return; }
    s.accepted = true;
    if (offset > 0) this.d.log.info("file transfer resumed", { set: s.row.set_name, path: s.row.source, offset, size: s.row.size });
    await fileTransfersRepo.progress(this.d.db, id, "transferring", s.acked);
    await this.push(s);
  }

  async acked(peer: FilePeer, id: string, offset: number) {
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
      const kept = s.kept!;
      while (s.accepted && s.sent < s.row.size && s.sent - s.acked < this.d.inflightBytes && this.current(s.peer, s.row.id) === s) {
        const n = Math.min(CHUNK_BYTES, s.row.size - s.sent, Math.max(1, this.d.inflightBytes - (s.sent - s.acked)));
        // read straight into the frame, after its head
        const frame = (s.frames ??= new ChunkFrames(s.row.id, Math.min(CHUNK_BYTES, s.row.size))).frame(s.sent, n);
        const bytes = frame.subarray(frame.length - n);
        const read = kept.read(bytes, s.sent);
        if ((typeof read === "number" ? read : await read) !== n) throw new Error(`the version of ${s.row.source} being sent is shorter than it was`);
        s.hash!.update(bytes);
        s.peer.sendBinary(frame);
        s.sent += n;
        this.bytesSent += n;
      }
      if (s.accepted && s.sent === s.row.size && s.hash && this.current(s.peer, s.row.id) === s) {
        const check = s.hash;
        s.hash = null;
        s.peer.send({ t: "file_end", id: s.row.id, ...check.wire() });
        if (!s.row.sha256) { s.row.sha256 = check.digest(); await fileTransfersRepo.hashed(this.d.db, s.row.id, s.row.sha256); }
      }
    } catch (err) {
      await this.failSending(s, err);
    } finally {
      s.pushing = false;
    }
  }

  private async failSending(s: Sending, err: unknown) {
    this.d.log.warn("file transfer failed", { set: s.row.set_name, path: s.row.source, err });
    await this.finished(s.peer, s.row.id, "failed", String((err as Error)?.message ?? err));
    s.peer.send({ t: "file_cancel", id: s.row.id });
  }

  /** The receiver holds every byte, but its storage refused the file for now: the transfer says
   *  why it waits (the receiver tries again). */
  async storeFailed(peer: FilePeer, id: string, error: string) {
    const k = peerKey(peer.systemKey, peer.edge);
    const s = this.current(peer, id);
    const row = s?.row ?? await fileTransfersRepo.get(this.d.db, id);
    if (!row || row.role !== "send" || (row.status !== "pending" && row.status !== "transferring")) return;
    await fileTransfersRepo.progress(this.d.db, id, "transferring", s?.acked ?? row.done, error);
    if (!s) return;
    // the next files go meanwhile (another set's storage may take them); this one is offered
    // again on the next link, or said done when the receiver's retry stores it
    this.sending.delete(k);
    s.kept?.close();
    (this.parked.get(k) ?? this.parked.set(k, new Set()).get(k)!).add(id);
    await this.pump(peer.systemKey, peer.edge);
  }

  /** The receiver holds the file (or refused it): the transfer ends, the next one starts. */
  async finished(peer: FilePeer, id: string, status: "synced" | "failed", error: string) {
    const k = peerKey(peer.systemKey, peer.edge);
    const s = this.current(peer, id);
    if (s) { this.sending.delete(k); s.kept?.close(); }
    const row = await fileTransfersRepo.get(this.d.db, id);
    if (row && row.role === "send" && (row.status === "pending" || row.status === "transferring")) {
      await fileTransfersRepo.progress(this.d.db, id, status, status === "synced" ? row.size : s?.acked ?? row.done, error);
      await this.dropKept(row);
      if (status === "failed") this.d.log.warn("file not delivered", { set: row.set_name, path: row.source, error });
      else this.d.log.info("file delivered", { set: row.set_name, path: row.source, size: row.size });
    }
    void this.pump(peer.systemKey, peer.edge);
  }

}
