// A node's link to the Redis of its cluster for the state code services share across nodes
// (service cache values, locks): a command connection and a subscriber, with Bun's client. While
// Redis cannot be reached, commands fail at once with SHARED_STORE_UNAVAILABLE (never a silent
// per-node fallback: two nodes each granting "the" lock would be worse than an error), and the
// link reconnects in the background.
import { RedisClient } from "bun";
import { fail } from "../core/errors.ts";
import type { Logger } from "../core/log.ts";

const COMMAND_TIMEOUT_MS = 2_000;
const RECONNECT_MS = 1_000;

export class SharedRedis {
  private readonly cmd: RedisClient;
  private readonly sub: RedisClient;
  private readonly channels = new Map<string, (message: string) => void>();
  private up = false;
  private subscribed = false;
  private stopped = false;
  private retry: ReturnType<typeof setTimeout> | null = null;

  constructor(url: string, private readonly log: Logger) {
    const opts = { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: 1_000 };
    this.cmd = new RedisClient(url, opts);
    this.sub = new RedisClient(url, opts);
    this.cmd.onclose = () => this.down("connection closed");
    this.sub.onclose = () => { this.subscribed = false; this.down("subscriber closed"); };
  }

  get available() { return this.up; }

  /** Connects (a Redis out of reach is tried again in the background, not an error). */
  async start() { await this.connect(); }

  /** Calls `on` with each message on `channel` (register before start). */
  subscribe(channel: string, on: (message: string) => void) { this.channels.set(channel, on); }

  private async connect() {
    if (this.stopped) return;
    try {
      if (!this.cmd.connected) await this.cmd.connect();
      if (!this.subscribed) {
        if (!this.sub.connected) await this.sub.connect();
        for (const [channel, on] of this.channels) await this.sub.subscribe(channel, (m) => on(m));
        this.subscribed = true;
      }
      if (!this.up) { this.up = true; this.log.info("shared caches and locks: Redis connected"); }
    } catch (err) {
      this.down(String((err as Error)?.message ?? err));
    }
  }

  private down(why: string) {
    if (this.up) this.log.warn("shared caches and locks: Redis unavailable, their calls fail until it is back", { why });
    this.up = false;
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => { this.retry = null; void this.connect(); }, RECONNECT_MS);
    this.retry.unref?.();
  }

  /** A command's answer; SHARED_STORE_UNAVAILABLE when Redis cannot answer in time. */
  async send<T = unknown>(command: string, args: string[]): Promise<T> {
    if (!this.up) throw fail("SHARED_STORE_UNAVAILABLE", "the cluster's Redis cannot be reached (service caches and locks are shared through it)");
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        this.cmd.send(command, args) as Promise<T>,
        new Promise<never>((_r, rej) => { timer = setTimeout(() => rej(new Error("timed out")), COMMAND_TIMEOUT_MS); }),
      ]);
    } catch (err) {
      const why = String((err as Error)?.message ?? err);
      if (!this.cmd.connected || why === "timed out") this.down(why);
      else this.log.error("shared caches and locks: Redis refused a command", { command, why });
      throw fail("SHARED_STORE_UNAVAILABLE", `the cluster's Redis did not answer (${why})`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Runs a Lua script on `keys` with `args`. */
  eval<T = unknown>(script: string, keys: string[], args: (string | number)[]): Promise<T> {
    return this.send<T>("EVAL", [script, String(keys.length), ...keys, ...args.map(String)]);
  }

  stop() {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.cmd.onclose = null;
    this.sub.onclose = null;
    try { this.cmd.close(); } catch { /* closed */ }
    try { this.sub.close(); } catch { /* closed */ }
  }
}
