// Edges: records with custom columns, the
// edge's secret token, and templates: which assets go to which edge and how.
import { Port } from "../core/port.ts";
import { timingSafeEqual } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { edgeKey, hashToken, newKey, newToken, nowSeconds } from "../core/ids.ts";
import { type ColumnMap, parseQuery, type Query } from "../core/query.ts";
import { knownFields, objectBody } from "../core/validate.ts";
import type { Executor } from "../store/db.ts";
import { EDGE_COLUMNS, type EdgeChanges, type EdgeRow, type TemplateEntryRow, edgesRepo } from "../store/edges.ts";
import { assetNames, changesRepo } from "../store/sync.ts";
import { deploymentsRepo } from "../store/deployments.ts";
import type { TokenRow } from "../store/tokens.ts";
import { CustomColumns } from "./customColumns.ts";
import { deployedTo, deploymentEntries, SYNC_MODES, SYNC_MODULES, type SyncMode, type SyncModule, type TemplateEntry, unite } from "./templateEntries.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

const RETRY_FIELDS = new Set(["edge", "edges", "asset_class", "asset_id"]);

const TEMPLATE_ENTRY_FIELDS = new Set(["def_module", "def_name", "mode", "rows"]);
const TEMPLATE_CHANGE_FIELDS = new Set(["add", "remove"]);

export { SYNC_MODES, SYNC_MODULES, type SyncMode, type SyncModule, type TemplateEntry } from "./templateEntries.ts";

/** The mode an edge's own entry has when it takes an entry of its named template away (stored
 *  only; never part of a template an edge receives). */
const EXCLUDED = "excluded";

/** Edge fields clients send and read that live in the data document. */
const STANDARD = {
  location: "string", mac_address: "string", public_addr: "string", public_port: "string", local_addr: "string", local_port: "string",
  broker_port: "string", broker_tls_port: "string", broker_ws_port: "string", broker_wss_port: "string", broker_auth_port: "string",
  broker_ws_auth_port: "string", communication_style: "string", policy_name: "string", resolver_func: "string", sync_edge_tables: "string",
} as const;
const IGNORED = new Set(["edge_key", "system_key", "system_secret", "novi_system_key", "isConnected", "first_talked", "last_talked",
  "last_seen_version", "last_seen_os", "last_seen_architecture", "created_date", "sync_lag", "cursor", "clock_skew_ms", "last_refusal", "last_refusal_at"]);
const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** Why a topic filter is not one ("" : it is): levels split by /, + a whole level, # the last one. */
function topicFilterProblem(f: string): string {
  const levels = f.split("/");
  for (const [i, l] of levels.entries()) {
    if (l.includes("#") && (l !== "#" || i !== levels.length - 1)) return "# must be a whole level and the last one";
    if (l.includes("+") && l !== "+") return "+ must be a whole level";
  }
  return "";
}

/** The name closest to `name` among `names`, when a typo away (at most 2 edits), for "did you mean". */
function closest(name: string, names: Iterable<string>): string | null {
  let best: string | null = null, bestD = 3;
  const a = name.toLowerCase();
  for (const n of names) {
    const b = n.toLowerCase();
    if (Math.abs(a.length - b.length) >= bestD) continue;
    // edit distance, one row at a time
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const row = [i];
      for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = row;
    }
    if (prev[b.length]! < bestD) { bestD = prev[b.length]!; best = n; }
  }
  return best;
}

