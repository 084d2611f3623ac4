// Portals (dashboards ClearBlade's portal app renders) and plugins (their widget and datasource
// code): records a system stores, returns, exports and syncs; Outpost does not serve the portal
// app itself. A record is {name, description, config, ...}; `config` is the whole portal
// definition, sent by ClearBlade's CLI as JSON text and by other clients as an object: it is
// stored as text and always returned as an object. Other fields of a record are kept as sent.
// Developers manage both; a user reads and updates a portal by the role permission `portals`.
import { LEVEL } from "../auth/permissions.ts";
import type { Principal } from "../auth/principal.ts";
import { fail, notFound } from "../core/errors.ts";
import { nowIso } from "../core/ids.ts";
import { checkJsonText, objectBody } from "../core/validate.ts";
import { type PortalKind, type PortalRow, portalsRepo } from "../store/portals.ts";
import type { DomainDeps } from "./deps.ts";
import type { Systems } from "./systems.ts";

export const PORTAL_NAME_MAX = 256;
const DESCRIPTION_MAX = 4000;
/** A record's config and other fields, as JSON text: at most this many bytes each. */
export const PORTAL_CONFIG_MAX = 4 * 1024 * 1024;
/** Records of one kind in a system. */
export const MAX_PORTALS = 1000;
/** A portal made without a config has an empty one, as a new portal's export by ClearBlade shows
 *  (ClearBlade's 2020 CLI cannot export a config whose datasources are an array). */
const DEFAULT_CONFIG = {};
/** Fields the server sets: ignored when a client sends them back. */
const SERVER_FIELDS = new Set(["system_key", "last_updated"]);

const WHAT: Record<PortalKind, string> = { portal: "portal", plugin: "plugin" };

function checkName(v: unknown): string {
  if (typeof v !== "string" || !v.length || v.length > PORTAL_NAME_MAX) throw fail("INVALID_ARGUMENT", `a name must be a string of 1 to ${PORTAL_NAME_MAX} characters`);
  if (/[\u0000-\u001f\u007f/]/.test(v)) throw fail("INVALID_ARGUMENT", "a name may not hold control characters or '/'");
  return v;
}

/** The config as stored: JSON text of an object, from an object or from JSON text. */
function configText(v: unknown): string {
  let text: string;
  if (typeof v === "string") {
    checkJsonText(v);
    let parsed: unknown;
    try { parsed = JSON.parse(v); } catch { throw fail("INVALID_ARGUMENT", "config: a string config must be JSON text of an object"); }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw fail("INVALID_ARGUMENT", "config: a string config must be JSON text of an object");
    text = v;
  } else if (v !== null && typeof v === "object" && !Array.isArray(v)) text = JSON.stringify(v);
  else throw fail("INVALID_ARGUMENT", "config must be an object, or JSON text of one");
  if (text.length > PORTAL_CONFIG_MAX) throw fail("INVALID_ARGUMENT", `config is over ${PORTAL_CONFIG_MAX} bytes`);
  return text;
}

/** RFC 822 with a numeric zone, as ClearBlade shows last_updated ("13 Feb 19 15:21 UTC"). */
function displayTime(iso: string): string {
  const d = new Date(iso);
  const mon = d.toLocaleString("en-US", { month: "short", timeZone: "UTC" });
  const p2 = (n: number) => String(n).padStart(2, "0");
  return `${p2(d.getUTCDate())} ${mon} ${p2(d.getUTCFullYear() % 100)} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())} UTC`;
}

export function portalToWire(r: PortalRow): Record<string, unknown> {
  const out: Record<string, unknown> = { ...(JSON.parse(r.fields) as Record<string, unknown>), name: r.name, description: r.description };
  if (r.config !== null) out.config = JSON.parse(r.config);
  out.last_updated = displayTime(r.updated_at);
  out.system_key = r.system_key;
  return out;
}

export class Portals {
  constructor(private readonly d: DomainDeps, private readonly systems: Systems) {}

