// Deployments: ClearBlade's named sets of assets that many edges share (an edge may be in
// several). A deployment is `{name, description, assets: [{asset_class, asset_id, sync_to_edge,
// sync_to_platform}], edges: [names]}`. Each asset entry stands for a template entry (the class
// for a kind of definition, `asset_id` "" for every asset of it, the two flags for the mode), and
// an edge's effective template is the union of its own template and the entries of every
// deployment naming it (Edges.templateOf, templateEntries.ts): one engine brings both down, and
// keeps per-asset status.
// Edges named need not exist yet (an edge made later gets what its deployments hold).
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { parseQuery } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { type DeploymentRow, deploymentsRepo } from "../store/deployments.ts";
import { edgesRepo } from "../store/edges.ts";
import { rolesRepo } from "../store/roles.ts";
import { assetNames } from "../store/sync.ts";
import { usersRepo } from "../store/users.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";
import { ASSET_CLASSES, type DeploymentAsset, entryOf, matching } from "./templateEntries.ts";

/** The class a kind is shown under (status, the per-asset views). */
const CLASS_OF: Readonly<Partial<Record<string, string>>> = {
  service: "services", library: "libraries", trigger: "triggers", timer: "timers", role: "roles", user: "users", device: "devices",
  adapter: "adaptors", portal: "portals", plugin: "plugins", servicecache: "servicecaches", webhook: "webhooks", bucketset: "bucketsets", usersecret: "usersecrets",
};
/** ClearBlade classes this server cannot deploy (yet): said so, not taken for collection names. */
const NOT_DEPLOYABLE: Readonly<Record<string, string>> = {
  edges: "edge records are the platform's own", messaging: "message history is not deployable; relay topics with an edge template's topic entries",
};

export interface Deployment { name: string; description: string; assets: (DeploymentAsset & { sync: boolean })[]; edges: string[]; created_at: string; updated_at: string }

const CREATE_FIELDS = new Set(["name", "description", "assets", "edges"]);
const UPDATE_FIELDS = new Set(["name", "description", "assets", "edges"]);
const ASSET_FIELDS = new Set(["asset_class", "asset_id", "sync_to_edge", "sync_to_platform", "sync"]);
const CHANGE_FIELDS = new Set(["add", "remove", "adds", "removes"]);
const NAME_MAX = 128;
const DESCRIPTION_MAX = 4000;
/** Most asset entries and edges of one deployment, and deployments of one system. */
const ASSETS_MAX = 1000;
const EDGES_MAX = 10_000;
export const MAX_DEPLOYMENTS = 1000;
const EDGE_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** A deployment as clients read it. Each asset also carries `sync` (both flags), the older single
 *  flag ClearBlade's 2020 CLI compares assets by (it fails on an asset without it). */
const wire = (r: DeploymentRow): Deployment => ({
  name: r.name, description: r.description, edges: JSON.parse(r.edges) as string[], created_at: r.created_at, updated_at: r.updated_at,
  assets: (JSON.parse(r.assets) as DeploymentAsset[]).map((a) => ({ ...a, sync: a.sync_to_edge && a.sync_to_platform })),
});
const assetKey = (a: { asset_class: string; asset_id: string }) => `${a.asset_class}\u0000${a.asset_id}`;

// ---- parsing ------------------------------------------------------------------------------------

function checkName(v: unknown): string {
  if (typeof v !== "string" || !v.length || v.length > NAME_MAX) throw fail("INVALID_ARGUMENT", `name must be a string of 1 to ${NAME_MAX} characters`);
  if (/[\u0000-\u001f\u007f/]/.test(v)) throw fail("INVALID_ARGUMENT", "a deployment's name may not hold control characters or '/'");
  return v;
}

function checkDescription(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || v.length > DESCRIPTION_MAX) throw fail("INVALID_ARGUMENT", `description must be a string of up to ${DESCRIPTION_MAX} characters`);
  return v;
}

function list(v: unknown, what: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw fail("INVALID_ARGUMENT", `${what} must be an array`);
  return v;
}

