// src/http/listenQueue.ts: a listener's queue of connections not yet accepted, deepened past Bun's
// 512 (to the system's net.core.somaxconn) so a herd of edges opening at once is queued, not dropped.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { deepenListenQueue } from "../../../src/http/listenQueue.ts";

/** the queue's depth of the listener on `port`, as `ss` shows it (null: no ss here) */
function depth(port: number): number | null {
  const r = Bun.spawnSync(["ss", "-ltnH", `sport = :${port}`]);
  if (!r.success) return null;
  return Number(r.stdout.toString().trim().split(/\s+/)[2]);
}

describe.if(process.platform === "linux")("deepenListenQueue", () => {
  test("this process's listener on the port is listened on again, as deep as the system allows", () => {
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
    try {
      const before = depth(server.port!);
      expect(deepenListenQueue(server.port!)).toBe(1);
      const after = depth(server.port!);
      if (before !== null && after !== null) {
        const most = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
        expect(after).toBe(most);
        if (most > 512) expect(after).toBeGreaterThan(before);
      }
    } finally { void server.stop(true); }
  });

  test("only the listener on that port: another of this process's keeps its queue", () => {
    const one = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
    const other = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
    try {
      const before = depth(other.port!);
      expect(deepenListenQueue(one.port!)).toBe(1);
      expect(depth(other.port!)).toBe(before);
    } finally { void one.stop(true); void other.stop(true); }
  });

  test("a port nothing here listens on: nothing deepened", () => {
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("ok") });
    const port = server.port!;
    void server.stop(true);
    expect(deepenListenQueue(port)).toBe(0);
  });
});
