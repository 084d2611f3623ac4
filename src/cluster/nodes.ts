// The platform nodes on one database: each writes a heartbeat row. A node without Redis warns
// when it sees another live node (two nodes on one database without Redis share neither messages
// nor caches); a clustered node frees the edges of nodes whose heartbeat stopped (a node killed
// outright never marks its edges disconnected itself).
import type { Logger } from "../core/log.ts";
import type { Db } from "../store/db.ts";
import { clusterRepo } from "../store/cluster.ts";

export const HEARTBEAT_MS = 2_000;
/** A node silent this long is dead. */
export const DEAD_MS = 4 * HEARTBEAT_MS;
/** Rows of nodes dead this long are dropped. */
const FORGET_MS = 86_400_000;

export class NodeRegistry {
  private timer: ReturnType<typeof setInterval> | null = null;
  /** the beat under way */
  private beating: Promise<void> | null = null;
  private readonly startedAt = Date.now();
  private warned = new Set<string>();
  /** live nodes at the last heartbeat, this one included */
  alive: string[] = [];
  /** Since when no other node has been seen live on the database (null while one is): until then
   *  this node may not take what it caches of rows as exact. A node that never beats (an edge)
   *  is alone from its start. */
  aloneSince: number | null = this.startedAt;

  constructor(private readonly d: { db: Db; log: Logger; nodeId: string; clustered: boolean }) {}

  /** The database the beats go to: a connection of their own on a shared server, so that they
   *  never wait behind the node's other work in its pool (a herd's writes queued there for more
   *  than DEAD_MS, and the other nodes took this live one for dead and freed its edges). */
  private beatDb: Db | null = null;
  beatOn(db: Db) { this.beatDb = db; }

  async start() {
    await this.beat(true);
    this.timer = setInterval(() => {
      // one beat at a time: beats queued behind a busy database would each judge the others on
      // what it read before the last one wrote (and free their edges from a stale list)
      if (this.beating) return;
      this.beating = this.beat().catch((err) => this.d.log.warn("cluster: heartbeat failed", { err })).finally(() => { this.beating = null; });
    }, HEARTBEAT_MS);
    this.timer.unref();
  }

  async beat(first = false) {
    const { nodeId, clustered } = this.d, db = this.beatDb ?? this.d.db;
    const now = Date.now();
    await clusterRepo.beat(db, nodeId, this.startedAt, now, clustered);
    const alive = await clusterRepo.alive(db, now - DEAD_MS);
    this.alive = alive.map((n) => n.node_id);
    if (this.alive.some((n) => n !== nodeId)) this.aloneSince = null;
    else this.aloneSince ??= now;
    for (const n of alive) {
      if (n.node_id === nodeId || this.warned.has(n.node_id)) continue;
      if (!clustered || !n.clustered) {
        this.warned.add(n.node_id);
        this.d.log.warn(clustered
          ? "cluster: another platform node on this database runs without --redis-url: it shares neither messages nor caches with this cluster"
          : "another platform node is live on this database, and this one runs alone (no --redis-url): the two share neither MQTT messages, caches nor edge connections; give every node the same --redis-url",
          { node: n.node_id });
      }
    }
    // in a cluster, the edges of dead nodes are disconnected; a node running alone does that at
    // its start (it is then the only one that can have held them)
    if (clustered || (first && this.alive.every((n) => n === nodeId))) {
      const freed = await clusterRepo.releaseEdgesOfDead(db, clustered ? this.alive : [nodeId]);
      if (freed.changes && !first) this.d.log.warn("cluster: edges of nodes whose heartbeat stopped shown disconnected", { edges: freed.changes, alive: this.alive });
    }
    await clusterRepo.forgetDead(db, now - FORGET_MS);
  }

  async stop() {
    if (this.timer) clearInterval(this.timer);
    // a beat under way would write this node's row again after it left
    await this.beating;
    await clusterRepo.leave(this.beatDb ?? this.d.db, this.d.nodeId).catch(() => { /* gone with the database */ });
  }
}
