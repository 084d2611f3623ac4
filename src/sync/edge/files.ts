// The edge's side of file sync on its link: the platform as file sync's peer while the link is
// welcomed, the binary frames and file messages that come on it (see ../files.ts).
import type { Logger } from "../../core/log.ts";
import { CHUNK_FRAME, type FilePeer, type FileSync, isFileMessage } from "../files.ts";

export class EdgeFiles {
  private peer: FilePeer | null = null;
  private ws: WebSocket | null = null;

  constructor(private readonly files: FileSync | undefined, private readonly log: Logger, private readonly systemKey: string, private readonly edge: string) {}

  /** The platform welcomed this socket: unfinished transfers go on. */
  up(ws: WebSocket, send: (m: unknown) => void) {
    if (!this.files) return;
    this.ws = ws;
    this.peer = { systemKey: this.systemKey, edge: this.edge, send, sendBinary: (b) => { if (ws.readyState === WebSocket.OPEN) ws.send(b); } };
    this.files.peerUp(this.peer);
  }

  lost() {
    if (this.peer) void this.files?.peerLost(this.peer);
    this.peer = this.ws = null;
  }

  /** Takes a binary frame of file bytes (JSON frames start with '{'); false: not one. */
  frame(ws: WebSocket, data: unknown): boolean {
    if (typeof data === "string") return false;
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array);
    if (bytes[0] !== CHUNK_FRAME) return false;
    if (this.peer && this.ws === ws) this.files?.chunk(this.peer, bytes);
    return true;
  }

  /** Takes a file message (they go beside the batches); false: not one. */
  message(ws: WebSocket, m: { t?: unknown }): boolean {
    if (!isFileMessage(m)) return false;
    if (this.peer && this.ws === ws) void this.files?.message(this.peer, m).catch((err) => this.log.warn("file sync message failed", { err }));
    return true;
  }

  status() { return this.files?.status(this.systemKey, this.edge) ?? Promise.resolve([]); }
}
