// A TCP proxy the sync tests put between an edge and its platform, to make the network misbehave
// the ways a fleet's links do: cut (connections reset, new ones refused), black hole (connections
// stay up and new ones are accepted, but nothing goes through either way: a dead route never says
// so), latency (every chunk held back), and counting the bytes the platform sends.
import net from "node:net";

export interface TcpProxy {
  /** the URL the edge uses to reach its platform through the proxy */
  url: string;
  port: number;
  /** connections reset and new ones refused until heal() */
  cut(): void;
  /** nothing passes either way (open connections stay open, new ones are accepted) until heal() */
  blackHole(): void;
  /** every chunk waits this long before it is passed on (0: none) */
  latency(ms: number): void;
  /** back to passing everything at once */
  heal(): void;
  /** bytes sent from the platform to the edge since the last reset */
  bytesDown(): number;
  bytesUp(): number;
  resetCounts(): void;
  /** connections opened through the proxy so far */
  connections(): number;
  close(): Promise<void>;
}

/** Resets a connection (RST), or closes it when its side has ended: Node cannot reset a socket
 *  whose shutdown is under way (an answer of EINVAL), and then never closes its handle, so the
 *  process spins at 100% CPU after its 'exit' event instead of ending. A link the proxy cuts can
 *  be in that state: ended on the far end's FIN a moment before. */
export function reset(s: net.Socket): void {
  if (s.writableEnded) s.destroy();
  else s.resetAndDestroy();
}

export async function tcpProxy(targetPort: number, listenPort = 0): Promise<TcpProxy> {
  let mode: "pass" | "cut" | "hole" = "pass";
  let delay = 0, down = 0, upBytes = 0, opened = 0;
  const live = new Set<net.Socket>();
  // what a black hole holds back, per direction of each connection: as TCP would retransmit it,
  // it arrives after the hole heals if the connection is still there
  const held = new Set<() => void>();
  const broken = new Set<() => void>();
  const pipe = (from: net.Socket, to: net.Socket, count: (n: number) => void) => {
    const queue: Buffer[] = [];
    const flush = () => { while (queue.length && !to.destroyed) { const d = queue.shift()!; count(d.length); to.write(d); } };
    from.on("data", (d: Buffer) => {
      const send = () => { queue.push(d); if (mode === "pass") flush(); };
      if (delay > 0) setTimeout(send, delay); else send();
    });
    return flush;
  };
  const srv = net.createServer((client) => {
    if (mode === "cut") { reset(client); return; }
    opened++;
    const upstream = net.connect(targetPort, "127.0.0.1");
    live.add(client); live.add(upstream);
    const flushes = [pipe(client, upstream, (n) => (upBytes += n)), pipe(upstream, client, (n) => (down += n))];
    for (const f of flushes) held.add(f);
    const end = () => { client.destroy(); upstream.destroy(); live.delete(client); live.delete(upstream); for (const f of flushes) held.delete(f); };
    // in a black hole, one side closing is not heard by the other (its packets are lost too): the
    // other side learns only when the hole heals (as TCP would, from a reset)
    const closed = () => { if (mode === "hole") broken.add(end); else end(); };
    for (const s of [client, upstream]) { s.on("error", closed); s.on("close", closed); s.setNoDelay(true); }
  });
  await new Promise<void>((r) => srv.listen(listenPort, "127.0.0.1", () => r()));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`, port,
    cut() { mode = "cut"; for (const s of live) reset(s); live.clear(); },
    blackHole() { mode = "hole"; },
    latency(ms) { delay = ms; },
    heal() {
      mode = "pass"; delay = 0;
      for (const end of broken) end();
      broken.clear();
      for (const f of held) f();
    },
    bytesDown: () => down, bytesUp: () => upBytes,
    resetCounts() { down = 0; upBytes = 0; },
    connections: () => opened,
    close() { mode = "cut"; for (const s of live) s.destroy(); live.clear(); return new Promise<void>((r) => srv.close(() => r())); },
  };
}