/** Parses a template entry list item. */
export function templateEntry(v: unknown, where: string, requireMode = false): TemplateEntry {
  const e = objectBody(v, where);
  knownFields(e, TEMPLATE_ENTRY_FIELDS, where);
  if (typeof e.def_module !== "string" || !(SYNC_MODULES as readonly string[]).includes(e.def_module))
    throw fail("INVALID_ARGUMENT", `${where}.def_module must be one of ${SYNC_MODULES.join(", ")}`);
  if (typeof e.def_name !== "string" || !e.def_name) throw fail("INVALID_ARGUMENT", `${where}.def_name must be an asset name or *`);
  if (e.def_module === "topic") {
    const why = topicFilterProblem(e.def_name);
    if (why) throw fail("INVALID_ARGUMENT", `${where}.def_name '${e.def_name}' is not a topic filter: ${why}`);
  }
  if (e.mode !== undefined && (typeof e.mode !== "string" || !(SYNC_MODES as readonly string[]).includes(e.mode)))
    throw fail("INVALID_ARGUMENT", `${where}.mode must be one of ${SYNC_MODES.join(", ")}`);
  if (requireMode && e.mode === undefined) throw fail("INVALID_ARGUMENT", `${where}.mode is required`);
  if (e.rows !== undefined && typeof e.rows !== "boolean") throw fail("INVALID_ARGUMENT", `${where}.rows must be a boolean`);
  return { def_module: e.def_module as SyncModule, def_name: e.def_name, mode: (e.mode as SyncMode | undefined) ?? "sync_to_edge", ...(e.rows !== undefined ? { rows: e.rows } : {}) };
}

/** What the sync hub knows of an edge's link (see the `links` port of Edges). */
export interface EdgeLinks {
  /** whether an edge has a live sync session (null: not known here, the stored flag says) */
  liveOf(systemKey: string, edge: string): boolean | null;
  /** sync lag: changes the edge has not acknowledged */
  lagOf(systemKey: string, edge: string): Promise<number | null>;
  /** the lag of each of these records of a system's edges, by name (from reads they share) */
  lagsOf(systemKey: string, rows: EdgeRow[]): Promise<Map<string, number>>;
  /** how far ahead of the platform's clock the edge's clock was at its last hello (ms) */
  skewOf(systemKey: string, edge: string): number | null;
  /** writes what the hub keeps waiting of its edges' records (hellos, positions, last_talked) */
  settle(): Promise<void>;
}

/** Edge records turned into their wire form between two turns of the event loop. */
const WIRE_SLICE = 50;
/** Edge records a whole-fleet list reads between two turns of the event loop. */
const READ_PART = 1_000;

export class Edges {
  readonly columnsOf: CustomColumns;
  /** `links`: what the sync hub knows of the edges' links, when it runs (attached by it) */
  constructor(private readonly d: DomainDeps, private readonly systems: Systems, private readonly links = new Port<EdgeLinks>("edge links")) {
    // an edge's template, connection, creation and platform are its record's, not columns ClearBlade lists
    this.columnsOf = new CustomColumns(d.db, "edges", EDGE_COLUMNS, STANDARD, [...IGNORED, "token", "template"], "name",
      ["template", "isConnected", "created_date", "last_seen_os", "last_seen_architecture"]);
    d.tokens.registerLoader("edge", async (row: TokenRow): Promise<Principal | null> => {
      const e = await edgesRepo.get(d.db, row.system_key!, row.subject_id);
      return e ? { kind: "edge", systemKey: e.system_key, id: e.name, name: e.name, tokenHash: row.token_hash } : null;
    });
  }

  /** Reading edges takes the edges permission; changing them (an edge record's token receives the
   *  system's secret and users) takes a developer or a role that grants it explicitly. */
  private async guard(p: Principal, systemKey: string, level: number) {
    const s = await this.systems.access(p, systemKey);
    if (p.kind === "developer") return s;
    if (level === LEVEL.READ) await this.d.perms.require(p, { kind: "edges" }, level, "edges");
    else await this.d.perms.requireGranted(p, { kind: "edges" }, level, "edges");
    return s;
  }

  /** `lag`: the edge's, known already (a list reads a fleet's together) */
  async toWire(e: EdgeRow, secret: string, lag?: number | null) {
    const schema = await this.columnsOf.schema(this.d.db, e.system_key);
    return this.columnsOf.wire(schema, e.data, {
      name: e.name, edge_key: edgeKey(e.system_key, e.name), system_key: e.system_key, system_secret: secret, novi_system_key: e.system_key,
      token: "", description: e.description, template: e.template, isConnected: this.liveOf(e.system_key, e.name) ?? e.is_connected === 1,
      first_talked: e.first_talked, last_talked: e.last_talked, last_seen_version: e.last_seen_version,
      last_seen_os: e.last_seen_os, last_seen_architecture: e.last_seen_architecture, created_date: e.created_date,
      cursor: e.cursor, sync_lag: (lag !== undefined ? lag : await this.links.get()?.lagOf(e.system_key, e.name)) ?? null, clock_skew_ms: this.links.get()?.skewOf(e.system_key, e.name) ?? null,
      // why the platform last refused the edge's link, and when (epoch s; null: never)
      last_refusal: e.last_refusal ?? "", last_refusal_at: e.last_refusal_at ?? null,
    });
  }

