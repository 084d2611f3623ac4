// Fleet control from the platform: who may relay API requests to an edge (the `ClearBlade-Edge`
// header), run remote operations on it (an allowed command, a restart, reading its settings), and
// the fleet report. The sync hub carries the requests to the edge; this module decides who may
// send them and shapes what they carry.
import { Port } from "../core/port.ts";
import { LEVEL } from "../auth/permissions.ts";
import { developerOnly, type Principal } from "../auth/principal.ts";
import { fail } from "../core/errors.ts";
import { nowSeconds } from "../core/ids.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { TokenKind } from "../store/tokens.ts";
import { edgesRepo } from "../store/edges.ts";
import { statusRepo } from "../store/sync.ts";
import { systemsRepo, type SystemRow } from "../store/systems.ts";
import type { DomainDeps } from "./deps.ts";
import type { Edges } from "./edges.ts";
import type { Systems } from "./systems.ts";

/** The caller the platform vouches for to an edge: its kind and id, never its token. */
export interface VouchedCaller { kind: TokenKind; id: string; systemKey: string; readOnly?: boolean }

/** The operations an edge runs for its platform. */
export type EdgeOp = { op: "exec"; command: string; timeoutMs: number } | { op: "restart" } | { op: "config" };

/** What carries an operation to an edge and brings its answer (the sync hub, on a platform). */
export interface FleetLink { op(systemKey: string, edge: string, op: EdgeOp, timeoutMs: number): Promise<unknown> }

const EXEC_FIELDS = new Set(["command", "timeout"]);
/** A command's time limit when the body sets none, and the most it may set (seconds). */
const EXEC_DEFAULT_S = 30;
const EXEC_MAX_S = 300;
/** How much longer than a command's own limit the platform waits for the edge's answer. */
const EXEC_MARGIN_MS = 5_000;
/** How long a restart or a read of the settings may take to be answered. */
const OP_TIMEOUT_MS = 10_000;
/** The report's period: at most a year. */
const REPORT_DAYS_MAX = 365;

export class EdgeOps {
  /** Late dependency: the sync hub (platform only). */

  /** `link`: the sync hub's way to an edge, attached by it (a platform only) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly edges: Edges,
    private readonly link = new Port<FleetLink>("fleet link")) {}

  /** The caller to vouch for when relaying a request to an edge: a principal of the edge's system
   *  (its developer, or a user, device or anonymous session of it) that may read that edge (a
   *  role granting read on edges, all or that one by name). The edge checks the request again as
   *  its own API would. */
  async relayCaller(p: Principal, systemKey: string, edge: string): Promise<VouchedCaller> {
    await this.systems.access(p, systemKey);
    await this.edges.requireEdge(systemKey, edge);
    switch (p.kind) {
      case "developer": return { kind: "dev", id: p.id, systemKey, ...(p.key?.readOnly ? { readOnly: true } : {}) };
      case "edge": throw fail("PERMISSION_DENIED", "an edge's token cannot call another edge through the platform");
      default: {
        const level = (await this.d.perms.level(p, { kind: "edges" })) | (await this.d.perms.level(p, { kind: "item", itemKind: "edges", name: edge }));
        if (!(level & LEVEL.READ)) throw fail("PERMISSION_DENIED", `not allowed to reach edge '${edge}' (a role granting read on edges, or on that edge by name)`);
        return { kind: p.kind === "anonymous" ? "anon" : p.kind, id: p.kind === "device" ? p.name : p.id, systemKey };
      }
    }
  }

  /** Remote operations take the system's developer, or a role that grants edgeremoteadmin by
   *  name (all edges or that one): commands and restarts to update, the settings to read. */
  private async guard(p: Principal, systemKey: string, edge: string, level: number) {
    await this.systems.access(p, systemKey);
    await this.edges.requireEdge(systemKey, edge);
    if (p.kind !== "developer") await this.d.perms.requireGranted(p, { kind: "item", itemKind: "edgeremoteadmin", name: edge }, level, `remote operations on edge '${edge}' (edgeremoteadmin)`);
    const link = this.link.get();
    if (!link) throw fail("INVALID_ARGUMENT", "remote operations are sent by the platform, not by an edge");
    return link;
  }

