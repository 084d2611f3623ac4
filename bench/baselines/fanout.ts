// Baseline for bench/fleet.ts's "one change to all edges": a bare Bun WebSocket server with no
// Outpost code. It welcomes each simulated edge's hello and, on `GET /send?group=g`, sends one
// batch frame (the shape the simulator recognises, one row of group g) to every open socket,
// reading the acknowledgements that come back and doing nothing with them. What is left is Bun's
// send per socket and the kernel's, on the same machine, against the same simulator.
import type { ServerWebSocket } from "bun";

const port = Number(process.argv[2]);
const sockets = new Set<ServerWebSocket<unknown>>();
let seq = 0;
Bun.serve({
  port,
  hostname: "127.0.0.1",
  fetch(req, server) {
    const url = new URL(req.url);
    if (url.pathname === "/send") {
      seq++;
      const text = `{"t":"batch","changes":[{"row":{"sensor":"${url.searchParams.get("group")}/0"}}],"upTo":${seq},"snapshot":false}`;
      for (const ws of sockets) ws.sendText(text);
      return new Response(String(sockets.size));
    }
    if (server.upgrade(req)) return undefined;
    return new Response("ok");
  },
  websocket: {
    open(ws) { sockets.add(ws); },
    message(ws, m) { if (typeof m === "string" && m.startsWith('{"t":"hello"')) ws.sendText(`{"t":"welcome","snapshot":false,"incarnation":"bare","seq":${seq}}`); },
    close(ws) { sockets.delete(ws); },
  },
});
