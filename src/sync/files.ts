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
// --file-sync-inflight-bytes ahead of the receiver's acknowledgements, then the file's check
// (CRC-32, or SHA-256 with a side of an earlier version: see CheckKind; both sides compute it as
// the bytes pass, a resumed side over what it held first). Once the
// receiver holds every byte and the hashes match, it stores the file in the set's storage in one
// step (a reader sees the old file or the new one) and says done.
// A file over --file-sync-max-bytes (the sender's, or the receiver's) fails at once, with why.
import { mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { fail, notFound } from "../core/errors.ts";
import { checkBox, type EdgeFileSender } from "../domain/bucketSets.ts";
import { checkPath } from "../store/files/backend.ts";
import { type FileTransferRow, fileTransfersRepo } from "../store/fileTransfers.ts";
import { FileReceiver } from "./files/receive.ts";
import { FileSender } from "./files/send.ts";
import { crc32Digest, type FilePeer, FileMessage, type FileStatus, type FileSyncDeps, peerKey } from "./files/wire.ts";

export { CHUNK_BYTES, CHUNK_FRAME, decodeChunk, encodeChunk, FILE_MESSAGES, type FilePeer, type FileStatus, type FileSyncDeps, isFileMessage } from "./files/wire.ts";
export type { FileMessage } from "./files/wire.ts";

export class FileSync {
  /** the live links, by system and edge */
  private readonly peers = new Map<string, FilePeer>();
  private readonly sender: FileSender;
  private readonly receiver: FileReceiver;

  constructor(private readonly d: FileSyncDeps) {
    mkdirSync(join(d.dir, "out"), { recursive: true });
    mkdirSync(join(d.dir, "in"), { recursive: true });
    this.sender = new FileSender(d, this.peers);
    this.receiver = new FileReceiver(d);
  }

  /** file bytes sent and received since the process started (/metrics) */
  get bytesSent() { return this.sender.bytesSent; }
  get bytesReceived() { return this.receiver.bytesReceived; }

  /** A link is up: unfinished transfers to that side go on from where its receiver is. */
  peerUp(peer: FilePeer) {
    this.peers.set(peerKey(peer.systemKey, peer.edge), peer);
    void this.sender.pump(peer.systemKey, peer.edge);
  }

  /** A link is gone: transfers on it wait for the next one (what each side holds stays; each is
   *  written down before it leaves the live maps, so the status never goes back). */
  async peerLost(peer: FilePeer) {
    const k = peerKey(peer.systemKey, peer.edge);
    if (this.peers.get(k) !== peer) return;
    this.peers.delete(k);
    await this.sender.linkLost(peer);
    await this.receiver.linkLost(peer);
  }

  /** A file message from a peer. */
  async message(peer: FilePeer, raw: unknown) {
    const parsed = FileMessage.safeParse(raw);
    if (!parsed.success) return;
    const m = parsed.data;
    switch (m.t) {
      case "file_offer": return this.receiver.offered(peer, m);
      case "file_accept": return this.sender.accepted(peer, m.id, m.offset, m.check ?? "sha256");
      case "file_ack": return this.sender.acked(peer, m.id, m.offset);
      case "file_end": return this.receiver.ended(peer, m.id, m.crc32 !== undefined ? crc32Digest(m.crc32) : m.sha256 ?? "");
      case "file_done": return this.sender.finished(peer, m.id, "synced", "");
      case "file_failed": return this.sender.finished(peer, m.id, "failed", m.error);
      case "file_cancel": return this.receiver.cancelled(peer, m.id);
      case "file_store_failed": return this.sender.storeFailed(peer, m.id, m.error);
    }
  }

  /** File bytes from a peer (a binary frame). */
  chunk(peer: FilePeer, frame: Uint8Array) { this.receiver.chunk(peer, frame); }

  /** Sends a set's file to the other side (see FileSender.enqueue). */
  enqueue(systemKey: string, edge: string, set: string, source: string, path: string): Promise<FileTransferRow | null> {
    return this.sender.enqueue(systemKey, edge, set, source, path);
  }

  /** A file was queued for a side (maybe by another node of a cluster): sent if its link is here. */
  wake(systemKey: string, edge: string) { this.sender.unfinished.recorded(systemKey, edge); void this.sender.pump(systemKey, edge).catch((err) => this.d.log.warn("file sync: sending failed", { err })); }

  /** The unfinished transfer of a path to a side is dropped (its file was deleted). */
  cancel(systemKey: string, edge: string, set: string, path: string): Promise<void> { return this.sender.cancel(systemKey, edge, set, path); }

  /** An edge (or a whole system) is gone: its transfers go, with the files kept for them. */
  async forget(systemKey: string, edge?: string) {
    // (kept versions in a set's object storage go with their edge; a deleted system's sets are
    // gone, and what is left in their buckets stays, as their files do)
    if (edge !== undefined && this.d.shared) {
      for (const r of await fileTransfersRepo.unfinished(this.d.db, systemKey, edge, "send")) await this.sender.dropKept(r);
    }
    for (const id of await fileTransfersRepo.forget(this.d.db, systemKey, edge)) {
      await rm(join(this.d.dir, "out", id), { force: true });
      await rm(join(this.d.dir, "in", `${id}.part`), { force: true });
    }
  }

  /** Every transfer with an edge, as its sync status shows them (newest first). */
  async status(systemKey: string, edge: string): Promise<FileStatus[]> {
    const rows = await fileTransfersRepo.forEdge(this.d.db, systemKey, edge);
    const live = (r: FileTransferRow) => {
      const s = this.sender.sending.get(peerKey(systemKey, edge));
      if (s?.row.id === r.id) return s.acked;
      return this.receiver.receiving.get(r.id)?.offset ?? r.done;
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
