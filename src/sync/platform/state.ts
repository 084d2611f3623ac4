// What the platform's sync steps share: the sessions this node holds (by edge, by system, by
// socket), what it knows of each edge beyond them, and the log entries as wire text.
import { LruMap } from "../../core/cache.ts";
import { isDefinitionType } from "../../core/syncKinds.ts";
import { KINDS } from "../kinds/index.ts";
import type { ChangeRow } from "../../store/sync.ts";
import type { EdgeSession, SessionHub } from "./session.ts";
import type { ElsewhereHub, HubDeps, Socket } from "./types.ts";

/** Log entries kept as wire text, shared by the sessions of a system's edges. */
const WIRE_CACHE = 20_000;

export class HubState implements SessionHub {
  readonly sessions = new Map<string, EdgeSession>();
  readonly bySystem = new Map<string, Set<EdgeSession>>();
  readonly bySocket = new WeakMap<Socket, EdgeSession>();
  /** log entries as wire text, by sequence number (an LruMap: dropping a plain Map's first key
   *  was the platform's largest cost of sending the log) */
  readonly wire = new LruMap<number, string>(WIRE_CACHE);
  /** how far ahead of the platform's clock an edge's clock was (ms), at its last hello */
  readonly skews = new Map<string, number>();
  /** edges refused at their last hello for the protocol they speak: why, and when */
  readonly refused = new Map<string, { reason: string; at: string }>();
  /** per refused edge (by system key and name as its hello gave them): when it was last logged
   *  and its record last updated, and how many refusals followed unlogged */
  readonly refusals = new LruMap<string, { why: string; loggedAt: number; more: number; recordedAt: number; recordedWhy: string }>(10_000);

  /** relayed messages for one edge that was connected to no node, or whose link was too far
   *  behind (/metrics) */
  relayDropped = 0;

  constructor(readonly d: HubDeps) {}

  /** set in a cluster: reaches the edges other nodes hold */
  get elsewhere(): ElsewhereHub | null { return this.d.elsewhere.get(); }

  /** A log entry as the text a batch carries (its body is stored as JSON already). */
  wireText(r: ChangeRow): string {
    let t = this.wire.get(r.seq);
    if (t === undefined) {
      const wire = r.op === "upsert" && r.body !== null && isDefinitionType(r.asset_type) ? KINDS[r.asset_type].wire : undefined;
      const body = wire ? JSON.stringify(wire.out(JSON.parse(r.body!), this.d.secrets)) : r.body ?? "null";
      t = `{"seq":${r.seq},"type":${JSON.stringify(r.asset_type)},"name":${JSON.stringify(r.asset_name)},"item":${JSON.stringify(r.item_id)},"op":${JSON.stringify(r.op)},"hlc":${JSON.stringify(r.hlc)},${r.version ? `"version":${r.version},` : ""}"body":${body}}`;
      this.wire.set(r.seq, t);
    }
    return t;
  }
}
