// Edge groups: named sets of a system's edges and of other groups, to address a fleet by its
// parts. A group is `{name, description, edges: [edge names], edge_groups: [group names]}`; a
// recursive read also lists every edge its nested groups reach (`all_edges`). A group never
// contains itself, directly or through others: a change that would close a cycle is refused.
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { type EdgeGroupRow, edgeGroupsRepo } from "../store/edgeGroups.ts";
import { edgesRepo } from "../store/edges.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const CREATE_FIELDS = new Set(["name", "description", "edges", "edge_groups"]);
const UPDATE_FIELDS = new Set(["description", "edges", "edge_groups"]);
/** Most members of one group (edges and groups each). */
const MEMBERS_MAX = 10_000;

export interface EdgeGroup { name: string; description: string; edges: string[]; edge_groups: string[]; created_at: string; updated_at: string; all_edges?: string[] }

const wire = (r: EdgeGroupRow): EdgeGroup => ({
  name: r.name, description: r.description, edges: JSON.parse(r.edges) as string[], edge_groups: JSON.parse(r.edge_groups) as string[],
  created_at: r.created_at, updated_at: r.updated_at,
});

function names(v: unknown, what: string): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && NAME_RE.test(x))) throw fail("INVALID_ARGUMENT", `${what} must be a list of names`);
  if (v.length > MEMBERS_MAX) throw fail("INVALID_ARGUMENT", `${what} lists more than ${MEMBERS_MAX} names`);
  return [...new Set(v as string[])];
}

export class EdgeGroups {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems) {}

  private async find(ex: Executor, systemKey: string, name: string): Promise<EdgeGroupRow> {
    const r = await edgeGroupsRepo.get(ex, systemKey, name);
    if (!r) throw notFound("edge group", name, "Edge");
    return r;
  }

  /** Edges named must exist; groups named must exist and must not reach `name` (a cycle). */
  private async checkMembers(ex: Executor, systemKey: string, name: string, edges: string[], groups: string[]) {
    if (edges.length) {
      const known = new Set((await edgesRepo.all(ex, systemKey)).map((e) => e.name));
      const missing = edges.filter((e) => !known.has(e));
      if (missing.length) throw fail("INVALID_ARGUMENT", `no edge named ${missing.slice(0, 5).map((m) => `'${m}'`).join(", ")} in this system`);
    }
    if (!groups.length) return;
    const all = new Map((await edgeGroupsRepo.all(ex, systemKey)).map((g) => [g.name, JSON.parse(g.edge_groups) as string[]]));
    all.set(name, groups);
    for (const g of groups) if (!all.has(g)) throw fail("INVALID_ARGUMENT", `no edge group named '${g}' in this system`);
    // a walk from the group through its nested groups: reaching it again is a cycle
    const path = (from: string, seen: string[]): string[] | null => {
      for (const next of all.get(from) ?? []) {
        if (next === name) return [...seen, next];
        if (seen.includes(next)) continue;
        const found = path(next, [...seen, next]);
        if (found) return found;
      }
      return null;
    };
    const cycle = path(name, [name]);
    if (cycle) throw fail("INVALID_ARGUMENT", `edge groups cannot contain themselves: ${cycle.join(" -> ")}`);
  }

  async list(p: Principal, systemKey: string, query: string | null): Promise<EdgeGroup[]> {
    await this.systems.accessAsDeveloper(p, systemKey);
    const q = parseQuery(query ?? undefined, { defaultPageSize: 0 });
    const rows = await edgeGroupsRepo.list(this.d.db, systemKey, q);
    return rows.map(wire);
  }

  /** One group; `recursive`: with `all_edges`, the edges it and its nested groups reach (sorted). */
  async get(p: Principal, systemKey: string, name: string, recursive: boolean): Promise<EdgeGroup> {
    await this.systems.accessAsDeveloper(p, systemKey);
    const g = wire(await this.find(this.d.db, systemKey, name));
    if (!recursive) return g;
    const all = new Map((await edgeGroupsRepo.all(this.d.db, systemKey)).map((r) => [r.name, wire(r)]));
    const edges = new Set<string>(), seen = new Set<string>();
    const walk = (x: EdgeGroup) => {
      if (seen.has(x.name)) return;
      seen.add(x.name);
      for (const e of x.edges) edges.add(e);
      for (const n of x.edge_groups) { const c = all.get(n); if (c) walk(c); }
    };
    walk(g);
    return { ...g, all_edges: [...edges].sort() };
  }

  async create(p: Principal, systemKey: string, body: unknown): Promise<EdgeGroup> {
    await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), CREATE_FIELDS);
    if (typeof b.name !== "string" || !NAME_RE.test(b.name)) throw fail("INVALID_ARGUMENT", "name must be 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')");
    if (b.description !== undefined && typeof b.description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
    const name = b.name;
    const edges = b.edges === undefined ? [] : names(b.edges, "edges");
    const groups = b.edge_groups === undefined ? [] : names(b.edge_groups, "edge_groups");
    return this.d.db.tx(async (tx) => {
      if (await edgeGroupsRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `edge group '${name}' already exists`);
      await this.checkMembers(tx, systemKey, name, edges, groups);
      const at = nowIso();
      const row: EdgeGroupRow = { system_key: systemKey, name, description: (b.description as string | undefined) ?? "", edges: JSON.stringify(edges), edge_groups: JSON.stringify(groups), created_at: at, updated_at: at };
      await edgeGroupsRepo.put(tx, row);
      return wire(row);
    });
  }

  /** Replaces what the body names (description, edges, edge_groups); the rest stays. */
  async update(p: Principal, systemKey: string, name: string, body: unknown): Promise<EdgeGroup> {
    await this.systems.accessAsDeveloper(p, systemKey);
    const b = knownFields(objectBody(body), UPDATE_FIELDS);
    if (b.description !== undefined && typeof b.description !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
    return this.d.db.tx(async (tx) => {
      const old = wire(await this.find(tx, systemKey, name));
      const edges = b.edges === undefined ? old.edges : names(b.edges, "edges");
      const groups = b.edge_groups === undefined ? old.edge_groups : names(b.edge_groups, "edge_groups");
      await this.checkMembers(tx, systemKey, name, b.edges === undefined ? [] : edges, groups);
      const row: EdgeGroupRow = { system_key: systemKey, name, description: (b.description as string | undefined) ?? old.description, edges: JSON.stringify(edges), edge_groups: JSON.stringify(groups), created_at: old.created_at, updated_at: nowIso() };
      await edgeGroupsRepo.put(tx, row);
      return wire(row);
    });
  }

  /** Removes a group, and its name from the groups that nest it. */
  async remove(p: Principal, systemKey: string, name: string): Promise<{ success: true }> {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      await this.find(tx, systemKey, name);
      await edgeGroupsRepo.delete(tx, systemKey, name);
      for (const g of await edgeGroupsRepo.all(tx, systemKey)) {
        const nested = JSON.parse(g.edge_groups) as string[];
        if (nested.includes(name)) await edgeGroupsRepo.put(tx, { ...g, edge_groups: JSON.stringify(nested.filter((n) => n !== name)), updated_at: nowIso() });
      }
    });
    return { success: true };
  }
}
