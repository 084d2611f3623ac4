// The nodes' event bus on Redis pub/sub: one channel every node of a cluster subscribes to.
// Messages are small JSON objects; those sent within one turn of the event loop go out as one
// publish (a burst of cache invalidations costs one round trip). A message may name the node it is
// for (`to`); requests wait for that node's reply.
//
// A message longer than INLINE_MAX (a relayed request or answer of up to 8 MiB) is parked under a
// key of its own and only a reference to it is published: its addressee alone reads it, and the
// subscribers' output buffers stay far from Redis's pub/sub limit (32 MB by default), past which
// Redis drops a subscriber that reads slower than the messages come.
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
/** A message's JSON longer than this is parked under a key; the publish carries its name. */
export const INLINE_MAX = 64 * 1024;
const PARKED_PREFIX = "outpost:cluster:parked:";
/** How long a parked message waits for its reader (any request waiting for it ends sooner). */
const PARKED_TTL_MS = 5 * 60_000;

export interface BusMessage { kind: string; from: string; to?: string; id?: string; body?: unknown; parked?: string }
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
  /** received batches wait here behind one that has parked messages still to read (order kept) */
  private inbound: Promise<void> = Promise.resolve();
  private inboundWaiting = 0;
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
    const mine = batch.filter((m) => m && m.from !== this.nodeId && (!m.to || m.to === this.nodeId));
    if (!mine.length) return;
    if (!this.inboundWaiting && !mine.some((m) => m.parked)) { this.deliver(mine); return; }
    this.inboundWaiting++;
    this.inbound = this.inbound.then(() => this.unpark(mine)).then((ms) => this.deliver(ms))
      .catch((err) => this.log.warn("cluster: a parked message could not be read", { err: (err as Error).message }))
      .finally(() => { this.inboundWaiting--; });
  }

  /** Reads the parked messages of a batch (one addressed to this node is deleted as it is read;
   *  one for every node is left to expire). */
  private async unpark(batch: BusMessage[]): Promise<BusMessage[]> {
    const out: BusMessage[] = [];
    for (const m of batch) {
      if (!m.parked) { out.push(m); continue; }
      const key = m.parked;
      const text = m.to ? ((await this.cmd.multi().get(key).del(key).exec())?.[0]?.[1] as string | null) : await this.cmd.get(key);
      if (text === null || text === undefined) { this.log.warn("cluster: a parked message expired before it was read", { kind: m.kind }); continue; }
      out.push(JSON.parse(text) as BusMessage);
    }
    return out;
  }

  private deliver(batch: BusMessage[]) {
    for (const m of batch) {
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
    // the parked messages are set before the publish that names them, on the same link (in order)
    const pipe = this.cmd.pipeline();
    const texts = batch.map((m) => {
      const text = JSON.stringify(m);
      if (text.length <= INLINE_MAX) return text;
      const parked = PARKED_PREFIX + newUuid();
      pipe.set(parked, text, "PX", PARKED_TTL_MS);
      return JSON.stringify({ kind: m.kind, from: m.from, to: m.to, parked });
    });
    pipe.publish(CLUSTER_CHANNEL, `[${texts.join(",")}]`);
    pipe.exec().then((results) => { const failed = results?.find(([err]) => err); if (failed) throw failed[0]; }).catch((err) => {
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