/** An asset entry as sent: `sync: true` stands for both flags; `asset_id` "" (or absent) for
 *  every asset of the class. `flags`: false for a removal, which names the asset only. */
function parseAsset(v: unknown, where: string, flags = true): DeploymentAsset {
  const o = knownFields(objectBody(v, where), ASSET_FIELDS, where);
  if (typeof o.asset_class !== "string" || !o.asset_class) throw fail("INVALID_ARGUMENT", `${where}.asset_class must be an asset class (services, libraries, ..., or a collection's name)`);
  if (o.asset_id !== undefined && o.asset_id !== null && typeof o.asset_id !== "string") throw fail("INVALID_ARGUMENT", `${where}.asset_id must be a string ("" for every asset of the class)`);
  for (const f of ["sync_to_edge", "sync_to_platform", "sync"]) if (flags && o[f] !== undefined && typeof o[f] !== "boolean") throw fail("INVALID_ARGUMENT", `${where}.${f} must be a boolean`);
  const both = o.sync === true;
  return {
    asset_class: o.asset_class, asset_id: (o.asset_id as string | null | undefined) ?? "",
    sync_to_edge: flags && ((o.sync_to_edge as boolean | undefined) ?? both), sync_to_platform: flags && ((o.sync_to_platform as boolean | undefined) ?? both),
  };
}

function edgeNames(v: unknown, what: string): string[] {
  const l = list(v, what);
  const bad = l.find((x) => typeof x !== "string" || !EDGE_NAME_RE.test(x));
  if (bad !== undefined) throw fail("INVALID_ARGUMENT", `${what}: ${JSON.stringify(bad)} is not an edge name`);
  if (l.length > EDGES_MAX) throw fail("INVALID_ARGUMENT", `${what} lists more than ${EDGES_MAX} edges`);
  return [...new Set(l as string[])];
}

/** One asset's sync state on one edge, as the platform's status of the edge says. */
export interface EdgeAssetState {
  asset_type: string; asset_name: string; status: string; desired_version: number; applied_version: number;
  last_error: string; attempts: number; updated_at: string; source: string;
}
/** What the deployment status reads of the sync engine (the platform's hub). */
export interface SyncStatusView {
  status(systemKey: string, edge: string): Promise<EdgeAssetState[]>;
  /** whether the edge has a live link (null: not known here, its record says) */
  connected(systemKey: string, edge: string): boolean | null;
}

