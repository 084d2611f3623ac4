// Baseline: a bare HTTP server that stores a PUT body as a file (streamed to disk), for the raw
// copy bench/filesync.ts measures file sync against.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
const port = Number(process.argv[2]);
const dir = mkdtempSync(join(tmpdir(), "outpost-bench-put-"));
let n = 0;
Bun.serve({
  port, hostname: "127.0.0.1", maxRequestBodySize: 1024 * 1024 * 1024,
  async fetch(req) {
    if (req.method !== "PUT") return new Response("ok");
    const sink = Bun.file(join(dir, `f${n++}`)).writer();
    let size = 0;
    for await (const chunk of req.body!) { sink.write(chunk); size += chunk.byteLength; }
    await sink.end();
    return Response.json({ size });
  },
});
