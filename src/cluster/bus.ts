// The nodes' event bus on Redis pub/sub: one channel every node of a cluster subscribes to.
// Messages are small JSON objects; those sent within one turn of the event loop go out as one
// publish (a burst of cache invalidations costs one round trip). A message may name the node it is
// for (`to`); requests wait for that node's reply.
//
// Redis pub/sub keeps nothing for a subscriber that is away: after the link comes back, `onResync`
// handlers run so each node drops what it may have missed news of. ioredis (the client the MQTT
// emitter uses too) reconnects and subscribes again by itself.
import Redis from "ioredis";
import { newUuid } from "../core/ids.ts";
import type { Logger } from "../core/log.ts";

export const CLUSTER_CHANNEL = "outpost:cluster";
/** Messages kept while the link is down. */
const OUTGOING_MAX = 10_000;

export interface BusMessage { kind: string; from: string; to?: string; id?: string; body?: unknown }
type Handler = (body: any, m: BusMessage) => void;
type Server = (body: any) => Promise<unknown>;

export class ClusterBus {
  private readonly cmd: Redis;
  private readonly sub: Redis;
  private readonly handlers = new Map<string, Set<Handler>>();
  private readonly servers = new Map<string, Server>();
  private readonly waiting = new Map<string, { resolve(v: unknown): void; reject(e: Error): void; timer: ReturnType<typeof setTimeout> }>();
  private readonly resyncs = new Set<() => void>();
  private outgoing: BusMessage[] = [];
  private up = false;
  private stopped = false;
  /** messages received from other nodes (for tests and metrics) */
  received = 0;

  constructor(url: string, readonly nodeId: string, private readonly log: Logger) {
    // no ready check: its INFO may follow the SUBSCRIBE, which Redis then refuses (see redisEmitter)
    const opts = { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 1, retryStrategy: () => 500, enableReadyCheck: false };
    this.cmd = new Redis(url, opts);
    this.sub = new Redis(url, opts);
    for (const c of [this.cmd, this.sub]) c.on("error", (err: Error) => this.log.debug("cluster: Redis error", { err: err.message }));
    this.sub.on("message", (_channel: string, text: string) => this.receive(text));
  }

  get available() { return this.up; }

  /** Connects; a Redis out of reach at the start fails it (a node must not run half-clustered). */
  async start() {
    const once = { retryStrategy: () => null };
    Object.assign(this.cmd.options, once);
    Object.assign(this.sub.options, once);
    await this.cmd.connect();
    await this.sub.connect();
    await this.sub.subscribe(CLUSTER_CHANNEL);
    this.cmd.options.retryStrategy = this.sub.options.retryStrategy = () => 500;
    this.up = true;
    this.sub.on("close", () => this.down());
    this.sub.on("ready", () => this.back());
  }

  private down() {
    if (this.stopped || !this.up) return;
    this.up = false;
    this.log.warn("cluster: Redis link lost; other nodes' changes reach this node when it is back");
  }

  private back() {
    if (this.stopped || this.up) return;
    this.up = true;
    this.log.info("cluster: Redis link back; dropping cached state changed meanwhile");
    for (const fn of this.resyncs) { try { fn(); } catch (err) { this.log.error("cluster: resync failed", { err }); } }
    this.flush();
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

  /** Sends to every other node (or to `to`), with the other messages of this turn. While the link
   *  is down messages wait (the newest OUTGOING_MAX) and go when it is back. */
  send(m: Omit<BusMessage, "from">) {
    this.outgoing.push({ ...m, from: this.nodeId });
    if (this.outgoing.length > OUTGOING_MAX) this.outgoing.splice(0, this.outgoing.length - OUTGOING_MAX);
    if (this.outgoing.length === 1 && this.up) queueMicrotask(() => this.flush());
  }

  private flush() {
    if (!this.outgoing.length || !this.up) return;
    const batch = this.outgoing;
    this.outgoing = [];
    this.cmd.publish(CLUSTER_CHANNEL, JSON.stringify(batch)).catch((err) => {
      this.log.debug("cluster: publish failed; sent again when the link is back", { err: (err as Error).message });
      this.outgoing.unshift(...batch);
      this.down();
    });
  }

  /** Asks one node and waits for its answer, at most `timeoutMs`. */
  request<T>(to: string, kind: string, body: unknown, timeoutMs: number): Promise<T> {
    const id = newUuid();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => { this.waiting.delete(id); reject(new Error(`node ${to} did not answer within ${Math.round(timeoutMs / 1000)} s`)); }, timeoutMs);
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      this.send({ kind, to, id, body });
    });
  }

  stop() {
    this.stopped = true;
    this.flush();
    for (const [id, w] of this.waiting) { this.waiting.delete(id); clearTimeout(w.timer); w.reject(new Error("stopping")); }
    this.sub.disconnect();
    // the last batch goes out before the command link closes
    void this.cmd.quit().catch(() => this.cmd.disconnect());
  }
}
