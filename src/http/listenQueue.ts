// A listening socket's queue of connections not yet accepted, made as deep as the system allows.
// Bun listens with a queue of 512 and has no option for more: a fleet of thousands of edges
// opening at once (after a platform restart, or a new fleet) overflowed it while the event loop
// was busy, and the kernel dropped the overflow's SYNs silently: each such edge waited for its
// retransmission (1 s, then 3 s), past its open timeout, and opened again. Linux takes a second
// listen() on a listening socket as a new depth for its queue (capped by net.core.somaxconn), so
// the listener's descriptor is found by its port and listened on again.
import { dlopen, FFIType } from "bun:ffi";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/** asked of the kernel, which caps it at net.core.somaxconn */
const DEEPEST = 65_535;
/** a listening socket's state in /proc/net/tcp */
const LISTEN_STATE = "0A";

/** The inodes of this machine's sockets listening on `port` (IPv4 and IPv6). */
function listeningInodes(port: number): Set<string> {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try { text = readFileSync(table, "utf8"); } catch { continue; }
    for (const line of text.split("\n").slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length > 9 && c[1]!.endsWith(hex) && c[3] === LISTEN_STATE) inodes.add(c[9]!);
    }
  }
  return inodes;
}

/** Deepens the queue of this process's listeners on `port`; how many it deepened (0 where the
 *  system has no /proc or libc to ask: the queue stays as Bun made it). */
export function deepenListenQueue(port: number): number {
  if (process.platform !== "linux") return 0;
  const inodes = listeningInodes(port);
  if (!inodes.size) return 0;
  let listen: (fd: number, backlog: number) => number;
  try {
    listen = dlopen("libc.so.6", { listen: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } }).symbols.listen as typeof listen;
  } catch { return 0; }
  let deepened = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    let target = "";
    try { target = readlinkSync(`/proc/self/fd/${fd}`); } catch { continue; }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode && inodes.has(inode) && listen(Number(fd), DEEPEST) === 0) deepened++;
  }
  return deepened;
}