export class Deployments {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems) {}

  /** Developers; users and devices by the role permission `deployments`. */
  private async guard(p: Principal, systemKey: string, level: number) {
    const s = await this.systems.access(p, systemKey);
    if (p.kind !== "developer") await this.d.perms.require(p, { kind: "deployments" }, level, "deployments");
    return s;
  }

  private async find(ex: Executor, systemKey: string, name: string): Promise<DeploymentRow> {
    const r = await deploymentsRepo.get(ex, systemKey, name);
    if (!r) throw notFound("deployment", name, "Edge");
    return r;
  }

  /** Refuses classes that are neither a kind nor a collection of the system, item-level
   *  collection entries, and names of assets the system does not have (they would bring nothing,
   *  silently). Users are kept by email and roles by name: an id is taken and stored as the name. */
  private async resolve(ex: Executor, systemKey: string, assets: DeploymentAsset[], what: string): Promise<DeploymentAsset[]> {
    const byKind = new Map<string, Set<string>>();
    for (const n of await assetNames(ex, systemKey)) (byKind.get(n.t) ?? byKind.set(n.t, new Set()).get(n.t)!).add(n.name);
    const out: DeploymentAsset[] = [];
    for (const [i, a] of assets.entries()) {
      const where = `${what}[${i}]`;
      const kind = ASSET_CLASSES[a.asset_class];
      if (!kind) {
        const why = NOT_DEPLOYABLE[a.asset_class];
        if (why) throw fail("INVALID_ARGUMENT", `${where}: asset class '${a.asset_class}' cannot be deployed: ${why}`);
        if (!byKind.get("collection")?.has(a.asset_class))
          throw fail("INVALID_ARGUMENT", `${where}: unknown asset class '${a.asset_class}': neither one of ${Object.keys(ASSET_CLASSES).join(", ")} nor a collection of this system`);
        if (a.asset_id) throw fail("INVALID_ARGUMENT", `${where}: item-level sync of collection '${a.asset_class}' is not supported: asset_id must be "" (the whole collection)`);
        out.push(a);
        continue;
      }
      let id = a.asset_id;
      const names = byKind.get(kind) ?? new Set<string>();
      if (id && !names.has(id) && kind === "user") id = (await usersRepo.byId(ex, systemKey, id))?.email ?? id;
      if (id && !names.has(id) && kind === "role") id = (await rolesRepo.byId(ex, systemKey, id))?.name ?? id;
      if (id && !names.has(id)) throw fail("INVALID_ARGUMENT", `${where}: this system has no ${kind} '${a.asset_id}' (asset_id "" deploys every asset of the class)`);
      out.push({ ...a, asset_id: id });
    }
    return out;
  }

  /** The edges a change concerns are told their template changed (the sync hub brings what they
   *  now get and removes what nothing covers any more; an edge offline converges when it returns). */
  private changed(ex: Executor, systemKey: string, edges: Iterable<string>) {
    return (async () => {
      const known = new Set((await edgesRepo.all(ex, systemKey)).map((e) => e.name));
      for (const edge of new Set(edges)) if (known.has(edge)) this.d.signals.emit("edge.changed", { systemKey, edge, what: "template" });
    })();
  }

  /** `{name, description}` of each deployment the query selects (ClearBlade's list), or the
   *  columns its SELECTCOLUMNS names. */
  async list(p: Principal, systemKey: string, query: string | null) {
    await this.guard(p, systemKey, LEVEL.READ);
    const q = parseQuery(query ?? undefined, { defaultPageSize: 0 });
    const fields = (q.select ?? ["name", "description"]) as (keyof DeploymentRow)[];
    return (await deploymentsRepo.list(this.d.db, systemKey, q)).map((r) => Object.fromEntries(fields.map((f) => [f, r[f]])));
  }

  /** Every deployment whole (the code library's readAll). */
  async all(p: Principal, systemKey: string, query: string | null): Promise<Deployment[]> {
    await this.guard(p, systemKey, LEVEL.READ);
    return (await deploymentsRepo.list(this.d.db, systemKey, parseQuery(query ?? undefined, { defaultPageSize: 0 }))).map(wire);
  }

  async get(p: Principal, systemKey: string, name: string): Promise<Deployment> {
    await this.guard(p, systemKey, LEVEL.READ);
    return wire(await this.find(this.d.db, systemKey, name));
  }

  /** `pathName`: the name a path gives (it must agree with the body's, when both come). */
  async create(p: Principal, systemKey: string, body: unknown, pathName?: string): Promise<Deployment> {
    await this.guard(p, systemKey, LEVEL.CREATE);
    const b = knownFields(objectBody(body), CREATE_FIELDS);
    if (pathName !== undefined && b.name !== undefined && b.name !== pathName) throw fail("INVALID_ARGUMENT", `body: name '${String(b.name)}' is not the path's '${pathName}'`);
    const name = checkName(b.name ?? pathName);
    const description = checkDescription(b.description) ?? "";
    const sent = list(b.assets, "assets").map((a, i) => parseAsset(a, `assets[${i}]`));
    if (sent.length > ASSETS_MAX) throw fail("INVALID_ARGUMENT", `assets lists more than ${ASSETS_MAX} entries`);
    const edges = edgeNames(b.edges, "edges");
    const row = await this.d.db.tx(async (tx) => {
      if (await deploymentsRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `deployment '${name}' already exists`);
      if ((await deploymentsRepo.count(tx, systemKey)) >= MAX_DEPLOYMENTS) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_DEPLOYMENTS} deployments`);
      // an asset named twice: the last entry counts
      const assets = [...new Map((await this.resolve(tx, systemKey, sent, "assets")).map((a) => [assetKey(a), a])).values()];
      const now = nowIso();
      const r: DeploymentRow = { system_key: systemKey, name, description, assets: JSON.stringify(assets), edges: JSON.stringify(edges), created_at: now, updated_at: now };
      await deploymentsRepo.put(tx, r);
      return r;
    });
    await this.changed(this.d.db, systemKey, edges);
    return wire(row);
  }

  /** `{description?, assets: {add, remove}, edges: {add, remove}}` (also `adds`/`removes`):
   *  removals first, then additions (an asset added again takes its new flags). A removal names an
   *  entry the deployment has, and an edge it names. Answers the whole deployment. */
  async update(p: Principal, systemKey: string, name: string, body: unknown): Promise<Deployment> {
    await this.guard(p, systemKey, LEVEL.UPDATE);
    const b = knownFields(objectBody(body), UPDATE_FIELDS);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "a deployment cannot be renamed");
    const description = checkDescription(b.description);
    const change = (v: unknown, what: string) => {
      if (v === undefined || v === null) return { add: [] as unknown[], remove: [] as unknown[] };
      const o = knownFields(objectBody(v, what), CHANGE_FIELDS, what);
      return { add: list(o.add ?? o.adds, `${what}.add`), remove: list(o.remove ?? o.removes, `${what}.remove`) };
    };
    const a = change(b.assets, "assets"), e = change(b.edges, "edges");
    const addAssets = a.add.map((x, i) => parseAsset(x, `assets.add[${i}]`));
    const removeAssets = a.remove.map((x, i) => parseAsset(x, `assets.remove[${i}]`, false));
    const addEdges = edgeNames(e.add, "edges.add"), removeEdges = edgeNames(e.remove, "edges.remove");
    let before: string[] = [];
    const row = await this.d.db.tx(async (tx) => {
      const cur = await this.find(tx, systemKey, name);
      const assets = new Map((JSON.parse(cur.assets) as DeploymentAsset[]).map((x) => [assetKey(x), x]));
      const edges = new Set(before = JSON.parse(cur.edges) as string[]);
      for (const [i, r] of removeAssets.entries()) {
        // a user or role may be named by its id: the entry holds its name
        const k = assets.has(assetKey(r)) ? assetKey(r) : assetKey((await this.resolveQuietly(tx, systemKey, r)));
        if (!assets.delete(k)) throw fail("INVALID_ARGUMENT", `assets.remove[${i}]: deployment '${name}' has no asset ${r.asset_class} '${r.asset_id}'`);
      }
      for (const x of await this.resolve(tx, systemKey, addAssets, "assets.add")) assets.set(assetKey(x), x);
      if (assets.size > ASSETS_MAX) throw fail("INVALID_ARGUMENT", `a deployment has at most ${ASSETS_MAX} asset entries`);
      for (const [i, x] of removeEdges.entries()) if (!edges.delete(x)) throw fail("INVALID_ARGUMENT", `edges.remove[${i}]: deployment '${name}' does not name edge '${x}'`);
      for (const x of addEdges) edges.add(x);
      if (edges.size > EDGES_MAX) throw fail("INVALID_ARGUMENT", `a deployment names at most ${EDGES_MAX} edges`);
      const next: DeploymentRow = { ...cur, description: description ?? cur.description, assets: JSON.stringify([...assets.values()]), edges: JSON.stringify([...edges]), updated_at: nowIso() };
      await deploymentsRepo.put(tx, next);
      return next;
    });
    // edges it named before and names now: what they get may have changed
    await this.changed(this.d.db, systemKey, [...before, ...(JSON.parse(row.edges) as string[])]);
    return wire(row);
  }

  /** A user's or role's entry named by its id, as stored (by name); anything else as it is. */
  private async resolveQuietly(ex: Executor, systemKey: string, a: DeploymentAsset): Promise<DeploymentAsset> {
    const kind = ASSET_CLASSES[a.asset_class];
    if (!a.asset_id) return a;
    if (kind === "user") return { ...a, asset_id: (await usersRepo.byId(ex, systemKey, a.asset_id))?.email ?? a.asset_id };
    if (kind === "role") return { ...a, asset_id: (await rolesRepo.byId(ex, systemKey, a.asset_id))?.name ?? a.asset_id };
    return a;
  }

  async remove(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, LEVEL.DELETE);
    const row = await this.d.db.tx(async (tx) => {
      const r = await this.find(tx, systemKey, name);
      await deploymentsRepo.delete(tx, systemKey, name);
      return r;
    });
    await this.changed(this.d.db, systemKey, JSON.parse(row.edges) as string[]);
    return {};
  }

  // ---- status and per-asset views --------------------------------------------------------------

  /** Per edge the deployment names, each asset it brings there with its sync state (the same
   *  per-edge, per-asset status the edge's own status shows, limited to this deployment's assets).
   *  An asset another source brings too (the edge's template, another deployment) says so in
   *  `sources`: its state is the edge's, whichever source brings it. */
  async status(p: Principal, systemKey: string, name: string, view: SyncStatusView) {
    await this.guard(p, systemKey, LEVEL.READ);
    const dep = wire(await this.find(this.d.db, systemKey, name));
    const entries = dep.assets.map((a) => entryOf(a, name));
    const known = new Map((await edgesRepo.all(this.d.db, systemKey)).map((e) => [e.name, e]));
    const edges = [];
    const totals = { synced: 0, pending: 0, failed: 0 };
    for (const edge of dep.edges) {
      const rec = known.get(edge);
      if (!rec) { edges.push({ edge_name: edge, exists: false, connected: false, status: "no_such_edge", assets: [] }); continue; }
      const assets = [];
      for (const s of await view.status(systemKey, edge)) {
        const wireType = s.asset_type === "collection_rows" ? "collection" : s.asset_type;
        // the edge-wide problems (protocol, clock) concern every asset it gets
        const edgeWide = s.asset_type === "protocol" || s.asset_type === "clock";
        if (!edgeWide && !matching(entries, wireType, s.asset_name)) continue;
        const isCollection = wireType === "collection";
        assets.push({
          asset_class: edgeWide ? "" : isCollection ? s.asset_name : CLASS_OF[wireType] ?? wireType, asset_id: edgeWide || isCollection ? "" : s.asset_name,
          asset_type: s.asset_type, asset_name: s.asset_name, status: s.status, desired_version: s.desired_version, applied_version: s.applied_version,
          last_error: s.last_error, attempts: s.attempts, updated_at: s.updated_at, sources: s.source ? s.source.split(",") : [],
        });
        if (s.status === "synced" || s.status === "pending" || s.status === "failed") totals[s.status]++;
      }
      const status = assets.some((a) => a.status === "failed") ? "failed" : assets.some((a) => a.status === "pending") ? "pending" : "synced";
      const connected = view.connected(systemKey, edge) ?? rec.is_connected === 1;
      edges.push({ edge_name: edge, exists: true, connected, status, assets });
    }
    return { name, edges, ...totals };
  }

  /** Each asset entry of the system's deployments: the deployments holding it and the edges they
   *  name (`asset_class`/`asset_id` narrow it; an asset of a class is also held by the class's ""
   *  entry). */
  async assets(p: Principal, systemKey: string, only: { asset_class?: string; asset_id?: string }) {
    await this.guard(p, systemKey, LEVEL.READ);
    const out = new Map<string, { asset_class: string; asset_id: string; deployments: string[]; edges: string[] }>();
    const add = (a: { asset_class: string; asset_id: string }, r: Deployment) => {
      const k = assetKey(a);
      const v = out.get(k) ?? out.set(k, { asset_class: a.asset_class, asset_id: a.asset_id, deployments: [], edges: [] }).get(k)!;
      v.deployments.push(r.name);
      v.edges = [...new Set([...v.edges, ...r.edges])].sort();
    };
    for (const r of (await deploymentsRepo.all(this.d.db, systemKey)).map(wire)) {
      for (const a of r.assets) {
        if (only.asset_class !== undefined && a.asset_class !== only.asset_class) continue;
        if (only.asset_id !== undefined) { if (a.asset_id === only.asset_id || a.asset_id === "") add({ asset_class: a.asset_class, asset_id: only.asset_id }, r); }
        else add(a, r);
      }
    }
    return [...out.values()];
  }
}