  /** Runs one of the edge's allowed command lines: `{command, timeout?}` (seconds, 1 to 300, 30
   *  by default); answers its output (bounded), exit code and whether its time ran out. */
  async exec(p: Principal, systemKey: string, edge: string, body: unknown) {
    const b = objectBody(body);
    knownFields(b, EXEC_FIELDS);
    if (typeof b.command !== "string" || !b.command.trim()) throw fail("INVALID_ARGUMENT", "command must be a command line the edge allows");
    if (b.command.length > 4096) throw fail("INVALID_ARGUMENT", "command is longer than 4096 characters");
    const timeout = b.timeout ?? EXEC_DEFAULT_S;
    if (typeof timeout !== "number" || !Number.isInteger(timeout) || timeout < 1 || timeout > EXEC_MAX_S)
      throw fail("INVALID_ARGUMENT", `timeout must be a whole number of seconds from 1 to ${EXEC_MAX_S}`);
    const link = await this.guard(p, systemKey, edge, LEVEL.UPDATE);
    return link.op(systemKey, edge, { op: "exec", command: b.command, timeoutMs: timeout * 1000 }, timeout * 1000 + EXEC_MARGIN_MS);
  }

  /** Restarts the edge's process parts (ClearBlade answers a JSON string). */
  async restart(p: Principal, systemKey: string, edge: string) {
    const link = await this.guard(p, systemKey, edge, LEVEL.UPDATE);
    return link.op(systemKey, edge, { op: "restart" }, OP_TIMEOUT_MS);
  }

  /** The edge's running settings, without its secrets. */
  async config(p: Principal, systemKey: string, edge: string) {
    const link = await this.guard(p, systemKey, edge, LEVEL.READ);
    return link.op(systemKey, edge, { op: "config" }, OP_TIMEOUT_MS);
  }

  /** The fleet report of a developer's systems (every system for a platform admin): per system and
   *  edge, whether it is connected now, when it was first and last heard from, whether that was
   *  within the last `days` days, its build and platform, and the assets failing on it. */
  async report(p: Principal, daysText: string | null) {
    const dev = developerOnly(p, "the edge report");
    const days = daysText === null || daysText === "" ? 7 : Number(daysText);
    if (!Number.isInteger(days) || days < 1 || days > REPORT_DAYS_MAX) throw fail("INVALID_ARGUMENT", `report_days must be a whole number of days from 1 to ${REPORT_DAYS_MAX}`);
    const db = this.d.db;
    const since = nowSeconds() - days * 86_400;
    let systems: SystemRow[] = dev.admin ? await systemsRepo.all(db) : await systemsRepo.byOwner(db, dev.id);
    if (dev.key?.systems) systems = systems.filter((s) => dev.key!.systems!.includes(s.system_key));
    const totals = { systems: 0, edges: 0, connected: 0, seen_in_period: 0, never_connected: 0, with_failures: 0 };
    const out: Record<string, { name: string; edges: Record<string, unknown> }> = {};
    const iso = (s: number | null | undefined) => (s ? new Date(s * 1000).toISOString() : null);
    for (const s of systems) {
      const rows = await edgesRepo.all(db, s.system_key);
      if (!rows.length) continue;
      totals.systems++;
      const edges: Record<string, unknown> = {};
      for (const e of rows) {
        const connected = this.edges.liveOf(s.system_key, e.name) ?? e.is_connected === 1;
        const failures = await statusRepo.failedFor(db, s.system_key, e.name);
        const seen = connected || (e.last_talked ?? 0) >= since;
        totals.edges++;
        if (connected) totals.connected++;
        if (seen) totals.seen_in_period++;
        if (!e.first_talked) totals.never_connected++;
        if (failures.length) totals.with_failures++;
        edges[e.name] = {
          connected, seen_in_period: seen, first_seen: iso(e.first_talked), last_seen: iso(e.last_talked),
          version: e.last_seen_version ?? "", os: e.last_seen_os ?? "", architecture: e.last_seen_architecture ?? "",
          failed_assets: failures.length,
          failures: failures.slice(0, 20).map((f) => ({ asset_type: f.asset_type, asset_name: f.asset_name, last_error: f.last_error })),
          last_refusal: e.last_refusal ?? "", last_refusal_at: iso(e.last_refusal_at),
        };
      }
      out[s.system_key] = { name: s.name, edges };
    }
    return { report_days: days, since: new Date(since * 1000).toISOString(), generated_at: new Date().toISOString(), totals, systems: out };
  }
}