  /** The record from a body: fields merged over `base` (an update), name fixed by the caller. */
  private record(kind: PortalKind, systemKey: string, name: string, body: unknown, base?: PortalRow): PortalRow {
    const b = objectBody(body);
    if (b.name !== undefined && b.name !== name) throw fail("INVALID_ARGUMENT", `body: name '${String(b.name)}' is not the ${WHAT[kind]}'s ('${name}'); a ${WHAT[kind]} cannot be renamed`);
    if (b.description === null) b.description = "";
    if (b.description !== undefined && (typeof b.description !== "string" || b.description.length > DESCRIPTION_MAX))
      throw fail("INVALID_ARGUMENT", `description must be a string of up to ${DESCRIPTION_MAX} characters`);
    const fields: Record<string, unknown> = base ? JSON.parse(base.fields) : kind === "portal" ? { type: "custom_v2", namespace: "" } : {};
    for (const [k, v] of Object.entries(b)) if (!["name", "description", "config"].includes(k) && !SERVER_FIELDS.has(k)) fields[k] = v;
    const fieldsText = JSON.stringify(fields);
    if (fieldsText.length > PORTAL_CONFIG_MAX) throw fail("INVALID_ARGUMENT", `the record's fields are over ${PORTAL_CONFIG_MAX} bytes`);
    const config = b.config !== undefined && b.config !== null ? configText(b.config)
      : base ? base.config : kind === "portal" ? JSON.stringify(DEFAULT_CONFIG) : null;
    return {
      system_key: systemKey, name, description: (b.description as string | undefined) ?? base?.description ?? "",
      config, fields: fieldsText, updated_at: nowIso(),
    };
  }

  private async mustGet(systemKey: string, kind: PortalKind, name: string): Promise<PortalRow> {
    const r = await portalsRepo(kind).get(this.d.db, systemKey, name);
    if (!r) throw notFound(WHAT[kind], name);
    return r;
  }

  async list(p: Principal, systemKey: string, kind: PortalKind) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    return (await portalsRepo(kind).list(this.d.db, s.system_key)).map(portalToWire);
  }

  /** Developers; a user or device with read on the portal by name (role permission `portals`). */
  async get(p: Principal, systemKey: string, kind: PortalKind, name: string) {
    const s = kind === "portal" ? await this.systems.access(p, systemKey) : await this.systems.accessAsDeveloper(p, systemKey);
    if (kind === "portal") await this.d.perms.require(p, { kind: "item", itemKind: "portals", name }, LEVEL.READ);
    return portalToWire(await this.mustGet(s.system_key, kind, name));
  }

  async create(p: Principal, systemKey: string, kind: PortalKind, name: unknown, body: unknown) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    const n = checkName(name);
    const r = this.record(kind, s.system_key, n, body);
    await this.d.db.tx(async (tx) => {
      if (await portalsRepo(kind).get(tx, s.system_key, n)) throw fail("ALREADY_EXISTS", `${WHAT[kind]} '${n}' already exists`);
      if ((await portalsRepo(kind).count(tx, s.system_key)) >= MAX_PORTALS) throw fail("INVALID_ARGUMENT", `a system has at most ${MAX_PORTALS} ${WHAT[kind]}s`);
      await portalsRepo(kind).put(tx, r);
      await this.d.changes.record(tx, s.system_key, kind, n, "upsert", r);
    });
    return portalToWire(r);
  }

  /** Changes the fields sent; the others stay. Developers; a user with update on the portal. */
  async update(p: Principal, systemKey: string, kind: PortalKind, name: string, body: unknown) {
    const s = kind === "portal" ? await this.systems.access(p, systemKey) : await this.systems.accessAsDeveloper(p, systemKey);
    if (kind === "portal") await this.d.perms.require(p, { kind: "item", itemKind: "portals", name }, LEVEL.UPDATE);
    const r = await this.d.db.tx(async (tx) => {
      const cur = await portalsRepo(kind).get(tx, s.system_key, name);
      if (!cur) throw notFound(WHAT[kind], name);
      const next = this.record(kind, s.system_key, name, body, cur);
      await portalsRepo(kind).put(tx, next);
      await this.d.changes.record(tx, s.system_key, kind, name, "upsert", next);
      return next;
    });
    return portalToWire(r);
  }

  async remove(p: Principal, systemKey: string, kind: PortalKind, name: string) {
    const s = await this.systems.accessAsDeveloper(p, systemKey);
    await this.d.db.tx(async (tx) => {
      if (!(await portalsRepo(kind).get(tx, s.system_key, name))) throw notFound(WHAT[kind], name);
      await portalsRepo(kind).delete(tx, s.system_key, name);
      await this.d.changes.record(tx, s.system_key, kind, name, "delete", { name });
    });
    return {};
  }
}