  async find(ex: Executor, systemKey: string, name: string): Promise<EdgeRow> {
    const e = await edgesRepo.get(ex, systemKey, name);
    if (!e) throw notFound("edge", name, "Edge");
    return e;
  }

  private async parse(ex: Executor, systemKey: string, b: Record<string, unknown>, data: Record<string, unknown>) {
    const schema = await this.columnsOf.schema(ex, systemKey);
    const cols: EdgeChanges = {};
    const custom: Record<string, unknown> = Object.create(null); // keys from the request
    let token: string | undefined;
    for (const [k, v] of Object.entries(b)) {
      if (k === "name" || IGNORED.has(k)) continue;
      if (k === "token") {
        if (v === "") continue; // what a read shows (the token is never shown): not a new one
        if (typeof v !== "string" || v.length < 8) throw fail("INVALID_ARGUMENT", "token must be a string of at least 8 characters (the edge's secret)");
        token = v;
      } else if (k === "description") {
        if (typeof v !== "string") throw fail("INVALID_ARGUMENT", "description must be a string");
        cols.description = v;
      } else if (k === "template") {
        if (typeof v !== "string") throw fail("INVALID_ARGUMENT", "template must be the name of a named template (or empty)");
        if (v) { const t = this.readNamedTemplate(v); if ("problem" in t) throw fail("INVALID_ARGUMENT", t.problem); }
        cols.template = v;
      // clients send the standard port fields as numbers: a string column takes a number as its text
      } else custom[k] = typeof v === "number" && schema.custom[k] === "string" ? String(v) : v;
    }
    return { schema, cols, data: this.columnsOf.values(schema, custom, data), token };
  }

