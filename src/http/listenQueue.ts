// A listening socket's queue of connections not yet accepted, made as deep as the system allows.
// Bun listens with a queue of 512 and has no option for more: a fleet of thousands of edges
// opening at once (after a platform restart, or a new fleet) overflowed it while the event loop
// was busy, and the kernel dropped the overflow's SYNs silently: each such edge waited for its
// retransmission (1 s, then 3 s), past its open timeout, and opened again. Linux takes a second
// listen() on a listening socket as a new depth for its queue (capped by net.core.somaxconn).
// The listener's descriptor is found among this process's own (a few dozen at a start) by asking
// each whether it listens and on which port; the machine's socket tables (/proc/net/tcp) are not
// read: with 36,000 sockets open on the machine that took 3 s of every start.
import { dlopen, FFIType, ptr } from "bun:ffi";
import { readdirSync } from "node:fs";

/** asked of the kernel, which caps it at net.core.somaxconn */
const DEEPEST = 65_535;
/** <sys/socket.h> on Linux */
const SOL_SOCKET = 1, SO_ACCEPTCONN = 30;

type SocketCalls = {
  listen(fd: number, backlog: number): number;
  getsockopt(fd: number, level: number, name: number, value: number, length: number): number;
  getsockname(fd: number, address: number, length: number): number;
};
let calls: SocketCalls | null | undefined;
/** libc's socket calls (null where there is no glibc to open, e.g. on musl or macOS) */
function socketCalls(): SocketCalls | null {
  if (calls !== undefined) return calls;
  try {
    const { symbols } = dlopen("libc.so.6", {
      listen: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
      getsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
      getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    });
    calls = symbols as unknown as SocketCalls;
  } catch { calls = null; }
  return calls;
}

/** The port descriptor `fd` listens on, or null: not a socket, or not listening. */
function listeningPort(c: SocketCalls, fd: number, int: Int32Array, len: Uint32Array, address: Uint8Array): number | null {
  len[0] = 4;
  if (c.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, ptr(int), ptr(len)) !== 0 || int[0] !== 1) return null;
  len[0] = address.length;
  if (c.getsockname(fd, ptr(address), ptr(len)) !== 0) return null;
  // sockaddr_in and sockaddr_in6 alike: the family's two bytes, then the port in network order
  return (address[2]! << 8) | address[3]!;
}

/** Deepens the queue of this process's listeners on `port`; how many it deepened (0 where the
 *  system has no /proc or libc to ask: the queue stays as Bun made it). */
export function deepenListenQueue(port: number): number {
  if (process.platform !== "linux") return 0;
  const c = socketCalls();
  if (!c) return 0;
  let fds: string[];
  try { fds = readdirSync("/proc/self/fd"); } catch { return 0; }
  const int = new Int32Array(1), len = new Uint32Array(1), address = new Uint8Array(128);
  let deepened = 0;
  for (const name of fds) {
    const fd = Number(name);
    if (listeningPort(c, fd, int, len, address) === port && c.listen(fd, DEEPEST) === 0) deepened++;
  }
  return deepened;
}
