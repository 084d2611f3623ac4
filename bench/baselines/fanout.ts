// Baseline for bench/fleet.ts's "one change to all edges": a bare Bun WebSocket server with no
// Outpost code. On `GET /send?group=g` it sends one small text frame (one row marker of group g,
// which the simulator recognises) to every open socket and answers, once every socket's one-line
// acknowledgement came back (or 30 s passed), with each acknowledgement's time since the send
// began (ms). What is left is Bun's send per socket and the kernel's, on the same machine, against
// the same simulator (its "ack" mode: it only answers each frame).
import type { ServerWebSocket } from "bun";

const port = Number(process.argv[2]);
const ACK_WAIT_MS = 30_000;
/** per link: the last round it acknowledged */
interface Link { acked: number }
const sockets = new Set<ServerWebSocket<Link>>();
let round = 0, sentAt = 0, expected = 0;
let acks: number[] = [];
let allAcked: () => void = () => {};

Bun.serve<Link, never>({
  port,
  hostname: "127.0.0.1",
  async fetch(req, server) {
    const url = new URL(req.url);
    if (url.pathname === "/send") {
      round++;
      acks = [];
      expected = sockets.size;
      const done = new Promise<void>((r) => { allAcked = r; });
      const text = `{"sensor":"${url.searchParams.get("group")}/0"}`;
      sentAt = performance.now();
      for (const ws of sockets) ws.sendText(text);
      await Promise.race([done, Bun.sleep(ACK_WAIT_MS)]);
      return Response.json({ links: expected, acks });
    }
    if (server.upgrade(req, { data: { acked: 0 } })) return undefined;
    return new Response("ok");
  },
  websocket: {
    open(ws) { sockets.add(ws); },
    message(ws) {
      if (ws.data.acked === round) return;
      ws.data.acked = round;
      acks.push(performance.now() - sentAt);
      if (acks.length === expected) allAcked();
    },
    close(ws) { sockets.delete(ws); },
  },
});