  async create(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, LEVEL.CREATE);
    if (!NAME_RE.test(name)) throw fail("INVALID_ARGUMENT", `invalid edge name '${name}'`);
    const b = objectBody(body);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "name in the body differs from the name in the path");
    let generated: string | undefined;
    const row = await this.d.db.tx(async (tx) => {
      if (await edgesRepo.get(tx, systemKey, name)) throw fail("ALREADY_EXISTS", `edge '${name}' already exists`);
      const { cols, data, token } = await this.parse(tx, systemKey, b, {});
      const secret = token ?? (generated = newToken());
      const row: EdgeRow = {
        system_key: systemKey, name, token_hash: hashToken(secret), description: cols.description ?? "", template: cols.template ?? "",
        is_connected: 0, first_talked: null, last_talked: null, last_seen_version: "", last_seen_os: "", last_seen_architecture: "",
        cursor: 0, created_date: nowSeconds(), data: JSON.stringify(data), incarnation: newKey(), applied_template: null, last_refusal: "", last_refusal_at: null,
      };
      await edgesRepo.insert(tx, row);
      // a system's first edge: what it holds is at its first version from now on (versions count
      // changes, which are recorded only while a system has edges)
      if ((await edgesRepo.count(tx, systemKey, [], EDGE_COLUMNS)) === 1) await changesRepo.countAssets(tx, systemKey);
      return row;
    });
    this.changed(systemKey, name, "record");
    const out = await this.toWire(row, s.system_secret);
    // the token is the edge's secret: shown once when the server chose it
    return generated ? { ...out, token: generated } : out;
  }

  async get(p: Principal, systemKey: string, name: string) {
    const s = await this.guard(p, systemKey, LEVEL.READ);
    await this.links.get()?.settle();
    return this.toWire(await this.find(this.d.db, systemKey, name), s.system_secret);
  }

  /** What a sync retry names: `edge`, `edges` or neither (every edge of the system), and `asset_class`
   *  with `asset_id` to retry one asset only. The edges are not looked up here: a retry goes edge by
   *  edge, and one that does not exist stops it there (requireEdge). */
  async retryTargets(p: Principal, systemKey: string, body: unknown): Promise<{ edges: string[]; only?: { type: string; name: string }[] }> {
    const b = knownFields(objectBody(body), RETRY_FIELDS);
    for (const k of ["edge", "asset_class", "asset_id"]) if (b[k] !== undefined && typeof b[k] !== "string") throw fail("INVALID_ARGUMENT", `${k} must be a string`);
    if (b.edges !== undefined && !(Array.isArray(b.edges) && b.edges.every((e) => typeof e === "string"))) throw fail("INVALID_ARGUMENT", "edges must be a list of edge names");
    const edges = b.edge !== undefined ? [b.edge as string] : b.edges !== undefined ? (b.edges as string[]) : (await this.list(p, systemKey, null)).map((e) => e.name as string);
    const only = typeof b.asset_class === "string" && typeof b.asset_id === "string" ? [{ type: b.asset_class, name: b.asset_id }] : undefined;
    return { edges, only };
  }

  /** The edge's record; NOT_FOUND when the system has no edge of that name. */
  requireEdge(systemKey: string, name: string): Promise<EdgeRow> {
    return this.find(this.d.db, systemKey, name);
  }

  async update(p: Principal, systemKey: string, name: string, body: unknown) {
    const s = await this.guard(p, systemKey, LEVEL.UPDATE);
    const b = objectBody(body);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", "an edge cannot be renamed");
    let templateChanged = false;
    const row = await this.d.db.tx(async (tx) => {
      const cur = await this.find(tx, systemKey, name);
      const { cols, data, token } = await this.parse(tx, systemKey, b, JSON.parse(cur.data) as Record<string, unknown>);
      const changes: EdgeChanges = { ...cols, data: JSON.stringify(data) };
      if (token) changes.token_hash = hashToken(token);
      templateChanged = cols.template !== undefined && cols.template !== cur.template;
      await edgesRepo.update(tx, systemKey, name, changes);
      return (await edgesRepo.get(tx, systemKey, name))!;
    });
    this.changed(systemKey, name, templateChanged ? "template" : "record");
    return this.toWire(row, s.system_secret);
  }

  async remove(p: Principal, systemKey: string, name: string) {
    await this.guard(p, systemKey, LEVEL.DELETE);
    if (!(await edgesRepo.delete(this.d.db, systemKey, name)).changes) throw notFound("edge", name, "Edge");
    this.changed(systemKey, name, "deleted");
    return {};
  }

  /** The edges a query selects; `failing` keeps those with (true) or without (false) an asset
   *  whose sync failed. */
  async list(p: Principal, systemKey: string, query: string | null, opts: { failing?: boolean } = {}) {
    const s = await this.guard(p, systemKey, LEVEL.READ);
    await this.links.get()?.settle();
    const schema = await this.columnsOf.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined, { defaultPageSize: 0 });
    const rows = await this.rowsOf(systemKey, q, schema.map, opts.failing);
    // their lags from reads they share (without the sync hub: none)
    const lags = await this.links.get()?.lagsOf(systemKey, rows);
    // a whole fleet's records in slices, the event loop given back between them: thousands in
    // one go held every other request for seconds
    const out: Awaited<ReturnType<Edges["toWire"]>>[] = [];
    for (let i = 0; i < rows.length; i += WIRE_SLICE) {
      if (i) await new Promise((r) => setImmediate(r));
      out.push(...await Promise.all(rows.slice(i, i + WIRE_SLICE).map((r) => this.toWire(r, s.system_secret, lags ? lags.get(r.name) ?? null : null))));
    }
    return this.columnsOf.selected(schema, q, out);
  }

  /** The records a query selects. A whole fleet (no SORT, no page) is read a part at a time in
   *  name order, the event loop given back between parts: 10,000 records in one read held every
   *  other request for about 100 ms. (A record created or deleted meanwhile is in the answer or
   *  not, as in a read just before or after; none is read twice.) */
  private async rowsOf(systemKey: string, q: Query, columns: ColumnMap, failing?: boolean): Promise<EdgeRow[]> {
    if (q.sort.length || q.pageSize) return edgesRepo.list(this.d.db, systemKey, q, columns, undefined, failing);
    const rows: EdgeRow[] = [];
    for (let after: string | null = null; ;) {
      const part = await edgesRepo.listPart(this.d.db, systemKey, q, columns, after, READ_PART, failing);
      rows.push(...part);
      if (part.length < READ_PART) return rows;
      after = part[part.length - 1]!.name;
      await new Promise((r) => setImmediate(r));
    }
  }

  /** How many edges the system has connected, never connected, disconnected after contact, and
   *  with a failed asset (what a fleet view shows at its top). */
  async stateCounts(p: Principal, systemKey: string) {
    await this.guard(p, systemKey, LEVEL.READ);
    await this.links.get()?.settle();
    const { total, ...by } = await edgesRepo.stateCounts(this.d.db, systemKey);
    return { count: total, ...by };
  }

  async count(p: Principal, systemKey: string, query: string | null, failing?: boolean) {
    await this.guard(p, systemKey, LEVEL.READ);
    await this.links.get()?.settle();
    const schema = await this.columnsOf.schema(this.d.db, systemKey);
    const q = parseQuery(query ?? undefined);
    return { count: await edgesRepo.count(this.d.db, systemKey, q.filters, schema.map, failing) };
  }

  async columns(p: Principal, systemKey: string) {
    await this.guard(p, systemKey, LEVEL.READ);
    return this.columnsOf.list(systemKey);
  }
  async addColumn(p: Principal, systemKey: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.add(systemKey, body);
    return {};
  }
  async deleteColumn(p: Principal, systemKey: string, name: string | null) {
    await this.systems.accessAsDeveloper(p, systemKey);
    await this.columnsOf.remove(systemKey, name, (tx, n) => edgesRepo.dropDataKey(tx, systemKey, n));
    return {};
  }

  // ---- authentication (the sync channel) ------------------------------------------------------

  /** The edge of that name (none: no such edge), and whether the token is its secret. */
  async authenticate(systemKey: string, name: string, token: string): Promise<{ edge: EdgeRow | undefined; tokenOk: boolean }> {
    const e = await edgesRepo.get(this.d.db, systemKey, name);
    if (!e) return { edge: undefined, tokenOk: false };
    return { edge: e, tokenOk: this.tokenMatches(e, token) };
  }

  /** Whether a token is the edge's secret (its record read already). */
  tokenMatches(e: EdgeRow, token: string): boolean {
    const a = Buffer.from(e.token_hash), b = Buffer.from(hashToken(token));
    return a.length === b.length && timingSafeEqual(a, b);
  }

  // ---- templates ------------------------------------------------------------------------------

  /** Named templates from the templates directory (read when asked; they are small files). */
  namedTemplate(name: string): TemplateEntry[] | null {
    const t = this.readNamedTemplate(name);
    return "entries" in t ? t.entries : null;
  }

  /** A named template's entries, or why it cannot be used (missing, not JSON, an entry of an
   *  unknown kind or mode). Asset names are not checked: one template serves every system. */
  readNamedTemplate(name: string): { entries: TemplateEntry[] } | { problem: string } {
    const dir = this.d.config.edgeTemplatesDir;
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) return { problem: `'${name}' is not a template name (letters, digits, _ . -)` };
    let text: string;
    try { text = readFileSync(join(dir, `${name}.json`), "utf8"); }
    catch { return { problem: `template '${name}' does not exist in ${dir}` }; }
    try {
      const raw = JSON.parse(text) as { assets?: unknown };
      if (!Array.isArray(raw?.assets)) return { problem: `template '${name}' (${dir}/${name}.json) has no "assets" list` };
      return { entries: raw.assets.map((a, i) => templateEntry(a, `template '${name}': assets[${i}]`)) };
    } catch (e) {
      return { problem: e instanceof SyntaxError ? `template '${name}' (${dir}/${name}.json) is not JSON: ${e.message}` : (e as Error).message };
    }
  }

  /** What changes when a named template's file does (its time and size; "" : none, or no
   *  name): a template kept in memory is read again when this differs. */
  namedTemplateStamp(name: string): string {
    if (!name) return "";
    try { const st = statSync(join(this.d.config.edgeTemplatesDir, `${name}.json`)); return `${st.mtimeMs}/${st.size}`; }
    catch { return ""; }
  }

  /** Why each named template that cannot be used cannot be (the platform logs them at start). */
  namedTemplateProblems(): string[] {
    return this.namedTemplates().map((n) => this.readNamedTemplate(n)).flatMap((t) => ("problem" in t ? [t.problem] : []));
  }

  namedTemplates(): string[] {
    try { return readdirSync(this.d.config.edgeTemplatesDir).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5)).sort(); }
    catch { return []; }
  }

  /** What the edge gets: its own template united with the entries of every deployment naming it
   *  (an asset goes down, or comes up, when either says so; see deployments.ts). Each entry says
   *  where it comes from ("edge", "template:<name>", "deployment:<name>", comma-separated). */
  async templateOf(ex: Executor, systemKey: string, edge: EdgeRow): Promise<TemplateEntry[]> {
    return unite(await this.ownTemplate(ex, systemKey, edge), await deploymentEntries(ex, systemKey, edge.name));
  }

  /** The edge's own template: its named template, overridden entry by entry by its own entries
   *  (an own entry may also take a named one away). Each entry says where it comes from. */
  async ownTemplate(ex: Executor, systemKey: string, edge: EdgeRow): Promise<TemplateEntry[]> {
    return this.ownFrom(edge, edge.template ? this.namedTemplate(edge.template) : null, await edgesRepo.entries(ex, systemKey, edge.name));
  }

  /** What each of a system's edges gets (as templateOf), from one read of their own entries and
   *  one of the system's deployments, each named template read once: a herd of hellos. */
  async templatesOf(ex: Executor, systemKey: string, edges: EdgeRow[]): Promise<Map<string, TemplateEntry[]>> {
    const own = new Map<string, TemplateEntryRow[]>();
    for (const r of await edgesRepo.allEntries(ex, systemKey)) {
      let list = own.get(r.edge_name);
      if (!list) own.set(r.edge_name, list = []);
      list.push(r);
    }
    const deployments = await deploymentsRepo.all(ex, systemKey);
    const named = new Map<string, TemplateEntry[] | null>();
    const out = new Map<string, TemplateEntry[]>();
    for (const e of edges) {
      if (e.template && !named.has(e.template)) named.set(e.template, this.namedTemplate(e.template));
      out.set(e.name, unite(this.ownFrom(e, e.template ? named.get(e.template)! : null, own.get(e.name) ?? []), deployedTo(deployments, e.name)));
    }
    return out;
  }

  private ownFrom(edge: EdgeRow, named: TemplateEntry[] | null, entries: TemplateEntryRow[]): TemplateEntry[] {
    const out = new Map<string, TemplateEntry>();
    const source = `template:${edge.template}`;
    for (const e of named ?? []) out.set(`${e.def_module}\u0000${e.def_name}`, { ...e, source });
    for (const e of entries) {
      const k = `${e.def_module}\u0000${e.def_name}`;
      if (e.mode === EXCLUDED) { out.delete(k); continue; }
      out.set(k, { def_module: e.def_module as SyncModule, def_name: e.def_name, mode: e.mode as SyncMode, ...(e.def_module === "collection" ? { rows: e.rows === 1 } : {}), source: "edge" });
    }
    return [...out.values()];
  }

  async templates(p: Principal, systemKey: string) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const out: Record<string, TemplateEntry[]> = {};
    for (const e of await edgesRepo.all(this.d.db, systemKey)) out[e.name] = await this.templateOf(this.d.db, systemKey, e);
    return out;
  }

  /** `{add:[{def_module, def_name, mode}], remove:[{def_module, def_name}]}` */
  async changeTemplate(p: Principal, systemKey: string, name: string, body: unknown) {
    await this.systems.accessAsDeveloper(p, systemKey);
    const b = objectBody(body);
    knownFields(b, TEMPLATE_CHANGE_FIELDS);
    const list = (v: unknown, what: string) => {
      if (v === undefined) return [];
      if (!Array.isArray(v)) throw fail("INVALID_ARGUMENT", `${what} must be an array`);
      return v;
    };
    const add = list(b.add, "add").map((e, i) => templateEntry(e, `add[${i}]`));
    const remove = list(b.remove, "remove").map((e, i) => {
      const o = objectBody(e, `remove[${i}]`);
      if (typeof o.def_module !== "string" || typeof o.def_name !== "string") throw fail("INVALID_ARGUMENT", `remove[${i}] needs def_module and def_name`);
      if (!(SYNC_MODULES as readonly string[]).includes(o.def_module)) throw fail("INVALID_ARGUMENT", `remove[${i}].def_module must be one of ${SYNC_MODULES.join(", ")}`);
      return { def_module: o.def_module, def_name: o.def_name };
    });
    const result = await this.d.db.tx(async (tx) => {
      const edge = await this.find(tx, systemKey, name);
      await this.checkNames(tx, systemKey, add);
      const key = (e: { def_module: string; def_name: string }) => `${e.def_module}\u0000${e.def_name}`;
      const named = new Set((edge.template ? this.namedTemplate(edge.template) ?? [] : []).map(key));
      const current = new Set((await this.ownTemplate(tx, systemKey, edge)).map(key));
      const deployed = new Set((await deploymentEntries(tx, systemKey, name)).map(key));
      for (const [i, r] of remove.entries()) {
        if (!current.has(key(r))) throw fail("INVALID_ARGUMENT", `remove[${i}]: the template of edge '${name}' has no entry ${r.def_module} '${r.def_name}'${deployed.has(key(r)) ? " (a deployment naming the edge brings it: change the deployment)" : ""}`);
        // an entry of the named template is taken away by an entry of the edge's own that says so
        if (named.has(key(r))) await edgesRepo.putEntry(tx, systemKey, name, { def_module: r.def_module, def_name: r.def_name, mode: EXCLUDED, rows: 0 });
        else await edgesRepo.removeEntry(tx, systemKey, name, r.def_module, r.def_name);
      }
      for (const a of add) await edgesRepo.putEntry(tx, systemKey, name, { def_module: a.def_module, def_name: a.def_name, mode: a.mode, rows: a.rows === false ? 0 : 1 });
      return this.templateOf(tx, systemKey, edge);
    });
    this.changed(systemKey, name, "template");
    return { [name]: result };
  }

  /** Refuses entries naming an asset the system does not have (a misspelled name would bring
   *  nothing, silently): * stands for every asset of its kind, topics are filters. */
  private async checkNames(ex: Executor, systemKey: string, entries: TemplateEntry[]) {
    if (!entries.some((e) => e.def_name !== "*" && e.def_module !== "topic")) return;
    const byKind = new Map<string, Set<string>>();
    for (const n of await assetNames(ex, systemKey)) (byKind.get(n.t) ?? byKind.set(n.t, new Set()).get(n.t)!).add(n.name);
    for (const [i, e] of entries.entries()) {
      if (e.def_name === "*" || e.def_module === "topic") continue;
      const names = byKind.get(e.def_module) ?? new Set<string>();
      if (names.has(e.def_name)) continue;
      const near = closest(e.def_name, names);
      throw fail("INVALID_ARGUMENT", `add[${i}]: this system has no ${e.def_module} '${e.def_name}'${near ? ` (did you mean '${near}'?)` : ""}: name one it has, or * for every ${e.def_module}`);
    }
  }

  /** Sets an edge's own entries from a list (used when the platform hands its template over). */
  async replaceEntries(ex: Executor, systemKey: string, name: string, entries: TemplateEntryRow[]) {
    for (const e of await edgesRepo.entries(ex, systemKey, name)) await edgesRepo.removeEntry(ex, systemKey, name, e.def_module, e.def_name);
    for (const e of entries) await edgesRepo.putEntry(ex, systemKey, name, e);
  }

  /** Whether an edge has a live sync session (null: not known here, its record's flag says). */
  liveOf(systemKey: string, edge: string): boolean | null { return this.links.get()?.liveOf(systemKey, edge) ?? null; }

  /** Says an edge's template or record changed, or that it went (the sync hub re-plans, on every node). */
  private changed(systemKey: string, edge: string, what: "template" | "deleted" | "record") {
    this.d.signals.emit("edge.changed", { systemKey, edge, what });
  }
}
