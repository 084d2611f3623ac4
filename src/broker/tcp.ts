// MQTT over plain TCP on Bun's own sockets (Bun.listen), each wrapped in the little of a Node
// stream that aedes and the broker use: 'readable' and read(), write() with backpressure and
// 'drain', end(), destroy(), and 'end', 'error' and 'close'. A node:net socket is a full Duplex
// stream (two stream states, buffers, handlers and closures of its own): about 2.9 KB of memory
// per idle connection against 1.2 KB for Bun's socket, on a broker meant to hold 100,000 of them.
import { EventEmitter } from "node:events";
import type { Socket, TCPSocketListener } from "bun";

/** Past this many bytes received and not yet read, the socket stops reading until they are
 *  (as a Node stream's highWaterMark pauses it): a client cannot fill memory faster than the
 *  broker parses. */
const READ_PAUSE_BYTES = 1024 * 1024;

type WriteCallback = (err?: Error | null) => void;

export class TcpConnection extends EventEmitter {
  destroyed = false;
  /** a write could not be taken whole: 'drain' follows once it is */
  writableNeedDrain = false;
  /** what was received and not yet read */
  private received: Buffer | null = null;
  private paused = false;
  /** what the socket did not take yet, in order, with the callbacks of their writes */
  private unsent: { buf: Buffer; cb?: WriteCallback }[] | null = null;
  private ending = false;
  private closed = false;

  constructor(readonly socket: Socket<TcpConnection>) { super(); }

  get remoteAddress(): string { return this.socket.remoteAddress; }

  /** Everything received so far (a Node stream's read() with no size), or null. */
  read(_size?: number | null): Buffer | null {
    const buf = this.received;
    this.received = null;
    if (this.paused) { this.paused = false; this.socket.resume(); }
    return buf;
  }

  write(chunk: Buffer | string | Uint8Array, enc?: BufferEncoding | WriteCallback, cb?: WriteCallback): boolean {
    if (typeof enc === "function") { cb = enc; enc = undefined; }
    const buf = typeof chunk === "string" ? Buffer.from(chunk, enc ?? "utf8") : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.destroyed || this.ending) {
      const err = new Error("write after end");
      if (cb) process.nextTick(cb, err);
      return false;
    }
    if (this.unsent) {
      this.unsent.push({ buf, cb });
      return false;
    }
    const n = this.socket.write(buf);
    if (n >= buf.length) {
      if (cb) process.nextTick(cb, null);
      return true;
    }
    this.unsent = [{ buf: n > 0 ? buf.subarray(n) : buf, cb }];
    this.writableNeedDrain = true;
    return false;
  }

  end(chunk?: unknown, enc?: unknown, cb?: unknown): this {
    if (typeof chunk === "function") cb = chunk;
    else if (chunk != null) this.write(chunk as Buffer, enc as BufferEncoding);
    if (typeof cb === "function") this.once("close", cb as () => void);
    if (this.ending || this.destroyed) return this;
    this.ending = true;
    if (!this.unsent) this.socket.end();
    return this;
  }

  /** Closes the connection (what the socket already took is still sent); 'error' (with `err`),
   *  then 'close'. */
  destroy(err?: Error): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.received = null;
    const unsent = this.unsent;
    this.unsent = null;
    // 'close' is this method's to emit, after 'error': Bun calls the socket's close handler
    // within end(), before the tick that emits them
    this.closed = true;
    this.socket.end();
    process.nextTick(() => {
      if (err) this.emit("error", err);
      if (unsent) for (const u of unsent) u.cb?.(new Error("connection closed"));
      this.emit("close", false);
    });
    return this;
  }

  // ---- from the socket's handlers ------------------------------------------------------------

  onData(chunk: Buffer) {
    if (this.destroyed) return;
    this.received = this.received === null ? chunk : Buffer.concat([this.received, chunk]);
    if (this.received.length > READ_PAUSE_BYTES && !this.paused) { this.paused = true; this.socket.pause(); }
    this.emit("readable");
  }

  onDrain() {
    const q = this.unsent;
    if (!q) return;
    while (q.length) {
      const u = q[0]!;
      const n = this.socket.write(u.buf);
      if (n < u.buf.length) { u.buf = u.buf.subarray(Math.max(0, n)); return; }
      q.shift();
      u.cb?.(null);
    }
    this.unsent = null;
    this.writableNeedDrain = false;
    // no 'drain' for an ending connection (nor does a Node stream give one): it takes no more writes
    if (this.ending) this.socket.end();
    else this.emit("drain");
  }

  /** The peer sent FIN: 'end', and this side ends too (no half-open connections, as Node's default). */
  onEnd() {
    if (this.destroyed) return;
    this.emit("end");
    this.end();
  }

  onError(err: Error) {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit("error", err);
  }

  /** 'close', once. */
  onClose() {
    if (this.closed) return;
    this.closed = true;
    this.destroyed = true;
    this.emit("close", false);
  }
}

/** Listens for MQTT over TCP: each connection goes to `accept` as a TcpConnection. */
export function listenTcp(hostname: string, port: number, accept: (conn: TcpConnection) => void): TCPSocketListener<TcpConnection> {
  return Bun.listen<TcpConnection>({
    hostname,
    port,
    socket: {
      open(socket) {
        const conn = new TcpConnection(socket);
        socket.data = conn;
        accept(conn);
      },
      data(socket, chunk) { socket.data?.onData(chunk); },
      drain(socket) { socket.data?.onDrain(); },
      end(socket) { socket.data?.onEnd(); },
      error(socket, err) { socket.data?.onError(err); },
      close(socket) { socket.data?.onClose(); },
    },
  });
}
