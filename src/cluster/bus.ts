// The nodes' event bus on Redis pub/sub: one channel every node of a cluster subscribes to.
// Messages are small JSON objects; those sent within one turn of the event loop go out as one
// publish (a burst of cache invalidations costs one round trip). A message may name the node it is
// for (`to`); requests wait for that node's reply.
//
// Redis pub/sub keeps nothing for a subscriber that is away: after the link comes back, `onResync`
// handlers run so each node drops what it may have missed news of.
import { RedisClient } from "bun";
import { newUuid } from "../core/ids.ts";
import type { Logger } from "../core/log.ts";

export const CLUSTER_CHANNEL = "outpost:cluster";
const RECONNECT_MS = 1_000;

export interface BusMessage { kind: string; from: string; to?: string; id?: string; body?: unknown }
type Handler = (body: any, m: BusMessage) => void;
type Server = (body: any) => Promise<unknown>;

export class ClusterBus {
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly handlers = new Map<string, Set<Handler>>();
  private readonly servers = new Map<string, Server>();
  private readonly waiting = new Map<string, { resolve(v: unknown): void; reject(e: Error): void; timer: ReturnType<typeof setTimeout> }>();
  private readonly resyncs = new Set<() => void>();
  private outgoing: BusMessage[] = [];
  private up = false;
  private wasUp = false;
  private stopped = false;
  private retry: ReturnType<typeof setTimeout> | null = null;
  /** messages received from other nodes (for tests and metrics) */
  received = 0;

  constructor(url: string, readonly nodeId: string, private readonly log: Logger) {
    const opts = { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: 2_000 };
    this.cmd = new RedisClient(url, opts);
    this.sub = new RedisClient(url, opts);
    this.cmd.onclose = () => this.down("connection closed");
    this.sub.onclose = () => this.down("subscriber closed");
  }

  get available() { return this.up; }

  /** Connects; a Redis out of reach at the start fails it (a node must not run half-clustered). */
  async start() {
    await this.cmd.connect();
    await this.sub.connect();
    await this.sub.subscribe(CLUSTER_CHANNEL, (text) => this.receive(text));
    this.up = this.wasUp = true;
  }

  private async reconnect() {
    if (this.stopped) return;
    try {
      if (!this.cmd.connected) await this.cmd.connect();
      if (!this.sub.connected) {
        await this.sub.connect();
        await this.sub.subscribe(CLUSTER_CHANNEL, (text) => this.receive(text));
      }
      this.up = true;
      this.log.info("cluster: Redis link back; dropping cached state changed meanwhile");
      for (const fn of this.resyncs) { try { fn(); } catch (err) { this.log.error("cluster: resync failed", { err }); } }
    } catch (err) {
      this.down(String((err as Error)?.message ?? err));
    }
  }

  private down(why: string) {
    if (this.stopped) return;
    if (this.up) this.log.warn("cluster: Redis link lost; other nodes' changes reach this node when it is back", { why });
    this.up = false;
    if (!this.wasUp || this.retry) return;
    try { this.sub.close(); } catch { /* closed */ }
    this.retry = setTimeout(() => { this.retry = null; void this.reconnect(); }, RECONNECT_MS);
    this.retry.unref?.();
  }

  private receive(text: string) {
    let batch: BusMessage[];
    try { batch = JSON.parse(text) as BusMessage[]; } catch { return; }
    if (!Array.isArray(batch)) return;
    for (const m of batch) {
      if (!m || m.from === this.nodeId || (m.to && m.to !== this.nodeId)) continue;
      this.received++;
      if (m.kind === "reply") { this.replied(m); continue; }
      const server = this.servers.get(m.kind);
      if (server && m.id) {
        server(m.body).then((result) => this.send({ kind: "reply", to: m.from, id: m.id, body: { ok: true, result } }),
          (err) => this.send({ kind: "reply", to: m.from, id: m.id, body: { ok: false, error: String((err as Error)?.message ?? err) } }));
        continue;
      }
      for (const h of this.handlers.get(m.kind) ?? []) {
        try { h(m.body, m); } catch (err) { this.log.error("cluster: handler failed", { kind: m.kind, err }); }
      }
    }
  }

  private replied(m: BusMessage) {
    const w = m.id ? this.waiting.get(m.id) : undefined;
    if (!w) return;
    this.waiting.delete(m.id!);
    clearTimeout(w.timer);
    const b = m.body as { ok: boolean; result?: unknown; error?: string };
    if (b.ok) w.resolve(b.result); else w.reject(new Error(b.error ?? "failed"));
  }

  /** Handles messages of a kind from other nodes. */
  on(kind: string, h: Handler) { let s = this.handlers.get(kind); if (!s) this.handlers.set(kind, (s = new Set())); s.add(h); return () => s!.delete(h); }
  /** Answers requests of a kind sent to this node. */
  serve(kind: string, s: Server) { this.servers.set(kind, s); }
  /** Runs after the Redis link came back (news sent meanwhile was lost). */
  onResync(fn: () => void) { this.resyncs.add(fn); }

  /** Sends to every other node (or to `to`), with the other messages of this turn. */
  send(m: Omit<BusMessage, "from">) {
    if (!this.up) return;
    this.outgoing.push({ ...m, from: this.nodeId });
    if (this.outgoing.length === 1) queueMicrotask(() => this.flush());
  }

  private flush() {
    const batch = this.outgoing;
    this.outgoing = [];
    if (!batch.length || !this.up) return;
    this.cmd.publish(CLUSTER_CHANNEL, JSON.stringify(batch)).catch((err) => this.down(String((err as Error)?.message ?? err)));
  }

  /** Asks one node and waits for its answer, at most `timeoutMs`. */
  request<T>(to: string, kind: string, body: unknown, timeoutMs: number): Promise<T> {
    if (!this.up) return Promise.reject(new Error("the cluster's Redis is out of reach"));
    const id = newUuid();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => { this.waiting.delete(id); reject(new Error(`node ${to} did not answer within ${Math.round(timeoutMs / 1000)} s`)); }, timeoutMs);
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      this.send({ kind, to, id, body });
    });
  }

  stop() {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.flush();
    for (const [id, w] of this.waiting) { this.waiting.delete(id); clearTimeout(w.timer); w.reject(new Error("stopping")); }
    this.cmd.onclose = null;
    this.sub.onclose = null;
    try { this.sub.close(); } catch { /* closed */ }
    // the last batch goes out before the command link closes
    setTimeout(() => { try { this.cmd.close(); } catch { /* closed */ } }, 50).unref?.();
  }
}
