// A private redis-server for unit tests, on a free port, without persistence (skipped where
// redis-server is missing, see services.ts).
import { createServer } from "node:net";

export async function freePort(): Promise<number> {
  return new Promise((res) => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = (s.address() as { port: number }).port; s.close(() => res(p)); }); });
}

export interface TestRedis { url: string; port: number; stop(): Promise<void> }

/** Starts redis-server (on `port` when given: started again where clients expect it). */
export async function startRedis(port?: number): Promise<TestRedis> {
  const p = port ?? (await freePort());
  const proc = Bun.spawn(["redis-server", "--port", String(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore", stderr: "ignore" });
  for (let i = 0; ; i++) {
    try { const s = await Bun.connect({ hostname: "127.0.0.1", port: p, socket: { data() {} } }); s.end(); break; }
    catch { if (i > 200) throw new Error("redis-server did not start"); await Bun.sleep(25); }
  }
  return { url: `redis://127.0.0.1:${p}`, port: p, stop: async () => { proc.kill(9); await proc.exited; } };
}
